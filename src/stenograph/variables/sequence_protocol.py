"""Iterating user objects lazily: one whose class has `__getitem__` but no `__iter__` (the old
sequence protocol), and one whose `__iter__` returns itself.

CPython's `iter()` then makes an iterator that calls `obj[0]`, `obj[1]`, ... until `__getitem__`
raises IndexError (or StopIteration). The tracker does the same, lazily, so the calls interleave
with the loop body as they do eagerly. The answers "no `__iter__`" and "this `__getitem__`" are
guarded on the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Unsupported
from .base import Variable
from .class_lookup import MISSING, class_lookup
from .constants import IteratorVariable, constant
from .descriptors import class_dunder
from .exceptions import TracedException

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class _SteppedIterator(IteratorVariable):
    """An iterator that takes each item from the object when asked (one call into it per step),
    until the call raises one of `stops`; it cannot be rebuilt at a graph break."""

    has_length_hint = False
    stops: tuple[type[BaseException], ...] = (StopIteration,)

    def __init__(self, obj: Variable) -> None:
        self.obj = obj
        self.done = False
        self.failure = None

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        raise Unsupported(f"{self.describe()} is live at a graph break and cannot be rebuilt")

    def step(self, frame: Frame) -> Variable:
        raise NotImplementedError

    def next(self, frame: Frame) -> Variable | None:
        if self.done:
            return None
        try:
            return self.step(frame)
        except TracedException as e:
            if issubclass(e.value.python_type(), self.stops):
                self.done = True
                return None
            raise


class GetItemIteratorVariable(_SteppedIterator):
    """The iterator `iter(obj)` makes for a class with only `__getitem__`."""

    stops = (IndexError, StopIteration)

    def __init__(self, obj: Variable) -> None:
        super().__init__(obj)
        self.index = 0

    def describe(self) -> str:
        return f"iterator over {self.obj.describe()} by __getitem__"

    def step(self, frame: Frame) -> Variable:
        item = self.obj.getitem(frame, constant(self.index))
        self.index += 1
        return item


class SelfIteratorVariable(_SteppedIterator):
    """A user object whose `__iter__` returns itself: each step calls its `__next__`, lazily, so
    the calls interleave with the loop body as they do eagerly."""

    def describe(self) -> str:
        return f"{self.obj.describe()}, its own iterator"

    def step(self, frame: Frame) -> Variable:
        return self.obj.call_method(frame, "__next__", [], {})


def getitem_iterator(frame: Frame, obj: Variable, cls: type | None) -> IteratorVariable | None:
    """The sequence-protocol iterator of a user object, if `cls`, the class whose Python dunders
    implement its protocols (`ObjectVariable.protocol_class`), has `__getitem__` written in Python
    and no `__iter__` at all (None otherwise)."""
    if cls is None or class_dunder(frame, cls, "__iter__") is not None:
        return None
    if class_lookup(obj.python_type(), "__iter__")[0] is not MISSING:
        return None
    if class_dunder(frame, cls, "__getitem__") is None:
        return None
    return GetItemIteratorVariable(obj)
