"""Higher-order torch functions (`torch.cond` and `map` here, `checkpoint` in `checkpoint.py`).

`torch.cond` is recorded with its branches as graphs of their own.
Each branch is traced with the frame's own interpreter into a separate FX graph whose inputs are
the operands, and the call becomes one `torch.ops.higher_order.cond` node reading the two graphs
through `get_attr`, as torch.compile records it (AOTAutograd and Inductor know that op). Tensors a
branch reads besides its operands (a closure's, a module's parameter, a value computed earlier in
the frame) become further operands of both branches, as torch.compile lifts them. A branch that
changes Python state (a list, an attribute, a global) raises `Unsupported`, and the call runs
eagerly at a graph break. A predicate known while tracing (a Python bool or a
static comparison) just inlines the branch it selects, as torch.compile does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch._dispatch.python import enable_python_dispatcher

from ..errors import Unsupported
from .base import Variable
from .constants import is_none
from .containers import ListVariable, TupleVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class HigherOrderVariable(Variable):
    """A torch function with a tracker of its own; at a graph break it is called for real."""

    function: Any = None  # the torch function, set by each subclass

    def __init__(self) -> None:
        self.value_object = type(self).function

    def describe(self) -> str:
        return f"{self.value_object.__module__}.{self.value_object.__name__}"

    def python_type(self) -> type:
        return type(self.value_object)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.value_object, "fn")


class CondVariable(HigherOrderVariable):
    """`torch.cond(pred, true_fn, false_fn, operands)`."""

    function = staticmethod(torch.cond)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        names = ("pred", "true_fn", "false_fn", "operands")
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in bound:
                raise Unsupported(f"torch.cond() with argument {key!r}")
            bound[key] = value
        if set(bound) != set(names):
            raise Unsupported("torch.cond() without pred, true_fn, false_fn and operands")
        pred, operands_var = bound["pred"], bound["operands"]
        if not isinstance(operands_var, (TupleVariable, ListVariable)):
            raise Unsupported("torch.cond() operands that are not a tuple or list")
        operands = operands_var.unpack(frame)
        if pred.is_constant():
            chosen = bound["true_fn"] if pred.as_constant() else bound["false_fn"]
            return chosen.call(frame, operands, {})
        if not isinstance(pred, (TensorVariable, SymNodeVariable)):
            raise Unsupported(f"torch.cond() predicate {pred.describe()}")
        if isinstance(pred, TensorVariable) and pred.fake.numel() != 1:
            # eager's RuntimeError prints the predicate's values: the call runs where they exist
            raise Unsupported(f"torch.cond() predicate {pred.describe()} is not a single element (eager raises)")
        if not all(isinstance(o, TensorVariable) for o in operands):
            raise Unsupported("torch.cond() operands that are not all tensors")
        fakes = [o.fake for o in operands]  # type: ignore[attr-defined]
        bodies = [
            trace_body(frame, lambda inner, key=key: bound[key].call(frame, inner, {}), fakes, "a torch.cond() branch")
            for key in ("true_fn", "false_fn")
        ]
        (true_gm, false_gm), free = close_bodies(bodies)
        output = frame.output
        fakes += [node.meta["example_value"] for node in free]
        try:
            with output.fake_mode, enable_python_dispatcher():
                fake = torch.ops.higher_order.cond(pred.fake, true_gm, false_gm, tuple(fakes))  # type: ignore[attr-defined]
        except Exception as e:
            raise Unsupported(f"torch.cond() branches do not agree: {type(e).__name__}: {e}") from e
        node = output.graph.create_node(
            "call_function",
            torch.ops.higher_order.cond,
            (
                pred.node,  # type: ignore[attr-defined]
                output.add_submodule(true_gm, "cond_true"),
                output.add_submodule(false_gm, "cond_false"),
                (*[o.node for o in operands], *free),  # type: ignore[attr-defined]
            ),
            {},
        )
        result = output.wrap_result(node, fake, "torch.cond()")
        return result.unpack(frame)[0] if bodies[0].single else result


class MapVariable(HigherOrderVariable):
    """`torch.ops.higher_order.map_impl(f, xs, args)`, which torch's `map`
    (`functorch.experimental.control_flow.map`, inlined) calls with its flattened arguments: `f`
    is traced once, on the first slices of the tensors `xs` and on `args`, into a graph of its
    own, and the call is one `map_impl` node reading it, as torch.compile records it. Tensors the
    body reads besides its arguments become further `args`."""

    function = staticmethod(torch.ops.higher_order.map_impl)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs or len(args) != 3 or not all(isinstance(a, (ListVariable, TupleVariable)) for a in args[1:]):
            raise Unsupported("map_impl() with arguments other than a body and two lists of tensors")
        xs, rest = args[1].unpack(frame), args[2].unpack(frame)
        if not xs or not all(isinstance(v, TensorVariable) for v in xs + rest):
            raise Unsupported("map() over arguments that are not all tensors")
        output = frame.output
        with output.fake_mode:
            slices = [torch.select_copy(x.fake, 0, 0) for x in xs]  # type: ignore[attr-defined]
        fakes = slices + [r.fake for r in rest]  # type: ignore[attr-defined]
        body = trace_body(frame, lambda inner: args[0].call(frame, inner, {}), fakes, "a map() body")
        (body_gm,), free = close_bodies([body])
        extra = [*[r.fake for r in rest], *[node.meta["example_value"] for node in free]]  # type: ignore[attr-defined]
        try:
            with output.fake_mode, enable_python_dispatcher():
                fake = torch.ops.higher_order.map_impl(body_gm, [x.fake for x in xs], extra)  # type: ignore[attr-defined]
        except Exception as e:
            raise Unsupported(f"map() body cannot run on the slices: {type(e).__name__}: {e}") from e
        node = output.graph.create_node(
            "call_function",
            torch.ops.higher_order.map_impl,
            (
                output.add_submodule(body_gm, "map_body"),
                [x.node for x in xs],  # type: ignore[attr-defined]
                [*[r.node for r in rest], *free],  # type: ignore[attr-defined]
            ),
            {},
        )
        result = output.wrap_result(node, tuple(fake), "map()")
        return result.unpack(frame)[0] if body.single else result


@dataclasses.dataclass
class Body:
    """A function traced into a graph of its own (see `trace_body`)."""

    graph: torch.fx.Graph
    single: bool  # it returned one tensor (not a tuple or list of them)
    free: list[torch.fx.Node]  # nodes of the frame's graph it uses, in order of first use
    # the subgraphs its own higher-order ops read (`get_attr`: a cond nested in a branch)
    submodules: dict[str, torch.nn.Module]


def trace_body(
    frame: Frame,
    call: Callable[[list[Variable]], Variable],
    fakes: list[Any],
    what: str,
    *,
    bare: bool = False,
    numbers: bool = False,
    nones: bool = False,
    judged: bool = False,
) -> Body:
    """`call(tensors)` on trackers of tensors like `fakes` (a function called with them), traced
    into a graph of its own whose first inputs they are (`bare`: a single tensor result is
    returned as itself, not as a 1-tuple). Tensors it
    reads from elsewhere (a closure's, a parameter, a value computed before) are left as nodes of
    the frame's graph; `close_bodies` makes them inputs. `numbers`: symbolic numbers the frame
    takes as inputs may be read too (a body run as a Python callable, not by a torch operator).
    `nones`: results may also be None (an autograd.Function backward's missing gradients).
    `judged`: `call` judges its own Python effects (refused here otherwise)."""
    output = frame.output
    outer = output.graph
    effects_before = output.side_effects.mark()
    graph = type(outer)(output.active)
    output.graph = graph
    try:
        inner = []
        for i, fake in enumerate(fakes):
            node = graph.placeholder(f"arg{i}")
            node.meta["example_value"] = fake
            inner.append(TensorVariable(node, fake))
        result = call(inner)
        if not judged and output.side_effects.changed_since(effects_before):
            raise Unsupported(f"{what} changes Python state")
        single = isinstance(result, TensorVariable)
        items = [result] if single else result.unpack(frame)
        if not items or not all(isinstance(item, TensorVariable) or (nones and is_none(item)) for item in items):
            raise Unsupported(f"{what} returns something other than tensors")
        nodes = [item.node if isinstance(item, TensorVariable) else None for item in items]
        graph.output(nodes[0] if bare and single else tuple(nodes))
    finally:
        output.graph = outer
    free = outer_nodes(graph)
    for node in free:
        value = node.meta.get("example_value")
        if numbers and node.op == "placeholder" and isinstance(value, (torch.SymInt, torch.SymFloat)):
            continue
        if not isinstance(value, torch.Tensor) or any(isinstance(s, torch.SymInt) for s in value.shape):
            # (a symbolic size read in the body would be cached on the outer tensor's tracker)
            raise Unsupported(f"{what} uses {node.name}, which is not a tensor of static shape")
    nested = {n.target: output.submodules[n.target] for n in graph.nodes if n.op == "get_attr"}
    return Body(graph, single, free, nested)  # type: ignore[arg-type]


def outer_nodes(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """Nodes of other graphs that `graph`'s nodes use, in order of first use."""
    return list(dict.fromkeys(used for node in graph.nodes for used in node.all_input_nodes if used.graph is not graph))


def close_bodies(bodies: list[Body]) -> tuple[list[torch.fx.GraphModule], list[torch.fx.Node]]:
    """Every body takes the tensors any of them reads from the frame's graph as further inputs,
    after its own (bodies of one op must agree on their inputs); those nodes, in that order."""
    free = list(dict.fromkeys(node for body in bodies for node in body.free))
    modules = []
    for body in bodies:
        placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
        first = next(iter(body.graph.nodes))
        for i, outer in enumerate(free):
            where = body.graph.inserting_after(placeholders[-1]) if placeholders else body.graph.inserting_before(first)
            with where:
                inner = body.graph.placeholder(f"free{i}")
            inner.meta["example_value"] = outer.meta["example_value"]
            placeholders.append(inner)
            for user in [u for u in outer.users if u.graph is body.graph]:
                user.replace_input_with(outer, inner)
        modules.append(torch.fx.GraphModule(body.submodules or torch.nn.Module(), body.graph))
    return modules, free
