"""torch's function-mode stack, as a compile and compiled code handle it.

A TorchFunctionMode on the stack is of one of three kinds. A `torch.device` context (torch's
`DeviceContext`, also what `set_default_device` pushes) gives factories its device. An inert mode
keeps `BaseTorchFunctionMode`'s own `__torch_function__`, which only calls the function. A handler
mode has a `__torch_function__` of its own.

Device contexts and inert modes stay on the stack while a compile runs: the trace's fake
operations go through them, as the graph's operations do when it runs. Handler modes are taken
off for the compile (`handlers_set_aside`). The trace inlines their handlers instead
(`variables.function_modes`), so the graph holds what they did. The compiled graph then runs
with them off the stack (`without_handlers`), or they would act on its operations a second time.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._device import DeviceContext

DEVICE = "device"
INERT = "inert"
HANDLER = "handler"

_INERT_HANDLER = torch.overrides.BaseTorchFunctionMode.__torch_function__


def kind(mode: Any) -> str:
    """DEVICE, INERT or HANDLER (see the module's docstring)."""
    return class_kind(type(mode))


def class_kind(cls: type) -> str:
    """The kind of the modes of class `cls`."""
    if cls is DeviceContext:
        return DEVICE
    return INERT if getattr(cls, "__torch_function__", None) is _INERT_HANDLER else HANDLER


def current() -> tuple[Any, ...]:
    """The stack on torch now, bottom first."""
    return tuple(torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack()))


class _Aside(threading.local):
    stack: tuple[Any, ...] | None = None  # the program's whole stack while a compile set handlers aside


_aside = _Aside()


def program_stack() -> tuple[Any, ...]:
    """The stack the program has: the whole one while a compile in this thread set handlers aside."""
    return _aside.stack if _aside.stack is not None else current()


def program_entry(index: int) -> Any:
    """Entry `index` (bottom first) of the program's stack (what a source of a mode reads)."""
    return program_stack()[index]


def program_has_handlers() -> bool:
    """Whether a handler mode is on the program's stack (a compile traces its handler)."""
    return _has_handlers(program_stack())


def _has_handlers(stack: tuple[Any, ...]) -> bool:
    return any(kind(mode) == HANDLER for mode in stack)


def replace(modes: tuple[Any, ...]) -> None:
    """Make torch's stack `modes`, bottom first."""
    while torch._C._len_torch_function_stack():
        torch._C._pop_torch_function_stack()
    for mode in modes:
        torch._C._push_on_torch_function_stack(mode)


@contextmanager
def handlers_set_aside() -> Iterator[None]:
    """The handler modes off the stack while a compile, or code compiled under them, runs (the
    others stay, in their order), put back when it ends."""
    stack = current()
    if not _has_handlers(stack):
        yield
        return
    previous = _aside.stack
    _aside.stack = stack  # what the program has: guards and state readers see it whole
    replace(tuple(mode for mode in stack if kind(mode) != HANDLER))
    try:
        yield
    finally:
        replace(stack)
        _aside.stack = previous


@contextmanager
def program_stack_on() -> Iterator[None]:
    """The program's whole stack back on torch while a trace asks torch about it."""
    if _aside.stack is None:
        yield
        return
    outside = current()
    replace(_aside.stack)
    try:
        yield
    finally:
        replace(outside)


def replay(changes: tuple[tuple[Any, ...], ...]) -> None:
    """Apply the changes a trace made to the stack, in order, after its graph ran: `("push",
    mode)`, `("pop",)`, `("default_device", device)` (`torch.set_default_device`)."""
    for change in changes:
        if change[0] == "push":
            torch._C._push_on_torch_function_stack(change[1])
        elif change[0] == "pop":
            torch._C._pop_torch_function_stack()
        else:
            torch.set_default_device(change[1])


def untraceable_reason(stack: tuple[Any, ...]) -> str | None:
    """Why a frame cannot be traced under `stack`, or None: a device context above a handler mode
    would change a factory's arguments before the handler sees them, which the trace does not
    follow; a handler that is not a Python function cannot be inlined."""
    handler_seen = False
    for mode in stack:
        if kind(mode) == HANDLER:
            handler_seen = True
            handler = getattr(type(mode), "__torch_function__", None)
            if not isinstance(getattr(handler, "__code__", None), types.CodeType):
                return f"{type(mode).__qualname__}.__torch_function__ is not a Python function"
        elif kind(mode) == DEVICE and handler_seen:
            return "a torch.device context is above a TorchFunctionMode with its own __torch_function__"
    return None


def without_handlers(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """`compiled` (a graph, or the guard of code traced under handler modes, whose checks read
    tensors), run with the handler modes off the stack: their handlers are in the graph."""

    def run(*args: Any, **kwargs: Any) -> Any:
        with handlers_set_aside():
            return compiled(*args, **kwargs)

    return run
