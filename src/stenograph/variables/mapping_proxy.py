"""`types.MappingProxyType(d)`: a read-only view of a dict tracker (a proxy passed in: of the
dict it reads, through `ProxiedMappingSource`).

Every read goes to the dict, so changes made to it after the proxy was taken show through, as
they do eagerly; writes raise CPython's TypeError. A proxy leaving the frame is rebuilt around
the dict (a dict of the frame through its source: the caller's proxy sees that dict's later
changes too).
"""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .base import Variable
from .constants import BoundMethodVariable
from .containers import DictVariable
from .exceptions import raise_new

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

# what a mappingproxy passes on to its mapping (`copy` and `|` give a new dict, as CPython's)
_READS = frozenset(
    {"get", "keys", "values", "items", "copy", "__getitem__", "__contains__", "__len__", "__iter__", "__reversed__"}
)


class MappingProxyVariable(Variable):
    """A mappingproxy of the dict tracker `mapping`."""

    def __init__(self, mapping: DictVariable, source: Source | None = None) -> None:
        self.mapping = mapping
        self.source = source  # a proxy passed in: itself when it leaves the frame

    @classmethod
    def of(cls, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> MappingProxyVariable:
        """`types.MappingProxyType(mapping)`."""
        if kwargs or len(args) != 1:
            raise raise_new(frame, TypeError, f"mappingproxy() takes exactly one argument ({len(args)} given)")
        if not isinstance(args[0], DictVariable):
            raise Unsupported(f"mappingproxy of {args[0].describe()}")
        return cls(args[0])

    def python_type(self) -> type:
        return types.MappingProxyType

    def describe(self) -> str:
        return f"mappingproxy of {self.mapping.describe()}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name not in _READS:
            raise Unsupported(f"attribute {name!r} of {self.describe()}")
        return BoundMethodVariable(self, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name not in _READS:
            raise Unsupported(f"method {name!r} of {self.describe()}")
        return self.mapping.call_method(frame, name, args, kwargs)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        return self.mapping.getitem(frame, key)

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        raise raise_new(frame, TypeError, "'mappingproxy' object does not support item assignment")

    def delitem(self, frame: Frame, key: Variable) -> None:
        raise raise_new(frame, TypeError, "'mappingproxy' object does not support item deletion")

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self.mapping.contains(frame, item)

    def length(self, frame: Frame) -> int:
        return self.mapping.length(frame)

    def truth(self, frame: Frame) -> bool:
        return self.mapping.truth(frame)

    def unpack(self, frame: Frame) -> list[Variable]:
        return self.mapping.unpack(frame)

    def get_iter(self, frame: Frame) -> Variable | None:
        return self.mapping.get_iter(frame)

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        """`mp | other` is `mapping | other`, a new dict (`|=` too: a proxy has no in-place form)."""
        if plain is operator.or_:
            return self.mapping.binary_op(frame, plain, plain, other)
        return None

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.writer.bind(types.MappingProxyType, 'mappingproxy')}({rebuild.expr(self.mapping)})"
