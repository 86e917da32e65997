"""Standard-library functions applied to trackers: `math`, `operator`, `itertools`, `functools`,
`dataclasses` and the `collections` types (`OrderedDict`, `deque`, `defaultdict`, `Counter`).

These are implemented in C (or are too generic to inline usefully), so each one tracing
understands has a handler here. `math` functions fold on constants; `operator` functions become
the operation they name (a graph node on tensors); `itertools` builds its result eagerly from
the items it is given, which is what iterating it would produce.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import inspect
import itertools
import math
import operator
import os
import re
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import BreakKind, Unsupported
from ..guards.sources import AttrSource, FixedObjectSource, ItemSource
from . import identity, operators
from .base import Variable
from .collection_types import DefaultDictVariable, new_counter, new_defaultdict, new_deque
from .constants import ConstantVariable, IteratorVariable, constant, evaluated
from .containers import DictVariable, TupleVariable, dict_from_keys, iterate, replayed_advance
from .deep_copy import deep_copy
from .exceptions import CallerExceptionVariable, TracebackVariable, raise_python_error
from .functions import (
    HandledFunctionVariable,
    PartialVariable,
    UserFunctionVariable,
    UserMethodVariable,
    handler_registry,
)
from .mapping_proxy import MappingProxyVariable
from .symbolic import SymNodeVariable, is_number
from .trace_rules import is_literal
from .traced_warnings import trace_warn
from .user_classes import dataclass_fields

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

Handler = Callable[["Frame", list[Variable], dict[str, Variable]], Variable]
_HANDLERS: dict[Any, Handler] = {}


_handler = handler_registry(_HANDLERS)


class LibraryFunctionVariable(HandledFunctionVariable):
    """A standard-library function or class with a handler in this module."""

    def describe(self) -> str:
        return f"{getattr(self.fn, '__module__', '')}.{getattr(self.fn, '__qualname__', self.fn)}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return _HANDLERS[self.fn](frame, args, kwargs)

    def getattr(self, frame: Frame, name: str) -> Variable:
        attr = getattr(self.fn, name, None)
        if attr is not None and attr in _HANDLERS:
            return LibraryFunctionVariable(attr)
        return super().getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


def lookup(value: Any) -> Variable | None:
    """A tracker for a library function tracing knows, or one of `math`'s pure functions."""
    try:
        if value in _HANDLERS:
            return LibraryFunctionVariable(value)
    except TypeError:  # unhashable
        return None
    if _is_math_function(value):
        return MathFunctionVariable(value)
    return None


def _is_math_function(value: Any) -> bool:
    """A function `math` exports (3.15 defines gcd, comb, ... in `math.integer`). Only C
    functions are asked: reading attributes of a user object would run its `__getattr__`."""
    if not isinstance(value, types.BuiltinFunctionType):
        return False
    if getattr(value, "__module__", None) == "math" or getattr(value, "__self__", None) is math:
        return True
    name = getattr(value, "__name__", None)
    return isinstance(name, str) and callable(value) and getattr(math, name, None) is value


_ROUNDING = (math.floor, math.ceil, math.trunc)


class MathFunctionVariable(LibraryFunctionVariable):
    """A `math` function: evaluated now when its arguments are constants."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.fn in _ROUNDING and len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable):
            # a symbolic size scaled by a float and rounded (torchvision's resize): recorded, the
            # symbolic number's own __floor__/__ceil__/__trunc__ give the symbolic int
            return frame.output.call("call_function", self.fn, args, {}, f"math.{self.fn.__name__}")
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


# -- re -----------------------------------------------------------------------------------------

# `re`'s functions with no effect a program could see (the pattern cache aside)
_REGEX_FUNCTIONS = (
    re.compile, re.search, re.match, re.fullmatch, re.split, re.findall, re.finditer, re.sub, re.subn, re.escape,
)  # fmt: skip


def _regex(fn: Any) -> Handler:
    """`re.fn(...)` on constants, evaluated now: patterns and matches are constants themselves
    (`builder`), so what they return is too. A replacement function or a string the trace does
    not know breaks the graph."""

    def handler(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"re.{fn.__name__} of values not known while tracing", kind=BreakKind.UNTRACED_CALL)
        try:
            result = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:  # re.error of a bad pattern, TypeError of a bad argument: the program's
            raise_python_error(frame, e)
        return evaluated(result)

    return handler


for _fn in _REGEX_FUNCTIONS:
    _HANDLERS[_fn] = _regex(_fn)


# -- operator -----------------------------------------------------------------------------------

# every operator the BINARY_OP and COMPARE_OP instructions perform, in-place forms included
_BINARY = [
    fn for fn in dict.fromkeys([*operators.BINARY_OPS, *operators.COMPARE_OPS.values()]) if fn is not operator.getitem
]


def _binary(fn: Any) -> Handler:
    def handler(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return operators.binary(frame, fn, args[0], args[1])

    return handler


for _fn in _BINARY:
    _HANDLERS[_fn] = _binary(_fn)


def _unary_of(fn: Any) -> Handler:
    def handler(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return operators.unary(frame, fn, args[0])

    return handler


for _fn in (operator.neg, operator.pos, operator.invert, operator.not_):
    _HANDLERS[_fn] = _unary_of(_fn)


def _as_builtin(builtin: Any) -> Handler:
    """`operator.abs(x)` is `abs(x)`, `operator.truth(x)` is `bool(x)`: the builtin's handling."""

    def handler(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return frame.wrap(builtin, None).call(frame, args, kwargs)

    return handler


_HANDLERS[operator.abs] = _as_builtin(abs)
_HANDLERS[operator.truth] = _as_builtin(bool)


@_handler(operator.index)
def _index(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`operator.index(i)`: an int (or a symbolic int) as it is; a constant of another type as
    Python converts it (its TypeError included)."""
    (value,) = args
    if isinstance(value, SymNodeVariable) and value.python_type() is int:
        return value
    if not value.is_constant():
        raise Unsupported(f"operator.index of {value.describe()}")
    try:
        return constant(operator.index(value.as_constant()))
    except TypeError as e:
        raise_python_error(frame, e)


@_handler(operator.length_hint)
def _length_hint(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`operator.length_hint(obj, default=0)` of a builtin container or constant (its length) or
    of an iterator over known items (its `__length_hint__`, or `default` where the real one has
    none: a generator, `map`); other objects break the graph."""
    obj = args[0]
    default = args[1] if len(args) > 1 else kwargs.get("default", constant(0))
    if isinstance(obj, IteratorVariable):
        return obj.call_method(frame, "__length_hint__", [], {}) if obj.has_length_hint else default
    if obj.python_type() in (tuple, list, dict, set, frozenset, str, bytes, range):
        return constant(obj.length(frame))
    raise Unsupported(f"operator.length_hint of {obj.describe()}")


@_handler(os.fspath)
def _fspath(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`os.fspath(path)` of a string or bytes: that value (a path object's `__fspath__` is not
    read: graph break); other constants raise CPython's TypeError."""
    (path,) = args
    if not path.is_constant() or kwargs:
        raise Unsupported(f"os.fspath of {path.describe()}")
    try:
        return constant(os.fspath(path.as_constant()))
    except TypeError as e:
        raise_python_error(frame, e)


@_handler(operator.getitem)
def _getitem(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return args[0].getitem(frame, args[1])


@_handler(operator.contains)
def _contains(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return constant(operators.contains(frame, args[1], args[0]))


def _is_of(negate: bool) -> Handler:
    def handler(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return constant(identity.is_same(frame, args[0], args[1]) != negate)

    return handler


_HANDLERS[operator.is_] = _is_of(False)
_HANDLERS[operator.is_not] = _is_of(True)


def _handled(frame: Frame) -> Variable:
    """The exception handled where the traced code asks, refused where only the caller knows."""
    value = frame.handled_exception()
    if isinstance(value, CallerExceptionVariable):
        raise Unsupported("sys.exc_info() of the exception the caller handles", kind=BreakKind.UNTRACED_CALL)
    return value


@_handler(sys.exc_info)
def _exc_info(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if args or kwargs:
        raise Unsupported("sys.exc_info() with arguments")
    value = _handled(frame)
    if value.is_constant():  # None: nothing is handled
        return TupleVariable([constant(None)] * 3)
    return TupleVariable([constant(value.python_type()), value, TracebackVariable(value)])


@_handler(collections.namedtuple)
def _namedtuple_class(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`collections.namedtuple(name, fields, ...)` with constant arguments: the class, made once
    while tracing (each call of the compiled code gets that one class), its module the frame's."""
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("collections.namedtuple() with arguments that are not constants")
    values = [a.as_constant() for a in args]
    keywords = {k: v.as_constant() for k, v in kwargs.items()}
    keywords.setdefault("module", frame.f_globals.get("__name__"))
    try:
        cls = collections.namedtuple(*values, **keywords)
    except (TypeError, ValueError) as e:
        raise_python_error(frame, e)
    return frame.wrap(cls, None)


@_handler(sys.intern)
def _intern(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`sys.intern(s)` of a constant string (`collections.namedtuple` calls it): the string."""
    if len(args) != 1 or kwargs or not args[0].is_constant() or type(args[0].as_constant()) is not str:
        raise Unsupported("sys.intern() of something other than a constant string")
    return constant(sys.intern(args[0].as_constant()))


@_handler(traceback.clear_frames)
def _clear_frames(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`traceback.clear_frames(tb)` (what `assertRaises` does on leaving) of an exception raised
    while tracing (which the trace passes as None): its frames are the trace's, nothing to clear."""
    tb = args[0] if len(args) == 1 and not kwargs else None
    if not (isinstance(tb, TracebackVariable) or tb is not None and tb.is_constant() and tb.as_constant() is None):
        raise Unsupported("traceback.clear_frames() of a traceback the trace did not make")
    return constant(None)


@_handler(sys.exception)
def _exception(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if args or kwargs:
        raise Unsupported("sys.exception() with arguments")
    return _handled(frame)


class GetterVariable(Variable):
    """An `operator.itemgetter(...)` / `attrgetter(...)` made while tracing."""

    def __init__(self, kind: Any, keys: list[Variable]) -> None:
        self.kind = kind
        self.keys = keys

    def describe(self) -> str:
        return f"operator.{self.kind.__name__}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        obj = args[0]
        if self.kind is operator.itemgetter:
            values = [obj.getitem(frame, k) for k in self.keys]
        else:
            values = []
            for key in self.keys:
                value = obj
                for part in key.as_constant().split("."):
                    value = value.getattr(frame, part)
                values.append(value)
        return values[0] if len(values) == 1 else TupleVariable(values)


_HANDLERS[operator.itemgetter] = lambda frame, args, kwargs: GetterVariable(operator.itemgetter, args)
_HANDLERS[operator.attrgetter] = lambda frame, args, kwargs: GetterVariable(operator.attrgetter, args)


# -- itertools ----------------------------------------------------------------------------------


def _iterator(items: list[Variable]) -> IteratorVariable:
    return IteratorVariable(items)


@_handler(itertools.chain)
def _chain(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return _iterator([item for a in args for item in a.unpack(frame)])


@_handler(itertools.chain.from_iterable)
def _chain_from_iterable(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return _iterator([item for a in args[0].unpack(frame) for item in a.unpack(frame)])


@_handler(itertools.product)
def _product(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    repeat = kwargs.get("repeat", constant(1)).as_constant()
    pools = [a.unpack(frame) for a in args] * repeat
    return _iterator([TupleVariable(list(p)) for p in itertools.product(*pools)])


@_handler(itertools.islice)
def _islice(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    bounds = [a.as_constant() for a in args[1:]]
    source = iterate(frame, args[0])
    stop = bounds[0] if len(bounds) == 1 else bounds[1]
    if isinstance(source, EndlessIteratorVariable) and stop is None:
        raise Unsupported(f"itertools.islice() of an {source.describe()} without a stop")

    def pulled() -> Iterator[Variable]:  # the items taken one by one: only those islice asks for
        while (item := source.next(frame)) is not None:
            yield item

    return _iterator(list(itertools.islice(pulled(), *bounds)))


@_handler(itertools.accumulate)
def _accumulate(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    fn = args[1] if len(args) > 1 else kwargs.get("func")
    items = args[0].unpack(frame)
    initial = kwargs.get("initial")
    no_initial = initial is None or initial.is_constant() and initial.as_constant() is None
    out: list[Variable] = [] if no_initial else [initial]
    for item in items:
        if not out:
            out.append(item)
        elif fn is None:
            out.append(operators.binary(frame, operator.add, out[-1], item))
        else:
            out.append(fn.call(frame, [out[-1], item], {}))
    return _iterator(out)


@_handler(itertools.zip_longest)
def _zip_longest(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    fill = kwargs.get("fillvalue", constant(None))
    columns = [a.unpack(frame) for a in args]
    return _iterator([TupleVariable(list(row)) for row in itertools.zip_longest(*columns, fillvalue=fill)])


@_handler(itertools.repeat)
def _repeat(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    times = args[1] if len(args) > 1 else kwargs.get("times")
    if times is None:
        return EndlessIteratorVariable("repeat", [args[0]])
    return _iterator([args[0]] * times.as_constant())


@_handler(itertools.count)
def _count(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    bounds = [*args, *(kwargs[k] for k in ("start", "step")[len(args) :] if k in kwargs)]
    if not all(is_number(b, int) or is_number(b, float) for b in bounds):
        raise Unsupported("itertools.count() of values that are not ints or floats")
    start, step = (bounds + [constant(0), constant(1)][len(bounds) :])[:2]
    return EndlessIteratorVariable("count", [], start=start, step=step)


@_handler(itertools.cycle)
def _cycle(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return EndlessIteratorVariable("cycle", [], source=iterate(frame, args[0]))


class EndlessIteratorVariable(IteratorVariable):
    """`itertools.count`, `itertools.cycle` and `itertools.repeat` without `times`: each step
    computes its item (`cycle` pulls from its iterable on the first pass, as CPython's does, and
    then repeats what it saved). No list of the items exists, so one live at a graph break, or
    unpacked whole, is refused (eagerly, unpacking never ends)."""

    has_length_hint = False

    def __init__(
        self,
        kind: str,
        saved: list[Variable],
        *,
        start: Variable | None = None,
        step: Variable | None = None,
        source: IteratorVariable | None = None,
    ) -> None:
        self.kind = kind
        self.saved = saved
        self.current, self.step = start, step  # `count`: the next item, and what each adds
        self.iterable = source  # what `cycle` pulls from on its first pass (not a guard's source)
        self.index = 0
        self.failure = None

    def describe(self) -> str:
        return f"itertools.{self.kind} object"

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        raise Unsupported(f"an {self.describe()} is live at a graph break (its items never end)")

    def next(self, frame: Frame) -> Variable | None:
        self.index += 1
        if self.kind == "count":  # each item the last plus the step, as CPython adds them
            item = self.current
            self.current = operators.binary(frame, operator.add, item, self.step)  # type: ignore[arg-type]
            return item
        if self.kind == "repeat":
            return self.saved[0]
        if self.iterable is not None:
            item = self.iterable.next(frame)
            if item is not None:
                self.saved.append(item)
                return item
            self.iterable = None
        if not self.saved:
            return None  # cycle() of an empty iterable
        item = self.saved.pop(0)  # the saved items rotate
        self.saved.append(item)
        return item

    def unpack(self, frame: Frame) -> list[Variable]:
        raise Unsupported(f"unpacking an {self.describe()}, which never ends")


class InputCountVariable(EndlessIteratorVariable):
    """An `itertools.count` passed in (an argument, a global, a closure variable, an attribute):
    its next value and step are read from it and guarded, so a call that finds it moved on
    compiles again, as torch.compile's does; the steps the trace takes are taken from the real
    counter after the graph, and returned or live at a break it is the caller's own."""

    on_stack_as_tuple_iterator = False

    def __init__(self, start: Variable, step: Variable, source: Any) -> None:
        super().__init__("count", [], start=start, step=step)
        self.source = source

    def describe(self) -> str:
        return "itertools.count object passed in"

    def next(self, frame: Frame) -> Variable | None:
        frame.output.side_effects.container_changed(self)
        return super().next(frame)

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        return replayed_advance(target, expr, self.index)


class _SteppedIteratorVariable(IteratorVariable):
    """An itertools iterator stepped item by item from another iterator, calling the user's
    function as CPython does (each item's predicate or key once, in order, only as far as the
    program pulls). Its state lives in the trace only: one live at a graph break is refused."""

    has_length_hint = False
    kind = ""

    def __init__(self, inner: IteratorVariable, fn: Variable | None) -> None:
        self.inner = inner  # the iterator it steps (`source` is a tracker's guard source)
        self.fn = fn
        self.index = 0
        self.failure = None

    def describe(self) -> str:
        return f"itertools.{self.kind} object"

    def python_type(self) -> type:
        return getattr(itertools, self.kind)

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        raise Unsupported(f"an {self.describe()} is live at a graph break (its state is the trace's)")


class TakewhileVariable(_SteppedIteratorVariable):
    kind = "takewhile"

    def next(self, frame: Frame) -> Variable | None:
        item = None if self.fn is None else self.inner.next(frame)
        if item is None or self.fn.call(frame, [item], {}).truth(frame):  # type: ignore[union-attr]
            return item
        self.fn = None  # the first item failing the predicate ends it
        return None


class DropwhileVariable(_SteppedIteratorVariable):
    kind = "dropwhile"

    def next(self, frame: Frame) -> Variable | None:
        item = self.inner.next(frame)
        while self.fn is not None and item is not None:
            if not self.fn.call(frame, [item], {}).truth(frame):
                self.fn = None  # the first item failing the predicate, and all after it
                break
            item = self.inner.next(frame)
        return item


def _equal(frame: Frame, a: Variable, b: Variable) -> bool:
    """`a == b` as CPython's groupby compares keys (the same object is equal without asking)."""
    return a is b or operators.binary(frame, operator.eq, a, b).truth(frame)


class GroupbyVariable(_SteppedIteratorVariable):
    """`itertools.groupby(iterable, key)`, CPython's state machine: `target` is the key of the
    current group, `key`/`value` the item read last and not yet handed out. Moving to the next
    group empties the group before it, as eager's groups share the one iterator."""

    kind = "groupby"

    def __init__(self, inner: IteratorVariable, fn: Variable | None) -> None:
        super().__init__(inner, fn)
        self.target: Variable | None = None
        self.key: Variable | None = None
        self.value: Variable | None = None
        self.group: GroupVariable | None = None

    def step(self, frame: Frame) -> bool:
        item = self.inner.next(frame)
        if item is None:
            return False
        self.value = item
        self.key = item if self.fn is None else self.fn.call(frame, [item], {})
        return True

    def next(self, frame: Frame) -> Variable | None:
        self.group = None
        while self.key is None or self.target is not None and _equal(frame, self.target, self.key):
            if not self.step(frame):
                return None
        self.target = self.key
        self.group = GroupVariable(self, self.target)
        return TupleVariable([self.key, self.group])


class GroupVariable(_SteppedIteratorVariable):
    """One group of a `GroupbyVariable`: its items while it is the current group."""

    kind = "_grouper"

    def __init__(self, parent: GroupbyVariable, target: Variable) -> None:
        super().__init__(parent.inner, None)
        self.parent = parent
        self.target = target

    def python_type(self) -> type:
        raise Unsupported("the class of an itertools.groupby group (private to itertools)")

    def next(self, frame: Frame) -> Variable | None:
        parent = self.parent
        if parent.group is not self or parent.value is None and not parent.step(frame):
            return None
        if not _equal(frame, self.target, parent.key):  # type: ignore[arg-type]
            return None
        item, parent.value = parent.value, None
        return item


def _user_function(arg: Variable | None) -> Variable | None:
    """A key or predicate argument; None for a missing one or None itself."""
    return None if arg is None or arg.is_constant() and arg.as_constant() is None else arg


@_handler(itertools.groupby)
def _groupby(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    key = _user_function(args[1] if len(args) > 1 else kwargs.get("key"))
    iterable = args[0] if args else kwargs["iterable"]
    return GroupbyVariable(iterate(frame, iterable), key)


@_handler(itertools.takewhile)
def _takewhile(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if kwargs or len(args) != 2:
        raise Unsupported("itertools.takewhile() takes a predicate and an iterable, positionally")
    return TakewhileVariable(iterate(frame, args[1]), args[0])


@_handler(itertools.dropwhile)
def _dropwhile(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if kwargs or len(args) != 2:
        raise Unsupported("itertools.dropwhile() takes a predicate and an iterable, positionally")
    return DropwhileVariable(iterate(frame, args[1]), args[0])


def _combinatoric(fn: Any) -> Handler:
    def handler(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        items = args[0].unpack(frame)
        rest = [a.as_constant() for a in args[1:]]
        picks = fn(range(len(items)), *rest, **{k: v.as_constant() for k, v in kwargs.items()})
        return _iterator([TupleVariable([items[i] for i in pick]) for pick in picks])

    return handler


for _fn in (itertools.combinations, itertools.permutations, itertools.combinations_with_replacement):
    _HANDLERS[_fn] = _combinatoric(_fn)


@_handler(itertools.pairwise)
def _pairwise(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    items = args[0].unpack(frame)
    return _iterator([TupleVariable([a, b]) for a, b in itertools.pairwise(items)])


@_handler(itertools.tee)
def _tee(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`tee(iterable, n)`: n iterators over the same items (read once, as the others in this table)."""
    if kwargs:
        raise Unsupported("itertools.tee() with keyword arguments (its parameters are positional)")
    n = args[1] if len(args) > 1 else constant(2)
    items = args[0].unpack(frame)
    return TupleVariable([_iterator(list(items)) for _ in range(n.as_constant())])


@_handler(itertools.starmap)
def _starmap(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return _iterator([args[0].call(frame, row.unpack(frame), {}) for row in args[1].unpack(frame)])


# -- functools, dataclasses, collections -------------------------------------------------------


@_handler(functools.partial)
def _partial(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if not args:
        raise Unsupported("functools.partial() without a function")
    return PartialVariable.make(args[0], args[1:], kwargs)


@_handler(functools.reduce)
def _reduce(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    fn, items = args[0], args[1].unpack(frame)
    if len(args) > 2:
        items = [args[2], *items]
    if not items:
        raise Unsupported("functools.reduce() of an empty sequence with no initial value")
    total = items[0]
    for item in items[1:]:
        total = fn.call(frame, [total, item], {})
    return total


@_handler(dataclasses.fields)
def _fields(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return dataclass_fields(frame, args[0])


@_handler(dataclasses.is_dataclass)
def _is_dataclass(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    obj = args[0]
    target = obj.as_constant() if obj.is_constant() else obj.python_type()
    return constant(dataclasses.is_dataclass(target))


@_handler(dataclasses.replace)
def _replace(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    obj = args[0]
    cls = obj.python_type()
    changes = dict(kwargs)
    for field in dataclasses.fields(cls):
        if field.init and field.name not in changes:
            changes[field.name] = obj.getattr(frame, field.name)
    return frame.instantiate(cls, [], changes)


class SignatureVariable(ConstantVariable):
    """The `inspect.Signature` of a function known while tracing. A signature never changes, so
    reading it is evaluated now; binding arguments to it is traced (`Signature.bind` is Python),
    giving a new `BoundArguments` per call whose `arguments` the program may change."""

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("bind", "bind_partial", "_bind"):
            return UserMethodVariable(getattr(inspect.Signature, name), self)
        return super().getattr(frame, name)


@_handler(inspect.signature)
def _signature(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`inspect.signature(f)` of a function known while tracing, with what it was read from
    guarded (the function's defaults, annotations, `__signature__` and `__wrapped__`)."""
    target = args[0]
    if isinstance(target, UserFunctionVariable):
        real: Any = target.fn
        fn, fn_source = target.fn, target.source
    elif isinstance(target, UserMethodVariable):
        real = types.MethodType(target.fn, object())  # only the binding of the first parameter matters
        fn, fn_source = target.fn, target.fn_source
    else:
        raise Unsupported(f"inspect.signature of {target.describe()}")
    plain = {k: v.as_constant() for k, v in kwargs.items()}
    base = fn_source or FixedObjectSource(fn, f"function {fn.__qualname__}")
    _guard_signature_inputs(frame, fn, base, plain.get("follow_wrapped", True))
    return SignatureVariable(inspect.signature(real, **plain))


def _guard_signature_inputs(frame: Frame, fn: Any, source: Source, follow_wrapped: bool) -> None:
    """Guard what `inspect.signature` reads of `fn` (at `source`): a `__signature__` it has or
    the absence of one, the function it wraps (`__wrapped__`), and a Python function's code,
    defaults and annotations: reassigning any of them recompiles."""
    guards = frame.output.guards
    for name in ("__signature__", *(("__wrapped__",) if follow_wrapped else ())):
        if not hasattr(fn, name):
            guards.attribute_absent(source, fn, name)
        elif name == "__signature__":
            guards.id_match(AttrSource(source, name), fn.__signature__)
            return
        else:
            guards.id_match(AttrSource(source, name), fn.__wrapped__)
            _guard_signature_inputs(frame, fn.__wrapped__, AttrSource(source, name), follow_wrapped)
            return
    if not isinstance(fn, types.FunctionType):
        return
    guards.code_match(source, fn)
    for name in ("__defaults__", "__kwdefaults__", "__annotations__"):
        values, where = getattr(fn, name), AttrSource(source, name)
        if values is None:
            guards.constant_match(where, None)
            continue
        if isinstance(values, dict):
            guards.dict_keys_match(where, values)
        else:
            guards.length_match(where, values)
        for key, value in values.items() if isinstance(values, dict) else enumerate(values):
            if is_literal(value):
                guards.constant_match(ItemSource(where, key), value)
            else:
                guards.id_match(ItemSource(where, key), value)


@_handler(warnings.warn)
def _warn(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    trace_warn(frame, args, kwargs)
    return constant(None)


_handler(collections.deque)(new_deque)
_handler(collections.defaultdict)(new_defaultdict)
_handler(collections.Counter)(new_counter)


@_handler(copy.deepcopy)
def _deepcopy(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    memo = kwargs.pop("memo", args[1] if len(args) == 2 else constant(None))
    if len(args) not in (1, 2) or kwargs or not (memo.is_constant() and memo.as_constant() is None):
        raise Unsupported("copy.deepcopy with a memo of the caller's")
    return deep_copy(frame, args[0])


@_handler(collections.OrderedDict)
def _ordered_dict(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    result = DictVariable({}, python_class=collections.OrderedDict)
    result.call_method(frame, "update", args, kwargs)
    return result


_handler(types.MappingProxyType)(MappingProxyVariable.of)


@_handler(collections.OrderedDict.fromkeys)  # bound class methods compare equal: any access finds it
def _ordered_dict_fromkeys(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if "value" in kwargs and len(args) == 1:  # OrderedDict's (unlike dict's) takes it by name too
        args, kwargs = [*args, kwargs["value"]], {k: v for k, v in kwargs.items() if k != "value"}
    return dict_from_keys(frame, args, kwargs, collections.OrderedDict)


@_handler(collections.defaultdict.fromkeys)
def _defaultdict_fromkeys(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`defaultdict.fromkeys(keys[, value])`: a defaultdict without a default factory."""
    return DefaultDictVariable(dict_from_keys(frame, args, kwargs, dict).items, constant(None))
