"""Tables keyed by a code object's identity that do not keep it alive.

Code objects compare equal by value, and the value leaves out the file: two functions made from
the same text at the same line (two copies of a module, `exec`'d source, generated methods,
graph-break chains written alike) have equal code objects, though each runs over its own globals
and, for generated code, its own helpers. What stenograph keeps per code object (compiled
entries, whose guards read one function's globals; resume code and its dispatchers; a code's
digest, which names its file) belongs to that object alone, so these tables key it by identity,
as CPython's own per-code state is kept. A leaf.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

V = TypeVar("V")

_MISSING: Any = object()


class CodeTable(Generic[V]):
    """A mapping from objects (code objects) by identity to values; an item goes when its key
    dies. The dictionary methods stenograph's tables use, with their meaning."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        # id(key) -> (a weak reference to the key, the value)
        self._items: dict[int, tuple[weakref.ref, V]] = {}

    def _held(self, key: Any) -> weakref.ref:
        ident, items = id(key), self._items

        def forget(ref: weakref.ref) -> None:
            found = items.get(ident)
            if found is not None and found[0] is ref:  # not a later key given the same id
                items.pop(ident, None)  # (another thread may have taken it meanwhile)

        return weakref.ref(key, forget)

    def get(self, key: Any, default: Any = None) -> Any:
        found = self._items.get(id(key))
        if found is None or found[0]() is not key:
            return default
        return found[1]

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __getitem__(self, key: Any) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __setitem__(self, key: Any, value: V) -> None:
        self._items[id(key)] = (self._held(key), value)

    def setdefault(self, key: Any, default: V) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            self[key] = value = default
        return value

    def __iter__(self) -> Iterator[Any]:
        """The keys alive now."""
        for ref, _ in list(self._items.values()):
            key = ref()
            if key is not None:
                yield key

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
