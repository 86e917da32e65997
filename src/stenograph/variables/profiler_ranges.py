"""`with torch.profiler.record_function(name):` blocks, traced while no profiler records.

A range only shows in a profiler's trace; with none recording, entering and leaving it has no
effect a program can see, so the block is traced as if the `with` were absent (torch.optim's
`step` runs inside one). Whether a profiler records is guarded: starting one recompiles, and the
range is then made and entered eagerly at a graph break, so it appears in the trace as in eager.
(torch.compile drops such ranges whether or not a profiler records.)
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import Variable
from .constants import constant

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

_profiler_enabled = torch._C._autograd._profiler_enabled


def is_record_function_class(value: Any) -> bool:
    return value is torch.autograd.profiler.record_function


def make_record_function(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`record_function(name, args=None)` called while tracing."""
    if _profiler_enabled():
        raise Unsupported("record_function while a profiler records: the range is entered eagerly")
    frame.output.guards.state_query(_profiler_enabled, "torch._C._autograd._profiler_enabled", False)
    plain = [a.as_constant() for a in args]
    plain_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
    return RecordFunctionVariable(plain, plain_kwargs)


class RecordFunctionVariable(Variable):
    """A profiler range not yet entered; entering and leaving it are no-ops."""

    def __init__(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs

    def python_type(self) -> type:
        return torch.autograd.profiler.record_function

    def describe(self) -> str:
        return f"record_function{tuple(self.args)}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("__enter__", "__exit__"):
            return _RangeMethod(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def reconstruct(self, rebuild: Any) -> str:
        """The object as `with ... as r` binds it, live at a graph break: an equal range, not entered."""
        cls = rebuild.writer.bind(torch.autograd.profiler.record_function, "cls")
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{cls}({', '.join(arguments)})"


class _RangeMethod(Variable):
    """`__enter__` (returns the range) or `__exit__` (does not suppress) of a range."""

    def __init__(self, context: RecordFunctionVariable, name: str) -> None:
        self.context = context
        self.name = name

    def describe(self) -> str:
        return f"{self.context.describe()}.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.context if self.name == "__enter__" else constant(False)

    def reconstruct(self, rebuild: Any) -> str:
        """The `__exit__` on the stack at a graph break inside the block: the range was never
        entered, so the eager code leaves a null context."""
        null = rebuild.writer.bind(contextlib.nullcontext, "cls")
        return f"{null}().{self.name}"
