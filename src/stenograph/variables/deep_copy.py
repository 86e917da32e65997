"""`copy.deepcopy` while tracing, modelled on trackers instead of inlining `copy`'s reduce protocol.

Models copy their configs mid-forward (`copy.deepcopy(self.config)`, then change one field). Inlined,
`copy.deepcopy` walks `__reduce_ex__` and `copyreg` in C; modelled, the copy is built from the
trackers: constants and immutable values are shared as `deepcopy` shares them, lists, dicts and
tuples are copied item by item, and an instance of a plain Python class becomes a new object of
that class whose `__dict__` holds copies of the original's entries (read through their sources,
so they are guarded). One memo per call keeps shared and cyclic references as `deepcopy` keeps
them. Anything else (tensors, classes with their own copy or pickle protocol, `__slots__`,
builtin bases) is refused with the reason, and the call runs eagerly at a graph break.
"""

from __future__ import annotations

import copyreg
import types
from typing import TYPE_CHECKING

from ..errors import Unsupported
from ..guards.sources import AttrSource, ClassSource
from .base import Variable
from .class_lookup import MISSING, class_attribute
from .constants import ConstantVariable
from .containers import DictVariable, ListVariable, TupleVariable
from .frame_dicts import FrameDictVariable
from .frame_objects import NNModuleVariable, UserObjectVariable
from .symbolic import SymNodeVariable
from .trace_rules import is_builtin_class, is_literal
from .user_classes import NewObjectVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# values `copy.deepcopy` returns as they are (its atomic types, and classes and functions)
_ATOMIC = (type, types.FunctionType, types.BuiltinFunctionType, property, types.CodeType)
# the copy protocol of `object` itself: a class that overrides any of these copies its own way
_OBJECT_PROTOCOL = {name: vars(object)[name] for name in ("__reduce_ex__", "__reduce__", "__getstate__", "__new__")}


def deep_copy(frame: Frame, var: Variable, memo: dict[int, Variable] | None = None) -> Variable:
    """The tracker of `copy.deepcopy(var)`."""
    memo = {} if memo is None else memo
    key = id(var.value_object) if var.value_object is not None else id(var)
    if key in memo:
        return memo[key]
    if isinstance(var, SymNodeVariable):
        return var  # an int or float: immutable
    if isinstance(var, ConstantVariable):
        if is_literal(var.value) or isinstance(var.value, _ATOMIC):
            return var
        raise Unsupported(f"copy.deepcopy of {var.describe()}")
    if type(var) is TupleVariable:
        items = [deep_copy(frame, item, memo) for item in var.items]
        if all(a is b for a, b in zip(items, var.items)):
            return var  # deepcopy returns a tuple of immutable items itself
        return memo.setdefault(key, TupleVariable(items))
    if type(var) is ListVariable:
        copied = memo[key] = ListVariable([])
        copied.items.extend(deep_copy(frame, item, memo) for item in var.items)
        return copied
    if type(var) in (DictVariable, FrameDictVariable):  # (defaultdict and Counter trackers keep more state)
        copied = memo[key] = DictVariable({}, python_class=var.python_class)
        copied.items.update({k: deep_copy(frame, v, memo) for k, v in var.items.items()})
        return copied
    if isinstance(var, NewObjectVariable) and var.items is None:
        return _copy_object(frame, var.cls, var.attrs, key, memo)
    if isinstance(var, UserObjectVariable) and not isinstance(var, NNModuleVariable) and var.source is not None:
        obj = var.value_object
        cls = var.python_type()  # installs the type guard
        _check_plain_class(frame, cls)
        if not isinstance(getattr(obj, "__dict__", None), dict):
            raise Unsupported(f"copy.deepcopy of {var.describe()}, which has no __dict__")
        attrs = frame.wrap(obj.__dict__, AttrSource(var.source, "__dict__"))
        return _copy_object(frame, cls, attrs, key, memo)
    raise Unsupported(f"copy.deepcopy of {var.describe()}")


def _copy_object(frame: Frame, cls: type, attrs: Variable, key: int, memo: dict[int, Variable]) -> Variable:
    _check_plain_class(frame, cls)
    if not isinstance(attrs, DictVariable):
        raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} object whose __dict__ is not a plain dict")
    copied = memo[key] = NewObjectVariable(cls)
    for name, value in attrs.items.items():
        copied.attrs.items[name] = deep_copy(frame, value, memo)
    return copied


def _check_plain_class(frame: Frame, cls: type) -> None:
    """`cls` copies through `object`'s protocol (guarded on the class: a class that later gains
    `__deepcopy__` recompiles)."""
    if any(is_builtin_class(base) and base is not object for base in cls.__mro__):
        raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} object (a builtin base)")
    if any("__slots__" in vars(base) for base in cls.__mro__):
        raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} object (its class uses __slots__)")
    if cls in copyreg.dispatch_table:
        raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} object (registered with copyreg)")
    for name in ("__deepcopy__", "__setstate__"):
        if class_attribute(cls, name) is not MISSING:
            raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} object (its class defines {name})")
        frame.output.guards.attribute_absent(ClassSource(cls), cls, name)
    for name, default in _OBJECT_PROTOCOL.items():
        if class_attribute(cls, name) is not default:
            raise Unsupported(f"copy.deepcopy of a {cls.__qualname__} object (its class defines {name})")
