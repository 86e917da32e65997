"""What happened while compiling, as events that logs, traces and reports subscribe to.

The compiler and the entry wrapper publish; observability code (logs, the structured trace, the
HTML report, explain()) subscribes. Publishing with no subscriber costs one empty-list check, and
nothing here is on the per-call path of a compiled function (only on misses).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_compile_ids = itertools.count()


@dataclass
class CompileEvent:
    """Base: every event names the frame (code object) it concerns."""

    code: Any  # types.CodeType
    label: str  # "qualname at file:line"


@dataclass
class FrameCompiled(CompileEvent):
    """A cache entry was built. `entry` is the CacheEntry; `attempt` counts entries of the code."""

    entry: Any
    attempt: int
    compile_id: int = field(default_factory=lambda: next(_compile_ids))


@dataclass
class GraphBreak(CompileEvent):
    """Capture stopped at an instruction; the rest continues in a resume function."""

    reason: str
    user_stack: list  # [(filename, line, function name, source text)], innermost first
    instruction: str


@dataclass
class Recompile(CompileEvent):
    """No entry's guards passed: `reason` is the first failing check of the newest entry."""

    reason: str
    attempt: int


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


def publish(event: CompileEvent) -> None:
    for fn in list(_subscribers):
        fn(event)
