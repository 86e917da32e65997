"""Python exceptions raised by the traced program, unwound through the symbolic frames.

A `raise`, a failed dict lookup or an exhausted `next()` in the traced code is not a problem of
stenograph's: it is program behaviour. It travels as `TracedException` (defined with the trackers
that raise it, `variables/exceptions.py`) up the chain of inlined frames; each frame consults its
code's exception table, as CPython does, and jumps to the handler when one covers the
instruction. An exception that leaves the compiled frame itself becomes `Unsupported`, so the
instruction runs eagerly and raises there.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from ..bytecode.instructions import ExceptionEntry, decoded
from ..errors import Unsupported
from ..variables.base import Variable
from ..variables.exceptions import LastiVariable, TracedException
from ..variables.user_classes import NewObjectVariable

if TYPE_CHECKING:
    from .frame import Frame


def exception_value(frame: Frame, raised: Variable) -> Variable:
    """What `raise X` raises: an instance, or a new instance when X is a class."""
    if raised.is_constant() and isinstance(raised.as_constant(), type):
        cls = raised.as_constant()
        if issubclass(cls, BaseException):
            return frame.instantiate(cls, [], {})
    if isinstance(raised, NewObjectVariable) and issubclass(raised.cls, BaseException):
        return raised
    raise Unsupported(f"raise of {raised.describe()}, which is not a traced exception")


def handler_for(code: types.CodeType, offset: int) -> ExceptionEntry | None:
    """The exception-table entry covering the instruction at `offset`, if any."""
    return decoded(code).handler_at(offset)


def unwind_to_handler(frame: Frame, exc: TracedException) -> bool:
    """Jump to the handler of the current instruction, as CPython's unwinding does."""
    if frame.current is None:
        return False
    entry = handler_for(frame.code, frame.current.offset)
    if entry is None:
        return False
    del frame.stack[entry.depth :]
    if entry.lasti:
        frame.push(LastiVariable(frame.current.offset))
    frame.push(exc.value)
    frame.jump_to(entry.target)
    return True


def uncaught(exc: TracedException) -> Unsupported:
    """The compiled frame let a traced exception out: run the instruction eagerly instead."""
    refusal = Unsupported(
        f"{exc.value.describe()} raised while tracing and not caught in the compiled function",
        hint="the exception is raised by running the code eagerly",
    )
    refusal.breaks_inside_loops = True
    return refusal


def matches(value: Variable, match: Variable) -> bool:
    """`except <match>` for the exception tracker `value` (CHECK_EXC_MATCH)."""
    classes = match.as_constant()
    if not isinstance(classes, tuple):
        classes = (classes,)
    if not all(isinstance(c, type) and issubclass(c, BaseException) for c in classes):
        raise Unsupported(f"except clause with {match.describe()}")
    return issubclass(value.python_type(), classes)
