"""`Sequential[a:b]` and `ModuleList[a:b]`: a new container module made in the frame, tracked as
its members.

Eager Python builds a new `Sequential` (same keys) or `ModuleList` (keys renumbered) holding the
same submodules. While tracing it is the list of the members' trackers: calling a `Sequential`
slice calls each member in turn (its `forward`), indexing and slicing it again work as on the
original, and a slice that escapes (returned, or live at a graph break) is built for real once,
as eager builds it, from the members read through their sources.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import Variable
from .exceptions import raise_new
from .symbolic import SymNodeVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class ModuleSliceVariable(Variable):
    """A `Sequential` or `ModuleList` (or subclass) built by slicing one, as (key, member) pairs."""

    def __init__(self, cls: type, members: list[tuple[str, Variable]]) -> None:
        self.cls = cls
        self.members = members

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"{self.cls.__name__} slice of {len(self.members)}"

    def made_while_tracing(self) -> bool:
        return True

    def length(self, frame: Frame) -> int:
        return len(self.members)

    def truth(self, frame: Frame) -> bool:
        return True  # a Module defines no __bool__/__len__ of its own that Sequential changes

    def unpack(self, frame: Frame) -> list[Variable]:
        return [member for _, member in self.members]

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        table = dict(self.members)
        return slice_or_member(frame, self.cls, list(table), table.__getitem__, key)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not issubclass(self.cls, torch.nn.Sequential) or self.cls.forward is not torch.nn.Sequential.forward:
            raise Unsupported(f"call of {self.describe()}")
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.describe()} called with other than one input")
        value = args[0]
        for _, member in self.members:
            value = member.call(frame, [value], {})
        return value

    def reconstruct(self, codegen: Any) -> str:
        cls = codegen.writer.bind(self.cls, "cls")
        if issubclass(self.cls, torch.nn.Sequential):
            ordered = codegen.writer.bind(collections.OrderedDict, "OrderedDict")
            pairs = ", ".join(f"({k!r}, {codegen.expr(m)})" for k, m in self.members)
            return codegen.build_once(self, lambda: f"{cls}({ordered}([{pairs}]))")
        return codegen.build_once(self, lambda: f"{cls}([{', '.join(codegen.expr(m) for _, m in self.members)}])")


def slice_or_member(
    frame: Frame, cls: type, names: list[str], track: Callable[[str], Variable], key: Variable
) -> Variable:
    """`container[key]` of a Sequential or ModuleList with members `names` in order; `track(name)`
    gives a member's tracker (called for the members chosen only)."""
    if isinstance(key, SymNodeVariable) and key.python_type() is int:
        k = key.as_constant()  # a symbolic index is specialised (guarded), as torch.compile does
    elif key.is_constant():
        k = key.as_constant()
    else:
        raise Unsupported(f"indexing {cls.__name__} with {key.describe()}")
    if isinstance(k, slice):
        chosen = [(name, track(name)) for name in names[k]]
        if not issubclass(cls, torch.nn.Sequential):  # a ModuleList numbers its members anew
            chosen = [(str(i), member) for i, (_, member) in enumerate(chosen)]
        return ModuleSliceVariable(cls, chosen)
    if isinstance(k, int) and not isinstance(k, bool):
        if not -len(names) <= k < len(names):
            raise raise_new(frame, IndexError, f"index {k} is out of range")
        return track(names[k])
    raise Unsupported(f"indexing {cls.__name__} with {key.describe()}")
