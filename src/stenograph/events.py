"""What happened while compiling, as events that logs, traces and reports subscribe to.

The compiler and the entry wrapper publish; observability code (logs, the structured trace, the
HTML report, explain()) subscribes. Every event is numbered (its `compile_id`), with subscribers
or without, for the compile callbacks and the entries' own ids; nothing here is on the per-call
path of a compiled function (only on misses).
"""

from __future__ import annotations

import enum
import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import process_state
from .errors import BreakKind
from .guards.failures import GuardFailure


@dataclass(frozen=True)
class CompileId:
    """`[frame/recompile]` as torch.compile numbers compilations: the frame (code object) in order
    of first compilation, and how many compilations of that code came before this one (numbers
    are never reused, also across `reset()` and backends)."""

    frame: int
    recompile: int

    def __str__(self) -> str:
        return f"{self.frame}/{self.recompile}"


@dataclass
class CompileEvent:
    """Base: every event names the frame (code object) it concerns; `publish` sets `compile_id`."""

    code: Any  # types.CodeType
    label: str  # "qualname at file:line"
    compile_id: CompileId | None = field(default=None, init=False)


@dataclass
class CompileStarted(CompileEvent):
    """A miss starts compiling entry number `attempt` of the code."""

    attempt: int


@dataclass
class FrameCompiled(CompileEvent):
    """A cache entry was built. `entry` is the CacheEntry; `attempt` counts entries of the code."""

    entry: Any
    attempt: int


@dataclass
class GraphBreak(CompileEvent):
    """Capture stopped at an instruction; the rest continues in a resume function."""

    reason: str
    user_stack: list  # [(filename, line, function name, source text)], innermost first
    instruction: str
    internal_stack: str = ""  # where stenograph decided to break (shown with config.verbose)
    kind: BreakKind = BreakKind.UNSUPPORTED  # what the break met; `reason` says it for people


@dataclass
class Recompile(CompileEvent):
    """No entry's guards passed: `failure` is the first failing check of the newest entry (its
    text and the new value); `reason` says it in one line."""

    failure: GuardFailure
    attempt: int
    previous: CompileId | None = field(default=None, init=False)  # the entry whose guard failed

    @property
    def reason(self) -> str:
        return self.failure.reason


class EagerCause(enum.Enum):
    """Why a frame runs eagerly from now on (`RunsEagerly.cause`)."""

    UNSUPPORTED = "unsupported"  # tracing met what it cannot capture (`Unsupported`)
    RECOMPILE_LIMIT = "recompile limit"  # config.recompile_limit entries, and no guards passed
    ERROR = "error"  # stenograph raised another of its errors (e.g. BackendCompilerFailed)
    INTERNAL_ERROR = "internal error"  # any other exception while compiling (config.suppress_errors)


@dataclass
class RunsEagerly(CompileEvent):
    """The frame gave up on compiling (unsupported code, recompile limit, internal error):
    `cause` says which, `reason` says it for people; `break_kind` is the `Unsupported`'s kind."""

    reason: str
    cause: EagerCause
    break_kind: BreakKind | None = None


class CacheOutcome(enum.Enum):
    """What the persisted cache did for a frame (`CacheLookup.outcome`)."""

    INSTALLED = "installed"  # an entry another process compiled, installed without tracing
    REJECTED = "rejected"  # a stored entry not usable here (its code changed, an object is missing)
    STORED = "stored"  # an entry compiled here, persisted
    NOT_STORED = "not stored"  # an entry compiled here that cannot be persisted


@dataclass
class CacheLookup(CompileEvent):
    """The persisted cache (`config.cache_dir`) at work on a miss: `detail` names the entry, or
    says why it was rejected or not stored."""

    outcome: CacheOutcome
    detail: str
    entry: Any = None  # the CacheEntry installed or stored


Subscriber = Callable[[CompileEvent], None]
_subscribers: list[Subscriber] = []


def subscribe(fn: Subscriber) -> Subscriber:
    _subscribers.append(fn)
    return fn


def unsubscribe(fn: Subscriber) -> None:
    if fn in _subscribers:
        _subscribers.remove(fn)


# per code object: its frame number, compilations numbered so far, the one in progress, the
# newest built, and whether a Recompile opened the compilation that CompileStarted continues
_frame_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_counts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_current: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_built: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_opened: weakref.WeakSet = weakref.WeakSet()
_frame_counter = itertools.count()


def _clear_numbering() -> None:
    # the frame counter goes on: a report or trace recording across a reset keeps its ids apart
    for table in (_frame_ids, _counts, _current, _built, _opened):
        table.clear()


process_state.register(
    "events.numbering", _clear_numbering, lambda: sum(map(len, (_frame_ids, _counts, _current, _built, _opened)))
)


def publish(event: CompileEvent) -> None:
    code = event.code
    frame = _frame_ids.get(code)
    if frame is None:
        frame = _frame_ids[code] = next(_frame_counter)
    installed = isinstance(event, CacheLookup) and event.outcome is CacheOutcome.INSTALLED
    opens = installed or isinstance(event, CompileStarted)
    if isinstance(event, Recompile) or (opens and code not in _opened):
        number = _counts.get(code, 0)
        _counts[code] = number + 1
        _current[code] = CompileId(frame, number)
    if isinstance(event, Recompile):
        _opened.add(code)
        event.previous = _built.get(code)
    else:
        _opened.discard(code)
    event.compile_id = _current.get(code, CompileId(frame, 0))
    if isinstance(event, FrameCompiled) or installed:
        _built[code] = event.compile_id
        event.entry.compile_id = event.compile_id
    for fn in list(_subscribers):
        fn(event)
