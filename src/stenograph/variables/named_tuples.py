"""Named tuples: instances of `collections.namedtuple` / `typing.NamedTuple` classes, and the
`torch.return_types` results whose items are also reachable by name.

A named tuple is a tuple (`containers.TupleVariable`) with a class; the methods its class
defines are read through the instance as any user class's are (`user_classes.bind_class_attr`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .base import Variable
from .class_lookup import MISSING, class_lookup
from .constants import BoundMethodVariable, ConstantVariable, constant
from .containers import DictVariable, SequenceVariable, TupleVariable
from .user_classes import bind_class_attr

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


class NamedTupleVariable(TupleVariable):
    """An instance of a `collections.namedtuple` / `typing.NamedTuple` class."""

    def __init__(self, items: list[Variable], cls: type, source: Source | None = None) -> None:
        super().__init__(items, source)
        self.python_class = cls

    @classmethod
    def construct(
        cls, frame: Frame, klass: type, args: list[Variable], kwargs: dict[str, Variable]
    ) -> NamedTupleVariable:
        fields = klass._fields
        values: dict[str, Variable] = dict(zip(fields, args))
        if len(args) > len(fields):
            raise Unsupported(f"{klass.__qualname__}() takes {len(fields)} arguments")
        for name, value in kwargs.items():
            if name not in fields or name in values:
                raise Unsupported(f"{klass.__qualname__}() got an unexpected or repeated argument {name!r}")
            values[name] = value
        for name in fields:
            if name not in values:
                if name not in klass._field_defaults:
                    raise Unsupported(f"{klass.__qualname__}() missing argument {name!r}")
                values[name] = ConstantVariable(klass._field_defaults[name])
        return cls([values[name] for name in fields], klass)

    def describe(self) -> str:
        return f"{self.python_class.__qualname__} of {len(self.items)}"

    def as_constant(self) -> Any:
        return self.python_class(*[item.as_constant() for item in self.items])

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return TupleVariable(items)

    def field_names(self) -> tuple[str, ...]:
        return self.python_class._fields

    def getattr(self, frame: Frame, name: str) -> Variable:
        fields = self.field_names()
        if name in fields:
            return self.items[fields.index(name)]
        pending = frame.output.side_effects.pending_attribute(self, name)
        if isinstance(pending, Variable):
            return pending
        if name == "_fields":
            return constant(fields)
        if name in ("_replace", "_asdict"):
            return BoundMethodVariable(self, name)
        attr, owner = class_lookup(self.python_class, name)
        if attr is not MISSING and owner is not tuple and owner is not object:
            return bind_class_attr(frame, self, self.python_class, attr, owner, name)
        return super().getattr(frame, name)

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`t.name = value` on an instance of a subclass that has an instance dict (a named tuple
        class subclassed without `__slots__`): written where the tuple leaves the graph (on the
        caller's object, or on the one rebuilt), read back by the trace. A field, a name the
        class defines, or a class with its own `__setattr__`: graph break, as before."""
        cls = self.python_class
        plain = cls.__dictoffset__ != 0 and cls.__setattr__ is object.__setattr__
        if not plain or name in cls._fields or class_lookup(cls, name)[0] is not MISSING:
            super().setattr(frame, name, value)
            return
        frame.output.side_effects.attribute_written(self, name, value)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        attr, owner = class_lookup(self.python_class, "__getitem__")
        if owner is not tuple:  # the class's own indexing (a batch of fields sliced together)
            return bind_class_attr(frame, self, self.python_class, attr, owner, "__getitem__").call(frame, [key], {})
        return super().getitem(frame, key)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "_replace" and not args:
            fields = self.python_class._fields
            values = dict(zip(fields, self.items))
            values.update(kwargs)
            return NamedTupleVariable([values[f] for f in fields], self.python_class)
        if name == "_asdict" and not args:
            return DictVariable(dict(zip(self.python_class._fields, self.items)))
        return super().call_method(frame, name, args, kwargs)

    def reconstruct(self, rebuild: Any) -> str:
        # built once: every name bound to it gets the one object (a subclass's instances have a
        # `__dict__`, and an attribute written at a break must land on the object the frame keeps)
        cls = rebuild.writer.bind(self.python_class, "cls")
        return rebuild.build_once(self, lambda: f"{cls}({''.join(rebuild.expr(i) + ', ' for i in self.items)})")


class StructSeqVariable(NamedTupleVariable):
    """A `torch.return_types` result (`x.max(0)`, `x.sort()`): a tuple whose items are also
    reachable by name (`.values`, `.indices`); built from one sequence, unlike a namedtuple."""

    def __init__(self, items: list[Variable], cls: type) -> None:
        super().__init__(items, cls)

    @classmethod
    def build(cls, frame: Frame, klass: type, args: list[Variable], kwargs: dict[str, Variable]) -> StructSeqVariable:
        """`klass(sequence)` (`torch.return_types.max((values, indices))`, as pytree's
        unflattening builds one)."""
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{klass.__qualname__}() with other than one sequence argument")
        items = args[0].unpack(frame)
        if len(items) != klass.n_fields:
            raise Unsupported(f"{klass.__qualname__}() of {len(items)} items (it takes {klass.n_fields})")
        return cls(items, klass)

    def field_names(self) -> tuple[str, ...]:
        return self.python_class.__match_args__

    def as_constant(self) -> Any:
        return self.python_class(tuple(item.as_constant() for item in self.items))

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return TupleVariable.call_method(self, frame, name, args, kwargs)

    def reconstruct(self, rebuild: Any) -> str:
        cls = rebuild.writer.bind(self.python_class, "cls")
        return rebuild.build_once(self, lambda: f"{cls}(({''.join(rebuild.expr(i) + ', ' for i in self.items)}))")
