"""`os.environ` read while tracing: each variable looked up is a constant, guarded on its value.

Libraries switch code paths on environment variables in the middle of a model's forward
(`os.environ.get("FLAG", "0") == "1"`). Inlining `os._Environ` would call `os`'s C-backed encoders,
so the mapping is modelled instead: `get`, `[]` and `in` answer from the real environment now, and
the guard re-reads the variable on every call, so setting, changing or removing it recompiles.
Writes to the environment stay graph breaks (they run eagerly).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .base import Variable
from .constants import BoundMethodVariable, constant
from .exceptions import raise_python_error

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

_READERS = frozenset({"get", "__getitem__", "__contains__"})


class EnvironVariable(Variable):
    """`os.environ` (the process's one `os._Environ`), read from the frame."""

    def __init__(self, environ: os._Environ, source: Source) -> None:
        self.value_object = environ
        self.source = source

    def python_type(self) -> type:
        return type(self.value_object)

    def describe(self) -> str:
        return "os.environ"

    def _read(self, frame: Frame, key: Variable) -> str | None:
        if not key.is_constant() or not isinstance(key.as_constant(), str):
            raise Unsupported(f"os.environ read with {key.describe()} (a constant string is needed)")
        name = key.as_constant()
        value = self.value_object.get(name)
        frame.output.guards.mapping_entry(self.source, name, value)
        return value

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in _READERS:
            return BoundMethodVariable(self, name)
        raise Unsupported(f"os.environ.{name} while tracing (only get, [] and `in` are modelled)")

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "get" and not kwargs and len(args) in (1, 2):
            value = self._read(frame, args[0])
            if value is None:
                return args[1] if len(args) == 2 else constant(None)
            return constant(value)
        if name == "__getitem__" and not kwargs and len(args) == 1:
            return self.getitem(frame, args[0])
        if name == "__contains__" and not kwargs and len(args) == 1:
            return constant(self.contains(frame, args[0]))
        raise Unsupported(f"os.environ.{name} with these arguments")

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        value = self._read(frame, key)
        if value is None:
            raise_python_error(frame, KeyError(key.as_constant()))
        return constant(value)

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self._read(frame, item) is not None

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.value_object, "environ")
