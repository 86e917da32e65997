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


class GetItemIteratorVariable(IteratorVariable):
    """The iterator `iter(obj)` makes for a class with only `__getitem__`."""

    has_length_hint = False

    def __init__(self, obj: Variable) -> None:
        self.obj = obj
        self.index = 0
        self.done = False
        self.failure = None

    def describe(self) -> str:
        return f"iterator over {self.obj.describe()} by __getitem__"

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        raise Unsupported(f"{self.describe()} is live at a graph break and cannot be rebuilt")

    def next(self, frame: Frame) -> Variable | None:
        if self.done:
            return None
        try:
            item = self.obj.getitem(frame, constant(self.index))
        except TracedException as e:
            if issubclass(e.value.python_type(), (IndexError, StopIteration)):
                self.done = True
                return None
            raise
        self.index += 1
        return item


class SelfIteratorVariable(IteratorVariable):
    """A user object whose `__iter__` returns itself: each step calls its `__next__`, lazily, so
    the calls interleave with the loop body as they do eagerly, until it raises StopIteration."""

    has_length_hint = False

    def __init__(self, obj: Variable) -> None:
        self.obj = obj
        self.done = False
        self.failure = None

    def describe(self) -> str:
        return f"{self.obj.describe()}, its own iterator"

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        raise Unsupported(f"{self.describe()} is live at a graph break and cannot be rebuilt")

    def next(self, frame: Frame) -> Variable | None:
        if self.done:
            return None
        try:
            return self.obj.call_method(frame, "__next__", [], {})
        except TracedException as e:
            if issubclass(e.value.python_type(), StopIteration):
                self.done = True
                return None
            raise


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
