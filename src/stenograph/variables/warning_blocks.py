"""`with warnings.catch_warnings(...):` blocks, traced through.

`catch_warnings` saves the warning filters on entry and restores them on exit; with `record=True`
it also collects the warnings shown inside, in the list `as` binds. A traced block shows no
warning: `warnings.warn` inside it (which `traced_warnings` would issue after the graph, outside
the block), `simplefilter` and the like are graph breaks, so the block's own body is captured as
if the `with` were absent, and `record=True` binds a new, empty list, which is what eager's
holds when nothing warned. A graph break inside the block cannot be written there
(its eager part must run inside the real context): it moves to the `with` statement, which
then runs eagerly with a real `catch_warnings`, as torch.compile enters one.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .base import Variable
from .constants import constant

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

_ARGUMENTS = ("record", "module", "action", "category", "lineno", "append")


def make_catch_warnings(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`warnings.catch_warnings(*, record=False, ...)` called while tracing (keywords only, as
    its signature has them)."""
    if args or any(k not in _ARGUMENTS for k in kwargs) or not all(v.is_constant() for v in kwargs.values()):
        raise Unsupported("warnings.catch_warnings() with other than constant keyword arguments")
    return CatchWarningsVariable({k: v.as_constant() for k, v in kwargs.items()})


class CatchWarningsVariable(Variable):
    """A `catch_warnings` not yet entered; entering it gives `record`'s list (or None)."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs
        self.entered = False

    def python_type(self) -> type:
        return warnings.catch_warnings

    def describe(self) -> str:
        return "warnings.catch_warnings()"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("__enter__", "__exit__"):
            return _BlockMethod(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def reconstruct(self, rebuild: Any) -> str:
        """Not entered yet (returned, or live at a break): made anew with the same arguments,
        once; an entered one cannot be rebuilt entered."""
        if self.entered:
            raise Unsupported("a warnings.catch_warnings() block cannot be left and entered again at a graph break")
        arguments = ", ".join(f"{name}={rebuild.constant(value)}" for name, value in self.kwargs.items())
        make = rebuild.writer.bind(warnings.catch_warnings, "fn")
        return rebuild.build_once(self, lambda: f"{make}({arguments})")


class _BlockMethod(Variable):
    """`__enter__` (the recorded warnings' list, or None) or `__exit__` (does not suppress)."""

    def __init__(self, block: CatchWarningsVariable, name: str) -> None:
        self.block = block
        self.name = name

    def describe(self) -> str:
        return f"{self.block.describe()}.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.name == "__exit__":
            frame.output.warning_blocks -= 1
            return constant(False)
        frame.output.warning_blocks += 1
        self.block.entered = True
        if self.block.kwargs.get("record"):
            return frame.wrap([], None)
        return constant(None)

    def reconstruct(self, rebuild: Any) -> str:
        raise Unsupported("a graph break inside a warnings.catch_warnings() block")
