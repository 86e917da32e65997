"""Python exceptions raised by the traced program, as trackers raise them.

A `raise`, a failed dict lookup or an exhausted `next()` in the traced code is not a problem of
stenograph's: it is program behaviour. It travels as `TracedException` (carrying the exception's
tracker) up the chain of inlined frames, where the interpreter unwinds it (`interpreter/
exceptions.py`). Trackers raise it for errors the traced program would see (`raise_new`,
`raise_python_error`); the exception object is made by the frame (`Frame.new_exception`, calling
the class as the traced program would: that needs the trackers of every later module).
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import BreakKind, StenographError, Unsupported
from .base import Variable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class TracedException(Exception):
    """The traced program raised `value` (a tracker of an exception instance)."""

    def __init__(self, value: Variable, reraise: bool = False) -> None:
        super().__init__(value.describe())
        self.value = value
        # `__context__` recorded (at the raise point); a re-raise (RERAISE, a bare `raise`) keeps it
        self.chained = reraise


class CallerExceptionVariable(Variable):
    """The exception being handled where the compiled function was called (None when none is):
    the `__context__` of an exception the frame raises while handling none of its own, as
    CPython chains it. Unknown while tracing (an operation on it breaks the graph); the
    generated code reads it at run time, outside any `except` block of its own."""

    def describe(self) -> str:
        return "the exception the caller handles"

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.writer.bind(sys.exc_info, 'exc_info')}()[1]"


def caller_exception() -> BaseException | None:
    """The exception being handled where a guard function runs (the compiled function's
    caller's): guarded to stay None by traces that took the caller to handle none."""
    return sys.exc_info()[1]


class TracebackVariable(Variable):
    """`sys.exc_info()[2]` of an exception made while tracing: opaque (reading it breaks the
    graph), rebuilt as the exception's own `__traceback__`."""

    def __init__(self, exc: Variable) -> None:
        self.exc = exc

    def python_type(self) -> type:
        return types.TracebackType

    def describe(self) -> str:
        return f"traceback of {self.exc.describe()}"

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.exc)}.__traceback__"


def is_attribute_error(error: Exception) -> bool:
    """Whether `error`, met while tracing an attribute lookup, means "no such attribute": an
    AttributeError the traced code raised (a `__getattr__`), or a missing attribute the tracer
    found itself."""
    if isinstance(error, TracedException):
        return issubclass(error.value.python_type(), AttributeError)
    return isinstance(error, Unsupported) and error.kind is BreakKind.MISSING_ATTRIBUTE


class LastiVariable(Variable):
    """The instruction offset an exception-table entry with `lasti` pushes under the exception
    (RERAISE restores the traceback's line from it); rebuilt as the resume code's own offset."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def describe(self) -> str:
        return f"lasti {self.offset}"


class HandlerEntryVariable(Variable):
    """The stack entry PUSH_EXC_INFO leaves under the exception a handler handles: the exception
    handled before (`previous`), restored by POP_EXCEPT. It remembers `exception`, the one this
    handler handles, so that a graph break inside the handler can enter it again for real."""

    def __init__(self, previous: Variable, exception: Variable) -> None:
        self.previous = previous
        self.exception = exception

    def describe(self) -> str:
        return f"handler of {self.exception.describe()}"


def raise_new(frame: Frame, cls: type[BaseException], *args: object) -> TracedException:
    """A TracedException for `cls(*args)` with constant arguments, ready to raise."""
    return TracedException(frame.new_exception(cls, args))


def raise_python_error(frame: Frame, error: Exception) -> NoReturn:
    """Raise, in the traced program, the error Python raised evaluating an operation on constants
    (`int("x")`, `divmod(1, 0)`), so the program's `except` clauses see it as they would eagerly.

    A RecursionError is the tracer's own (it ran out of depth evaluating the operation), not the
    program's: it propagates, and the entry wrapper's miss path tells it from a frame it cannot
    compile (`entry._out_of_depth`) instead of compiling code that raises it. So does stenograph's
    own error (an operand it cannot make a constant: `len()` of a set the frame changed), which
    the program's `except Exception:` must not catch."""
    if isinstance(error, (RecursionError, StenographError, TracedException)):
        raise error  # the tracer's own (an operand it cannot make constant), or already the program's

    try:
        tracker = frame.new_exception(type(error), error.args)
    except Unsupported:
        raise Unsupported(f"{type(error).__name__} raised on constants: {error}") from error
    raise TracedException(tracker) from error
