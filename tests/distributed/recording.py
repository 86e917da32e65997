"""What compiling did inside a worker process: compilations started and graph-break reasons.

Workers return these counts to the test, which asserts on them (a failed assertion in the test
process shows every rank's numbers side by side).
"""

from __future__ import annotations

from typing import Any

from stenograph import events


class CompileRecord:
    """Subscribes to the compile events while used as a context manager."""

    def __init__(self) -> None:
        self.compiles = 0
        self.breaks: list[str] = []

    def __call__(self, event: events.CompileEvent) -> None:
        if isinstance(event, events.CompileStarted):
            self.compiles += 1
        elif isinstance(event, events.GraphBreak):
            self.breaks.append(event.reason)

    def __enter__(self) -> CompileRecord:
        events.subscribe(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        events.unsubscribe(self)
