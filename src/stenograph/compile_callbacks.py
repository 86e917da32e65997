"""Functions the user registers to run when a compile starts and when it ends.

`on_compile_start(fn)` and `on_compile_end(fn)` are torch._dynamo's hooks of the same names: a
profiler or a serving stack uses them to time compiles or to hold requests while one runs. Each
callback gets a `CallbackArgs`. A compile started inside another's trace (a callee compiled as a
frame of its own) runs no callbacks of its own: the outer pair spans it. `reset()` forgets them.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import process_state


class CallbackTrigger(enum.Enum):
    """What made the compile: `FRAME`, a cache miss of a compiled function's frame."""

    FRAME = 1


@dataclass(frozen=True)
class CallbackArgs:
    callback_trigger: CallbackTrigger
    compile_id: str  # "frame/recompile", as logs and the structured trace number compiles


Callback = Callable[[CallbackArgs], None]

_start_callbacks: list[Callback] = []
_end_callbacks: list[Callback] = []
_running = 0  # compiles in progress: one started inside another's trace is the second


def _registered(fn: Callback, callbacks: list[Callback], name: str) -> Callback:
    if not callable(fn):
        raise TypeError(f"stenograph.{name}() takes a callable, not {fn!r}")
    callbacks.append(fn)
    return fn


def on_compile_start(fn: Callback) -> Callback:
    """Call `fn(CallbackArgs)` before each compile; usable as a decorator."""
    return _registered(fn, _start_callbacks, "on_compile_start")


def on_compile_end(fn: Callback) -> Callback:
    """Call `fn(CallbackArgs)` after each compile, whether it built an entry or failed."""
    return _registered(fn, _end_callbacks, "on_compile_end")


@contextlib.contextmanager
def compiling(compile_id: str, trigger: CallbackTrigger = CallbackTrigger.FRAME) -> Iterator[None]:
    """Around one compile: the start callbacks before, the end callbacks after (also when it
    raises), unless another compile is already running them."""
    global _running
    outermost = _running == 0
    _running += 1
    try:
        if outermost:
            _run(_start_callbacks, CallbackArgs(trigger, compile_id))
        yield
    finally:
        _running -= 1
        if outermost:
            _run(_end_callbacks, CallbackArgs(trigger, compile_id))


def _run(callbacks: list[Callback], args: CallbackArgs) -> None:
    for fn in list(callbacks):
        fn(args)


def _clear() -> None:
    _start_callbacks.clear()
    _end_callbacks.clear()


process_state.register("compile_callbacks", _clear, lambda: len(_start_callbacks) + len(_end_callbacks))
