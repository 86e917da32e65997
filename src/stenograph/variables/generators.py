"""Generators (generator functions and generator expressions) called while tracing.

The generator's body runs as a child frame that is resumed on each `next()` and stops at each
`yield`, so its code interleaves with the consumer's exactly as in CPython (side effects and
short-circuiting `any()` included). A generator cannot be rebuilt as a real one, so one still
live at a graph break makes the break impossible (the frame then runs eagerly).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from ..bytecode.instructions import decoded, exception_entries
from ..errors import Unsupported
from ..interpreter.exceptions import handler_for
from .base import Variable
from .constants import BoundMethodVariable, IteratorVariable, constant
from .exceptions import raise_new

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class Yielded(Exception):
    """Raised by YIELD_VALUE to suspend the generator's frame (not an error)."""

    def __init__(self, value: Variable) -> None:
        super().__init__("yield")
        self.value = value


class GeneratorVariable(IteratorVariable):
    """A generator object whose frame runs lazily."""

    has_length_hint = False

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.done = False
        self.index = 0
        self.failure = None
        self.returned: Variable = constant(None)  # the body's return value, once done

    def describe(self) -> str:
        return f"generator {self.frame.code.co_qualname}"

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        raise Unsupported(f"{self.describe()} is live at a graph break and cannot be rebuilt")

    def next(self, frame: Frame) -> Variable | None:
        return self.send(frame, constant(None))

    def send(self, frame: Frame, value: Variable) -> Variable | None:
        """Resume the body with `value` as the result of the `yield` it stopped at; the next
        yielded value, or None once the body returned (its value is then `returned`)."""
        if self.done:
            return None
        started = self.frame.current is not None
        if not started and not (value.is_constant() and value.as_constant() is None):
            raise raise_new(frame, TypeError, "can't send non-None value to a just-started generator")
        if started:
            self.frame.stack[-1] = value  # YIELD_VALUE left a placeholder for what is sent in
        try:
            returned = self.frame.run()
        except Yielded as y:
            return y.value
        except Unsupported as e:
            if e.generator_code is None:
                e.generator_code = self.frame.code
            raise
        self.done = True
        self.returned = returned if returned is not None else constant(None)
        return None

    def finished_value(self) -> Variable:
        return self.returned

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("send", "__next__", "close"):
            return BoundMethodVariable(self, name)
        return super().getattr(frame, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs or len(args) != (name == "send"):
            raise Unsupported(f"generator.{name}() with these arguments")
        if name == "close":
            if self.frame.current is not None and not self.done:
                raise Unsupported(f"closing {self.describe()} while it is suspended (GeneratorExit is not modelled)")
            self.done = True
            return constant(None)
        item = self.send(frame, args[0] if args else constant(None))
        if item is None:
            raise self.stop(frame)
        return item

    def unpack(self, frame: Frame) -> list[Variable]:
        values = []
        while (item := self.next(frame)) is not None:
            values.append(item)
        return values


def _is_stop_iteration_guard(code: types.CodeType, target: int) -> bool:
    """3.12 wraps every generator body in a handler turning StopIteration into RuntimeError."""
    inst = decoded(code).at(target)
    return inst.opname == "CALL_INTRINSIC_1" and inst.argrepr == "INTRINSIC_STOPITERATION_ERROR"


def has_cleanup(code: types.CodeType) -> bool:
    """Whether a generator's code has a `try` or `with` block (code that closing it may run)."""
    return any(not _is_stop_iteration_guard(code, e.target) for e in exception_entries(code))


def needs_close(generator: GeneratorVariable) -> bool:
    """Whether closing (or dropping) the generator now would run code of its own: it started, did
    not finish, and is suspended where an exception handler of its code (`try`, `with`) applies,
    other than 3.12's implicit StopIteration guard around every generator body."""
    frame = generator.frame
    if generator.done or frame.current is None:
        return False
    entry = handler_for(frame.code, frame.current.offset)
    return entry is not None and not _is_stop_iteration_guard(frame.code, entry.target)


def send_into(frame: Frame, receiver: Variable, value: Variable) -> tuple[Variable | None, Variable]:
    """One step of `yield from receiver` (SEND): (the item it yields, None), or (None, the value it
    returned) once it is exhausted."""
    if isinstance(receiver, GeneratorVariable):
        item = receiver.send(frame, value)
    elif isinstance(receiver, IteratorVariable) and value.is_constant() and value.as_constant() is None:
        item = receiver.next(frame)
    else:
        raise Unsupported(f"sending a value into {receiver.describe()}")
    if item is None:
        return None, receiver.finished_value()
    return item, value
