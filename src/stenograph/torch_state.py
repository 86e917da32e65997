"""torch's global state as a compile found it, put back however the compile ended.

Tracing enters real torch state: fake mode and the Python dispatcher around every traced op,
grad mode and autocast for the blocks the code enters, a TracingContext for the backend. Each
is left by a `with` or `finally` of its own, but an exception or a KeyboardInterrupt that lands
inside one of those exits (FakeTensorMode's `__exit__` is several steps) would leave the state
half restored for the rest of the process. The compile path therefore snapshots the state first
and restores whatever differs when it ends.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch._guards
import torch._subclasses.meta_utils
import torch.fx.experimental.symbolic_shapes
import torch.fx.traceback
import torch.utils._python_dispatch as python_dispatch

from . import function_mode_stack, torch_flags

_C = torch._C
_INFRA_KEYS = tuple(_C._TorchDispatchModeKey.__members__.values())
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia", "maia")


_LOGGERS = ("torch._subclasses.fake_tensor",)  # silenced around each traced op
# thread-locals that torch's context managers set and reset: the ShapeEnv's `suppress_guards`
# flag (left on, no later compile would record a shape guard), the TracingContext, ...
_THREAD_LOCALS = (
    torch.fx.experimental.symbolic_shapes.TLS,
    torch._guards._TLS,
    torch._subclasses.meta_utils.tls,
)
# module globals that dispatch modes and node-meta contexts set on enter and reset on exit
_MODULE_FLAGS = tuple(
    (module, name)
    for module, names in (
        (
            python_dispatch,
            (
                "_is_in_torch_dispatch_mode",
                "_is_in_non_infra_torch_dispatch_mode",
                "_is_in_any_mode_without_ignore_compile_internals",
            ),
        ),
        (torch.fx.traceback, ("should_preserve_node_meta", "current_meta", "current_replay_node")),
    )
    for name in names
    if hasattr(module, name)
)


def _autocast_devices() -> tuple[str, ...]:
    devices = []
    for device in _AUTOCAST_DEVICES:
        try:
            torch.is_autocast_enabled(device)
            torch.get_autocast_dtype(device)
        except Exception:  # noqa: BLE001 - a device type this build does not know
            continue
        devices.append(device)
    return tuple(devices)


_DEVICES = _autocast_devices()


@dataclass
class TorchState:
    """One snapshot; `restore()` writes back only what changed since."""

    flags: dict[torch_flags.Flag, Any]  # grad mode, deterministic algorithms, default dtype
    autocast: tuple[tuple[bool, torch.dtype], ...]
    autocast_cache: bool
    dispatch_stack: tuple[Any, ...]
    function_stack: tuple[Any, ...]
    infra_modes: tuple[Any, ...]
    only_lift_cpu: bool
    thread_locals: tuple[dict[str, Any], ...]
    module_flags: tuple[Any, ...]
    loggers: tuple[bool, ...]

    def restore(self) -> None:
        """Write back what differs; an interrupt meanwhile restarts it, then is re-raised."""
        interrupted: BaseException | None = None
        while True:
            try:
                self._restore()
                break
            except KeyboardInterrupt as e:
                interrupted = e
        if interrupted is not None:
            raise interrupted

    def _restore(self) -> None:
        if _dispatch_stack() != self.dispatch_stack:
            while _C._len_torch_dispatch_stack():
                _C._pop_torch_dispatch_stack(None)
            for mode in self.dispatch_stack:
                _C._push_on_torch_dispatch_stack(mode)
        if function_mode_stack.current() != self.function_stack:
            function_mode_stack.replace(self.function_stack)
        for key, mode in zip(_INFRA_KEYS, self.infra_modes):
            if _C._get_dispatch_mode(key) is not mode:
                _C._unset_dispatch_mode(key)
                if mode is not None:
                    _C._set_dispatch_mode(mode)
        if _C._only_lift_cpu_tensors() != self.only_lift_cpu:
            _C._set_only_lift_cpu_tensors(self.only_lift_cpu)
        for device, (enabled, dtype) in zip(_DEVICES, self.autocast):
            if torch.is_autocast_enabled(device) != enabled:
                torch.set_autocast_enabled(device, enabled)
            if torch.get_autocast_dtype(device) != dtype:
                torch.set_autocast_dtype(device, dtype)
        if torch.is_autocast_cache_enabled() != self.autocast_cache:
            torch.set_autocast_cache_enabled(self.autocast_cache)
        torch_flags.restore(self.flags)
        for tls, saved in zip(_THREAD_LOCALS, self.thread_locals):
            if _thread_local_state(tls) != saved:
                tls.__dict__.clear()
                tls.__dict__.update(_copied(saved))
        for (module, name), value in zip(_MODULE_FLAGS, self.module_flags):
            if getattr(module, name) is not value:
                setattr(module, name, value)
        if hasattr(python_dispatch, "set_is_in_mode_without_ignore_compile_internals"):
            python_dispatch.set_is_in_mode_without_ignore_compile_internals(
                python_dispatch._is_in_any_mode_without_ignore_compile_internals
            )
        for name, disabled in zip(_LOGGERS, self.loggers):
            logging.getLogger(name).disabled = disabled


def _dispatch_stack() -> tuple[Any, ...]:
    return tuple(_C._get_dispatch_stack_at(i) for i in range(_C._len_torch_dispatch_stack()))


class preserved:  # noqa: N801 - used as a context manager, like torch's own guards
    """`with preserved():` restores the state (and the dispatch-key sets) when the block ends,
    however it ends. Inside it, the saved-tensor hooks a program set are silent: they run when
    the compiled graph runs, not when operations are traced (a pack hook counting calls would
    count the trace's too).

    A class, not a generator: an interrupt must not land between leaving the block and the
    restore. An exception first releases the frames it unwound, so RAII guards held in them
    (`torch._C._DisableTorchDispatch` in a generator's frame that never finished) end now,
    before the restore, not at some later garbage collection that would undo it.
    """

    def __enter__(self) -> None:
        # the dispatch keys included/excluded in TLS: set back exactly by torch's own guard
        self.keys = _C._PreserveDispatchKeyGuard()
        self.keys.__enter__()
        self.state = snapshot()
        self.hooks_tracing = _C._autograd._saved_tensors_hooks_set_tracing(True)

    def __exit__(self, kind: type | None, error: BaseException | None, tb: types.TracebackType | None) -> None:
        if tb is not None:
            traceback.clear_frames(tb)
        if error is not None and not isinstance(error, Exception):
            # an interrupt can strand a guard in a cycle (a generator that never finished);
            # collected later, its destructor would undo this restore, or clash with the
            # next compile's fake mode (torch aborts: "one already exists")
            gc.collect()
        try:
            self.state.restore()  # modes first: pushing and popping them flips the Python keys
        finally:
            _C._autograd._saved_tensors_hooks_set_tracing(self.hooks_tracing)
            self.keys.__exit__(None, None, None)


class _SetAside(threading.local):
    modes: tuple[Any, ...] = ()  # the user's dispatch modes a compile in this thread took off


_set_aside = _SetAside()


@contextlib.contextmanager
def user_modes_set_aside() -> Iterator[None]:
    """Inside `preserved()` (which puts the stack back): the user's dispatch modes off the stack
    for a compile, as torch.compile compiles without them (modes that must see every operator
    skip the frame before this; those left say `ignore_compile_internals()`, and see the compiled
    code's operators when it runs). Under an infra mode (fake, proxy: an outer trace) the stack
    is left as it is."""
    stack = _dispatch_stack()
    if any(mode.is_infra_mode() for mode in stack):
        yield
        return
    previous = _set_aside.modes
    for _ in stack:
        _C._pop_torch_dispatch_stack(None)
    _set_aside.modes = stack
    try:
        yield
    finally:
        _set_aside.modes = previous


@contextlib.contextmanager
def program_modes() -> Iterator[None]:
    """The modes `user_modes_set_aside` took off (and the function modes
    `function_mode_stack.handlers_set_aside` took off) back on the stack while a trace asks torch for
    the program's state (`torch._C._len_torch_dispatch_stack()`): the answer, guarded, is the one
    the compiled code's calls see."""
    modes = _set_aside.modes
    for mode in modes:
        _C._push_on_torch_dispatch_stack(mode)
    try:
        with function_mode_stack.program_stack_on():
            yield
    finally:
        for _ in modes:
            _C._pop_torch_dispatch_stack(None)


def _thread_local_state(tls: Any) -> dict[str, Any]:
    return _copied(tls.__dict__)


def _copied(state: dict[str, Any]) -> dict[str, Any]:
    """One level deep: the stacks these thread-locals hold are lists changed in place."""
    return {k: list(v) if isinstance(v, list) else v for k, v in state.items()}


def snapshot() -> TorchState:
    """The state now (thread-local parts: this thread's)."""
    return TorchState(
        flags=torch_flags.current(),
        autocast=tuple((torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _DEVICES),
        autocast_cache=torch.is_autocast_cache_enabled(),
        dispatch_stack=_dispatch_stack(),
        function_stack=function_mode_stack.current(),
        infra_modes=tuple(_C._get_dispatch_mode(k) for k in _INFRA_KEYS),
        only_lift_cpu=_C._only_lift_cpu_tensors(),
        thread_locals=tuple(_thread_local_state(t) for t in _THREAD_LOCALS),
        module_flags=tuple(getattr(m, n) for m, n in _MODULE_FLAGS),
        loggers=tuple(logging.getLogger(n).disabled for n in _LOGGERS),
    )
