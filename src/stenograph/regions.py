"""A compile() call's own recompile limit and cache placement (torch.compile's `recompile_limit=`
and `isolate_recompiles=`).

Both settings belong to one compile() call and hold for every frame it compiles: its function,
the resume functions of its graph breaks, the functions called there. Caches are keyed by (code
object, backend object), and the backend object is what the call hands down to all of those
frames, so a call with either setting compiles through a `CompileRegion`: a wrapper of its
compiler whose caches are its own and which carries the limit they read.

- `isolate_recompiles=True`: a region per compile() call, so two calls compiling one function
  neither share entries nor count each other's against their limits.
- `recompile_limit=N` alone: one region per (backend, N), shared by every such call, so calls
  with the same backend and limit share entries and the limit, as torch's do (torch also shares
  them with calls of other limits, whose entries stenograph keeps apart).

A miss in a region's cache first tries the entries its compiler's own cache holds (made by
compile() calls of that backend without either setting), as torch's isolated lookups fall back
to its shared entries; a new entry goes to the region's cache.
"""

from __future__ import annotations

import weakref
from typing import Any

from . import process_state
from .backends.wrapping import WrappedBackend


class CompileRegion(WrappedBackend):
    """The backend of a compile() call with `recompile_limit` (None: `config.recompile_limit`)
    or `isolate_recompiles`; its caches may read the entries of `compiler`'s (`shared_base`)."""

    def __init__(self, compiler: Any, recompile_limit: int | None, isolated: bool) -> None:
        super().__init__(compiler)
        self.recompile_limit = recompile_limit
        self.isolated = isolated


# (id of the compiler, limit) -> the region every non-isolated call with them compiles through;
# the region keeps its compiler alive, so the id stays its own while the entry lives
_shared: weakref.WeakValueDictionary[tuple[int, int], CompileRegion] = weakref.WeakValueDictionary()
process_state.register_containers("regions.shared", _shared)


def region_for(compiler: Any, recompile_limit: int | None, isolate_recompiles: bool) -> Any:
    """What a compile() call with these settings compiles through: `compiler` itself without
    either, a new region when isolated, else the region its compiler and limit share."""
    if isolate_recompiles:
        return CompileRegion(compiler, recompile_limit, isolated=True)
    if recompile_limit is None:
        return compiler
    key = (id(compiler), recompile_limit)
    region = _shared.get(key)
    if region is None:
        region = _shared[key] = CompileRegion(compiler, recompile_limit, isolated=False)
    return region


def recompile_limit_of(backend: Any) -> int | None:
    """The limit of the frames compiled with `backend`: a region's own, else None (the config's)."""
    return backend.recompile_limit if isinstance(backend, CompileRegion) else None


def shared_base(backend: Any) -> Any:
    """The backend whose own caches' entries a miss in `backend`'s may run: a region's compiler
    (None for any other backend)."""
    return backend.compiler if isinstance(backend, CompileRegion) else None
