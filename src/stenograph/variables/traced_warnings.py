"""`warnings.warn(...)` called in traced code (torch's deprecated helpers call it, such as
`guard_size_oblivious`): traced, and issued by the transformed code after the graph.

Eager issues the warning where the call runs, at the location its `stacklevel` names, and the
filters decide what becomes of it: shown (once per location under "default", through the
registry of that location's module), ignored, or raised. The trace works out the location,
which is one of the traced frames for a `stacklevel` no higher than their number (each frame
above the first one reached by a plain call, as eager's stack has it; a frame entered another
way, a module's forward or a generator's body, leaves the rest to a graph break) and else a
frame above the compiled function, found when the warning is issued. The transformed code then
issues it with `warn_at`, as a graph break would, so the text, category, location, registry and
filters are eager's. The warning follows the graph instead of preceding the operations after the
call: the same for everything outside the graph (side effects are replayed after it too), except
where the warning would raise. Where the filters could make it an error, or a traced
`catch_warnings` block (whose filters and record list the replay would miss) is open, the call is
a graph break; the entry guards check that the filters are those of the trace.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ..errors import BreakKind, Unsupported
from .base import Variable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

__all__ = ["trace_warn", "warning_filters"]

_PARAMETERS = ("message", "category", "stacklevel", "source")


def warning_filters() -> tuple:
    """The warning filters now (the guarded state)."""
    return tuple(warnings.filters)


def trace_warn(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> None:
    """Record `warnings.warn(*args, **kwargs)` called in `frame`, to be issued after the graph."""
    if len(args) > len(_PARAMETERS) or set(kwargs) - set(_PARAMETERS[len(args) :]):
        raise Unsupported("warnings.warn() with arguments other than message, category, stacklevel, source")
    given = dict(zip(_PARAMETERS, args)) | kwargs
    if "message" not in given or not all(v.is_constant() for v in given.values()):
        raise Unsupported("warnings.warn() with arguments that are not constants", kind=BreakKind.UNTRACED_CALL)
    message, category, stacklevel, source = (
        given[name].as_constant() if name in given else default
        for name, default in zip(_PARAMETERS, (None, None, 1, None))
    )
    if isinstance(message, Warning):
        category = type(message)
    elif category is None:
        category = UserWarning
    if not (isinstance(category, type) and issubclass(category, Warning)):
        raise Unsupported("warnings.warn() with a category that is not a Warning class: eager raises TypeError")
    if type(stacklevel) is not int or stacklevel < 1 or source is not None:
        raise Unsupported("warnings.warn() with a stacklevel below 1 or a source")
    output = frame.output
    if output.warning_blocks:
        raise Unsupported("warnings.warn() inside a traced warnings.catch_warnings() block")
    text = str(message)
    for action, pattern, kind, _, _ in warnings.filters:
        if action == "error" and issubclass(category, kind) and (pattern is None or pattern.match(text)):
            raise Unsupported(f"warnings.warn() of a {category.__name__} the warning filters may make an error")
    if warnings.defaultaction == "error":
        raise Unsupported("warnings.warn() while the default warning action is 'error'")
    where = _location(frame, stacklevel)
    if not output.side_effects.warnings:
        output.guards.state_query(warning_filters, "warning filters", warning_filters())
    output.side_effects.warning_issued((*where, message, category))


def _location(frame: Frame, stacklevel: int) -> tuple[str, int, dict[str, Any], int]:
    """(file, line, module globals, level above them) of the frame `stacklevel` names: a traced
    frame (level 1), or the compiled function's with the levels left above it."""
    target = frame
    for _ in range(stacklevel - 1):
        if target.parent is None:
            break
        if not target.called_directly:
            raise Unsupported(
                f"warnings.warn(stacklevel={stacklevel}) passes {target.code.co_qualname}, "
                "which eager's stack may hold differently"
            )
        target = target.parent
    level = stacklevel - (frame.depth - target.depth)
    return target.code.co_filename, target.line, target.f_globals, level
