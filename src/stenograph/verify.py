"""`config.verify_correctness`: check a newly compiled graph against eager execution once.

On its first call the compiled graph and the captured FX graph (run as plain PyTorch) get the same
inputs; when their outputs differ the call raises `VerificationFailed` naming the backend and the
first differing output. Inputs are cloned for the eager run so in-place graphs are compared fairly.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from .errors import StenographError


class VerificationFailed(StenographError):
    """A backend's compiled graph returned something other than eager execution of the graph."""


def reference_copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` with a graph of its own (its parameters and submodules shared): what eager execution
    of the captured graph means, whatever a backend does to the graph module it is handed."""
    return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph), class_name=type(gm).__name__)


def verify_on_first_call(gm: torch.fx.GraphModule, compiled: Callable, backend_name: str) -> Callable:
    state = {"verified": False}

    def checked(*args: Any) -> Any:
        if state["verified"]:
            return compiled(*args)
        state["verified"] = True
        with torch.no_grad():
            cloned = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
            expected = gm.forward(*cloned)
        actual = compiled(*args)
        _compare(expected, actual, backend_name)
        return actual

    return checked


def _compare(expected: Any, actual: Any, backend_name: str) -> None:
    flat_expected = _flatten(expected)
    flat_actual = _flatten(actual)
    if len(flat_expected) != len(flat_actual):
        raise VerificationFailed(
            f"backend {backend_name!r} returned {len(flat_actual)} outputs, eager {len(flat_expected)}"
        )
    for i, (e, a) in enumerate(zip(flat_expected, flat_actual)):
        if isinstance(e, torch.Tensor):
            ok = (
                isinstance(a, torch.Tensor)
                and e.shape == a.shape
                and e.dtype == a.dtype
                and torch.allclose(e, a.detach(), rtol=1e-4, atol=1e-5, equal_nan=True)
            )
        else:
            ok = e == a
        if not ok:
            raise VerificationFailed(
                f"backend {backend_name!r} differs from eager at output {i}: expected {_short(e)}, got {_short(a)}"
            )


def _flatten(value: Any) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor(shape={list(value.shape)}, dtype={value.dtype}, first={value.flatten()[:3].tolist()})"
    return repr(value)[:80]
