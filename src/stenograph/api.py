"""The public API: compile(), optimize(), OptimizedModule, disable(), run(), reset(), ...

Names and signatures mirror `torch.compile` / `torch._dynamo`, so `import stenograph as dynamo`
reads naturally.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import operator
import os
import pickle
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

from . import config, deferred_release, entry, events, process_state, warm
from . import stance as stance_state
from .backends.call_marks import marking_calls, wants_call_marks
from .backends.registry import get_default_backend, lookup_backend, resolve_backend
from .backends.wrapping import WrappedBackend
from .errors import RecompileError, StenographError, UserError
from .graph.codegen import TRANSFORMED_MARK
from .marks import (
    COMPILE_ENTRY_ATTR,
    allow_in_graph,
    assume_constant_result,
    disallow,
    eager_frame_of,
    error_on_graph_break,
    forbid,
    graph_break,
    is_allowed_in_graph,
    is_compiling,
    is_disabled,
    is_exporting,
    mark_disabled,
    mark_run_only,
    nested_compile_region,
    nonstrict_trace,
    substitute_in_graph,
    torch_substitute,
)
from .module_hooks import call_with_hooks, has_module_hooks
from .regions import region_for
from .stance import STANCES, Stance
from .variables.class_lookup import class_attribute
from .variables.trace_rules import is_graph_op


def _resolve_backend(backend: Any, mode: str | None, options: dict | None, name: str | None = None) -> tuple[Any, str]:
    """(compiler function, display name) for compile()'s backend/mode/options/name arguments."""
    compiler = resolve_backend(backend, mode=mode, options=options, name=name)
    label = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
    if mode is not None:
        label = f"{label}(mode={mode!r})"
    return compiler, label


def compile(  # noqa: A001 - mirrors torch.compile
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: Any = None,
    mode: str | None = None,
    options: dict | None = None,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    shapes_spec: Any = None,
) -> Any:
    """Compile a function or nn.Module; usable bare, with arguments, or as a plain call. Without
    `backend`, the default backend (`set_default_backend`, initially "inductor").

    `recompile_limit` caps the entries each frame this call compiles keeps (None:
    `config.recompile_limit`); `isolate_recompiles=True` keeps this call's entries apart from
    other calls compiling the same function (`regions`). `name` names the regions Inductor
    compiles (torch's `compile_region_name`). `shapes_spec` is not implemented (None only)."""
    if backend is None:
        backend = get_default_backend()
    recompile_limit = _checked_arguments(fullgraph, dynamic, name, recompile_limit, isolate_recompiles, shapes_spec)
    guard_filter_fn = None
    if options and "guard_filter_fn" in options:
        options = dict(options)
        guard_filter_fn = _checked_guard_filter(options.pop("guard_filter_fn"))
    compiler, label = _resolve_backend(backend, mode, options or None, name)
    if guard_filter_fn is not None:
        compiler = _GuardHooks(compiler, guard_filter_fn=guard_filter_fn)
    # what a pickled OptimizedModule needs to compile itself again after loading
    spec = _CompileSpec(backend, mode, options, fullgraph, dynamic, name, recompile_limit, isolate_recompiles)

    def decorate(target: Any) -> Any:
        if disable or _disabled_by_environment():
            return target
        warm.prepare(compiler)
        # per target: torch.compile's decorator form compiles each target as a call of its own
        region = region_for(compiler, recompile_limit, isolate_recompiles)
        return _compile_target(target, region, label, fullgraph, dynamic, spec)

    if model is None:
        return decorate
    return decorate(model)


def _checked_arguments(
    fullgraph: Any, dynamic: Any, name: Any, recompile_limit: Any, isolate_recompiles: Any, shapes_spec: Any
) -> int | None:
    """Refuse compile() arguments of the wrong kind (torch takes some of them and fails later, or
    never); the recompile limit as an int."""
    if dynamic not in (None, False, True):
        raise TypeError(f"stenograph.compile(dynamic=...) takes None, True or False, not {dynamic!r}")
    for argument, value in (("fullgraph", fullgraph), ("isolate_recompiles", isolate_recompiles)):
        if not isinstance(value, bool):
            raise TypeError(f"stenograph.compile({argument}=...) takes a bool, not {value!r}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"stenograph.compile(name=...) takes a str or None, not {name!r}")
    if shapes_spec is not None:
        raise NotImplementedError(
            "stenograph.compile(shapes_spec=...) is not implemented: torch's ShapesSpec makes the sizes it "
            "names unbacked, and stenograph gives no input an unbacked size; pass shapes_spec=None and "
            "declare dynamic sizes with dynamic=True or stenograph.mark_dynamic(tensor, dim, min=, max=)"
        )
    if recompile_limit is None:
        return None
    if isinstance(recompile_limit, bool) or not hasattr(type(recompile_limit), "__index__"):
        raise TypeError(f"stenograph.compile(recompile_limit=...) takes an int or None, not {recompile_limit!r}")
    limit = operator.index(recompile_limit)
    if limit < 1:
        raise ValueError(
            f"stenograph.compile(recompile_limit=...) must be at least 1 (the entries each frame may keep), "
            f"not {limit}; to run the function eagerly, pass disable=True"
        )
    return limit


setattr(compile, COMPILE_ENTRY_ATTR, True)  # traced code calling it gets the function back (marks)


# set to "1", `compile()` returns its target unchanged (torch's two names, as torch.compile reads them)
_DISABLING_VARIABLES = ("STENOGRAPH_DISABLE", "TORCHDYNAMO_DISABLE", "TORCH_COMPILE_DISABLE")


def _disabled_by_environment() -> bool:
    return any(os.environ.get(name) == "1" for name in _DISABLING_VARIABLES)


def _checked_guard_filter(fn: Any) -> Callable:
    if not callable(fn):
        raise TypeError(f"options['guard_filter_fn'] must be callable, not {type(fn).__name__}")
    return fn


# torch._dynamo.optimize's arguments that stenograph does not take, and why
_OPTIMIZE_NOT_TAKEN = {
    "package": "stenograph keeps no compiled code between processes",
}


def optimize(
    backend: Any = "inductor",
    *,
    nopython: bool = False,
    error_on_graph_break: bool | None = None,
    guard_export_fn: Callable[[Any], None] | None = None,
    guard_fail_fn: Callable[[GuardFail], None] | None = None,
    guard_filter_fn: Callable[[list], list[bool]] | None = None,
    disable: bool = False,
    dynamic: bool | None = None,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    shapes_spec: Any = None,
    **not_taken: Any,
) -> _Optimize:
    """`torch._dynamo.optimize` (torch 2.13's arguments; its behaviour is the contract): a
    decorator compiling what it is applied to with `backend`.

    `nopython=True` (or `error_on_graph_break=True`) makes a graph break an error, as
    `compile(fullgraph=True)`; `disable=True` leaves the target as it is. `guard_fail_fn` is
    called with a `GuardFail(reason, orig_code)` each time a frame this compiles is compiled again
    because its newest entry's guards failed (the reason prefixed by that entry's compile id, as
    torch's); `guard_export_fn` with the `ExportGuards` of each entry that holds a graph (their
    `check()` takes the entry's guard arguments: a closure's cells first). An exception either
    raises is a warning, as in torch. `guard_filter_fn` is `compile(options={"guard_filter_fn":
    ...})`'s (`guards/guard_filter.py`); `recompile_limit`, `isolate_recompiles` and `shapes_spec`
    are `compile()`'s. Used as a context manager it raises (see `_Optimize`)."""
    if not_taken:
        reasons = "; ".join(
            f"{k}: {_OPTIMIZE_NOT_TAKEN.get(k, 'not an argument of torch._dynamo.optimize')}" for k in not_taken
        )
        raise TypeError(f"stenograph.optimize() does not take {', '.join(sorted(not_taken))} ({reasons})")
    if callable(backend) and not isinstance(backend, str) and isinstance(backend, torch.nn.Module):
        raise TypeError("optimize() takes a backend; use optimize(backend)(model)")
    if disable or _disabled_by_environment():
        return _Optimize(lambda target: target, disabled=True)
    if guard_fail_fn is not None or guard_export_fn is not None or guard_filter_fn is not None:
        backend = _GuardHooks(
            lookup_backend(backend) if isinstance(backend, str) else backend,
            guard_fail_fn,
            guard_export_fn,
            _checked_guard_filter(guard_filter_fn) if guard_filter_fn is not None else None,
        )
    return _Optimize(
        compile(
            backend=backend,
            fullgraph=nopython or bool(error_on_graph_break),
            dynamic=dynamic,
            recompile_limit=recompile_limit,
            isolate_recompiles=isolate_recompiles,
            shapes_spec=shapes_spec,
        )
    )


def optimize_assert(backend: Any = "inductor", *, dynamic: bool | None = None) -> _Optimize:
    """`torch._dynamo.optimize_assert`: `optimize(backend, nopython=True)`."""
    return optimize(backend, nopython=True, dynamic=dynamic)


class _Optimize:
    """What `optimize()` returns: a decorator. Used as a context manager it raises, as torch's
    does while `config.raise_on_ctx_manager_usage` is set (RuntimeError); torch without it
    compiles every frame the block runs, through CPython's frame-evaluation hook, which
    stenograph (pure Python) does not have, so then it raises NotImplementedError."""

    def __init__(self, decorate: Callable[[Any], Any], disabled: bool = False) -> None:
        self._decorate = decorate
        self._disabled = disabled

    def __call__(self, target: Any) -> Any:
        return self._decorate(target)

    def __enter__(self) -> None:
        if self._disabled:  # `optimize(..., disable=True)` is a no-op, as a block too
            return
        if config.raise_on_ctx_manager_usage:
            raise RuntimeError(
                "stenograph.optimize(...) is used with a context manager; use it as a decorator "
                "(@optimize(...)) or call it on the function (optimize(...)(fn))"
            )
        raise NotImplementedError(
            "stenograph.optimize(...) cannot be a context manager: compiling the frames a block runs needs "
            "CPython's frame-evaluation hook, which stenograph does not use; decorate the functions instead"
        )

    def __exit__(self, *exc: object) -> None:
        return None


class GuardFail(NamedTuple):
    """What `optimize(guard_fail_fn=...)` is called with (torch's `GuardFail`): why the newest
    entry of `orig_code` did not accept a call."""

    reason: str
    orig_code: types.CodeType


class _GuardHooks(WrappedBackend):
    """A backend carrying `optimize()`'s guard hooks (and the `guard_filter_fn` of `optimize()`
    or of `compile(options=...)`, which `frame_compiler` applies before an entry is built):
    compiled caches are per backend object, so the frames compiled through it are told apart by
    it (`_on_compile_event`)."""

    def __init__(
        self,
        compiler: Any,
        guard_fail_fn: Callable | None = None,
        guard_export_fn: Callable | None = None,
        guard_filter_fn: Callable | None = None,
    ) -> None:
        super().__init__(compiler)
        self.guard_fail_fn = guard_fail_fn
        self.guard_export_fn = guard_export_fn
        self.guard_filter_fn = guard_filter_fn


def _hooks_of(backend: Any) -> _GuardHooks | None:
    """The guard hooks a cache's backend carries, under the region wrapping them if any."""
    while isinstance(backend, WrappedBackend):
        if isinstance(backend, _GuardHooks):
            return backend
        backend = backend.compiler
    return None


def _hooked_cache(event: events.CompileEvent, hook: str) -> Any:
    """The hooks of the cache `event` is about, if they include `hook` (a code compiled under
    several backends has a cache for each: the one that recompiles has just recorded the reason,
    the one that compiled holds the entry)."""
    for cache in entry.all_caches():
        hooks = _hooks_of(cache.backend)
        if cache.code is not event.code or hooks is None or getattr(hooks, hook) is None:
            continue
        if isinstance(event, events.FrameCompiled) and cache.entries and cache.entries[-1] is event.entry:
            return hooks
        if isinstance(event, events.Recompile) and cache.recompile_reasons[-1:] == [event.reason]:
            return hooks
    return None


def _call_hook(fn: Callable, argument: Any, label: str) -> None:
    try:
        fn(argument)
    except Exception as e:  # a hook's failure must not change what the call does (torch logs it)
        warnings.warn(
            f"stenograph: {fn!r} raised {type(e).__name__}: {e} (for {label})", entry.StenographWarning, stacklevel=2
        )


def _on_compile_event(event: events.CompileEvent) -> None:
    """torch's recompile switch and `optimize()`'s guard hooks, where the entry wrapper
    publishes what it does: a Recompile before it compiles again, FrameCompiled after."""
    if isinstance(event, events.Recompile):
        hooks = _hooked_cache(event, "guard_fail_fn")
        if hooks is not None:
            reason = f"{event.previous}: {event.reason}" if event.previous is not None else event.reason
            _call_hook(hooks.guard_fail_fn, GuardFail(reason, event.code), event.label)
        if config.error_on_recompile:
            raise RecompileError(
                f"stenograph: {event.label} would compile again (config.error_on_recompile is set): {event.reason}"
            )
    elif isinstance(event, events.FrameCompiled) and event.entry.graph is not None:
        hooks = _hooked_cache(event, "guard_export_fn")
        if hooks is not None:
            _call_hook(hooks.guard_export_fn, _entry_guards(event.entry), event.label)


def _entry_guards(cache_entry: Any) -> Any:
    """A compiled entry's checks as `ExportGuards`, called with the entry's guard arguments."""
    # cycle: export imports api (its throwaway compile lists a function's graph breaks)
    from .export import ExportGuards

    guard_set = cache_entry.guard_set
    explainer = guard_set.build_explainer(cache_entry.code, cache_entry.like, cache_entry.label)
    return ExportGuards([check.text for check in guard_set.ordered()], cache_entry.guard, explainer, ())


events.subscribe(_on_compile_event)


class _CompileSpec(NamedTuple):
    """compile()'s arguments as the user gave them (a backend by name or object, not resolved)."""

    backend: Any
    mode: str | None
    options: dict | None
    fullgraph: bool
    dynamic: bool | None
    name: str | None = None
    recompile_limit: int | None = None
    isolate_recompiles: bool = False


def _compile_target(
    target: Any, compiler: Any, name: str, fullgraph: bool, dynamic: bool | None, spec: _CompileSpec | None = None
) -> Any:
    # `disable(f, recursive=False)` compiled: f itself, as torch.compile unwraps it
    target = eager_frame_of(target) or target
    if isinstance(target, DisabledModule) or is_disabled(target):
        return target  # disabled stays disabled, as torch's does when compiled
    if isinstance(target, OptimizedModule):
        target = target._orig_mod
    if isinstance(target, torch.jit.ScriptModule):
        raise UserError(
            f"torch.compile does not support compiling torch.jit.script or torch.jit.freeze models directly, "
            f"and neither does stenograph: {type(target).__name__}'s forward is TorchScript, not Python "
            "bytecode. Compile the original nn.Module instead"
        )
    if isinstance(target, torch.nn.Module):
        return OptimizedModule(target, compiler, name, fullgraph, dynamic, spec=spec)
    if isinstance(target, type):
        return _compile_class(target, compiler, name, fullgraph, dynamic)
    original = getattr(target, "__stenograph_original__", None)
    if original is not None:
        target = original
    if isinstance(target, types.MethodType) and isinstance(target.__func__, types.FunctionType):
        bound_self = target.__self__
        wrapper = _user_entry(target.__func__, compiler, name, fullgraph, dynamic)
        return types.MethodType(wrapper, bound_self)
    if isinstance(target, types.FunctionType) and torch_substitute(target) is None:
        return _user_entry(target, compiler, name, fullgraph, dynamic)
    if callable(target):
        call = type(target).__call__
        if isinstance(call, types.FunctionType) and not is_graph_op(target):
            return types.MethodType(_user_entry(call, compiler, name, fullgraph, dynamic), target)
        # a C function (torch.sin, an operator), an operator of `torch.ops` (whose Python
        # `__call__` only forwards to C), or torch's `substitute_in_graph` stand-in for one:
        # compile a Python call of it. torch.compile has no frame of it to trace, so it
        # never fails whatever `fullgraph` says: a call stenograph cannot trace runs eagerly
        wrapper = functools.update_wrapper(_calling(target), target, updated=())
        return _user_entry(wrapper, compiler, name, False, dynamic)
    raise TypeError(
        f"stenograph.compile() needs a function or nn.Module, got {type(target).__qualname__} ({target!r:.60})"
    )


def _user_entry(fn: types.FunctionType, compiler: Any, name: str, fullgraph: bool, dynamic: bool | None) -> Any:
    """The entry wrapper of a function the user compiled; it marks calls for CUDA graphs."""
    wrapper = entry.entry_wrapper(fn, compiler, name, fullgraph, dynamic)
    return marking_calls(wrapper) if wants_call_marks(compiler) else wrapper


def _compile_class(cls: type, compiler: Any, name: str, fullgraph: bool, dynamic: bool | None) -> type:
    """`compile` on a class, as torch's: its `__call__` is compiled (an `nn.Module`'s is
    `nn.Module.__call__`, so forward and hooks are traced together), changing the class in place
    and returning it, so it works as a class decorator; subclasses inherit the compiled call."""
    call = class_attribute(cls, "__call__", None)
    if not isinstance(call, types.FunctionType):
        raise TypeError(
            f"stenograph.compile() on a class compiles calls of its instances: {cls.__qualname__} needs a "
            "Python __call__ (an nn.Module has one)"
        )
    cls.__call__ = _user_entry(call, compiler, name, fullgraph, dynamic)
    return cls


def _calling(target: Callable) -> Callable:
    """A Python function calling `target`, so a C callable can be compiled like user code."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return target(*args, **kwargs)

    return call


_DELEGATED = (
    "state_dict",
    "load_state_dict",
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "children",
    "named_children",
    "get_submodule",
    "get_parameter",
    "get_buffer",
    "zero_grad",
    "extra_repr",
    "register_buffer",
    "register_parameter",
    "add_module",
    "register_module",
    "_apply",
    "apply",
    "requires_grad_",
)


class OptimizedModule(torch.nn.Module):
    """A compiled nn.Module that behaves like the original (attributes, state_dict keys, modes).

    The original module is not registered as a submodule, so `state_dict()` and
    `named_parameters()` keep the original keys; they and other structural methods delegate to it.
    The wrapper itself is an nn.Module of its own for what is applied to it: its class may be
    replaced (FSDP2's `fully_shard` does), hooks registered on it run around the compiled forward,
    and `named_modules()` lists it, under the original's name, just before the original.
    """

    def __init__(
        self,
        mod: torch.nn.Module,
        compiler: Any,
        backend_name: str,
        fullgraph: bool,
        dynamic: bool | None = None,
        *,
        spec: _CompileSpec | None = None,
    ) -> None:
        super().__init__()
        self._hold(mod, spec)
        forward = type(mod).forward
        if not isinstance(forward, types.FunctionType):
            raise TypeError(f"{type(mod).__qualname__}.forward is not a Python function")
        wrapper = _user_entry(forward, compiler, backend_name, fullgraph, dynamic)
        object.__setattr__(self, "_compiled_forward", wrapper)
        object.__setattr__(self, "_entry_options", (compiler, backend_name, fullgraph, dynamic))
        call = class_attribute(type(mod), "__call__")
        if call is not torch.nn.Module.__call__:
            # the class's own __call__ is what calling the module runs: compile that
            if not isinstance(call, types.FunctionType):
                raise TypeError(f"{type(mod).__qualname__}.__call__ is not a Python function")
            object.__setattr__(self, "_compiled_call", _user_entry(call, compiler, backend_name, fullgraph, dynamic))

    def _hold(self, mod: torch.nn.Module, spec: _CompileSpec | None) -> None:
        """Wrap `mod`: its attributes (`training` too) are read through the wrapper."""
        del self.__dict__["training"]
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_compile_spec", spec)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        mod = self._orig_mod
        if "_compiled_call" in self.__dict__:
            return self._compiled_call(mod, *args, **kwargs)
        if "forward" in mod.__dict__:  # an instance's own forward replaces the class's
            compiled = self._instance_forward(mod.__dict__["forward"])
            if has_module_hooks(mod):
                return call_with_hooks(mod, lambda _mod, *a, **k: compiled(*a, **k), args, kwargs)
            return compiled(*args, **kwargs)
        if has_module_hooks(mod):
            return call_with_hooks(mod, self._compiled_forward, args, kwargs)
        return self._compiled_forward(mod, *args, **kwargs)

    def _instance_forward(self, forward: Callable) -> Callable:
        """The compiled entry of a forward set on the module instance, kept while it stays set
        (a function is compiled as itself, any other callable through a function calling it)."""
        held = self.__dict__.get("_held_instance_forward")
        if held is None or held[0] is not forward:
            target = forward if isinstance(forward, types.FunctionType) else _calling(forward)
            held = (forward, _user_entry(target, *self._entry_options))
            object.__setattr__(self, "_held_instance_forward", held)
        return held[1]

    def __getattr__(self, name: str) -> Any:
        if name in ("_orig_mod", "_compiled_forward"):
            return self.__dict__[name]
        return getattr(self.__dict__["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__ or _is_data_descriptor(class_attribute(type(self), name)):
            # the wrapper's own state, or what its class defines for it (`__class__`, properties)
            object.__setattr__(self, name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._orig_mod, name)

    def named_modules(
        self, memo: set[torch.nn.Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.nn.Module]]:
        """The wrapper, then the original's modules under the same names: a walk from a parent
        meets the wrapper (where `fully_shard` keeps its state) and the original (isinstance
        checks on the user's classes still find it)."""
        if memo is None:
            memo = set()
        if self not in memo:
            if remove_duplicate:
                memo.add(self)
            yield prefix, self
        yield from self._orig_mod.named_modules(memo, prefix, remove_duplicate)

    def train(self, mode: bool = True) -> OptimizedModule:
        self._orig_mod.train(mode)
        return self

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))

    def __len__(self) -> int:
        """The original's length (a `ModuleList`, `Sequential`, `ModuleDict`); others have none."""
        return len(self._orig_mod)

    def __bool__(self) -> bool:
        """The original's truth: an empty `ModuleList` is false, a module without a length true."""
        return bool(self._orig_mod)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"

    def __reduce__(self) -> tuple[Any, tuple]:
        """Pickled as the original module and compile()'s arguments: loading compiles it again
        (lazily, on its first call), as torch.compile's modules do. Compiled code is not saved."""
        spec = self.__dict__["_compile_spec"]
        if spec is None:
            raise pickle.PicklingError(
                "this OptimizedModule was not made by stenograph.compile(); pickle its _orig_mod instead"
            )
        return (_compile_again, (self._orig_mod, *spec))

    def __deepcopy__(self, memo: dict) -> OptimizedModule:
        """A compiled deep copy of the original module, with the same backend object (a counting
        backend keeps counting); compiled code is not copied."""
        rebuild, (mod, *arguments) = self.__reduce__()
        return rebuild(copy.deepcopy(mod, memo), *arguments)


# the code of the wrappers running disabled functions, modules and classes' calls: inside one,
# no compiled call is in progress (torch's disabled functions unset its frame callback)
_DISABLED_RUNNERS: set[types.CodeType] = set()


class DisabledModule(OptimizedModule):
    """`disable(module)`: calling it runs the module as eager does (its hooks included), also
    from compiled code, where the call is a graph break, as torch's disabled modules do. It
    wraps the module as `OptimizedModule` does (attributes, state_dict keys, parameters).

    Its forward is an attribute of the instance, not of the class: a module called at a graph
    break whose class has its forward is compiled as a frame of its own."""

    def __init__(self, mod: torch.nn.Module, reason: str | None = None) -> None:
        torch.nn.Module.__init__(self)
        self._hold(mod, None)
        object.__setattr__(self, "_disable_reason", reason)

        def forward(*args: Any, **kwargs: Any) -> Any:
            return mod(*args, **kwargs)

        _DISABLED_RUNNERS.add(forward.__code__)

        mark_disabled(forward, reason)
        object.__setattr__(self, "forward", forward)
        object.__setattr__(self, "_compiled_forward", forward)

    def __reduce__(self) -> tuple[Any, tuple]:
        return (DisabledModule, (self._orig_mod, self._disable_reason))

    def __repr__(self) -> str:
        return f"DisabledModule({self._orig_mod!r})"


def _is_data_descriptor(attribute: Any) -> bool:
    return hasattr(type(attribute), "__set__")


def _compile_again(mod: torch.nn.Module, *arguments: Any) -> OptimizedModule:
    """Unpickling an OptimizedModule: compile the loaded module with the arguments it had (an
    isolated one gets a region of its own, as another compile() call would)."""
    return compile(mod, **_CompileSpec(*arguments)._asdict())


def _delegate(name: str) -> Callable:
    def method(self: OptimizedModule, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._orig_mod, name)(*args, **kwargs)
        return self if result is self._orig_mod else result

    method.__name__ = name
    method.__doc__ = f"Delegates to the original module's {name}()."
    return method


for _name in _DELEGATED:
    setattr(OptimizedModule, _name, _delegate(_name))


def disable(fn: Any = None, recursive: bool = True, *, reason: str | None = None) -> Any:
    """Run `fn` eagerly, also when it is called from compiled code (a graph break there, whose
    reason quotes `reason`). As torch's: a function gives a disabled wrapper; an `nn.Module`
    instance a `DisabledModule` (its hooks run eagerly too); a class is changed in place so that
    calls of its instances are disabled (`@disable` on a class). With `recursive=False` only a
    function's own frame runs eagerly: called from compiled code, it runs with the functions it
    calls compiled; compiled itself, it is compiled like `fn` (torch.compile unwraps it)."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if isinstance(fn, torch.nn.Module):
        return DisabledModule(fn, reason)
    if isinstance(fn, type):
        return _disable_class(fn, reason)
    if not callable(fn):
        raise TypeError(f"stenograph.disable() needs a callable, got {type(fn).__qualname__}")
    original = getattr(fn, "__stenograph_original__", fn)

    @functools.wraps(original)
    def eager(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    _DISABLED_RUNNERS.add(eager.__code__)

    frame_only = not recursive and isinstance(original, types.FunctionType)
    mark_disabled(eager, reason, original if frame_only else None)
    return eager


def _disable_class(cls: type, reason: str | None) -> type:
    """Calls of `cls`'s instances run eagerly: its `__call__` (an nn.Module's, which runs the
    hooks and forward) replaced by a disabled one, as torch patches it."""
    call = class_attribute(cls, "__call__", None)
    if call is None:
        raise TypeError(
            f"stenograph.disable() on a class disables calls of its instances; {cls.__qualname__}'s "
            "instances are not callable (disable the functions or methods instead)"
        )

    def eager_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self, *args, **kwargs)

    _DISABLED_RUNNERS.add(eager_call.__code__)

    mark_disabled(eager_call, reason)
    cls.__call__ = eager_call
    return cls


# torch._dynamo.skip's name for it
skip = disable


def disallow_in_graph(fn: Any) -> Any:
    """Make every call of `fn` a graph break (it runs eagerly between graphs), as
    `torch._dynamo.disallow_in_graph` does. `fn` must be something stenograph records as a graph
    op (a torch function such as `torch.sub`, or one marked `allow_in_graph`); a Python function
    is traced into instead, and `disable` is what keeps it out of graphs (such a function raises
    RuntimeError, as torch's). Survives `reset()`; `allow_in_graph(fn)` undoes it. A list or
    tuple marks each item."""
    if isinstance(fn, (list, tuple)):
        return [disallow_in_graph(f) for f in fn]
    if not callable(fn):
        raise TypeError(f"stenograph.disallow_in_graph() needs a callable, got {type(fn).__qualname__}")
    if not (is_graph_op(fn) or is_allowed_in_graph(fn)):
        # torch's error and wording, then what to do instead
        raise RuntimeError(
            "disallow_in_graph is expected to be used on an already allowed callable (like torch.* ops): "
            f"a function stenograph records as a graph op, or one marked allow_in_graph; "
            f"{getattr(fn, '__qualname__', fn)!r} is traced into instead: use stenograph.disable() to run it eagerly"
        )
    disallow(fn)
    return fn


def forbid_in_graph(fn: Any) -> Any:
    """Make tracing a call of `fn` an error: compiling code that calls it raises
    `AssertionError` ("Attempt to trace forbidden callable ..."), as torch._dynamo's
    `forbid_in_graph` does, instead of tracing it or breaking the graph (`disallow_in_graph`).
    For functions that must never run inside compiled code. Calls from eager code, and from
    code stenograph runs at a graph break, are not affected. A list or tuple marks each item."""
    if isinstance(fn, (list, tuple)):
        return [forbid_in_graph(f) for f in fn]
    if not callable(fn):
        raise TypeError(f"stenograph.forbid_in_graph() needs a callable, got {type(fn).__qualname__}")
    forbid(fn)
    return fn


class _RunOnly(contextlib.ContextDecorator):
    """`run()` as a context manager or decorator: no compiles inside it."""

    def __call__(self, fn: Callable) -> Any:  # type: ignore[override]
        return run(fn)  # the decorated function is `run(fn)`'s wrapper, which traced code inlines

    def __enter__(self) -> _RunOnly:
        self._block = entry.run_only.on()
        self._block.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._block.__exit__(*exc)


def run(fn: Callable | None = None) -> Any:
    """Run compiled code already cached and never compile (`torch._dynamo.run`): a call that no
    cached entry accepts runs eagerly, and nothing is added to any cache. `run(compiled_fn)`
    returns such a function; `run()` is a context manager and decorator applying it to every
    compiled function called inside (resume functions included)."""
    if fn is None:
        return _RunOnly()
    if not callable(fn):
        raise TypeError(f"stenograph.run() needs a callable, got {type(fn).__qualname__}")

    def running(*args: Any, **kwargs: Any) -> Any:
        with entry.run_only.on():
            return fn(*args, **kwargs)

    if not isinstance(fn, torch.nn.Module):
        functools.update_wrapper(running, fn)
        if isinstance(fn, types.FunctionType):
            mark_run_only(running, fn)
    return running


class set_stance:  # noqa: N801 - mirrors torch.compiler.set_stance, a class used as a function
    """Set what calls of compiled code do, process-wide (`torch.compiler.set_stance`): as a
    function call (in force until changed), a context manager or a decorator (in force while
    the block or function runs).

    - "default": compile on a miss, run cached code when its guards pass; `force_backend`
      compiles and runs every compiled function with that backend instead of its own;
    - "force_eager": run every compiled function eagerly (cached code is ignored, nothing compiles);
    - "eager_on_recompile": run cached code whose guards pass, and eagerly where none does
      (nothing compiles);
    - "fail_on_recompile": run cached code whose guards pass, and raise `RecompileError` where
      none does;
    - "eager_then_compile": a function's first call runs eagerly, later ones compile; the
      sizes of its tensor arguments (and its int and float arguments) that differ between the
      first call and the one compiling are symbolic from that first compile on;
    - "aot_eager_then_compile": as "eager_then_compile", but the first call compiles with the
      `aot_eager` backend (an entry that later calls passing its guards run); the next miss
      compiles with the function's own backend.

    Setting it in code being traced raises AssertionError (it is marked `forbid_in_graph`), and
    calling it from compiled code at a graph break RuntimeError, as torch's do.
    """

    def __init__(
        self,
        stance: str = "default",
        *,
        skip_guard_eval_unsafe: bool = False,
        force_backend: Any = None,
    ) -> None:
        self.stance = _make_stance(stance, skip_guard_eval_unsafe, force_backend)
        self.previous = _put_in_force(self.stance)

    def __enter__(self) -> None:
        _put_in_force(self.stance)

    def __exit__(self, *exc: Any) -> None:
        _put_in_force(self.previous)

    def __call__(self, fn: Callable) -> Callable:
        """As a decorator: the stance holds only while `fn` runs (each call sets it anew and
        restores the one it found, so nested and recursive calls unwind correctly)."""
        _put_in_force(self.previous)
        if not callable(fn):
            raise TypeError(f"set_stance(...) decorates a callable, got {type(fn).__qualname__}")
        wanted = self.stance

        @functools.wraps(fn)
        def with_stance(*args: Any, **kwargs: Any) -> Any:
            found = _put_in_force(wanted)
            try:
                return fn(*args, **kwargs)
            finally:
                _put_in_force(found)

        return with_stance


def _make_stance(name: Any, skip_guard_eval_unsafe: bool, force_backend: Any) -> Stance:
    if not isinstance(name, str):
        raise TypeError(
            f"set_stance() takes a stance name (str), got {type(name).__qualname__}; "
            "as a decorator write @set_stance('force_eager')"
        )
    if name not in STANCES:
        raise ValueError(f"unknown stance {name!r}; the stances are {', '.join(STANCES)}")
    if skip_guard_eval_unsafe:
        raise NotImplementedError(
            "set_stance(skip_guard_eval_unsafe=True) is not implemented: stenograph checks every guard of "
            "each entry it tries (one generated Python function per entry); pass skip_guard_eval_unsafe=False"
        )
    if force_backend is None:
        return Stance(name)
    if name != "default":
        raise RuntimeError(f"set_stance(force_backend=...) needs the 'default' stance, not {name!r}")
    compiler, backend_name = _resolve_backend(force_backend, None, None)
    return Stance(name, compiler, backend_name)


def _put_in_force(wanted: Stance) -> Stance:
    """Make `wanted` the stance; the one it replaces. Refused inside a compiled call, where a
    change would hold for part of it: tracing a call is an error (forbidden, as torch's), and a
    call at a graph break or in a frame run eagerly raises."""
    if _in_compiled_call():
        raise RuntimeError(
            "attempted to set_stance in a torch.compile region: stenograph.set_stance() was called inside "
            "compiled code; call it outside compiled code"
        )
    return stance_state.swap(wanted)


def _in_compiled_call() -> bool:
    """Whether this thread runs inside a compiled function's call that may compile, its code
    compiled or run eagerly (at a graph break, or a frame `skip_frame()` or a failed compile
    left eager), and not inside a disabled function called from it: where torch.compile's
    frame callback is set, so torch refuses a new stance. `force_eager`, `eager_on_recompile`
    and `run()` leave the callback unset, as a disabled function does."""
    if entry.run_only.active or not stance_state.current.stance.compiles:
        return False
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code in _DISABLED_RUNNERS:
            return False
        if TRANSFORMED_MARK in frame.f_globals or entry.is_entry_wrapper_code(code):
            return True
        frame = frame.f_back
    return False


forbid(_put_in_force)
forbid(set_stance)


def cudagraph_mark_step_begin() -> None:
    """Tell Inductor's CUDA-graph trees that a new iteration begins (torch.compiler's), where
    the call marks of a compiled function do not say it: tensors a previous iteration's replay
    returned may then be overwritten."""
    # Inductor is slow to import: only when asked
    from torch._inductor import cudagraph_trees

    cudagraph_trees.mark_step_begin()


def reset() -> None:
    """Forget every compiled entry of every function (the next calls compile again), and all
    other process state registered in `process_state` (resume functions, module callers, event
    numbering). Memos derived from code objects (decoded instructions) are kept."""
    held = entry.compiles_begun or any(process_state.sizes().values())
    process_state.clear_all()
    if held:
        # what the dropped entries made (generated sources, torch's cache entries) goes with
        # them, entries in reference cycles included (a full collection: about 0.2 s with torch
        # loaded, so not when nothing was compiled or held since the last one)
        gc.collect()
        entry.compiles_begun = 0
    deferred_release.run_pending()


__all__ = [
    "DisabledModule",
    "GuardFail",
    "OptimizedModule",
    "StenographError",
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "cudagraph_mark_step_begin",
    "disable",
    "disallow_in_graph",
    "error_on_graph_break",
    "graph_break",
    "is_compiling",
    "is_exporting",
    "nested_compile_region",
    "nonstrict_trace",
    "optimize",
    "optimize_assert",
    "reset",
    "run",
    "set_stance",
    "skip",
    "substitute_in_graph",
]
