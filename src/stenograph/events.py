"""What happened while compiling, as events that logs, traces and reports subscribe to.

The compiler and the entry wrapper publish; observability code (logs, the structured trace, the
HTML report, explain()) subscribes. Publishing with no subscriber costs one empty-list check, and
nothing here is on the per-call path of a compiled function (only on misses).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CompileId:
    """`[frame/recompile]` as torch.compile numbers compilations: the frame (code object) in order
    of first compilation, and the index of the cache entry being built for it."""

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


@dataclass
class Recompile(CompileEvent):
    """No entry's guards passed: `reason` is the first failing check of the newest entry.

    `entry`, `args` and `kwargs` (that entry and the call's arguments, closure cells first) are
    valid while subscribers run, to describe the new values; subscribers must not keep them.
    """

    reason: str
    attempt: int
    entry: Any = None
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass
class RunsEagerly(CompileEvent):
    """The frame gave up on compiling (unsupported code, recompile limit, internal error)."""

    reason: str


Subscriber = Callable[[CompileEvent], None]
_subscribers: list[Subscriber] = []


def subscribe(fn: Subscriber) -> Subscriber:
    _subscribers.append(fn)
    return fn


def unsubscribe(fn: Subscriber) -> None:
    if fn in _subscribers:
        _subscribers.remove(fn)


# code object -> frame number, and the entry index being compiled for it
_frame_ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_current: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_frame_counter = itertools.count()


def frame_id(code: Any) -> int | None:
    """The frame number of a code object in compile ids, once an event has named it."""
    return _frame_ids.get(code)


def publish(event: CompileEvent) -> None:
    if not _subscribers:
        return
    if isinstance(event, (CompileStarted, Recompile)):
        _current[event.code] = event.attempt
    frame = _frame_ids.get(event.code)
    if frame is None:
        frame = _frame_ids[event.code] = next(_frame_counter)
    event.compile_id = CompileId(frame, _current.get(event.code, 0))
    for fn in list(_subscribers):
        fn(event)
