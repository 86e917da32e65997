"""The persisted cache on the miss path: entries other processes compiled, found and installed;
entries this process compiles, stored.

On a miss, before tracing, `install_persisted` reads the entries stored under the code's key
(its fingerprint, the backend and its options, the tracing settings, the versions of Python,
torch and stenograph), finds the objects each refers to in this process, builds its guard
function anew and loads its compiled graph. Each is installed in the frame's cache as the
process that compiled it had it; the call then runs whichever one's guards pass, or compiles as
usual. A compiled entry is stored by `store` when everything it holds can be found again
elsewhere; otherwise it is not, and the log says why.

Nothing read from disk is trusted: a record that cannot be read, whose code changed, whose
objects are missing or whose graphs fail to load is skipped (one log line on the `cache` log)
and the frame compiles.
"""

from __future__ import annotations

import pickle
import types
from typing import Any

from .. import config, events
from ..backends.artifacts import ArtifactError, backend_identity, load_artifact, prepare_loading
from ..events import CacheOutcome
from ..frame_compiler import CacheEntry, frame_label
from ..graph.resume import nested_chain, nested_resume_function, resume_code, resume_function, resume_link
from ..guards.pyfunc import signature_only
from .fingerprints import entry_key
from .records import EntryRecord
from .references import Context, NotPersistable, Unresolved
from .store import Store, handed_over, store_for


def active_store() -> Store | None:
    """The store misses consult: the configured folder's, or the memory-only one when
    artifacts were handed over with `load_artifacts` and no folder is set."""
    folder = config.cache_dir
    if folder is not None:
        return store_for(folder)
    return store_for(None) if handed_over() else None


def persisting(cache: Any) -> bool:
    """Whether entries of `cache` are persisted: the cache is on and its backend can store what
    it compiles (`backends.artifacts`: built-ins do, a custom backend when it says how), and no
    `guard_filter_fn` dropped guards (a promise about this process's program, not another's)."""
    return (
        active_store() is not None
        and backend_identity(cache.backend) is not None
        and getattr(cache.backend, "guard_filter_fn", None) is None
    )


def prepare(backend: Any) -> None:
    """With the cache on, import what loading `backend`'s entries will import (seconds for
    AOTAutograd's and Inductor's loaders), when `compile()` is called rather than in the first
    call."""
    if active_store() is not None:
        prepare_loading(backend)


def _key(cache: Any) -> str | None:
    identity = backend_identity(cache.backend)
    return None if identity is None else entry_key(cache.code, identity, cache.policy.dynamic)


def install_persisted(cache: Any, fn: types.FunctionType, runtime: Any) -> int:
    """Install the persisted entries of `cache`'s code not installed yet; returns how many."""
    store = active_store()
    key = _key(cache) if store is not None else None
    if key is None:
        return 0
    installed = 0
    for name, payload in store.entries(key):
        if name in cache.persisted:
            continue
        cache.persisted.add(name)
        try:
            entry = _entry(payload, cache, fn, runtime)
        except Unresolved as e:
            rejected = events.CacheLookup(cache.code, frame_label(cache.code), CacheOutcome.REJECTED, f"{name}: {e}")
            events.publish(rejected)
            continue
        cache.entries.append(entry)
        installed += 1
        events.publish(events.CacheLookup(cache.code, entry.label, CacheOutcome.INSTALLED, name, entry))
    return installed


def _entry(payload: bytes, cache: Any, fn: types.FunctionType, runtime: Any) -> CacheEntry:
    try:
        record = pickle.loads(payload)
    except Exception as e:
        raise Unresolved(f"unreadable record ({type(e).__name__}: {e})") from e
    if not isinstance(record, EntryRecord):
        raise Unresolved("not an entry record")
    try:
        graphs = [load_artifact(artifact, cache.backend) for artifact in record.graphs]
    except ArtifactError as e:
        raise Unresolved(f"its compiled graph: {e.reason}") from e
    context = Context(cache.backend, _makers(runtime), graphs)
    guard_set, transformed = record.parts(fn, context)
    guard = guard_set.build(cache.code, transformed, record.label)
    return CacheEntry(
        guard,
        transformed,
        None,
        guard_set,
        cache.code,
        record.label,
        record.capture_seconds,
        record.backend_seconds,
        like=signature_only(fn),
        defaults=fn.__defaults__,
        kwdefaults=fn.__kwdefaults__,
        installed=True,
    )


def _makers(runtime: Any) -> dict[str, Any]:
    """How references to what the entry layer made are made again (`graph.runtime`)."""

    def resume(
        code: types.CodeType, globals_dict: dict, *rest: Any, compile_dynamic: Any = None, shares_cells: bool = False
    ) -> Any:
        offset, kinds, live, backend, backend_name, compiled, dynamic = rest
        fn = types.FunctionType(code, globals_dict)
        return resume_function(
            fn, offset, kinds, live, backend, backend_name, runtime, compiled, dynamic, compile_dynamic, shares_cells
        )

    def nested_resume(links: tuple, backend: Any, backend_name: str, dynamic: tuple, **options: Any) -> Any:
        return nested_resume_function(links, backend, backend_name, runtime, dynamic, **options)

    return {
        "resume": resume,
        "nested_resume": nested_resume,
        "resume_code": resume_code,
        "nested_chain": nested_chain,
        "resume_link": resume_link,
        "member": lambda name: getattr(runtime, name),
        "entry_wrapper": runtime.entry_wrapper,
        "closure_caller": runtime.closure_caller,
        "module_caller": runtime.module_caller,
        "cache_for": runtime.cache_for,
        "callee_router": runtime.callee_router,
    }


def store(cache: Any, entry: CacheEntry) -> None:
    """Persist `entry` of `cache` if the cache is on and everything it holds can be found again."""
    store = active_store()
    key = _key(cache) if store is not None else None
    if key is None:
        return
    try:
        record = EntryRecord.of(entry, cache.backend, _graphs(entry))
        payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    except NotPersistable as e:
        events.publish(events.CacheLookup(cache.code, entry.label, CacheOutcome.NOT_STORED, str(e)))
        return
    name = store.put(key, payload)
    cache.persisted.add(name)
    events.publish(events.CacheLookup(cache.code, entry.label, CacheOutcome.STORED, name, entry))


def _graphs(entry: CacheEntry) -> list[tuple[Any, bytes]]:
    """The compiled graph `entry`'s code holds with its artifact (none for an entry whose trace
    recorded no operation). Raises `NotPersistable`."""
    if entry.artifact is None:
        return []
    if isinstance(entry.artifact, str):
        raise NotPersistable(entry.artifact)
    return [entry.artifact]
