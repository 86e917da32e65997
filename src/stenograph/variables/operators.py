"""Python operators (`+`, `<`, `not`, `in`, ...) on trackers.

An operator with a tensor operand becomes a graph node whose target is the `operator` function;
on constants it is evaluated now; on containers it builds a new container tracker.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .base import ConstantVariable, Variable, constant
from .containers import SequenceVariable, TupleVariable
from .exceptions import raise_python_error
from .tensor import TensorVariable
from .user_classes import python_dunder

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
    if a.in_graph() or b.in_graph():
        # only a tensor changes in place; `i *= n` on a number is `i = i * n`
        graph_op = op if isinstance(a, TensorVariable) else plain
        return frame.output.call("call_function", graph_op, [a, b], {}, f"operator {graph_op.__name__}")
    if plain is operator.add:
        # a constant tuple concatenated with a tracked one (e.g. `(-1,) + x.shape[1:]`)
        a, b = _as_sequence(a, b), _as_sequence(b, a)
    own = a.binary_op(frame, op, plain, b)  # sequences and sets
    if own is not None:
        return own
    user = _user_dunder(frame, op, a, b)
    if user is not None:
        return user
    if a.is_constant() and b.is_constant():
        try:
            return constant(op(a.as_constant(), b.as_constant()))
        except Exception as e:
            raise_python_error(frame, e)
    if op in (operator.eq, operator.ne):
        # identity-based equality of non-constant objects (modules, functions, user objects)
        same = _same_object(a, b)
        if same is not None:
            guard_identity(frame, a, b, same)
            return constant(same if op is operator.eq else not same)
    raise Unsupported(f"operator {op.__name__} on {a.describe()} and {b.describe()}")


_DUNDERS = {
    operator.add: ("__add__", "__radd__"),
    operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"),
    operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.eq: ("__eq__", "__eq__"),
    operator.ne: ("__ne__", "__ne__"),
    operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"),
    operator.gt: ("__gt__", "__lt__"),
    operator.ge: ("__ge__", "__le__"),
}


def _user_dunder(frame: Frame, op: Any, a: Variable, b: Variable) -> Variable | None:
    """`a op b` through a dunder method written in Python on a user class (None if there is none)."""
    names = _DUNDERS.get(_INPLACE_TO_PLAIN.get(op, op))
    if names is None:
        return None
    for obj, other, name in ((a, b, names[0]), (b, a, names[1])):
        fn = python_dunder(frame, obj, name)
        if fn is not None:
            result = frame.inline_call(fn, [obj, other], {}, closure=None)
            if not (result.is_constant() and result.as_constant() is NotImplemented):
                return result
    return None


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


def is_same(frame: Frame, a: Variable, b: Variable) -> bool:
    """`a is b` decided at trace time, and guarded so that later calls decide it alike."""
    same = _same_object(a, b)
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
        if var.source is None or isinstance(var, TensorVariable) and other.is_constant():
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


def contains(frame: Frame, item: Variable, container: Variable) -> bool:
    """`item in container` decided at trace time."""
    if isinstance(container, TensorVariable) or isinstance(item, TensorVariable):
        raise Unsupported("`in` with a tensor needs its values")
    answer = container.contains(frame, item)  # dicts and sets
    if answer is not None:
        return answer
    dunder = python_dunder(frame, container, "__contains__")
    if dunder is not None:
        return frame.inline_call(dunder, [container, item], {}, closure=None).truth(frame)
    if container.is_constant() and item.is_constant():
        return item.as_constant() in container.as_constant()
    for candidate in container.unpack(frame):
        same = _same_object(item, candidate)
        if same is not None:
            guard_identity(frame, item, candidate, same)
        elif item.is_constant() and candidate.is_constant():
            same = item.as_constant() == candidate.as_constant()
        if same:
            return True
        if same is None:
            raise Unsupported(f"`in` over {container.describe()} with {item.describe()}")
    return False


def same_or_equal(frame: Frame, a: Variable, b: Variable) -> bool:
    """`a is b or a == b` as `list.index` / `in` decide it, for trackers known while tracing."""
    same = _same_object(a, b)
    if same is not None:
        guard_identity(frame, a, b, same)
    if same:
        return True
    if a.is_constant() and b.is_constant():
        return bool(a.as_constant() == b.as_constant())
    if same is None:
        raise Unsupported(f"comparing {a.describe()} with {b.describe()}")
    return False


def _same_object(a: Variable, b: Variable) -> bool | None:
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
    if (ia is not None or a.is_constant()) and isinstance(b, TensorVariable):
        return False
    if (ib is not None or b.is_constant()) and isinstance(a, TensorVariable):
        return False
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        return a.node is b.node
    if a.is_constant() != b.is_constant() and (ia is not None or ib is not None):
        return False
    for var, other in ((a, b), (b, a)):
        # a tracked container or number against None/True/False: a value of another type is
        # never that singleton (`self.__dict__.get(name) is None` on a tuple of tensors)
        if other.is_constant() and any(other.as_constant() is s for s in _SINGLETONS) and not var.is_constant():
            if var.python_type() is not type(other.as_constant()):
                return False
    return None


_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)


def _made_while_tracing(var: Variable) -> bool:
    """Objects created in the frame: their tracker is their identity."""
    return var.made_while_tracing()


def _identity(var: Variable) -> Any:
    """The real object a tracker stands for, when it stands for one fixed object."""
    return var.value_object
