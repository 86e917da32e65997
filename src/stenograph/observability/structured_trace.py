"""The structured trace that PyTorch's `tlparse` reads: `STENOGRAPH_TRACE=/dir` or `TORCH_TRACE=/dir`.

One file per process, `stenograph_trace_<pid>_<time>.log` in that directory, written as
torch.compile writes its own: each line a glog-style prefix and a JSON envelope
(`dynamo_start`, `dynamo_output_graph`, `dynamo_guards`, `compilation_metrics`, `artifact`, ...)
with the compile id `frame_id/frame_compile_id/attempt`, and the payload, if any, on the following
lines, each starting with a tab, its md5 in `has_payload`. A graph break is logged the way
torch.compile logs a restart: the reason in attempt 0 and the resulting entry in attempt 1.

Entries tlparse has no slot for are `stenograph_*` artifacts (graph nodes, transformed code,
graph-break stack, per-call times); `stenograph report` reads them back (`report/from_trace.py`).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict
from typing import Any, TextIO

from ..guards.failures import GuardFailure
from ..report import recorder as recording
from ..report.model import CompileRecord, FrameRecord, failure_type

ENV_VARS = ("STENOGRAPH_TRACE", "TORCH_TRACE")


class TraceWriter:
    """Writes one trace file from the recorder's records, line by line, flushed as it goes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: TextIO = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed at exit
        self._lock = threading.Lock()
        self._strings: dict[str, int] = {}
        self._frames_written: set[int] = set()

    # -- the line format ------------------------------------------------------------------------

    def emit(self, envelope: dict[str, Any], payload: Any = None) -> None:
        if payload is not None and not isinstance(payload, str):
            payload = json.dumps(payload, indent=0, default=repr)
        if payload is not None:
            envelope["has_payload"] = hashlib.md5(payload.encode("utf-8"), usedforsecurity=False).hexdigest()
        now = time.time()
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now)) + f".{int((now % 1) * 1e6):06d}"
        origin = "stenograph/observability/structured_trace.py:0"
        text = f"V{stamp} {os.getpid()} {origin}] {json.dumps(envelope, default=repr)}\n"
        if payload is not None:
            text += "".join(f"\t{part}\n" for part in payload.split("\n"))
        with self._lock:
            if self._file.closed:
                return
            self._file.write(text)
            self._file.flush()

    def intern(self, text: str) -> int:
        index = self._strings.get(text)
        if index is None:
            index = self._strings[text] = len(self._strings)
            self.emit({"str": [text, index]})
        return index

    def artifact(self, ids: dict, name: str, payload: Any, encoding: str = "json") -> None:
        self.emit({"artifact": {"name": name, "encoding": encoding}, **ids}, payload)

    def close(self) -> None:
        with self._lock:
            self._file.close()

    # -- what the recorder reports ----------------------------------------------------------------

    def header(self, versions: dict[str, str]) -> None:
        self.artifact({}, "stenograph_version", versions)

    def on_record(self, what: str, frame: FrameRecord, record: CompileRecord) -> None:
        frame_no, index = (int(part) for part in record.compile_id.split("/"))
        first = {"frame_id": frame_no, "frame_compile_id": index, "attempt": 0}
        final = {**first, "attempt": 1 if record.graph_break is not None else 0}
        if frame.frame_id not in self._frames_written:
            self._frames_written.add(frame.frame_id)
            info = {"name": frame.name, "filename": frame.filename, "firstlineno": frame.firstlineno}
            self.artifact(first, "stenograph_frame", {**info, "resume_of": frame.resume_of})
        if what == "started":
            self.emit({"dynamo_start": {"stack": self._stack(record, frame)}, **first})
        elif what == "graph_break":
            brk = record.graph_break
            assert brk is not None
            self.artifact(first, "dynamo_graph_break_reason", graph_break_text(record), encoding="string")
            self.artifact(first, "stenograph_graph_break", asdict(brk))
        elif what == "recompile":
            rec = record.recompile
            assert rec is not None
            reason = GuardFailure(rec.check, rec.new_value).reason
            self.artifact(first, "recompile_reasons", [f"{rec.failed}: {reason}"])
            self.artifact(first, "stenograph_recompile", asdict(rec))
        elif what == "compiled":
            self._compiled(final, frame, record)
        elif what == "failed":
            self.emit({"compilation_metrics": self._metrics(frame, record), **final})
        elif what in ("cache", "installed"):
            self.artifact(final, "stenograph_cache", record.cache[-1], encoding="string")
            if what == "installed":
                self._compiled(final, frame, record)

    def _compiled(self, ids: dict, frame: FrameRecord, record: CompileRecord) -> None:
        if record.graph is not None:
            sizes = {n.name: n.shape for n in record.graph.nodes if n.shape}
            self.emit({"dynamo_output_graph": {"sizes": sizes}, **ids}, record.graph.code)
            self.artifact(ids, "stenograph_graph_nodes", [asdict(n) for n in record.graph.nodes])
        if record.ddp_split is not None:
            self.artifact(ids, "stenograph_ddp_split", record.ddp_split, encoding="string")
        self.emit({"dynamo_guards": {}, **ids}, [{"code": text} for text in record.guards])
        self.emit({"dynamo_cpp_guards_str": {}, **ids}, record.guard_source)
        self.artifact(ids, "stenograph_transformed_code", record.transformed_source, encoding="string")
        self.emit({"compilation_metrics": self._metrics(frame, record), **ids})

    def _metrics(self, frame: FrameRecord, record: CompileRecord) -> dict[str, Any]:
        index = int(record.compile_id.split("/")[1])
        graph = record.graph
        total = None
        if record.compiled:
            total = (record.capture_s or 0.0) + (record.backend_s or 0.0)
        metrics: dict[str, Any] = {
            "compile_id": record.compile_id,
            "co_name": frame.name,
            "co_filename": frame.filename,
            "co_firstlineno": frame.firstlineno,
            "cache_size": index,
            "accumulated_cache_size": index,
            "guard_count": len(record.guards),
            "graph_op_count": graph.op_count if graph else 0,
            "graph_node_count": len(graph.nodes) if graph else 0,
            "graph_input_count": graph.input_count if graph else 0,
            "start_time": record.start_time,
            "entire_frame_compile_time_s": total,
            "backend_compile_time_s": record.backend_s,
            "restart_reasons": [record.graph_break.reason] if record.graph_break else [],
            "stack_trace": [f"Line: {s[1]}, Name: {s[2]}, Filename: {s[0]}" for s in record.stack],
        }
        if record.failure is not None:
            metrics["fail_type"] = failure_type(record.failure_cause)
            metrics["fail_reason"] = record.failure
            metrics["fail_user_frame_filename"] = frame.filename
            metrics["fail_user_frame_lineno"] = frame.firstlineno
        return metrics

    def _stack(self, record: CompileRecord, frame: FrameRecord) -> list[dict[str, Any]]:
        stack = [
            {"line": line, "name": name, "filename": self.intern(filename), "loc": text}
            for filename, line, name, text in record.stack
        ]
        stack.append({"line": frame.firstlineno, "name": frame.name, "filename": self.intern(frame.filename)})
        return stack

    def write_call_times(self, frames: list[FrameRecord]) -> None:
        for frame in frames:
            for record in frame.compiles:
                if record.calls.count:
                    frame_no, index = (int(part) for part in record.compile_id.split("/"))
                    ids = {"frame_id": frame_no, "frame_compile_id": index, "attempt": 1 if record.graph_break else 0}
                    self.artifact(ids, "stenograph_call_times", asdict(record.calls))


def graph_break_text(record: CompileRecord) -> str:
    brk = record.graph_break
    assert brk is not None
    lines = [f"Graph break in user code at {brk.filename}:{brk.line}", f"Graph Break Reason: {brk.reason}"]
    lines.append("User code traceback:")
    for filename, line, name, text in reversed(brk.user_stack):
        lines.append(f'  File "{filename}", line {line}, in {name}')
        if text and str(text).strip():
            lines.append(f"    {str(text).strip()}")
    return "\n".join(lines)


_writer: TraceWriter | None = None


def enable(directory: str) -> str:
    """Start writing a trace into `directory` (created if needed); returns the file's path."""
    global _writer
    if _writer is not None:
        return _writer.path
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"stenograph_trace_{os.getpid()}_{int(time.time() * 1000)}.log")
    writer = TraceWriter(path)
    rec = recording.start(time_calls=True)
    writer.header(rec.session.versions)
    rec.listeners.append(writer.on_record)
    _writer = writer

    def finish() -> None:
        writer.write_call_times(rec.session.frames)
        writer.close()

    atexit.register(finish)
    return path


def trace_path() -> str | None:
    """The trace file being written, if any."""
    return _writer.path if _writer is not None else None


def enable_from_env() -> str | None:
    for name in ENV_VARS:
        directory = os.environ.get(name, "").strip()
        if directory:
            return enable(directory)
    return None
