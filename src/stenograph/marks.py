"""Marks the user puts on functions, read by the trackers: `disable`, `allow_in_graph`,
`disallow_in_graph`, `assume_constant_result`, `substitute_in_graph`, `nested_compile_region`,
`graph_break`, `nonstrict_trace`, `is_compiling` and `is_exporting`.

A leaf module: `api` sets the marks and re-exports these functions; the tracing layer reads them
here, so it never imports `api`. The allow- and disallow-in-graph sets and the substitutes are
user decisions, like `config`, and survive `reset()` (which `explain()` calls), as torch's do.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .thread_flag import ThreadFlag

DISABLED_ATTR = "__stenograph_disabled__"
# torch's mark for the same thing (torch.compiler.disable, torch._dynamo.disable, and torch's
# internal `_disable_dynamo` wrappers once they have run, e.g. DDP's `_inside_ddp_forward`)
TORCH_DISABLED_ATTR = "_torchdynamo_disable"
CONSTANT_RESULT_ATTR = "__stenograph_constant_result__"

_allowed_in_graph: set[Callable] = set()
_disallowed_in_graph: set[Callable] = set()


@dataclass(frozen=True)
class _DisabledMark:
    """`disable`'s mark on the function it made: the function's id, so that a wrapper copying
    its `__dict__` (`functools.wraps`) is not disabled with it, as torch's mark is not."""

    owner: int
    reason: str | None
    # `disable(f, recursive=False)`: the function `fn` runs, eagerly, with its callees compiled
    eager_frame: Callable | None = None


def mark_disabled(fn: Callable, reason: str | None = None, eager_frame: Callable | None = None) -> None:
    """Mark `fn` to run eagerly; `reason` (the user's words) is shown where its call breaks.
    With `eager_frame` (`disable(recursive=False)`) only that function's own frame runs eagerly:
    compiled code calling `fn` runs `eager_frame` with its callees compiled."""
    setattr(fn, DISABLED_ATTR, _DisabledMark(id(fn), reason, eager_frame))


def _disabled_mark(fn: Any) -> _DisabledMark | None:
    mark = getattr(fn, DISABLED_ATTR, None)
    owner = getattr(fn, "__func__", fn)  # a bound method: its function's mark
    return mark if isinstance(mark, _DisabledMark) and mark.owner == id(owner) else None


def eager_frame_of(fn: Any) -> Callable | None:
    """The function whose frame alone `fn` disables (`disable(f, recursive=False)`, stenograph's
    or torch's, whose wrapper keeps `f` as `_torchdynamo_orig_callable`), else None."""
    mark = _disabled_mark(fn)
    if mark is not None:
        return mark.eager_frame
    if is_torch_disabled(fn) and not torch_disables_recursively(fn):
        original = getattr(fn, "_torchdynamo_orig_callable", None)
        return original if isinstance(original, types.FunctionType) else None
    return None


def disabled_reason(fn: Any) -> str | None:
    """The reason given to `disable(fn, reason=...)`, if any."""
    mark = _disabled_mark(fn)
    return mark.reason if mark is not None else None


def is_disabled(fn: Any) -> bool:
    return _disabled_mark(fn) is not None or is_torch_disabled(fn)


def is_torch_disabled(fn: Any) -> bool:
    """Whether `fn` is one of torch's `torch.compiler.disable` / `torch._dynamo.disable`
    wrappers (a function, or the `__call__` and `_call_impl` torch puts on a disabled class)."""
    return getattr(fn, TORCH_DISABLED_ATTR, False) is True


def torch_disables_recursively(fn: Any) -> bool:
    """Whether torch's disable wrapper `fn` keeps compilers out of what `fn` calls too (its
    default), rather than out of `fn`'s own frame alone (`recursive=False`)."""
    return getattr(fn, "_torchdynamo_disable_recursive", True) is not False


def allow_in_graph(fn: Any) -> Any:
    """Record calls of `fn` as one opaque graph node instead of tracing into it (a list or
    tuple marks each item).

    `fn` must take and return tensors (and Python constants) and run on fake tensors.
    """
    if isinstance(fn, (list, tuple)):
        return [allow_in_graph(f) for f in fn]
    if not callable(fn):
        raise TypeError(f"allow_in_graph() needs a callable, got {type(fn).__qualname__}")
    _disallowed_in_graph.discard(fn)
    _allowed_in_graph.add(fn)
    return fn


def is_allowed_in_graph(fn: Any) -> bool:
    """Marked by `allow_in_graph`, stenograph's or torch's (`torch._dynamo.allow_in_graph`, which
    records ids: compiled autograd marks its graphs' operations so)."""
    try:
        if fn in _allowed_in_graph:
            return True
    except TypeError:
        pass
    return _in_torch_ids(fn, "_allowed_callable_ids")


# functions `nonstrict_trace` made: held weakly, so a dropped one leaves no mark behind
_nonstrict_traced: weakref.WeakSet = weakref.WeakSet()


def nonstrict_trace(traceable_fn: Callable) -> Callable:
    """Record calls of the function this returns as one graph node, without tracing into
    `traceable_fn`: its body may do what tracing cannot (graph breaks, logging), as long as it
    runs on fake tensors. Arguments may be tensors, Python constants, lists, tuples, dicts,
    `nn.Module`s (their parameters and buffers enter the graph) and classes registered with
    `torch.utils._pytree`; results tensors, numbers and those containers.

    `traceable_fn` itself stays as it was (the mark is on a new wrapper), as torch's
    `torch._dynamo.nonstrict_trace` does; stenograph honours both."""
    if not callable(traceable_fn):
        raise TypeError(f"nonstrict_trace() needs a callable, got {type(traceable_fn).__qualname__}")

    @functools.wraps(traceable_fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        return traceable_fn(*args, **kwargs)

    _nonstrict_traced.add(traced)
    return traced


def is_nonstrict_trace(fn: Any) -> bool:
    """Made by `nonstrict_trace`, stenograph's or torch._dynamo's (which records ids)."""
    if isinstance(fn, types.FunctionType) and fn in _nonstrict_traced:
        return True
    return _in_torch_ids(fn, "_nonstrict_trace_callable_ids")


def is_leaf_function(fn: Any) -> bool:
    """Made by torch's `torch._dynamo.decorators.leaf_function` (torch 2.13 on): called as a
    `nonstrict_trace` function is, the wrapper itself runs torch's leaf operator (which calls the
    registered fake implementation on fake tensors and the real function when the graph runs,
    and which AOTAutograd does not trace into)."""
    return _in_torch_ids(fn, "_leaf_function_ids")


def is_nonstrict_trace_decorator(fn: Any) -> bool:
    """`nonstrict_trace` itself (stenograph's or torch._dynamo's), called in compiled code."""
    return fn is nonstrict_trace or is_torch_decorator(fn, "nonstrict_trace")


_FORBIDDEN = "_dynamo_forbidden"  # the attribute torch's `forbid_in_graph` sets: one mark for both


def forbid(fn: Callable) -> None:
    """Tracing a call of `fn` is an error (`api.forbid_in_graph`)."""
    setattr(fn, _FORBIDDEN, True)


def is_forbidden(fn: Any) -> bool:
    """Marked by `forbid_in_graph` (stenograph's or torch's); read without running descriptors."""
    try:
        return inspect.getattr_static(fn, _FORBIDDEN, False) is True
    except Exception:  # noqa: BLE001 - an object whose class lookup fails carries no mark
        return False


def disallow(fn: Callable) -> None:
    """Calls of `fn` break the graph (`api.disallow_in_graph` checks that `fn` is a graph op)."""
    _allowed_in_graph.discard(fn)
    _disallowed_in_graph.add(fn)


def is_disallowed_in_graph(fn: Any) -> bool:
    """Marked by `disallow_in_graph`, stenograph's or torch's (`torch._dynamo.disallow_in_graph`,
    which records ids)."""
    try:
        if fn in _disallowed_in_graph:
            return True
    except TypeError:
        pass
    return _in_torch_ids(fn, "_disallowed_callable_ids")


def assume_constant_result(fn: Callable) -> Callable:
    """Call `fn` once while tracing and use its result as a constant of the graph.

    Nothing about the result is guarded (as with torch's): a later call that would return
    something else still gets the value seen while tracing, until the function recompiles for
    another reason or `reset()`. Arguments must be constants (or objects read from the frame,
    guarded by identity); the result must be a Python constant (numbers, strings, bools, None,
    dtypes, devices and tuples of them).
    """
    if isinstance(fn, type) or not callable(fn):
        raise TypeError(f"assume_constant_result() needs a function, got {type(fn).__qualname__}")
    target = getattr(fn, "__func__", fn)  # a bound method: mark its function
    try:
        setattr(target, CONSTANT_RESULT_ATTR, True)
    except AttributeError:
        raise TypeError(f"assume_constant_result() needs a Python function; {fn!r} takes no attributes") from None
    return fn


def is_constant_result(fn: Any) -> bool:
    """Marked by `assume_constant_result`, stenograph's or torch's (`torch._dynamo.assume_constant_result`,
    which sets `_dynamo_marked_constant`: model code written for torch.compile carries it)."""
    return getattr(fn, CONSTANT_RESULT_ATTR, False) is True or getattr(fn, "_dynamo_marked_constant", False) is True


# on `stenograph.compile`: called while tracing, a compile entry point gives back what it is handed
COMPILE_ENTRY_ATTR = "__stenograph_compile_entry__"
_TORCH_COMPILE = torch.compile


def is_compile_entry(fn: Any) -> bool:
    """`stenograph.compile` or `torch.compile`, which a traced function may call on another
    (torch.compile traces such a nested compile's function into the graph it is building)."""
    return getattr(fn, COMPILE_ENTRY_ATTR, False) is True or fn is _TORCH_COMPILE


def graph_break() -> None:
    """Forces a graph break where it is called (runs as a no-op in eager code)."""
    return None


# -- error_on_graph_break ------------------------------------------------------------------------

# stenograph's own setting: None until one of its contexts sets it (torch's is read meanwhile)
_error_on_graph_break: bool | None = None


def errors_on_graph_break() -> bool:
    """Whether a graph break met now is an error: the innermost `error_on_graph_break` context
    entered, stenograph's or else torch._dynamo's (a process-wide setting in both)."""
    if _error_on_graph_break is not None:
        return _error_on_graph_break
    return bool(_torch_dynamo_attr("utils", "_error_on_graph_break"))


def enter_error_on_graph_break(value: bool) -> bool | None:
    """Set the setting; returns what `leave_error_on_graph_break` restores."""
    global _error_on_graph_break
    previous = _error_on_graph_break
    _error_on_graph_break = value
    return previous


def leave_error_on_graph_break(previous: bool | None) -> None:
    global _error_on_graph_break
    _error_on_graph_break = previous


class error_on_graph_break:  # noqa: N801 - mirrors torch._dynamo.error_on_graph_break
    """Context manager and decorator: inside it, a graph break met while compiling is an error
    (`True`) or a normal break (`False`), in the functions compiled there and in code traced
    inside a `with error_on_graph_break(...)` block. `fullgraph=True` wins over `False`. It is a
    compile-time setting: an entry compiled under one value is reused under the other."""

    def __init__(self, error_on_graph_break: bool) -> None:
        if not isinstance(error_on_graph_break, bool):
            raise TypeError(f"error_on_graph_break() takes a bool, got {type(error_on_graph_break).__qualname__}")
        self.error_on_graph_break = error_on_graph_break
        self._previous: list[bool | None] = []

    def __enter__(self) -> None:
        self._previous.append(enter_error_on_graph_break(self.error_on_graph_break))

    def __exit__(self, *exc: object) -> None:
        leave_error_on_graph_break(self._previous.pop())

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"error_on_graph_break(...) decorates a callable, got {type(fn).__qualname__}")

        # not `fn`'s `__dict__`: a compiled function's marks would make the trace inline it
        # past this wrapper
        @functools.wraps(fn, updated=())
        def under_setting(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        under_setting.__stenograph_error_on_break__ = self  # type: ignore[attr-defined]
        return under_setting


def torch_error_on_graph_break_class() -> type | None:
    """torch._dynamo's context class, once the user loaded it."""
    return _torch_dynamo_attr("decorators", "ErrorOnGraphBreakDecoratorContextManager")


def is_torch_decorator(value: Any, name: str) -> bool:
    """`value` is torch._dynamo's function `name` (`graph_break`, `skip_frame`, ...); False
    before the user loaded torch._dynamo."""
    found = _torch_dynamo_attr("decorators", name)
    return found is not None and value is found


def _torch_dynamo_attr(module: str, name: str) -> Any:
    """`torch._dynamo.<module>.<name>` where the user's code loaded that module (None where it
    did not: stenograph never imports torch._dynamo, so torch's marks exist only once used)."""
    return getattr(sys.modules.get(f"torch._dynamo.{module}"), name, None)


def _in_torch_ids(fn: Any, table: str) -> bool:
    """`fn` is in the id set `table` of torch._dynamo's trace rules, where torch's marks
    (`allow_in_graph`, `disallow_in_graph`, `nonstrict_trace`, `leaf_function`) record it."""
    ids = getattr(_torch_dynamo_attr("trace_rules", table), "function_ids", None)
    return bool(ids) and id(fn) in ids


_RUN_ONLY = "__stenograph_run_only__"


def mark_run_only(wrapper: Callable, fn: Callable) -> None:
    """`wrapper` is `stenograph.run(fn)`'s: it runs `fn` with compiles off."""
    setattr(wrapper, _RUN_ONLY, fn)


def wrapped_for_compiler(value: Any) -> types.FunctionType | None:
    """The function that `value` wraps only to change how compiled code runs around it:
    `stenograph.run(f)`'s wrapper, or torch._dynamo's compile and `run()` wrappers (which keep
    the function torch.compile inlines under `_torchdynamo_inline`). A traced call of the wrapper
    inlines that function, as torch.compile does; None for anything else."""
    if type(value) is not types.FunctionType:
        return None
    found = value.__dict__.get(_RUN_ONLY)
    torch_wrapper = value.__globals__.get("__name__") == "torch._dynamo.eval_frame"  # `__module__` is the wrapped one's
    if found is None and torch_wrapper and not value.__dict__.get(TORCH_DISABLED_ATTR):
        found = value.__dict__.get("_torchdynamo_inline")
        if getattr(found, "__module__", "").startswith("torch._dynamo"):
            return None  # torch's own helper (an error_on_graph_break wrapper): not inlined
    return found if type(found) is types.FunctionType else None


def is_compiling() -> bool:
    """True while stenograph traces (folded to True inside graphs); False when code runs."""
    return False


# on while `stenograph.export` traces (per thread: an export in one thread must not fold True
# into another thread's compile)
exporting = ThreadFlag()


def is_exporting() -> bool:
    """True while `stenograph.export` traces (folded into the graph as a constant), False
    otherwise: stricter than `is_compiling`, which compiles see too."""
    return exporting.active


# -- substitutes (`substitute_in_graph`) ----------------------------------------------------------

_FUNCTION_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
)


@dataclass(frozen=True)
class Substitute:
    """A Python function traced in place of `original` (usually a C function); `eager` is what
    the decorator returned (it calls `original`)."""

    original: Callable
    traceable: types.FunctionType
    eager: Callable
    can_constant_fold_through: bool


# by id of the original and of the decorator's result (each entry holds both alive)
_substitutes: dict[int, Substitute] = {}


def substitute_in_graph(
    original_fn: Callable, *, can_constant_fold_through: bool = False, skip_signature_check: bool = False
) -> Callable[[types.FunctionType], Callable]:
    """Register the decorated Python function as what the tracer runs in place of `original_fn`
    (torch.compiler's): a C function it could not trace becomes traceable. Eager calls, of the
    original and of the function the decorator returns, run `original_fn` itself.

    `can_constant_fold_through`: a call whose arguments are all constants calls `original_fn`
    while tracing and folds its result into the graph. The substitute must take the same
    parameters as the original (names, kinds, defaults; `*args, **kwargs` on either side matches
    anything) unless `skip_signature_check`."""
    if not isinstance(original_fn, _FUNCTION_TYPES):
        raise TypeError(f"substitute_in_graph() expects a function, got {type(original_fn).__qualname__}")

    def register(traceable_fn: types.FunctionType) -> Callable:
        if not isinstance(traceable_fn, types.FunctionType):
            raise TypeError(
                f"@substitute_in_graph(...) decorates a Python function, got {type(traceable_fn).__qualname__}"
            )
        if not skip_signature_check:
            _check_signatures(original_fn, traceable_fn)
        if id(original_fn) in _substitutes:
            raise ValueError(
                f"{original_fn!r} already has a substitute: {_substitutes[id(original_fn)].traceable.__qualname__}"
            )

        @functools.wraps(traceable_fn)
        def eager(*args: Any, **kwargs: Any) -> Any:
            return original_fn(*args, **kwargs)

        substitute = Substitute(original_fn, traceable_fn, eager, can_constant_fold_through)
        _substitutes[id(original_fn)] = _substitutes[id(eager)] = substitute
        return eager

    return register


def _check_signatures(original: Callable, traceable: types.FunctionType) -> None:
    """The substitute takes what the original takes; an original without a signature (many C
    functions) or `*args, **kwargs` on either side is not compared."""
    try:
        expected = _parameters(inspect.signature(original))
    except ValueError:
        return
    got = _parameters(inspect.signature(traceable))
    anything = _parameters(inspect.signature(lambda *args, **kwargs: None))
    if expected != got and anything not in (expected, got):
        raise TypeError(
            f"substitute_in_graph: {traceable.__qualname__}{inspect.signature(traceable)} does not take the "
            f"parameters of {getattr(original, '__qualname__', original)}{inspect.signature(original)} "
            "(pass skip_signature_check=True to register it anyway)"
        )


def _parameters(signature: inspect.Signature) -> tuple:
    """What must match: positional names in order, keyword-only names, defaults by name
    (annotations and the names of `*args` / `**kwargs` do not matter)."""
    params = signature.parameters.values()
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    positional = tuple(p.name for p in params if p.kind not in (*variadic, inspect.Parameter.KEYWORD_ONLY))
    keyword_only = frozenset(p.name for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY)
    defaults = tuple(sorted((p.name, repr(p.default)) for p in params if p.kind not in variadic))
    return positional, keyword_only, defaults


def substitute_for(fn: Any) -> Substitute | None:
    """The substitute registered for `fn` (the original or the decorated function), if any; a
    function returned by torch's `substitute_in_graph` brings its own."""
    found = _substitutes.get(id(fn))
    if found is None and isinstance(fn, types.FunctionType):
        return torch_substitute(fn)
    return found


# what torch's `substitute_in_graph` sets on the function it returns (which calls the original)
_TORCH_ORIGINAL = "__torch_dynamo_original__"
_TORCH_TRACEABLE = "__torch_dynamo_polyfill__"
_TORCH_FOLDS = "__torch_dynamo_can_constant_fold_through__"


def torch_substitute(fn: types.FunctionType) -> Substitute | None:
    """The substitute a function made by torch's `substitute_in_graph` carries: its calls trace
    torch's registered traceable function. torch keeps the original's own entry in its tracer's
    tables, which stenograph does not read: a call of the original C function is not substituted."""
    traceable = fn.__dict__.get(_TORCH_TRACEABLE)
    original = fn.__dict__.get(_TORCH_ORIGINAL)
    if not isinstance(traceable, types.FunctionType) or original is None:
        return None
    return Substitute(original, traceable, fn, bool(fn.__dict__.get(_TORCH_FOLDS, False)))


# -- nested compile regions -----------------------------------------------------------------------

# the attribute of a region's wrapper naming its body: torch.compiler's, so a function torch marked
# is a region for stenograph too
COMPILE_REGION_ATTR = "__marked_compile_region_fn__"


def nested_compile_region(fn: Callable | None = None) -> Callable:
    """Mark `fn` as a region traced into one subgraph that its calls with tensors of the same
    metadata share (torch.compiler's `nested_compile_region`); eager calls just run it. Usable
    as `@nested_compile_region` and `@nested_compile_region()`."""
    if fn is None:
        return nested_compile_region
    if not callable(fn) or isinstance(fn, type):
        raise TypeError(f"nested_compile_region() needs a function, got {type(fn).__qualname__}")

    @functools.wraps(fn)
    def region(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(region, COMPILE_REGION_ATTR, fn)
    return region
