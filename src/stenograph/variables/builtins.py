"""Python builtins (`len`, `isinstance`, `range`, `zip`, ...) applied to trackers.

Each builtin that tracing understands has a handler here. Pure builtins on constants are simply
evaluated; builtins with effects outside the program (`print`, `input`, `open`) are refused with
their name so the user sees exactly what stopped capture.
"""

from __future__ import annotations

import abc
import builtins
import operator
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..errors import BreakKind, Unsupported
from ..guards.sources import AttrSource
from ..shapes.fake import is_symbolic
from . import function_modes, operators, tensor_scalars
from .base import Variable
from .class_statements import build_class
from .constants import ConstantVariable, GuardedOnUseConstant, IteratorVariable, TraceId, TraceIdVariable, constant
from .containers import (
    DictVariable,
    LazyIteratorVariable,
    ListVariable,
    ReversedListIteratorVariable,
    SequenceVariable,
    SetVariable,
    TupleVariable,
    dict_from_keys,
    iterate,
    sort_items,
    update_items,
)
from .exceptions import TracedException, is_attribute_error, raise_new, raise_python_error
from .functions import (
    HandledFunctionVariable,
    NestedFunctionVariable,
    TorchOpVariable,
    UserFunctionVariable,
    UserMethodVariable,
    handler_registry,
)
from .numpy_arrays import NdarrayVariable
from .symbolic import SymNodeVariable, is_number
from .tensor import TensorVariable
from .trace_rules import BUILTIN_PURE, BUILTIN_REFUSED
from .user_classes import (
    NewObjectVariable,
    SuperVariable,
    UnboundBaseMethodVariable,
    UserClassVariable,
    class_variable,
    python_dunder,
    zero_arg_super,
)

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

Handler = Callable[["Frame", Any, list[Variable], dict[str, Variable]], Variable]
_HANDLERS: dict[Any, Handler] = {}

_handler = handler_registry(_HANDLERS)

# the keyword arguments each handled builtin accepts; any other keyword is refused by name (a
# handler must never drop one silently, e.g. `zip(strict=True)`)
_KEYWORDS: dict[Any, frozenset[str]] = {
    enumerate: frozenset({"start"}),
    zip: frozenset({"strict"}),
    sum: frozenset({"start"}),
    min: frozenset({"key", "default"}),
    max: frozenset({"key", "default"}),
    sorted: frozenset({"key", "reverse"}),
    int: frozenset({"base"}),
    str: frozenset({"object", "encoding", "errors"}),
}
# (fewest, most) positional arguments the handled builtins model
_ARITY: dict[Any, tuple[int, int]] = {
    iter: (1, 1),
    next: (1, 2),
    reversed: (1, 1),
    len: (1, 1),
    isinstance: (2, 2),
    getattr: (2, 3),
    hasattr: (2, 2),
    vars: (0, 1),
    setattr: (3, 3),
    delattr: (2, 2),
    tuple: (0, 1),
    list: (0, 1),
    set: (0, 1),
    frozenset: (0, 1),
    enumerate: (1, 2),
    sum: (1, 2),
    map: (2, 1 << 30),
    filter: (2, 2),
    sorted: (1, 1),
    abs: (1, 1),
    all: (1, 1),
    any: (1, 1),
    callable: (1, 1),
    id: (1, 1),
    dict: (0, 1),
}


# builtins that call no tensor dunder, or whose reads of a tensor go through the tracker's own
# methods, which show them to a TorchFunctionMode's handler or refuse (`function_modes`)
_SEEN_AS_ROUTED = frozenset({
    isinstance, issubclass, type, id, callable, getattr, hasattr, setattr, delattr, len, iter, next,
    print, super, list, tuple, enumerate, zip, map, filter, reversed, dict, set, frozenset,
})  # fmt: skip


class BuiltinVariable(HandledFunctionVariable):
    def describe(self) -> str:
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"

    def is_constant(self) -> bool:
        return isinstance(self.fn, type)

    def as_constant(self) -> Any:
        if isinstance(self.fn, type):
            return self.fn
        return super().as_constant()

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.fn is vars and len(args) == 1 and not kwargs and args[0].python_type() is types.ModuleType:
            # `vars(module)` is the module's globals dict, read lazily as `module.__dict__` is;
            # only `vars()` with no argument sees the frame's (generated) variables
            return args[0].getattr(frame, "__dict__")
        if self.fn in BUILTIN_REFUSED:
            raise Unsupported(
                BUILTIN_REFUSED[self.fn],
                hint="remove it from the compiled function or move it outside; graph breaks will run it eagerly",
                kind=BreakKind.UNTRACED_CALL,
            )
        if self.fn not in _SEEN_AS_ROUTED and any(isinstance(a, TensorVariable) for a in [*args, *kwargs.values()]):
            # eager's builtin calls the tensor's dunders (`abs` its `__abs__`, `max` its `__gt__`
            # and `__bool__`), each shown to a TorchFunctionMode's handler
            function_modes.refuse_unrouted(frame, f"{self.describe()} of a tensor")
        handler = _HANDLERS.get(self.fn)
        if handler is not None:
            _check_signature(self.fn, args, kwargs)
            return handler(frame, self.fn, args, kwargs)
        if self.fn in BUILTIN_PURE and all(a.is_constant() for a in [*args, *kwargs.values()]):
            return _fold(frame, self.fn, args, kwargs)
        raise Unsupported(
            f"builtin {getattr(self.fn, '__name__', self.fn)} with {', '.join(a.describe() for a in args)}"
        )

    def getattr(self, frame: Frame, name: str) -> Variable:
        if self.fn in (object, dict) and name in _BASE_METHODS or self.fn in (list, tuple) and name == "__new__":
            return UnboundBaseMethodVariable(self.fn, name)
        if isinstance(self.fn, type) and hasattr(self.fn, name):
            attr = getattr(self.fn, name)
            if callable(attr) and name == "fromkeys":
                return BuiltinVariable(attr)
            return constant(attr)
        return super().getattr(frame, name)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        if isinstance(self.fn, type) and hasattr(self.fn, "__class_getitem__") and key.is_constant():
            return constant(self.fn[key.as_constant()])  # `list[Tensor]`, as in `typing.cast(list[Tensor], x)`
        return super().getitem(frame, key)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "builtin")


def _check_signature(fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> None:
    """Refuse a call whose arguments the handler does not model (eager raises or handles them)."""
    name = getattr(fn, "__name__", fn)
    if fn is not dict:
        unknown = set(kwargs) - _KEYWORDS.get(fn, frozenset())
        if unknown:
            raise Unsupported(f"{name}() with keyword argument(s) {', '.join(sorted(unknown))}")
    fewest, most = _ARITY.get(fn, (0, 1 << 30))
    if not fewest <= len(args) <= most:
        raise Unsupported(f"{name}() with {len(args)} positional argument(s)")


def _fold(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    try:
        result = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as e:
        raise_python_error(frame, e)
    if isinstance(result, (map, filter, zip, enumerate, reversed)) or type(result).__name__.endswith("iterator"):
        result = list(result)
        return IteratorVariable([constant(r) for r in result])
    return constant(result)


_BASE_METHODS = {"__setattr__", "__getattribute__", "__delattr__", "__init__", "__setitem__", "__getitem__", "__new__"}


@_handler(super)
def _super(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if not args:
        return zero_arg_super(frame)
    if len(args) == 2:
        return SuperVariable(args[0].as_constant(), args[1])
    raise Unsupported("super() with one argument")


@_handler(setattr)
def _setattr(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    args[0].setattr(frame, args[1].as_constant(), args[2])
    return constant(None)


@_handler(delattr)
def _delattr(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    args[0].delattr(frame, args[1].as_constant())
    return constant(None)


@_handler(set, frozenset)
def _set(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return SetVariable.of(frame, args[0], fn) if args else SetVariable({}, fn)


@_handler(str, repr)
def _str(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if len(args) == 1 and not kwargs and not args[0].is_constant():
        obj = args[0]
        dunder = python_dunder(frame, obj, "__str__" if fn is str else "__repr__")
        if dunder is None and fn is str and getattr(obj.python_type(), "__str__", None) is object.__str__:
            dunder = python_dunder(frame, obj, "__repr__")  # object's __str__ is the repr
        if dunder is not None:
            return frame.inline_call(dunder, [obj], {}, closure=None)
        contents = obj.set_contents()
        if contents is not None and contents.is_constant() and obj.python_type().__repr__ in _SET_REPRS:
            return constant(_set_subclass_text(obj.python_type(), contents.as_constant()))
        if isinstance(obj, NewObjectVariable) and issubclass(obj.cls, BaseException):
            return obj.getattr(frame, "__str__" if fn is str else "__repr__").call(frame, [], {})
        real = obj.value_object
        if isinstance(real, BaseException) and obj.source is not None:
            return _exception_text(frame, fn, obj, real)
        if type(real) is types.FunctionType and obj.source is not None:
            # `<function f at 0x...>`: its qualified name and id, both guarded
            frame.output.guards.id_match(obj.source, real)
            frame.wrap(real.__qualname__, AttrSource(obj.source, "__qualname__")).as_constant()
            return constant(fn(real))
    if all(a.is_constant() for a in [*args, *kwargs.values()]):
        return _fold(frame, fn, args, kwargs)
    raise Unsupported(f"{fn.__name__}() of {', '.join(a.describe() for a in args)}")


_SET_REPRS = (set.__repr__, frozenset.__repr__)


def _set_subclass_text(cls: type, members: Any) -> str:
    """CPython's repr of an instance of a set or frozenset subclass: `Name({'a', 'b'})` (its
    members in their order), `Name()` when empty."""
    if not members:
        return f"{cls.__name__}()"
    return f"{cls.__name__}({{{repr(list(members))[1:-1]}}})"


# C implementations whose text depends on the exception's type and args alone
_ARGS_ONLY_TEXT = {BaseException.__str__, BaseException.__repr__, KeyError.__str__}


def _exception_text(frame: Frame, fn: Any, obj: Variable, real: BaseException) -> Variable:
    """str()/repr() of a real exception from the frame (one an eager part raised): computed now,
    with its type and args guarded, when its class's text is the builtin one."""
    if getattr(obj.python_type(), "__str__" if fn is str else "__repr__") not in _ARGS_ONLY_TEXT:
        raise Unsupported(f"{fn.__name__}() of {obj.describe()}, whose class computes its own text")
    obj.getattr(frame, "args").as_constant()  # guards each argument's value
    return constant(fn(real))


@_handler(builtins.__build_class__)
def _build_class(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    try:
        return build_class(frame, args, kwargs)
    except Unsupported as e:
        # the class, built at the break, is a new object each call: a resume function taking it
        # would fail its guard on every call, so the rest of the frame runs as plain Python. In
        # an inlined call the break is at the call instead, which is compiled as a frame of its
        # own, where this applies again
        e.rest_eager = frame.parent is None
        raise


@_handler(len)
def _len(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if args[0].is_constant() and not isinstance(args[0], (SequenceVariable, SetVariable)):
        return _fold(frame, len, args, {})  # a set's length needs no order of its members
    return constant(args[0].length(frame))


@_handler(isinstance)
def _isinstance(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    obj, classes = args
    return constant(_instance_of(frame, obj, _classes(classes)))


def _classes(var: Variable) -> Any:
    """The class (or tuple of them) `isinstance`'s second argument holds: a constant, or a class
    whose calls a handler models (`collections.OrderedDict`, `deque`, `Counter`)."""
    if isinstance(var, HandledFunctionVariable) and isinstance(var.fn, type):
        return var.fn
    if isinstance(var, TupleVariable) and not var.is_constant():
        return tuple(_classes(item) for item in var.items)
    return var.as_constant()


def _custom_instance_check(cls: Any) -> Any:
    """The `__instancecheck__` of `cls`'s metaclass when it is not `type`'s or an ABC's (whose
    answers follow the classes registered), else None."""
    check = getattr(type(cls), "__instancecheck__", None)
    if check is None or check is type.__instancecheck__ or isinstance(cls, abc.ABCMeta):
        return None
    return check


def _instance_of(frame: Frame, obj: Variable, cls: Any) -> bool:
    """`isinstance(obj, cls)` as CPython decides it: each class of a tuple in turn; the exact type
    first, then the metaclass's `__instancecheck__` (inlined when written in Python), else the
    tracked type's subclass test (a FakeTensor's type is the real tensor's)."""
    if isinstance(cls, tuple):
        return any(_instance_of(frame, obj, c) for c in cls)
    if obj.python_type() is cls:
        return True
    if not isinstance(cls, type):
        return _instance_of(frame, obj, _class_of_alias(frame, cls))
    check = _custom_instance_check(cls)
    if check is None:
        return issubclass(obj.python_type(), cls)
    if not isinstance(check, types.FunctionType):
        raise Unsupported(f"isinstance() with {cls!r}, whose metaclass defines __instancecheck__ in C")
    return frame.inline_call(check, [class_variable(cls), obj], {}, closure=None).truth(frame)


def _class_of_alias(frame: Frame, alias: Any) -> Any:
    """The class (or tuple of classes) an `isinstance` test against a typing alias tests:
    `typing.Mapping` is `collections.abc.Mapping`'s, `int | None` and `Optional[int]` their
    members'. Where eager raises (`typing.Any`, `list[int]`), so does the program."""
    origin = getattr(alias, "__origin__", None)
    if isinstance(alias, _TYPING_SPECIAL_ALIASES) and isinstance(origin, type):
        return origin
    if isinstance(alias, (types.UnionType, _TYPING_UNION)) or origin is typing.Union:
        members = typing.get_args(alias)
        if all(isinstance(m, type) for m in members):
            return members
    if type(alias).__module__ in ("typing", "types"):
        try:
            isinstance(None, alias)
        except TypeError as e:
            raise_python_error(frame, e)
    raise Unsupported(f"isinstance() with {alias!r}, which is not a class")


_TYPING_SPECIAL_ALIASES = getattr(typing, "_SpecialGenericAlias", ())
_TYPING_UNION = getattr(typing, "_UnionGenericAlias", types.UnionType)


@_handler(type)
def _type(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if len(args) != 1:
        raise Unsupported("type() with three arguments creates a class")
    return class_variable(args[0].python_type())


@_handler(id)
def _id(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """The real id of an object read from the frame, guarded to stay that object (`copy.deepcopy`
    keys its memo by `id()`); a trace-local number for one made while tracing."""
    (obj,) = args
    target = obj.value if isinstance(obj, UserClassVariable) else obj.value_object
    if obj.source is not None and (target is None or isinstance(obj, TensorVariable)):
        # an input tensor, or a list/dict/set read from the frame (guarded to stay that object)
        target = frame.output.real_object(obj)
    if obj.source is not None and target is not None:
        frame.output.guards.id_match(obj.source, target)
        return constant(id(target))
    if obj.made_while_tracing():
        return TraceIdVariable(TraceId(id(obj)))
    raise Unsupported(f"id() of {obj.describe()}", kind=BreakKind.UNTRACED_CALL)


@_handler(callable)
def _callable(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    known = (UserFunctionVariable, NestedFunctionVariable, UserMethodVariable, TorchOpVariable, BuiltinVariable)
    if isinstance(args[0], known):
        return constant(True)
    if args[0].is_constant():
        return constant(callable(args[0].as_constant()))
    if args[0].source is not None:
        args[0].python_type()  # installs the type guard the answer depends on
    return constant(callable(args[0].value_object))


@_handler(getattr)
def _getattr(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    obj, name = args[0], args[1].as_constant()
    if len(args) == 3:
        try:
            return _found(obj.getattr(frame, name))
        except (Unsupported, TracedException) as e:
            if is_attribute_error(e):
                return args[2]
            raise
    return obj.getattr(frame, name)


def _found(attr: Variable) -> Variable:
    """An attribute whose presence decides the answer (`hasattr`, `getattr` with a default): a
    value read from the frame is guarded now, not once used; unguarded, a later call without
    the attribute would reuse the answer (F24)."""
    if isinstance(attr, GuardedOnUseConstant):
        attr.value  # noqa: B018 - installs the value's guard
    return attr


@_handler(hasattr)
def _hasattr(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    obj, name = args[0], args[1].as_constant()
    try:
        _found(obj.getattr(frame, name))
    except (Unsupported, TracedException) as e:
        if is_attribute_error(e):
            return constant(False)
        raise
    return constant(True)


@_handler(vars)
def _vars(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`vars(obj)` is `obj.__dict__` (Python looks it up as an attribute); `vars()` reads the
    frame's locals, which the trace does not model."""
    if not args:
        raise Unsupported("call to vars() (the frame's locals)", kind=BreakKind.UNTRACED_CALL)
    try:
        return args[0].getattr(frame, "__dict__")
    except (Unsupported, TracedException) as e:
        if is_attribute_error(e):
            raise raise_new(frame, TypeError, "vars() argument must have __dict__ attribute") from None
        raise


@_handler(tuple, list)
def _sequence(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    items = args[0].unpack(frame) if args else []
    return TupleVariable(items) if fn is tuple else ListVariable(items)


@_handler(dict.fromkeys)
def _dict_fromkeys(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`dict.fromkeys(keys[, value])` (bound methods compare equal: any `dict.fromkeys` finds
    this handler); every key shares the one value, as in Python."""
    return dict_from_keys(frame, args, kwargs, dict)


@_handler(dict)
def _dict(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    items: dict[Any, Variable] = {}
    if args:
        items.update(update_items(frame, args[0]))
    items.update(kwargs)
    return DictVariable(items)


@_handler(range)
def _range(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return _fold(frame, range, args, {})


@_handler(enumerate)
def _enumerate(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    start = args[1] if len(args) > 1 else kwargs.get("start", constant(0))
    if not isinstance(start.as_constant(), int) or isinstance(start.as_constant(), bool):
        raise Unsupported(f"enumerate() with start={start.describe()}")
    return LazyIteratorVariable("enumerate", [iterate(frame, args[0])], count=start.as_constant())


@_handler(zip)
def _zip(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    strict = kwargs.get("strict", constant(False)).truth(frame)
    return LazyIteratorVariable("zip", [iterate(frame, a) for a in args], strict=strict)


@_handler(reversed)
def _reversed(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if isinstance(args[0], ListVariable):
        return ReversedListIteratorVariable(args[0])
    return IteratorVariable(list(reversed(args[0].unpack(frame))))


@_handler(iter)
def _iter(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return iterate(frame, args[0])


@_handler(next)
def _next(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    it = args[0]
    if not isinstance(it, IteratorVariable):
        raise Unsupported(f"next() on {it.describe()}")
    item = it.next(frame)
    if item is None:
        if len(args) > 1:
            return args[1]
        raise it.stop(frame)
    return item


@_handler(map)
def _map(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return LazyIteratorVariable("map", [iterate(frame, a) for a in args[1:]], args[0])


@_handler(filter)
def _filter(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    predicate = args[0]
    if predicate.is_constant() and predicate.as_constant() is None:
        return LazyIteratorVariable("filter", [iterate(frame, args[1])])
    return LazyIteratorVariable("filter", [iterate(frame, args[1])], predicate)


@_handler(sum)
def _sum(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    items = args[0].unpack(frame)
    total = args[1] if len(args) > 1 else kwargs.get("start", constant(0))
    if all(i.is_constant() for i in [*items, total]):
        # CPython's own sum (3.12 adds floats with compensated summation)
        return _fold(frame, sum, [ListVariable(items), total], {})
    for item in items:
        total = operators.binary(frame, operator.add, total, item)
    return total


@_handler(min, max)
def _minmax(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if len(args) > 1 and "default" in kwargs:
        raise Unsupported(f"{fn.__name__}() with several arguments and default=")
    items = args[0].unpack(frame) if len(args) == 1 else list(args)
    key_fn = kwargs.get("key")
    if key_fn is not None and key_fn.is_constant() and key_fn.as_constant() is None:
        key_fn = None
    if not items:
        if "default" in kwargs:
            return kwargs["default"]
        try:
            fn([])
        except ValueError as e:
            raise_python_error(frame, e)
    keys = [key_fn.call(frame, [i], {}) if key_fn is not None else i for i in items]
    if all(k.is_constant() for k in keys):
        values = [k.as_constant() for k in keys]
        try:
            # the index of the first extreme item, compared exactly as CPython compares them
            best = fn(range(len(values)), key=values.__getitem__)
        except Exception as e:
            raise_python_error(frame, e)
        return items[best]
    if key_fn is None and (all(is_number(i, int) for i in items) or all(is_number(i, float) for i in items)):
        # symbolic sizes (an image's height beside a fixed limit): the node runs the builtin
        # pairwise, which keeps the first extreme as min()/max() do, and no guard decides which
        reduce = torch.sym_max if fn is max else torch.sym_min
        best = items[0]
        for item in items[1:]:
            best = frame.output.call("call_function", reduce, [best, item], {}, f"{fn.__name__}()")
        return best
    if key_fn is None and all(isinstance(i, TensorVariable) for i in items):
        return _tensor_extreme(frame, fn, items)
    if len(items) == 2 and key_fn is None and any(isinstance(i, TensorVariable) for i in items):
        raise Unsupported(
            f"{fn.__name__}() of tensors compares their values",
            hint=f"use torch.{'minimum' if fn is min else 'maximum'}",
        )
    if not any(isinstance(k, TensorVariable) for k in keys):
        # objects ordered by their own `__lt__`/`__gt__` (the match records of a dispatch
        # table): compared as CPython compares them, each item against the best so far, every
        # answer known while tracing (or guarded, for symbolic sizes)
        compare = operator.lt if fn is min else operator.gt
        best = 0
        for index in range(1, len(items)):
            if operators.binary(frame, compare, keys[index], keys[best]).truth(frame):
                best = index
        return items[best]
    raise Unsupported(f"{fn.__name__}() over {', '.join(i.describe() for i in items)}")


def _tensor_extreme(frame: Frame, fn: Any, items: list[Variable]) -> Variable:
    """max()/min() of tensors, compared pairwise with `>`/`<` whose truth picks one: the pick is
    `torch.where` of the comparison, which keeps the earlier item on ties and NaN as eager does and
    sends gradients only to the item picked. Tensors of more than one element make the truth
    ambiguous: eager's RuntimeError is raised in the program. Items of different shapes or
    dtypes (whose pick `torch.where` would broadcast or promote) are a graph break."""
    compare = operator.gt if fn is max else operator.lt
    best = items[0]
    for item in items[1:]:
        a, b = best.fake, item.fake  # type: ignore[attr-defined]
        if is_symbolic(a.numel()) or is_symbolic(b.numel()) or a.shape != b.shape:
            raise Unsupported(f"{fn.__name__}() of {best.describe()} and {item.describe()}")
        if a.numel() != 1:
            try:
                bool(torch.zeros(2))  # the running torch's error, message included
            except RuntimeError as e:
                raise_python_error(frame, e)
        if a.dtype != b.dtype or a.device != b.device:
            raise Unsupported(f"{fn.__name__}() of {best.describe()} and {item.describe()}")
        picked = frame.output.call("call_function", compare, [item, best], {}, f"{fn.__name__}()")
        best = frame.output.call("call_function", torch.where, [picked, item, best], {}, f"{fn.__name__}()")
    return best


@_handler(round)
def _round(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    ndigits = args[1] if len(args) > 1 else kwargs.get("ndigits", constant(None))
    if isinstance(args[0], SymNodeVariable) and ndigits.is_constant() and ndigits.as_constant() is None:
        # half a symbolic size rounded (`x[: round(n / 2)]`): recorded, the symbolic float's own
        # __round__ gives the symbolic int, no guard on the value
        return frame.output.call("call_function", round, [args[0]], {}, "round()")
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported(f"round() of {', '.join(a.describe() for a in args)}")
    return _fold(frame, round, args, kwargs)


@_handler(abs)
def _abs(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if isinstance(args[0], TensorVariable):
        return frame.output.call("call_function", torch.abs, args, {}, "abs()")
    if isinstance(args[0], NdarrayVariable):
        return operators.unary(frame, operator.abs, args[0])
    return _fold(frame, abs, args, {})


@_handler(bool, int, float)
def _number(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    if len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
        return tensor_scalars.number(frame, args[0], fn)
    if args and isinstance(args[0], TensorVariable):
        raise Unsupported(f"{fn.__name__}(tensor) reads the tensor's value", hint="keep the value as a tensor")
    if fn is bool and len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable):
        # a symbolic number's truth stays symbolic (`!= 0`): no guard, no decision on its value
        if args[0].python_type() is bool:
            return args[0]
        return frame.output.call("call_function", operator.ne, [args[0], constant(0)], {}, "bool()")
    if fn is bool and args:
        return constant(args[0].truth(frame))
    if fn in (int, float) and len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable):
        # a symbolic number stays symbolic (int() truncates): no guard on its value
        kind = args[0].python_type()
        if kind is fn:
            return args[0]
        if kind in (int, float):
            convert = torch.sym_int if fn is int else torch.sym_float
            return frame.output.call("call_function", convert, args, {}, f"{fn.__name__}()")
    return _fold(frame, fn, args, kwargs)


@_handler(all, any)
def _allany(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    stop_on = fn is any  # any() stops at the first true item, all() at the first false one
    iterator = iterate(frame, args[0])
    while (item := iterator.next(frame)) is not None:
        if item.truth(frame) == stop_on:
            return constant(stop_on)
    return constant(not stop_on)


@_handler(sorted)
def _sorted(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    return ListVariable(sort_items(frame, args[0].unpack(frame), kwargs))


def lookup(fn: Any) -> BuiltinVariable | None:
    """A tracker for a builtin function or type, if tracing knows it."""
    if fn in _HANDLERS or fn in BUILTIN_PURE or fn in BUILTIN_REFUSED:
        return BuiltinVariable(fn)
    return None


__all__ = ["BuiltinVariable", "ConstantVariable", "SequenceVariable", "lookup"]
