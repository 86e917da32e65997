"""A cache entry as data, and back: what another process needs to run it without tracing.

An entry is its guard set (checks over sources, and the objects they compare with), its
transformed function (generated source and the objects its names are bound to) and the
compiled graphs those hold. `EntryRecord.of` writes them with `references` (every live object as
a way to find it again) and the graphs as the backend's persisted artifacts; `EntryRecord.entry`
finds the objects in this process, loads the graphs and builds the guard function anew from the
checks, so every check runs on the live frame: nothing about the frame is trusted from disk.
"""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass
from typing import Any

from ..guards.guard_set import GuardSet
from ..guards.pyfunc import make_function, signature_only
from . import references
from .references import Context, NotPersistable


@dataclass
class EntryRecord:
    """One persisted entry: pickled parts that `references.loads` reads back."""

    label: str
    guard_set: bytes
    transformed: bytes  # (made, namespace) of the transformed function
    graphs: list[Any]  # the persisted compiled graphs (`graph_store` artifacts), by index
    capture_seconds: float
    backend_seconds: float

    @staticmethod
    def of(entry: Any, backend: Any, graphs: list[tuple[Any, Any]]) -> EntryRecord:
        """The record of `entry`; `graphs` pairs each compiled graph its code holds with that
        graph's artifact. Raises `NotPersistable`."""
        made = getattr(entry.fn, "__stenograph_made__", None)
        if made is None:
            raise NotPersistable("the transformed function was not generated here")
        namespace = {k: v for k, v in entry.fn.__globals__.items() if k != "__builtins__" and v is not entry.fn}
        index = {id(compiled): i for i, (compiled, _) in enumerate(graphs)}
        named = live_references(entry.guard_set)
        return EntryRecord(
            label=entry.label,
            guard_set=references.dumps(entry.guard_set, backend, index, named),
            transformed=references.dumps((made, namespace), backend, index, named),
            graphs=[artifact for _, artifact in graphs],
            capture_seconds=entry.capture_seconds,
            backend_seconds=entry.backend_seconds,
        )

    def parts(self, fn: types.FunctionType, context: Context) -> tuple[GuardSet, types.FunctionType]:
        """The guard set and the transformed function, found in this process for `fn` (whose
        defaults the generated functions take). Raises `references.Unresolved`."""
        guard_set = references.loads(self.guard_set, context)
        if not isinstance(guard_set, GuardSet):
            raise references.Unresolved("the record's guard set is not one")
        (name, params, body, label, present_as), namespace = references.loads(self.transformed, context)
        like = signature_only(fn)
        transformed = make_function(name, params, list(body), namespace, like=like, label=label, present_as=present_as)
        return guard_set, transformed


def live_references(guard_set: GuardSet) -> dict[int, Any]:
    """References for what a guard set and its entry's code hold that pickling cannot name by
    itself: each closure cell by the function it belongs to (`GuardSet.cells`), each class
    `__dict__` proxy by its class (found by name in the loading process), each code object
    made by exec by its function (`GuardSet.code_owners`)."""
    named: dict[int, Any] = {id(proxy): ("classdict", klass) for klass, proxy in guard_set.bound_class_dicts()}
    for code_id, owner_ref in guard_set.code_owners.items():
        named[code_id] = ("codeof", _alive(owner_ref, "a generated function's code"))
    for cell_id, (_, owner_ref, index) in guard_set.cells.items():
        named[cell_id] = ("cell", _alive(owner_ref, "a closure cell"), index)
    return named


def _alive(owner_ref: weakref.ref, what: str) -> Any:
    """The function `owner_ref` refers to; `what` it owns cannot be found again once it died."""
    owner = owner_ref()
    if owner is None:
        raise NotPersistable(f"{what} whose function died")
    return owner
