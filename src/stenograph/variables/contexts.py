"""Grad-mode context managers (`torch.no_grad()`, `enable_grad()`, `set_grad_enabled(mode)`).

Entering one while tracing switches grad mode for the ops traced after it and records a
`torch._C._set_grad_enabled` node, so the compiled graph switches at the same point; leaving it
switches back. The graph always ends in the grad mode it started in, so a graph break inside
the block can re-enter a real context manager around the eager part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import Variable
from .constants import constant

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class GradModeContextVariable(Variable):
    """A grad-mode context manager object (not yet entered)."""

    def __init__(self, cls: Any, mode: bool, args: tuple = ()) -> None:
        self.cls = cls
        self.mode = mode
        self.args = args

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"{self.cls.__name__}()"

    def enter(self, frame: Frame) -> Variable:
        """BEFORE_WITH: switch mode; returns the exit tracker that goes on the stack."""
        previous = torch.is_grad_enabled()
        frame.output.set_grad_enabled(self.mode)
        return ContextExitVariable(self, previous)

    def getattr(self, frame: Frame, name: str) -> Variable:
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        """Used as a decorator (`torch.no_grad()(f)`, `@torch.enable_grad()` on a nested
        function): the function, run in this mode when called."""
        if len(args) != 1 or kwargs:
            raise Unsupported(f"calling {self.describe()} with other than one function")
        return GradModeFunctionVariable(self, args[0])

    def reconstruct(self, rebuild: Any) -> str:
        cls = rebuild.writer.bind(self.cls, "cls")
        return f"{cls}({', '.join(repr(a) for a in self.args)})"


class GradModeFunctionVariable(Variable):
    """A function decorated by a grad-mode context: each call switches to the mode around it."""

    def __init__(self, context: GradModeContextVariable, fn: Variable) -> None:
        self.context = context
        self.fn = fn

    def describe(self) -> str:
        return f"{self.fn.describe()} decorated by {self.context.describe()}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        previous = torch.is_grad_enabled()
        frame.output.set_grad_enabled(self.context.mode)
        try:
            return self.fn.call(frame, args, kwargs)
        finally:
            frame.output.set_grad_enabled(previous)

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.context)}({rebuild.expr(self.fn)})"


class ContextExitVariable(Variable):
    """The bound `__exit__` that BEFORE_WITH leaves on the stack."""

    def __init__(self, context: GradModeContextVariable, previous: bool) -> None:
        self.context = context
        self.previous = previous
        self.called = False  # a `with` block's exception exit keeps it on the stack after the call

    def describe(self) -> str:
        return f"{self.context.describe()}.__exit__"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        self.called = True
        frame.output.set_grad_enabled(self.previous)
        return constant(None)


class ContextEnterVariable(Variable):
    """The `__enter__` of a grad-mode context that 3.14's LOAD_SPECIAL looks up after its
    `__exit__`: the switch happened at that lookup (`enter`), so calling it only returns None."""

    def __init__(self, context: GradModeContextVariable) -> None:
        self.context = context

    def describe(self) -> str:
        return f"{self.context.describe()}.__enter__"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return constant(None)


def grad_mode_class(value: Any) -> bool:
    return value in (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


def make_grad_context(frame: Frame, cls: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """Calling `torch.no_grad()` / `enable_grad()` / `set_grad_enabled(mode)` while tracing."""
    if cls in (torch.no_grad, torch.enable_grad):
        context = GradModeContextVariable(cls, cls is torch.enable_grad)
        if args or kwargs:  # `torch.no_grad(f)`: the class used as a bare decorator
            return context.call(frame, args, kwargs)
        return context
    mode_var = args[0] if args else kwargs.get("mode")
    if mode_var is None or not mode_var.is_constant():
        raise Unsupported("torch.set_grad_enabled with a non-constant mode")
    mode = bool(mode_var.as_constant())
    # set_grad_enabled switches immediately, also when not used in a `with`
    previous = torch.is_grad_enabled()
    frame.output.set_grad_enabled(mode)
    return _AlreadyEntered(cls, mode, (mode,), previous)


class _AlreadyEntered(GradModeContextVariable):
    """`set_grad_enabled(m)`: the switch happened at construction; `with` only restores."""

    def __init__(self, cls: Any, mode: bool, args: tuple, previous: bool) -> None:
        super().__init__(cls, mode, args)
        self.previous = previous

    def enter(self, frame: Frame) -> Variable:
        return ContextExitVariable(self, self.previous)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        # as a decorator it gives the mode back first, as torch's `set_grad_enabled.__call__`
        frame.output.set_grad_enabled(self.previous)
        return super().call(frame, args, kwargs)
