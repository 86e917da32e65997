"""Tell AOTAutograd / Inductor which graph inputs are parameters and buffers (static inputs).

Why: Inductor's CUDA graphs (`mode="reduce-overhead"` / `"max-autotune"`, cudagraph trees) copy
every graph input that is *not* known to be static into the graph's private memory before each
replay. stenograph lifts parameters and buffers into placeholders (docs/design.md), so without
this hint every replay copies all the weights of the model (12 MB for the seed's Transformer
block) and a module that updates a buffer in place (BatchNorm in training) is not captured at all
("mutated inputs"). torch.compile avoids both because AOTAutograd reads a small metadata contract
from the graphs that its capturer hands over:

* `gm.meta["dynamo_compile_id"]` present: the graph carries capture metadata;
* `gm._param_name_to_source`: parameters the capturer kept as attributes (none here: ours are
  placeholders);
* every placeholder has a `_dynamo_source` attribute (may be None);
* a placeholder whose `meta["tensor_dict"]["_dynamo_static_input_type"]` is set is static.

This module fills in that contract for the placeholders whose stenograph source is a module's
`_parameters[...]` or `_buffers[...]` entry, for other parameters (an optimizer's `param_groups`),
for optimizer state (`opt.state[p]`'s moments and step counts, changed in place every step) and
for tensors given torch's `mark_static_address` (a static KV cache).
It does not import or call torch._dynamo. Static inputs are safe to mark: cudagraph trees
re-record when a static input's address changes.

The contract is private to PyTorch and may change, so `mark_static_inputs` checks it with the
installed AOTAutograd's own reader and removes the marks again when the reader does not return
exactly the indices marked (then the graph compiles as before, only without the hint).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..guards.sources import ModuleMemberSource, OptimizerStateSource, Source

__all__ = ["mark_static_inputs", "static_input_indices"]

_MARK = "_dynamo_static_input_type"


def static_input_indices(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[int]:
    """Positions of the placeholders that are module parameters or buffers, parameters reached
    another way (an optimizer's `param_groups`), optimizer state (moments, step counts), or
    tensors given `mark_static_address`."""
    found = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(placeholders):
        source = node.meta.get("stenograph_source")
        example = example_inputs[i] if i < len(example_inputs) else None
        if isinstance(source, ModuleMemberSource) and source.table in ("_parameters", "_buffers"):
            found.append(i)
        elif node.meta.get("static_address") or _in_optimizer_state(source):
            found.append(i)  # torch._dynamo.mark_static_address(t) / optimizer state
        elif isinstance(node.meta.get("example_value"), torch.nn.Parameter):
            found.append(i)
        elif source is None and isinstance(example, torch.nn.Parameter):
            found.append(i)  # a graph built by hand (tests): parameters only
    return found


def _in_optimizer_state(source: Source | None) -> bool:
    while source is not None:
        if isinstance(source, OptimizerStateSource):
            return True
        source = source.base()
    return False


def mark_static_inputs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[int]:
    """Annotate `gm` in place so AOTAutograd treats parameters/buffers as static inputs.

    Returns the indices marked; [] when there are none or the installed PyTorch does not read the
    annotations the way this module expects (the annotations are then removed again).
    """
    indices = static_input_indices(gm, example_inputs)
    if not indices or "dynamo_compile_id" in gm.meta:
        return []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    wanted = set(indices)
    for i, node in enumerate(placeholders):
        node._dynamo_source = None  # type: ignore[attr-defined]
        if i in wanted:
            node.meta.setdefault("tensor_dict", {})[_MARK] = "unguarded"
    gm.meta["dynamo_compile_id"] = None
    gm._param_name_to_source = {}  # type: ignore[attr-defined]
    if _reader_agrees(gm, len(placeholders), indices):
        return indices
    _unmark(gm, placeholders)
    return []


def _reader_agrees(gm: torch.fx.GraphModule, n_inputs: int, indices: list[int]) -> bool:
    try:
        # slow optional import (torch._inductor / AOTAutograd): loaded on first use
        from torch._functorch._aot_autograd.frontend_utils import _try_get_metadata_from_dynamo

        _, static = _try_get_metadata_from_dynamo(gm, {}.keys(), n_inputs, [])
    except Exception:
        return False
    return list(static) == indices


def _unmark(gm: torch.fx.GraphModule, placeholders: list[torch.fx.Node]) -> None:
    gm.meta.pop("dynamo_compile_id", None)
    if "_param_name_to_source" in gm.__dict__:
        del gm._param_name_to_source  # type: ignore[attr-defined]
    for node in placeholders:
        if hasattr(node, "_dynamo_source"):
            del node._dynamo_source  # type: ignore[attr-defined]
        tensor_dict = node.meta.get("tensor_dict")
        if tensor_dict is not None:
            tensor_dict.pop(_MARK, None)
            if not tensor_dict:
                del node.meta["tensor_dict"]
