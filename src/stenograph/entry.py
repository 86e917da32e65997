"""The entry wrapper: cache lookup, guard check, compile on miss, recompile policy.

DESIGN decisions 2 and 3. Each code object (per backend) has one `FrameCache`, a list of entries
tried in order. The per-call path is deliberately tiny: for each entry, one call of its generated
guard function with the caller's own arguments, then one call of its transformed function.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import types
import warnings
import weakref
from typing import Any

import torch
import torch.utils._python_dispatch as _modes
from torch._subclasses.fake_tensor import FakeTensor

from . import (
    compile_callbacks,
    config,
    deferred_release,
    events,
    frame_skips,
    function_mode_stack,
    nested_caches,
    process_state,
    torch_state,
    warm,
)
from .backends.registry import lookup_backend
from .callee_routing import CalleeRouter
from .code_tables import CodeTable
from .errors import (
    BreakKind,
    ConstraintViolation,
    FailOnRecompileLimitHit,
    ForbiddenCall,
    FullgraphBreak,
    NativeGuardsUnavailable,
    NestedTrace,
    RecompileError,
    SideEffectsNotReplayed,
    StenographError,
    Unsupported,
)
from .frame_compiler import CacheEntry, FrameCompile, accepts, compile_frame, frame_label
from .graph import compile_leftovers
from .graph.resume import dynamic_arguments
from .graph.runtime import Runtime
from .guards.failures import GuardFailure
from .guards.pyfunc import with_closure
from .guards.sources import LocalSource
from .marks import eager_frame_of, errors_on_graph_break, is_disabled
from .module_hooks import call_with_hooks, has_global_forward_hooks, has_module_hooks
from .recursion import compile_headroom, lift, lower, lower_headroom
from .regions import recompile_limit_of, shared_base
from .shapes.dynamic import DynamicPolicy
from .stance import current as _stance
from .thread_flag import ThreadFlag

# torch.compile tracing a call of a stenograph-compiled function (HF generate() compiles the
# model's __call__, whose forward the user compiled with stenograph) sees True here and traces the
# original function, as stenograph does for its own: the lookup is this process's state, nothing
# to trace (traced, its guards failed on their own frame with a bare AssertionError)
_torch_compiling = torch.compiler.is_compiling


class StenographWarning(UserWarning):
    """A frame runs eagerly (unsupported code, recompile limit, or an internal error)."""


# compiles begun since `reset()` last collected garbage: it collects only when this is not 0 or
# entries are held (an interrupted compile can leave a cycle that must not outlive the reset)
compiles_begun = 0

_OTHER_DEFAULTS = GuardFailure("the function's __defaults__/__kwdefaults__ differ from those compiled")


class FrameCache:
    """Compiled entries of one code object for one backend, and its recompile state."""

    def __init__(self, code: types.CodeType, globals_dict: dict, backend: Any, backend_name: str) -> None:
        self.code = code
        self.globals_dict = globals_dict  # kept alive so the cache key's id stays unique
        self.backend = backend  # kept alive so the cache key's id stays unique
        self.backend_name = backend_name
        self.entries: list[CacheEntry] = []
        self.policy = DynamicPolicy(None, dynamic_arguments(code))
        self.eager_reason: str | None = None
        # given up on as torch.compile skips a frame: it runs eagerly, its callees compiled
        self.skipped = False
        self.router: CalleeRouter | None = None  # a skipped frame's, made on its first eager call
        self.recompile_reasons: list[str] = []
        self.depth_failures = 0  # compiles that ran out of recursion depth (the call ran eagerly)
        self.owners: weakref.WeakSet = weakref.WeakSet()  # functions keeping it alive
        self.persisted: set[str] = set()  # names of the persisted entries looked at (warm/)
        self.first_call_seen = False  # `eager_then_compile`, `aot_eager_then_compile`: the first call was made

    def clear(self) -> None:
        self.entries.clear()
        self.policy = DynamicPolicy(self.policy.dynamic, self.policy.from_data)
        self.eager_reason = None
        self.skipped = False
        self.first_call_seen = False
        self.recompile_reasons.clear()
        self.depth_failures = 0

    def miss(
        self, fn: types.FunctionType, prefix: tuple, args: tuple, kwargs: dict, fullgraph: bool, frames: int = 1
    ) -> Any:
        """No entry's guards passed: compile a new entry, or run eagerly.

        Compiles are serialised by `compile_lock`; a thread that waited looks again first, so
        threads racing to make the same first call compile it once. The call itself runs
        outside the lock, with the recursion limit raised by `frames`: this frame's, and the
        caller's when that is the entry wrapper user code called (`recursion`).
        """
        # this thread already holds the lock: a compile inside a compile (a backend calling
        # compiled code); otherwise no compile of any thread runs once the lock is taken
        nested = compile_lock._is_owned()
        with compile_lock:
            target, call_args = self._resolve(fn, prefix, args, kwargs, fullgraph, nested)
        added = lift(frames)
        try:
            return target(*call_args, **kwargs)
        finally:
            if added:
                lower(added)

    def _resolve(
        self, fn: types.FunctionType, prefix: tuple, args: tuple, kwargs: dict, fullgraph: bool, nested: bool
    ) -> tuple[Any, tuple]:
        """What runs this call, and with which positional arguments: an entry (compiled now
        or by another thread meanwhile) or `fn` itself, eagerly."""
        full = prefix + args
        for entry in self.entries:
            if entry.takes_defaults_of(fn) and entry.guard(*full, **kwargs):
                frame_skips.note_compiled()
                return entry.fn, full
        shared = self._shared_entry(fn, full, kwargs)
        if shared is not None:
            frame_skips.note_compiled()
            return shared.fn, full
        if self.eager_reason is not None:
            return self._eager(fn), args
        if run_only.active or not _stance.stance.compiles:
            return fn, args
        if _in_nested_trace(fn, args, kwargs):
            return fn, args
        reason = frame_skips.skip_reason()
        if reason is not None:
            return frame_skips.run_skipped(fn, self.code, fullgraph, reason), args
        backend_name = None  # the function's own backend
        if _stance.stance.name in ("eager_then_compile", "aot_eager_then_compile") and not self.first_call_seen:
            self.first_call_seen = True
            self._note_first_call(fn, args, kwargs)
            if _stance.stance.name == "eager_then_compile":
                return fn, args
            backend_name = "aot_eager"
        if torch.jit.is_tracing():
            # its sizes are tensors there; the trace would record the compiled code's operations
            raise RuntimeError(
                f"torch.jit.trace of a function stenograph compiles ({frame_label(self.code)}) is not "
                "supported: trace the original function"
            )
        if nested:  # the outer compile's headroom serves both
            return self._compile(fn, prefix, args, kwargs, fullgraph, backend_name)
        # a miss deep in a recursion: the tracer and the backend get frames beyond the limit. No
        # compile runs now, so a headroom still raised was left by an interrupt landing on the
        # `lower_headroom` call of an earlier compile: lowered first.
        lower_headroom()
        try:
            compile_headroom()
            return self._compile(fn, prefix, args, kwargs, fullgraph, backend_name)
        finally:
            lower_headroom()

    def _shared_entry(self, fn: types.FunctionType, full: tuple, kwargs: dict) -> CacheEntry | None:
        """In a region's cache, the first entry of its compiler's own cache whose guards pass on
        this call: read, never added to (`regions`). None elsewhere."""
        base = shared_base(self.backend)
        shared = _caches.get((id(self.code), id(self.globals_dict), id(base))) if base is not None else None
        if shared is None:
            return None
        for entry in shared.entries:
            if entry.takes_defaults_of(fn) and entry.guard(*full, **kwargs):
                return entry
        return None

    @property
    def recompile_limit(self) -> int:
        """How many compiled entries this frame keeps: its compile() call's `recompile_limit`,
        else `config.recompile_limit`."""
        own = recompile_limit_of(self.backend)
        return config.recompile_limit if own is None else own

    def _note_first_call(self, fn: types.FunctionType, args: tuple, kwargs: dict) -> None:
        """What the automatic dynamic shapes compare the next call with: the sizes of the tensor
        arguments and the values of the int and float ones, as if a compile had seen them."""
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs).arguments
        except TypeError:
            return  # the call raises Python's TypeError, eagerly
        for name, value in bound.items():
            self.policy.observe(LocalSource(name), value)

    def _compile(
        self,
        fn: types.FunctionType,
        prefix: tuple,
        args: tuple,
        kwargs: dict,
        fullgraph: bool,
        backend_name: str | None = None,
    ) -> tuple[Any, tuple]:
        """Compile this call with the function's backend, or the built-in `backend_name` (the first
        call under `aot_eager_then_compile`: not stored in the warm-start cache, whose entries are
        the function's backend's)."""
        global compiles_begun
        compiles_begun += 1
        _settle_library_defaults()
        full = prefix + args
        if not accepts(fn, args, kwargs):
            return fn, args  # wrong arguments: the call raises Python's TypeError, as in eager
        found = self._persisted(fn, full, kwargs)
        if found is not None:
            return found.fn, full
        label = frame_label(self.code)
        if _stance.stance.name == "fail_on_recompile":
            raise RecompileError(self._refusal(fn, label, full, kwargs))
        failure = None
        if self.entries:
            newest = self.entries[-1]  # the reason reported: why the newest entry did not match
            failure = newest.guard_failure(full, kwargs) if newest.takes_defaults_of(fn) else _OTHER_DEFAULTS
            failure = failure or GuardFailure("unknown")
            self.recompile_reasons.append(failure.reason)
            events.publish(events.Recompile(self.code, label, failure, len(self.entries)))
            if _compiled(self.entries) >= self.recompile_limit:
                return self._at_limit(fn, args, label, fullgraph, self._limit_source(), failure)
        if sum(_compiled(cache.entries) for cache in _code_caches.get(self.code, ())) >= (
            config.accumulated_recompile_limit
        ):
            source = "config.accumulated_recompile_limit (the entries of every cache of its code)"
            return self._at_limit(fn, args, label, fullgraph, (config.accumulated_recompile_limit, source), failure)
        started = events.CompileStarted(self.code, label, len(self.entries))
        events.publish(started)
        with compile_callbacks.compiling(str(started.compile_id)):
            return self._traced(fn, args, kwargs, full, fullgraph, backend_name, label)

    def _limit_source(self) -> tuple[int, str]:
        """This frame's recompile limit and the setting that gave it."""
        own = recompile_limit_of(self.backend) is not None
        return self.recompile_limit, "its compile(recompile_limit=...)" if own else "config.recompile_limit"

    def _at_limit(
        self,
        fn: types.FunctionType,
        args: tuple,
        label: str,
        fullgraph: bool,
        limit: tuple[int, str],
        failure: GuardFailure | None,
    ) -> tuple[Any, tuple]:
        """A miss past a recompile limit (its count, the setting). Under `fullgraph=True` or
        `config.fail_on_recompile_limit_hit` it raises `FailOnRecompileLimitHit`, on every such
        call (as torch's), the entries still serving the calls they accept; otherwise the frame
        runs eagerly from now on, with one warning."""
        count, source = limit
        last = "" if failure is None else f" Last guard failure: {failure.reason}"
        if fullgraph or config.fail_on_recompile_limit_hit:
            switch = "fullgraph=True" if fullgraph else "config.fail_on_recompile_limit_hit"
            raise FailOnRecompileLimitHit(
                f"stenograph: {label}: recompile limit ({count}) reached ({source}), and {switch} makes "
                f"that an error.{last}"
            )
        self.eager_reason = f"recompile limit ({count}) reached"
        events.publish(events.RunsEagerly(self.code, label, self.eager_reason, events.EagerCause.RECOMPILE_LIMIT))
        warnings.warn(
            f"stenograph: {label} hit {source} ({count}); it runs eagerly from now on.{last}",
            StenographWarning,
            stacklevel=6,
        )
        return fn, args

    def _traced(
        self,
        fn: types.FunctionType,
        args: tuple,
        kwargs: dict,
        full: tuple,
        fullgraph: bool,
        backend_name: str | None,
        label: str,
    ) -> tuple[Any, tuple]:
        """`_compile`'s trace and build: the entry's function and the arguments it takes, or the
        function that runs this call eagerly."""
        request = FrameCompile(
            fn,
            args,
            kwargs,
            self.policy,
            backend=self.backend if backend_name is None else lookup_backend(backend_name),
            backend_name=self.backend_name if backend_name is None else backend_name,
            runtime=RUNTIME,
            fullgraph=fullgraph,
            persist=backend_name is None and warm.persisting(self),
            caller_handles=sys.exc_info()[1] is not None,
        )
        deferred_release.run_pending()
        try:
            with torch_state.preserved(), torch_state.user_modes_set_aside(), function_mode_stack.handlers_set_aside():
                with compile_leftovers.generated_during() as leftovers:
                    entry = compile_frame(request)
        except (ConstraintViolation, NativeGuardsUnavailable, FullgraphBreak, ForbiddenCall, SideEffectsNotReplayed):
            raise
        except Exception as e:
            compile_leftovers.release(leftovers)
            if fullgraph or _errors_on_break(e):
                raise
            if _out_of_depth(e):
                # not the frame's fault, nor an internal error: the program is too deep to trace
                # (a recursion, a deeply nested input) even with the compile's headroom; the
                # tracer's own wrapping may have made it `Unsupported`. As torch.compile gives up
                # on such a frame, this call runs eagerly (suppress_errors or not), where it may
                # fail as eager would; a shallower call compiles. Past the recompile limit of
                # such failures the frame runs eagerly for good.
                self.depth_failures += 1
                reason = f"compiling ran out of recursion depth ({type(e).__name__}: {e})"
                if self.depth_failures > self.recompile_limit:
                    self._give_up(label, reason, events.EagerCause.UNSUPPORTED)
                    return fn, args
                warnings.warn(f"stenograph: {label}: {reason}; this call runs eagerly", StenographWarning, stacklevel=6)
                return fn, args
            if isinstance(e, Unsupported):
                quiet = e.in_loop or e.whole_frame  # torch.compile skips such frames silently
                self._give_up(label, f"{e}", events.EagerCause.UNSUPPORTED, e.kind, warn=not quiet)
                self.skipped = True
                return self._eager(fn), args
            if not config.suppress_errors:
                raise
            if isinstance(e, StenographError):
                self._give_up(label, f"{type(e).__name__}: {e}", events.EagerCause.ERROR)
            else:
                self._give_up(label, f"internal error {type(e).__name__}: {e}", events.EagerCause.INTERNAL_ERROR)
            return fn, args
        compile_leftovers.release_with(entry.fn, leftovers)
        self.entries.append(entry)
        frame_skips.note_compiled()
        _watch(self, entry)
        events.publish(events.FrameCompiled(self.code, label, entry, len(self.entries)))
        if request.persist:
            warm.store(self, entry)
        return entry.fn, full

    def _persisted(self, fn: types.FunctionType, full: tuple, kwargs: dict) -> CacheEntry | None:
        """The first entry compiled by another process (the persisted cache, `warm/`) whose
        guards pass on this call, installed with the others not seen yet; None without one."""
        before = len(self.entries)
        if not warm.install_persisted(self, fn, RUNTIME):
            return None
        for entry in self.entries[before:]:
            _watch(self, entry)
        for entry in self.entries[before:]:
            if entry.guard(*full, **kwargs):
                return entry
        return None

    def _refusal(self, fn: types.FunctionType, label: str, full: tuple, kwargs: dict) -> str:
        """Why a call under `fail_on_recompile` would compile: each entry's failing guard."""
        lines = [f"stenograph: {label} would compile, but the stance is 'fail_on_recompile'"]
        if not self.entries:
            lines.append("    it has no compiled entry yet (compile it under the default stance first)")
        for i, entry in enumerate(self.entries):
            failure = entry.guard_failure(full, kwargs) if entry.takes_defaults_of(fn) else _OTHER_DEFAULTS
            lines.append(f"    - entry {i}: {(failure or GuardFailure('unknown')).reason}")
        return "\n".join(lines)

    def _eager(self, fn: types.FunctionType) -> types.FunctionType:
        """What runs `fn` eagerly: a skipped frame's calls are routed to compiled callees."""
        if not self.skipped:
            return fn
        if self.router is None:
            self.router = callee_router(self.backend, self.backend_name, self.policy.dynamic)
        return self.router.routed(fn)

    def _give_up(
        self,
        label: str,
        reason: str,
        cause: events.EagerCause,
        break_kind: BreakKind | None = None,
        *,
        warn: bool = True,
    ) -> None:
        self.eager_reason = reason
        events.publish(events.RunsEagerly(self.code, label, reason, cause, break_kind))
        if warn:
            warnings.warn(f"stenograph: {label} runs eagerly: {reason}", StenographWarning, stacklevel=6)


# misses run eagerly instead of compiling while on (`stenograph.run`); cached entries still run
run_only = ThreadFlag()


@functools.cache
def _settle_library_defaults() -> None:
    """Library defaults that compiled code is captured under, set once per process before the
    first frame is compiled or loaded, as torch.compile sets them: `torch.distributions` stops
    validating arguments by default (its checks branch on tensor values, a graph break each;
    eager code of the process follows the same default, so compiled and eager agree). A
    distribution made with `validate_args=True` still checks, breaking the graph there."""
    torch.distributions.Distribution.set_default_validate_args(False)


def _compiled(entries: list[CacheEntry]) -> int:
    """How many of `entries` count toward the recompile limits: entries installed from the
    persisted cache cost no compile, and do not."""
    return sum(not entry.installed for entry in entries)


def _out_of_depth(error: BaseException) -> bool:
    """Whether `error` is, or was caused by, a RecursionError (the tracer's wrappers of internal
    failures, `Unsupported` and `BackendCompilerFailed`, keep the original as cause)."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 32:
        if isinstance(current, RecursionError):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def _watch(cache: FrameCache, entry: CacheEntry) -> None:
    """Drop `entry` when an object its guards hold weakly dies (it can never match again)."""
    cache_ref = weakref.ref(cache)
    entry_id = id(entry)

    def forget(_: Any) -> None:
        owner = cache_ref()
        if owner is not None:
            owner.entries[:] = [e for e in owner.entries if id(e) != entry_id]

    entry.watchers = [weakref.ref(obj, forget) for r in entry.guard_set.watched if (obj := r()) is not None]


# a registry, not an owner: a cache lives while a function compiled with it (which holds it in
# `__stenograph_caches__`) or a wrapper or dispatcher of it does, so dropping the function
# drops its entries and the globals they reference
# keyed by the identities (which the cache holds) of the code (`code_tables`), the globals its
# guards read (functions made from one code over other globals have caches of their own) and
# the backend
_caches: weakref.WeakValueDictionary[tuple[int, int, int], FrameCache] = weakref.WeakValueDictionary()
# every cache alive, also those `reset` took out of `_caches` that a wrapper still holds and
# compiles into: the next reset clears them too
_live_caches: weakref.WeakSet[FrameCache] = weakref.WeakSet()
# held while a frame compiles and while caches are created (re-entrant: compiling may call
# compiled code, and a backend may compile more); as torch.compile has
compile_lock = threading.RLock()
_OWNED = "__stenograph_caches__"


# code object -> its caches alive (each backend's and region's): `config.accumulated_recompile_limit`
# caps their entries together
_code_caches: CodeTable[weakref.WeakSet[FrameCache]] = CodeTable()


def cache_for(code: types.CodeType, globals_dict: dict, backend: Any, backend_name: str) -> FrameCache:
    """The cache of the functions made from `code` over `globals_dict` (the globals their
    guards read), compiled with `backend`."""
    key = (id(code), id(globals_dict), id(backend))
    with compile_lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = FrameCache(code, globals_dict, backend, backend_name)
            _live_caches.add(cache)
            _code_caches.setdefault(code, weakref.WeakSet()).add(cache)
    return cache


def owned_cache(fn: types.FunctionType, backend: Any, backend_name: str, dynamic: bool | None = None) -> FrameCache:
    """`fn`'s cache for `backend`, kept alive by `fn` itself (as long as `fn` lives, another
    compile of it finds its entries; once it dies they go). A `dynamic` setting other than
    None (`compile(dynamic=...)`, handed on to the functions a break calls) becomes the cache's."""
    cache = cache_for(fn.__code__, fn.__globals__, backend, backend_name)
    if dynamic is not None:
        cache.policy.dynamic = dynamic
    owned = fn.__dict__.setdefault(_OWNED, [])
    if not any(c is cache for c in owned):
        owned.append(cache)
        cache.owners.add(fn)
        nested_caches.hold(cache, fn.__code__)  # a closure's cache outlives this closure
        nested_caches.adopt(fn)
    return cache


def all_caches() -> list[FrameCache]:
    return list(_caches.values())


def reset_caches() -> None:
    with compile_lock:
        for cache in list(_live_caches):
            _forget(cache)
        _caches.clear()
        nested_caches.clear()


def forget_backend(backend: Any) -> None:
    """Drop every cache compiled for `backend` (a throwaway compilation, as `export` makes to
    list graph breaks), so the functions it compiled no longer hold it."""
    with compile_lock:
        forgotten = [cache for cache in list(_live_caches) if cache.backend is backend]
        for cache in forgotten:
            _forget(cache)
            key = (id(cache.code), id(cache.globals_dict), id(backend))
            if _caches.get(key) is cache:
                del _caches[key]
        nested_caches.drop(forgotten)


def _forget(cache: FrameCache) -> None:
    cache.clear()
    for fn in list(cache.owners):  # a wrapper still alive keeps its cache; fn no longer
        fn.__dict__[_OWNED] = [c for c in fn.__dict__.get(_OWNED, ()) if c is not cache]


process_state.register("entry.caches", reset_caches, lambda: len(_caches))


class Continue:
    """A tail call returned by transformed code at a graph break: `fn(*args)` comes next.

    Returning it instead of calling the resume function keeps Python's stack flat when a frame
    breaks inside a loop (each iteration would otherwise nest one more call). The entry wrapper
    that received it runs the chain (`run`); `fn` is a resume function's raw dispatcher, taking
    `args` as one tuple (`resume_dispatcher`), always one Python frame above the resume code
    (`run` raises the recursion limit by two for itself and it: `recursion`).
    """

    __slots__ = ("fn", "args")

    def __init__(self, fn: Any, args: tuple) -> None:
        self.fn = fn
        self.args = args

    def run(self) -> Any:
        # this frame and the dispatcher it calls are not the user's: off the recursion limit
        added = lift(2)
        try:
            step: Any = self
            while type(step) is Continue:
                # the tuple as one argument: a plain call, which CPython runs without a C-level
                # frame (`f(*args)` takes one, and C stack is what 3.11 overflows, 3.12 limits)
                step = step.fn(step.args)
            return step
        finally:
            if added:
                lower(added)


def entry_wrapper(
    fn: types.FunctionType,
    backend: Any,
    backend_name: str,
    fullgraph: bool,
    dynamic: bool | None = None,
    nested: bool = False,
) -> Any:
    """The callable that replaces `fn`: guarded dispatch to compiled entries.

    A `nested` wrapper is the one compiled code calls (a user function called at a graph break):
    it raises the recursion limit by its own frame while it runs, so recursion through compiled
    code reaches eager's depth (`recursion`). The one user code calls does not (one frame per
    call from eager code, not per level), and stays as cheap as it was; its miss path, which
    adds a frame, raises the limit for both.
    """
    cache = owned_cache(fn, backend, backend_name, dynamic)
    entries = cache.entries
    miss = cache.miss
    # the closure travels as the first argument of guards and entries (one cache for all closures)
    prefix = (fn.__closure__,) if fn.__code__.co_freevars else ()

    # The lookup, written out once with the closure and once without (every call's path:
    # splicing an empty prefix costs a third of the wrapper's time). Defaults
    # are read on every call: the user may assign `__defaults__` after compiling, and an entry
    # binds missing arguments to the defaults it was compiled with.
    if prefix:
        closure = prefix[0]

        def compiled(*args: Any, **kwargs: Any) -> Any:
            if _stance.bypass or _modes._is_in_any_mode_without_ignore_compile_internals:
                return _slow_call(cache, fn, prefix, args, kwargs, fullgraph, dynamic)
            if _torch_compiling():
                return fn(*args, **kwargs)
            d = fn.__defaults__
            k = fn.__kwdefaults__
            for entry in entries:
                if (entry.defaults is d and entry.kwdefaults is k or entry.same_defaults(d, k)) and entry.guard(
                    closure, *args, **kwargs
                ):
                    result = entry.fn(closure, *args, **kwargs)
                    break
            else:
                result = miss(fn, prefix, args, kwargs, fullgraph, 2)
            return result.run() if type(result) is Continue else result

    else:

        def compiled(*args: Any, **kwargs: Any) -> Any:
            if _stance.bypass or _modes._is_in_any_mode_without_ignore_compile_internals:
                return _slow_call(cache, fn, prefix, args, kwargs, fullgraph, dynamic)
            if _torch_compiling():
                return fn(*args, **kwargs)
            d = fn.__defaults__
            k = fn.__kwdefaults__
            for entry in entries:
                if (entry.defaults is d and entry.kwdefaults is k or entry.same_defaults(d, k)) and entry.guard(
                    *args, **kwargs
                ):
                    result = entry.fn(*args, **kwargs)
                    break
            else:
                result = miss(fn, prefix, args, kwargs, fullgraph, 2)
            return result.run() if type(result) is Continue else result

    if nested:
        compiled = _nested(fn, entries, miss, fullgraph, prefix)
    _WRAPPER_CODES.add(compiled.__code__)
    functools.update_wrapper(compiled, fn)
    compiled.__stenograph_original__ = fn  # type: ignore[attr-defined]
    compiled.__stenograph_fullgraph__ = fullgraph  # type: ignore[attr-defined]
    compiled.__stenograph_cache__ = cache  # type: ignore[attr-defined]
    return compiled


# the code of the entry wrappers (three spellings of one lookup): a frame running one is a call
# of a compiled function in progress, its code compiled or run eagerly
_WRAPPER_CODES: set[types.CodeType] = set()


def is_entry_wrapper_code(code: types.CodeType) -> bool:
    """Whether a frame running `code` is an entry wrapper's (a compiled function's call)."""
    return code in _WRAPPER_CODES


def _slow_call(
    cache: FrameCache,
    fn: types.FunctionType,
    prefix: tuple,
    args: tuple,
    kwargs: dict,
    fullgraph: bool,
    dynamic: bool | None,
) -> Any:
    """A call the cached path sets aside: under a stance that sets the function's own entries
    aside (`force_eager` runs it eagerly, a forced backend runs and compiles the entries of that
    backend's cache), while a dispatch mode that must see every operator may be active (the
    frame is skipped: `frame_skips`), or while a skipped fullgraph call counts compiled frames."""
    stance = _stance.stance
    if stance.name == "force_eager" or _torch_compiling():
        return fn(*args, **kwargs)
    if frame_skips.user_mode_active():
        return frame_skips.run_skipped(fn, cache.code, fullgraph, frame_skips.USER_MODE)(*args, **kwargs)
    if stance.backend is not None:
        cache = owned_cache(fn, stance.backend, stance.backend_name, dynamic)
    full = prefix + args
    for entry in cache.entries:
        if entry.takes_defaults_of(fn) and entry.guard(*full, **kwargs):
            frame_skips.note_compiled()
            result = entry.fn(*full, **kwargs)
            break
    else:
        result = cache.miss(fn, prefix, args, kwargs, fullgraph, 2)  # miss's frame and this one
    return result.run() if type(result) is Continue else result


def _in_nested_trace(fn: types.FunctionType, args: tuple, kwargs: dict) -> bool:
    """Whether this call is part of another trace, where `fn` runs as it is (its operations
    recorded by that trace): a custom op's kernel run on the fake tensors of a trace (torch.compile
    does not compile inside a kernel invocation), or `torch.fx.symbolic_trace` with
    `config.error_on_nested_fx_trace` off (on, it raises `NestedTrace`)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, FakeTensor) and value.fake_mode.in_kernel_invocation:
            return True
    if not torch.fx._symbolic_trace.is_fx_symbolic_tracing() or config.force_compile_during_fx_trace:
        return False
    if config.error_on_nested_fx_trace:
        raise NestedTrace(
            f"Detected that you are using FX to symbolically trace a dynamo-optimized function "
            f"({fn.__qualname__}, compiled by stenograph). This is not supported: trace the original function"
        )
    return True


def _errors_on_break(error: Exception) -> bool:
    """A graph break the `error_on_graph_break` setting makes an error: the setting where it was
    met, else (met outside a traced instruction) the one the compile started under."""
    if not isinstance(error, Unsupported):
        return False
    return error.error_on_break if error.error_on_break is not None else errors_on_graph_break()


def _nested(fn: types.FunctionType, entries: list[CacheEntry], miss: Any, fullgraph: bool, prefix: tuple) -> Any:
    """The entry wrapper compiled code calls: the lookup, with the recursion limit raised by
    this frame while it runs (its miss path raises it by the miss frame only)."""

    def compiled(*args: Any, **kwargs: Any) -> Any:
        added = lift(1)
        try:
            full = prefix + args
            d = fn.__defaults__
            k = fn.__kwdefaults__
            for entry in entries:
                if (entry.defaults is d and entry.kwdefaults is k or entry.same_defaults(d, k)) and entry.guard(
                    *full, **kwargs
                ):
                    result = entry.fn(*full, **kwargs)
                    break
            else:
                result = miss(fn, prefix, args, kwargs, fullgraph)
            return result.run() if type(result) is Continue else result
        finally:
            if added:
                lower(added)

    return compiled


def resume_dispatcher(fn: types.FunctionType, backend: Any, backend_name: str, dynamic: bool | None = None) -> Any:
    """What a graph break's `Continue` calls for resume function `fn`: `dispatch(args)`, the
    guarded lookup taking the arguments as one tuple (the closure first, for code with free
    variables: one cache serves every closure, as in `closure_caller`). Resume functions
    have no defaults. `dynamic` is the breaking frame's `compile(dynamic=...)` setting."""
    cache = owned_cache(fn, backend, backend_name, dynamic)
    entries = cache.entries
    miss = cache.miss
    if not fn.__code__.co_freevars:

        def dispatch(args: tuple) -> Any:
            for entry in entries:
                if entry.guard(*args):
                    return entry.fn(*args)
            return miss(fn, (), args, {}, False)

        return dispatch

    own = fn.__closure__

    def dispatch_closure(args: tuple) -> Any:
        for entry in entries:
            if entry.guard(*args):
                return entry.fn(*args)
        closure = args[0]
        target = fn if closure is own else with_closure(fn, closure)
        return miss(target, (closure,), args[1:], {}, False)

    return dispatch_closure


def closure_caller(fn: types.FunctionType, backend: Any, backend_name: str, dynamic: bool | None = None) -> Any:
    """`call(f, *args)`: runs any function `f` made from `fn`'s code, compiled, with `f`'s own
    closure. A graph break that calls a closure it received (a decorator's wrapper, say) goes
    through this, so cached code never calls the closure of the call it was compiled for.

    One cache serves every closure of the code: guards and transformed code take the cells as
    their first argument. Compiled code calls this (bound as a method), so it raises the
    recursion limit by its own frame while it runs (`recursion`); the lookup is written out here
    rather than called, so no other frame of stenograph's sits under the callee.
    """
    cache = owned_cache(fn, backend, backend_name, dynamic)
    entries = cache.entries
    miss = cache.miss

    def call(f: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
        added = lift(1)
        try:
            closure = f.__closure__
            # an entry binds missing arguments to the defaults it was compiled with
            for entry in entries:
                if entry.takes_defaults_of(f) and entry.guard(closure, *args, **kwargs):
                    result = entry.fn(closure, *args, **kwargs)
                    break
            else:
                result = miss(f, (closure,), args, kwargs, False)
            return result.run() if type(result) is Continue else result
        finally:
            if added:
                lower(added)

    return call


_UNSEEN = object()  # a forward the module caller has not met yet

# backend id -> its module caller (which keeps the backend alive, so the id stays its own)
_module_callers: weakref.WeakValueDictionary[tuple[int, bool | None], Any] = weakref.WeakValueDictionary()
process_state.register_containers("entry.module_callers", _module_callers)


_MODULE_CALL = torch.nn.Module.__call__


def module_caller(backend: Any, backend_name: str, dynamic: bool | None = None) -> Any:
    """`call(module, *args)` running a module's compiled forward (its forward hooks run eagerly
    around it; with global module hooks the module is called as it is).

    Used where a graph break calls a submodule: the submodule is compiled as its own frame.
    It does not raise the recursion limit (`recursion`): its two frames (this one and the
    forward's entry wrapper) stand for the two of `Module.__call__` that eager spends per call.
    """
    found = _module_callers.get((id(backend), dynamic))
    if found is not None:
        return found
    # forward function -> its entry wrapper, its routed eager run (`disable(recursive=False)`),
    # or None for a disabled forward (run as it is)
    forwards: dict[types.FunctionType, Any] = {}

    def call(module: Any, *args: Any, **kwargs: Any) -> Any:
        # read statically: a TorchScript module's class answers `forward` through a descriptor
        # that fails when read from the class
        forward = inspect.getattr_static(type(module), "forward", None)
        plain = "forward" not in module.__dict__ and isinstance(forward, types.FunctionType)
        own_call = type(module).__call__  # a class marked `disable` has a disabled one: eager
        if not plain or (own_call is not _MODULE_CALL and is_disabled(own_call)) or has_global_forward_hooks():
            return module(*args, **kwargs)
        wrapper = forwards.get(forward, _UNSEEN)
        if wrapper is _UNSEEN:
            frame = eager_frame_of(forward)  # `disable(recursive=False)`: eager, its calls compiled
            if frame is not None:
                wrapper = callee_router(backend, backend_name, dynamic).running_eagerly(frame)
            elif is_disabled(forward):
                wrapper = None
            else:
                wrapper = entry_wrapper(forward, backend, backend_name, False, dynamic)
            forwards[forward] = wrapper
        if wrapper is None:
            return module(*args, **kwargs)
        if has_module_hooks(module):
            return call_with_hooks(module, wrapper, args, kwargs)
        return wrapper(module, *args, **kwargs)

    _module_callers[(id(backend), dynamic)] = call
    return call


_routers: weakref.WeakValueDictionary[tuple[int, bool | None], CalleeRouter] = weakref.WeakValueDictionary()
process_state.register_containers("entry.callee_routers", _routers)


def callee_router(backend: Any, backend_name: str, dynamic: bool | None = None) -> CalleeRouter:
    """The router of the frames skipped under `backend`: their callees compile with it."""
    found = _routers.get((id(backend), dynamic))
    if found is not None:
        return found
    router = CalleeRouter(
        lambda fn: entry_wrapper(fn, backend, backend_name, False, dynamic, nested=True),
        module_caller(backend, backend_name, dynamic),
    )
    _routers[(id(backend), dynamic)] = router
    return router


# what generated code at a graph break calls: handed down to the compiler and the break writer
RUNTIME = Runtime(
    entry_wrapper=entry_wrapper,
    resume_dispatcher=resume_dispatcher,
    closure_caller=closure_caller,
    module_caller=module_caller,
    cache_for=cache_for,
    callee_router=callee_router,
    continue_class=Continue,
).recording()
