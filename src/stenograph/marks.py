"""Marks the user puts on functions, read by the trackers: `disable`, `allow_in_graph`,
`graph_break` and `is_compiling`.

A leaf module: `api` sets the marks and re-exports these functions; the tracing layer reads them
here, so it never imports `api`. The allow-in-graph set is a user decision, like `config`, and
survives `reset()` (which `explain()` calls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DISABLED_ATTR = "__stenograph_disabled__"

_allowed_in_graph: set[Callable] = set()


def mark_disabled(fn: Callable) -> None:
    setattr(fn, DISABLED_ATTR, True)


def is_disabled(fn: Any) -> bool:
    return bool(getattr(fn, DISABLED_ATTR, False))


def allow_in_graph(fn: Callable) -> Callable:
    """Record calls of `fn` as one opaque graph node instead of tracing into it.

    `fn` must take and return tensors (and Python constants) and run on fake tensors.
    """
    if not callable(fn):
        raise TypeError(f"allow_in_graph() needs a callable, got {type(fn).__qualname__}")
    _allowed_in_graph.add(fn)
    return fn


def is_allowed_in_graph(fn: Any) -> bool:
    try:
        return fn in _allowed_in_graph
    except TypeError:
        return False


def graph_break() -> None:
    """Forces a graph break where it is called (runs as a no-op in eager code)."""
    return None


def is_compiling() -> bool:
    """True while stenograph traces (folded to True inside graphs); False when code runs."""
    return False
