"""Cleanups a finalizer asks for, run later at a point where nothing iterates what they change.

A weakref finalizer runs wherever the garbage collector happens to run: possibly inside another
loop over the very dict it would change. `linecache.checkcache` on Python 3.11 and 3.12 reads
`linecache.cache[name]` for names it listed before the loop, so an entry popped in between fails
it with a KeyError; a loop over torch.fx's source cache fails with "dictionary changed size". So
finalizers only queue their cleanup (`when_freed`), and stenograph runs the queue where no such
loop can be on the stack (`run_pending`): before each compile and in `reset()`.
"""

from __future__ import annotations

import collections
import functools
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["run_pending", "when_freed"]

# deque: append and popleft are atomic, so finalizers on other threads may add while one runs
_pending: collections.deque[Callable[[], Any]] = collections.deque()


def when_freed(owner: Any, cleanup: Callable[..., Any], *args: Any) -> None:
    """Queue `cleanup(*args)` once `owner` is freed (run by the next `run_pending`)."""
    weakref.finalize(owner, _pending.append, functools.partial(cleanup, *args))


def run_pending() -> None:
    """Run the cleanups queued by freed owners."""
    while _pending:
        _pending.popleft()()
