"""torch's process-wide flags that traced code switches inside a graph: grad mode
(`torch.set_grad_enabled(False)` as a statement, grad-mode blocks), deterministic algorithms
(`torch.use_deterministic_algorithms(True, warn_only=...)`) and the default dtype
(`torch.set_default_dtype(torch.float64)`).

Eager code switches such a flag where the call runs: the operations after it, and every read of
the flag, see the new value, and it stays set when the function returns. A trace does the same:
it switches the flag for real, so that later operations and reads (`torch.is_grad_enabled()`,
`torch.are_deterministic_algorithms_enabled()`, `torch.get_default_dtype()`, the dtype of a
factory's result) see it, and records the setter as a graph node at the same point, which the
graph runs when it runs. Each graph ends in the state it started in (a node switching back),
and the transformed code sets the state the traced code left, after the graph and before any
code that runs eagerly (and where the graph raises): a backend that retraces the graph
(AOTAutograd) keeps grad-mode switches but drops other Python calls, and under it the state
after the call would otherwise depend on the backend. Under such a backend the operations
between a deterministic-algorithms switch and the graph's end run in the previous setting (as
torch.compile's); the plain graph (the "eager" backend) switches where the code does. The
operations whose result dtype the default dtype decides are recorded stating it instead
(`graph/pinned_dtypes.py`).

The entry guards cover each flag's value when the frame starts; a read after a switch answers
the switched value, which the trace made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_C = torch._C


@dataclass(frozen=True)
class Flag:
    """One flag: how to read it, and the setter (a graph node target) with its arguments for a
    value."""

    name: str
    read: Callable[[], Any]
    setter: Callable[..., None]
    arguments: Callable[[Any], tuple[tuple, dict[str, Any]]]

    def write(self, value: Any) -> None:
        args, kwargs = self.arguments(value)
        self.setter(*args, **kwargs)


def _deterministic() -> tuple[bool, bool]:
    return _C._get_deterministic_algorithms(), _C._get_deterministic_algorithms_warn_only()


GRAD = Flag("grad mode", torch.is_grad_enabled, _C._set_grad_enabled, lambda on: ((on,), {}))
DETERMINISTIC = Flag(
    "deterministic algorithms",
    _deterministic,
    _C._set_deterministic_algorithms,
    lambda value: ((value[0],), {"warn_only": value[1]}),
)
DEFAULT_DTYPE = Flag("default dtype", torch.get_default_dtype, torch.set_default_dtype, lambda dtype: ((dtype,), {}))
FLAGS = (GRAD, DETERMINISTIC, DEFAULT_DTYPE)
# the graph nodes that only switch a flag (not operations)
SETTERS = frozenset(flag.setter for flag in FLAGS)


def current() -> dict[Flag, Any]:
    """Every flag's value now."""
    return {flag: flag.read() for flag in FLAGS}


def restore(values: dict[Flag, Any]) -> None:
    """Set back the flags whose value differs from `values` (from `current()`)."""
    for flag, value in values.items():
        if flag.read() != value:
            flag.write(value)
