"""Mutations of Python objects that live outside the traced frame.

While tracing, a write to an input list, dict, object attribute or global is applied to the
trackers only, so later reads in the trace see it. The transformed code then replays each
mutation once, after the graph ran and in program order of first mutation, so the caller
observes exactly what eager execution would have done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import function_mode_stack
from ..guards.sources import AttrSource, GlobalSource
from ..variables.base import birth
from ..variables.trace_rules import is_literal

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..variables.base import Variable


class _Deleted:
    """The value of an attribute the trace deleted."""

    def __repr__(self) -> str:
        return "DELETED"


DELETED = _Deleted()


def set_in_instance_dict(obj: Any, name: str, value: Any) -> None:
    """`obj.__dict__[name] = value`, with no `__getattribute__` or descriptor of the class run."""
    object.__getattribute__(obj, "__dict__")[name] = value


def delete_from_instance_dict(obj: Any, name: str) -> None:
    """`del obj.__dict__[name]`, likewise (AttributeError if it holds none, as `delattr`)."""
    try:
        del object.__getattribute__(obj, "__dict__")[name]
    except KeyError:
        raise AttributeError(name) from None


# how the replay writes and deletes an attribute: `obj.name = v` (written out as such); through
# `object`'s, under a class whose own `__setattr__` / `__delattr__` already ran while tracing (so it
# does not run twice); into the instance `__dict__` (as a data descriptor's `__set__` wrote it)
Store = tuple[Callable[..., None], Callable[..., None]]
PLAIN: Store = (setattr, delattr)
RAW: Store = (object.__setattr__, object.__delattr__)
INSTANCE_DICT: Store = (set_in_instance_dict, delete_from_instance_dict)


@dataclass
class SideEffects:
    # containers with a source whose contents changed, by id of the tracker
    containers: dict[int, Variable] = field(default_factory=dict)
    # (object key, attribute) -> (object tracker that wrote last, attribute, new value tracker,
    # or DELETED for `del obj.attribute`), in the order the names enter an instance `__dict__`
    # eagerly (first write; a write after a delete goes last); see `object_key`
    attributes: dict[tuple[int, str], tuple[Variable, str, Any]] = field(default_factory=dict)
    # attributes not stored as `obj.name = v` stores them: how the replay writes and deletes them
    # (`RAW`, `INSTANCE_DICT`); absent: `PLAIN`
    stores: dict[tuple[int, str], Store] = field(default_factory=dict)
    # attributes deleted after this trace wrote them: they may not have existed before the call,
    # so the delete is replayed only where there is something to delete (F19)
    written_then_deleted: set[tuple[int, str]] = field(default_factory=set)
    # attributes set again after this trace deleted them: eagerly the name moves to the end of
    # the instance `__dict__`, so the replay deletes it before setting it (F25)
    deleted_then_written: set[tuple[int, str]] = field(default_factory=set)
    # objects whose own `__setattr__` / `__delattr__` the trace ran, by key
    hooked: dict[int, Variable] = field(default_factory=dict)
    # what reads of written objects relied on, for `OutputGraph.guard_object_identities`: pairs of
    # sources read as one object (a write seen through another path), and pairs read as two (an
    # object read for real while another of its class had pending writes)
    same_objects: set[tuple[Source, Source]] = field(default_factory=set)
    distinct_objects: set[tuple[Source, Source]] = field(default_factory=set)
    # (id of class, attribute) -> (class, attribute, new value tracker)
    class_attributes: dict[tuple[int, str], tuple[type, str, Variable]] = field(default_factory=dict)
    # (id of globals dict, name) -> (globals dict, name, new value tracker)
    globals: dict[tuple[int, str], tuple[dict, str, Variable]] = field(default_factory=dict)
    # changes the trace made to containers read from the frame, class attributes and globals,
    # replayed or not; attribute writes are judged by their values (see `changed_since`)
    changes: int = 0
    # containers made in the frame, once per change to them (see `changed_since`)
    frame_containers_changed: list[Variable] = field(default_factory=list)
    # (tensor read from the frame, registering method, hook, the handle's tracker or None where
    # the code drops it): hooks registered on the caller's tensors, in order
    tensor_hooks: list[tuple[Variable, str, Variable, Any]] = field(default_factory=list)
    # warnings the traced code issued, in order: (file, line, module globals, stacklevel above
    # them, message, category), issued by `eager_warnings.warn_at` after the graph
    warnings: list[tuple[str, int, dict, int, Any, type]] = field(default_factory=list)
    # changes to torch's function-mode stack, in order (`function_mode_stack.replay` takes them
    # with each mode tracker rebuilt): ("push", mode), ("pop",), ("default_device", device)
    function_modes: list[tuple] = field(default_factory=list)

    def container_mutated(self, var: Variable) -> None:
        self.changes += 1
        self.containers.setdefault(id(var), var)

    def container_changed(self, var: Variable) -> None:
        """A list, dict, set or deque about to change: replayed after the graph where it was
        read from the frame (it has a source); one made in the frame is only noted."""
        if var.source is not None:
            self.container_mutated(var)
        else:
            self.frame_containers_changed.append(var)

    def attribute_written(self, obj: Variable, name: str, value: Any, *, store: Store = PLAIN) -> None:
        """`obj.name = value` (`value` DELETED: `del obj.name`), replayed as `store` stores it."""
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
        if store is PLAIN:
            self.stores.pop(key, None)
        else:
            self.stores[key] = store

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
        self.hooked[object_key(obj)] = obj

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

    def hook_registered(self, tensor: Variable, method: str, hook: Variable, handle: Any) -> None:
        self.tensor_hooks.append((tensor, method, hook, handle))
        self.changes += 1

    def warning_issued(self, warning: tuple[str, int, dict, int, Any, type]) -> None:
        """A warning issued (it changes the warning registry, and is shown)."""
        self.warnings.append(warning)
        self.changes += 1

    def function_modes_changed(self, change: tuple) -> None:
        """A change to the function-mode stack (`variables.function_modes`)."""
        self.function_modes.append(change)
        self.changes += 1

    def random_drawn(self) -> None:
        """A number drawn from Python's `random` (the shared generator's state changes)."""
        self.changes += 1

    def frame_containers_changed_since(self, mark: Mark) -> list[Variable]:
        """Containers the frame made before `mark` that changed since, each once, in order."""
        changed = self.frame_containers_changed[mark.frame_containers_changed :]
        return list({id(var): var for var in changed if var.born < mark.born}.values())

    def mark(self) -> Mark:
        """Where the trace stands, for `changed_since`: taken before a speculative trace (a
        Function's forward and backward, a `cond` branch, a checkpointed function)."""
        return Mark(
            self.changes,
            len(self.frame_containers_changed),
            birth(),
            dict(self.attributes),
            frozenset(self.hooked),
            dict(self.stores),
            frozenset(self.written_then_deleted),
            frozenset(self.deleted_then_written),
        )

    def changed_since(self, mark: Mark, *, frame_containers: bool = True) -> bool:
        """Whether the trace changed Python state that existed at `mark`: a container, class
        attribute or global, an attribute whose value differs from the one it had, an object's
        own attribute hooks run. Objects and containers made after `mark` are the speculative
        trace's own. Attribute writes that put back the value an attribute had (a counter
        incremented then decremented, a value saved and restored) change nothing: when nothing
        else changed they are undone here, so that nothing is replayed for them.
        `frame_containers=False`: containers the frame made are left to the caller
        (`frame_containers_changed_since`)."""
        if self.changes != mark.changes:
            return True
        if frame_containers and self.frame_containers_changed_since(mark):
            return True
        if any(key not in mark.hooked and obj.born < mark.born for key, obj in self.hooked.items()):
            return True
        restored = []
        for key, entry in self.attributes.items():
            before = mark.attributes.get(key)
            if entry is before or entry[0].born >= mark.born:
                continue
            if not _restores(entry, before):
                return True
            restored.append(key)
        for key in restored:
            self._undo(key, mark)
        return False

    def _undo(self, key: tuple[int, str], mark: Mark) -> None:
        """Give the attribute `key` the entry and flags it had at `mark` (none if it had none)."""
        for now_map, then_map in ((self.attributes, mark.attributes), (self.stores, mark.stores)):
            if key in then_map:
                now_map[key] = then_map[key]
            else:
                now_map.pop(key, None)
        for now, then in (
            (self.written_then_deleted, mark.written_then_deleted),
            (self.deleted_then_written, mark.deleted_then_written),
        ):
            if key in then:
                now.add(key)
            else:
                now.discard(key)

    def __bool__(self) -> bool:
        return bool(
            self.containers
            or self.attributes
            or self.class_attributes
            or self.globals
            or self.tensor_hooks
            or self.function_modes
        )

    def changed_sources(self) -> list[str]:
        """The names of the outside objects this trace changed (`L['lst']`, `L['self']`,
        `G['COUNT']`), each once, in the order of their first change: what a user switching the
        replay off (`config.replay_side_effects`) is told to check."""
        names: dict[str, None] = {}
        for var in self.containers.values():
            names[var.source.name()] = None
        for obj, _, _ in self.attributes.values():
            if obj.source is not None:
                names[obj.source.name()] = None
        for cls, _, _ in self.class_attributes.values():
            names[cls.__qualname__] = None
        for globals_dict, name, _ in self.globals.values():
            names[GlobalSource(name, globals_dict).name()] = None
        for tensor, _, _, _ in self.tensor_hooks:
            if tensor.source is not None:
                names[tensor.source.name()] = None
        if self.function_modes:
            names["torch's function-mode stack"] = None
        return list(names)

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
            plain = key not in self.stores  # written out as `obj.name = v` / `del obj.name`
            setter, deleter = self.stores.get(key, PLAIN)
            if value is not DELETED and key in self.deleted_then_written:
                changes.append(f"{global_name(delete_if_present)}({expr(obj)}, {name!r}, {global_name(deleter)})")
            if value is DELETED and key in self.written_then_deleted:
                changes.append(f"{global_name(delete_if_present)}({expr(obj)}, {name!r}, {global_name(deleter)})")
            elif value is DELETED and not plain:
                changes.append(f"{global_name(deleter)}({expr(obj)}, {name!r})")
            elif value is DELETED:
                changes.append(f"del {expr(obj)}.{name}")
            elif not plain:
                changes.append(f"{global_name(setter)}({expr(obj)}, {name!r}, {pin(expr(value))})")
            else:
                changes.append(f"{expr(obj)}.{name} = {pin(expr(value))}")
        for cls, name, value in self.class_attributes.values():
            changes.append(f"{global_name(cls)}.{name} = {pin(expr(value))}")
        for globals_dict, name, value in self.globals.values():
            changes.append(f"{global_name(globals_dict)}[{name!r}] = {pin(expr(value))}")
        for tensor, method, hook, handle in self.tensor_hooks:
            if handle is None:
                changes.append(f"{expr(tensor)}.{method}({pin(expr(hook))})")
                continue
            registered = expr(handle)  # registers it where the handle is first rebuilt
            if handle.removed:
                changes.append(f"{registered}.remove()")
        if self.function_modes:
            stack_changes = ", ".join(
                f"({change[0]!r}, {pin(expr(change[1]))})" if len(change) > 1 else f"({change[0]!r},)"
                for change in self.function_modes
            )
            changes.append(f"{global_name(function_mode_stack.replay)}(({stack_changes},))")
        for line in changes:
            emit(line)


@dataclass(frozen=True)
class Mark:
    """What `SideEffects.changed_since` compares with (see `SideEffects.mark`)."""

    changes: int
    frame_containers_changed: int
    born: int  # trackers born from here on were made after the mark
    attributes: dict[tuple[int, str], tuple[Variable, str, Any]]
    hooked: frozenset[int]
    stores: dict[tuple[int, str], Store]
    written_then_deleted: frozenset[tuple[int, str]]
    deleted_then_written: frozenset[tuple[int, str]]


def _restores(entry: tuple[Variable, str, Any], before: tuple[Variable, str, Any] | None) -> bool:
    """Whether the pending write `entry` leaves the attribute as it was: the value pending
    before (the same tracker, or an equal literal), or, with none pending, the value the real
    object holds in its instance `__dict__` (an equal literal, or the tracker read from that
    very attribute)."""
    obj, name, value = entry
    if value is DELETED:
        return before is not None and before[2] is DELETED
    if before is not None:
        old = before[2]
        if old is value:
            return True
        kept = None if old is DELETED else _literal(old)
        return kept is not None and kept == _literal(value)
    real = obj.value_object
    if obj.source is None or real is None:
        return False
    try:
        held = vars(real)[name]
    except (TypeError, KeyError):
        return False  # no instance __dict__, or the name is not in it: writing adds it
    if value.source is not None and value.source == AttrSource(obj.source, name):
        return True
    mine = _literal(value)
    return mine is not None and mine == (type(held), held)


def _literal(var: Variable) -> tuple[type, Any] | None:
    """A constant tracker's value with its type (so that 1 and 1.0 and True differ), else None."""
    if not var.is_constant():
        return None
    value = var.as_constant()
    return (type(value), value) if is_literal(value) else None


def delete_if_present(obj: object, name: str, delete: Any) -> None:
    """`delete(obj, name)` unless `obj` has no `name` to delete: the replay of an attribute the
    trace set, then deleted; eagerly it is gone either way, whether or not it existed before."""
    try:
        delete(obj, name)
    except AttributeError:
        pass


def object_key(var: Variable) -> int:
    """What an object's writes are filed under: the real object a tracker read from the frame
    stands for (for a tensor input, its graph node), so that every tracker of it
    (`self.config` read twice gives two) sees them; a tracker of an object made while tracing is
    its own key."""
    real = var.value_object
    if var.source is not None and real is not None:
        return id(real)
    node = getattr(var, "node", None)  # a tensor input: every tracker of it shares its graph node
    return id(node) if var.source is not None and node is not None else id(var)


class _SourceOnly:
    """Renders a container by its source (the object itself), not by its contents."""

    def __init__(self, var: Variable) -> None:
        self.source = var.source
