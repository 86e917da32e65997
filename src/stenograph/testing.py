"""Helpers for testing stenograph and code compiled with it.

The counting backends observe what capture hands to a backend: how many graphs (one per captured
frame or graph-break segment) and how many operations in them. Tests assert on those numbers
because "the result is right" alone cannot tell one graph from three graphs split by breaks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.fx

from .backends.registry import CompilerFn, lookup_backend

__all__ = [
    "CompileCounter",
    "CompileCounterWithBackend",
    "EagerAndRecordGraphs",
    "count_ops",
    "same",
]

_OP_KINDS = frozenset({"call_function", "call_method", "call_module"})


def count_ops(gm: torch.fx.GraphModule) -> int:
    """Number of operation nodes in `gm` (placeholders, attribute reads and outputs excluded)."""
    return sum(1 for node in gm.graph.nodes if node.op in _OP_KINDS)


class CompileCounter:
    """A backend that counts the graphs and operations it is given and runs each graph as is.

    `frame_count` is the number of graphs, `op_count` the sum of their operation nodes, `graphs`
    the GraphModules themselves, in the order received.
    """

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def _record(self, gm: torch.fx.GraphModule) -> None:
        self.frame_count += 1
        self.op_count += count_ops(gm)
        self.graphs.append(gm)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self._record(gm)
        return gm.forward

    def clear(self) -> None:
        """Forget everything counted so far."""
        self.frame_count = 0
        self.op_count = 0
        self.graphs.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(frame_count={self.frame_count}, op_count={self.op_count})"


class CompileCounterWithBackend(CompileCounter):
    """Counts like `CompileCounter`, then compiles each graph with a real backend.

    The backend is resolved when the counter is made, so a misspelt name fails in the test's
    set-up rather than inside the first compiled call.
    """

    def __init__(self, backend: str | CompilerFn) -> None:
        super().__init__()
        self.backend = backend
        self._compiler = lookup_backend(backend)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self._record(gm)
        return self._compiler(gm, example_inputs)


class EagerAndRecordGraphs:
    """A backend that keeps each graph in `graphs` and runs it as is."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        return gm.forward


def same(
    a: Any,
    b: Any,
    tol: float = 1e-5,
    *,
    equal_nan: bool = True,
    exact_dtype: bool = True,
) -> bool:
    """True when `a` and `b` are the same nested structure holding equal (close) values.

    Tensors must agree in shape, device and (with `exact_dtype`) dtype; floating and complex ones
    are compared with `allclose(rtol=tol, atol=tol)`, others exactly. Lists and tuples (named
    tuples by their type) and dicts (by keys) are compared element-wise; Python floats with the
    same tolerance; everything else with `==`. As torch._dynamo's `same`, a Python number `b`
    against a tensor `a` is a tensor of `a`'s shape filled with it. Strict about structure on
    purpose: a compiled function returning a list where eager returns a tuple is a bug, not a
    rounding difference.
    """
    if isinstance(a, torch.Tensor) and type(b) in (int, float, bool):
        # torch._dynamo's `same` takes a Python number for an expected tensor as a tensor of it
        # (`same(torch.tensor([6]), 6)` holds): every element must equal it, dtype included
        b = torch.tensor(b, device=a.device).expand(a.shape)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        return _same_tensor(a, b, tol, equal_nan, exact_dtype)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if isinstance(a, list) != isinstance(b, list) or isinstance(a, tuple) != isinstance(b, tuple):
            return False
        if (hasattr(a, "_fields") or hasattr(b, "_fields")) and type(a) is not type(b):
            return False
        return len(a) == len(b) and all(
            same(x, y, tol, equal_nan=equal_nan, exact_dtype=exact_dtype) for x, y in zip(a, b)
        )
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or set(a) != set(b):
            return False
        return all(same(a[k], b[k], tol, equal_nan=equal_nan, exact_dtype=exact_dtype) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool):
            return a == b
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return False
        if math.isnan(a) or math.isnan(b):
            return equal_nan and math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    return type(a) is type(b) and a == b


def _same_tensor(a: torch.Tensor, b: torch.Tensor, tol: float, equal_nan: bool, exact_dtype: bool) -> bool:
    if a.shape != b.shape or a.device != b.device:
        return False
    if exact_dtype and a.dtype != b.dtype:
        return False
    a, b = a.detach(), b.detach()
    if a.is_sparse or b.is_sparse:
        a, b = a.to_dense(), b.to_dense()
    if a.dtype != b.dtype:
        common = torch.promote_types(a.dtype, b.dtype)
        a, b = a.to(common), b.to(common)
    if a.is_floating_point() or a.is_complex():
        return bool(torch.allclose(a, b, rtol=tol, atol=tol, equal_nan=equal_nan))
    return bool(torch.equal(a, b))
