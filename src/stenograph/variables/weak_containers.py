"""`weakref.WeakKeyDictionary`, `weakref.WeakValueDictionary` and `weakref.WeakSet`, modelled by
what they hold rather than traced through weakref.py.

Their methods read a `data` dict (or set) keyed by weak references, which a guard cannot hold
without keeping the objects alive. So a weak container read from the frame is read whole the
first time the trace asks what it holds, through an `AppliedSource` of `weak_entries`: the
number of entries and, in order, the identity of each weakly held object, held weakly by the
guard (a key that dies fails it and drops the cache entry); the values are read by position and
guarded where used.
What is looked up is answered from that model (a dict or set tracker), and a trace that only
writes reads nothing. Changes are made to the model and replayed on the real container after
the graph as the same calls, in program order.

An object the container would hold weakly must have been read from the frame: one the frame
made (a new object, a tensor the graph computes) dies eagerly as soon as the frame drops it,
which the trace cannot follow. Where eager weakref.py raises an error holding a weak reference
(a missing key of a `WeakKeyDictionary`) or a TypeError (an object that takes no weak
reference), the trace breaks and the call runs eagerly.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from ..guards.sources import AppliedSource, ItemSource, weak_entries
from .base import Variable, birth
from .constants import BoundMethodVariable, constant
from .containers import DictVariable, LiveContainerIteratorVariable, SetVariable, dict_key, iterate

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

WEAK_CONTAINERS = (weakref.WeakKeyDictionary, weakref.WeakValueDictionary, weakref.WeakSet)

# the methods modelled, by class
_METHODS = {
    weakref.WeakKeyDictionary: frozenset(
        {"__getitem__", "get", "__contains__", "__len__", "__iter__", "keys", "values", "items"}
        | {"__setitem__", "__delitem__", "setdefault", "pop", "clear"}
    ),
    weakref.WeakSet: frozenset({"__contains__", "__len__", "__iter__", "add", "discard", "remove", "clear"}),
}
_METHODS[weakref.WeakValueDictionary] = _METHODS[weakref.WeakKeyDictionary]


def _is_tensor(var: Variable) -> bool:
    return issubclass(var.python_type(), torch.Tensor)


def takes_weak_reference(var: Variable) -> bool:
    """Whether `weakref.ref` accepts the value (its class has a weak-reference slot)."""
    return var.python_type().__weakrefoffset__ != 0


class WeakContainerVariable(Variable):
    """A weak container: read from the frame (`source`), or made by the traced code (`source`
    None, empty). `contents` is the model (a `DictVariable`, a `SetVariable` for a WeakSet), None
    until the trace first reads what a container of the frame holds; `changes` are the calls
    that change it, `(method, arguments)`, replayed on the real one."""

    def __init__(self, cls: type, real: Any, source: Source | None) -> None:
        self.python_class = cls
        self.value_object = real
        self.source = source
        self.born = birth()
        self.contents: DictVariable | SetVariable | None = self._empty() if source is None else None
        self.changes: list[tuple[str, list[Variable]]] = []

    def _empty(self) -> DictVariable | SetVariable:
        return SetVariable({}) if self.python_class is weakref.WeakSet else DictVariable({})

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        where = self.source.name() if self.source is not None else "made in the frame"
        return f"{self.python_class.__name__} {where}"

    def made_while_tracing(self) -> bool:
        return self.source is None

    # -- the model -------------------------------------------------------------------------------

    def _model(self, frame: Frame) -> DictVariable | SetVariable:
        """The contents, read (and guarded) on first need; the changes made before then are
        applied to what was read."""
        if self.contents is None:
            self.contents = self._read(frame)
            for name, args in self.changes:
                self._apply(frame, name, args)
        return self.contents

    def _read(self, frame: Frame) -> DictVariable | SetVariable:
        assert self.source is not None
        guards = frame.output.guards
        entries_source = AppliedSource(self.source, weak_entries)
        entries = weak_entries(self.value_object)
        guards.length_match(entries_source, entries)
        if self.python_class is weakref.WeakSet:
            trackers = {}
            for index, member in enumerate(entries):
                trackers[member] = self._weakly_held_entry(frame, member, ItemSource(entries_source, index))
            return SetVariable.from_frame(frame, entries, None, trackers)  # type: ignore[arg-type]
        items = {}
        weak_keys = self.python_class is weakref.WeakKeyDictionary
        for index, (key, value) in enumerate(entries):
            pair = ItemSource(entries_source, index)
            key_var = (
                self._weakly_held_entry(frame, key, ItemSource(pair, 0))
                if weak_keys
                else frame.wrap(key, ItemSource(pair, 0))
            )
            items[dict_key(key_var, frame)] = frame.wrap(value, ItemSource(pair, 1))
        return DictVariable(items)

    @staticmethod
    def _weakly_held_entry(frame: Frame, value: Any, source: Source) -> Variable:
        """The tracker of an object the container holds weakly, its identity guarded through a
        weak reference (its death fails the guard)."""
        var = frame.wrap(value, source)
        frame.output.guards.id_match(source, value)
        return var

    def _apply(self, frame: Frame, name: str, args: list[Variable]) -> None:
        """Make a change to the model (read already)."""
        model = self.contents
        assert model is not None
        if name == "__setitem__":
            model.setitem(frame, args[0], args[1])
        elif name == "__delitem__":
            model.delitem(frame, args[0])
        else:
            model.call_method(frame, name, args, {})

    def _change(self, frame: Frame, name: str, args: list[Variable]) -> None:
        """A change, noted for the replay and made to the model if it was read."""
        frame.output.side_effects.container_changed(self)
        self.changes.append((name, args))
        if self.contents is None and name == "clear":
            self.contents = self._empty()  # what it held before matters no more
        elif self.contents is not None:
            self._apply(frame, name, args)

    def _held_weakly(self, var: Variable) -> Variable:
        """`var`, about to be stored weakly: an object read from the frame that takes a weak
        reference."""
        if var.source is None or var.made_while_tracing():
            raise Unsupported(
                f"{var.describe()} made in the frame, held weakly by a {self.python_class.__name__}: "
                "eagerly it may die as soon as the frame drops it"
            )
        if not takes_weak_reference(var):
            raise Unsupported(f"a weak reference to {var.describe()} (eagerly a TypeError)")
        return var

    def _weak_key(self, var: Variable) -> Variable:
        """`var` as the key of a lookup that makes a weak reference to it (a WeakKeyDictionary's,
        a WeakSet's): one that takes none raises a TypeError eagerly."""
        if not takes_weak_reference(var):
            raise Unsupported(f"looking up {var.describe()} in a {self.python_class.__name__} (eagerly a TypeError)")
        return var

    def _found(self, frame: Frame, key: Variable) -> Any:
        """The model's key for `key` if the container holds it, else None. weakref.py compares a
        weak reference found under the same hash with `==` of the two objects: a tensor held
        weakly is compared with itself elementwise, which fails or (NaN) finds nothing."""
        model = self._model(frame)
        found = SetVariable.key_of(key, frame) if isinstance(model, SetVariable) else dict_key(key, frame)
        held = model.members if isinstance(model, SetVariable) else model.items
        if found not in held:
            return None
        if self.python_class is not weakref.WeakValueDictionary and _is_tensor(key):
            raise Unsupported(f"a tensor found in {self.describe()}: weakref compares it with itself by ==")
        return found

    def _lookup(self, frame: Frame, key: Variable) -> Variable | None:
        """The value under `key`, None where there is none."""
        if self.python_class is weakref.WeakKeyDictionary:
            self._weak_key(key)
        found = self._found(frame, key)
        model = self._model(frame)
        assert isinstance(model, DictVariable)
        return None if found is None else model.items[found]

    def _missing(self, frame: Frame, key: Variable) -> Variable:
        """A missing key's KeyError: the key's own for a WeakValueDictionary, a weak reference
        to it for a WeakKeyDictionary (which the trace cannot make: the call runs eagerly)."""
        if self.python_class is weakref.WeakKeyDictionary:
            raise Unsupported(f"a key missing from {self.describe()} (its KeyError holds a weak reference)")
        model = self._model(frame)
        assert isinstance(model, DictVariable)
        return model.missing(frame, key)

    # -- the protocol ----------------------------------------------------------------------------

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name not in _METHODS[self.python_class]:
            raise Unsupported(f"attribute {name!r} of {self.describe()}")
        return BoundMethodVariable(self, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name not in _METHODS[self.python_class] or kwargs:
            raise Unsupported(f"method {name!r} of {self.describe()} with these arguments")
        arity = _ARITY.get(name, (0, 0))
        if not arity[0] <= len(args) <= arity[1]:
            raise Unsupported(f"{self.describe()}.{name} with {len(args)} arguments")
        if name in ("keys", "values", "items"):
            return LiveContainerIteratorVariable(self._model(frame), name)  # type: ignore[arg-type]
        if name == "__iter__":
            return self.get_iter(frame)
        if name == "__len__":
            return constant(self.length(frame))
        if name == "__contains__":
            return constant(self.contains(frame, args[0]))
        if name == "__getitem__":
            return self.getitem(frame, args[0])
        if name == "__setitem__":
            self.setitem(frame, args[0], args[1])
        elif name == "__delitem__":
            self.delitem(frame, args[0])
        elif name in ("get", "setdefault"):
            found = self._lookup(frame, args[0])
            default = args[1] if len(args) > 1 else constant(None)
            if found is not None:
                return found
            if name == "setdefault":
                self.setitem(frame, args[0], default)
            return default
        elif name == "pop":
            return self._pop(frame, args)
        elif name == "clear":
            self._change(frame, "clear", [])
        else:
            self._set_change(frame, name, args[0])
        return constant(None)

    def _pop(self, frame: Frame, args: list[Variable]) -> Variable:
        found = self._lookup(frame, args[0])
        if found is None:
            return args[1] if len(args) > 1 else self._missing(frame, args[0])
        self._change(frame, "__delitem__", [args[0]])
        return found

    def _set_change(self, frame: Frame, name: str, member: Variable) -> None:
        """A WeakSet's `add`, `discard` or `remove`."""
        if name == "add":
            if _is_tensor(member):
                self._found(frame, member)
            self._change(frame, "add", [self._held_weakly(member)])
            return
        self._weak_key(member)
        present = self.contains(frame, member) if name == "remove" or _is_tensor(member) else None
        if name == "remove" and not present:
            raise Unsupported(f"removing a member missing from {self.describe()} (its KeyError holds a weak reference)")
        self._change(frame, "discard", [member])

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        if self.python_class is weakref.WeakSet:
            raise Unsupported(f"indexing {self.describe()}")
        found = self._lookup(frame, key)
        return found if found is not None else self._missing(frame, key)

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        if self.python_class is weakref.WeakSet:
            raise Unsupported(f"item assignment on {self.describe()}")
        if self.python_class is weakref.WeakKeyDictionary:
            self._held_weakly(key)
            if _is_tensor(key):
                self._found(frame, key)
        else:
            self._held_weakly(value)
        if key.is_constant():
            dict_key(key, frame)  # an unhashable one raises the program's TypeError, before any change
        elif key.python_type().__hash__ is None:
            raise Unsupported(f"{self.describe()} keyed by {key.describe()}, which is unhashable")
        self._change(frame, "__setitem__", [key, value])

    def delitem(self, frame: Frame, key: Variable) -> None:
        if self.python_class is weakref.WeakSet:
            raise Unsupported(f"item deletion on {self.describe()}")
        if self._lookup(frame, key) is None:
            self._missing(frame, key)
        self._change(frame, "__delitem__", [key])

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        if self.python_class is not weakref.WeakValueDictionary and not takes_weak_reference(item):
            return False  # weakref.py answers False for an object that takes no weak reference
        return self._found(frame, item) is not None

    def length(self, frame: Frame) -> int:
        return self._model(frame).length(frame)

    def truth(self, frame: Frame) -> bool:
        return self.length(frame) > 0

    def get_iter(self, frame: Frame) -> Variable:
        model = self._model(frame)
        if isinstance(model, SetVariable):
            return model.get_iter(frame)
        return LiveContainerIteratorVariable(model, "keys")

    def unpack(self, frame: Frame) -> list[Variable]:
        return self._model(frame).unpack(frame)

    # -- code generation -------------------------------------------------------------------------

    def _statements(self, target: str, render: Callable[[Variable], str]) -> list[str]:
        """The changes as statements on `target`, in program order."""
        lines = []
        for name, args in self.changes:
            parts = [render(a) for a in args]
            if name == "__setitem__":
                lines.append(f"{target}[{parts[0]}] = {parts[1]}")
            elif name == "__delitem__":
                lines.append(f"del {target}[{parts[0]}]")
            else:
                lines.append(f"{target}.{name}({', '.join(parts)})")
        return lines

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        return "; ".join(self._statements(target, lambda var: pin(expr(var)))) or None

    def reconstruct(self, codegen: Any) -> str:
        """A container made in the frame: a new one given the same changes."""
        create = f"{codegen.writer.bind(self.python_class, 'cls')}()"
        return codegen.build_object(self, create, lambda name: self._statements(name, codegen.expr))


_ARITY = {
    "__getitem__": (1, 1),
    "get": (1, 2),
    "__contains__": (1, 1),
    "__setitem__": (2, 2),
    "__delitem__": (1, 1),
    "setdefault": (1, 2),
    "pop": (1, 2),
    "add": (1, 1),
    "discard": (1, 1),
    "remove": (1, 1),
}


def new_weak_container(frame: Frame, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`WeakKeyDictionary()`, `WeakValueDictionary()` or `WeakSet()` called while tracing, empty or
    filled from a dict (a set's from any iterable), as the constructor's own update does."""
    if kwargs or len(args) > 1:
        raise Unsupported(f"{cls.__name__}() with keyword or several arguments")
    made = WeakContainerVariable(cls, None, None)
    if not args:
        return made
    if cls is weakref.WeakSet:
        items = iterate(frame, args[0])
        while (item := items.next(frame)) is not None:
            made.call_method(frame, "add", [item], {})
        return made
    if not isinstance(args[0], DictVariable):
        raise Unsupported(f"{cls.__name__}() of {args[0].describe()}")
    for key, value in zip(args[0].key_trackers(), list(args[0].items.values())):
        made.setitem(frame, key, value)
    return made
