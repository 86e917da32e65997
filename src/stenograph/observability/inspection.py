"""`stenograph.inspect(fn)`: what a compiled function has become, as readable text.

For every cache entry of the function and of its resume functions (the code after each graph
break): the guard function's source, the graph's code, the transformed function's source and the
compile time. DESIGN decision 9: the replacement of a frame is inspectable as Python.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

from .. import entry as entry_module
from ..frame_compiler import frame_label
from ..graph.resume import origin_of
from .logs import readable_graph


@dataclass
class EntryInfo:
    """One cache entry: `compile_id` is `frame/recompile` as in logs and traces ("?" if unknown)."""

    compile_id: str
    frame: str
    guard_source: str
    graph_code: str | None
    transformed_source: str
    capture_seconds: float
    backend_seconds: float

    @property
    def compile_seconds(self) -> float:
        return self.capture_seconds + self.backend_seconds

    def __str__(self) -> str:
        graph = self.graph_code if self.graph_code is not None else "(no graph: no tensor operations)"
        return "\n".join(
            [
                f"=== [{self.compile_id}] {self.frame}",
                f"compile time: {self.compile_seconds * 1e3:.1f} ms "
                f"(capture {self.capture_seconds * 1e3:.1f} ms, backend {self.backend_seconds * 1e3:.1f} ms)",
                "--- guard",
                self.guard_source.rstrip(),
                "--- graph",
                graph,
                "--- transformed code",
                self.transformed_source.rstrip(),
            ]
        )


@dataclass
class Inspection:
    """Entries in compile order per frame: the function first, then its resume functions."""

    entries: list[EntryInfo] = field(default_factory=list)
    recompile_reasons: dict[str, list[str]] = field(default_factory=dict)  # frame -> reasons
    runs_eagerly: dict[str, str] = field(default_factory=dict)  # frame -> why

    def __str__(self) -> str:
        if not self.entries and not self.runs_eagerly:
            return "no cache entries yet: call the compiled function first"
        parts = [str(e) for e in self.entries]
        for frame, reasons in self.recompile_reasons.items():
            parts.append(f"=== recompiles of {frame}:\n" + "\n".join(f"  {r}" for r in reasons))
        for frame, reason in self.runs_eagerly.items():
            parts.append(f"=== {frame} runs eagerly: {reason}")
        return "\n\n".join(parts)


def inspect(fn: Any) -> Inspection:
    """Cache entries of a function, method or module compiled by stenograph, as readable text."""
    cache = _cache_of(fn)
    result = Inspection()
    for frame_cache in [cache, *_resume_caches(cache)]:
        frame = frame_label(frame_cache.code)
        for entry in frame_cache.entries:
            result.entries.append(
                EntryInfo(
                    str(entry.compile_id or "?"),
                    frame,
                    entry.guard_source,
                    readable_graph(entry.graph) if entry.graph is not None else None,
                    entry.transformed_source,
                    entry.capture_seconds,
                    entry.backend_seconds,
                )
            )
        if frame_cache.recompile_reasons:
            result.recompile_reasons[frame] = list(frame_cache.recompile_reasons)
        if frame_cache.eager_reason is not None:
            result.runs_eagerly[frame] = frame_cache.eager_reason
    return result


def _cache_of(fn: Any) -> Any:
    target = fn
    if hasattr(target, "_compiled_forward"):  # OptimizedModule
        target = target._compiled_forward
    if isinstance(target, types.MethodType):
        target = target.__func__
    cache = getattr(target, "__stenograph_cache__", None)
    if cache is None:
        raise TypeError(
            f"stenograph.inspect() needs a function or module returned by stenograph.compile(), "
            f"got {type(fn).__qualname__}"
        )
    return cache


def _resume_caches(cache: Any) -> list[Any]:
    return [
        other
        for other in entry_module.all_caches()
        if other.backend is cache.backend and origin_of(other.code) is cache.code
    ]
