"""Trackers for tuples, lists, dicts, torch.Size and iterators whose items are trackers."""

from __future__ import annotations

import collections
import dataclasses
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from ..errors import BreakKind, Unsupported
from .base import Variable, birth
from .constants import BoundMethodVariable, ConstantVariable, IteratorVariable, constant
from .exceptions import TracedException, raise_new, raise_python_error
from .identity import identity_of, same_or_equal
from .symbolic import SymNodeVariable, index_value
from .trace_rules import is_dict_key_constant, is_frozen_dataclass, is_namedtuple_class

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


def _method_of(var: Variable, name: str) -> Variable:
    if not callable(getattr(var.python_type(), name, None)):
        raise Unsupported(f"{var.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
    return BoundMethodVariable(var, name)


class DictViewVariable(Variable):
    """`d.keys()` / `d.values()` / `d.items()`: a live view, reading the dict each time it is
    used, so changes made to the dict after taking the view show through it as they do eagerly."""

    def __init__(self, dict_var: DictVariable, kind: str) -> None:
        self.dict_var = dict_var
        self.kind = kind

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def describe(self) -> str:
        return f"dict {self.kind}"

    def unpack(self, frame: Frame) -> list[Variable]:
        items = self.dict_var.items
        if self.kind == "values":
            return list(items.values())
        keys = self.dict_var.key_trackers()
        return keys if self.kind == "keys" else [TupleVariable([k, v]) for k, v in zip(keys, items.values())]

    def length(self, frame: Frame) -> int:
        return len(self.dict_var.items)

    def get_iter(self, frame: Frame) -> Variable:
        return LiveContainerIteratorVariable(self.dict_var, self.kind)

    def getattr(self, frame: Frame, name: str) -> Variable:
        return _method_of(self, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "__len__" and not args:
            return constant(len(self.dict_var.items))
        if name == "__iter__" and not args:
            return iterate(frame, self)
        if name == "__reversed__" and not args:
            return IteratorVariable(self.unpack(frame)[::-1])
        if self.set_like() and name == "isdisjoint":
            return self.as_set(frame).call_method(frame, name, args, kwargs)
        raise Unsupported(f"method {name!r} of {self.describe()}")

    def set_like(self) -> bool:
        """Keys and items views are sets (`collections.abc.Set`); values views are not."""
        return self.kind != "values"

    def as_set(self, frame: Frame) -> SetVariable:
        """The set of the view's members, as `set(view)` (items as (key, value) tuples)."""
        return SetVariable.from_items(frame, self.unpack(frame))

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        """`|`, `&`, `-`, `^` with any iterable (a new set, as eager's: a view has no in-place
        forms) and comparisons with sets and set-like views."""
        if not self.set_like():
            return None
        if plain in _SET_OPERATORS:
            return view_set_operation(frame, plain, self, other)
        if plain not in _SET_COMPARISONS:
            return None
        if isinstance(other, DictViewVariable) and other.set_like():
            other = other.as_set(frame)
        if not _is_set(other):
            return None
        return self.as_set(frame).binary_op(frame, plain, plain, other)

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.dict_var)}.{self.kind}()"


def update_items(frame: Frame, source: Variable) -> dict[Any, Variable]:
    """What `dict(source)` / `d.update(source)` adds, in order: a mapping's items (a class with
    `keys`, as `collections.abc.Mapping`'s: its keys, then each looked up) or key-value pairs,
    with CPython's errors for pairs of another length."""
    if isinstance(source, DictVariable):
        return dict(source.items)
    items: dict[Any, Variable] = {}
    if _is_mapping(source):
        for key in source.call_method(frame, "keys", [], {}).unpack(frame):
            items[dict_key(key, frame)] = source.getitem(frame, key)
        return items
    for index, pair in enumerate(source.unpack(frame)):
        parts = pair.unpack(frame)
        if len(parts) != 2:
            message = f"dictionary update sequence element #{index} has length {len(parts)}; 2 is required"
            raise raise_new(frame, ValueError, message)
        items[dict_key(parts[0], frame)] = parts[1]
    return items


def dict_from_keys(frame: Frame, args: list[Variable], kwargs: dict[str, Variable], cls: type) -> DictVariable:
    """`cls.fromkeys(keys[, value])`: every key shares the one value, as in Python."""
    if kwargs or not 1 <= len(args) <= 2:
        _raise_arity_error(frame, cls, "fromkeys", args, kwargs)
    value = args[1] if len(args) == 2 else constant(None)
    return DictVariable({dict_key(key, frame): value for key in args[0].unpack(frame)}, python_class=cls)


def _is_mapping(obj: Variable) -> bool:
    """Whether `dict(obj)` reads `obj` as a mapping (its class has `keys`, as
    `collections.abc.Mapping`'s do) rather than as pairs. Trackers without a known type are
    iterators, generators and views: pairs."""
    try:
        kind = obj.python_type()
    except Unsupported:
        return False
    return hasattr(kind, "keys")


class SequenceVariable(Variable):
    """Shared behaviour of tuple-like and list-like trackers."""

    python_class: type = tuple

    def __init__(self, items: list[Variable], source: Source | None = None) -> None:
        self.items = list(items)
        self.source = source
        self.born = birth()

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        return f"{self.python_class.__name__} of {len(self.items)}"

    def is_constant(self) -> bool:
        return all(item.is_constant() for item in self.items)

    def as_constant(self) -> Any:
        return self.python_class(item.as_constant() for item in self.items)

    def unpack(self, frame: Frame) -> list[Variable]:
        return list(self.items)

    def length(self, frame: Frame) -> int:
        return len(self.items)

    def truth(self, frame: Frame) -> bool:
        return bool(self.items)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        index = index_value(key, self.describe())
        if isinstance(index, slice):
            return self.clone(self.items[index])
        if isinstance(index, int):
            try:
                return self.items[index]
            except IndexError as e:
                raise_python_error(frame, type(e)(f"{self.python_class.__name__} index out of range"))
        raise Unsupported(f"indexing {self.describe()} with {key.describe()}")

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return type(self)(items)

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        """Concatenation with another tracked sequence, repetition by a constant."""
        if isinstance(other, SequenceVariable) and plain is operator.add:
            if self.python_class is other.python_class or (
                isinstance(self, TupleVariable) and isinstance(other, TupleVariable)
            ):
                cls = SizeVariable if isinstance(self, SizeVariable) else type(self)
                return cls([*self.items, *other.items])
        if plain is operator.mul and other.is_constant():
            try:
                return self.clone(self.items * other.as_constant())
            except TypeError as e:  # `[x] * 2.0`: CPython's error, in the program
                raise_python_error(frame, e)
        return None

    def getattr(self, frame: Frame, name: str) -> Variable:
        return _method_of(self, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        _check_sequence_arity(frame, self.python_class, name, args, kwargs)
        dunder = _SEQUENCE_DUNDERS.get(name)
        if dunder is not None:
            return _sequence_dunder(frame, self, dunder, args[0])
        if name == "__contains__":
            return frame.wrap(operator.contains, None).call(frame, [self, args[0]], {})
        if name == "index" and not kwargs and 1 <= len(args) <= 3 and all(_constant_int(a) for a in args[1:]):
            start, stop = [a.as_constant() for a in args[1:]] + [None] * (3 - len(args))
            for i in range(*slice(start, stop).indices(len(self.items))):
                if same_or_equal(frame, args[0], self.items[i]):
                    return constant(i)
            if not args[0].is_constant():
                raise Unsupported(f"{self.python_class.__name__}.index() of a missing {args[0].describe()}")
            kind = list if self.python_class is list else tuple
            raise raise_new(frame, ValueError, _missing_item_message(kind, "index", args[0].as_constant()))
        if name == "count" and not kwargs and len(args) == 1 and args[0].is_constant():
            wanted = args[0].as_constant()
            return constant(sum(1 for i in self.items if i.is_constant() and i.as_constant() == wanted))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(frame, args[0])
        if name == "__len__" and not args:
            return constant(len(self.items))
        if name == "__iter__" and not args and not kwargs:
            return iterate(frame, self)
        raise Unsupported(f"method {name!r} of {self.describe()}")


# explicit calls of list's and tuple's operator methods (`p.__lt__(q)`, `p.__iadd__(q)`): what the
# operator form runs
_SEQUENCE_DUNDERS = {
    "__eq__": operator.eq,
    "__ne__": operator.ne,
    "__lt__": operator.lt,
    "__le__": operator.le,
    "__gt__": operator.gt,
    "__ge__": operator.ge,
    "__add__": operator.add,
    "__mul__": operator.mul,
    "__rmul__": operator.mul,
    "__iadd__": operator.iadd,
    "__imul__": operator.imul,
}
_COMPARISON_OPERATORS = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)


def _sequence_dunder(frame: Frame, seq: SequenceVariable, op: Any, other: Variable) -> Variable:
    """`seq.__op__(other)`: a comparison with other than a list (for a list) or a tuple (for a
    tuple) answers NotImplemented, as the C methods do, where the operator would go on to the
    other operand's reflected method or raise."""
    if op in _COMPARISON_OPERATORS and not issubclass(other.python_type(), seq.python_class):
        return constant(NotImplemented)
    return frame.wrap(op, None).call(frame, [seq, other], {})  # `operator`'s handler


# how many positional arguments (fewest, most) list's and tuple's methods take
_SEQUENCE_ARITY = {
    **dict.fromkeys(("clear", "copy", "reverse", "sort", "__len__", "__iter__", "__reversed__"), (0, 0)),
    **dict.fromkeys(("append", "extend", "remove", "count", "__contains__", "__getitem__", "__delitem__"), (1, 1)),
    **dict.fromkeys(_SEQUENCE_DUNDERS, (1, 1)),
    "insert": (2, 2),
    "__setitem__": (2, 2),
    "pop": (0, 1),
    "index": (1, 3),
}


def _check_sequence_arity(
    frame: Frame, cls: type, name: str, args: list[Variable], kwargs: dict[str, Variable]
) -> None:
    """Raise, in the program, CPython's TypeError for a list or tuple method given the wrong
    number of arguments, or keywords where it takes none (`p.append()`, which unittest's
    `assertRaises(TypeError, p.append)` expects)."""
    low, high = _SEQUENCE_ARITY.get(name, (len(args), len(args)))
    if not low <= len(args) <= high or (kwargs and name != "sort" and name in _SEQUENCE_ARITY):
        # CPython's message names the builtin's method for a subclass too; probing the builtin
        # also spares a class that cannot be made empty (a named tuple)
        _raise_arity_error(frame, list if issubclass(cls, list) else tuple, name, args, kwargs)


def _constant_int(var: Variable) -> bool:
    return var.is_constant() and isinstance(var.as_constant(), int)


class TupleVariable(SequenceVariable):
    python_class = tuple

    def reconstruct(self, codegen: Any) -> str:
        return f"({''.join(codegen.expr(i) + ', ' for i in self.items)})"


class SizeVariable(TupleVariable):
    """A `torch.Size`: a tuple of (for now static) ints."""

    python_class = torch.Size

    def describe(self) -> str:
        return f"torch.Size of {len(self.items)}"

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return SizeVariable(items)

    def reconstruct(self, codegen: Any) -> str:
        return f"___Size(({''.join(codegen.expr(i) + ', ' for i in self.items)}))"

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "numel" and not args and not kwargs and self.is_constant():
            return constant(self.as_constant().numel())
        return super().call_method(frame, name, args, kwargs)


class ListVariable(SequenceVariable):
    """A list created or read while tracing. Mutating a list from outside the frame is a side
    effect, replayed on the real list after the graph."""

    python_class = list

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return ListVariable(items)

    def made_while_tracing(self) -> bool:
        return self.source is None

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        # `+=` extends and `*=` repeats the list itself (other names for it see the change)
        if op is operator.iadd and isinstance(other, SequenceVariable):
            self.call_method(frame, "extend", [other], {})
            return self
        if op is operator.imul and other.is_constant():
            repeated = super().binary_op(frame, operator.mul, operator.mul, other)
            self.setitem(frame, constant(slice(None)), repeated)  # type: ignore[arg-type]
            return self
        return super().binary_op(frame, op, plain, other)

    def get_iter(self, frame: Frame) -> Variable:
        return ListIteratorVariable(self)

    def reconstruct(self, codegen: Any) -> str:
        return codegen.build_once(self, lambda: f"[{', '.join(codegen.expr(i) for i in self.items)}]")

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        items = pin(f"[{', '.join(expr(i) for i in self.items)}]")
        return f"{target}[:] = {items}"

    def _mutable(self, frame: Frame, what: str) -> None:
        frame.output.side_effects.container_changed(self)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        _check_sequence_arity(frame, self.python_class, name, args, kwargs)
        if name == "__setitem__":
            self.setitem(frame, args[0], args[1])
            return constant(None)
        if name == "__delitem__":
            self.delitem(frame, args[0])
            return constant(None)
        if name == "append" and len(args) == 1 and not kwargs:
            self._mutable(frame, "list.append")
            self.items.append(args[0])
            return constant(None)
        if name == "extend" and len(args) == 1 and not kwargs:
            self._mutable(frame, "list.extend")
            if isinstance(args[0], IteratorVariable):  # each item appended as it comes, as CPython
                iterator = args[0]
                while (item := iterator.next(frame)) is not None:
                    self.items.append(item)
            else:
                self.items.extend(args[0].unpack(frame))
            return constant(None)
        if name == "insert" and len(args) == 2 and args[0].is_constant():
            self._mutable(frame, "list.insert")
            self.items.insert(args[0].as_constant(), args[1])
            return constant(None)
        if name == "pop" and len(args) <= 1 and not kwargs:
            index = args[0].as_constant() if args else -1
            if not self.items or not -len(self.items) <= index < len(self.items):
                _raise(frame, IndexError, "pop from empty list" if not self.items else "pop index out of range")
            self._mutable(frame, "list.pop")
            return self.items.pop(index)
        if name == "copy" and not args:
            return ListVariable(self.items)
        if name == "reverse" and not args:
            self._mutable(frame, "list.reverse")
            self.items.reverse()
            return constant(None)
        if name == "clear" and not args:
            self._mutable(frame, "list.clear")
            self.items.clear()
            return constant(None)
        if name == "remove" and len(args) == 1:
            index = next((i for i, item in enumerate(self.items) if same_or_equal(frame, args[0], item)), None)
            if index is None:
                _raise(frame, ValueError, "list.remove(x): x not in list")
            self._mutable(frame, "list.remove")
            del self.items[index]
            return constant(None)
        if name == "sort" and not args:
            self._mutable(frame, "list.sort")
            self.items[:] = sort_items(frame, self.items, kwargs)
            return constant(None)
        return super().call_method(frame, name, args, kwargs)

    def delitem(self, frame: Frame, key: Variable) -> None:
        index = key.as_constant()
        try:  # a bad index (out of range, a float, a zero step) raises CPython's error, list unchanged
            del list(range(len(self.items)))[index]
        except (IndexError, TypeError, ValueError) as e:
            raise_python_error(frame, e)
        self._mutable(frame, "del list[...]")
        del self.items[index]

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        index = key.as_constant()
        if isinstance(index, int) and not -len(self.items) <= index < len(self.items):
            _raise(frame, IndexError, "list assignment index out of range")
        if isinstance(index, slice):
            new_items = value.unpack(frame)
            check = list(range(len(self.items)))
            try:  # an extended slice of another length raises, before the list changes
                check[index] = range(len(new_items))
            except ValueError as e:
                _raise(frame, ValueError, str(e))
            self._mutable(frame, "list item assignment")
            self.items[index] = new_items
        else:
            self._mutable(frame, "list item assignment")
            self.items[index] = value


def _insertion_error(value: Any, member: bool) -> TypeError | None:
    """The TypeError CPython raises putting unhashable `value` in a set or a dict."""
    try:
        set((value,)) if member else dict.fromkeys((value,))
    except TypeError as e:
        return e
    return None


def dict_key(var: Variable, frame: Frame | None = None, *, member: bool = False) -> Any:
    """A dict key or set member as the constant it is, or, for an object compared by identity (a
    tensor, an object whose class keeps object's `__eq__` and `__hash__`), the fixed object it
    stands for or a `TrackedKey` (a tensor the graph computes, an object made while tracing).
    `frame` installs the identity guard a fixed object from the frame relies on, and raises an
    unhashable constant's TypeError in the program (without one, that is a graph break). A
    symbolic int is specialised to its value (guarded), as an index is. `member`: a set's
    member, whose error CPython words apart from a dict key's (3.15)."""
    if var.is_constant() or isinstance(var, SymNodeVariable):
        value = var.as_constant()
        try:
            hash(value)
        except TypeError as e:
            if frame is not None:
                raise_python_error(frame, _insertion_error(value, member) or e)
            raise Unsupported(f"unhashable key {var.describe()}: {e}") from None
        return value
    cls = var.python_type()
    plain_tuple = cls is tuple or is_namedtuple_class(cls)
    if isinstance(var, TupleVariable) and plain_tuple and cls.__hash__ is tuple.__hash__ and cls.__eq__ is tuple.__eq__:
        # a tuple (a named tuple) holding a key compared by identity (`(partial_fn, 4)`)
        return TupleKey(var, tuple(dict_key(item, frame, member=member) for item in var.items))
    identity = identity_of(var)
    by_identity = (
        issubclass(cls, torch.Tensor)
        or (cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__)
        or (identity is not None and identity is var.value_object and is_dict_key_constant(identity))
    )
    if identity is not None and not by_identity and frame is not None:
        fields = _compared_fields(var, frame)
        if fields is not None:
            return FieldsKey(identity, var, fields)
    if identity is None or not by_identity:
        raise Unsupported(f"dict key {var.describe()} (only constants and objects compared by identity are tracked)")
    if identity is var.value_object:  # a fixed object: keyed by itself, as in a dict read from the frame
        if frame is not None and var.source is not None:
            frame.output.guards.id_match(var.source, identity)
        return identity
    if frame is not None and var.source is not None and isinstance(identity, torch.fx.Node):
        frame.output.keyed_inputs.add(var.source)  # a tensor input: found or not by identity
    return TrackedKey(identity, var)


class TrackedKey:
    """A dict key that is not a constant: equal to another only when both stand for one object, as
    tensors and objects with object's `__eq__` compare in a dict; `tracker` rebuilds it."""

    def __init__(self, identity: Any, tracker: Variable) -> None:
        self.identity = identity
        self.tracker = tracker

    def __hash__(self) -> int:
        return id(self.identity)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrackedKey) and other.identity is self.identity

    def __repr__(self) -> str:
        return self.tracker.describe()


class TupleKey(TrackedKey):
    """A tuple made of keys some of which are not constants: equal to a tuple key of equal parts
    (a named tuple and a plain tuple alike, as tuples compare) and hashed by them."""

    def __init__(self, tracker: Variable, parts: tuple) -> None:
        super().__init__(tracker, tracker)
        self.parts = parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TupleKey):
            return other.parts == self.parts
        return isinstance(other, tuple) and other == self.parts


class FieldsKey(TrackedKey):
    """A frozen dataclass made while tracing, as a dict key: equal and hashed by its fields, as
    the `__eq__` and `__hash__` dataclasses generates compare and hash them (a nested one by its
    own fields), also against a real instance of its class among the keys."""

    def __init__(self, identity: Any, tracker: Variable, fields: tuple) -> None:
        super().__init__(identity, tracker)
        self.cls = tracker.python_type()
        self.fields = fields

    def __hash__(self) -> int:
        return hash(self.fields)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FieldsKey):
            return other.cls is self.cls and other.fields == self.fields
        if type(other) is self.cls:
            return tuple(getattr(other, f.name) for f in dataclasses.fields(other)) == self.fields
        return False


def _compared_fields(var: Variable, frame: Frame) -> tuple | None:
    """The field values a frozen dataclass made while tracing is compared and hashed by, when its
    class keeps the `__eq__` and `__hash__` dataclasses generates over all its fields and each
    value is a constant (or such a dataclass itself); else None."""
    cls = var.python_type()
    if not is_frozen_dataclass(cls) or not cls.__dataclass_params__.eq or not var.made_while_tracing():
        return None
    if any(getattr(getattr(cls, m), "__code__", None) is None for m in ("__eq__", "__hash__")):
        return None
    if cls.__eq__.__code__.co_filename != "<string>" or cls.__hash__.__code__.co_filename != "<string>":
        return None  # written by the user, not generated
    values = []
    for field in dataclasses.fields(cls):
        if not field.compare or field.hash is False:
            return None
        value = var.getattr(frame, field.name)
        if value.is_constant():
            values.append(value.as_constant())
            continue
        nested = _compared_fields(value, frame)
        identity = identity_of(value)
        if nested is None or identity is None:
            return None
        values.append(FieldsKey(identity, value, nested))
    return tuple(values)


def key_tracker(key: Any) -> Variable:
    """The tracker for a key of a `DictVariable`'s table."""
    if isinstance(key, TrackedKey):
        return key.tracker
    return constant(key) if _is_literal(key) else ConstantVariable(key)


def _key_or_value(key: Any) -> Variable:
    """A key's tracker, a constant one as a value (never a literal folded into the code)."""
    return key.tracker if isinstance(key, TrackedKey) else ConstantVariable(key)


def _key_expr(codegen: Any, key: Any) -> str:
    return codegen.expr(key.tracker) if isinstance(key, TrackedKey) else codegen.constant(key)


def key_error(frame: Frame, key: Any) -> TracedException:
    """`KeyError(key)` raised by the traced program for a missing key."""
    return TracedException(frame.instantiate(KeyError, [key_tracker(key)], {}))


def _raise(frame: Frame, cls: type[BaseException], message: str) -> NoReturn:
    raise raise_new(frame, cls, message)


def _missing_item_message(kind: type, method: str, value: Any) -> str:
    """The running Python's message for `kind().method(value)` of a missing item (3.14 changed
    list.index's), taken from an empty container."""
    try:
        getattr(kind(), method)(value)
    except ValueError as e:
        return str(e)
    raise AssertionError(f"{kind.__name__}.{method} found {value!r} in an empty {kind.__name__}")


class DictVariable(Variable):
    """A dict with constant keys and tracker values."""

    def __init__(self, items: dict[Any, Variable], source: Source | None = None, python_class: type = dict) -> None:
        self.items = dict(items)
        self.source = source
        self.born = birth()
        self.python_class = python_class  # dict or collections.OrderedDict

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        return f"{self.python_class.__name__} of {len(self.items)}"

    def made_while_tracing(self) -> bool:
        return self.source is None

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return dict_key(item, frame) in self.items

    def get_iter(self, frame: Frame) -> Variable:
        return LiveContainerIteratorVariable(self, "keys")

    def _literal(self, codegen: Any) -> str:
        """The items as a dict display."""
        return "{" + ", ".join(f"{_key_expr(codegen, k)}: {codegen.expr(v)}" for k, v in self.items.items()) + "}"

    def reconstruct(self, codegen: Any) -> str:
        def render() -> str:
            value = self._literal(codegen)
            if self.python_class is not dict:
                value = f"{codegen.writer.bind(self.python_class, 'cls')}({value})"
            return value

        return codegen.build_once(self, render)

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        return f"{target}.clear(); {target}.update({self._pinned_items(expr, pin)})"

    def _pinned_items(self, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str:
        """The new contents as a dict, taken into a local before any change is replayed."""
        return pin("{" + ", ".join(f"{expr(_key_or_value(k))}: {expr(v)}" for k, v in self.items.items()) + "}")

    def is_constant(self) -> bool:
        tracked = any(isinstance(k, TrackedKey) for k in self.items)
        return not tracked and all(v.is_constant() for v in self.items.values())

    def as_constant(self) -> Any:
        plain = {k: v.as_constant() for k, v in self.items.items()}
        # an OrderedDict's order is part of its value (its `==` compares it)
        return collections.OrderedDict(plain) if issubclass(self.python_class, collections.OrderedDict) else plain

    def truth(self, frame: Frame) -> bool:
        return bool(self.items)

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        """`d | other` (a new dict of the left's class) and `d |= other` (changes `d`). Other
        in-place operators are refused: folding them on constants would change a copy."""
        if op is operator.ior:  # `update` with a mapping or an iterable of pairs, as dict's `|=`
            self.call_method(frame, "update", [other], {})
            return self
        if op is operator.or_ and isinstance(other, DictVariable) and issubclass(self.python_class, other.python_class):
            result = self.call_method(frame, "copy", [], {})
            result.call_method(frame, "update", [other], {})
            return result
        if (
            op is operator.or_
            and isinstance(other, DictVariable)
            and not isinstance(other, DictContentsVariable)
            and other.python_class is collections.OrderedDict
        ):
            # a right operand of a subclass is asked first: its `__ror__` (OrderedDict's) makes one
            # of its class from the left's items, then adds its own
            return DictVariable({**self.items, **other.items}, python_class=other.python_class)
        if op is not plain:
            raise Unsupported(f"in-place operator {op.__name__} on {self.describe()} and {other.describe()}")
        return None

    def getattr(self, frame: Frame, name: str) -> Variable:
        return _method_of(self, name)

    def unpack(self, frame: Frame) -> list[Variable]:
        return [key_tracker(k) for k in self.items]

    def length(self, frame: Frame) -> int:
        return len(self.items)

    def key_trackers(self) -> list[Variable]:
        return [key_tracker(k) for k in self.items]

    def known_values(self) -> list[Variable]:
        """The values the trace holds trackers for (all, but for a dict read from the frame not
        used whole: `frame_dicts`)."""
        return list(self.items.values())

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        k = dict_key(key, frame)
        if k not in self.items:
            return self.missing(frame, key)
        return self.items[k]

    def missing(self, frame: Frame, key: Variable) -> Variable:
        """`d[key]` of a key not in the dict (`__missing__` of the dict subclasses modelled)."""
        raise key_error(frame, dict_key(key, frame))

    def _changed(self, frame: Frame, what: str) -> None:
        """Called before each change: a dict from the frame gets it replayed after the graph."""
        frame.output.side_effects.container_changed(self)

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        k = dict_key(key, frame)
        if self.items.get(k) is value:
            return  # the value already there (an optimizer storing its state back): no change
        self._changed(frame, "item assignment")
        self.items[k] = value

    def delitem(self, frame: Frame, key: Variable) -> None:
        k = dict_key(key, frame)
        if k not in self.items:
            raise key_error(frame, k)
        self._changed(frame, "item deletion")
        del self.items[k]

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        given = len(args) + len(kwargs)
        low, high = _DICT_ARITY.get(name, (given, given))
        ordered = issubclass(self.python_class, collections.OrderedDict)
        if name == "popitem" and ordered:
            high = 1  # OrderedDict.popitem(last=True)
        keywords_taken = name == "move_to_end" or (name == "popitem" and ordered)
        if not low <= given <= high or (kwargs and name in _DICT_ARITY and not keywords_taken):
            _raise_arity_error(frame, self.python_class, name, args, kwargs)
        if name in ("items", "keys", "values") and not args:
            return DictViewVariable(self, name)
        if name in ("get", "__getitem__") and args:
            k = dict_key(args[0], frame)
            if k in self.items:
                return self.items[k]
            if name == "get":
                return args[1] if len(args) > 1 else constant(None)
            return self.getitem(frame, args[0])
        if name == "__contains__" and len(args) == 1:
            return constant(dict_key(args[0], frame) in self.items)
        if name in ("update", "__setitem__", "pop", "setdefault", "clear", "move_to_end", "popitem", "__delitem__"):
            self._changed(frame, name)
            if name == "update":
                if len(args) > 1:
                    raise raise_new(frame, TypeError, f"update expected at most 1 argument, got {len(args)}")
                if args:
                    self.items.update(update_items(frame, args[0]))
                for k, v in kwargs.items():
                    self.items[k] = v
                return constant(None)
            if name == "__setitem__":
                self.setitem(frame, args[0], args[1])
                return constant(None)
            if name == "pop":
                k = dict_key(args[0], frame)
                if k in self.items:
                    return self.items.pop(k)
                if len(args) > 1:
                    return args[1]
                raise key_error(frame, k)
            if name == "__delitem__":
                self.delitem(frame, args[0])
                return constant(None)
            if name == "clear":
                self.items.clear()
                return constant(None)
            if name == "move_to_end":
                k = dict_key(args[0], frame)
                if k not in self.items:
                    raise key_error(frame, k)
                value = self.items.pop(k)
                last = kwargs.get("last", args[1] if len(args) > 1 else constant(True)).as_constant()
                self.items = {k: value, **self.items} if not last else {**self.items, k: value}
                return constant(None)
            if name == "popitem":
                if not self.items:
                    raise raise_new(frame, KeyError, "popitem(): dictionary is empty")
                last = kwargs.get("last", args[0] if args else constant(True)).as_constant()
                k = next(reversed(self.items)) if last else next(iter(self.items))
                return TupleVariable([_key_or_value(k), self.items.pop(k)])
            k = dict_key(args[0], frame)
            return self.items.setdefault(k, args[1] if len(args) > 1 else constant(None))
        if name == "copy" and not args:
            return DictVariable(self.items, python_class=self.python_class)
        if name == "__ior__" and len(args) == 1:
            return self.binary_op(frame, operator.ior, operator.or_, args[0])
        if name in ("__or__", "__eq__", "__ne__") and len(args) == 1:
            return self._dict_dunder(frame, name, args[0])
        if name == "__len__" and not args:
            return constant(len(self.items))
        if name == "__iter__" and not args:
            return iterate(frame, self)
        raise Unsupported(f"method {name!r} of {self.describe()}")

    def _dict_dunder(self, frame: Frame, name: str, other: Variable) -> Variable:
        """`d.__or__(other)`, `d.__eq__(other)`, `d.__ne__(other)` called by name: NotImplemented
        for other than a dict, as the C methods answer; with a dict, or an instance of a dict
        subclass keeping the dict methods that the C methods bypass for dict's own table, the
        entries merged or compared."""
        kind = other.python_type()
        if not issubclass(kind, dict):
            return constant(NotImplemented)
        if not isinstance(other, DictVariable) and any(
            getattr(kind, method) is not getattr(dict, method) for method in _TABLE_READ_METHODS[name]
        ):
            raise Unsupported(f"{name} of {self.describe()} with {other.describe()}, whose class has its own methods")
        if name == "__or__":
            result = self.call_method(frame, "copy", [], {})
            result.call_method(frame, "update", [other], {})
            return result
        op = operator.eq if name == "__eq__" else operator.ne
        return frame.wrap(op, None).call(frame, [self, other], {})  # `operator`'s handler

    def call_dict_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        """`dict.name(d, ...)` on an OrderedDict whose class has its own `name`: dict's method on the
        same entries. Reads act as the OrderedDict's do; `copy`, `__or__`, `__eq__`, `__ne__` as a
        plain dict's (a plain dict made, equality regardless of order). dict's writes leave an
        OrderedDict's order table behind (eagerly `dict.pop(od, k)` raises KeyError, and after
        `dict.clear(od)` the OrderedDict may still list keys): refused."""
        if name in ("copy", "__or__", "__eq__", "__ne__"):
            plain = [DictVariable(v.items) if isinstance(v, DictVariable) else v for v in (self, *args)]
            return plain[0].call_method(frame, name, plain[1:], kwargs)
        if name in _DICT_READS:
            return self.call_method(frame, name, args, kwargs)
        raise Unsupported(f"dict.{name} on a {self.python_class.__name__} (its order table would fall behind)")


# dict's methods that only read
_DICT_READS = frozenset({"keys", "values", "items", "get", "__getitem__", "__contains__", "__len__", "__iter__"})


# the methods of a dict subclass that must be dict's own for its entries to stand for it: in
# `d.__or__(other)` (dict's `update` reads them, or the table itself where `__iter__` is dict's)
# and `d.__eq__(other)` (compared here through `==`, which would ask the subclass's own)
_TABLE_READ_METHODS = {
    "__or__": ("__iter__", "keys", "__getitem__"),
    "__eq__": ("__eq__",),
    "__ne__": ("__eq__",),
}


class DictContentsVariable(DictVariable):
    """The contents of a dict subclass instance passed in (`python_class`: its builtin base),
    changed through dict's own methods: replayed through them too, so the class's Python ones
    (`update`, `__setitem__`) do not run a second time. Those of an OrderedDict subclass are
    only read (its order lives in OrderedDict's own table)."""

    def _changed(self, frame: Frame, what: str) -> None:
        if self.python_class is not dict:
            raise Unsupported(f"{what} on a {self.python_class.__qualname__} subclass instance passed in")
        super()._changed(frame, what)

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        clear, update = expr(ConstantVariable(dict.clear)), expr(ConstantVariable(dict.update))
        return f"{clear}({target}); {update}({target}, {self._pinned_items(expr, pin)})"


class ListContentsVariable(ListVariable):
    """The items of a list subclass instance passed in (whose class keeps list's own `__len__`,
    `__getitem__` and `__iter__`), changed through list's methods: replayed through
    `list.__setitem__`, so the class's Python methods do not run a second time."""

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        items = pin(f"[{', '.join(expr(i) for i in self.items)}]")
        return f"{expr(ConstantVariable(list.__setitem__))}({target}, slice(None), {items})"


# the iterators of builtin sequences whose position `__reduce__` tells (`sources.iterator_rest`)
SEQUENCE_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))))


def advance_iterator(iterator: Any, steps: int) -> None:
    """Take `steps` items from `iterator` (fewer if it runs out), as the traced code did."""
    for _ in range(steps):
        if next(iterator, _EXHAUSTED) is _EXHAUSTED:
            return


def replayed_advance(target: str, expr: Callable[[Variable], str], steps: int) -> str | None:
    """The replay of `steps` items taken from the real iterator `target` (None for none)."""
    return f"{expr(ConstantVariable(advance_iterator))}({target}, {steps})" if steps else None


def own_iterator(codegen: Any, var: IteratorVariable, made: str) -> str:
    """`var` rebuilt as the container's own iterator (`made`: `iter(...)` of it), advanced as far
    as the trace took it, made once: it goes on reading the live container, which the caller may
    change before pulling the rest (a copy of the items left would not see that)."""
    advance = codegen.writer.bind(advance_iterator, "fn")
    steps = var.index

    def fill(name: str) -> list[str]:
        return [f"{advance}({name}, {steps})"] if steps else []

    return codegen.build_object(var, made, fill)


_EXHAUSTED = object()


class InputIteratorVariable(IteratorVariable):
    """A list, tuple or range iterator passed in (or reached through a source): the items it has
    left, read through an `AppliedSource` of `iterator_rest` (their count and the items
    guarded). What the trace takes from it is taken from the real iterator after the graph (a
    `next()` that found it exhausted included, which exhausts a list iterator for good), so the
    caller sees it advanced as eagerly; live at a break or returned, it is the caller's own."""

    on_stack_as_tuple_iterator = False

    def __init__(self, items: list[Variable], source: Any) -> None:
        super().__init__(items)
        self.source = source
        self.ran_out = False

    def describe(self) -> str:
        return "sequence iterator passed in"

    def next(self, frame: Frame) -> Variable | None:
        frame.output.side_effects.container_changed(self)
        item = super().next(frame)
        self.ran_out = self.ran_out or item is None
        return item

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        return replayed_advance(target, expr, self.index + self.ran_out)


class ListIteratorVariable(IteratorVariable):
    """`iter(list)`: reads the live list at each step, as CPython's list iterator does, so items
    appended or removed during the loop are seen."""

    def __init__(self, list_var: ListVariable) -> None:
        self.list_var = list_var
        self.index = 0
        self.failure = None

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        return self.list_var.items

    def iterated(self) -> Variable | None:
        return self.list_var

    def rebuilt_faithfully(self) -> bool:
        return True  # the list's own iterator (`reconstruct`)

    def reconstruct(self, codegen: Any) -> str:
        return own_iterator(codegen, self, f"iter({codegen.expr(self.list_var)})")

    def python_type(self) -> type:
        return type(iter([]))


class ReversedListIteratorVariable(IteratorVariable):
    """`reversed(list)`: walks the live list from the end by index, as CPython's does."""

    def __init__(self, list_var: ListVariable) -> None:
        self.list_var = list_var
        self.position = len(list_var.items) - 1
        self.index = 0
        self.failure = None

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        """The items still to come (for a graph break, which passes them on as a tuple)."""
        live = self.list_var.items
        return live[self.position :: -1] if 0 <= self.position < len(live) else []

    def next(self, frame: Frame) -> Variable | None:
        live = self.list_var.items
        if 0 <= self.position < len(live):
            self.position -= 1
            return live[self.position + 1]
        self.position = -1
        return None

    def iterated(self) -> Variable | None:
        return self.list_var

    def python_type(self) -> type:
        return type(reversed([]))


# the classes of CPython's iterators over a dict's keys, values and items, and over a set
_LIVE_ITERATOR_TYPES = {
    "keys": type(iter({})),
    "values": type(iter({}.values())),
    "items": type(iter({}.items())),
    "set": type(iter(set())),
}


class LiveContainerIteratorVariable(IteratorVariable):
    """Iteration over a dict (keys, values or items) or a set, reading it live.

    As in CPython, a change of size during the loop raises RuntimeError at the next step; a
    same-size change of the keys (which CPython answers depending on its hash-table layout) is
    refused instead of guessed.
    """

    def __init__(self, container: DictVariable | SetVariable, kind: str) -> None:
        self.container = container
        self.kind = kind  # "keys", "values", "items" (dicts) or "set"
        self.keys = self._keys()
        self.size = len(self.keys)
        self.index = 0
        self.failure = None

    def python_type(self) -> type:
        return _LIVE_ITERATOR_TYPES[self.kind]

    def _keys(self) -> list[Any]:
        if isinstance(self.container, SetVariable):
            return self.container._order()
        return list(self.container.items)

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        return [self._item(k) for k in self.keys] if self._keys() == self.keys else []

    def _item(self, key: Any) -> Variable:
        container = self.container
        if isinstance(container, SetVariable):
            return container.members[key]
        tracker = key_tracker(key)
        if self.kind == "keys":
            return tracker
        if self.kind == "values":
            return container.items[key]
        return TupleVariable([tracker, container.items[key]])

    def _size(self) -> int:
        container = self.container
        return len(container.members) if isinstance(container, SetVariable) else len(container.items)

    def next(self, frame: Frame) -> Variable | None:
        if self._size() != self.size:
            self.size = -1  # CPython's iterator keeps failing once it has failed
            what = "Set" if isinstance(self.container, SetVariable) else "dictionary"
            raise raise_new(frame, RuntimeError, f"{what} changed size during iteration")
        if self._keys() != self.keys:
            raise Unsupported(f"the keys of {self.container.describe()} changed during iteration")
        if self.index >= len(self.keys):
            return None
        self.index += 1
        return self._item(self.keys[self.index - 1])

    def iterated(self) -> Variable | None:
        return self.container

    def may_raise(self) -> bool:
        return self.size < 0 or self._size() != self.size or self._keys() != self.keys

    def rebuilt_faithfully(self) -> bool:
        return not self.may_raise()  # the container's own iterator (`reconstruct`)

    def reconstruct(self, codegen: Any) -> str:
        """The dict's or set's own iterator (`own_iterator`): a change of size the caller makes
        raises at its next step, as eagerly."""
        if self.may_raise():
            raise Unsupported(f"an iterator over {self.container.describe()}, whose size or keys changed under it")
        view = {"keys": "", "set": "", "values": ".values()", "items": ".items()"}[self.kind]
        return own_iterator(codegen, self, f"iter({codegen.expr(self.container)}{view})")


class LazyIteratorVariable(IteratorVariable):
    """`map`, `filter`, `zip` and `enumerate`: each step pulls from the underlying iterators only
    when the consumer asks, as CPython does, so a mapped function's side effects interleave with
    the loop body and a container changed meanwhile is read as it is now."""

    has_length_hint = False

    def __init__(
        self,
        kind: str,
        sources: list[IteratorVariable],
        fn: Variable | None = None,
        *,
        count: int = 0,
        strict: bool = False,
    ) -> None:
        self.kind = kind  # "map", "filter", "zip" or "enumerate"
        self.sources = sources
        self.fn = fn
        self.count = count
        self.strict = strict
        self.done = not sources
        self.index = 0
        self.failure = None

    def python_type(self) -> type:
        return {"map": map, "filter": filter, "zip": zip, "enumerate": enumerate}[self.kind]

    def next(self, frame: Frame) -> Variable | None:
        if self.done:
            return None
        if self.kind == "filter":
            while (item := self.sources[0].next(frame)) is not None:
                keep = item if self.fn is None else self.fn.call(frame, [item], {})
                if keep.truth(frame):
                    return item
            self.done = True
            return None
        row = []
        for i, source in enumerate(self.sources):
            item = source.next(frame)
            if item is None:
                self.done = True
                if self.strict:
                    self._check_lengths(frame, i)
                return None
            row.append(item)
        if self.kind == "map":
            assert self.fn is not None
            return self.fn.call(frame, row, {})
        if self.kind == "enumerate":
            self.count += 1
            return TupleVariable([constant(self.count - 1), row[0]])
        return TupleVariable(row)

    def _check_lengths(self, frame: Frame, exhausted: int) -> None:
        """`zip(strict=True)` reached the end of argument `exhausted`: CPython's ValueError."""

        def message(i: int, how: str) -> str:
            return f"zip() argument {i + 1} is {how} than argument{' ' if i == 1 else 's 1-'}{i}"

        if exhausted > 0:
            raise raise_new(frame, ValueError, message(exhausted, "shorter"))
        for i, source in enumerate(self.sources[1:], 1):
            if source.next(frame) is not None:
                raise raise_new(frame, ValueError, message(i, "longer"))

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        """What is left, for a graph break: only zip/enumerate of known items can say it."""
        if self.kind in ("map", "filter"):
            raise Unsupported(f"a {self.kind}() object is live at a graph break and calls a function per item")
        if self.done:
            return []
        rest = [source.items[source.index :] for source in self.sources]
        if self.kind == "enumerate":
            return [TupleVariable([constant(self.count + i), v]) for i, v in enumerate(rest[0])]
        return [TupleVariable(list(row)) for row in zip(*rest)]

    def iterated(self) -> Variable | None:
        return next((c for s in self.sources if (c := s.iterated()) is not None), None)

    def reconstruct(self, codegen: Any) -> str:
        """Rebuilt as themselves over what their sources have left: a `map`'s or `filter`'s
        function runs per item when the code after the graph pulls them, and a generator among
        a `zip`'s or `enumerate`'s sources runs its body then, as eagerly (`strict` and the
        count carried over). Made once, as the base class's."""
        if self.done:
            return super().reconstruct(codegen)
        return codegen.build_once(self, lambda: self._rebuilt(codegen))

    def _rebuilt(self, codegen: Any) -> str:
        sources = ", ".join(codegen.expr(source) for source in self.sources)
        if self.kind == "zip":
            return f"zip({sources}{', strict=True' if self.strict else ''})"
        if self.kind == "enumerate":
            return f"enumerate({sources}, {self.count})"
        fn = "None" if self.fn is None else codegen.expr(self.fn)
        return f"{self.kind}({fn}, {sources})"

    def rebuilt_faithfully(self) -> bool:
        return self.done or all(source.rebuilt_faithfully() for source in self.sources)  # (`reconstruct`)

    def may_raise(self) -> bool:
        if any(s.may_raise() for s in self.sources):
            return True
        return self.strict and not self.done and len({len(s.items) - s.index for s in self.sources}) > 1


def iterate(frame: Frame, value: Variable) -> IteratorVariable:
    """`iter(value)`: lists, dicts, dict views and sets are read live (`Variable.get_iter`); other
    iterables are unpacked into a known list of items."""
    own = value.get_iter(frame)
    return IteratorVariable(value.unpack(frame)) if own is None else own  # type: ignore[return-value]


def _is_literal(value: Any) -> bool:
    return isinstance(value, (bool, int, str)) or value is None


class SliceVariable(Variable):
    """A slice whose bounds are graph values (symbolic sizes), e.g. `x[: n // 2]`."""

    def __init__(self, parts: list[Variable]) -> None:
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def describe(self) -> str:
        return "slice"

    def reconstruct(self, rebuild: Any) -> str:
        return f"slice({', '.join(rebuild.expr(p) for p in self.parts)})"


def sort_items(frame: Frame, items: list[Variable], kwargs: dict[str, Variable]) -> list[Variable]:
    """`sorted(items, key=..., reverse=...)` when the sort keys are constants."""
    unknown = set(kwargs) - {"key", "reverse"}
    if unknown:
        raise Unsupported(f"sorting with keyword argument(s) {', '.join(sorted(unknown))}")
    key_fn = kwargs.get("key")
    reverse = kwargs.get("reverse", constant(False)).as_constant()
    if key_fn is None or key_fn.is_constant() and key_fn.as_constant() is None:
        keys = items
    else:
        keys = [key_fn.call(frame, [item], {}) for item in items]
    if not all(k.is_constant() for k in keys):
        raise Unsupported("sorting by keys that are not constants (tensor values?)")
    values = [k.as_constant() for k in keys]
    try:
        # the indices sorted as CPython sorts the keys themselves (stable, reverse keeps ties in order)
        order = sorted(range(len(items)), key=values.__getitem__, reverse=reverse)
    except Exception as e:
        raise_python_error(frame, e)
    return [items[i] for i in order]


class SetVariable(Variable):
    """A set of constants (or of objects with a fixed identity) built while tracing.

    `table` is a real set of the member keys, changed by the same operations the program performs
    (element by element, set merge, dict merge), so its hash-table layout, and with it the order
    in which code iterating the set sees the members, is the one eager execution has.
    """

    def __init__(
        self,
        members: dict[Any, Variable],
        python_class: type = set,
        source: Source | None = None,
        table: set | None = None,
    ) -> None:
        self.members = members  # hashable key (the constant or the object) -> tracker
        self.python_class = python_class
        self.source = source  # a set read from the frame: changes to it are side effects
        self.born = birth()
        self.table = set(members) if table is None else table
        # a set read from the frame iterates in its own order (`fixed_order`) until the trace
        # changes it; a copy of it does not keep its table layout, so after a change (and in the
        # results of set operations on it) the iteration order is unknown and iterating is refused
        self.fixed_order: list[Any] | None = None
        self.layout_known = True

    @staticmethod
    def key_of(var: Variable, frame: Frame | None = None) -> Any:
        """The member key of `var`; with `frame`, an unhashable constant raises the program's
        TypeError."""
        if var.is_constant():
            return dict_key(var, frame, member=True)
        contents = var.set_contents()
        if contents is not None and contents.python_class is frozenset and contents.is_constant():
            cls = var.python_type()  # a frozenset subclass's instance hashing as its members do
            if cls.__hash__ is frozenset.__hash__ and cls.__eq__ is frozenset.__eq__:
                return contents.as_constant()
        identity = var.value_object
        if identity is None and issubclass(var.python_type(), torch.Tensor):
            return dict_key(var, frame, member=True)  # a tensor the graph has: by its identity
        made = identity_of(var) if identity is None and frame is not None else None
        fields = _compared_fields(var, frame) if made is not None else None  # type: ignore[arg-type]
        if fields is not None:
            return FieldsKey(made, var, fields)
        if identity is None:
            raise Unsupported(f"set member {var.describe()} (only constants, tensors and fixed objects are tracked)")
        if not set_member_by_identity(identity):
            raise Unsupported(f"set member {var.describe()}, whose class defines __eq__ or __hash__")
        if frame is not None and var.source is not None:
            frame.output.guards.id_match(var.source, identity)  # found or not by being this object
        return _Identity(identity)

    @classmethod
    def from_items(cls, frame: Frame, items: list[Variable], python_class: type = set) -> SetVariable:
        """`{a, b}` or `set(iterable)`: members added one by one, in order."""
        result = cls({}, python_class)
        for item in items:
            result._add(item, frame)
        return result

    @classmethod
    def of(cls, frame: Frame, value: Variable, python_class: type = set) -> SetVariable:
        """`set(value)`: a set or dict argument is merged as a whole, as CPython does."""
        value = value.set_contents() or value
        if isinstance(value, (SetVariable, DictVariable)):
            members, table = _as_table(frame, value)
            result = cls(dict(members), python_class, table=set(table))
            result.layout_known = not isinstance(value, SetVariable) or value.layout_known
            return result
        return cls.from_items(frame, value.unpack(frame), python_class)

    def _add(self, item: Variable, frame: Frame | None = None) -> None:
        key = self.key_of(item, frame)
        self.members.setdefault(key, item)
        self.table.add(key)

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        return f"{self.python_class.__name__} of {len(self.members)}"

    def is_constant(self) -> bool:
        return all(v.is_constant() for v in self.members.values())

    def as_constant(self) -> Any:
        return self.python_class(v.as_constant() for v in self._ordered())

    @classmethod
    def from_frame(cls, frame: Frame, value: set, source: Source | None, trackers: dict[Any, Variable]) -> SetVariable:
        """A real set read from the frame: constants, and the objects `trackers` holds the
        trackers of (members compared by identity)."""
        keys = [cls.key_of(trackers[m], frame) if m in trackers else m for m in value]
        members = {k: trackers[m] if m in trackers else constant(m) for k, m in zip(keys, value)}
        result = cls(members, source=source, table=set(keys))
        result.fixed_order = keys
        result.layout_known = False
        return result

    def _order(self) -> list[Any]:
        if self.fixed_order is not None:
            return self.fixed_order
        if len(self.table) > 1 and any(isinstance(k, TrackedKey) for k in self.table):
            raise Unsupported(
                f"iterating {self.describe()} holding tensors: its order follows their addresses",
                hint="iterate a list, or sorted(...) where order matters",
            )
        if not self.layout_known:
            raise Unsupported(
                f"iterating {self.describe()} derived from a set of the frame the trace changed or combined: "
                "its order depends on that set's hash-table history",
                hint="iterate sorted(...) where order matters",
            )
        return list(self.table)

    def _ordered(self) -> list[Variable]:
        return [self.members[k] for k in self._order()]

    def unpack(self, frame: Frame) -> list[Variable]:
        return self._ordered()

    def length(self, frame: Frame) -> int:
        return len(self.members)

    def truth(self, frame: Frame) -> bool:
        return bool(self.members)

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self._lookup_key(frame, item) in self.members

    def _lookup_key(self, frame: Frame, item: Variable) -> Any:
        """The key `in`, `remove` and `discard` look up: a set is looked up as the frozenset of
        its members, as CPython retries an unhashable set (a set subclass with a `__hash__` of
        its own is hashable: not retried)."""
        contents = item.set_contents() or item
        unhashable = contents is item or item.python_type().__hash__ is None
        if unhashable and isinstance(contents, SetVariable) and contents.python_class is set and contents.is_constant():
            return frozenset(contents.as_constant())
        return self.key_of(item, frame)

    def made_while_tracing(self) -> bool:
        return self.source is None

    def get_iter(self, frame: Frame) -> Variable:
        return LiveContainerIteratorVariable(self, "set")

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        """`|`, `&`, `-`, `^`, their in-place forms and the comparisons, as CPython's set
        operators: with a set; with a dict's keys or items view (its own operator, answering for
        both sides); with anything else a TypeError (or, for `==` and `!=`, the default)."""
        if isinstance(other, DictViewVariable) and other.set_like():
            if plain in _SET_OPERATORS:
                return view_set_operation(frame, plain, self, other)
            other = other.as_set(frame)
        names = _SET_OPERATORS.get(plain) or _SET_COMPARISONS.get(plain)
        if names is None:
            return None
        if not _is_set(other):
            if plain in (operator.eq, operator.ne):
                return None
            raise raise_new(frame, TypeError, _unsupported_operands(op, self, other))
        if op is not plain and self.python_class is set:  # |=, &=, -=, ^=: a set changes in place
            return self.call_method(frame, names[1], [other], {})
        return self.call_method(frame, names[0], [other], {})  # a frozenset's `|=` makes a new one

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        # removals, then additions in program order: the set keeps its own table, so code
        # iterating it afterwards sees eager's order (clear() would rebuild the table)
        members = pin("(" + "".join(expr(v) + ", " for v in self.members.values()) + ")")
        return (
            f"{target}.difference_update([___k for ___k in {target} if ___k not in {members}]); "
            f"{target}.update({members})"
        )

    def getattr(self, frame: Frame, name: str) -> Variable:
        return _method_of(self, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        mutating = name in _SET_IN_PLACE or name in ("add", "discard", "remove", "clear", "pop")
        if mutating and self.python_class is not set:
            raise Unsupported(f"{name} on a frozenset")
        if kwargs:
            raise Unsupported(f"set.{name} with keyword arguments")
        if _SET_ARITY.get(name, len(args)) != len(args):
            _raise_arity_error(frame, self.python_class, name, args)
        if name == "pop" and not args and (self.fixed_order is not None or not self.layout_known):
            # CPython's pop starts where the last one stopped: unknown for a set of the frame
            raise Unsupported(f"pop of {self.describe()} read from the frame", hint="pop from a copy: set(s).pop()")
        if mutating:
            frame.output.side_effects.container_changed(self)
            self.fixed_order = None
        if name == "add" and len(args) == 1:
            self._add(args[0], frame)
        elif name in ("discard", "remove") and len(args) == 1:
            key = self._lookup_key(frame, args[0])
            if key not in self.members and name == "remove":
                raise raise_new(frame, KeyError, key)
            self.members.pop(key, None)
            self.table.discard(key)
        elif name == "clear" and not args:
            self.members.clear()
            self.table.clear()
        elif name == "pop" and not args:
            if not self.table:
                raise raise_new(frame, KeyError, "pop from an empty set")
            return self.members.pop(self.table.pop())  # the real table's pop: CPython's member
        elif name == "copy" and not args and self.python_class is frozenset:
            return self  # immutable: CPython gives the same object back
        elif name == "isdisjoint" and len(args) == 1 and isinstance(args[0], IteratorVariable):
            # stops at the first common item, as CPython: the rest is not consumed
            while (item := args[0].next(frame)) is not None:
                if self.contains(frame, item):
                    return constant(False)
            return constant(True)
        elif name in _SET_IN_PLACE or name in _SET_RESULTS or name in _SET_PREDICATES:
            return self._table_operation(frame, name, args)
        elif name == "__contains__" and len(args) == 1:
            return constant(self.contains(frame, args[0]))
        elif name == "__len__" and not args:
            return constant(len(self.members))
        elif name == "__iter__" and not args:
            return iterate(frame, self)
        else:
            raise Unsupported(f"method {name!r} of {self.describe()}")
        return constant(None)

    def _table_operation(self, frame: Frame, name: str, args: list[Variable]) -> Variable:
        """A set method run on the real tables: this set's and each argument's (a set's table, a
        dict's keys, any other iterable's keys in order), so the result, its order, the
        NotImplemented of an operator given a non-set and the TypeError of a wrong argument
        are CPython's own."""
        others = [_as_table(frame, other) for other in args]
        members = dict(self.members)
        for other_members, _ in others:
            for k, v in other_members.items():
                members.setdefault(k, v)
        try:
            result = getattr(self.table, name)(*[table for _, table in others])
        except TypeError as e:
            raise_python_error(frame, e)
        if result is NotImplemented or isinstance(result, bool):
            return constant(result)
        if name in _SET_IN_PLACE:
            self.members = {k: members[k] for k in self.table}
            return self if name.startswith("__") else constant(None)
        made = SetVariable({k: members[k] for k in result}, self.python_class, table=set(result))
        made.layout_known = self.layout_known and all(o.layout_known for o in args if isinstance(o, SetVariable))
        return made

    def rebuilt_members(self, rebuild: Any) -> str:
        """The members as `a, b, ` in iteration order, for code adding them to a new set in that
        order; refused when that set would iterate in another order than this one (its table
        had collisions resolved otherwise)."""
        order = self._order()
        rebuilt: set = set()
        for key in order:
            rebuilt.add(key)
        if list(rebuilt) != order:
            raise Unsupported(
                f"{self.describe()} would iterate in another order once rebuilt outside the graph",
                hint="the frame runs eagerly; sort the members where order matters",
            )
        return "".join(rebuild.expr(v) + ", " for v in self._ordered())

    def reconstruct(self, rebuild: Any) -> str:
        items = self.rebuilt_members(rebuild)
        if self.python_class is set:
            return f"{{{items}}}" if items else "set()"
        return f"{rebuild.writer.bind(self.python_class, 'cls')}(({items}))"


def _raise_arity_error(
    frame: Frame, cls: type, name: str, args: list[Variable], kwargs: dict[str, Variable] | None = None
) -> NoReturn:
    """Raise, in the program, CPython's TypeError for `cls.name` given the wrong number of
    arguments (`s.add()`, `d.clear(1)`, `dict.fromkeys()`): the real method of an empty `cls`
    called with as many `None`s."""
    method = getattr(cls(), name, None)
    if method is None:
        raise Unsupported(f"method {name!r} of {cls.__name__}")
    try:
        method(*[None] * len(args), **dict.fromkeys(kwargs or ()))
    except TypeError as e:
        raise_python_error(frame, e)
    raise AssertionError(f"{cls.__name__}.{name} accepted {len(args)} arguments")


# how many arguments (fewest, most) the dict methods taking a fixed number of them take
_DICT_ARITY = {
    **dict.fromkeys(("clear", "copy", "keys", "values", "items", "popitem", "__len__"), (0, 0)),
    **dict.fromkeys(("get", "pop", "setdefault", "move_to_end"), (1, 2)),
    **dict.fromkeys(("__getitem__", "__delitem__", "__contains__"), (1, 1)),
    "__setitem__": (2, 2),
}
# how many arguments the set methods taking a fixed number of them take
_SET_ARITY = {"add": 1, "discard": 1, "remove": 1, "pop": 0, "clear": 0, "copy": 0, "__contains__": 1, "__len__": 0}


# `a op b` on sets: (method for the new set, method for the in-place form)
_SET_OPERATORS = {
    operator.or_: ("union", "__ior__"),
    operator.and_: ("intersection", "__iand__"),
    operator.sub: ("difference", "__isub__"),
    operator.xor: ("symmetric_difference", "__ixor__"),
}
_SET_COMPARISONS = {
    operator.eq: ("__eq__",),
    operator.ne: ("__ne__",),
    operator.lt: ("__lt__",),
    operator.le: ("__le__",),
    operator.gt: ("__gt__",),
    operator.ge: ("__ge__",),
}
# what `left op right` does to a copy of `left` when either side is a dict's keys or items view
_VIEW_SET_UPDATES = {
    operator.or_: "update",
    operator.and_: "intersection_update",
    operator.sub: "difference_update",
    operator.xor: "symmetric_difference_update",
}


def view_set_operation(frame: Frame, plain: Any, left: Variable, right: Variable) -> SetVariable:
    """`left op right` where either side is a dict's keys or items view: CPython's view operators
    make a set of `left` and update it with `right` (any iterable), whichever side the view is."""
    result = SetVariable.of(frame, left)
    result._table_operation(frame, _VIEW_SET_UPDATES[plain], [right])
    return result


def _is_set(var: Variable) -> bool:
    var = var.set_contents() or var
    return isinstance(var, SetVariable) or (var.is_constant() and isinstance(var.as_constant(), (set, frozenset)))


_SYMBOLS = {
    **{operator.or_: "|", operator.and_: "&", operator.sub: "-", operator.xor: "^"},
    **{operator.ior: "|=", operator.iand: "&=", operator.isub: "-=", operator.ixor: "^="},
    **{operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="},
}


def _unsupported_operands(op: Any, a: Variable, b: Variable) -> str:
    """CPython's TypeError message for `a op b` where neither side takes the other."""
    names = f"'{a.python_type().__name__}' and '{b.python_type().__name__}'"
    if op in _SET_COMPARISONS:
        return f"'{_SYMBOLS[op]}' not supported between instances of {names}"
    return f"unsupported operand type(s) for {_SYMBOLS[op]}: {names}"


# set methods `_table_operation` runs on the real tables, by what they give
_SET_IN_PLACE = frozenset(
    {
        "update",
        "intersection_update",
        "difference_update",
        "symmetric_difference_update",
        "__ior__",
        "__iand__",
        "__isub__",
        "__ixor__",
    }
)
_SET_RESULTS = frozenset(
    {
        "union",
        "intersection",
        "difference",
        "symmetric_difference",
        "copy",
        *("__or__", "__and__", "__sub__", "__xor__", "__ror__", "__rand__", "__rsub__", "__rxor__"),
    }
)
_SET_PREDICATES = frozenset(
    {"issubset", "issuperset", "isdisjoint", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
)


def _as_table(frame: Frame, other: Variable) -> tuple[dict[Any, Variable], Any]:
    """(key -> tracker, what a real set operation takes for it): a set's own table, a dict's keys
    as a dict (merged as a whole), or any other iterable's keys as a list (added one by one)."""
    other = other.set_contents() or other
    if isinstance(other, SetVariable):
        return other.members, other.table
    if other.is_constant() and isinstance(other.as_constant(), (set, frozenset)):
        value = other.as_constant()
        return {k: constant(k) if _is_literal(k) else ConstantVariable(k) for k in value}, value
    if isinstance(other, DictVariable):
        keys = other.key_trackers()
        return {SetVariable.key_of(k): k for k in keys}, dict.fromkeys(SetVariable.key_of(k) for k in keys)
    items = other.unpack(frame)
    keys = [SetVariable.key_of(item, frame) for item in items]
    members: dict[Any, Variable] = {}
    for key, item in zip(keys, items):
        members.setdefault(key, item)
    return members, keys


def set_member_by_identity(value: Any) -> bool:
    """Whether a set member's `==` and hash are its identity's: its class keeps object's (a
    function, a module, a plain object), or it is a module's builtin function (`torch.sin`, or
    a pybind11 one such as `torch._C._set_autograd_fallback_mode`, bound to its own function
    record: equal only to itself; a builtin method bound to an object is equal to a fresh one)."""
    cls = type(value)
    if isinstance(value, types.BuiltinFunctionType):
        owner = value.__self__
        return isinstance(owner, (types.ModuleType, type(None))) or type(owner).__name__.startswith(
            "pybind11_detail_function_record"
        )
    return cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__


class _Identity:
    """A set key comparing an object by identity (modules, functions in a set)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return hash(self.obj)  # the object's own (identity) hash: the real set's layout

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj
