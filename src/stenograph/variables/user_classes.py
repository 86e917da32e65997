"""User classes, and instances of them created while tracing.

An object made in the traced frame has no source: nothing outside can see it until the frame
returns or breaks, so its attributes live in the tracker (`attrs`, plus `items` for dict and set
subclasses) and writes are applied there. `__init__`, methods, properties, `__setattr__` and
other dunders written in Python are inlined. When the object escapes (returned, stored into an
outside container, live at a graph break) the generated code rebuilds it once, as a real
instance of its class, without running `__init__` again.

`ObjectVariable` is what such an object shares with one read from the frame
(`frame_objects.UserObjectVariable`): the class whose Python dunders implement its protocols, and
`object`'s attribute methods, which the C methods of builtin bases emulated here
(`BaseMethodVariable`) call on either kind.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import operator
import types
from typing import TYPE_CHECKING, Any

import torch

from ..errors import BreakKind, Unsupported
from ..guards.sources import AttrSource, ClassSource, ItemSource
from .autograd_function import FunctionApplyVariable
from .base import Variable
from .class_lookup import MISSING, class_attribute, class_lookup
from .constants import ConstantVariable, IteratorVariable, bound_method_attribute, constant
from .containers import (
    DictContentsVariable,
    DictVariable,
    ListContentsVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    iterate,
)
from .descriptors import (
    class_attr_source,
    class_dunder,
    class_member,
    class_method,
    function_from_class,
    has_python_method,
    is_data_descriptor,
    run_descriptor,
)
from .exceptions import TracedException, is_attribute_error, raise_new, raise_python_error
from .functions import NestedFunctionVariable, TorchClassVariable, UserFunctionVariable, UserMethodVariable
from .sequence_protocol import SelfIteratorVariable, getitem_iterator
from .tensor import TensorVariable
from .trace_rules import (
    TORCH_CLASSES,
    is_builtin_class,
    is_literal,
    is_namedtuple_class,
    is_plain_function_class,
    is_user_class,
)

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# builtin bases whose instances stenograph can model: their C methods are emulated below
_MODELLED_BASES = (object, dict, collections.OrderedDict, set, frozenset, list, tuple, BaseException)


def _is_builtin_class(klass: type) -> bool:
    return is_builtin_class(klass) or klass is collections.OrderedDict


def _builtin_base(cls: type) -> type:
    """The builtin class whose layout instances of `cls` have (object, dict, ValueError, ...)."""
    return next(klass for klass in cls.__mro__ if _is_builtin_class(klass))


def pending_class_attribute(frame: Frame, cls: type, name: str, *, through_instance: bool = False) -> Variable | None:
    """The value this trace wrote to `name` on `cls` or a class it inherits it from, if any."""
    pending = frame.output.side_effects.class_attributes
    for klass in cls.__mro__:
        found = pending.get((id(klass), name))
        if found is not None:
            value = found[2]
            if through_instance and isinstance(value, (UserFunctionVariable, NestedFunctionVariable)):
                raise Unsupported(f"method {name!r} assigned to class {cls.__qualname__} in the traced frame")
            return value
        if name in klass.__dict__:
            return None
    return None


def bind_class_attr(
    frame: Frame, obj: Variable, cls: type, attr: Any, owner: type | None, name: str, *, via_super: bool = False
) -> Variable:
    """`attr` (found on `owner` in `cls`'s MRO) read through instance `obj`: methods bind,
    properties run, builtin methods of modelled bases act on the tracker. The class attribute is
    guarded on `cls` (on `owner` for `super()`, whose lookup skips the classes before it)."""

    found_on = owner if via_super and owner is not None else cls
    if owner is not None and _is_builtin_class(owner) and callable(attr) and not isinstance(attr, types.FunctionType):
        class_attr_source(frame, found_on, name, attr)  # a class assigning its own later recompiles
        return BaseMethodVariable(obj, owner, name)
    if isinstance(obj, NewObjectVariable) and owner is not None:
        modelled = obj.inherited_member(frame, found_on, owner, name, attr)
        if modelled is not None:
            return modelled
        if name == "__weakref__" and isinstance(attr, types.GetSetDescriptorType):
            # no weak reference to an object made in the trace exists yet (`weakref.ref` breaks
            # the graph, and the code after the break reads the real object)
            return constant(None)
    if hasattr(type(attr), "__get__") and not isinstance(
        attr, (types.FunctionType, property, staticmethod, classmethod, type, enum.Enum, *_CONSTANT_TYPES)
    ):
        if not has_python_method(attr, "__get__"):
            raise Unsupported(f"descriptor {name!r} ({type(attr).__name__}) of {cls.__qualname__}")
        return run_descriptor(frame, found_on, name, attr, "__get__", obj, [class_variable(cls)])
    source = class_attr_source(frame, found_on, name, attr)
    return class_member(frame, obj, UserClassVariable(cls), attr, name, source)


_CONSTANT_TYPES = (int, float, str, bool, tuple, frozenset, type(None))
_TENSOR_CLASSES = frozenset(torch.Tensor.__mro__)
_TYPE_DICT = type.__dict__["__dict__"]  # what `Cls.__dict__` reads on classes of ordinary metaclasses


class UserClassVariable(ConstantVariable):
    """A user-defined class: calling it builds a `NewObjectVariable`; its attributes resolve
    statically (functions stay plain functions, classmethods bind to the class)."""

    def describe(self) -> str:
        return f"class {self.value.__qualname__}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return frame.instantiate(self.value, args, kwargs)

    def getattr(self, frame: Frame, name: str) -> Variable:
        cls = self.value
        pending = pending_class_attribute(frame, cls, name)
        if pending is not None:
            return pending
        attr, owner = class_lookup(cls, name)
        if name == "apply" and is_plain_function_class(cls):
            return FunctionApplyVariable(self, cls)
        if isinstance(attr, (staticmethod, classmethod, types.FunctionType)):
            source = class_attr_source(frame, cls, name, attr)
            if isinstance(attr, classmethod):
                return class_method(frame, attr, self, source)
            return function_from_class(frame, attr.__func__ if isinstance(attr, staticmethod) else attr, source)
        if name == "__mro__" or name == "__bases__":
            return constant(getattr(cls, name))
        if name == "__new__" and owner in _MODELLED_BASES:
            # `cls.__new__(cls)` (a metaclass's `__call__`): the builtin base's, on the tracker
            class_attr_source(frame, cls, name, attr)
            return UnboundBaseMethodVariable(owner, "__new__")
        if name == "__dict__" and class_attribute(type(cls), name) is _TYPE_DICT:
            return self._class_dict(frame)
        if isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)) and _is_builtin_class(owner):
            # `MySet.__eq__`: a builtin base's C method, called on an instance as `obj.__eq__(...)`
            class_attr_source(frame, cls, name, attr)
            return ConstantVariable(attr)
        is_plain = not hasattr(type(attr), "__get__") or isinstance(attr, (type, enum.Enum, *_CONSTANT_TYPES))
        if attr is not MISSING and is_plain and not (name.startswith("__") and name.endswith("__")):
            return frame.wrap(attr, class_attr_source(frame, cls, name, attr))
        if attr is MISSING and type(cls) is not type and not name.startswith("__"):
            meta_attr, _ = class_lookup(type(cls), name)
            if meta_attr is not MISSING and not hasattr(type(meta_attr), "__get__"):
                # a plain value of the metaclass (a registry a metaclass's `__call__` fills)
                return frame.wrap(meta_attr, AttrSource(ClassSource(cls), name))
        if attr is MISSING and not hasattr(cls, name):
            frame.output.guards.attribute_absent(ClassSource(cls), cls, name)
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
        return super().getattr(frame, name)

    def _class_dict(self, frame: Frame) -> Variable:
        """`Cls.__dict__`: a view of the class's own namespace, read from it (its keys and the
        values used guarded), so changing the class recompiles."""
        cls = self.value
        if any(klass is cls for klass, _, _ in frame.output.side_effects.class_attributes.values()):
            raise Unsupported(f"{self.describe()}.__dict__ after this frame assigned an attribute of the class")
        return frame.wrap(cls.__dict__, AttrSource(ClassSource(cls), "__dict__"))

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`Cls.name = value`: replayed on the class after the graph, like other attribute
        writes; later reads in this trace see `value`."""
        cls = self.value
        if type(cls).__setattr__ is not type.__setattr__:
            raise Unsupported(f"setting {name!r} on {self.describe()}, whose metaclass defines __setattr__")
        if name.startswith("__") and name.endswith("__"):
            raise Unsupported(f"setting special attribute {name!r} on {self.describe()}")
        frame.output.side_effects.class_attribute_written(cls, name, value)


def new_object(frame: Frame, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`cls(*args, **kwargs)` for a user class whose instances are modelled objects (a builtin
    base of `_MODELLED_BASES` or an exception): a `NewObjectVariable` with `__init__` inlined.
    A metaclass's own `__call__` written in Python is inlined instead, with the class first (its
    `super().__call__(...)` comes back here, through `type.__call__`)."""
    meta_call = type(cls).__call__
    if meta_call is not type.__call__:
        if not isinstance(meta_call, types.FunctionType):
            raise Unsupported(f"class {cls.__qualname__} has a metaclass with its own __call__, not written in Python")
        class_attr_source(frame, type(cls), "__call__", meta_call)  # replacing it recompiles
        return frame.inline_call(meta_call, [class_variable(cls), *args], kwargs, closure=None)
    return type_call(frame, cls, args, kwargs)


def type_call(frame: Frame, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`type.__call__(cls, *args, **kwargs)`: `cls.__new__`, then `__init__` on what it made."""
    base = _builtin_base(cls)
    if base not in _MODELLED_BASES and not issubclass(base, BaseException):
        raise Unsupported(f"instances of {cls.__qualname__}, a subclass of builtin {base.__qualname__}")
    new, new_owner = class_lookup(cls, "__new__")
    if new_owner is not None and not _is_builtin_class(new_owner):
        return _call_own_new(frame, cls, new, args, kwargs)
    class_attr_source(frame, cls, "__new__", new)  # a `__new__` given to the class later recompiles
    if base is tuple:  # its items are given to `__new__`, which checks them as CPython's does
        obj = _sequence_new(frame, tuple, UserClassVariable(cls), args, kwargs)
    else:
        obj = _allocate(frame, cls, args)
    if issubclass(cls, BaseException):
        # what BaseException.__new__ sets, whether or not an __init__ calls the base one
        fields = {"args": _tuple(args), "__cause__": constant(None), "__context__": constant(None)}
        fields["__suppress_context__"] = constant(False)
        if issubclass(cls, StopIteration):
            fields["value"] = args[0] if args else constant(None)
        obj.attrs.items.update(fields)
    init, owner = class_lookup(cls, "__init__")
    if isinstance(init, types.FunctionType):
        class_attr_source(frame, cls, "__init__", init)  # replacing __init__ recompiles
        frame.inline_call(init, [obj, *args], kwargs, closure=None)
    else:
        class_attr_source(frame, cls, "__init__", init)  # as for `__new__`
        BaseMethodVariable(obj, owner or object, "__init__").call(frame, args, kwargs)
    return obj


def _allocate(frame: Frame, cls: type, args: list[Variable]) -> NewObjectVariable:
    """A new instance of `cls`, before any `__init__`: what its builtin base's `__new__` makes
    of `args` (a frozenset's members and a tuple's items are given there, every other base's
    are not)."""
    base = _builtin_base(cls)
    if issubclass(base, dict):
        return NewObjectVariable(cls, DictVariable({}, python_class=base))
    if base is frozenset:
        if len(args) > 1:
            raise raise_new(frame, TypeError, f"{cls.__name__} expected at most 1 argument, got {len(args)}")
        members = SetVariable.of(frame, args[0], frozenset) if args else SetVariable({}, frozenset)
        return NewObjectVariable(cls, members)
    if base is list:
        return NewObjectVariable(cls, ListVariable([]))
    if base is tuple:
        return NewObjectVariable(cls, TupleVariable(args[0].unpack(frame) if args else []))
    return NewObjectVariable(cls, SetVariable({}, set) if base is set else None)


def inline_own_new(
    frame: Frame, cls: type, new: Any, args: list[Variable], kwargs: dict[str, Variable]
) -> tuple[Variable, type]:
    """A `__new__` written in Python (the class's `new`), inlined with the class first: the
    object it returned and that object's type."""
    new = new.__func__ if isinstance(new, staticmethod) else new
    if not isinstance(new, types.FunctionType) or issubclass(cls, BaseException):
        raise Unsupported(f"class {cls.__qualname__} defines __new__")
    class_attr_source(frame, cls, "__new__", new)  # replacing __new__ recompiles
    obj = frame.inline_call(new, [class_variable(cls), *args], kwargs, closure=None)
    try:
        return obj, obj.python_type()
    except Unsupported:
        raise Unsupported(f"{cls.__qualname__}.__new__ returned {obj.describe()}, whose type is unknown") from None


def _call_own_new(frame: Frame, cls: type, new: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`cls(...)` of a class whose `__new__` is written in Python, as `type.__call__` runs it: the
    `__new__` inlined with the class first, then, if it returned an instance of `cls`, that
    instance's `__init__` with the same arguments."""
    obj, made = inline_own_new(frame, cls, new, args, kwargs)
    if not issubclass(made, cls):
        return obj  # type.__call__ calls no __init__ then
    init, owner = class_lookup(made, "__init__")
    if isinstance(init, types.FunctionType):
        class_attr_source(frame, made, "__init__", init)
        frame.inline_call(init, [obj, *args], kwargs, closure=None)
    elif owner is not object:
        BaseMethodVariable(obj, owner or object, "__init__").call(frame, args, kwargs)
    return obj


class ObjectVariable(Variable):
    """An instance of a user class, made while tracing (`NewObjectVariable`) or read from the
    frame (`frame_objects.UserObjectVariable`): the dunders its class writes in Python implement
    its protocols, and `object`'s attribute methods act on it when a class's own hooks call them
    (`object.__setattr__(self, name, value)`, `super().__getattribute__(name)`)."""

    def protocol_class(self) -> type | None:
        """The class whose dunders written in Python implement the object's protocols (`==`,
        `len()`, `in`), None where tracing models them itself (an nn.Module read from the frame)."""
        raise NotImplementedError

    def object_getattr(self, frame: Frame, name: str) -> Variable:
        """`object.__getattribute__`."""
        raise NotImplementedError

    def object_setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`object.__setattr__`."""
        raise NotImplementedError

    def object_delattr(self, frame: Frame, name: str) -> None:
        """`object.__delattr__`."""
        raise NotImplementedError


class NewObjectVariable(ObjectVariable):
    """An instance of a user class created while tracing."""

    def __init__(self, cls: type, items: Variable | None = None) -> None:
        self.cls = cls
        self.attrs = DictVariable({})  # the instance __dict__
        self.items = items  # the dict, set or list contents, for subclasses of those
        self.born = self.attrs.born

    def made_while_tracing(self) -> bool:
        return True

    def python_type(self) -> type:
        return self.cls

    def protocol_class(self) -> type | None:
        return self.cls

    def describe(self) -> str:
        args = self.attrs.items.get("args") if issubclass(self.cls, BaseException) else None
        if args is not None and args.is_constant() and isinstance(args.as_constant(), tuple):
            # the exception as its repr shows it, so an error naming it carries its message
            shown = ", ".join(repr(a) for a in args.as_constant())
            return f"{self.cls.__qualname__}({shown}) created while tracing"
        return f"{self.cls.__qualname__} object created while tracing"

    def set_contents(self) -> Variable | None:
        return self.items if isinstance(self.items, SetVariable) else None

    # -- attributes --------------------------------------------------------------------------

    def class_hook(self, frame: Frame, name: str) -> Variable | None:
        """The class's hook `name` (`__getattr__`, `__setattr__`, ...) bound to this object when it
        is written in Python (or emulated: `inherited_member`), None when it is a builtin's."""
        attr, owner = class_lookup(self.cls, name)
        if not isinstance(attr, types.FunctionType):
            return None
        return bind_class_attr(frame, self, self.cls, attr, owner, name)

    def inherited_member(self, frame: Frame, found_on: type, owner: type, name: str, attr: Any) -> Variable | None:
        """Class attribute `name` of `owner` (found through `found_on`) as this object models it
        instead of running it, or None: objects of plain classes model none."""
        return None

    def getattr(self, frame: Frame, name: str) -> Variable:
        hook = self.class_hook(frame, "__getattribute__")
        if hook is None:
            return self.object_getattr(frame, name)
        # a class's own lookup (configs mapping aliases): inlined; `super().__getattribute__`
        # inside it reaches `object_getattr`; an AttributeError from it falls back on `__getattr__`
        try:
            return hook.call(frame, [constant(name)], {})
        except (Unsupported, TracedException) as e:
            fallback = self.class_hook(frame, "__getattr__")
            if fallback is None or not is_attribute_error(e):
                raise
        return fallback.call(frame, [constant(name)], {})

    def object_getattr(self, frame: Frame, name: str) -> Variable:
        """`object.__getattribute__`, then the class's `__getattr__`."""
        if name == "__class__":
            return class_variable(self.cls)
        if name == "__dict__":
            return self.attrs
        attr, owner = class_lookup(self.cls, name)
        # slots of builtin bases (BaseException.args) and of `__slots__` classes are modelled
        # as plain attributes
        is_member = isinstance(attr, types.MemberDescriptorType)
        modelled_slot = owner is not None and (_is_builtin_class(owner) or is_member)
        if (modelled_slot or not is_data_descriptor(attr)) and name in self.attrs.items:
            return self.attrs.items[name]
        if is_member:
            raise Unsupported(
                f"{self.describe()} has no attribute {name!r} (unset slot)", kind=BreakKind.MISSING_ATTRIBUTE
            )
        pending = pending_class_attribute(frame, self.cls, name, through_instance=True)
        if pending is not None:
            return pending
        if attr is not MISSING:
            return bind_class_attr(frame, self, self.cls, attr, owner, name)
        hook = self.class_hook(frame, "__getattr__")
        if hook is not None:
            return hook.call(frame, [constant(name)], {})
        raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        hook = self.class_hook(frame, "__setattr__")
        if hook is not None:
            hook.call(frame, [constant(name), value], {})
            return
        self.object_setattr(frame, name, value)

    def object_setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`object.__setattr__`: a data descriptor's Python `__set__` (a property's setter)
        runs, anything else lands in `__dict__`."""
        attr, _ = class_lookup(self.cls, name)
        if isinstance(attr, types.MemberDescriptorType):
            self.attrs.items[name] = value  # a `__slots__` entry
            return
        if issubclass(self.cls, BaseException) and name in _EXCEPTION_LINKS:
            self._set_exception_link(frame, name, value)
            return
        if is_data_descriptor(attr):
            run_descriptor(frame, self.cls, name, attr, "__set__", self, [value])
            return
        if self.cls.__dictoffset__ == 0 and not issubclass(self.cls, BaseException):
            # only slots, no __dict__: Python refuses other names
            raise raise_new(frame, AttributeError, f"{self.cls.__qualname__!r} object has no attribute {name!r}")
        self.attrs.items[name] = value

    def _set_exception_link(self, frame: Frame, name: str, value: Variable) -> None:
        """`exc.__context__ = ...` (`__cause__`, `__traceback__`) on an exception made while
        tracing, checked as CPython checks it; a cause also suppresses the context."""
        kind = value.python_type()
        allowed = (types.TracebackType,) if name == "__traceback__" else (BaseException,)
        if not (kind is type(None) or issubclass(kind, allowed)):
            what = (
                "__traceback__ must be a traceback or None"
                if name == "__traceback__"
                else (f"exception {name[2:-2]} must be None or derive from BaseException")
            )
            raise raise_new(frame, TypeError, what)
        self.attrs.items[name] = value
        if name == "__cause__":
            self.attrs.items["__suppress_context__"] = constant(True)

    def delattr(self, frame: Frame, name: str) -> None:
        """`del obj.name`: the class's Python `__delattr__`, a data descriptor's `__delete__`
        (a property's deleter), or the attribute removed from the tracker."""
        hook = self.class_hook(frame, "__delattr__")
        if hook is not None:
            hook.call(frame, [constant(name)], {})
            return
        self.object_delattr(frame, name)

    def object_delattr(self, frame: Frame, name: str) -> None:
        """`object.__delattr__`."""
        attr, _ = class_lookup(self.cls, name)
        if is_data_descriptor(attr) and not isinstance(attr, types.MemberDescriptorType):
            run_descriptor(frame, self.cls, name, attr, "__delete__", self, [])
            return
        if name not in self.attrs.items:
            raise Unsupported(f"deleting missing attribute {name!r} of {self.describe()}")
        del self.attrs.items[name]

    # -- protocols -----------------------------------------------------------------------------

    def _dunder(self, frame: Frame, name: str, args: list[Variable]) -> Variable | None:
        """Call the class's `name` if it is written in Python (None when it is not)."""
        attr = python_dunder(frame, self, name)
        if attr is not None:
            return frame.inline_call(attr, [self, *args], {}, closure=None)
        return None

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        attr = python_dunder(frame, self, "__call__")
        if attr is not None:
            return frame.inline_call(attr, [self, *args], kwargs, closure=None)
        raise Unsupported(f"call of {self.describe()}, whose class has no __call__")

    def truth(self, frame: Frame) -> bool:
        for name in ("__bool__", "__len__"):
            result = self._dunder(frame, name, [])
            if result is not None:
                return dunder_truth(frame, self.python_type(), name, result)
        if self.items is not None:
            return self.items.truth(frame)
        return True

    def length(self, frame: Frame) -> int:
        result = self._dunder(frame, "__len__", [])
        if result is not None:
            return dunder_length(frame, self.python_type(), result)
        if self.items is not None:
            return self.items.length(frame)
        raise Unsupported(f"len() of {self.describe()}")

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        result = self._dunder(frame, "__getitem__", [key])
        if result is not None:
            return result
        if self.items is not None:
            return self.items.getitem(frame, key)
        raise Unsupported(f"indexing {self.describe()}")

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        """`item in obj` by the builtin base's `__contains__` (None where the class writes one)."""
        if self.items is None or python_dunder(frame, self, "__contains__") is not None:
            return None
        return self.items.contains(frame, item)

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        if self._dunder(frame, "__setitem__", [key, value]) is None:
            if self.items is None:
                raise Unsupported(f"item assignment on {self.describe()}")
            self.items.setitem(frame, key, value)

    def _by_index(self, frame: Frame) -> Variable | None:
        """The old sequence protocol's iterator, for a class with only `__getitem__`."""
        return getitem_iterator(frame, self, self.cls) if self.items is None else None

    def unpack(self, frame: Frame) -> list[Variable]:
        iterator = self._dunder(frame, "__iter__", [])
        if iterator is self:
            return SelfIteratorVariable(self).unpack(frame)
        if iterator is not None:
            return iterator.unpack(frame)
        if self.items is not None:
            return self.items.unpack(frame)
        by_index = self._by_index(frame)
        if by_index is None:
            raise Unsupported(f"iteration over {self.describe()}")
        return by_index.unpack(frame)

    def get_iter(self, frame: Frame) -> Variable | None:
        by_index = self._by_index(frame)
        if by_index is not None:
            return by_index
        if self.items is None:  # `__iter__` returning the object itself: stepped lazily
            iterator = self._dunder(frame, "__iter__", [])
            if iterator is self:
                return SelfIteratorVariable(self)
            if iterator is not None:
                return iterate(frame, iterator)
        elif isinstance(self.items, SetVariable) and python_dunder(frame, self, "__iter__") is None:
            return self.items.get_iter(frame)  # live: a change of size while iterating raises
        return super().get_iter(frame)

    # -- escaping ------------------------------------------------------------------------------

    def reconstruct(self, rebuild: Any) -> str:
        cls = rebuild.writer.bind(self.cls, "cls")
        # the builtin base's `__new__`: a class's own one (already run while tracing) may want
        # arguments or hand back another object; a frozenset's members, a tuple's items are
        # given to it
        base = _builtin_base(self.cls)
        new = rebuild.writer.bind(base.__new__, "new")
        members = ""
        if base is frozenset:
            members = f", ({self.items.rebuilt_members(rebuild)})"
        elif base is tuple:
            members = f", ({''.join(rebuild.expr(v) + ', ' for v in self.items.items)})"
        return rebuild.build_object(self, f"{new}({cls}{members})", lambda name: self.fill(rebuild, name))

    def fill(self, rebuild: Any, name: str) -> list[str]:
        """The statements giving the new real object `name` this tracker's contents."""
        lines = []
        if isinstance(self.items, SetVariable) and self.items.python_class is set:
            # set's own update adds them one by one in this tracker's order: the table it had
            update = rebuild.writer.bind(set.update, "update")
            lines.append(f"{update}({name}, ({self.items.rebuilt_members(rebuild)}))")
        elif isinstance(self.items, ListVariable):
            extend = rebuild.writer.bind(list.extend, "extend")
            lines.append(f"{extend}({name}, [{', '.join(rebuild.expr(v) for v in self.items.items)}])")
        elif isinstance(self.items, DictVariable):
            setitem = rebuild.writer.bind(self.items.python_class.__setitem__, "setitem")
            for k, v in self.items.items.items():
                lines.append(f"{setitem}({name}, {rebuild.constant(k)}, {rebuild.expr(v)})")
        in_dict = {k: v for k, v in self.attrs.items.items() if not _is_slot(self.cls, k)}
        if in_dict:
            fields = ", ".join(f"{k!r}: {rebuild.expr(v)}" for k, v in in_dict.items())
            lines.append(f"{name}.__dict__.update({{{fields}}})")
        setter = rebuild.writer.bind(object.__setattr__, "setattr")
        for k, v in self.attrs.items.items():
            if k not in in_dict:  # BaseException.args, __slots__: stored by their descriptor
                lines.append(f"{setter}({name}, {k!r}, {rebuild.expr(v)})")
        return lines


def _is_slot(cls: type, name: str) -> bool:
    """Whether `name` is stored by a C descriptor of `cls` (not in the instance `__dict__`)."""
    found = class_attribute(cls, name, None)
    return isinstance(found, (types.GetSetDescriptorType, types.MemberDescriptorType))


class BaseMethodVariable(Variable):
    """A C method of a modelled builtin base (`object.__setattr__`, `dict.__setitem__`,
    `BaseException.__init__`, ...) bound to a new object: emulated on the tracker."""

    def __init__(self, obj: Variable, owner: type, name: str) -> None:
        self.obj = obj
        self.owner = owner
        self.name = name

    def describe(self) -> str:
        return f"{self.owner.__qualname__}.{self.name} of {self.obj.describe()}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        method = getattr(self.owner, self.name)
        attr = bound_method_attribute(self.obj, method, name)
        return attr if attr is not None else super().getattr(frame, name)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        obj, name = self.obj, self.name
        if name == "__new__" and self.owner in _SEQUENCE_NEW:
            return _sequence_new(frame, self.owner, obj, args, kwargs)
        if name == "__new__" and isinstance(obj, UserClassVariable) and not args and not kwargs:
            # `object.__new__(cls)`, `super().__new__(cls)` in a class's own `__new__` (with
            # more arguments CPython raises: left to it)
            # (an OrderedDict subclass reaches dict's: OrderedDict has no `__new__` of its own)
            if _builtin_base(obj.value).__new__ is not self.owner.__new__ or issubclass(obj.value, BaseException):
                raise Unsupported(f"{self.describe()} of a subclass of {self.owner.__qualname__}")
            return _allocate(frame, obj.value, [])
        if name == "__call__" and self.owner is type and isinstance(obj, UserClassVariable):
            return type_call(frame, obj.value, args, kwargs)  # `super().__call__()` in a metaclass
        if name in ("__instancecheck__", "__subclasscheck__") and self.owner is type and len(args) == 1 and not kwargs:
            # `super().__instancecheck__(x)` in a metaclass (torch's `Buffer`): type's own test,
            # the exact class or a subclass, no metaclass hook
            cls = obj.value if isinstance(obj, UserClassVariable) else obj.as_constant()
            tested = args[0].python_type() if name == "__instancecheck__" else args[0].as_constant()
            if isinstance(cls, type) and isinstance(tested, type):
                return constant(issubclass(tested, cls))
        if name == "__new__" and self.owner is dict and not args and not kwargs:
            made = getattr(obj, "fn", None)  # `dict.__new__(dict)`: an empty dict
            if made in (dict, collections.OrderedDict):
                return DictVariable({}, python_class=made)
        if not isinstance(obj, NewObjectVariable):
            if name in _DICT_METHODS and issubclass(self.owner, dict) and obj.source is not None:
                return _contents_method(frame, dict_contents(frame, obj), name, args, kwargs)
            if name in _LIST_METHODS and self.owner is list and obj.source is not None:
                return _contents_method(frame, list_contents(frame, obj), name, args, kwargs)
            # an outside object of a plain class (an nn.Module read from the frame has none)
            plain = isinstance(obj, ObjectVariable) and obj.protocol_class() is not None
            if plain and self.owner is object and not kwargs and len(args) == _ATTRIBUTE_ARITY.get(name):
                attr = args[0].as_constant()
                if name == "__getattribute__":
                    return obj.object_getattr(frame, attr)
                if name == "__setattr__":
                    obj.object_setattr(frame, attr, args[1])
                else:
                    obj.object_delattr(frame, attr)
                return constant(None)
            raise Unsupported(f"{self.describe()}")
        if name == "__init__":
            if issubclass(self.owner, BaseException):
                obj.attrs.items["args"] = _tuple(args)
            elif obj.items is not None and self.owner is not object:
                if self.owner in (set, list):  # empties it, then adds its one argument's items
                    kind = self.owner.__name__
                    if kwargs:
                        raise raise_new(frame, TypeError, f"{kind}() takes no keyword arguments")
                    if len(args) > 1:
                        raise raise_new(frame, TypeError, f"{kind} expected at most 1 argument, got {len(args)}")
                    obj.items.call_method(frame, "clear", [], {})
                    if self.owner is list and args:
                        obj.items.call_method(frame, "extend", args, {})
                if self.owner is not list:
                    obj.items.call_method(frame, "update", args, kwargs)
            elif (args or kwargs) and _builtin_base(obj.cls) not in (frozenset, tuple):
                # (object.__init__ ignores the arguments a class's own __new__ took: frozenset's, tuple's)
                raise Unsupported(f"{obj.cls.__qualname__}() takes no arguments")
            return constant(None)
        if name == "__setattr__" and len(args) == 2:
            obj.object_setattr(frame, args[0].as_constant(), args[1])
            return constant(None)
        if name == "__getattribute__" and len(args) == 1:
            return obj.object_getattr(frame, args[0].as_constant())
        if name == "__delattr__" and len(args) == 1:
            obj.object_delattr(frame, args[0].as_constant())
            return constant(None)
        if name in ("__eq__", "__ne__") and len(args) == 1 and self.owner is object:
            same = args[0] is obj
            return constant(same if name == "__eq__" else not same)
        if name == "__str__" and issubclass(self.owner, BaseException):
            return constant(str(_exception_value(obj)))
        if name == "with_traceback" and issubclass(self.owner, BaseException) and _is_none(args):
            return obj  # `exc.with_traceback(None)` (unittest's assertRaises): the trace keeps none
        if name == "__repr__" and issubclass(self.owner, BaseException):
            return constant(repr(_exception_value(obj)))
        if obj.items is not None and self.owner is not object:
            result = _contents_method(frame, obj.items, name, args, kwargs)
            in_place = name in ("__ior__", "__iand__", "__isub__", "__ixor__")
            return obj if in_place and result is obj.items else result  # `s.__ior__(t)` gives `s` back
        raise Unsupported(f"{self.describe()} with {len(args)} arguments")


# builtin sequences whose `__new__` called directly (`tuple.__new__(cls, items)`) is modelled
_SEQUENCE_NEW = (list, tuple)


def _sequence_new(
    frame: Frame, owner: type, cls_var: Variable, args: list[Variable], kwargs: dict[str, Variable]
) -> Variable:
    """`list.__new__(cls, ...)` / `tuple.__new__(cls, items)`: an empty list (list's `__new__`
    ignores its other arguments; `__init__` fills it), or a tuple of the items, of class `cls`.
    CPython's errors (a class that is not a subtype, keywords or a second argument for tuple)
    are found by calling the real `__new__` on stand-in arguments, which runs no Python code."""
    cls = cls_var.value if isinstance(cls_var, UserClassVariable) else cls_var.as_constant()
    try:
        owner.__new__(cls, *[()] * len(args), **dict.fromkeys(kwargs, ()))
    except TypeError as e:
        raise_python_error(frame, e)
    if owner is tuple and cls is tuple:
        return TupleVariable(args[0].unpack(frame) if args else [])
    if cls is list:
        return ListVariable([])
    if is_namedtuple_class(cls) or _builtin_base(cls) not in _MODELLED_BASES:
        raise Unsupported(f"{owner.__qualname__}.__new__ of class {cls.__qualname__}")
    return _allocate(frame, cls, args if owner is tuple else [])


def _is_none(args: list[Variable]) -> bool:
    return len(args) == 1 and args[0].is_constant() and args[0].as_constant() is None


def _contents_method(
    frame: Frame, items: Variable, name: str, args: list[Variable], kwargs: dict[str, Variable]
) -> Variable:
    """A C method of dict or set called on the contents (`items`) of a dict or set subclass
    instance."""
    if name == "__setitem__":
        items.setitem(frame, *args)
        return constant(None)
    if name == "__getitem__":
        return items.getitem(frame, args[0])
    if name == "__delitem__":
        items.call_method(frame, "pop", args, {})
        return constant(None)
    if name == "__len__":
        return constant(items.length(frame))
    if name == "__iter__":
        return IteratorVariable(items.unpack(frame))
    return items.call_method(frame, name, args, kwargs)


# `object`'s attribute methods called on an outside object (a class's hook calling its base)
_ATTRIBUTE_ARITY = {"__getattribute__": 1, "__setattr__": 2, "__delattr__": 1}
# dict's methods on an outside dict subclass instance, which act on its real contents
_DICT_METHODS = {
    *("get", "keys", "values", "items", "__getitem__", "__contains__", "__len__", "__iter__"),
    *("__setitem__", "__delitem__", "pop", "setdefault", "update", "clear"),
}


# list's methods on an outside list subclass instance, which act on its real items
_LIST_METHODS = {
    *("append", "extend", "insert", "pop", "remove", "clear", "index", "count", "reverse", "copy"),
    *("__getitem__", "__setitem__", "__delitem__", "__len__", "__iter__", "__contains__"),
}


def contents_method(obj: Variable, cls_attr: Any, name: str) -> Variable | None:
    """`obj.keys` (and the other methods of `_DICT_METHODS`) of an outside dict subclass instance
    whose class inherits the method from `dict`/`OrderedDict`, or `obj.append` (`_LIST_METHODS`)
    of a list subclass instance that inherits it from `list`: bound to its real contents."""
    for owner, names in ((collections.OrderedDict, _DICT_METHODS), (dict, _DICT_METHODS), (list, _LIST_METHODS)):
        if name in names and cls_attr is owner.__dict__.get(name):
            return BaseMethodVariable(obj, owner, name)
    return None


def dict_contents(frame: Frame, obj: Variable) -> Variable:
    """The contents of an outside dict subclass instance, read through its source (keys
    guarded): one tracker per object for the whole trace, so a change made through dict's
    methods is seen by later reads and replayed on the object after the graph."""
    real = obj.value_object
    known = frame.output.known_container(real, obj.source)
    if known is not None:
        return known
    if not all(is_literal(k) for k in real):
        raise Unsupported(f"{obj.describe()} has non-constant keys")
    frame.output.guards.dict_keys_match(obj.source, real)
    # an OrderedDict keeps its own order (`move_to_end`), which `dict.keys` does not see
    keys = collections.OrderedDict.keys(real) if isinstance(real, collections.OrderedDict) else dict.keys(real)
    items = {k: frame.wrap(dict.__getitem__(real, k), ItemSource(obj.source, k)) for k in keys}
    contents = DictContentsVariable(items, obj.source, python_class=_builtin_base(type(real)))
    return frame.output.register_container(real, contents)


def list_contents(frame: Frame, obj: Variable) -> Variable:
    """The items of an outside list subclass instance, read through its source (its length
    guarded): one tracker per object, changes made through list's methods replayed on it after
    the graph. A class with its own `__len__`, `__getitem__` or `__iter__` is refused: the
    guards and the reads of the items would run them."""
    real = obj.value_object
    known = frame.output.known_container(real, obj.source)
    if known is not None:
        return known
    cls = type(real)
    for name in ("__len__", "__getitem__", "__iter__"):
        if class_attribute(cls, name, None) is not list.__dict__[name]:
            raise Unsupported(f"{obj.describe()}: a list subclass with its own {name}, passed in")
    frame.output.guards.length_match(obj.source, real)
    items = [frame.wrap(list.__getitem__(real, i), ItemSource(obj.source, i)) for i in range(list.__len__(real))]
    return frame.output.register_container(real, ListContentsVariable(items, obj.source))


def _tuple(items: list[Variable]) -> Variable:
    return TupleVariable(items)


def _exception_value(obj: NewObjectVariable) -> BaseException:
    """A real exception equal to a traced one (its args must be constants)."""
    args = obj.attrs.items.get("args")
    value = obj.cls.__new__(obj.cls)
    value.args = args.as_constant() if args is not None else ()
    return value


class SuperVariable(Variable):
    """`super()` / `super(cls, obj)`: attribute lookups start after `cls` in `type(obj).__mro__`."""

    def __init__(self, cls: type, obj: Variable) -> None:
        self.cls = cls
        self.obj = obj

    def _bound_class(self) -> type | None:
        """The class `obj` is when it is a subclass of `cls` (`super()` in a classmethod, called
        through the class or an instance): lookups then follow its own `__mro__`."""
        obj = self.obj
        value = obj.value if isinstance(obj, UserClassVariable) else obj.value_object
        if value is None and obj.is_constant():
            value = obj.as_constant()
        return value if isinstance(value, type) and issubclass(value, self.cls) else None

    def describe(self) -> str:
        return f"super({self.cls.__qualname__}, {self.obj.describe()})"

    def getattr(self, frame: Frame, name: str) -> Variable:
        bound_class = self._bound_class()
        obj_type = bound_class if bound_class is not None else self.obj.python_type()
        if self.cls not in obj_type.__mro__:
            raise Unsupported(f"super({self.cls.__qualname__}, obj): obj is not an instance")
        attr, owner = class_lookup(obj_type, name, after=self.cls)
        if attr is MISSING:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
        if isinstance(self.obj, TensorVariable) and owner in _TENSOR_CLASSES:
            return self.obj.tensor_attribute(frame, name, through_super=True)  # a subclass's override
        if bound_class is not None and isinstance(attr, classmethod):
            return UserMethodVariable(attr.__func__, self.obj)
        if isinstance(attr, types.FunctionType) or isinstance(attr, (property, staticmethod, classmethod)):
            return bind_class_attr(frame, self.obj, obj_type, attr, owner, name, via_super=True)
        if owner is not None and _is_builtin_class(owner):
            if name == "__new__":  # a static method: the class is passed explicitly
                return UnboundBaseMethodVariable(owner, name)
            return BaseMethodVariable(self.obj, owner, name)
        return bind_class_attr(frame, self.obj, obj_type, attr, owner, name, via_super=True)


def class_variable(cls: type) -> Variable:
    """The tracker of a class met while tracing (`type(obj)`, `obj.__class__`): torch's modelled
    classes keep their tracker, so `self.__class__()` of a `no_grad` object makes a grad context."""
    if cls in TORCH_CLASSES:
        return TorchClassVariable(cls)
    return UserClassVariable(cls) if is_user_class(cls) else constant(cls)


def python_dunder(frame: Frame, var: Variable, name: str) -> types.FunctionType | None:
    """The Python function implementing dunder `name` for a user object's tracker, if any
    (guarded on its class either way: `descriptors.class_dunder`)."""
    cls = var.protocol_class() if isinstance(var, ObjectVariable) else None
    return class_dunder(frame, cls, name) if cls is not None else None


# an exception's links to other objects, which code sets (`contextlib` restores `__traceback__`)
_EXCEPTION_LINKS = frozenset({"__context__", "__cause__", "__traceback__"})


def dunder_truth(frame: Frame, cls: type, name: str, result: Variable) -> bool:
    """`bool(obj)` of an instance of `cls` from what its `__bool__` or `__len__` (`name`)
    returned, refused where CPython refuses it (a `__bool__` result that is not a bool)."""
    if name == "__len__":
        return dunder_length(frame, cls, result) > 0
    if result.python_type() is bool:
        return result.truth(frame)
    if not result.is_constant():
        raise Unsupported(f"{cls.__qualname__}.__bool__ returned {result.describe()}, which is not a bool")
    raise _refusal(frame, cls, name, result.as_constant(), bool)


def dunder_length(frame: Frame, cls: type, result: Variable) -> int:
    """`len(obj)` of an instance of `cls` from what its `__len__` returned: an integer >= 0, or
    CPython's error."""
    value = result.as_constant()
    if hasattr(type(value), "__index__") and operator.index(value) >= 0:
        return operator.index(value)
    raise _refusal(frame, cls, "__len__", value, len)


def _refusal(frame: Frame, cls: type, name: str, value: Any, use: Any) -> TracedException:
    """The error CPython raises where `cls.<name>` returns `value` to `use` (`bool`, `len`),
    with its wording, which differs between versions (taken from CPython itself, on a stand-in
    class of the same name)."""
    stand_in = type(cls.__name__, (), {name: lambda self: value})
    stand_in.__qualname__, stand_in.__module__ = cls.__qualname__, cls.__module__
    try:
        use(stand_in())
    except (TypeError, ValueError, OverflowError) as e:
        return raise_new(frame, type(e), str(e))
    raise Unsupported(f"{cls.__qualname__}.{name} returned {value!r}")  # not reached: CPython refuses it


def zero_arg_super(frame: Frame) -> SuperVariable:
    """`super()` with no arguments: the enclosing class from the `__class__` cell and the frame's
    first argument, as CPython finds them."""
    # CPython's errors, in its order, raised in the program (a graph break would run the call
    # where no `__class__` cell is, with another message)
    if frame.code.co_argcount == 0:
        raise raise_new(frame, RuntimeError, "super(): no arguments")
    if frame.cells.get("__class__") is None:
        raise raise_new(frame, RuntimeError, "super(): __class__ cell not found")
    cls = frame.load_cell("__class__").as_constant()
    first = frame.code.co_varnames[0]
    obj = frame.load_cell(first) if first in frame.cells else frame.load_local(first)
    return SuperVariable(cls, obj)


def dataclass_fields(frame: Frame, obj: Variable) -> Variable:
    """`dataclasses.fields(x)`: the Field objects are fixed per class, so a constant."""
    cls = obj.as_constant() if obj.is_constant() and isinstance(obj.as_constant(), type) else obj.python_type()
    return ConstantVariable(dataclasses.fields(cls))


class UnboundBaseMethodVariable(Variable):
    """`object.__setattr__` / `dict.__setitem__` taken from the builtin class and called with the
    instance first (frozen dataclasses' `__init__` does this)."""

    def __init__(self, owner: type, name: str) -> None:
        self.owner = owner
        self.name = name

    def describe(self) -> str:
        return f"{self.owner.__qualname__}.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args:
            raise Unsupported(f"{self.describe()} called without an instance")
        return BaseMethodVariable(args[0], self.owner, self.name).call(frame, args[1:], kwargs)
