"""Values known while tracing: constants, the methods of constants (evaluated now), iterators over
known items, and the NULL marker.

A constant (`ConstantVariable`) is a Python value the trace knows now: numbers, strings, None,
dtypes, types, ranges, ... `constant(value)` makes one, shared for small immutable values. Calling
a constant's method runs it now on the constant arguments; an iterator over known items is what
GET_ITER makes of a value that has no iterator of its own (`containers.iterate`). An error
Python raises evaluating any of them is raised in the traced program
(`exceptions.raise_python_error`).
"""

from __future__ import annotations

import collections.abc
import itertools
import operator
import types
from typing import TYPE_CHECKING, Any

from .. import process_state
from ..errors import BreakKind, Unsupported
from ..guards.sources import AttrSource
from .base import Variable, always_true
from .class_lookup import class_attribute
from .exceptions import TracedException, raise_new, raise_python_error
from .symbolic import index_value
from .trace_rules import is_structseq_class

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


class ConstantVariable(Variable):
    """A Python value known while tracing: numbers, strings, None, dtypes, types, ranges, ..."""

    def __init__(self, value: Any, source: Source | None = None) -> None:
        self.value = value
        self.source = source

    def describe(self) -> str:
        text = repr(self.value)
        return f"constant {text if len(text) < 60 else text[:57] + '...'}"

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.value

    def truth(self, frame: Frame) -> bool:
        return bool(self.value)

    def reconstruct(self, codegen: Any) -> str:
        return codegen.constant(self.value)

    def unpack(self, frame: Frame) -> list[Variable]:
        try:
            items = list(self.value)
        except TypeError as e:  # not iterable: CPython's error, in the program
            raise_python_error(frame, e)
        return [constant(item) for item in items]

    def length(self, frame: Frame) -> int:
        return len(self.value)

    def getattr(self, frame: Frame, name: str) -> Variable:
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            if self.source is not None:  # `hasattr` answers False: guard that it stays so
                frame.output.guards.attribute_absent(self.source, self.value, name)
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE) from e
        if not callable(attr):
            return constant(attr)
        if name == "__get__" and isinstance(self.value, C_FIELD_DESCRIPTORS):
            return FieldGetVariable(self.value, None if self.source is None else AttrSource(self.source, name))
        if getattr(attr, "__self__", None) is self.value:
            return ConstantMethodVariable(self.value, name)
        # a class or special form the constant refers to (`alias.__origin__ is Union`, as
        # typing.get_args asks): the value itself, compared and called as such
        return frame.wrap(attr, None if self.source is None else AttrSource(self.source, name))

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if is_structseq_class(self.value):  # `torch.return_types.max(seq)`, `type(result)(seq)`
            return frame.instantiate(self.value, args, kwargs)
        if _unbound_builtin_method_of(self.value, args):  # `dict.get(d, k)`, `set.__or__(a, b)`
            return args[0].call_method(frame, self.value.__name__, args[1:], kwargs)
        dict_method = getattr(args[0], "call_dict_method", None) if args else None
        if dict_method is not None and getattr(self.value, "__objclass__", None) is dict:
            return dict_method(frame, self.value.__name__, args[1:], kwargs)  # `dict.copy(ordered_dict)`
        return super().call(frame, args, kwargs)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        if not key.is_constant() and isinstance(self.value, type) and hasattr(self.value, "__class_getitem__"):
            # an annotation (`Callable[[T], Any]`): its arguments as the values they hold
            return constant(self.value[_annotation_arguments(key)])
        index = index_value(key, self.describe())
        try:
            return constant(operator.getitem(self.value, index))
        except Exception as e:
            raise_python_error(frame, e)

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


def _unbound_builtin_method_of(method: Any, args: list[Variable]) -> bool:
    """Whether `method(*args)` is a builtin class's method (`dict.get`, `set.__or__`) called on
    an instance whose class reaches that same method: the call is then `args[0].method(...)`."""
    if not isinstance(method, (types.MethodDescriptorType, types.WrapperDescriptorType)) or not args:
        return False
    try:
        kind = args[0].python_type()
    except Unsupported:
        return False
    return issubclass(kind, method.__objclass__) and getattr(kind, method.__name__, None) is method


def _annotation_arguments(key: Variable) -> Any:
    """The subscript of a generic class as Python values: constants, and lists and tuples of
    them (`[[T], Any]`); anything else is refused."""
    if key.is_constant():
        return key.as_constant()
    items = getattr(key, "items", None)  # a list or tuple tracker's (containers imports this module)
    kind = key.python_type() if isinstance(items, list) else None
    if kind in (list, tuple):
        return kind(_annotation_arguments(item) for item in items)
    raise Unsupported(f"a generic class subscripted with {key.describe()}")


class GuardedOnUseConstant(ConstantVariable):
    """A constant read from the frame whose value guard is installed when the value is used.

    Values that are only passed along (returned, stored, carried to a resume function) are
    rebuilt through their source and need no guard; specialising on them would recompile for
    every new value (e.g. the floats of a `.tolist()` that only its length is taken of).
    """

    def __init__(self, value: Any, source: Source, install: Any) -> None:
        self._value = value
        self.source = source
        self._install = install  # installs the guard once; None afterwards

    @property
    def value(self) -> Any:  # type: ignore[override]
        if self._install is not None:
            install, self._install = self._install, None
            install()
        return self._value

    def describe(self) -> str:
        text = repr(self._value)
        return f"constant {text if len(text) < 60 else text[:57] + '...'}"

    def __repr__(self) -> str:
        return f"GuardedOnUseConstant({self._value!r})"


class ConstantMethodVariable(Variable):
    """A method of a Python constant (`"a,b".split`, `(1, 2).index`): evaluated now."""

    def __init__(self, obj: Any, name: str) -> None:
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"method {type(self.obj).__name__}.{self.name}"

    def truth(self, frame: Frame) -> bool:
        if always_true(getattr(self.obj, self.name)):
            return True
        return super().truth(frame)

    def getattr(self, frame: Frame, name: str) -> Variable:
        method = getattr(self.obj, self.name)
        attr = bound_method_attribute(constant(self.obj), method, name)
        return attr if attr is not None else super().getattr(frame, name)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.name == "__iter__" and not args and not kwargs:  # `range(3).__iter__()`: as `iter()`
            return IteratorVariable(constant(self.obj).unpack(frame))
        # an iterator argument (`",".join(str(i) for i in xs)`) is consumed into a list first
        items = [a.unpack(frame) if isinstance(a, IteratorVariable) else None for a in args]
        trackers = [*itertools.chain.from_iterable(i if i is not None else [a] for a, i in zip(args, items))]
        if not all(t.is_constant() for t in [*trackers, *kwargs.values()]):
            raise Unsupported(f"{self.describe()} with non-constant arguments")
        values = [[t.as_constant() for t in i] if i is not None else a.as_constant() for a, i in zip(args, items)]
        try:
            result = getattr(self.obj, self.name)(*values, **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:
            raise_python_error(frame, e)
        return evaluated(result)

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.constant(self.obj)}.{self.name}"


# descriptors of C classes' fields: `torch.Tensor.shape` (a getset), a `__slots__` member
C_FIELD_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)


class FieldGetVariable(ConstantMethodVariable):
    """`descriptor.__get__` of a C field descriptor (`torch.Tensor.shape.__get__`,
    `type.__dict__["__dict__"].__get__`): calling it with an instance reads the field by its
    name, traced as that attribute read (guarded like it), where the instance's class finds this
    very descriptor under that name and looks it up the ordinary way. As a value it is the bound
    method, a constant (equal to every other binding of the descriptor: a set of them, as
    `torch.overrides.get_default_nowrap_functions()` builds, tests members by it). `source`
    reaches the bound method itself, or is None where the descriptor is a constant."""

    def __init__(self, descriptor: Any, source: Source | None = None) -> None:
        super().__init__(descriptor, "__get__")
        self.source = source

    def python_type(self) -> type:
        return types.MethodWrapperType

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.obj.__get__

    def describe(self) -> str:
        return f"{self.obj.__objclass__.__qualname__}.{self.obj.__name__}.__get__"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs or not 1 <= len(args) <= 2 or (args[0].is_constant() and args[0].as_constant() is None):
            raise Unsupported(f"{self.describe()} called without an instance")
        kind, name, owner = args[0].python_type(), self.obj.__name__, self.obj.__objclass__
        if not issubclass(kind, owner):
            raise raise_new(
                frame,
                TypeError,
                f"descriptor '{name}' for '{owner.__name__}' objects doesn't apply to a '{kind.__name__}' object",
            )
        ordinary = kind.__getattribute__ in (object.__getattribute__, type.__getattribute__)
        if not ordinary or class_attribute(kind, name) is not self.obj:
            raise Unsupported(
                f"{self.describe()} on a {kind.__qualname__}, whose attribute {name!r} is not read through it",
                hint="the descriptor's own read is traced only where ordinary attribute lookup finds it",
            )
        return args[0].getattr(frame, name)


class BoundMethodVariable(Variable):
    """`obj.method` before the call (a container's, an iterator's): calling it runs `obj.call_method`."""

    def __init__(self, obj: Variable, name: str) -> None:
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.obj.describe()}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.obj.call_method(frame, self.name, args, kwargs)

    def getattr(self, frame: Frame, name: str) -> Variable:
        method = getattr(self.obj.python_type(), self.name)
        attr = bound_method_attribute(self.obj, method, name)
        return attr if attr is not None else super().getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.obj)}.{self.name}"


# what a function or method says of itself, the same for every call
NAME_ATTRIBUTES = ("__name__", "__qualname__", "__module__", "__doc__")


def name_attribute(fn: Any, name: str) -> Variable | None:
    """`fn.__name__` (or `__qualname__`, `__module__`, `__doc__`) of a function or method: a
    constant, the same for every call; None for other names, or where `fn` has none."""
    return constant(getattr(fn, name)) if name in NAME_ATTRIBUTES and hasattr(fn, name) else None


def bound_method_attribute(obj: Variable, method: Any, name: str) -> Variable | None:
    """An attribute of `obj.method` that is the bound method's own (unittest's
    `assertRaises(E, p.append)` reads `__name__`): its object, or the name or doc of the method
    `method` of its class; None for others."""
    if name == "__self__":
        return obj
    return name_attribute(method, name)


# the most items one iterator gives while traced: one whose items are computed as it goes (a
# generator, `map()` over `itertools.count()`, a user iterator) and gives more is taken for an
# endless one and refused rather than traced forever, at torch.compile's bound on a generator's
# yields (eagerly, consuming an endless iterator whole never finishes either)
MOST_ITEMS = 100 * 1024


class IteratorVariable(Variable):
    """An iterator over a known list of items (from GET_ITER on a tracked iterable).

    `failure`, when set, is the exception (class, message) raised once the items run out, as
    `zip(..., strict=True)` raises only when it reaches the shortest argument's end.
    """

    def __init__(self, items: list[Variable], failure: tuple[type[BaseException], str] | None = None) -> None:
        self.items = items
        self.index = 0
        self.failure = failure

    def describe(self) -> str:
        return "iterator"

    def get_iter(self, frame: Frame) -> Variable:
        return self

    def reconstruct(self, codegen: Any) -> str:
        """An iterator over a tuple of the items still to come, made once (reached twice, it is
        one iterator)."""
        return codegen.build_once(
            self, lambda: f"iter(({''.join(codegen.expr(i) + ', ' for i in self.items[self.index :])}))"
        )

    def next(self, frame: Frame) -> Variable | None:
        """The next item, or None when exhausted."""
        if self.index >= len(self.items):
            if self.failure is not None:
                raise raise_new(frame, *self.failure)
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack(self, frame: Frame) -> list[Variable]:
        rest = []
        while (item := self.next(frame)) is not None:
            rest.append(item)
            if len(rest) > MOST_ITEMS:
                raise Unsupported(f"{self.describe()} gives more than {MOST_ITEMS} items; it may never end")
        return rest

    def finished_value(self) -> Variable:
        """What an exhausted iterator's StopIteration carries as `value` (a generator's return)."""
        return constant(None)

    def stop(self, frame: Frame) -> TracedException:
        """The StopIteration an exhausted iterator raises, carrying a generator's return value."""
        value = self.finished_value()
        if value.is_constant() and value.as_constant() is None:
            return raise_new(frame, StopIteration)
        return TracedException(frame.instantiate(StopIteration, [value], {}))

    # whether a break with it on the stack rebuilds it as an iterator over a tuple of its items
    # (what a `for` loop's iterator becomes), rather than through `reconstruct`
    on_stack_as_tuple_iterator = True

    # whether the real iterator has `__length_hint__` (list, tuple, dict and set iterators;
    # generators, map, zip and the sequence-protocol iterator have none)
    has_length_hint = True

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("__next__", "__iter__") or name == "__length_hint__" and self.has_length_hint:
            return BoundMethodVariable(self, name)
        if name == "__length_hint__":
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
        return super().getattr(frame, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        """`it.__next__()`, `it.__iter__()`, `it.__length_hint__()`: what `next`, `iter` and
        `operator.length_hint` call."""
        if args or kwargs:
            raise Unsupported(f"{name}() of {self.describe()} with arguments")
        if name == "__iter__":
            return self
        if name == "__length_hint__":
            return constant(max(len(self.items) - self.index, 0))
        item = self.next(frame)
        if item is None:
            raise self.stop(frame)
        return item

    def iterated(self) -> Variable | None:
        """The mutable container this iterator reads live, if any (a break must not copy it)."""
        return None

    def may_raise(self) -> bool:
        """Whether a later step raises (a tuple of the remaining items would not)."""
        return self.failure is not None

    def rebuilt_faithfully(self) -> bool:
        """Whether the iterator `reconstruct` (or the source) gives goes on as this one would:
        here, a tuple of the remaining items, as long as no container read live can change them
        and no later step raises; subclasses rebuilt as themselves say so."""
        return self.source is not None or (self.iterated() is None and not self.may_raise())


class NullVariable(Variable):
    """The NULL that CALL-sequences push below a callable (3.11/3.12 calling convention)."""

    def describe(self) -> str:
        return "NULL"


NULL = NullVariable()

_CACHE_LIMIT = 256
_small_constants: dict[tuple[type, Any], ConstantVariable] = {}
process_state.register_containers("variables.small_constants", _small_constants, memo=True)


def evaluated(result: Any) -> Variable:
    """What a call evaluated now on constants returned: a constant, or for an iterator
    (`pattern.finditer(text)`) an iterator over its items, taken now, as constants."""
    if isinstance(result, collections.abc.Iterator):
        return IteratorVariable([constant(item) for item in result])
    return constant(result)


def constant(value: Any) -> ConstantVariable:
    """A ConstantVariable for `value`, shared for small immutable values."""
    if isinstance(value, (bool, int, str)) or value is None:
        key = (type(value), value)
        var = _small_constants.get(key)
        if var is None:
            var = ConstantVariable(value)
            if len(_small_constants) < _CACHE_LIMIT:
                _small_constants[key] = var
        return var
    return ConstantVariable(value)


def is_none(var: Variable) -> bool:
    """Whether `var` is the constant None."""
    return var.is_constant() and var.as_constant() is None


class TraceId(int):
    """The number `id()` gives an object made while tracing: unique to it within the trace, good
    for memo tables and comparisons, but not its real id (which differs on every call). Its own
    class, so that code generation refuses it wherever it would leave the frame: alone, or as a
    key or item of a container the frame returns or stores."""


class TraceIdVariable(ConstantVariable):
    """`id()` of an object made while tracing (its value a `TraceId`)."""

    def reconstruct(self, codegen: Any) -> str:
        raise trace_id_leaves()


def trace_id_leaves() -> Unsupported:
    return Unsupported("the id() of an object made while tracing leaves the frame (it differs on every call)")
