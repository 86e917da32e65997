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
    from ..guards.sources import Source
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
    # (object key, attribute) -> (object tracker that wrote last, attribute, new value tracker,
    # or DELETED for `del obj.attribute`), in the order the names enter an instance `__dict__`
    # eagerly (first write; a write after a delete goes last); see `object_key`
    attributes: dict[tuple[int, str], tuple[Variable, str, Any]] = field(default_factory=dict)
    # attributes stored under the object's own `__setattr__` / `__delattr__` (what an inlined hook
    # did through `object.__setattr__`): replayed through `object`'s, so the hook does not run twice
    raw: set[tuple[int, str]] = field(default_factory=set)
    # attributes deleted after this trace wrote them: they may not have existed before the call,
    # so the delete is replayed only where there is something to delete (F19)
    written_then_deleted: set[tuple[int, str]] = field(default_factory=set)
    # attributes set again after this trace deleted them: eagerly the name moves to the end of
    # the instance `__dict__`, so the replay deletes it before setting it (F25)
    deleted_then_written: set[tuple[int, str]] = field(default_factory=set)
    # keys of objects whose own `__setattr__` / `__delattr__` the trace ran
    hooked: set[int] = field(default_factory=set)
    # what reads of written objects relied on, for `OutputGraph.guard_object_identities`: pairs of
    # sources read as one object (a write seen through another path), and pairs read as two (an
    # object read for real while another of its class had pending writes)
    same_objects: set[tuple[Source, Source]] = field(default_factory=set)
    distinct_objects: set[tuple[Source, Source]] = field(default_factory=set)
    # (id of class, attribute) -> (class, attribute, new value tracker)
    class_attributes: dict[tuple[int, str], tuple[type, str, Variable]] = field(default_factory=dict)
    # (id of globals dict, name) -> (globals dict, name, new value tracker)
    globals: dict[tuple[int, str], tuple[dict, str, Variable]] = field(default_factory=dict)
    # every change the trace made to Python state, replayed or not (see `count`)
    changes: int = 0

    def container_mutated(self, var: Variable) -> None:
        self.changes += 1
        self.containers.setdefault(id(var), var)

    def container_changed(self, var: Variable) -> None:
        """A list, dict, set or deque about to change: replayed after the graph where it was
        read from the frame (it has a source); one made in the frame only counts as a change."""
        if var.source is not None:
            self.container_mutated(var)
        else:
            self.changes += 1

    def attribute_written(self, obj: Variable, name: str, value: Any, *, raw: bool = False) -> None:
        """`obj.name = value` (`value` DELETED: `del obj.name`); `raw`: stored as
        `object.__setattr__` stores it, under a class whose own `__setattr__` already ran."""
        self.changes += 1
        key = (object_key(obj), name)
        before = self.attributes.get(key)
        if before is not None and before[2] is DELETED and value is not DELETED:
            del self.attributes[key]  # set again after a delete: eagerly the name moves to the end
        self.attributes[key] = (obj, name, value)  # else it keeps the place its first write gave it
        if value is DELETED and before is not None and before[2] is not DELETED:
            self.written_then_deleted.add(key)
        elif value is not DELETED:
            self.written_then_deleted.discard(key)
            if before is not None and before[2] is DELETED:
                self.deleted_then_written.add(key)
        if raw:
            self.raw.add(key)
        else:
            self.raw.discard(key)

    def pending_attribute(self, obj: Variable, name: str) -> Any:
        """The value this trace gave `obj.name` (DELETED if it deleted it), None if untouched.
        Asked before every read of an attribute, so it also notes what the answer assumes about
        identities: the writer reached through another source is the same object, and an object
        of a written one's class read for real is another object."""
        key = object_key(obj)
        found = self.attributes.get((key, name))
        if found is not None:
            writer = found[0]
            if obj.source is not None and writer.source is not None and writer.source != obj.source:
                self.same_objects.add((obj.source, writer.source))
            return found[2]
        if obj.source is not None and self.attributes:
            cls = type(obj.value_object)
            for (other_key, _), (writer, _, _) in self.attributes.items():
                if other_key != key and writer.source is not None and type(writer.value_object) is cls:
                    self.distinct_objects.add((obj.source, writer.source))
        return None

    def changed_through_hook(self, obj: Variable) -> None:
        """The trace ran `obj`'s own `__setattr__`/`__delattr__` (which may keep values anywhere)."""
        self.hooked.add(object_key(obj))

    def wrote_to(self, obj: Variable) -> bool:
        """Whether this trace changed `obj`: an attribute written or deleted, its own attribute
        hooks run, or (a dict subclass) its contents."""
        key = object_key(obj)
        if key in self.hooked or any(k[0] == key for k in self.attributes):
            return True
        return obj.source is not None and any(var.source == obj.source for var in self.containers.values())

    def class_attribute_written(self, cls: type, name: str, value: Variable) -> None:
        self.changes += 1
        key = (id(cls), name)
        self.class_attributes.pop(key, None)
        self.class_attributes[key] = (cls, name, value)

    def global_written(self, globals_dict: dict, name: str, value: Variable) -> None:
        self.changes += 1
        self.globals[(id(globals_dict), name)] = (globals_dict, name, value)

    def count(self) -> int:
        """How many changes the trace has made to Python state, also to containers made in the
        frame and again to one already changed: speculative tracing (a Function's forward, a
        `cond` branch, a checkpointed function) compares it before and after."""
        return self.changes

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
            if value is not DELETED and key in self.deleted_then_written:
                delete = global_name(object.__delattr__ if raw else delattr)
                changes.append(f"{global_name(delete_if_present)}({expr(obj)}, {name!r}, {delete})")
            if value is DELETED and key in self.written_then_deleted:
                delete = global_name(object.__delattr__ if raw else delattr)
                changes.append(f"{global_name(delete_if_present)}({expr(obj)}, {name!r}, {delete})")
            elif value is DELETED and raw:
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


def delete_if_present(obj: object, name: str, delete: Any) -> None:
    """`delete(obj, name)` unless `obj` has no `name` to delete: the replay of an attribute the
    trace set, then deleted; eagerly it is gone either way, whether or not it existed before."""
    try:
        delete(obj, name)
    except AttributeError:
        pass


def object_key(var: Variable) -> int:
    """What an object's writes are filed under: the real object a tracker read from the frame
    stands for, so that every tracker of it (`self.config` read twice gives two) sees them; a
    tracker of an object made while tracing is its own key."""
    real = var.value_object
    return id(real) if var.source is not None and real is not None else id(var)


class _SourceOnly:
    """Renders a container by its source (the object itself), not by its contents."""

    def __init__(self, var: Variable) -> None:
        self.source = var.source
