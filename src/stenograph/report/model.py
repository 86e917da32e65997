"""What the report shows, as plain data: frames, their compilations, graphs, breaks, timings.

Built live from compile events (`recorder.py`) or read back from a structured trace
(`from_trace.py`); the HTML renderer only sees these records. Everything is strings and numbers
so a record never keeps user tensors or modules alive and survives a trip through a trace.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..events import EagerCause


@dataclass
class NodeRecord:
    """One FX node: `inputs` are the names of the nodes it reads."""

    name: str
    op: str
    target: str
    inputs: list[str] = field(default_factory=list)
    shape: str = ""


@dataclass
class GraphRecord:
    code: str  # readable Python (print_readable)
    nodes: list[NodeRecord] = field(default_factory=list)

    @property
    def op_count(self) -> int:
        return sum(n.op in ("call_function", "call_method", "call_module") for n in self.nodes)

    @property
    def input_count(self) -> int:
        return sum(n.op == "placeholder" for n in self.nodes)


@dataclass
class BreakRecord:
    """A graph break; `context` is the user's source around the break line: [(line, text)]."""

    reason: str
    instruction: str
    user_stack: list[list[Any]]  # [[filename, line, function, text]], innermost first
    context: list[list[Any]] = field(default_factory=list)

    @property
    def filename(self) -> str:
        return self.user_stack[0][0] if self.user_stack else ""

    @property
    def line(self) -> int:
        return int(self.user_stack[0][1]) if self.user_stack else 0


@dataclass
class RecompileRecord:
    """Why entry `compile_id` was built: the guard of entry `failed` that failed, and the new value."""

    failed: str
    check: str
    new_value: str | None


@dataclass
class CallStats:
    """Per-call wall time of an entry's transformed code (measured only while recording)."""

    count: int = 0
    total_s: float = 0.0
    first_s: float | None = None
    samples: list[float] = field(default_factory=list)

    MAX_SAMPLES = 4096

    def add(self, seconds: float) -> None:
        if self.first_s is None:
            self.first_s = seconds
        else:
            if len(self.samples) < self.MAX_SAMPLES:
                self.samples.append(seconds)
        self.count += 1
        self.total_s += seconds

    @property
    def median_s(self) -> float | None:
        if self.samples:
            return statistics.median(self.samples)
        return self.first_s


# torch.compile's `fail_type` of a compilation that gave up (in the structured trace); any other
# cause is "Unsupported"
FAIL_TYPES = {EagerCause.RECOMPILE_LIMIT: "RecompileLimitExceeded", EagerCause.INTERNAL_ERROR: "InternalError"}


def failure_type(cause: EagerCause | None) -> str:
    """The structured trace's `fail_type` for a cause."""
    return FAIL_TYPES.get(cause, "Unsupported") if cause is not None else "Unsupported"


def failure_cause(fail_type: str) -> EagerCause:
    """The cause a trace's `fail_type` stands for ("Unsupported" and unknown names: unsupported)."""
    return next((cause for cause, name in FAIL_TYPES.items() if name == fail_type), EagerCause.UNSUPPORTED)


@dataclass
class CompileRecord:
    """One compilation `[frame/recompile]` of a frame: a cache entry, or a failure."""

    compile_id: str
    start_time: float = 0.0
    stack: list[list[Any]] = field(default_factory=list)  # user call stack, most recent call last
    graph: GraphRecord | None = None
    guards: list[str] = field(default_factory=list)
    guard_source: str = ""
    transformed_source: str = ""
    graph_break: BreakRecord | None = None
    recompile: RecompileRecord | None = None
    failure: str | None = None
    failure_cause: EagerCause | None = None  # why it runs eagerly, with `failure` the text
    capture_s: float | None = None
    backend_s: float | None = None
    calls: CallStats = field(default_factory=CallStats)
    ddp_split: str | None = None  # how the graph was split at DDP's buckets (the pieces' table)
    # what the persisted cache did ("installed: <entry>", "stored: ...", "rejected: <why>")
    cache: list[str] = field(default_factory=list)

    @property
    def compiled(self) -> bool:
        return self.capture_s is not None

    @property
    def status(self) -> str:
        if self.failure is not None:
            return "failed"
        if not self.compiled:
            return "compiling"
        return "break" if self.graph_break is not None else "ok"


@dataclass
class FrameRecord:
    """A code object that was compiled: a user function, or a resume function after a break."""

    frame_id: int
    name: str
    filename: str
    firstlineno: int
    resume_of: int | None = None  # frame id of the function this resume function continues
    compiles: list[CompileRecord] = field(default_factory=list)

    def compile_record(self, compile_id: str, start_time: float = 0.0) -> CompileRecord:
        """The compilation `compile_id` of this frame, added (started at `start_time`) the first time."""
        record = next((c for c in self.compiles if c.compile_id == compile_id), None)
        if record is None:
            record = CompileRecord(compile_id, start_time=start_time)
            self.compiles.append(record)
        return record

    @property
    def is_resume(self) -> bool:
        return self.name.startswith("__resume_at_")

    @property
    def graph_count(self) -> int:
        return sum(c.graph is not None for c in self.compiles)

    @property
    def break_count(self) -> int:
        return sum(c.graph_break is not None for c in self.compiles)

    @property
    def recompile_count(self) -> int:
        return sum(c.recompile is not None for c in self.compiles)


@dataclass
class Session:
    """Everything one program compiled, in order of first compilation."""

    title: str = "stenograph report"
    command: str = ""
    created: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    frames: list[FrameRecord] = field(default_factory=list)

    def frame(self, frame_id: int) -> FrameRecord | None:
        return next((f for f in self.frames if f.frame_id == frame_id), None)

    def frame_or_add(self, frame_id: int, new: Callable[[], FrameRecord] | None = None) -> FrameRecord:
        """The frame `frame_id`; the first time, the one `new()` builds (by default one known only by
        its id), appended."""
        frame = self.frame(frame_id)
        if frame is None:
            frame = new() if new is not None else FrameRecord(frame_id, "?", "?", 0)
            self.frames.append(frame)
        return frame

    def compiles(self) -> list[CompileRecord]:
        return [c for f in self.frames for c in f.compiles]


def resume_parent(name: str) -> str | None:
    """`__resume_at_40_f` -> `f` (resume functions keep the original's file and first line)."""
    prefix = "__resume_at_"
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    digits = rest.split("_", 1)
    return digits[1] if len(digits) == 2 and digits[0].isdigit() else None
