"""The compiler's stance (`set_stance`): what a call of compiled code does, process-wide.

A leaf: `api.set_stance` sets it, the entry wrapper reads it. The wrapper's cached path reads
one attribute, `current.bypass`, true only for the stances that change what a cached call runs
(`force_eager`, and `default` with a forced backend); the stances that only change what a miss
does (`eager_on_recompile`, `fail_on_recompile`, `eager_then_compile`, `aot_eager_then_compile`)
are read on the miss path, where it costs nothing measurable. Process-wide, not per thread, as
torch.compile's stance is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STANCES = (
    "default",
    "force_eager",
    "eager_on_recompile",
    "fail_on_recompile",
    "eager_then_compile",
    "aot_eager_then_compile",
)


@dataclass(frozen=True)
class Stance:
    """One stance: its name, and for `default` the backend forced on every compiled call."""

    name: str = "default"
    backend: Any = None  # the resolved compiler function of `force_backend`, or None
    backend_name: str = ""

    @property
    def bypass(self) -> bool:
        """A cached call does not run the function's own entries (it runs eagerly, or with the
        forced backend's)."""
        return self.name == "force_eager" or self.backend is not None

    @property
    def compiles(self) -> bool:
        """A miss may compile (else it runs eagerly). `config.disable` is not a stance: a frame
        it skips is reported as skipped (`frame_skips`)."""
        return self.name not in ("force_eager", "eager_on_recompile")


class _Current:
    """The stance in force; `bypass` copied into a slot so the cached path reads one attribute.
    `bypass` is also on while a thread watches a skipped fullgraph call (`frame_skips`), whose
    count of compiled frames the slow path keeps."""

    __slots__ = ("stance", "bypass", "watchers")

    def __init__(self) -> None:
        self.stance = Stance()
        self.bypass = False
        self.watchers = 0


current = _Current()


def swap(stance: Stance) -> Stance:
    """Put `stance` in force; the one it replaces."""
    previous = current.stance
    current.stance = stance
    current.bypass = stance.bypass or current.watchers > 0
    return previous


def set_aside(on: bool) -> None:
    """Send cached calls down the slow path while a skipped fullgraph call is watched (`on`), and
    back when the last watch ends."""
    current.watchers += 1 if on else -1
    current.bypass = current.stance.bypass or current.watchers > 0
