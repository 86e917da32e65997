"""Frames run as they are where torch.compile skips them, and fullgraph's error when nothing compiled.

A leaf. torch.compile does not compile a frame while `config.disable` is set, nor while a
TorchDispatchMode that must see every operator is on the dispatch stack: one that is neither an
infra mode (fake, proxy, functional tensors) nor says `ignore_compile_internals()`. A compiled
graph would hide operators from such a mode (traced on fake tensors, fused by a backend), so the
frame runs eagerly and the mode sees what eager shows it; cached code does not run under it either.

TorchFunctionModes are traced (`function_mode_stack`): a frame runs eagerly under them only
where the trace cannot follow them (a `torch.device` context above a mode with a handler of its
own). The stack is guarded (`function_modes`), so code compiled without a mode does not run under
one, nor code traced under one without it.

A `fullgraph=True` call promises compiled code. When its frame is skipped, the call runs eagerly
watched: the compiled frames run in its thread meanwhile are counted (a compiled function called
inside a mode's `__torch_dispatch__`, where the mode has left the stack, still compiles), and if
none ran the call raises `NoFramesCompiled` naming each frame skipped and why, as torch does.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._python_dispatch as python_dispatch

from . import config, function_mode_stack
from . import stance as _stance
from .errors import NoFramesCompiled

DISABLED = "Dynamo tracing is disabled"
USER_MODE = "non-infra torch dispatch mode present, this is not supported today in torch.compile"


def function_modes() -> tuple[Any, ...]:
    """The function-mode stack as the trace takes it, for a guard: the device of each
    `torch.device` context, the class of any other mode (tagged where its handler only calls the
    function, which the trace follows as it follows a device context)."""
    return tuple(_mode_key(mode) for mode in function_mode_stack.program_stack())


def _mode_key(mode: Any) -> Any:
    kind = function_mode_stack.kind(mode)
    if kind == function_mode_stack.DEVICE:
        return ("device", str(mode.device))
    return ("inert", type(mode)) if kind == function_mode_stack.INERT else type(mode)


def user_mode_active() -> bool:
    """Whether a dispatch mode that must see every operator is active: on the stack now, or (with
    `config.inline_torch_dispatch_torch_compile` off, torch's older rule) entered at all, its
    `__torch_dispatch__` running included."""
    if not getattr(python_dispatch, "_is_in_any_mode_without_ignore_compile_internals", True):
        return False  # torch's own flag: every mode entered ignores compile internals
    if not config.inline_torch_dispatch_torch_compile:
        return True
    for i in range(torch._C._len_torch_dispatch_stack()):
        mode = torch._C._get_dispatch_stack_at(i)
        if not (mode.is_infra_mode() or mode.ignore_compile_internals()):
            return True
    return False


def skip_reason() -> str | None:
    """Why a frame that would compile now runs as it is instead, or None."""
    if config.disable:
        return DISABLED
    if user_mode_active():
        return USER_MODE
    return function_mode_stack.untraceable_reason(function_mode_stack.current())


class _Watch(threading.local):
    """This thread's watched fullgraph call: frames skipped and compiled frames run since it began."""

    active = False
    compiled = 0

    def __init__(self) -> None:
        self.skipped: list[str] = []


_watch = _Watch()


def note_compiled() -> None:
    """A compiled frame runs (an entry found, or compiled now): a watched call compiled something."""
    if _watch.active:
        _watch.compiled += 1


def run_skipped(fn: Callable, code: types.CodeType, fullgraph: bool, reason: str) -> Callable:
    """What runs a call of `fn` (its code `code`) skipped for `reason`: `fn` itself, watched when
    it is the thread's first fullgraph call to be skipped."""
    where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}): {reason}"
    if _watch.active:
        _watch.skipped.append(where)
        return fn
    if not fullgraph:
        return fn

    def watched(*args: Any, **kwargs: Any) -> Any:
        _watch.active, _watch.compiled, _watch.skipped = True, 0, [where]
        _stance.set_aside(True)  # cached calls take the slow path, which counts their entries
        try:
            result = fn(*args, **kwargs)
            compiled, skipped = _watch.compiled, _watch.skipped
        finally:
            _stance.set_aside(False)
            _watch.active, _watch.skipped = False, []
        if not compiled and _stance.current.stance.name == "default":
            frames = "\n".join(f"  - {line}" for line in skipped)
            raise NoFramesCompiled(
                f"torch.compile with fullgraph=True found no compiled frames. Skipped frames:\n{frames}"
            )
        return result

    return watched
