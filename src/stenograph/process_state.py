"""Process-wide state in one registry: what `stenograph.reset()` clears.

Each module that keeps state across compiles registers it here when it is imported, with a name:
*state* (compiled entries, module callers, resume functions, event numbering), which
`clear_all()` empties and `reset()` therefore forgets, and *memos* (decoded instructions,
exception tables, shared constant trackers): values derived from immutable code objects and held
weakly, which a reset keeps, since forgetting them changes nothing but the time of the next
capture; `clear_all(memos=True)` empties those too. `sizes()` says how much each holds.

One trace's state lives on the trace (`OutputGraph`), not here; user settings (`config`, the
`allow_in_graph` marks) are not process state and survive a reset.

A leaf module: every layer may register, and only `api.reset()` (and tests) clear.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Registration:
    name: str
    clear: Callable[[], None]
    size: Callable[[], int]
    memo: bool


_registry: dict[str, Registration] = {}


def register(name: str, clear: Callable[[], None], size: Callable[[], int], *, memo: bool = False) -> None:
    """Register state under `name` (e.g. "entry.caches"): `clear()` empties it, `size()` counts it.
    A `memo` is derived data that a reset keeps (see the module docstring)."""
    if name in _registry:
        raise ValueError(f"process state {name!r} is registered twice")
    _registry[name] = Registration(name, clear, size, memo)


def register_containers(name: str, *containers: Any, memo: bool = False) -> None:
    """Register containers (dicts, sets, weak dictionaries) that are cleared with `.clear()`."""

    def clear() -> None:
        for container in containers:
            container.clear()

    register(name, clear, lambda: sum(len(c) for c in containers), memo=memo)


def clear_all(memos: bool = False) -> None:
    """Clear every state registration (and the memos too if `memos`), in registration order."""
    for registration in list(_registry.values()):
        if memos or not registration.memo:
            registration.clear()


def sizes(memos: bool = False) -> dict[str, int]:
    """How many items each state registration (and memo, if `memos`) holds now."""
    return {name: r.size() for name, r in _registry.items() if memos or not r.memo}


def names(memos: bool = False) -> list[str]:
    return [name for name, r in _registry.items() if memos or not r.memo]
