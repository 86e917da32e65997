"""What a compile leaves in torch's process-wide caches, released with the entry it made.

torch.fx registers the Python source of every GraphModule it generates code for in `linecache`
and in its own loader's cache, and never forgets it; one compile makes several (the captured
graph; AOTAutograd's forward and backward graphs; the backend's). FakeTensorMode keeps, per
operator call it has seen (operator, argument metadata, constants), a dispatch cache entry, for
the process. A process that compiles and drops many functions kept thousands of both.
`generated_during` names what a compile added; `release_with` drops it once the entry that runs
it is gone (at the next compile or `reset()`: see deferred_release.py). A dispatch entry dropped
while another function still has a use for it is only a cache miss.
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
from collections.abc import Iterator
from typing import Any

from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import graph_module

from .. import deferred_release

__all__ = ["Leftovers", "generated_during", "release", "release_with"]

_PREFIX = "<eval_with_key>."


@dataclasses.dataclass
class Leftovers:
    """Keys a compile added: torch.fx's generated sources, FakeTensorMode's dispatch entries."""

    sources: list[str] = dataclasses.field(default_factory=list)
    dispatch: list[Any] = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def generated_during() -> Iterator[Leftovers]:
    """`with generated_during() as left:` fills `left` with what torch's caches gained inside the
    block (compiles hold a lock, so no other compile's are among them)."""
    loader = graph_module._loader
    start = loader.next_id
    dispatch_before = set(FakeTensorMode.cache)
    left = Leftovers()
    try:
        yield left
    finally:
        # copies: a finalizer run by the garbage collector may change a cache while this reads
        left.sources = [key for key in loader.eval_cache.copy() if _number(key) >= start]
        left.dispatch = [key for key in FakeTensorMode.cache.copy() if key not in dispatch_before]


def _number(key: str) -> int:
    if not key.startswith(_PREFIX):
        return -1
    digits = key[len(_PREFIX) :].split(" ", 1)[0]
    return int(digits) if digits.isdigit() else -1


def release_with(owner: Any, left: Leftovers) -> None:
    """Forget `left` once `owner` (an entry's transformed function) is freed."""
    if left.sources or left.dispatch:
        deferred_release.when_freed(owner, release, left)


def release(left: Leftovers) -> None:
    """Forget `left` now (a compile that failed, or an entry freed)."""
    sources = graph_module._loader.eval_cache
    for key in left.sources:
        sources.pop(key, None)
        linecache.cache.pop(key, None)
    for key in left.dispatch:
        FakeTensorMode.cache.pop(key, None)
