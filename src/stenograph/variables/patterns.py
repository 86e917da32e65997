"""Structural pattern matching (`match` statements) on trackers, and the same checks on real values.

The instructions a `match` compiles to (MATCH_CLASS, MATCH_MAPPING, MATCH_SEQUENCE, MATCH_KEYS,
GET_LEN) ask questions CPython answers from type flags, `__match_args__` and attribute and key
lookups. Here they are answered on trackers, guarded like the reads they stand for (the subject's
type, the class's `__match_args__`, each attribute and key), so a `match` is traced like the
`isinstance`/`getattr`/`in` code it is equivalent to. The `eager_*` functions run an instruction
on real values where the trace stops at it (a graph break).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import BreakKind, Unsupported
from ..guards.sources import AttrSource, ClassSource
from . import operators
from .base import Variable
from .builtins import BuiltinVariable
from .constants import constant
from .containers import TupleVariable
from .exceptions import raise_new

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# CPython's type flags that MATCH_SEQUENCE and MATCH_MAPPING test (Include/object.h)
_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
# builtins whose single positional sub-pattern matches the subject itself (`case int(n)`)
_MATCH_SELF = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def is_sequence_type(cls: type) -> bool:
    """What MATCH_SEQUENCE answers for an instance of `cls` (str, bytes and bytearray are not)."""
    return bool(cls.__flags__ & _TPFLAGS_SEQUENCE)


def is_mapping_type(cls: type) -> bool:
    """What MATCH_MAPPING answers for an instance of `cls`."""
    return bool(cls.__flags__ & _TPFLAGS_MAPPING)


def match_keys(frame: Frame, subject: Variable, keys: Variable) -> Variable:
    """MATCH_KEYS: the values of `keys` in mapping `subject` as a tuple, or None if one is missing."""
    values = []
    for key in keys.unpack(frame):
        if not operators.contains(frame, key, subject):
            return constant(None)
        values.append(subject.getitem(frame, key))
    return TupleVariable(values)


def _match_args(frame: Frame, cls: type) -> Any:
    """`cls.__match_args__` (guarded), or None where the class has none (guarded absent)."""
    if not hasattr(cls, "__match_args__"):
        frame.output.guards.attribute_absent(ClassSource(cls), cls, "__match_args__")
        return None
    value = frame.wrap(cls.__match_args__, AttrSource(ClassSource(cls), "__match_args__"))
    if not value.is_constant():
        raise Unsupported(f"__match_args__ of {cls.__qualname__} is not a tuple of constants")
    return value.as_constant()


def match_class(frame: Frame, subject: Variable, cls_var: Variable, count: int, names: tuple[str, ...]) -> Variable:
    """MATCH_CLASS: the tuple of `count` positional then `names` keyword attributes of `subject`
    when it is an instance of the class, None otherwise (a missing attribute is no match)."""
    if not cls_var.is_constant() or not isinstance(cls_var.as_constant(), type):
        raise raise_new(frame, TypeError, "called match pattern must be a class")
    cls = cls_var.as_constant()
    if not BuiltinVariable(isinstance).call(frame, [subject, cls_var], {}).as_constant():
        return constant(None)
    attributes: list[str] = []
    self_match = False
    if count:
        match_args = _match_args(frame, cls)
        if match_args is None:
            if not (count == 1 and cls in _MATCH_SELF):
                raise raise_new(frame, TypeError, f"{cls.__name__}() accepts 0 positional sub-patterns ({count} given)")
            self_match = True
        elif not isinstance(match_args, tuple):
            raise raise_new(
                frame, TypeError, f"{cls.__name__}.__match_args__ must be a tuple (got {type(match_args).__name__})"
            )
        elif count > len(match_args):
            raise raise_new(
                frame, TypeError, f"{cls.__name__}() accepts {len(match_args)} positional sub-patterns ({count} given)"
            )
        else:
            attributes = list(match_args[:count])
    for name in names:
        if name in attributes:
            raise raise_new(frame, TypeError, f"{cls.__name__}() got multiple sub-patterns for attribute {name!r}")
        attributes.append(name)
    values = [subject] if self_match else []
    for name in attributes:
        try:
            values.append(subject.getattr(frame, name))
        except Unsupported as e:
            if e.kind is BreakKind.MISSING_ATTRIBUTE:
                return constant(None)
            raise
    return TupleVariable(values)


# -- the instructions on real values, for a graph break at them ----------------------------------


def eager_match_keys(subject: Any, keys: tuple) -> tuple | None:
    """MATCH_KEYS on real values (`get` as CPython calls it, so `__missing__` is not consulted)."""
    missing = object()
    values = tuple(subject.get(key, missing) for key in keys)
    return None if any(v is missing for v in values) else values


def eager_match_class(subject: Any, cls: Any, count: int, names: tuple[str, ...]) -> tuple | None:
    """MATCH_CLASS on real values: a `match` statement with the one pattern, evaluated by Python."""
    if not isinstance(cls, type):
        raise TypeError("called match pattern must be a class")
    if not isinstance(subject, cls):
        return None
    match_args = getattr(cls, "__match_args__", None)
    if count and match_args is None and count == 1 and cls in _MATCH_SELF:
        attributes: list[str] = []
        values = [subject]
    else:
        if count and match_args is None:
            raise TypeError(f"{cls.__name__}() accepts 0 positional sub-patterns ({count} given)")
        if count and not isinstance(match_args, tuple):
            raise TypeError(f"{cls.__name__}.__match_args__ must be a tuple (got {type(match_args).__name__})")
        if count > len(match_args or ()):
            raise TypeError(f"{cls.__name__}() accepts {len(match_args)} positional sub-patterns ({count} given)")
        attributes = list(match_args[:count]) if count else []
        values = []
    for name in names:
        if name in attributes:
            raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute {name!r}")
        attributes.append(name)
    for name in attributes:
        try:
            values.append(getattr(subject, name))
        except AttributeError:
            return None
    return tuple(values)
