"""Marks the user puts on functions, read by the trackers: `disable`, `allow_in_graph`,
`disallow_in_graph`, `assume_constant_result`, `graph_break` and `is_compiling`.

A leaf module: `api` sets the marks and re-exports these functions; the tracing layer reads them
here, so it never imports `api`. The allow- and disallow-in-graph sets are user decisions, like
`config`, and survive `reset()` (which `explain()` calls), as torch's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DISABLED_ATTR = "__stenograph_disabled__"
# torch's mark for the same thing (torch.compiler.disable, torch._dynamo.disable, and torch's
# internal `_disable_dynamo` wrappers once they have run, e.g. DDP's `_inside_ddp_forward`)
TORCH_DISABLED_ATTR = "_torchdynamo_disable"
CONSTANT_RESULT_ATTR = "__stenograph_constant_result__"

_allowed_in_graph: set[Callable] = set()
_disallowed_in_graph: set[Callable] = set()


def mark_disabled(fn: Callable, reason: str | None = None) -> None:
    """Mark `fn` to run eagerly; `reason` (the user's words) is shown where its call breaks."""
    setattr(fn, DISABLED_ATTR, reason or True)


def disabled_reason(fn: Any) -> str | None:
    """The reason given to `disable(fn, reason=...)`, if any."""
    reason = getattr(fn, DISABLED_ATTR, None)
    return reason if isinstance(reason, str) else None


def is_disabled(fn: Any) -> bool:
    return bool(getattr(fn, DISABLED_ATTR, False)) or is_torch_disabled(fn)


def is_torch_disabled(fn: Any) -> bool:
    """Whether torch marked `fn` as not to be traced by compilers."""
    return getattr(fn, TORCH_DISABLED_ATTR, False) is True


def allow_in_graph(fn: Any) -> Any:
    """Record calls of `fn` as one opaque graph node instead of tracing into it (a list or
    tuple marks each item).

    `fn` must take and return tensors (and Python constants) and run on fake tensors.
    """
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(f) for f in fn]
    if not callable(fn):
        raise TypeError(f"allow_in_graph() needs a callable, got {type(fn).__qualname__}")
    _disallowed_in_graph.discard(fn)
    _allowed_in_graph.add(fn)
    return fn


def is_allowed_in_graph(fn: Any) -> bool:
    try:
        return fn in _allowed_in_graph
    except TypeError:
        return False


def disallow(fn: Callable) -> None:
    """Calls of `fn` break the graph (`api.disallow_in_graph` checks that `fn` is a graph op)."""
    _allowed_in_graph.discard(fn)
    _disallowed_in_graph.add(fn)


def is_disallowed_in_graph(fn: Any) -> bool:
    try:
        return fn in _disallowed_in_graph
    except TypeError:
        return False


def assume_constant_result(fn: Callable) -> Callable:
    """Call `fn` once while tracing and use its result as a constant of the graph.

    Nothing about the result is guarded (as with torch's): a later call that would return
    something else still gets the value seen while tracing, until the function recompiles for
    another reason or `reset()`. Arguments must be constants (or objects read from the frame,
    guarded by identity); the result must be a Python constant (numbers, strings, bools, None,
    dtypes, devices and tuples of them).
    """
    if isinstance(fn, type) or not callable(fn):
        raise TypeError(f"assume_constant_result() needs a function, got {type(fn).__qualname__}")
    target = getattr(fn, "__func__", fn)  # a bound method: mark its function
    try:
        setattr(target, CONSTANT_RESULT_ATTR, True)
    except AttributeError:
        raise TypeError(f"assume_constant_result() needs a Python function; {fn!r} takes no attributes") from None
    return fn


def is_constant_result(fn: Any) -> bool:
    return getattr(fn, CONSTANT_RESULT_ATTR, False) is True


def graph_break() -> None:
    """Forces a graph break where it is called (runs as a no-op in eager code)."""
    return None


def is_compiling() -> bool:
    """True while stenograph traces (folded to True inside graphs); False when code runs."""
    return False
