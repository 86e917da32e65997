"""Python operators (`+`, `<`, `not`, `in`, ...) on trackers.

An operator with a tensor operand becomes a graph node whose target is the `operator` function;
on constants it is evaluated now; on containers it builds a new container tracker.
"""

from __future__ import annotations

import collections
import operator
import types
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from . import function_modes, numpy_arrays
from .base import Variable
from .constants import IteratorVariable, constant
from .containers import DictVariable, SequenceVariable, SetVariable, TupleVariable
from .exceptions import raise_new, raise_python_error
from .identity import equality_is_identity, guard_identity, same_object, same_or_equal
from .numpy_arrays import NdarrayVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable
from .trace_rules import is_numpy_constant
from .user_classes import NewObjectVariable, ObjectVariable, dict_contents, python_dunder
from .weak_containers import WeakContainerVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# BINARY_OP's argument (3.11+) -> operator function; see dis._nb_ops
BINARY_OPS: list[Any] = [
    operator.add,
    operator.and_,
    operator.floordiv,
    operator.lshift,
    operator.matmul,
    operator.mul,
    operator.mod,
    operator.or_,
    operator.pow,
    operator.rshift,
    operator.sub,
    operator.truediv,
    operator.xor,
    operator.iadd,
    operator.iand,
    operator.ifloordiv,
    operator.ilshift,
    operator.imatmul,
    operator.imul,
    operator.imod,
    operator.ior,
    operator.ipow,
    operator.irshift,
    operator.isub,
    operator.itruediv,
    operator.ixor,
]
COMPARE_OPS = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}
_INPLACE_TO_PLAIN = {
    operator.iadd: operator.add,
    operator.imul: operator.mul,
    operator.isub: operator.sub,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
    operator.ipow: operator.pow,
    operator.imatmul: operator.matmul,
    operator.iand: operator.and_,
    operator.ior: operator.or_,
    operator.ixor: operator.xor,
    operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift,
}


def binary(frame: Frame, op: Any, a: Variable, b: Variable) -> Variable:
    """`op(a, b)` for any two trackers."""
    plain = _INPLACE_TO_PLAIN.get(op, op)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        routed = function_modes.dispatch(frame, op, [a, b], {})
        if routed is not None:
            return routed
    if isinstance(a, NdarrayVariable) or isinstance(b, NdarrayVariable):
        return numpy_arrays.binary(frame, op, plain, a, b)
    if isinstance(b, SymNodeVariable) and _numpy_scalar(a) or isinstance(a, SymNodeVariable) and _numpy_scalar(b):
        # NumPy's arithmetic, not the symbolic number's (`np.float32(2) * f` is a float32): the
        # number is specialised to its value and the result folded
        a, b = (constant(v.as_constant()) if isinstance(v, SymNodeVariable) else v for v in (a, b))
    if a.in_graph() or b.in_graph():
        # only a tensor changes in place; `i *= n` on a number is `i = i * n`
        graph_op = op if isinstance(a, TensorVariable) else plain
        return frame.output.call("call_function", graph_op, [a, b], {}, f"operator {graph_op.__name__}")
    if plain is operator.add or plain in _COMPARISONS:
        # a constant tuple concatenated with or compared to a tracked one (`(-1,) + x.shape[1:]`,
        # `x.size() != (2, 3)` with a symbolic size)
        a, b = _as_sequence(a, b), _as_sequence(b, a)
    if plain in _COMPARISONS and isinstance(a, SequenceVariable) and isinstance(b, SequenceVariable):
        compared = _compare_sequences(frame, plain, a, b)
        if compared is not None:
            return compared
    own = a.binary_op(frame, op, plain, b)  # sequences and sets
    if own is None and plain is operator.mul and a.is_constant() and isinstance(b, SequenceVariable):
        own = b.binary_op(frame, op, plain, a)  # `4 * [x]`: repetition is commutative
    if own is not None:
        return own
    user = _user_dunder(frame, op, a, b)
    if user is not None:
        return user
    for side, contents in ((0, a.set_contents()), (1, b.set_contents())):
        if contents is not None:  # a set subclass's object keeping set's operators: its members'
            result = binary(frame, op, contents, b) if side == 0 else binary(frame, op, a, contents)
            return a if side == 0 and result is contents else result  # `s |= t` keeps `s`
    names = _DUNDERS.get(plain)
    if names is not None:  # list/tuple subclasses keeping the base's operator: their items'
        contents = _sequence_contents(a, names[0]), _sequence_contents(b, names[1])
        if contents != (None, None):
            result = binary(frame, op, contents[0] or a, contents[1] or b)
            return a if result is contents[0] else result  # `l += m` keeps `l`
    if plain is operator.or_:  # dict subclasses keeping dict's `|`: a new plain dict, or `a` updated
        contents = _dict_contents(frame, a, "__or__"), _dict_contents(frame, b, "__ror__")
        if contents[0] is not None and contents[1] is not None and contents != (a, b):
            result = binary(frame, op, *contents)
            return a if result is contents[0] and contents[0] is not a else result
        if contents[0] is not None and b.is_constant():
            _raise_declined(frame, op, a.python_type(), b.as_constant())
    if a.is_constant() and b.is_constant():
        try:
            return constant(op(a.as_constant(), b.as_constant()))
        except Exception as e:
            raise_python_error(frame, e)
    if op in (operator.eq, operator.ne):
        contents = _dict_contents(frame, a, "__eq__"), _dict_contents(frame, b, "__eq__")
        if contents == (a, b):  # two dicts
            return _compare_dicts(frame, op, a, b)  # type: ignore[arg-type]
        if contents[0] is not None and contents[1] is not None:  # dict subclasses keeping dict's `==`
            return binary(frame, op, *contents)
        # identity-based equality of non-constant objects (modules, functions, user objects)
        same = same_object(a, b)
        # (an object whose `==` compares values may equal a distinct one: not decided here)
        if same is not None and (same or all(equality_is_identity(v) is not False for v in (a, b))):
            guard_identity(frame, a, b, same)
            return constant(same if op is operator.eq else not same)
    if plain in _ORDERING_SYMBOLS and _both_decline(a, b, plain, _PLAIN_CONSTANTS):
        symbol = _ORDERING_SYMBOLS[plain]
        names = (a.python_type().__name__, b.python_type().__name__)
        raise raise_new(
            frame, TypeError, f"'{symbol}' not supported between instances of '{names[0]}' and '{names[1]}'"
        )
    if plain in _ARITHMETIC_SYMBOLS and _both_decline(a, b, plain, _NUMBERS) and _in_place_declined(op, a):
        symbol = _ARITHMETIC_SYMBOLS[plain]
        if op is not plain:
            symbol = symbol.replace(" or pow()", "") + "="
        names = (a.python_type().__name__, b.python_type().__name__)
        raise raise_new(frame, TypeError, f"unsupported operand type(s) for {symbol}: '{names[0]}' and '{names[1]}'")
    raise Unsupported(f"operator {op.__name__} on {a.describe()} and {b.describe()}")


def _raise_declined(frame: Frame, op: Any, cls: type, other: Any) -> None:
    """`d | 1` for a dict (or an instance of a dict subclass keeping dict's `|`) and a constant:
    CPython's TypeError where dict's method and the constant's reflected one both decline, found
    on an empty instance of `cls` (made by dict's C `__new__`, running no Python code)."""
    try:
        op(dict.__new__(cls), other)
    except TypeError as e:
        raise_python_error(frame, e)


def _numpy_scalar(var: Variable) -> bool:
    """A NumPy scalar constant (asked only beside a symbolic number: reading a constant's value
    can guard it)."""
    return var.is_constant() and is_numpy_constant(var.as_constant())


def _dict_contents(frame: Frame, var: Variable, dunder: str) -> Variable | None:
    """The contents of a dict, or of an instance of a dict subclass that keeps dict's `dunder`."""
    if isinstance(var, DictVariable):
        return var
    if not isinstance(var, ObjectVariable) or var.protocol_class() is None:
        return None
    cls = var.python_type()
    if not issubclass(cls, dict) or getattr(cls, dunder) is not getattr(dict, dunder):
        return None
    if isinstance(var, NewObjectVariable):
        return var.items
    return dict_contents(frame, var) if var.source is not None else None


def _sequence_contents(var: Variable, dunder: str) -> SequenceVariable | None:
    """The items of a list or tuple subclass instance made in the frame whose class keeps the
    base's `dunder` (which acts on them, giving a plain list or tuple)."""
    if not isinstance(var, NewObjectVariable) or not isinstance(var.items, SequenceVariable):
        return None
    base = var.items.python_class
    return var.items if getattr(var.cls, dunder, None) is getattr(base, dunder, None) else None


_DUNDERS = {
    operator.add: ("__add__", "__radd__"),
    operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"),
    operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"),
    operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"),
    operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.and_: ("__and__", "__rand__"),
    operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"),
    operator.lshift: ("__lshift__", "__rlshift__"),
    operator.rshift: ("__rshift__", "__rrshift__"),
    operator.eq: ("__eq__", "__eq__"),
    operator.ne: ("__ne__", "__ne__"),
    operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"),
    operator.gt: ("__gt__", "__lt__"),
    operator.ge: ("__ge__", "__le__"),
}


_ORDERING_SYMBOLS = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">="}
# constants whose C comparisons answer NotImplemented for an object of another class
_PLAIN_CONSTANTS = (int, float, str, bytes, type(None))
# constants whose C arithmetic answers NotImplemented for an object of another class (strings and
# bytes are sequences: CPython words their errors apart)
_NUMBERS = (int, bool, float, type(None))
_ARITHMETIC_SYMBOLS = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.floordiv: "//",
    operator.mod: "%",
    operator.pow: "** or pow()",
    operator.matmul: "@",
    operator.and_: "&",
    operator.or_: "|",
    operator.xor: "^",
    operator.lshift: "<<",
    operator.rshift: ">>",
}


def _both_decline(a: Variable, b: Variable, op: Any, constants: tuple[type, ...]) -> bool:
    """Whether both sides of a binary operator decline it, so that CPython raises TypeError: a
    plain constant of `constants` (`1`, `"a"`) beside an object of a class that is not its kind,
    whose method for it is missing, object's, or one in Python that answered NotImplemented
    (`_user_dunder` ran it)."""
    for obj, other, name in ((a, b, _DUNDERS[op][0]), (b, a, _DUNDERS[op][1])):
        if obj.is_constant():
            kind = type(obj.as_constant())
            if kind not in constants or issubclass(other.python_type(), kind):
                return False
        elif not _declines(obj, name):
            return False
    return True


def _in_place_declined(op: Any, a: Variable) -> bool:
    """For `a op= b`: whether `a`'s in-place method is missing or in Python (and declined)."""
    plain = _INPLACE_TO_PLAIN.get(op, op)
    return op is plain or a.is_constant() or _declines(a, "__i" + _DUNDERS[plain][0][2:])


def _declines(obj: Variable, name: str) -> bool:
    method = getattr(obj.python_type(), name, None)
    return isinstance(method, types.FunctionType) or method is getattr(object, name, None)


def _user_dunder(frame: Frame, op: Any, a: Variable, b: Variable) -> Variable | None:
    """`a op b` through a dunder method written in Python on a user class (None if there is none)."""
    plain = _INPLACE_TO_PLAIN.get(op, op)
    names = _DUNDERS.get(plain)
    if names is None:
        return None
    if op is not plain:  # `a += b`: `a.__iadd__(b)` first (it may change `a`), then `a + b`
        fn = python_dunder(frame, a, "__i" + names[0][2:])
        if fn is not None:
            result = frame.inline_call(fn, [a, b], {}, closure=None)
            if not (result.is_constant() and result.as_constant() is NotImplemented):
                return result
    for obj, other, name in ((a, b, names[0]), (b, a, names[1])):
        fn = python_dunder(frame, obj, name)
        if fn is not None:
            result = frame.inline_call(fn, [obj, other], {}, closure=None)
            if not (result.is_constant() and result.as_constant() is NotImplemented):
                return result
        elif name == "__ne__" and (negated := _default_ne(frame, obj, other)) is not None:
            return negated
    return None


def _default_ne(frame: Frame, obj: Variable, other: Variable) -> Variable | None:
    """`object.__ne__`: the negated result of a Python `__eq__` (None where the class has its own
    `__ne__` in C, no Python `__eq__`, or the `__eq__` answered NotImplemented)."""
    cls = obj.protocol_class() if isinstance(obj, ObjectVariable) else None
    if cls is None or getattr(cls, "__ne__", None) is not object.__ne__:
        return None
    eq = python_dunder(frame, obj, "__eq__")
    if eq is None:
        return None
    result = frame.inline_call(eq, [obj, other], {}, closure=None)
    if result.is_constant() and result.as_constant() is NotImplemented:
        return None
    return constant(not result.truth(frame))


_COMPARISONS = frozenset(COMPARE_OPS.values())
# the sequences compared item by item here: lists with lists, tuples (a torch.Size is one) with tuples
_PLAIN_SEQUENCES = (list, tuple, torch.Size)


def _compare_sequences(frame: Frame, op: Any, a: SequenceVariable, b: SequenceVariable) -> Variable | None:
    """`a op b` as Python compares two lists or two tuples holding symbolic sizes or other
    trackers: equal lengths first for `==`/`!=`, then item by item, the first pair neither one
    object nor equal deciding (a symbolic size compared as the shape guards decide it). A list
    and a tuple are unequal. None for other sequences (deques, named tuples)."""
    if a.python_class not in _PLAIN_SEQUENCES or b.python_class not in _PLAIN_SEQUENCES:
        return None
    equality = op in (operator.eq, operator.ne)
    if (a.python_class is list) != (b.python_class is list):
        return constant(op is operator.ne) if equality else None
    if equality and len(a.items) != len(b.items):
        return constant(op is operator.ne)
    for x, y in zip(a.items, b.items):
        same = same_object(x, y)
        if same is not None:
            guard_identity(frame, x, y, same)
        if not same and not binary(frame, operator.eq, x, y).truth(frame):
            return constant(op is operator.ne) if equality else binary(frame, op, x, y)
    return constant(op(len(a.items), len(b.items)))


def _compare_dicts(frame: Frame, op: Any, a: DictVariable, b: DictVariable) -> Variable:
    """`a == b` / `a != b` of two dicts as CPython's: the same keys, then, in `a`'s order, each
    value `is` or `==` the other's (a user `__eq__` inlined, the first unequal pair ending the
    walk); two OrderedDicts must also list their keys in the same order."""
    equal = a.items.keys() == b.items.keys() and all(same_or_equal(frame, b.items[k], a.items[k]) for k in a.items)
    ordered = (issubclass(v.python_class, collections.OrderedDict) for v in (a, b))
    if equal and all(ordered):
        equal = list(a.items) == list(b.items)
    return constant(equal if op is operator.eq else not equal)


def _as_sequence(var: Variable, other: Variable) -> Variable:
    """A constant tuple as a TupleVariable when the other operand is a tracked sequence."""
    if isinstance(other, SequenceVariable) and var.is_constant() and type(var.as_constant()) is tuple:
        return TupleVariable([constant(v) for v in var.as_constant()])
    return var


def unary(frame: Frame, op: Any, a: Variable) -> Variable:
    own = a.unary_op(frame, op)  # tensors and symbolic numbers
    if own is not None:
        return own
    if op is operator.not_:
        return constant(not a.truth(frame))
    if a.is_constant():
        return constant(op(a.as_constant()))
    raise Unsupported(f"operator {op.__name__} on {a.describe()}")


def contains(frame: Frame, item: Variable, container: Variable) -> bool:
    """`item in container` decided at trace time."""
    if isinstance(container, TensorVariable) or isinstance(item, TensorVariable):
        function_modes.refuse_unrouted(frame, "`in` with a tensor")  # its `__eq__`, `__hash__`
    if (
        isinstance(container, TensorVariable)
        or isinstance(item, TensorVariable)
        and not isinstance(container, (DictVariable, SetVariable, WeakContainerVariable))
    ):
        # a dict or set finds a tensor by identity (its hash is its address: never `==`); a weak
        # container tells where weakref.py would compare it with `==`
        raise Unsupported("`in` with a tensor needs its values")
    answer = container.contains(frame, item)  # dicts and sets
    if answer is None:
        answer = _frozen_contains(frame, item, container)
    if answer is not None:
        return answer
    dunder = python_dunder(frame, container, "__contains__")
    if dunder is not None:
        return frame.inline_call(dunder, [container, item], {}, closure=None).truth(frame)
    if container.is_constant() and item.is_constant():
        return item.as_constant() in container.as_constant()
    if isinstance(container, IteratorVariable):
        # an iterator is consumed only up to the item found, as eagerly
        while (candidate := container.next(frame)) is not None:
            if _same_item(frame, container, item, candidate):
                return True
        return False
    return any(_same_item(frame, container, item, candidate) for candidate in container.unpack(frame))


def _frozen_contains(frame: Frame, item: Variable, container: Variable) -> bool | None:
    """`item in fs` for a frozenset read from the frame that holds objects other than constants
    (`{torch.add, torch.mul}`): it cannot change, so with its identity guarded the answer
    follows from the item's identity (or value, for a constant). None where it does not apply:
    an item compared by an `__eq__` of its own."""
    frozen = container.value_object
    if type(frozen) is not frozenset or container.source is None:
        return None
    if item.is_constant():
        probe = item.as_constant()
    else:
        probe = item.value_object
        if probe is None or not _compared_by_identity(probe):
            return None
    frame.output.guards.id_match(container.source, frozen)
    return probe in frozen


def _compared_by_identity(obj: Any) -> bool:
    """Whether `==` and `hash` of `obj` follow its identity: object's own (functions, modules and
    plain classes have them), or a builtin function's (its function and `__self__`)."""
    cls = type(obj)
    return isinstance(obj, types.BuiltinFunctionType) or (
        cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__
    )


def _same_item(frame: Frame, container: Variable, item: Variable, candidate: Variable) -> bool:
    """`item is candidate or item == candidate`, as `in` decides it, known while tracing."""
    pair = (item, candidate)
    if any(isinstance(v, SymNodeVariable) for v in pair) and all(
        isinstance(v, SymNodeVariable) or v.is_constant() and type(v.as_constant()) in (int, float, bool) for v in pair
    ):
        # a symbolic size among numbers (`x.size(-1) in (4, 5, 6)`): decided, and guarded, as `==`
        return binary(frame, operator.eq, item, candidate).truth(frame)
    try:
        return same_or_equal(frame, item, candidate)
    except Unsupported:
        raise Unsupported(f"`in` over {container.describe()} with {item.describe()}") from None
