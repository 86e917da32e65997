"""Reading a structured trace written by stenograph back into report records (`stenograph report`).

Each line is `<glog prefix>] <JSON envelope>`, followed by tab-indented payload lines. The
envelopes tlparse knows give the compile ids, graphs, guards and metrics; the `stenograph_*`
artifacts give what tlparse has no slot for (graph nodes, transformed code, break stack, calls).
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

from .model import (
    BreakRecord,
    CallStats,
    CompileRecord,
    GraphRecord,
    NodeRecord,
    RecompileRecord,
    Session,
    failure_cause,
)

_PREFIX = re.compile(r"^[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^:]+:\d+\] ")


def find_trace(path: str) -> str:
    """`path` itself, or the newest stenograph trace file in the directory `path`."""
    if os.path.isdir(path):
        found = sorted(glob.glob(os.path.join(path, "stenograph_trace_*.log")), key=os.path.getmtime)
        if not found:
            raise FileNotFoundError(f"no stenograph_trace_*.log in {path}")
        return found[-1]
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no trace file {path}")
    return path


def read_entries(path: str) -> list[tuple[dict[str, Any], str | None]]:
    """(envelope, payload or None) for each entry of a trace file."""
    entries: list[tuple[dict[str, Any], str | None]] = []
    payload: list[str] | None = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("\t") and entries:
                payload = payload if payload is not None else []
                payload.append(line[1:])
                continue
            if payload is not None:
                entries[-1] = (entries[-1][0], "\n".join(payload))
                payload = None
            match = _PREFIX.match(line)
            if match is None:
                continue
            try:
                entries.append((json.loads(line[match.end() :]), None))
            except json.JSONDecodeError:
                continue
    if payload is not None:
        entries[-1] = (entries[-1][0], "\n".join(payload))
    return entries


def load(path: str, title: str = "stenograph report") -> Session:
    """The session a trace file describes."""
    path = find_trace(path)
    session = Session(title=title, command=f"stenograph report {path}", created=os.path.getmtime(path))
    strings: dict[int, str] = {}
    for envelope, payload in read_entries(path):
        if "str" in envelope:
            text, index = envelope["str"]
            strings[index] = text
            continue
        artifact = envelope.get("artifact", {}).get("name")
        if artifact == "stenograph_version" and payload:
            session.versions = json.loads(payload)
            continue
        if "frame_id" not in envelope:
            continue
        frame = session.frame_or_add(envelope["frame_id"])
        record = frame.compile_record(f"{envelope['frame_id']}/{envelope['frame_compile_id']}")
        data = json.loads(payload) if payload and artifact and envelope["artifact"]["encoding"] == "json" else None
        if artifact == "stenograph_frame":
            frame.name, frame.filename = data["name"], data["filename"]
            frame.firstlineno, frame.resume_of = data["firstlineno"], data["resume_of"]
        elif artifact == "stenograph_graph_break":
            record.graph_break = BreakRecord(**data)
        elif artifact == "stenograph_recompile":
            record.recompile = RecompileRecord(**data)
        elif artifact == "stenograph_graph_nodes":
            assert record.graph is not None
            record.graph.nodes = [NodeRecord(**node) for node in data]
        elif artifact == "stenograph_ddp_split":
            record.ddp_split = payload or ""
        elif artifact == "stenograph_transformed_code":
            record.transformed_source = payload or ""
        elif artifact == "stenograph_call_times":
            record.calls = CallStats(**data)
        elif "dynamo_start" in envelope:
            stack = envelope["dynamo_start"].get("stack") or []
            record.stack = [
                [strings.get(s["filename"], "?"), s["line"], s["name"], s.get("loc", "")] for s in stack[:-1]
            ]
        elif "dynamo_output_graph" in envelope:
            record.graph = GraphRecord(payload or "")
        elif "dynamo_guards" in envelope:
            record.guards = [g["code"] for g in json.loads(payload or "[]")]
        elif "dynamo_cpp_guards_str" in envelope:
            record.guard_source = payload or ""
        elif "compilation_metrics" in envelope:
            _metrics(record, envelope["compilation_metrics"])
    return session


def _metrics(record: CompileRecord, metrics: dict[str, Any]) -> None:
    record.start_time = metrics.get("start_time") or 0.0
    if metrics.get("fail_type"):
        record.failure = metrics.get("fail_reason")
        record.failure_cause = failure_cause(metrics["fail_type"])
        return
    backend = metrics.get("backend_compile_time_s")
    total = metrics.get("entire_frame_compile_time_s")
    if total is not None:
        record.backend_s = backend or 0.0
        record.capture_s = total - record.backend_s
