"""The entry wrapper: cache lookup, guard check, compile on miss, recompile policy.

DESIGN decisions 2 and 3. Each code object (per backend) has one `FrameCache`, a list of entries
tried in order. The per-call path is deliberately tiny: for each entry, one call of its generated
guard function with the caller's own arguments, then one call of its transformed function.
"""

from __future__ import annotations

import functools
import logging
import types
import warnings
import weakref
from typing import Any

from . import config
from .compiler import CacheEntry, compile_frame, frame_label
from .errors import StenographError, Unsupported

log = logging.getLogger("stenograph")


class StenographWarning(UserWarning):
    """A frame runs eagerly (unsupported code, recompile limit, or an internal error)."""


class FrameCache:
    """Compiled entries of one code object for one backend, and its recompile state."""

    def __init__(self, code: types.CodeType, backend: Any, backend_name: str) -> None:
        self.code = code
        self.backend = backend  # kept alive so the cache key's id stays unique
        self.backend_name = backend_name
        self.entries: list[CacheEntry] = []
        self.eager_reason: str | None = None
        self.recompile_reasons: list[str] = []

    def clear(self) -> None:
        self.entries.clear()
        self.eager_reason = None
        self.recompile_reasons.clear()

    def miss(self, fn: types.FunctionType, prefix: tuple, args: tuple, kwargs: dict, fullgraph: bool) -> Any:
        """No entry's guards passed: compile a new entry, or run eagerly."""
        if self.eager_reason is not None:
            return fn(*args, **kwargs)
        label = frame_label(self.code)
        if self.entries:
            reasons = [e.failure_reason(prefix + args, kwargs) for e in self.entries]
            self.recompile_reasons.append(reasons[-1] or "unknown")
            log.debug("recompiling %s: %s", label, reasons[-1])
            if len(self.entries) >= config.recompile_limit:
                self.eager_reason = f"recompile limit ({config.recompile_limit}) reached"
                warnings.warn(
                    f"stenograph: {label} hit config.recompile_limit ({config.recompile_limit}); "
                    f"it runs eagerly from now on. Last guard failure: {reasons[-1]}",
                    StenographWarning,
                    stacklevel=3,
                )
                return fn(*args, **kwargs)
        try:
            entry = compile_frame(fn, args, kwargs, self.backend, self.backend_name)
        except Unsupported as e:
            if fullgraph:
                raise
            self._give_up(label, f"{e}")
            return fn(*args, **kwargs)
        except Exception as e:
            if fullgraph or not config.suppress_errors:
                raise
            what = "" if isinstance(e, StenographError) else "internal error "
            self._give_up(label, f"{what}{type(e).__name__}: {e}")
            return fn(*args, **kwargs)
        self.entries.append(entry)
        _watch(self, entry)
        return entry.fn(*prefix, *args, **kwargs)

    def _give_up(self, label: str, reason: str) -> None:
        self.eager_reason = reason
        warnings.warn(f"stenograph: {label} runs eagerly: {reason}", StenographWarning, stacklevel=4)


def _watch(cache: FrameCache, entry: CacheEntry) -> None:
    """Drop `entry` when an object its guards hold weakly dies (it can never match again)."""
    cache_ref = weakref.ref(cache)
    entry_id = id(entry)

    def forget(_: Any) -> None:
        owner = cache_ref()
        if owner is not None:
            owner.entries[:] = [e for e in owner.entries if id(e) != entry_id]

    entry.watchers = [weakref.ref(obj, forget) for r in entry.guard_set.watched if (obj := r()) is not None]


_caches: dict[tuple[types.CodeType, int], FrameCache] = {}


def cache_for(code: types.CodeType, backend: Any, backend_name: str) -> FrameCache:
    key = (code, id(backend))
    cache = _caches.get(key)
    if cache is None:
        cache = _caches[key] = FrameCache(code, backend, backend_name)
    return cache


def all_caches() -> list[FrameCache]:
    return list(_caches.values())


def reset_caches() -> None:
    for cache in _caches.values():
        cache.clear()
    _caches.clear()


def entry_wrapper(fn: types.FunctionType, backend: Any, backend_name: str, fullgraph: bool) -> Any:
    """The callable that replaces `fn`: guarded dispatch to compiled entries."""
    cache = cache_for(fn.__code__, backend, backend_name)
    entries = cache.entries
    miss = cache.miss
    if fn.__code__.co_freevars:
        closure = fn.__closure__

        def compiled(*args: Any, **kwargs: Any) -> Any:
            for entry in entries:
                if entry.guard(closure, *args, **kwargs):
                    return entry.fn(closure, *args, **kwargs)
            return miss(fn, (closure,), args, kwargs, fullgraph)

    else:

        def compiled(*args: Any, **kwargs: Any) -> Any:
            for entry in entries:
                if entry.guard(*args, **kwargs):
                    return entry.fn(*args, **kwargs)
            return miss(fn, (), args, kwargs, fullgraph)

    functools.update_wrapper(compiled, fn)
    compiled.__stenograph_original__ = fn  # type: ignore[attr-defined]
    compiled.__stenograph_cache__ = cache  # type: ignore[attr-defined]
    return compiled
