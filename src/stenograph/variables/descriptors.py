"""Class attributes met through an instance: the guard on the class that keeps one valid
(`class_attr_source`), what reading one gives (`class_member`: functions bind, properties run),
the Python function behind a dunder (`class_dunder`), and descriptors written in Python:
properties' getters, setters and deleters, and classes with their own `__get__` / `__set__` /
`__delete__` (validators, typed fields).

Python runs descriptors for `obj.name`, `obj.name = v` and `del obj.name` when the class attribute
`name` is one; the tracer inlines the same function, so what it does to the object (usually a
write of a private attribute) is traced like any other code: recorded on an object made in the
frame, replayed after the graph on one passed in. Each function run is guarded by identity on
its class, so replacing a property or a descriptor's method recompiles.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from ..guards.sources import AttrSource, ClassSource, InstanceDictSource, ItemSource
from .base import Variable
from .class_lookup import MISSING, class_lookup
from .functions import UserFunctionVariable, UserMethodVariable

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

# what each access calls: the property's function, or the descriptor class's method
_PROPERTY_FUNCTION = {"__get__": "fget", "__set__": "fset", "__delete__": "fdel"}


# a builtin base's methods, which a class reaching them can replace (`MySet.add = ...`)
_C_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.BuiltinFunctionType)
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def class_attr_source(frame: Frame, cls: type, name: str, attr: Any) -> Source:
    """Guard that `cls.name`, as Python resolves it on the class, is still `attr`; the source
    to wrap the value it gives with (a method's function, a property's getter, a plain value).

    Functions, properties, builtin bases' C methods and the functions inside static and class
    methods are guarded by identity (replacing a method recompiles); plain values get the value
    guards `wrap` gives them. The source is rooted at the class itself, so the check runs once
    per class.
    """
    source = AttrSource(ClassSource(cls), name)
    guards = frame.output.guards
    if cls.__flags__ & _IMMUTABLE_TYPE:
        return source  # a builtin class (`super()` reaching `object`): its attributes cannot change
    if isinstance(attr, classmethod):
        if isinstance(attr.__func__, property):
            # `cls.name` would run the property (`@classmethod @property`): read the class
            # method from the dict of the class defining it
            _, owner = class_lookup(cls, name)
            source = ItemSource(InstanceDictSource(ClassSource(owner)), name)
        source = AttrSource(source, "__func__")
        guards.id_match(source, attr.__func__)
    elif isinstance(attr, staticmethod):
        guards.id_match(source, attr.__func__)
    elif isinstance(attr, (types.FunctionType, property, *_C_METHODS)):
        guards.id_match(source, attr)
    return source


def class_member(frame: Frame, obj: Variable, cls_var: Variable, attr: Any, name: str, source: Source) -> Variable:
    """Class attribute `attr` (guarded through `source`) read through instance `obj`: a property
    runs, functions bind to `obj` (class methods to `cls_var`), anything else is its value."""
    if isinstance(attr, property):
        if attr.fget is None:
            raise Unsupported(f"property {name!r} has no getter")
        return UserFunctionVariable(attr.fget, AttrSource(source, "fget")).call(frame, [obj], {})
    if isinstance(attr, staticmethod):
        return function_from_class(frame, attr.__func__, source)
    if isinstance(attr, classmethod):
        return class_method(frame, attr, cls_var, source)
    if isinstance(attr, types.FunctionType):
        return UserMethodVariable(attr, obj, fn_source=source)
    return frame.wrap(attr, source)


def class_method(frame: Frame, attr: classmethod, cls_var: Variable, source: Source) -> Variable:
    """Class method `attr` (its function guarded through `source`) read on a class or instance:
    bound to the class. Before Python 3.13 a class method wrapping a property (`@classmethod`
    over `@property`) gives the property's value for the class, as CPython's `__get__` chains."""
    inner = attr.__func__
    if isinstance(inner, property) and sys.version_info < (3, 13):
        if inner.fget is None:
            raise Unsupported("class property has no getter")
        return UserFunctionVariable(inner.fget, AttrSource(source, "fget")).call(frame, [cls_var], {})
    return UserMethodVariable(inner, cls_var, fn_source=source)


def function_from_class(frame: Frame, fn: Any, source: Source) -> Variable:
    """A function stored on a class (a static method), already guarded by identity: its tracker,
    with the source its defaults and cells are read through when it is inlined."""
    var = frame.wrap(fn, None)
    return UserFunctionVariable(fn, source) if isinstance(var, UserFunctionVariable) else var


def class_dunder(frame: Frame, cls: type, name: str) -> types.FunctionType | None:
    """The Python function implementing dunder `name` on `cls`, if any (None: a builtin's or none).

    Either answer is guarded on the class: a dunder added, replaced or removed later recompiles.
    """
    attr, _ = class_lookup(cls, name)
    guards = frame.output.guards
    if attr is MISSING:
        guards.attribute_absent(ClassSource(cls), cls, name)
        return None
    if isinstance(attr, types.FunctionType):
        class_attr_source(frame, cls, name, attr)
        return attr
    if attr is None or isinstance(attr, _C_METHODS):
        # inherited from a builtin (object.__eq__): the same object on every read
        guards.id_match(AttrSource(ClassSource(cls), name), getattr(cls, name))
    return None


_C_METHODS = (types.WrapperDescriptorType, types.MethodDescriptorType, types.BuiltinFunctionType)


def is_data_descriptor(attr: Any) -> bool:
    """Whether `attr`, found on a class, takes precedence over the instance `__dict__`."""
    kind = type(attr)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def precedes_instance_dict(attr: Any) -> bool:
    """Whether reading the name answers with `attr`'s getter before the instance `__dict__` is
    looked at: a data descriptor with `__get__` (one with only `__set__` yields to the dict)."""
    return is_data_descriptor(attr) and hasattr(type(attr), "__get__")


def is_instance_method(attr: Any) -> bool:
    """A C `instancemethod` wrapper, as pybind11 stores a class's methods: binding it runs no code,
    it makes a bound method of its C function."""
    return type(attr).__name__ == "instancemethod" and type(attr).__module__ == "builtins"


def has_python_method(attr: Any, method: str) -> bool:
    """Whether `attr` answers `method` (`__get__`, `__set__`, `__delete__`) with Python code the
    tracer can inline: a property's function, or its class's own method."""
    if isinstance(attr, property):
        return isinstance(getattr(attr, _PROPERTY_FUNCTION[method]), types.FunctionType)
    return isinstance(class_lookup(type(attr), method)[0], types.FunctionType)


def run_descriptor(
    frame: Frame, owner: type, name: str, attr: Any, method: str, obj: Variable, args: list[Variable]
) -> Variable:
    """Run `attr.method(obj, *args)` (`attr` is `owner.name`) by inlining its Python code.

    A property without that function, or a descriptor implemented in C, is Unsupported: the
    access then runs eagerly (and raises Python's own error where the property has no setter).
    """
    if isinstance(attr, property):
        source = class_attr_source(frame, owner, name, attr)
        field = _PROPERTY_FUNCTION[method]
        fn = getattr(attr, field)
        if not isinstance(fn, types.FunctionType):
            raise Unsupported(f"property {name!r} of {owner.__qualname__} has no Python {field}")
        return UserFunctionVariable(fn, AttrSource(source, field)).call(frame, [obj, *args], {})
    fn, _ = class_lookup(type(attr), method)
    if fn is MISSING or not isinstance(fn, types.FunctionType):
        raise Unsupported(f"descriptor {name!r} ({type(attr).__name__}) of {owner.__qualname__} has no Python {method}")
    method_source = class_attr_source(frame, type(attr), method, fn)  # replacing the method recompiles
    descriptor = frame.wrap(attr, _descriptor_source(frame, owner, name, attr))
    return UserFunctionVariable(fn, method_source).call(frame, [descriptor, obj, *args], {})


def _descriptor_source(frame: Frame, cls: type, name: str, attr: Any) -> Source:
    """Where `cls.name` is found, as a source that does not run the descriptor (`cls.name` would
    call its `__get__` with no instance): the defining class's `__dict__` entry, guarded by
    identity, and no class before it in the MRO defining the name."""
    guards = frame.output.guards
    _, found_on = class_lookup(cls, name)
    for klass in cls.__mro__[: cls.__mro__.index(found_on)]:
        text = f"{klass.__qualname__} does not define {name!r}"
        guards.key_absent(AttrSource(ClassSource(klass), "__dict__"), name, text)
    source = ItemSource(AttrSource(ClassSource(found_on), "__dict__"), name)
    guards.id_match(source, attr)
    return source
