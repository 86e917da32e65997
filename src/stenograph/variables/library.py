"""Standard-library functions applied to trackers: `math`, `operator`, `itertools`, `functools`,
`dataclasses` and `collections.OrderedDict`.

These are implemented in C (or are too generic to inline usefully), so each one tracing
understands has a handler here. `math` functions fold on constants; `operator` functions become
the operation they name (a graph node on tensors); `itertools` builds its result eagerly from
the items it is given, which is what iterating it would produce.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
import itertools
import math
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from . import operators
from .base import ConstantVariable, HandledFunctionVariable, Variable, constant, handler_registry
from .containers import DictVariable, IteratorVariable, TupleVariable
from .functions import PartialVariable, UserFunctionVariable, UserMethodVariable
from .instances import dataclass_fields, instantiate

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

Handler = Callable[["Frame", list[Variable], dict[str, Variable]], Variable]
_HANDLERS: dict[Any, Handler] = {}


_handler = handler_registry(_HANDLERS)


class LibraryFunctionVariable(HandledFunctionVariable):
    """A standard-library function or class with a handler in this module."""

    def describe(self) -> str:
        return f"{getattr(self.fn, '__module__', '')}.{getattr(self.fn, '__qualname__', self.fn)}"

    def call(self, tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return _HANDLERS[self.fn](tx, args, kwargs)

    def getattr(self, tx: Frame, name: str) -> Variable:
        attr = getattr(self.fn, name, None)
        if attr is not None and attr in _HANDLERS:
            return LibraryFunctionVariable(attr)
        if name in ("__name__", "__qualname__", "__module__"):
            return constant(attr)
        return super().getattr(tx, name)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


def lookup(value: Any) -> Variable | None:
    """A tracker for a library function tracing knows, or one of `math`'s pure functions."""
    try:
        if value in _HANDLERS:
            return LibraryFunctionVariable(value)
    except TypeError:  # unhashable
        return None
    if getattr(value, "__module__", None) == "math" or getattr(value, "__self__", None) is math:
        return MathFunctionVariable(value)
    return None


class MathFunctionVariable(LibraryFunctionVariable):
    """A `math` function: evaluated now when its arguments are constants."""

    def call(self, tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(
                f"math.{self.fn.__name__} of {', '.join(a.describe() for a in args)}",
                hint="use the torch function on tensors",
            )
        try:
            plain_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
            return constant(self.fn(*[a.as_constant() for a in args], **plain_kwargs))
        except Exception as e:
            raise Unsupported(f"math.{self.fn.__name__} raised {type(e).__name__}: {e}") from e


# -- operator -----------------------------------------------------------------------------------

_BINARY = [
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.matmul, operator.and_, operator.or_, operator.xor, operator.lshift,
    operator.rshift, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    operator.iadd, operator.isub, operator.imul, operator.itruediv,
]  # fmt: skip


def _binary(fn: Any) -> Handler:
    def handler(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return operators.binary(tx, fn, args[0], args[1])

    return handler


for _fn in _BINARY:
    _HANDLERS[_fn] = _binary(_fn)


def _unary_of(fn: Any) -> Handler:
    def handler(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return operators.unary(tx, fn, args[0])

    return handler


for _fn in (operator.neg, operator.pos, operator.invert, operator.not_):
    _HANDLERS[_fn] = _unary_of(_fn)


@_handler(operator.getitem)
def _getitem(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return args[0].getitem(tx, args[1])


@_handler(operator.contains)
def _contains(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return constant(operators.contains(tx, args[1], args[0]))


def _is_of(negate: bool) -> Handler:
    def handler(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return constant(operators.is_same(tx, args[0], args[1]) != negate)

    return handler


_HANDLERS[operator.is_] = _is_of(False)
_HANDLERS[operator.is_not] = _is_of(True)


class GetterVariable(Variable):
    """An `operator.itemgetter(...)` / `attrgetter(...)` made while tracing."""

    def __init__(self, kind: Any, keys: list[Variable]) -> None:
        self.kind = kind
        self.keys = keys

    def describe(self) -> str:
        return f"operator.{self.kind.__name__}"

    def call(self, tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        obj = args[0]
        if self.kind is operator.itemgetter:
            values = [obj.getitem(tx, k) for k in self.keys]
        else:
            values = []
            for key in self.keys:
                value = obj
                for part in key.as_constant().split("."):
                    value = value.getattr(tx, part)
                values.append(value)
        return values[0] if len(values) == 1 else TupleVariable(values)


_HANDLERS[operator.itemgetter] = lambda tx, args, kwargs: GetterVariable(operator.itemgetter, args)
_HANDLERS[operator.attrgetter] = lambda tx, args, kwargs: GetterVariable(operator.attrgetter, args)


# -- itertools ----------------------------------------------------------------------------------


def _iterator(items: list[Variable]) -> IteratorVariable:
    return IteratorVariable(items)


@_handler(itertools.chain)
def _chain(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return _iterator([item for a in args for item in a.unpack(tx)])


@_handler(itertools.chain.from_iterable)
def _chain_from_iterable(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return _iterator([item for a in args[0].unpack(tx) for item in a.unpack(tx)])


@_handler(itertools.product)
def _product(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    repeat = kwargs.get("repeat", constant(1)).as_constant()
    pools = [a.unpack(tx) for a in args] * repeat
    return _iterator([TupleVariable(list(p)) for p in itertools.product(*pools)])


@_handler(itertools.islice)
def _islice(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    bounds = [a.as_constant() for a in args[1:]]
    return _iterator(list(itertools.islice(args[0].unpack(tx), *bounds)))


@_handler(itertools.accumulate)
def _accumulate(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    fn = args[1] if len(args) > 1 else kwargs.get("func")
    items = args[0].unpack(tx)
    initial = kwargs.get("initial")
    no_initial = initial is None or initial.is_constant() and initial.as_constant() is None
    out: list[Variable] = [] if no_initial else [initial]
    for item in items:
        if not out:
            out.append(item)
        elif fn is None:
            out.append(operators.binary(tx, operator.add, out[-1], item))
        else:
            out.append(fn.call(tx, [out[-1], item], {}))
    return _iterator(out)


@_handler(itertools.zip_longest)
def _zip_longest(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    fill = kwargs.get("fillvalue", constant(None))
    columns = [a.unpack(tx) for a in args]
    return _iterator([TupleVariable(list(row)) for row in itertools.zip_longest(*columns, fillvalue=fill)])


@_handler(itertools.repeat)
def _repeat(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        raise Unsupported("itertools.repeat without times is infinite")
    return _iterator([args[0]] * times.as_constant())


def _combinatoric(fn: Any) -> Handler:
    def handler(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        items = args[0].unpack(tx)
        rest = [a.as_constant() for a in args[1:]]
        picks = fn(range(len(items)), *rest, **{k: v.as_constant() for k, v in kwargs.items()})
        return _iterator([TupleVariable([items[i] for i in pick]) for pick in picks])

    return handler


for _fn in (itertools.combinations, itertools.permutations, itertools.combinations_with_replacement):
    _HANDLERS[_fn] = _combinatoric(_fn)


@_handler(itertools.pairwise)
def _pairwise(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    items = args[0].unpack(tx)
    return _iterator([TupleVariable([a, b]) for a, b in itertools.pairwise(items)])


@_handler(itertools.starmap)
def _starmap(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return _iterator([args[0].call(tx, row.unpack(tx), {}) for row in args[1].unpack(tx)])


# -- functools, dataclasses, collections -------------------------------------------------------


@_handler(functools.partial)
def _partial(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if not args:
        raise Unsupported("functools.partial() without a function")
    return PartialVariable.make(args[0], args[1:], kwargs)


@_handler(functools.reduce)
def _reduce(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    fn, items = args[0], args[1].unpack(tx)
    if len(args) > 2:
        items = [args[2], *items]
    if not items:
        raise Unsupported("functools.reduce() of an empty sequence with no initial value")
    total = items[0]
    for item in items[1:]:
        total = fn.call(tx, [total, item], {})
    return total


@_handler(dataclasses.fields)
def _fields(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return dataclass_fields(tx, args[0])


@_handler(dataclasses.is_dataclass)
def _is_dataclass(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    obj = args[0]
    target = obj.as_constant() if obj.is_constant() else obj.python_type()
    return constant(dataclasses.is_dataclass(target))


@_handler(dataclasses.replace)
def _replace(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    obj = args[0]
    cls = obj.python_type()
    changes = dict(kwargs)
    for field in dataclasses.fields(cls):
        if field.init and field.name not in changes:
            changes[field.name] = obj.getattr(tx, field.name)
    return instantiate(tx, cls, [], changes)


@_handler(inspect.signature)
def _signature(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`inspect.signature(f)` of a function known while tracing: a constant."""
    target = args[0]
    if isinstance(target, UserFunctionVariable):
        real: Any = target.fn
    elif isinstance(target, UserMethodVariable):
        real = types.MethodType(target.fn, object())  # only the binding of the first parameter matters
    else:
        raise Unsupported(f"inspect.signature of {target.describe()}")
    plain = {k: v.as_constant() for k, v in kwargs.items()}
    return ConstantVariable(inspect.signature(real, **plain))


@_handler(collections.OrderedDict)
def _ordered_dict(tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    result = DictVariable({}, python_class=collections.OrderedDict)
    result.call_method(tx, "update", args, kwargs)
    return result
