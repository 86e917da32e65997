"""Autograd calls with `create_graph=True`: the graph before them must be differentiable twice.

`torch.autograd.grad(y, x, create_graph=True)` (a gradient penalty, a Hessian-vector product)
runs eagerly at a graph break, and builds the gradient's own autograd graph through the backward
of the graph that computed `y`. AOTAutograd compiles a backward that cannot be differentiated
again: the outer `backward()` would fail. Tracing marks such a break, and the graph before it
then runs as captured (its backward is autograd's own) instead of going to the backend.
A graph compiled in an earlier frame cannot be helped this way: AOTAutograd's error stays loud.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .base import Variable

__all__ = ["creates_graph"]

# the autograd entry points that take create_graph, with the signature their arguments bind to
_SIGNATURES = {
    fn: inspect.signature(fn) for fn in (torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward)
}


def creates_graph(fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> bool:
    """Whether calling `fn(*args, **kwargs)` may differentiate with `create_graph=True` (a value
    unknown while tracing counts as True)."""
    signature = _SIGNATURES.get(fn)
    if signature is None:
        return False
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return False  # the call fails eagerly with Python's own error
    flag = bound.arguments.get("create_graph")
    if flag is None:
        return False
    return not flag.is_constant() or bool(flag.as_constant())
