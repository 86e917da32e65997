"""The caches of functions defined inside other functions live as long as the enclosing function.

A closure, lambda or (before 3.12) comprehension is a new function object on every call of the
function defining it, while its code object is a constant of the enclosing code. A cache kept
alive only by the function objects compiled with it (`entry.owned_cache`) would die with each
call's closure, whenever the collector frees it, and the next identical call would compile again.
torch.compile keeps its entries on the code object; here the enclosing function holds the caches
of the code defined in it (at any depth), so they live exactly as long as that code can run.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Iterator
from typing import Any

__all__ = ["adopt", "clear", "drop", "hold"]

_HELD = "__stenograph_nested_caches__"


class _Holder:
    """The caches of the code defined in one function, kept in that function's `__dict__`."""

    __slots__ = ("__weakref__", "caches")

    def __init__(self) -> None:
        self.caches: list[Any] = []


# code defined inside an adopted function -> the holder in that function
_holders: weakref.WeakValueDictionary[types.CodeType, _Holder] = weakref.WeakValueDictionary()
_every_holder: weakref.WeakSet[_Holder] = weakref.WeakSet()


def adopt(fn: types.FunctionType) -> None:
    """Make `fn` hold the caches of the code defined in it (once per function; code already
    held by an enclosing function stays with it, the longer-lived one)."""
    if _HELD in fn.__dict__ or fn.__code__ in _holders:
        return
    holder = fn.__dict__[_HELD] = _Holder()
    _every_holder.add(holder)
    for inner in _nested_codes(fn.__code__):
        if inner not in _holders:
            _holders[inner] = holder


def hold(cache: Any, code: types.CodeType) -> None:
    """Keep `cache` (of `code`) alive with the function `code` is defined in, if one was adopted."""
    holder = _holders.get(code)
    if holder is not None and not any(c is cache for c in holder.caches):
        holder.caches.append(cache)


def drop(caches: list[Any]) -> None:
    """No enclosing function holds `caches` any longer (a backend's caches forgotten)."""
    gone = {id(c) for c in caches}
    for holder in list(_every_holder):
        holder.caches[:] = [c for c in holder.caches if id(c) not in gone]


def clear() -> None:
    """Forget every hold (`reset()`): the functions live on, their nested caches are dropped."""
    for holder in list(_every_holder):
        holder.caches.clear()


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _nested_codes(const)
