"""Identity of trackers: whether two stand for one object (`is`), decided while tracing and guarded
so that later calls decide it alike.

A tracker stands for a fixed object (`value_object`), a constant, a value the graph computes (a
tensor is the object its node computes) or an object made while tracing (its tracker is its
identity). `same_object` answers from these; `guard_identity` installs the guards an answer
relies on.
"""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import Unsupported
from .base import Variable
from .constants import ConstantVariable
from .symbolic import GraphValueVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


def is_same(frame: Frame, a: Variable, b: Variable) -> bool:
    """`a is b` decided at trace time, and guarded so that later calls decide it alike."""
    same = same_object(a, b)
    if same is None:
        raise Unsupported(f"`is` between {a.describe()} and {b.describe()}")
    guard_identity(frame, a, b, same)
    return same


def guard_identity(frame: Frame, a: Variable, b: Variable, same: bool) -> None:
    """Guard the answer of `a is b` on the operands that come from the frame: two sources are
    checked against each other, one source against the other operand's object (a sentinel
    default, None). Objects created while tracing are new on every call and need nothing."""
    if a is b or _made_while_tracing(a) or _made_while_tracing(b):
        return
    guards = frame.output.guards
    if a.source is not None and b.source is not None:
        if same:
            guards.same_object(a.source, b.source)
        else:
            guards.distinct_objects(a.source, b.source)
        return
    for var, other in ((a, b), (b, a)):
        if var.source is None or _graph_tensor(var) and other.is_constant():
            continue  # a tensor input's guard already fixes its type
        if other.is_constant():
            target = other.as_constant()
        else:
            target = _identity(other)
            if target is None:
                continue  # a value computed in the graph: never an outside object
        if same:
            guards.id_match(var.source, target)
        else:
            guards.not_identical(var.source, target)


def same_or_equal(frame: Frame, a: Variable, b: Variable) -> bool:
    """`b is a or b == a` as `list.index`, `list.remove` and `in` decide it for the value `a`
    and an element `b`, for trackers known while tracing. Two distinct objects are unequal
    without asking where `==` falls back to identity on both sides (a constant's own `==`
    declines a foreign object); otherwise the element's `==` is asked, as CPython asks it (a
    user `__eq__` inlined; one the trace cannot decide, such as tensors', breaks the graph)."""
    same = same_object(a, b)
    if same is not None:
        guard_identity(frame, a, b, same)
    if same:
        return True
    if a.is_constant() and b.is_constant():
        return bool(a.as_constant() == b.as_constant())
    if same is not None and all(v.is_constant() or equality_is_identity(v) is True for v in (a, b)):
        return False
    return frame.wrap(operator.eq, None).call(frame, [b, a], {}).truth(frame)  # `operator`'s handler


# C types whose `==` is identity in effect (a function and the object it is bound to, a class)
_IDENTITY_EQUALITY = (types.BuiltinFunctionType, types.MethodType, types.FunctionType, type)


def equality_is_identity(var: Variable) -> bool | None:
    """Whether `==` of the object `var` stands for is `is` (its class keeps object's `__eq__`, or
    is one of `_IDENTITY_EQUALITY`); None where its type is not known while tracing."""
    try:
        cls = var.python_type()
    except Unsupported:
        return None
    return cls.__eq__ is object.__eq__ or issubclass(cls, _IDENTITY_EQUALITY)


def same_object(a: Variable, b: Variable) -> bool | None:
    """Whether `a` and `b` stand for one object, None when tracing cannot tell."""
    if a is b:
        return True
    if _made_while_tracing(a) or _made_while_tracing(b):
        return False
    if a.is_constant() and b.is_constant():
        return a.as_constant() is b.as_constant()
    ia, ib = _identity(a), _identity(b)
    if ia is not None and ib is not None:
        return ia is ib
    # one object reached twice, once wrapped as a constant (a default value) and once as an
    # object (through a source): identity of the real objects
    if ia is not None and isinstance(b, ConstantVariable):
        return b.value is ia
    if ib is not None and isinstance(a, ConstantVariable):
        return a.value is ib
    if (ia is not None or a.is_constant()) and _graph_tensor(b):
        return False
    if (ib is not None or b.is_constant()) and _graph_tensor(a):
        return False
    if _graph_tensor(a) and _graph_tensor(b):
        return a.node is b.node
    if a.is_constant() != b.is_constant() and (ia is not None or ib is not None):
        return False
    for var, other in ((a, b), (b, a)):
        # a tracked container or number against None/True/False: a value of another type is
        # never that singleton (`self.__dict__.get(name) is None` on a tuple of tensors)
        if other.is_constant() and any(other.as_constant() is s for s in _SINGLETONS) and not var.is_constant():
            if var.python_type() is not type(other.as_constant()):
                return False
    # tuples of different lengths (a tuple's length is fixed and guarded): `b = a; a += (x,)`
    lengths = _tuple_length(a), _tuple_length(b)
    if None not in lengths and lengths[0] != lengths[1]:
        return False
    # a list, dict or set against an object of another class (their classes are guarded):
    # a dataclass's `field is _HAS_DEFAULT_FACTORY` on a list of tensors
    kinds = _known_class(a), _known_class(b)
    if None not in kinds and kinds[0] is not kinds[1] and (kinds[0] in _MUTABLE or kinds[1] in _MUTABLE):
        return False
    return None


_MUTABLE = (list, dict, set)


def _tuple_length(var: Variable) -> int | None:
    """The length of a plain tuple tracker (a constant one or one of trackers), else None."""
    if var.is_constant():
        value = var.as_constant()
        return len(value) if type(value) is tuple else None
    items = getattr(var, "items", None)
    return len(items) if _known_class(var) is tuple and isinstance(items, list) else None


def _known_class(var: Variable) -> type | None:
    try:
        return var.python_type()
    except Unsupported:
        return None


_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)


def identity_of(var: Variable) -> Any:
    """What stands for `var`'s object when it is compared by identity (as a dict key): the object
    it stands for, the node computing a tensor, or the tracker of an object made while tracing;
    None when tracing cannot tell."""
    if _made_while_tracing(var):
        return var
    if _graph_tensor(var):
        return var.node
    return _identity(var)


def _made_while_tracing(var: Variable) -> bool:
    """Objects created in the frame: their tracker is their identity."""
    return var.made_while_tracing()


def _identity(var: Variable) -> Any:
    """The real object a tracker stands for, when it stands for one fixed object."""
    return var.value_object


def _graph_tensor(var: Variable) -> TypeGuard[GraphValueVariable]:
    """A tensor the graph computes: the object its node computes, never a fixed object."""
    return isinstance(var, GraphValueVariable) and var.is_tensor()
