"""Frames that run eagerly with their callees compiled, as torch.compile skips a frame.

torch.compile gives up on a frame it cannot capture (a graph break inside a loop, a construct
it does not trace) by running that frame as it is, while its C hook still compiles each function
the frame calls. stenograph has no hook (DESIGN decision 2): such a frame runs a copy of its code
whose calls go through a `CalleeRouter` (`bytecode.routed_calls`), which hands back, for each
callable, what compiled code would call at a graph break: the entry wrapper of a user function
or method, the compiled forward of a module, the thing itself for the rest. torch's own Python
(`nn.Linear`, `torch.nn.functional`, optimizers) is called as it is: torch.compile's hook skips
torch's files too. torch's untraced Python (`skipped_with_callees_compiled`: a helper handed a
user function) runs routed itself, since the hook still compiles the user functions it calls.
"""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from . import nested_caches
from .bytecode.routed_calls import route_calls
from .marks import eager_frame_of
from .variables.trace_rules import compiles_as_own_frame, is_trusted_module, skipped_with_callees_compiled

_ROUTED = "__stenograph_routed__"  # a function's (router, wrapper) last made for it


class CalleeRouter:
    """Maps a callable about to be called by a routed frame to what runs instead.

    `wrap_function(fn)` gives a user function's compiled wrapper, `module_call(module, *args)`
    runs a module's compiled forward; both compile with the frame's backend. A torch helper runs
    routed by `_helpers`, a router of the same callees that runs torch's helpers as they are: one
    level only, so the user functions a helper reaches through other torch functions (a
    `torch.func` transform's, under its interpreter levels) run eagerly, as they were traced.
    """

    def __init__(
        self,
        wrap_function: Callable[[types.FunctionType], Any],
        module_call: Callable[..., Any],
        *,
        routes_torch_helpers: bool = True,
    ) -> None:
        self._wrap_function = wrap_function
        self._module_call = module_call
        self._helpers = (
            CalleeRouter(wrap_function, module_call, routes_torch_helpers=False) if routes_torch_helpers else None
        )
        # the routed copy of each code object run eagerly with this router
        self._routed: weakref.WeakKeyDictionary[types.CodeType, types.CodeType] = weakref.WeakKeyDictionary()

    def __call__(self, callee: Any) -> Any:
        kind = type(callee)
        if kind is types.FunctionType:
            return self._function(callee)
        if kind is types.MethodType:
            function = callee.__func__
            if type(function) is not types.FunctionType:
                return callee
            wrapped = self._function(function)
            return callee if wrapped is function else types.MethodType(wrapped, callee.__self__)
        if isinstance(callee, torch.nn.Module) and not _torch_code(type(callee).forward):
            return types.MethodType(self._module_call, callee)
        return callee

    def _function(self, fn: types.FunctionType) -> Any:
        made = fn.__dict__.get(_ROUTED)
        # `functools.wraps` copies `__dict__`: a decorator's wrapper holds its function's entry
        if made is not None and made[0] is self and made[1] is fn:
            return made[2]
        frame = eager_frame_of(fn)
        if frame is not None:
            wrapped = self.running_eagerly(frame)
        elif compiles_as_own_frame(fn) and not _torch_code(fn):
            wrapped = self._wrap_function(fn)
        elif self._helpers is not None and skipped_with_callees_compiled(fn):
            wrapped = self._helpers.running_eagerly(fn)
        else:
            wrapped = fn
        fn.__dict__[_ROUTED] = (self, fn, wrapped)
        return wrapped

    def running_eagerly(self, fn: types.FunctionType) -> Callable[..., Any]:
        """A callable running `fn` eagerly with its calls routed (`disable(fn, recursive=False)`)."""

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.routed(fn)(*args, **kwargs)

        return functools.update_wrapper(call, fn)

    def routed(self, fn: types.FunctionType) -> types.FunctionType:
        """`fn` with its code's calls routed through this router (same globals, closure and
        defaults), to run eagerly in place of `fn`."""
        nested_caches.adopt(fn)  # the closures it makes are new each call; their caches are not
        code = self._routed.get(fn.__code__)
        if code is None:
            code = self._routed[fn.__code__] = route_calls(fn.__code__, self)
        routed = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        routed.__kwdefaults__ = fn.__kwdefaults__
        routed.__qualname__ = fn.__qualname__
        return routed


def _torch_code(fn: Any) -> bool:
    """Whether `fn` is torch's own Python (`torch.nn.functional`, `nn.Linear.forward`, an
    optimizer's `step`): torch.compile's hook skips such frames, so they run as they are."""
    return is_trusted_module(getattr(fn, "__globals__", {}).get("__name__") or "")
