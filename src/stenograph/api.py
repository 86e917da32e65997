"""The public API: compile(), optimize(), OptimizedModule, disable(), run(), reset(), ...

Names and signatures mirror `torch.compile` / `torch._dynamo`, so `import stenograph as dynamo`
reads naturally.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import pickle
import types
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

from . import entry, process_state
from . import stance as stance_state
from .backends.call_marks import marking_calls, wants_call_marks
from .backends.registry import get_default_backend, resolve_backend
from .errors import StenographError
from .graph.codegen import in_compiled_code
from .marks import (
    allow_in_graph,
    assume_constant_result,
    disallow,
    graph_break,
    is_allowed_in_graph,
    is_compiling,
    is_exporting,
    mark_disabled,
    nested_compile_region,
    substitute_in_graph,
)
from .module_hooks import call_with_hooks, has_module_hooks
from .stance import STANCES, Stance
from .variables.class_lookup import class_attribute
from .variables.trace_rules import is_graph_op


def _resolve_backend(backend: Any, mode: str | None, options: dict | None) -> tuple[Any, str]:
    """(compiler function, display name) for compile()'s backend/mode/options arguments."""
    compiler = resolve_backend(backend, mode=mode, options=options)
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
    if mode is not None:
        name = f"{name}(mode={mode!r})"
    return compiler, name


def compile(  # noqa: A001 - mirrors torch.compile
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: Any = None,
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
) -> Any:
    """Compile a function or nn.Module; usable bare, with arguments, or as a plain call. Without
    `backend`, the default backend (`set_default_backend`, initially "inductor")."""
    if backend is None:
        backend = get_default_backend()
    if dynamic not in (None, False, True):
        raise TypeError(f"stenograph.compile(dynamic=...) takes None, True or False, not {dynamic!r}")
    if not isinstance(fullgraph, bool):
        raise TypeError(f"stenograph.compile(fullgraph=...) takes a bool, not {fullgraph!r}")
    compiler, name = _resolve_backend(backend, mode, options)
    # what a pickled OptimizedModule needs to compile itself again after loading
    spec = _CompileSpec(backend, mode, options, fullgraph, dynamic)

    def decorate(target: Any) -> Any:
        if disable:
            return target
        return _compile_target(target, compiler, name, fullgraph, dynamic, spec)

    if model is None:
        return decorate
    return decorate(model)


def optimize(backend: Any = "inductor", *, nopython: bool = False, dynamic: bool | None = None) -> Callable:
    """Decorator form of `compile` (torch._dynamo.optimize): `@optimize("eager")`."""
    if callable(backend) and not isinstance(backend, str) and isinstance(backend, torch.nn.Module):
        raise TypeError("optimize() takes a backend; use optimize(backend)(model)")
    return compile(backend=backend, fullgraph=nopython, dynamic=dynamic)


class _CompileSpec(NamedTuple):
    """compile()'s arguments as the user gave them (a backend by name or object, not resolved)."""

    backend: Any
    mode: str | None
    options: dict | None
    fullgraph: bool
    dynamic: bool | None


def _compile_target(
    target: Any, compiler: Any, name: str, fullgraph: bool, dynamic: bool | None, spec: _CompileSpec | None = None
) -> Any:
    if isinstance(target, OptimizedModule):
        target = target._orig_mod
    if isinstance(target, torch.nn.Module):
        return OptimizedModule(target, compiler, name, fullgraph, dynamic, spec=spec)
    original = getattr(target, "__stenograph_original__", None)
    if original is not None:
        target = original
    if isinstance(target, types.MethodType) and isinstance(target.__func__, types.FunctionType):
        bound_self = target.__self__
        wrapper = _user_entry(target.__func__, compiler, name, fullgraph, dynamic)
        return types.MethodType(wrapper, bound_self)
    if isinstance(target, types.FunctionType):
        return _user_entry(target, compiler, name, fullgraph, dynamic)
    if callable(target):
        call = type(target).__call__
        if isinstance(call, types.FunctionType):
            return types.MethodType(_user_entry(call, compiler, name, fullgraph, dynamic), target)
        # a C function (torch.sin, an operator): compile a Python call of it
        wrapper = functools.update_wrapper(_calling(target), target, updated=())
        return _user_entry(wrapper, compiler, name, fullgraph, dynamic)
    raise TypeError(
        f"stenograph.compile() needs a function or nn.Module, got {type(target).__qualname__} ({target!r:.60})"
    )


def _user_entry(fn: types.FunctionType, compiler: Any, name: str, fullgraph: bool, dynamic: bool | None) -> Any:
    """The entry wrapper of a function the user compiled; it marks calls for CUDA graphs."""
    wrapper = entry.entry_wrapper(fn, compiler, name, fullgraph, dynamic)
    return marking_calls(wrapper) if wants_call_marks(compiler) else wrapper


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
        del self.__dict__["training"]  # read through to the original module
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_compile_spec", spec)
        forward = type(mod).forward
        if not isinstance(forward, types.FunctionType):
            raise TypeError(f"{type(mod).__qualname__}.forward is not a Python function")
        wrapper = _user_entry(forward, compiler, backend_name, fullgraph, dynamic)
        object.__setattr__(self, "_compiled_forward", wrapper)
        call = class_attribute(type(mod), "__call__")
        if call is not torch.nn.Module.__call__:
            # the class's own __call__ is what calling the module runs: compile that
            if not isinstance(call, types.FunctionType):
                raise TypeError(f"{type(mod).__qualname__}.__call__ is not a Python function")
            object.__setattr__(self, "_compiled_call", _user_entry(call, compiler, backend_name, fullgraph, dynamic))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        mod = self._orig_mod
        if "_compiled_call" in self.__dict__:
            return self._compiled_call(mod, *args, **kwargs)
        if "forward" in mod.__dict__:
            # an instance-level forward replaces the class's: compile that instead, eagerly for now
            return mod(*args, **kwargs)
        if has_module_hooks(mod):
            return call_with_hooks(mod, self._compiled_forward, args, kwargs)
        return self._compiled_forward(mod, *args, **kwargs)

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
        reduced = self.__reduce__()[1]
        return _compile_again(copy.deepcopy(reduced[0], memo), *reduced[1:])


def _is_data_descriptor(attribute: Any) -> bool:
    return hasattr(type(attribute), "__set__")


def _compile_again(
    mod: torch.nn.Module, backend: Any, mode: str | None, options: dict | None, fullgraph: bool, dynamic: bool | None
) -> OptimizedModule:
    """Unpickling an OptimizedModule: compile the loaded module with the arguments it had."""
    return compile(mod, backend=backend, mode=mode, options=options, fullgraph=fullgraph, dynamic=dynamic)


def _delegate(name: str) -> Callable:
    def method(self: OptimizedModule, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._orig_mod, name)(*args, **kwargs)
        return self if result is self._orig_mod else result

    method.__name__ = name
    method.__doc__ = f"Delegates to the original module's {name}()."
    return method


for _name in _DELEGATED:
    setattr(OptimizedModule, _name, _delegate(_name))


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None) -> Callable:
    """Run `fn` eagerly, also when it is called from compiled code (a graph break there, whose
    reason quotes `reason`)."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if isinstance(fn, torch.nn.Module):
        raise TypeError("stenograph.disable() takes a function; disable a module's forward instead")
    if not callable(fn):
        raise TypeError(f"stenograph.disable() needs a callable, got {type(fn).__qualname__}")
    original = getattr(fn, "__stenograph_original__", fn)

    @functools.wraps(original)
    def eager(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    mark_disabled(eager, reason)
    return eager


# torch._dynamo.skip's name for it
skip = disable


def disallow_in_graph(fn: Any) -> Any:
    """Make every call of `fn` a graph break (it runs eagerly between graphs), as
    `torch._dynamo.disallow_in_graph` does. `fn` must be something stenograph records as a graph
    op (a torch function such as `torch.sub`, or one marked `allow_in_graph`); a Python function
    is traced into instead, and `disable` is what keeps it out of graphs. Survives `reset()`;
    `allow_in_graph(fn)` undoes it. A list or tuple marks each item."""
    if isinstance(fn, (list, tuple)):
        return [disallow_in_graph(f) for f in fn]
    if not callable(fn):
        raise TypeError(f"stenograph.disallow_in_graph() needs a callable, got {type(fn).__qualname__}")
    if not (is_graph_op(fn) or is_allowed_in_graph(fn)):
        raise TypeError(
            f"stenograph.disallow_in_graph() takes a function recorded as a graph op (torch.* functions, "
            f"or ones marked allow_in_graph); {getattr(fn, '__qualname__', fn)!r} is traced into instead: "
            "use stenograph.disable() to run it eagerly"
        )
    disallow(fn)
    return fn


class _RunOnly(contextlib.ContextDecorator):
    """`run()` as a context manager or decorator: no compiles inside it."""

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
      none does.

    Calling it from compiled code (at a graph break) raises RuntimeError, as torch's does.
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


# torch's stances that stenograph does not have
_STANCES_NOT_PROVIDED = ("eager_then_compile", "aot_eager_then_compile")


def _make_stance(name: Any, skip_guard_eval_unsafe: bool, force_backend: Any) -> Stance:
    if not isinstance(name, str):
        raise TypeError(
            f"set_stance() takes a stance name (str), got {type(name).__qualname__}; "
            "as a decorator write @set_stance('force_eager')"
        )
    if name in _STANCES_NOT_PROVIDED:
        raise NotImplementedError(f"stenograph does not provide the stance {name!r}; it has {', '.join(STANCES)}")
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
        raise ValueError(f"set_stance(force_backend=...) needs the 'default' stance, not {name!r}")
    compiler, backend_name = _resolve_backend(force_backend, None, None)
    return Stance(name, compiler, backend_name)


def _put_in_force(wanted: Stance) -> Stance:
    """Make `wanted` the stance; the one it replaces. Refused inside compiled code, where a
    change would hold for part of one compiled call."""
    if in_compiled_code():
        raise RuntimeError("stenograph.set_stance() was called inside compiled code; call it outside compiled code")
    return stance_state.swap(wanted)


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
    process_state.clear_all()


__all__ = [
    "OptimizedModule",
    "StenographError",
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "cudagraph_mark_step_begin",
    "disable",
    "disallow_in_graph",
    "graph_break",
    "is_compiling",
    "is_exporting",
    "nested_compile_region",
    "optimize",
    "reset",
    "run",
    "set_stance",
    "skip",
    "substitute_in_graph",
]
