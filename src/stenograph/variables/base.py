"""The tracker protocol: `Variable`, the base class of every tracker, which knows none of them.

A tracker (a `Variable`) stands for one Python value during symbolic execution. It knows its
`source` when the value came from the frame (so it can be guarded and re-read at run time), and
implements the operations bytecode performs on it. An operation a tracker cannot model raises
`Unsupported` with a reason a user can act on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


_TPFLAGS_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement, which can change


def always_true(obj: Any) -> bool:
    """Whether `obj` is an object of a builtin class with neither `__bool__` nor `__len__` (a
    function, a method descriptor): true, and its class cannot change."""
    cls = type(obj)
    return not cls.__flags__ & _TPFLAGS_HEAPTYPE and not hasattr(cls, "__bool__") and not hasattr(cls, "__len__")


_births = itertools.count()


def birth() -> int:
    """A serial number later than every one given before: stamped on containers and objects as
    they are made while tracing (`Variable.born`), and taken by `SideEffects.mark()`."""
    return next(_births)


class Variable:
    """A symbolic Python value: the protocol every tracker implements.

    The interpreter, the operators, the builtins and the code generator use a tracker only
    through the methods below. Each has a default here: an operation a tracker cannot model
    raises `Unsupported` naming the tracker (`describe()`), which becomes a graph break; a query
    that may have no answer returns None ("cannot"), and the caller falls back to the next rule.
    A subclass overrides what its kind of value supports, nothing else.

    Identity and type

    - `source`: how to reach the value from the frame (None for values made while tracing).
      Callers: guards, the code generator (a value with a source is re-read through it).
    - `value_object`: the one real object the tracker stands for (a module, a function, a user
      object read from the frame), or None when it stands for no fixed object. Callers: identity
      (`is`, `==` of objects), set members, `callable()`, exception text. Default: None.
    - `attrs`: the instance `__dict__` (a dict tracker) of an object made while tracing, or
      None for a tracker that keeps none. Callers: attribute access, exception chaining.
      Default: None.
    - `describe()`: a short text for messages. Default: the class name.
    - `python_type()`: `type(value)`. Callers: `isinstance`, `type()`. Default: Unsupported.
    - `is_constant()` / `as_constant()`: whether the value is a Python constant known now, and
      that constant. Callers: everything that folds. Default: False / Unsupported.
    - `made_while_tracing()`: whether the object was created by the traced code (its tracker
      is its identity; no guard is needed to compare it). Callers: operators (`is`, `==`).
      Default: False.
    - `in_graph()`: whether the value is computed by the graph (a tensor, a symbolic number), so
      that operators on it are recorded as graph nodes. Callers: operators. Default: False.

    Operations (`frame` is the frame being traced)

    - `getattr(frame, name)` / `setattr(frame, name, value)` / `delattr(frame, name)`: LOAD_ATTR,
      STORE_ATTR, DELETE_ATTR and the builtins of the same names. Default: Unsupported.
    - `call(frame, args, kwargs)`: a call of the value. Default: Unsupported.
    - `call_method(frame, name, args, kwargs)`: `value.name(*args, **kwargs)`. Default:
      `getattr(frame, name).call(...)`.
    - `getitem(frame, key)` / `setitem(frame, key, value)` / `delitem(frame, key)`: BINARY_SUBSCR,
      STORE_SUBSCR, DELETE_SUBSCR (and slices). Default: Unsupported.
    - `contains(frame, item)`: `item in value` when the tracker answers it directly (dicts, sets);
      None lets `operators.contains` try `__contains__` and iteration. Default: None.
    - `binary_op(frame, op, plain, other)`: `value op other` for the left operand's own kind
      (sequence concatenation and repetition, set algebra); `plain` is `op` without its in-place
      form. None lets `operators.binary` go on (user dunders, constants, identity). Default: None.
    - `unary_op(frame, op)`: `op(value)` for values that record it (tensors, symbolic numbers);
      None lets `operators.unary` go on (`not` by truth, constants). Default: None.
    - `truth(frame)`: `bool(value)` for a branch. Default: Unsupported.
    - `length(frame)`: `len(value)`. Default: the length of `unpack`.

    Iteration

    - `unpack(frame)`: every item, for unpacking, `*args` and iterating a value with no iterator of
      its own. Default: Unsupported.
    - `get_iter(frame)`: the iterator GET_ITER and `iter()` make, for a value with an iterator of
      its own: containers return iterators that read them live; iterators return themselves.
      None lets `containers.iterate` make an iterator over `unpack(frame)`. Default: None.
    - `next(frame)`: the next item of an iterator, None when it is exhausted. Default: Unsupported.

    Code generation (after the trace)

    - `reconstruct(codegen)`: a Python expression that rebuilds the value at run time, for a
      value without a source (a graph output, a constant, a container built while tracing).
      `codegen` is `graph.codegen.Reconstructor`: `expr(var)` renders another tracker,
      `constant(value)`, `graph_value(node)`, `build_once(var, render)`, `build_object(...)`,
      `writer`.
      Caller: `Reconstructor.expr`. Default: Unsupported ("cannot be rebuilt").
    - `replay_mutation(target, expr, pin)`: for a container read from the frame and changed
      while tracing, the statement that gives the real object (rendered as `target`) its new
      contents; `expr` renders a tracker, `pin` takes a value into a local first. Caller:
      `graph.side_effects.SideEffects.replay`. Default: None (nothing to replay).

    Trackers are made from Python values by `builder.wrap(frame, value, source)`, the one entry
    point that picks the tracker and installs guards (`trace_rules` holds its policy; trackers,
    which the builder imports, call it as `frame.wrap`); results of graph operations are made by
    `OutputGraph.wrap_result`, and constants computed while tracing by `constants.constant(value)`.
    """

    source: Source | None = None
    value_object: Any = None
    attrs: Any = None
    # when a mutable object made while tracing was made (`birth()`): a speculative trace leaves
    # changes to objects it made itself out of its verdict (`SideEffects.changed_since`); -1 for
    # everything else
    born: int = -1

    def python_type(self) -> type:
        raise Unsupported(f"type of {self.describe()} is unknown while tracing")

    def describe(self) -> str:
        return type(self).__name__

    # -- constants and identity ---------------------------------------------------------------

    def is_constant(self) -> bool:
        return False

    def as_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} is not a Python constant")

    def made_while_tracing(self) -> bool:
        return False

    def in_graph(self) -> bool:
        return False

    # -- operations -------------------------------------------------------------------------------

    def getattr(self, frame: Frame, name: str) -> Variable:
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        raise Unsupported(f"setting attribute {name!r} of {self.describe()}")

    def delattr(self, frame: Frame, name: str) -> None:
        raise Unsupported(f"deleting attribute {name!r} of {self.describe()}")

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(f"call of {self.describe()}")

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.getattr(frame, name).call(frame, args, kwargs)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        raise Unsupported(f"indexing {self.describe()}")

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        raise Unsupported(f"item assignment on {self.describe()}")

    def delitem(self, frame: Frame, key: Variable) -> None:
        raise Unsupported(f"item deletion on {self.describe()}")

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return None

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        return None

    def set_contents(self) -> Variable | None:
        """The set tracker holding the members of an instance of a set or frozenset subclass made
        while tracing: CPython's set operations read such an object's table directly, whatever
        Python methods its class adds. None for other objects."""
        return None

    def unary_op(self, frame: Frame, op: Any) -> Variable | None:
        return None

    def truth(self, frame: Frame) -> bool:
        """`bool(value)` for branches; data-dependent values refuse. A fixed object of a builtin
        class with neither `__bool__` nor `__len__` (a function, `torch.add`, a method descriptor)
        is true: such a class cannot change, so nothing needs a guard."""
        if self.value_object is not None and always_true(self.value_object):
            return True
        raise Unsupported(f"truth value of {self.describe()}")

    def length(self, frame: Frame) -> int:
        return len(self.unpack(frame))

    # -- iteration ----------------------------------------------------------------------------------

    def unpack(self, frame: Frame) -> list[Variable]:
        """The items when iterated (for unpacking, `for` loops and `*args`)."""
        raise Unsupported(f"iteration over {self.describe()}")

    def get_iter(self, frame: Frame) -> Variable | None:
        return None

    def next(self, frame: Frame) -> Variable | None:
        raise Unsupported(f"next() of {self.describe()}")

    # -- code generation ------------------------------------------------------------------------

    def reconstruct(self, codegen: Any) -> str:
        raise Unsupported(f"{self.describe()} cannot be rebuilt outside the graph")

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        return None
