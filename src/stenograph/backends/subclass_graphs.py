"""Graphs carrying tensor subclasses run as captured under the AOTAutograd-based backends.

stenograph records operations on a tensor subclass instance (an input of a class of the user's,
one made by `as_subclass` in the frame) as plain graph operations, and the `eager` backend runs
them on the real instances: their `__torch_function__` runs then, as it does eagerly. AOTAutograd
(`aot_eager`, Inductor) re-traces the graph to ATen with plain fake tensors and then fails on the
subclass instances at run time (torch.compile fails the same way on such graphs). For them the
graph runs as captured instead, with the same results as eager; tensor subclasses that follow
PyTorch's traceable wrapper protocol (`__tensor_flatten__`, as DTensor) are AOTAutograd's own
and compile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..graph.output_graph import MADE_SUBCLASS_ATTR

_log = logging.getLogger("stenograph.backends")

_MAKERS = frozenset({"as_subclass", "_make_subclass", torch.Tensor.as_subclass, torch.Tensor._make_subclass})


def _users_subclass(cls: type) -> bool:
    """A tensor class of the user's: torch's own (Parameter, Buffer, and the FakeTensor examples
    a DDP split hands each piece's compile) are plain tensors to AOTAutograd."""
    return cls.__module__.partition(".")[0] != "torch"


def subclass_reason(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str | None:
    """Why AOTAutograd cannot compile `gm` (a tensor subclass among its inputs, or made in
    it), or None."""
    for value in example_inputs:
        if (
            isinstance(value, torch.Tensor)
            and _users_subclass(type(value))
            and not is_traceable_wrapper_subclass(value)
        ):
            return f"an input is a {type(value).__qualname__} (a tensor subclass)"
    for node in gm.graph.nodes:
        makes = node.target in _MAKERS or getattr(node.target, MADE_SUBCLASS_ATTR, None) is not None
        if node.op in ("call_function", "call_method") and makes:
            return "the graph makes a tensor subclass instance"
    return None


def unless_subclasses(
    compile_fn: Callable[[torch.fx.GraphModule, list[Any]], Any], gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Any:
    """`compile_fn(gm, example_inputs)`, or `gm` as captured where the graph carries subclasses."""
    reason = subclass_reason(gm, example_inputs)
    if reason is None:
        return compile_fn(gm, example_inputs)
    _log.info("graph runs as captured, not through AOTAutograd: %s", reason)
    return gm.forward
