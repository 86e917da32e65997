"""The value trackers' base class and the simplest trackers: constants and the NULL marker.

A tracker (a `Variable`) stands for one Python value during symbolic execution. It knows its
`source` when the value came from the frame (so it can be guarded and re-read at run time), and
implements the operations bytecode performs on it. An operation a tracker cannot model raises
`Unsupported` with a reason a user can act on.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .. import process_state
from ..errors import Unsupported

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


class Variable:
    """A symbolic Python value."""

    source: Source | None = None

    def python_type(self) -> type:
        raise Unsupported(f"type of {self.describe()} is unknown while tracing")

    def describe(self) -> str:
        return type(self).__name__

    # -- constants --------------------------------------------------------------------------------

    def is_constant(self) -> bool:
        return False

    def as_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} is not a Python constant")

    # -- operations -------------------------------------------------------------------------------

    def getattr(self, tx: Frame, name: str) -> Variable:
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def setattr(self, tx: Frame, name: str, value: Variable) -> None:
        raise Unsupported(f"setting attribute {name!r} of {self.describe()}")

    def call(self, tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(f"call of {self.describe()}")

    def call_method(self, tx: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.getattr(tx, name).call(tx, args, kwargs)

    def unpack(self, tx: Frame) -> list[Variable]:
        """The items when iterated (for unpacking, `for` loops and `*args`)."""
        raise Unsupported(f"iteration over {self.describe()}")

    def truth(self, tx: Frame) -> bool:
        """`bool(value)` for branches; data-dependent values refuse."""
        raise Unsupported(f"truth value of {self.describe()}")

    def length(self, tx: Frame) -> int:
        return len(self.unpack(tx))

    def getitem(self, tx: Frame, key: Variable) -> Variable:
        raise Unsupported(f"indexing {self.describe()}")


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

    def truth(self, tx: Frame) -> bool:
        return bool(self.value)

    def unpack(self, tx: Frame) -> list[Variable]:
        try:
            items = list(self.value)
        except TypeError:
            raise Unsupported(f"iteration over {self.describe()}") from None
        return [constant(item) for item in items]

    def length(self, tx: Frame) -> int:
        return len(self.value)

    def getattr(self, tx: Frame, name: str) -> Variable:
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            if self.source is not None:  # `hasattr` answers False: guard that it stays so
                tx.output.guards.attribute_absent(self.source, self.value, name)
            raise Unsupported(f"{self.describe()} has no attribute {name!r}") from e
        if callable(attr):
            # cycle: variables.functions imports variables.base at module level
            from .functions import ConstantMethodVariable

            return ConstantMethodVariable(self.value, name)
        return constant(attr)

    def getitem(self, tx: Frame, key: Variable) -> Variable:
        if not key.is_constant():
            raise Unsupported(f"indexing {self.describe()} with {key.describe()}")
        try:
            return constant(operator.getitem(self.value, key.as_constant()))
        except Exception as e:
            # cycle: variables.exceptions imports variables.base at module level
            from .exceptions import raise_python_error

            raise_python_error(tx, e)

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


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


H = TypeVar("H")


def handler_registry(table: dict[Any, H]) -> Callable[..., Callable[[H], H]]:
    """A decorator factory for a module's handler table: `@register(fn, ...)` files the handler it
    decorates in `table` under each `fn`."""

    def register(*fns: Any) -> Callable[[H], H]:
        def add(handler: H) -> H:
            for fn in fns:
                table[fn] = handler
            return handler

        return add

    return register


class HandledFunctionVariable(Variable):
    """A function or class whose calls a handler table models (builtins, standard-library functions)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.value_object = fn

    def python_type(self) -> type:
        return type(self.fn)


class NullVariable(Variable):
    """The NULL that CALL-sequences push below a callable (3.11/3.12 calling convention)."""

    def describe(self) -> str:
        return "NULL"


NULL = NullVariable()

_CACHE_LIMIT = 256
_small_constants: dict[tuple[type, Any], ConstantVariable] = {}
process_state.register_containers("variables.small_constants", _small_constants, memo=True)


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
