"""Process-wide state in one registry: what `stenograph.reset()` clears.

Each module that keeps state across compiles (caches of compiled entries, resume functions,
decoded code, event numbering) registers it here when it is imported, with a name; `clear_all()`
empties every registration and `sizes()` says how much each holds. One trace's state lives on the
trace (`OutputGraph`), not here; user settings (`config`, the `allow_in_graph` marks) are not
process state and survive a reset.

A leaf module: every layer may register, and only `api.reset()` clears.
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


_registry: dict[str, Registration] = {}


def register(name: str, clear: Callable[[], None], size: Callable[[], int]) -> None:
    """Register state under `name` (e.g. "entry.caches"): `clear()` empties it, `size()` counts it."""
    if name in _registry:
        raise ValueError(f"process state {name!r} is registered twice")
    _registry[name] = Registration(name, clear, size)


def register_containers(name: str, *containers: Any) -> None:
    """Register containers (dicts, sets, weak dictionaries) that are cleared with `.clear()`."""

    def clear() -> None:
        for container in containers:
            container.clear()

    register(name, clear, lambda: sum(len(c) for c in containers))


def clear_all() -> None:
    """Clear every registration, in the order they were registered (lower layers first)."""
    for registration in list(_registry.values()):
        registration.clear()


def sizes() -> dict[str, int]:
    """How many items each registration holds now."""
    return {name: registration.size() for name, registration in _registry.items()}


def names() -> list[str]:
    return list(_registry)
