"""Mutations of Python objects that live outside the traced frame.

While tracing, a write to an input list, dict, object attribute or global is applied to the
trackers only, so later reads in the trace see it. The transformed code then replays each
mutation once, after the graph ran and in program order of first mutation, so the caller
observes exactly what eager execution would have done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..variables.base import Variable


class _Deleted:
    """The value of an attribute the trace deleted."""

    def __repr__(self) -> str:
        return "DELETED"


DELETED = _Deleted()


@dataclass
class SideEffects:
    # containers with a source whose contents changed, by id of the tracker
    containers: dict[int, Variable] = field(default_factory=dict)
    # (id of object tracker, attribute) -> (object tracker, attribute, new value tracker, or
    # DELETED for `del obj.attribute`)
    attributes: dict[tuple[int, str], tuple[Variable, str, Any]] = field(default_factory=dict)
    # attributes stored under the object's own `__setattr__` / `__delattr__` (what an inlined hook
    # did through `object.__setattr__`): replayed through `object`'s, so the hook does not run twice
    raw: set[tuple[int, str]] = field(default_factory=set)
    # ids of object trackers whose own `__setattr__` / `__delattr__` the trace ran
    hooked: set[int] = field(default_factory=set)
    # (id of class, attribute) -> (class, attribute, new value tracker)
    class_attributes: dict[tuple[int, str], tuple[type, str, Variable]] = field(default_factory=dict)
    # (id of globals dict, name) -> (globals dict, name, new value tracker)
    globals: dict[tuple[int, str], tuple[dict, str, Variable]] = field(default_factory=dict)

    def container_mutated(self, var: Variable) -> None:
        self.containers.setdefault(id(var), var)

    def attribute_written(self, obj: Variable, name: str, value: Any, *, raw: bool = False) -> None:
        """`obj.name = value` (`value` DELETED: `del obj.name`); `raw`: stored as
        `object.__setattr__` stores it, under a class whose own `__setattr__` already ran."""
        key = (id(obj), name)
        self.attributes.pop(key, None)
        self.attributes[key] = (obj, name, value)
        if raw:
            self.raw.add(key)
        else:
            self.raw.discard(key)

    def pending_attribute(self, obj: Variable, name: str) -> Any:
        """The value this trace gave `obj.name` (DELETED if it deleted it), None if untouched."""
        found = self.attributes.get((id(obj), name))
        return None if found is None else found[2]

    def changed_through_hook(self, obj: Variable) -> None:
        """The trace ran `obj`'s own `__setattr__`/`__delattr__` (which may keep values anywhere)."""
        self.hooked.add(id(obj))

    def wrote_to(self, obj: Variable) -> bool:
        """Whether this trace changed `obj`: an attribute written or deleted, its own attribute
        hooks run, or (a dict subclass) its contents."""
        if id(obj) in self.hooked or any(key[0] == id(obj) for key in self.attributes):
            return True
        return obj.source is not None and any(var.source == obj.source for var in self.containers.values())

    def class_attribute_written(self, cls: type, name: str, value: Variable) -> None:
        key = (id(cls), name)
        self.class_attributes.pop(key, None)
        self.class_attributes[key] = (cls, name, value)

    def global_written(self, globals_dict: dict, name: str, value: Variable) -> None:
        self.globals[(id(globals_dict), name)] = (globals_dict, name, value)

    def count(self) -> int:
        """How many effects are recorded: speculative tracing compares it before and after."""
        return len(self.containers) + len(self.attributes) + len(self.class_attributes) + len(self.globals)

    def __bool__(self) -> bool:
        return bool(self.containers or self.attributes or self.class_attributes or self.globals)

    def replay(self, expr: Any, emit: Any, global_name: Any, pin: Any) -> None:
        """Emit the statements: `expr(var)` renders a tracker, `global_name(d)` a globals dict,
        a class or `object.__setattr__`, `pin(e)` takes `e`'s value into a local. Every new value
        is taken before the first change, since it may be read from an object that another
        change alters (`G = d["a"]; d.pop("a")`)."""
        changes: list[str] = []
        for var in self.containers.values():
            assert var.source is not None
            change = var.replay_mutation(expr(_SourceOnly(var)), expr, pin)
            if change is not None:
                changes.append(change)
        for key, (obj, name, value) in self.attributes.items():
            raw = key in self.raw
            if value is DELETED and raw:
                changes.append(f"{global_name(object.__delattr__)}({expr(obj)}, {name!r})")
            elif value is DELETED:
                changes.append(f"del {expr(obj)}.{name}")
            elif raw:
                changes.append(f"{global_name(object.__setattr__)}({expr(obj)}, {name!r}, {pin(expr(value))})")
            else:
                changes.append(f"{expr(obj)}.{name} = {pin(expr(value))}")
        for cls, name, value in self.class_attributes.values():
            changes.append(f"{global_name(cls)}.{name} = {pin(expr(value))}")
        for globals_dict, name, value in self.globals.values():
            changes.append(f"{global_name(globals_dict)}[{name!r}] = {pin(expr(value))}")
        for line in changes:
            emit(line)


class _SourceOnly:
    """Renders a container by its source (the object itself), not by its contents."""

    def __init__(self, var: Variable) -> None:
        self.source = var.source
