"""Recording compile events into report records, and timing calls of the entries built meanwhile.

One recorder at a time (`start()`), shared by the structured trace and `stenograph run`.
Per-call timing wraps the transformed function of each entry built while recording, so calls
of other entries, and every call when nothing records, keep the plain per-call path.
"""

from __future__ import annotations

import functools
import linecache
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from .. import events
from ..graph.resume import frame_name
from ..observability.logs import readable_graph
from .model import (
    BreakRecord,
    CallStats,
    CompileRecord,
    FrameRecord,
    GraphRecord,
    NodeRecord,
    RecompileRecord,
    Session,
    resume_parent,
)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
Listener = Callable[[str, FrameRecord, CompileRecord], None]


class Recorder:
    """Subscribes to compile events and keeps a `Session`; listeners hear each change as
    `(what, frame, record)` with `what` in started / graph_break / recompile / compiled / failed."""

    def __init__(self, time_calls: bool = True, title: str = "stenograph report", command: str = "") -> None:
        self.time_calls = time_calls
        self.session = Session(title=title, command=command or " ".join(sys.argv), created=time.time())
        self.session.versions = {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "stenograph": _version(),
        }
        self.listeners: list[Listener] = []

    def start(self) -> Recorder:
        events.subscribe(self._on_event)
        return self

    def stop(self) -> None:
        events.unsubscribe(self._on_event)

    def _new_frame(self, event: events.CompileEvent) -> FrameRecord:
        assert event.compile_id is not None
        code = event.code
        name = frame_name(code)
        frame = FrameRecord(event.compile_id.frame, name, code.co_filename, code.co_firstlineno)
        parent_name = resume_parent(name)
        if parent_name is not None:
            frame.resume_of = next(
                (
                    f.frame_id
                    for f in self.session.frames
                    if f.filename == frame.filename and f.firstlineno == frame.firstlineno and not f.is_resume
                ),
                None,
            )
        return frame

    def _on_event(self, event: events.CompileEvent) -> None:
        assert event.compile_id is not None
        frame = self.session.frame_or_add(event.compile_id.frame, lambda: self._new_frame(event))
        record = frame.compile_record(str(event.compile_id), start_time=time.time())
        if isinstance(event, events.CompileStarted):
            record.stack = user_call_stack()
            what = "started"
        elif isinstance(event, events.GraphBreak):
            record.graph_break = break_record(event)
            what = "graph_break"
        elif isinstance(event, events.Recompile):
            failure = event.failure
            record.recompile = RecompileRecord(str(event.previous or "?"), failure.check, failure.new_value)
            what = "recompile"
        elif isinstance(event, events.FrameCompiled):
            fill_compiled(record, event.entry)
            if self.time_calls:
                time_calls(event.entry, record.calls)
            what = "compiled"
        elif isinstance(event, events.RunsEagerly):
            record.failure = event.reason
            record.failure_cause = event.cause
            what = "failed"
        elif isinstance(event, events.CacheLookup):
            record.cache.append(f"{event.outcome.value}: {event.detail}")
            what = "cache"
            if event.outcome is events.CacheOutcome.INSTALLED:
                fill_compiled(record, event.entry)
                what = "installed"
        else:
            return
        for listener in list(self.listeners):
            listener(what, frame, record)


def fill_compiled(record: CompileRecord, entry: Any) -> None:
    record.graph = graph_record(entry.graph) if entry.graph is not None else None
    record.guards = [check.text for check in entry.guard_set.ordered()]
    record.guard_source = entry.guard_source
    record.transformed_source = entry.transformed_source
    record.capture_s = entry.capture_seconds
    record.backend_s = entry.backend_seconds
    record.ddp_split = entry.ddp_split.table() if entry.ddp_split is not None else None


def graph_record(gm: torch.fx.GraphModule) -> GraphRecord:
    nodes = []
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        shape = ""
        if isinstance(value, torch.Tensor):
            shape = f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
        elif value is not None and not isinstance(value, (tuple, list)):
            shape = str(value)
        target = node.meta.get("source", "") if node.op == "placeholder" else _target_name(node.target)
        inputs = [n.name for n in node.all_input_nodes]
        nodes.append(NodeRecord(node.name, node.op, str(target), inputs, shape))
    return GraphRecord(readable_graph(gm), nodes)


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or repr(target)
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    return f"{module}.{name}" if module else name


def break_record(event: events.GraphBreak, around: int = 3) -> BreakRecord:
    stack = [list(frame) for frame in event.user_stack]
    context: list[list[Any]] = []
    if stack:
        filename, line = stack[0][0], int(stack[0][1])
        for n in range(max(1, line - around), line + around + 1):
            text = linecache.getline(filename, n)
            if text:
                context.append([n, text.rstrip("\n")])
    return BreakRecord(event.reason, event.instruction, stack, context)


def user_call_stack() -> list[list[Any]]:
    """The Python stack leading to this compilation, without stenograph's or runpy's frames."""
    frames = []
    for summary in traceback.extract_stack():
        filename = summary.filename
        if filename.startswith(_PACKAGE_DIR) or "runpy" in filename or filename.startswith("<frozen"):
            continue
        frames.append([filename, summary.lineno, summary.name, (summary.line or "").strip()])
    return frames


def time_calls(entry: Any, stats: CallStats) -> None:
    """Make `entry` record each call's wall time in `stats` (its transformed function, wrapped)."""
    inner = entry.fn
    clock = time.perf_counter
    add = stats.add

    @functools.wraps(inner)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            add(clock() - start)

    entry.fn = timed


def _version() -> str:
    try:
        # slow to import (importlib.metadata scans installed distributions); needed once per report
        from importlib.metadata import version

        return version("stenograph")
    except Exception:
        return "unknown"


_active: Recorder | None = None


def start(time_calls: bool = True, title: str = "stenograph report", command: str = "") -> Recorder:
    """The recorder, started now unless one already records (then that one is returned)."""
    global _active
    if _active is None:
        _active = Recorder(time_calls, title, command).start()
    return _active


def active() -> Recorder | None:
    return _active


def stop() -> Session | None:
    """Stop recording; returns what was recorded."""
    global _active
    if _active is None:
        return None
    recorder, _active = _active, None
    recorder.stop()
    return recorder.session
