"""Activation checkpointing: `torch.utils.checkpoint.checkpoint(fn, *args, ...)`.

A checkpoint computes what `fn(*args)` computes, with the same gradients; it trades memory for
running `fn` again in backward. Its function is inlined, and every operation the region records
is tagged in `node.meta` the way torch.compile's `tag_activation_checkpoint` tags the ATen ops it
traces: `"recompute"` (the `PREFER_RECOMPUTE` policy of plain checkpointing) and `"ac_graph_id"`
(one number per region, increasing, so that of two regions in a row the boundary tensor is saved).
AOTAutograd copies these keys from each captured node onto the ATen nodes it becomes, and its
partitioners (default and min-cut) then keep only the region's inputs for backward and recompute
the rest there; random ops recomputed are replayed with the forward's RNG state (the partitioner
functionalises them), as eager's `preserve_rng_state=True` does. The `eager` backend runs the
graph as recorded: the activations are kept.

Both variants are captured. `use_reentrant=True` runs `fn` without grad and differentiates it in
a backward of its own: the same gradients through `.backward()`, where at least one tensor
argument requires grad and the results are tensors the apply marks as requiring grad; other
cases (no argument requiring grad, where eager warns; an argument returned as it is; outputs in
containers or not requiring grad) run eagerly at a graph break. So do calls whose meaning the
region cannot hold: `use_reentrant` not given (eager warns), a `context_fn` (selective
checkpointing decides per ATen op), `preserve_rng_state=False` (eager's recompute then draws new
random numbers), keyword arguments with the reentrant variant (eager refuses them), and a function
with Python effects (eager runs it again in backward).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch.utils.checkpoint import CheckpointPolicy, noop_context_fn

from ..errors import Unsupported
from .base import Variable
from .containers import TupleVariable
from .higher_order import HigherOrderVariable
from .tensor import TensorVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

_OPERATIONS = ("call_function", "call_method", "call_module")
# options of checkpoint itself that do not change what is computed (checks and early stopping
# of the recompute, error messages); the rest of the keyword arguments go to the function
_NEUTRAL_OPTIONS = ("determinism_check", "early_stop")


class CheckpointVariable(HigherOrderVariable):
    """`torch.utils.checkpoint.checkpoint`."""

    function = staticmethod(torch.utils.checkpoint.checkpoint)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        options = dict(kwargs)
        reentrant = _option(options, "use_reentrant", None)
        if reentrant is None:
            raise Unsupported(
                "torch.utils.checkpoint.checkpoint without use_reentrant: eager warns and picks a variant",
                hint="pass use_reentrant=False (or True) explicitly",
            )
        if _option(options, "context_fn", noop_context_fn) is not noop_context_fn:
            raise Unsupported("torch.utils.checkpoint.checkpoint with a context_fn (a policy per ATen op)")
        if not _option(options, "preserve_rng_state", True):
            raise Unsupported(
                "torch.utils.checkpoint.checkpoint with preserve_rng_state=False: eager's recompute draws new "
                "random numbers, the compiled recompute would replay the forward's"
            )
        debug = _option(options, "debug", False)  # error messages only, refused by the reentrant variant
        for name in _NEUTRAL_OPTIONS:
            options.pop(name, None)
        if not args:
            raise Unsupported("torch.utils.checkpoint.checkpoint without a function")
        fn, inputs = args[0], args[1:]
        if reentrant and (options or debug):
            raise Unsupported("checkpoint(use_reentrant=True) with keyword arguments or debug (eager refuses them)")
        if reentrant and not any(isinstance(a, TensorVariable) and a.fake.requires_grad for a in inputs):
            raise Unsupported("checkpoint(use_reentrant=True) with no argument requiring grad: eager warns")
        output = frame.output
        effects_before = output.side_effects.mark()
        graph = output.graph
        nodes_before = set(graph.nodes)
        result = fn.call(frame, inputs, options)
        if output.side_effects.changed_since(effects_before):
            raise Unsupported("a checkpointed function changes Python state (eager runs it again in backward)")
        if reentrant and torch.is_grad_enabled():
            _check_reentrant_outputs(frame, result, inputs)
        _tag_for_recompute(graph, nodes_before)
        return result


def _option(options: dict[str, Variable], name: str, default: object) -> object:
    """Take `name` out of the call's keyword arguments: its value, known while tracing."""
    var = options.pop(name, None)
    if var is None:
        return default
    if not var.is_constant() and var.value_object is None:
        raise Unsupported(f"torch.utils.checkpoint.checkpoint with {name} not known while tracing")
    return var.as_constant() if var.is_constant() else var.value_object


def _check_reentrant_outputs(frame: Frame, result: Variable, inputs: list[Variable]) -> None:
    """The reentrant variant returns what an autograd.Function's apply returns: new tensors, each
    floating one requiring grad. The inlined region gives the same only where that already holds."""
    items = result.unpack(frame) if isinstance(result, TupleVariable) else [result]
    for item in items:
        if not isinstance(item, TensorVariable):
            raise Unsupported(f"checkpoint(use_reentrant=True) returning {item.describe()}")
        if any(item is a for a in inputs):
            raise Unsupported("checkpoint(use_reentrant=True) returning one of its arguments (eager returns a view)")
        if item.fake.is_floating_point() and not item.fake.requires_grad:
            raise Unsupported("checkpoint(use_reentrant=True) returning a tensor eager marks as requiring grad")


def _tag_for_recompute(graph: torch.fx.Graph, before: set[torch.fx.Node]) -> None:
    """Mark the operations the region recorded for the partitioner to recompute in backward."""
    region = 1 + max((node.meta.get("ac_graph_id", 0) for node in graph.nodes), default=0)
    for node in graph.nodes:
        if node not in before and node.op in _OPERATIONS:
            node.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
            node.meta["ac_graph_id"] = region
