"""Trackers for objects read from the frame: nn.Modules, Python modules and other user objects.

Attribute reads resolve the way Python would (`class_lookup`'s order, and for modules the
`_parameters` / `_buffers` / `_modules` tables), and every value read is wrapped with a source so
it is guarded: change `self.scale` and the entry's guards fail instead of returning stale results.
"""

from __future__ import annotations

import _thread
import inspect
import types
import warnings
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.symbolic_shapes import guard_int
from torch.nn.modules.lazy import LazyModuleMixin
from torch.utils._config_module import ConfigModule

from ..errors import BreakKind, TraceAgain, Unsupported
from ..graph.side_effects import DELETED, INSTANCE_DICT, PLAIN, RAW, object_key
from ..guards.sources import (
    MODULE_TABLES,
    AttrSource,
    ClassSource,
    FixedObjectSource,
    GlobalSource,
    InstanceDictSource,
    ItemSource,
    ModuleMemberSource,
    WeakrefTargetSource,
)
from ..marks import is_disabled
from ..module_hooks import HOOK_TABLES, global_hook_ids, has_backward_hooks, has_global_hooks, has_module_hooks
from .base import Variable
from .class_lookup import MISSING, class_attribute, class_lookup
from .constants import C_FIELD_DESCRIPTORS, BoundMethodVariable, FieldGetVariable, IteratorVariable, constant
from .containers import (
    DictVariable,
    DictViewVariable,
    ListVariable,
    LiveContainerIteratorVariable,
    TupleVariable,
    key_tracker,
)
from .descriptors import (
    class_attr_source,
    class_member,
    has_python_method,
    is_data_descriptor,
    is_instance_method,
    precedes_instance_dict,
    run_descriptor,
)
from .exceptions import TracedException, is_attribute_error, raise_new
from .functions import UserFunctionVariable
from .module_slices import slice_or_member
from .sequence_protocol import getitem_iterator
from .symbolic import GraphValueVariable
from .tensor import TensorVariable
from .trace_rules import is_literal, is_namedtuple_class, is_trusted_module
from .user_classes import (
    ObjectVariable,
    UnboundBaseMethodVariable,
    class_variable,
    contents_method,
    dunder_length,
    dunder_truth,
    pending_class_attribute,
    python_dunder,
)

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

_WALKS = frozenset(
    {"modules", "named_modules", "parameters", "named_parameters", "buffers", "named_buffers", "named_children"}
)


# attributes of the C part of an autograd.Function's ctx that its backward reads
_BACKWARD_CTX_READS = frozenset({"saved_tensors", "needs_input_grad"})


def _walk_options(name: str, args: list[Variable], kwargs: dict[str, Variable]) -> dict[str, Any]:
    """The `prefix` / `recurse` arguments of a module-tree method, as constants; any other
    argument (a `memo`, `remove_duplicate=False`) is a graph break."""
    try:
        values = [a.as_constant() for a in args]
        bound = inspect.signature(getattr(torch.nn.Module, name)).bind(
            None, *values, **{k: v.as_constant() for k, v in kwargs.items()}
        )
    except (TypeError, Unsupported) as e:
        raise Unsupported(f"nn.Module.{name}() with these arguments: {e}") from e
    options = dict(bound.arguments)
    del options["self"]
    if options.pop("remove_duplicate", True) is not True or options.pop("memo", None) is not None:
        raise Unsupported(f"nn.Module.{name}() with remove_duplicate=False or a memo")
    if not isinstance(options.get("prefix", ""), str) or not isinstance(options.get("recurse", True), bool):
        raise Unsupported(f"nn.Module.{name}() with a prefix that is not a string or recurse not a bool")
    return options


def guard_not_shadowed(frame: Frame, obj: Variable, name: str) -> None:
    """Guard that the instance `__dict__` of `obj` (an outside object) does not hold `name`, so
    the class attribute read through it stays the one Python finds (`op.go = ...` recompiles)."""
    real = obj.value_object
    if obj.source is None or not isinstance(getattr(real, "__dict__", None), dict):
        return
    if frame.output.side_effects.pending_attribute(obj, name) is DELETED:
        return  # the trace deleted it: its presence before was guarded
    text = f"{obj.source.name()}.__dict__ lacks {name!r} (class attribute {type(real).__qualname__}.{name})"
    frame.output.guards.key_absent(AttrSource(obj.source, "__dict__"), name, text)


def _resolve_class_attr(frame: Frame, obj_var: Variable, obj: Any, name: str) -> Variable | None:
    """Class-level attribute `name` seen through `obj`: methods bind, properties run.

    The class attribute is guarded on the class (`Op.go` replaced recompiles), and, for anything
    but a data descriptor, the instance `__dict__` is guarded not to shadow it (`op.go = ...`).
    """
    if name == "__class__":
        return class_variable(type(obj))
    cls = type(obj)
    pending = pending_class_attribute(frame, cls, name, through_instance=True)
    if pending is not None:
        guard_not_shadowed(frame, obj_var, name)
        return pending
    cls_attr = class_attribute(cls, name)
    if cls_attr is MISSING:
        return None
    is_exception_field = isinstance(cls_attr, types.GetSetDescriptorType) and isinstance(obj, BaseException)
    if (isinstance(cls_attr, types.MemberDescriptorType) or is_exception_field) and obj_var.source is not None:
        # a __slots__ attribute or an exception's `args` / `__cause__`: read like an instance
        # attribute, guarded through its source; a slot this trace deleted is unset (F20)
        if frame.output.side_effects.pending_attribute(obj_var, name) is DELETED:
            raise Unsupported(
                f"{type(obj).__qualname__} object has no attribute {name!r} (slot deleted)",
                kind=BreakKind.MISSING_ATTRIBUTE,
            )
        try:
            value = getattr(obj, name)
        except AttributeError:
            frame.output.guards.attribute_absent(obj_var.source, obj, name)
            raise Unsupported(
                f"{type(obj).__qualname__} object has no attribute {name!r} (unset slot)",
                kind=BreakKind.MISSING_ATTRIBUTE,
            ) from None
        return frame.wrap(value, AttrSource(obj_var.source, name))
    if name == "__dict__":
        raise Unsupported(
            f"dynamic attribute access through {type(obj).__qualname__}.__dict__",
            hint="use getattr(obj, name): attribute lookups are traced and guarded",
        )
    if isinstance(obj, (dict, list)) and obj_var.source is not None:
        # `output.keys()` of a dict subclass (HuggingFace's ModelOutput), `procs.append` of a list
        # subclass: the real contents, guarded
        method = contents_method(obj_var, cls_attr, name)
        if method is not None:
            return method
    known = (property, staticmethod, classmethod, types.FunctionType, int, float, str, bool, tuple)
    if not precedes_instance_dict(cls_attr):
        guard_not_shadowed(frame, obj_var, name)
    if is_instance_method(cls_attr) and obj_var.source is not None:
        # a pybind11 class's method (`reducer.prepare_for_forward`): bound for real, as nothing
        # runs, and guarded through the attribute; calling it is the graph break
        return frame.wrap(cls_attr.__get__(obj, cls), AttrSource(obj_var.source, name))
    if isinstance(cls_attr, property) and is_instance_method(cls_attr.fget) and obj_var.source is not None:
        # a pybind11 property (a C++ field or getter, no Python to trace): read for real, as
        # torch.compile reads it, and guarded through the attribute (read again on each call)
        return frame.wrap(getattr(obj, name), AttrSource(obj_var.source, name))
    if hasattr(cls_attr, "__get__") and not isinstance(cls_attr, known):
        if isinstance(obj, torch._C._FunctionBase) and name in _BACKWARD_CTX_READS and obj_var.source is not None:
            # an autograd.Function's backward compiled on its own is handed the real ctx: what
            # forward saved and which inputs need a gradient are read for real, guarded through
            # the attribute (reading them has no effect; eager's errors, a saved tensor changed
            # in place or freed, are raised here as in eager)
            return frame.wrap(getattr(obj, name), AttrSource(obj_var.source, name))
        if name == "__get__" and isinstance(obj, C_FIELD_DESCRIPTORS) and obj_var.source is not None:
            frame.output.guards.id_match(obj_var.source, obj)
            return FieldGetVariable(obj, AttrSource(obj_var.source, name))
        if not has_python_method(cls_attr, "__get__"):
            raise Unsupported(f"descriptor {name!r} of {type(obj).__qualname__}")
        return run_descriptor(frame, cls, name, cls_attr, "__get__", obj_var, [class_variable(cls)])
    source = class_attr_source(frame, cls, name, cls_attr)
    return class_member(frame, obj_var, class_variable(cls), cls_attr, name, source)


def _object_truth(frame: Frame, var: Variable) -> bool:
    """`bool(obj)` for an outside object: its class's Python `__bool__` or `__len__` inlined, or
    True when it has neither (guarded: a class that gains one later recompiles)."""
    obj = var.value_object
    cls = type(obj)
    for name in ("__bool__", "__len__"):
        attr = class_attribute(cls, name)
        if attr is MISSING:
            frame.output.guards.attribute_absent(ClassSource(cls), cls, name)
            continue
        if not isinstance(attr, types.FunctionType):
            raise Unsupported(f"truth value of {var.describe()}, whose class defines {name} in C")
        class_attr_source(frame, cls, name, attr)
        return dunder_truth(frame, cls, name, frame.inline_call(attr, [var], {}, closure=None))
    return True


# builtin classes whose attribute hooks, though slots of their own, are `object`'s generic lookup
# and storage (`threading.local`'s in the calling thread's own dict, which guards read too)
_GENERIC_ATTRIBUTES = (object, dict, list, tuple, types.SimpleNamespace, BaseException, _thread._local)
# dict's C methods an attribute dict uses as its hooks (`__setattr__ = dict.__setitem__`)
_DICT_HOOKS = (dict.__getitem__, dict.__setitem__, dict.__delitem__)


def _own_hook(cls: type, name: str) -> bool:
    """Whether `cls` has an attribute hook `name` of its own (not `object`'s generic one)."""
    hook = class_attribute(cls, name)
    return hook is not MISSING and not any(hook is klass.__dict__.get(name) for klass in _GENERIC_ATTRIBUTES)


class UserObjectVariable(ObjectVariable):
    """An arbitrary Python object from the frame (configs, plain classes)."""

    def __init__(self, obj: Any, source: Source | None, guard_on_use: Any = None) -> None:
        self.value_object = obj
        self.source = source
        # installs the type guard the first time the object is looked into (an object only
        # passed along, e.g. to an eager call, needs none)
        self._guard_on_use = guard_on_use

    def _use(self) -> None:
        if self._guard_on_use is not None:
            install, self._guard_on_use = self._guard_on_use, None
            install()

    def python_type(self) -> type:
        self._use()
        return type(self.value_object)

    def protocol_class(self) -> type | None:
        obj = self.value_object
        return None if isinstance(obj, torch.nn.Module) else type(obj)

    def describe(self) -> str:
        return f"{type(self.value_object).__qualname__} object"

    def truth(self, frame: Frame) -> bool:
        self._use()
        return _object_truth(frame, self)

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """Attribute writes are replayed on the real object after the graph; a class's own
        `__setattr__` (configs mapping aliases, attribute dicts) is inlined, and its
        `super().__setattr__` lands in `object_setattr`."""
        hook = self._attribute_hook(frame, "__setattr__")
        if hook is not None:
            frame.output.side_effects.changed_through_hook(self)
            hook.call(frame, [self, constant(name), value], {})
            return
        self.object_setattr(frame, name, value)

    def delattr(self, frame: Frame, name: str) -> None:
        """`del obj.name`: the class's own `__delattr__` inlined, else `object_delattr`."""
        hook = self._attribute_hook(frame, "__delattr__")
        if hook is not None:
            frame.output.side_effects.changed_through_hook(self)
            hook.call(frame, [self, constant(name)], {})
            return
        self.object_delattr(frame, name)

    def _attribute_hook(self, frame: Frame, name: str) -> Variable | None:
        """The class's own attribute hook `name` (`__getattribute__`, `__getattr__`,
        `__setattr__`, `__delattr__`) as a tracker to call with the object first: a Python
        function (guarded by identity), or one of dict's C methods standing in for it in an
        attribute dict (`__getattr__ = dict.__getitem__`); None when the class has none of its
        own. Any other hook in C is Unsupported."""
        self._use()
        cls = type(self.value_object)
        hook = class_attribute(cls, name)
        if not _own_hook(cls, name):
            return None
        if isinstance(hook, types.FunctionType):
            return UserFunctionVariable(hook, class_attr_source(frame, cls, name, hook))
        if isinstance(self.value_object, dict) and hook in _DICT_HOOKS:
            frame.output.guards.id_match(AttrSource(ClassSource(cls), name), hook)
            return UnboundBaseMethodVariable(dict, hook.__name__)
        raise Unsupported(f"{name} of {self.describe()} is implemented in C")

    def object_setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`object.__setattr__`: a data descriptor's Python `__set__` (a property's setter)
        runs; anything else is a plain attribute, replayed on the real object after the graph
        (through `object.__setattr__` where the class has its own, which already ran)."""
        cls = type(self.value_object)
        cls_attr = class_attribute(cls, name)
        # a slot (member descriptor) stores like an instance attribute
        if is_data_descriptor(cls_attr) and not isinstance(cls_attr, types.MemberDescriptorType):
            run_descriptor(frame, cls, name, cls_attr, "__set__", self, [value])
            return
        keep_instance_dict_apart(frame, self, writing=True)
        store = RAW if _own_hook(cls, "__setattr__") else PLAIN
        frame.output.side_effects.attribute_written(self, name, value, store=store)

    def object_delattr(self, frame: Frame, name: str) -> None:
        """`object.__delattr__`: a data descriptor's Python `__delete__` (a property's deleter)
        runs; a plain attribute is deleted after the graph. Its presence is guarded, or the
        traced program gets Python's AttributeError."""
        obj = self.value_object
        cls = type(obj)
        cls_attr = class_attribute(cls, name)
        if is_data_descriptor(cls_attr) and not isinstance(cls_attr, types.MemberDescriptorType):
            run_descriptor(frame, cls, name, cls_attr, "__delete__", self, [])
            return
        pending = frame.output.side_effects.pending_attribute(self, name)
        instance_dict = getattr(obj, "__dict__", None)
        if pending is None and self.source is not None and isinstance(cls_attr, types.MemberDescriptorType):
            # a `__slots__` entry: whether it holds a value, read through the slot (F17)
            try:
                cls_attr.__get__(obj, cls)
            except AttributeError:
                frame.output.guards.attribute_absent(self.source, obj, name)
            else:
                frame.output.guards.slot_set(self.source, cls_attr, name)
                pending = constant(None)
        elif pending is None and self.source is not None and isinstance(instance_dict, dict):
            dict_source = AttrSource(self.source, "__dict__")
            text = f"{self.source.name()}.__dict__ {{}} {name!r}"
            if name in instance_dict:
                frame.output.guards.key_present(dict_source, name, text.format("holds"))
                pending = constant(None)
            else:
                frame.output.guards.key_absent(dict_source, name, text.format("lacks"))
        if pending is None or pending is DELETED:
            raise raise_new(frame, AttributeError, name)
        keep_instance_dict_apart(frame, self, writing=True)
        store = RAW if _own_hook(cls, "__delattr__") else PLAIN
        frame.output.side_effects.attribute_written(self, name, DELETED, store=store)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if not self._traces_reads(frame):
            return self._lookup(frame, name, computed=True)
        # the class computes reads, and the trace changed the object: its `__getattribute__` and
        # `__getattr__` are inlined, so what they compute sees the trace's writes
        return self._hooked_getattr(frame, name)

    def _hooked_getattr(self, frame: Frame, name: str) -> Variable:
        """The read through the class's own `__getattribute__` and `__getattr__`, inlined."""
        getattribute = self._attribute_hook(frame, "__getattribute__")
        fallback = self._attribute_hook(frame, "__getattr__")
        try:
            if getattribute is not None:
                return getattribute.call(frame, [self, constant(name)], {})
            return self._lookup(frame, name, computed=False)
        except (Unsupported, TracedException) as e:
            if fallback is None or not is_attribute_error(e):
                raise
        return fallback.call(frame, [self, constant(name)], {})

    def _traces_reads(self, frame: Frame) -> bool:
        """Whether attribute reads run the class's own lookup hooks in the trace rather than
        for real (reading for real, guarded, is cheaper to trace and needs none of the hooks'
        code to be traceable): the class has one, and the trace changed the object already."""
        cls = type(self.value_object)
        if not (_own_hook(cls, "__getattribute__") or _own_hook(cls, "__getattr__")):
            return False
        return frame.output.side_effects.wrote_to(self)

    def object_getattr(self, frame: Frame, name: str) -> Variable:
        """`object.__getattribute__` (a class's own `__getattribute__` calling its base): the
        instance `__dict__` and the class, without the class's computed attributes."""
        return self._lookup(frame, name, computed=False)

    def _lookup(self, frame: Frame, name: str, computed: bool) -> Variable:
        self._use()
        keep_instance_dict_apart(frame, self, writing=False)
        obj = self.value_object
        cls_attr = class_attribute(type(obj), name)
        # a slot or a C field keeps its pending value under its name, as a dict entry does
        descriptor_first = precedes_instance_dict(cls_attr) and not isinstance(cls_attr, C_FIELD_DESCRIPTORS)
        pending = frame.output.side_effects.pending_attribute(self, name)
        if pending is not None and pending is not DELETED and not descriptor_first:
            return pending
        instance_dict = object_instance_dict(obj)
        if name == "__dict__" and isinstance(instance_dict, dict) and self.source is not None:
            return InstanceDictVariable(self, frame)
        in_dict = pending is None and instance_dict is not None and name in instance_dict
        if in_dict and computed and type(obj).__getattribute__ is not object.__getattribute__:
            # the class's own lookup may answer another attribute than the dict entry (an alias
            # config's `size` is its `a`, whatever `__dict__['size']` holds): the entry stands
            # for the read only where the lookup finds that very object (F23)
            try:
                in_dict = getattr(obj, name) is instance_dict[name]
            except AttributeError:
                in_dict = False
        if in_dict and not descriptor_first:
            source = None
            # `obj.name` in a guard would run a non-data descriptor of the class once the entry is
            # gone (a caching descriptor stores into the object): the entry is read instead (F26)
            shadows_descriptor = hasattr(type(cls_attr), "__get__")
            if (
                self.source is not None
                and type(obj).__getattribute__ is object.__getattribute__
                and not shadows_descriptor
            ):
                source = AttrSource(self.source, name)
            elif self.source is not None:  # `obj.name` would run the class's own lookup
                source = ItemSource(InstanceDictSource(self.source), name)
            return frame.wrap(instance_dict[name], source)
        resolved = _resolve_class_attr(frame, self, obj, name)
        if resolved is not None:
            return resolved
        cls = type(obj)
        custom = cls.__getattribute__ is not object.__getattribute__ or hasattr(cls, "__getattr__")
        if computed and custom and self.source is not None:
            # a computed attribute (configs' aliases): read for real, guarded through its source
            try:
                value = getattr(obj, name)
            except AttributeError:
                raise self._absent_through_hooks(frame, name) from None
            except Exception:  # noqa: BLE001 - the hooks raise outside compiled code: traced, they may not
                # (`torch.compiler.is_dynamo_compiling()` is True in the trace): what the trace does
                return self._hooked_getattr(frame, name)
            return frame.wrap(value, AttrSource(self.source, name))
        raise self._missing(frame, name, computed=computed)

    def _absent_through_hooks(self, frame: Frame, name: str) -> Exception:
        """The error for an attribute the class's own lookup hooks do not find (a config's
        `hasattr(config, "sliding_window")`). The hooks are inlined, so the absence is guarded by
        what they read (dicts and classes, which native checks look up and remember) instead of
        by calling them again on each call (microseconds each: a Python frame and an exception).
        Hooks the trace cannot follow without leaving effects or nodes fall back to that."""
        output = frame.output
        effects_before, nodes_before = output.side_effects.mark(), len(output.graph.nodes)
        try:
            self._hooked_getattr(frame, name)
        except (Unsupported, TracedException) as e:
            if is_attribute_error(e):
                return e
            if output.side_effects.changed_since(effects_before) or len(output.graph.nodes) != nodes_before:
                raise
        return self._missing(frame, name)

    def _missing(self, frame: Frame, name: str, *, computed: bool = True) -> Unsupported:
        """The error for an attribute the object lacks; `hasattr` and `getattr` with a default
        turn it into an answer, so the absence is guarded (setting it later recompiles): for
        `object`'s lookup alone (`computed` False), in the instance `__dict__` and the class,
        where the class's own hooks do not look; nothing when the trace deleted it."""
        obj = self.value_object
        deleted = frame.output.side_effects.pending_attribute(self, name) is DELETED
        if self.source is not None and not deleted:
            guards = frame.output.guards
            if computed:
                guards.attribute_absent(self.source, obj, name)
            else:
                guards.attribute_absent(ClassSource(type(obj)), type(obj), name)
                if isinstance(object_instance_dict(obj), dict):
                    text = f"{self.source.name()}.__dict__ lacks {name!r}"
                    guards.key_absent(InstanceDictSource(self.source), name, text)
        return Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)

    # -- protocols written in Python on the object's class ---------------------------------------

    def _dunder(self, frame: Frame, name: str, args: list[Variable]) -> Variable:
        self._use()
        fn = python_dunder(frame, self, name)
        if fn is not None:
            return frame.inline_call(fn, [self, *args], {}, closure=None)
        method = contents_method(self, class_attribute(type(self.value_object), name), name)
        if method is not None:  # a dict or list subclass using its base's own: its real contents
            return method.call(frame, args, {})
        raise Unsupported(f"{self.describe()} has no Python {name} (implemented in C or missing)")

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        return self._dunder(frame, "__getitem__", [key])

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        self._dunder(frame, "__setitem__", [key, value])

    def delitem(self, frame: Frame, key: Variable) -> None:
        self._dunder(frame, "__delitem__", [key])

    def length(self, frame: Frame) -> int:
        return dunder_length(frame, self.python_type(), self._dunder(frame, "__len__", []))

    def _by_index(self, frame: Frame) -> Variable | None:
        self._use()
        return getitem_iterator(frame, self, self.protocol_class())

    def unpack(self, frame: Frame) -> list[Variable]:
        by_index = self._by_index(frame)
        if by_index is not None:
            return by_index.unpack(frame)
        return self._dunder(frame, "__iter__", []).unpack(frame)

    def get_iter(self, frame: Frame) -> Variable | None:
        by_index = self._by_index(frame)
        return by_index if by_index is not None else super().get_iter(frame)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        fn = python_dunder(frame, self, "__call__")
        if fn is None:
            raise Unsupported(f"call of {self.describe()}")
        return frame.inline_call(fn, [self, *args], kwargs, closure=None)


def _is_unmaterialised_lazy(module: Any) -> bool:
    """An `nn.Lazy*` module whose first call has not run: its forward pre-hook would infer the
    parameters' shapes from the inputs (and turn the module into its `cls_to_become`)."""
    return isinstance(module, LazyModuleMixin) and "_initialize_hook" in module.__dict__


def _materialise_lazy(var: Variable, args: list[Variable], kwargs: dict[str, Variable]) -> None:
    """Run the lazy module's inference on the real module now, as its first eager call would,
    from inputs of the traced arguments' shapes (only shapes decide the parameters); the
    caller then traces the frame again, with the module as eager leaves it."""

    def example(arg: Variable) -> Any:
        if isinstance(arg, GraphValueVariable) and arg.is_tensor():
            fake = arg.fake  # type: ignore[attr-defined]
            shape = [int(guard_int(s)) for s in fake.shape]
            with unset_fake_temporarily():
                return torch.zeros(shape, dtype=fake.dtype, device=fake.device)
        if arg.is_constant():
            return arg.as_constant()
        kind = arg.python_type()
        if isinstance(arg, TupleVariable) and is_namedtuple_class(kind):
            return kind(*[example(item) for item in arg.items])
        if isinstance(arg, (ListVariable, TupleVariable)) and kind in (list, tuple):
            return kind(example(item) for item in arg.items)
        if isinstance(arg, DictVariable) and kind is dict:
            return {key: example(value) for key, value in arg.items.items()}
        raise Unsupported(f"{var.describe()} (lazy, not materialised yet) called with {arg.describe()}")

    module = var.value_object
    real_args = [example(a) for a in args]
    real_kwargs = {k: example(v) for k, v in kwargs.items()}
    try:
        module._infer_parameters(module, real_args, real_kwargs)
    except Exception as e:
        raise Unsupported(f"materialising {var.describe()} raised {type(e).__name__}: {e}") from e
    if _is_unmaterialised_lazy(module):
        raise Unsupported(f"{var.describe()} is lazy and its first call did not materialise it")


def guard_global_hooks(frame: Frame) -> bool:
    """Whether global module forward hooks run on a module call; either answer is guarded (by
    the hooks' handle ids where there are some). Global backward hooks are Unsupported."""
    guards = frame.output.guards
    if not has_global_hooks():
        guards.state_query(has_global_hooks, "has_global_hooks", False)
        return False
    ids = global_hook_ids()
    guards.state_query(global_hook_ids, "global_hook_ids", ids)
    if ids[3] or ids[4]:
        raise Unsupported("global nn.Module backward hooks are registered")
    return True


def keep_instance_dict_apart(frame: Frame, obj_var: Variable, *, writing: bool) -> None:
    """An outside object's `__dict__` may also be read from the frame as a plain dict (`d =
    o.__dict__` kept across a graph break, a bound `o.__dict__.pop` at one, an argument): two
    trackers that do not see each other's changes (F22). A write through the object, or a read
    of it after a change through the dict, breaks the graph where both are the same (the eager
    instruction sees both); where they are not, they are guarded to stay distinct objects."""
    if obj_var.source is None:
        return
    output = frame.output
    real = object_instance_dict(obj_var.value_object)
    if not isinstance(real, dict):
        return
    changed = output.side_effects.containers
    tracker = output.container_of(real)
    if tracker is not None and (writing or id(tracker) in changed):
        raise Unsupported(f"the __dict__ of {obj_var.source.name()} is also {tracker.describe()} read from the frame")
    own = InstanceDictSource(obj_var.source)
    for var in output.frame_containers() if writing else list(changed.values()):
        if isinstance(var, DictVariable) and var.source is not None:
            output.side_effects.distinct_objects.add((var.source, own))


def object_instance_dict(obj: Any) -> Any:
    """`obj`'s instance `__dict__` as `object.__getattribute__` finds it (None if it has none):
    where `object`'s attribute lookup reads, whatever the class's own `__getattribute__` does."""
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


class InstanceDictVariable(Variable):
    """`obj.__dict__` of an object passed in (configs' own lookups read it): read key by key, each
    read guarded, through the trace's pending writes of the object; an item assigned or deleted
    is an attribute written or deleted as `object` stores it. Used whole (`len`, iteration,
    `keys()`/`values()`/`items()` views, `copy()`), it is the real dict's entries in its order,
    its keys guarded, under those writes (`items`, read afresh at each use as eager's views are)."""

    def __init__(self, obj: UserObjectVariable, frame: Frame) -> None:
        assert obj.source is not None
        self.obj = obj
        self.frame_of = frame.root_reference()  # the views read `items` without a frame of their own
        self.real_items: dict[Any, Variable] | None = None  # the real entries, once used whole
        self.source = InstanceDictSource(obj.source)  # escaping, it is the real dict again

    def python_type(self) -> type:
        return dict

    def describe(self) -> str:
        return f"__dict__ of {self.obj.describe()}"

    def entry(self, frame: Frame, key: Any) -> Variable | None:
        """The value under `key`, None when there is none."""
        keep_instance_dict_apart(frame, self.obj, writing=False)
        pending = frame.output.side_effects.pending_attribute(self.obj, key)
        if pending is DELETED:
            return None
        if pending is not None:
            return pending
        real = self.obj.value_object.__dict__
        if key in real:
            # the value is guarded only where it is used; `key in obj.__dict__` uses its presence (F18)
            frame.output.guards.key_present(self.source, key, f"{self.source.name()} holds {key!r}")
            return frame.wrap(real[key], ItemSource(self.source, key))
        frame.output.guards.key_absent(self.source, key, f"{self.source.name()} lacks {key!r}")
        return None

    @property
    def items(self) -> dict[Any, Variable]:
        """The entries as the trace has them: the real dict's (its keys guarded, in order), each
        attribute this trace wrote or deleted that lives in the instance dict (not a slot's or
        another data descriptor's) changed in place, added last in the order of first write,
        or, deleted and written again, moved last, as CPython's dict orders them."""
        frame = self.frame_of()
        assert frame is not None, "read after its trace ended"
        keep_instance_dict_apart(frame, self.obj, writing=False)
        side_effects = frame.output.side_effects
        if self.real_items is None:  # the real dict does not change while tracing: read once
            real = self.obj.value_object.__dict__
            frame.output.guards.dict_keys_match(self.source, real)
            self.real_items = {key: frame.wrap(value, ItemSource(self.source, key)) for key, value in real.items()}
        items = dict(self.real_items)
        owner, cls = object_key(self.obj), type(self.obj.value_object)
        written = [name for (key, name) in side_effects.attributes if key == owner]
        for name in written:
            store = side_effects.stores.get((owner, name), PLAIN)
            if store is not INSTANCE_DICT and is_data_descriptor(class_attribute(cls, name)):
                continue
            value = side_effects.pending_attribute(self.obj, name)  # notes the identities it assumes
            if value is DELETED or (owner, name) in side_effects.deleted_then_written:
                items.pop(name, None)
            if value is not DELETED:
                items[name] = value
        return items

    def key_trackers(self) -> list[Variable]:
        return [key_tracker(k) for k in self.items]

    def length(self, frame: Frame) -> int:
        return len(self.items)

    def get_iter(self, frame: Frame) -> Variable:
        return LiveContainerIteratorVariable(self, "keys")

    def unpack(self, frame: Frame) -> list[Variable]:
        return self.key_trackers()

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self.entry(frame, item.as_constant()) is not None

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        found = self.entry(frame, key.as_constant())
        if found is None:
            raise raise_new(frame, KeyError, key.as_constant())
        return found

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        self._change(frame, key.as_constant(), value)

    def delitem(self, frame: Frame, key: Variable) -> None:
        if self.entry(frame, key.as_constant()) is None:
            self.getitem(frame, key)  # raises the KeyError
        self._change(frame, key.as_constant(), DELETED)

    def _change(self, frame: Frame, key: Any, value: Any) -> None:
        # replayed into the instance dict: no descriptor of the class runs, as here
        if not isinstance(key, str):
            raise Unsupported(f"changing {self.describe()}[{key!r}], a key that is not an attribute name")
        keep_instance_dict_apart(frame, self.obj, writing=True)
        frame.output.side_effects.attribute_written(self.obj, key, value, store=INSTANCE_DICT)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name not in _INSTANCE_DICT_METHODS:
            raise Unsupported(f"{self.describe()}.{name}", hint="read attributes by name: they are traced and guarded")
        return BoundMethodVariable(self, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            found = self.entry(frame, args[0].as_constant())
            return found if found is not None else (args[1] if len(args) == 2 else constant(None))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(frame, args[0])
        if name == "__contains__" and len(args) == 1:
            return constant(self.contains(frame, args[0]))
        if name == "__setitem__" and len(args) == 2:
            self.setitem(frame, *args)
            return constant(None)
        if name == "__delitem__" and len(args) == 1:
            self.delitem(frame, args[0])
            return constant(None)
        if name == "update" and len(args) <= 1 and (not args or isinstance(args[0], DictVariable)):
            # `obj.__dict__.update({...}, k=v)`: each item as `obj.__dict__[k] = v`, in order
            for key, value in [*(args[0].items.items() if args else ()), *kwargs.items()]:
                self._change(frame, key, value)
            return constant(None)
        if name in ("keys", "values", "items") and not args and not kwargs:
            return DictViewVariable(self, name)
        if name == "copy" and not args and not kwargs:
            return DictVariable(self.items)
        if name == "__len__" and not args and not kwargs:
            return constant(len(self.items))
        if name == "__iter__" and not args and not kwargs:
            return self.get_iter(frame)
        return super().call_method(frame, name, args, kwargs)


# what `obj.__dict__` answers: lookups and writes by key, and the whole dict read
_INSTANCE_DICT_METHODS = frozenset(
    ("get", "__getitem__", "__contains__", "__setitem__", "__delitem__", "update")
    + ("keys", "values", "items", "copy", "__len__", "__iter__")
)


def value_type(var: Variable) -> type | None:
    """The class of the value a tracker stands for, None when tracing does not know it."""
    try:
        return var.python_type()
    except Unsupported:
        return None


class NNModuleVariable(UserObjectVariable):
    """An `nn.Module` instance reached from the frame; calling it inlines its forward."""

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """An attribute written in forward (a counter, a cached tensor, a flag, a buffer replaced,
        a parameter aliased): replayed on the module after the graph through
        `nn.Module.__setattr__`, which files it where it would eagerly; later reads in this trace
        see `value`. Numbers replacing numbers (counters), submodules, writes
        `nn.Module.__setattr__` would refuse (a plain tensor under a parameter's name), and a
        custom `__setattr__` or descriptor break the graph."""
        module = self.value_object
        tables = {table: module.__dict__.get(table) or {} for table in MODULE_TABLES}
        kind = value_type(value)
        is_parameter = kind is not None and issubclass(kind, torch.nn.Parameter)
        is_tensor = kind is not None and issubclass(kind, torch.Tensor)
        fits = not (
            (kind is not None and issubclass(kind, torch.nn.Module))
            or name in tables["_modules"]
            or (name in tables["_parameters"] and not is_parameter)
            or (name in tables["_buffers"] and not (is_tensor and not is_parameter))
        )
        # a number the module keeps across calls (a step counter: the trace read and guarded the
        # old value, and writes another): captured, that guard would recompile on every call, so
        # the write runs eagerly and the graphs around it are reused (under fullgraph=True, where
        # a break is an error, it is captured and recompiles, as torch.compile's). A number set
        # without reading the old one, or set to the value it has (HF Swin's `self.shift_size = 0`
        # and its clamped `self.window_size`), keeps every guard true and is replayed as any write.
        current = module.__dict__.get(name)
        counter = (
            frame.output.breaks_allowed
            and type(current) in (int, float)
            and kind in (int, float)
            and not (value.is_constant() and value.as_constant() == current and kind is type(current))
            and self.source is not None
            and frame.output.guards.checks_source(AttrSource(self.source, name))
        )
        cls_attr = class_attribute(type(module), name)
        if (
            self.source is None
            or counter
            or not fits
            or type(module).__setattr__ is not torch.nn.Module.__setattr__
            or hasattr(type(cls_attr), "__set__")
        ):
            raise Unsupported(
                f"setattr on nn.Module ({self.describe()}.{name} = {value.describe()})",
                hint="submodule writes run eagerly at a graph break",
            )
        frame.output.side_effects.attribute_written(self, name, value)

    def describe(self) -> str:
        return f"module {type(self.value_object).__qualname__}"

    def truth(self, frame: Frame) -> bool:
        return _object_truth(frame, self)  # an empty ModuleList or Sequential is false

    def getattr(self, frame: Frame, name: str) -> Variable:
        module = self.value_object
        if self.source is None:
            raise Unsupported(f"attribute {name!r} of a module created while tracing")
        pending = frame.output.side_effects.pending_attribute(self, name)
        if pending is not None:
            return pending
        if type(module).__getattribute__ is not object.__getattribute__:
            raise Unsupported(f"{self.describe()} defines __getattribute__")
        cls_attr = class_attribute(type(module), name)
        if isinstance(cls_attr, property):
            return _resolve_class_attr(frame, self, module, name)  # type: ignore[return-value]
        if name in module.__dict__:
            return frame.wrap(module.__dict__[name], AttrSource(self.source, name), module_attribute=True)
        if cls_attr is not MISSING and any(name in (module.__dict__.get(t) or ()) for t in MODULE_TABLES):
            # a method (any class attribute) named like a submodule, parameter or buffer: Python
            # finds it before `nn.Module.__getattr__` looks in the tables
            resolved = _resolve_class_attr(frame, self, module, name)
            if resolved is not None:
                return resolved
        own_getattr = type(module).__getattr__ is not torch.nn.Module.__getattr__
        for table in MODULE_TABLES:
            members = module.__dict__.get(table)
            if members is not None and name in members:
                if own_getattr:
                    return self._through_own_getattr(frame, name)
                return frame.wrap(members[name], ModuleMemberSource(self.source, table, name))
        if name in _WALKS and cls_attr is getattr(torch.nn.Module, name):
            guard_not_shadowed(frame, self, name)
            return BoundMethodVariable(self, name)
        resolved = _resolve_class_attr(frame, self, module, name)
        if resolved is not None:
            return resolved
        if own_getattr:
            return self._through_own_getattr(frame, name)
        raise self._missing(frame, name)

    def _through_own_getattr(self, frame: Frame, name: str) -> Variable:
        """An attribute that Python finds through the class's own `__getattr__` (a wrapper
        module deferring to `super().__getattr__` or to a module it wraps): read for real, and
        read again through the same lookup by the guards and the graph's inputs. A lookup that
        raises another error than AttributeError breaks the graph."""
        assert self.source is not None
        try:
            value = getattr(self.value_object, name)
        except AttributeError:
            raise self._missing(frame, name) from None
        except Exception as e:  # noqa: BLE001 - the class's own code failed: eagerly it raises there
            raise Unsupported(f"{self.describe()}'s own __getattr__ raised {type(e).__name__} reading {name!r}") from e
        return frame.wrap(value, AttrSource(self.source, name), module_attribute=True)

    def _forward_hooks(self, frame: Frame) -> bool:
        """Whether calling the module runs forward (pre-)hooks, its own or global ones. Either
        answer is guarded: the module's hook tables by their keys (handle ids are never reused,
        so adding or removing a hook recompiles), the global tables by their ids."""
        module = self.value_object
        if has_backward_hooks(module):
            raise Unsupported(f"{self.describe()} has full backward hooks", hint="they run eagerly at a graph break")
        global_hooks = guard_global_hooks(frame)
        guards = frame.output.guards
        if self.source is not None:
            for table in HOOK_TABLES:
                hooks = getattr(module, table)
                if hooks:
                    guards.dict_keys_match(AttrSource(self.source, table), hooks)
                else:
                    guards.falsy(AttrSource(self.source, table), "no module hooks")
        return has_module_hooks(module) or global_hooks

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if _is_unmaterialised_lazy(self.value_object):
            _materialise_lazy(self, args, kwargs)
            raise TraceAgain(f"{self.describe()} materialised its parameters")
        path = self.source.name() if self.source is not None else self.describe()
        with frame.output.active.module_call(path, type(self.value_object)):
            return self._call(frame, args, kwargs)

    def forwards_to(self, code: types.CodeType) -> bool:
        """Whether calling the module ran `code` as its forward with nothing around it (nn.Module's
        own `__call__`, no hooks: what `_call` found, and guarded), so the call returns exactly
        what the forward returns."""
        module = self.value_object
        cls = type(module)
        if class_attribute(cls, "__call__") is not torch.nn.Module.__call__:
            return False
        forward = class_attribute(cls, "forward")
        if getattr(forward, "__code__", None) is not code or "forward" in getattr(module, "__dict__", {}):
            return False
        return not (has_module_hooks(module) or has_global_hooks() or has_backward_hooks(module))

    def _call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        custom_call = class_attribute(type(self.value_object), "__call__")
        if custom_call is not torch.nn.Module.__call__:
            # the class's own __call__ (it may call super().__call__, i.e. nn.Module's); a class
            # marked `disable` has a disabled one: the call breaks and runs eagerly, hooks and all
            if is_disabled(custom_call):
                raise Unsupported(
                    f"call of {self.describe()}, whose class is marked stenograph.disable (or torch's)",
                    hint="disabled module classes run eagerly",
                    kind=BreakKind.UNTRACED_CALL,
                )
            if not isinstance(custom_call, types.FunctionType):
                raise Unsupported(f"{self.describe()} has a __call__ stenograph cannot read")
            return frame.inline_call(custom_call, [self, *args], kwargs, closure=None)
        if self._forward_hooks(frame):
            # nn.Module's own call path, inlined: it runs the hooks in its order, with its
            # handling of what they return, as torch.compile inlines it
            return frame.inline_call(torch.nn.Module._call_impl, [self, *args], kwargs, closure=None)
        return self.getattr(frame, "forward").call(frame, args, kwargs)

    def _walk(self, frame: Frame, name: str, prefix: str = "", recurse: bool = True) -> list[Variable]:
        """`modules()`, `named_modules()`, `parameters()`, `named_parameters()`, `buffers()`,
        `named_buffers()`, `named_children()`: the real module tree walked now, each member
        wrapped with its source. What the walk saw is guarded: the keys of every table it read,
        the empty (None) slots, and which members are one object reached twice. `prefix` and
        `recurse` are those methods' arguments."""
        assert self.source is not None
        guards = frame.output.guards
        modules: list[tuple[str, Any, Source]] = []
        first_source: dict[int, Source] = {}

        def table_of(module: Any, source: Source, table: str) -> list[tuple[str, Any, Source]]:
            entries = module.__dict__.get(table) or {}
            guards.dict_keys_match(AttrSource(source, table), entries)
            found = []
            for key, value in entries.items():
                member_source = ModuleMemberSource(source, table, key)
                if value is None:
                    guards.constant_match(member_source, None)
                else:
                    found.append((key, value, member_source))
            return found

        def first_time(value: Any, source: Source) -> bool:
            seen = first_source.get(id(value))
            if seen is None:
                first_source[id(value)] = source
                return True
            guards.same_object(source, seen)
            return False

        def visit(prefix: str, module: Any, source: Source, depth: int) -> None:
            if not first_time(module, source):
                return
            modules.append((prefix, module, source))
            if not recurse or name == "named_children" and depth == 1:
                return
            for key, child, child_source in table_of(module, source, "_modules"):
                visit(f"{prefix}.{key}" if prefix else key, child, child_source, depth + 1)

        visit(prefix, self.value_object, self.source, 0)
        guards.all_distinct([source for _, _, source in modules])
        entries: list[tuple[str, Variable]] = []
        if name in ("modules", "named_modules"):
            entries = [(p, frame.wrap(m, s)) for p, m, s in modules]
        elif name == "named_children":
            entries = [(p, frame.wrap(m, s)) for p, m, s in modules[1:]]
        else:
            table = "_parameters" if name.endswith("parameters") else "_buffers"
            first_source.clear()
            for path, module, source in modules:
                for key, value, member_source in table_of(module, source, table):
                    if first_time(value, member_source):
                        full = f"{path}.{key}" if path else key
                        entries.append((full, frame.wrap(value, member_source)))
            guards.all_distinct([v.source for _, v in entries if v.source is not None])
        if name.startswith("named_"):
            return [TupleVariable([constant(k), v]) for k, v in entries]
        return [v for _, v in entries]

    def _members(self, frame: Frame, table: str) -> list[tuple[str, Any]]:
        """The entries of one of the module's tables, with a guard on its keys: iteration,
        `len()` and positional indexing change when a layer is appended or removed."""
        entries = self.value_object.__dict__.get(table) or {}
        if self.source is not None:
            frame.output.guards.dict_keys_match(AttrSource(self.source, table), entries)
        return list(entries.items())

    def unpack(self, frame: Frame) -> list[Variable]:
        module = self.value_object
        if isinstance(module, (torch.nn.Sequential, torch.nn.ModuleList)):
            assert self.source is not None
            members = self._members(frame, "_modules")
            return [frame.wrap(m, ModuleMemberSource(self.source, "_modules", k)) for k, m in members]
        if isinstance(module, torch.nn.ModuleDict):
            return [constant(k) for k, _ in self._members(frame, "_modules")]
        if isinstance(module, torch.nn.ParameterList):
            assert self.source is not None
            members = self._members(frame, "_parameters")
            return [frame.wrap(p, ModuleMemberSource(self.source, "_parameters", k)) for k, p in members]
        raise Unsupported(f"iteration over {self.describe()}")

    def _own_dunder(self, frame: Frame, name: str, args: list[Variable]) -> Variable | None:
        """The module class's own `name` written in Python (not torch.nn's containers'), called
        inlined; None where the class has none."""
        attr, owner = class_lookup(type(self.value_object), name)
        if not isinstance(attr, types.FunctionType) or owner is None or owner.__module__.startswith("torch."):
            return None
        return frame.inline_call(attr, [self, *args], {}, closure=None)

    def length(self, frame: Frame) -> int:
        own = self._own_dunder(frame, "__len__", [])
        if own is not None:
            return dunder_length(frame, type(self.value_object), own)
        module = self.value_object
        if isinstance(
            module,
            (
                torch.nn.Sequential,
                torch.nn.ModuleList,
                torch.nn.ModuleDict,
                torch.nn.ParameterList,
                torch.nn.ParameterDict,
            ),
        ):
            parameters = isinstance(module, (torch.nn.ParameterList, torch.nn.ParameterDict))
            return len(self._members(frame, "_parameters" if parameters else "_modules"))
        raise Unsupported(f"len() of {self.describe()}")

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        own = self._own_dunder(frame, "__getitem__", [key])
        if own is not None:
            return own
        module = self.value_object
        k = key.as_constant()
        assert self.source is not None
        if isinstance(module, (torch.nn.Sequential, torch.nn.ModuleList)) and isinstance(k, (int, slice)):
            if type(module).__getitem__ not in (torch.nn.Sequential.__getitem__, torch.nn.ModuleList.__getitem__):
                raise Unsupported(f"indexing {self.describe()}, whose class defines its own __getitem__")
            names = [name for name, _ in self._members(frame, "_modules")]

            def track(name: str) -> Variable:  # only the members chosen are read (and guarded)
                return frame.wrap(module._modules[name], ModuleMemberSource(self.source, "_modules", name))

            return slice_or_member(frame, type(module), names, track, key)
        if isinstance(module, torch.nn.ModuleDict) and isinstance(k, str):
            return frame.wrap(module._modules[k], ModuleMemberSource(self.source, "_modules", k))
        if isinstance(module, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            name = str(k)
            return frame.wrap(module._parameters[name], ModuleMemberSource(self.source, "_parameters", name))
        raise Unsupported(f"indexing {self.describe()} with {key.describe()}")

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        module = self.value_object
        if name in ("keys", "values", "items") and isinstance(module, torch.nn.ModuleDict) and not args:
            assert self.source is not None
            members = self._members(frame, "_modules")
            entries = [(k, frame.wrap(m, ModuleMemberSource(self.source, "_modules", k))) for k, m in members]
            if name == "keys":
                return ListVariable([constant(k) for k, _ in entries])
            if name == "values":
                return ListVariable([v for _, v in entries])
            return ListVariable([TupleVariable([constant(k), v]) for k, v in entries])
        if name in _WALKS and self.source is not None:
            return ModuleWalkVariable(self._walk(frame, name, **_walk_options(name, args, kwargs)))
        if name == "children" and not args and self.source is not None:
            named = self._walk(frame, "named_children")
            return ModuleWalkVariable([pair.items[1] for pair in named])
        if name == "__len__":
            return constant(self.length(frame))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(frame, args[0])
        return super().call_method(frame, name, args, kwargs)


class NewModuleVariable(NNModuleVariable):
    """A torch.nn module without parameters or buffers (a loss, an activation) that the traced
    code creates from constant arguments, as HF models make `CrossEntropyLoss()` in `forward`.

    It is made for real while tracing (creating one has no effect outside it) and its attributes
    are constants; where it must exist outside the graph, a new one is made with the same
    arguments, which cannot be told apart from the one eager code would have made.
    """

    def __init__(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        super().__init__(module, None)
        self.args = args
        self.kwargs = kwargs

    @staticmethod
    def create(cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> NewModuleVariable:
        name = cls.__qualname__
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"creating module {name} from values known only when the code runs")
        values = tuple(a.as_constant() for a in args)
        keywords = {k: v.as_constant() for k, v in kwargs.items()}
        try:
            # the RNG is restored: a constructor that initialises weights must not draw from it
            with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
                warnings.simplefilter("error")
                module = cls(*values, **keywords)
        except Exception as e:
            raise Unsupported(f"creating module {name} raised {type(e).__name__}: {e}") from e
        members = [*module._parameters.values(), *module._buffers.values(), *module._modules.values()]
        if any(m is not None for m in members):
            raise Unsupported(f"creating module {name}, which has parameters, buffers or submodules")
        return NewModuleVariable(module, values, keywords)

    def describe(self) -> str:
        return f"module {type(self.value_object).__qualname__} created while tracing"

    def getattr(self, frame: Frame, name: str) -> Variable:
        module = self.value_object
        cls_attr = class_attribute(type(module), name)
        if isinstance(cls_attr, property):
            return _resolve_class_attr(frame, self, module, name)  # type: ignore[return-value]
        for table in (module.__dict__, module._parameters, module._buffers, module._modules):
            if name in table:
                value = table[name]
                if not is_literal(value):
                    raise Unsupported(f"attribute {name!r} of {self.describe()} is not a constant")
                return constant(value)
        resolved = _resolve_class_attr(frame, self, module, name)
        if resolved is None:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
        return resolved

    def set_training(self, mode: bool) -> None:
        """`train(mode)` of a module made in the frame that holds this one."""
        self.value_object.training = mode  # the module made while tracing, seen by nothing else

    def reconstruct(self, rebuild: Any) -> str:
        cls = rebuild.writer.bind(type(self.value_object), "cls")
        args = [rebuild.constant(a) for a in self.args]
        args += [f"{k}={rebuild.constant(v)}" for k, v in self.kwargs.items()]
        training = self.value_object.training
        fill = (lambda name: []) if training else (lambda name: [f"{name}.training = False"])
        return rebuild.build_object(self, f"{cls}({', '.join(args)})", fill)


class ModuleWalkVariable(IteratorVariable):
    """What `parameters()`, `named_modules()`, `children()` and kin return: a generator, walked
    while tracing (`NNModuleVariable._walk`); rebuilt as a generator over what is left of it."""

    has_length_hint = False
    on_stack_as_tuple_iterator = False

    def python_type(self) -> type:
        return types.GeneratorType

    def describe(self) -> str:
        return "generator of a module's members"

    def reconstruct(self, rebuild: Any) -> str:
        rest = "".join(rebuild.expr(i) + ", " for i in self.items[self.index :])
        return f"(___member for ___member in ({rest}))"


class PythonModuleVariable(Variable):
    """A Python module object (`torch`, `torch.nn.functional`, `math`, a user module)."""

    def __init__(self, module: types.ModuleType, source: Source | None) -> None:
        self.value_object = module
        self.source = source

    def python_type(self) -> type:
        return types.ModuleType

    def describe(self) -> str:
        return f"module {self.value_object.__name__}"

    def truth(self, frame: Frame) -> bool:
        return True

    def getattr(self, frame: Frame, name: str) -> Variable:
        module = self.value_object
        pending = frame.output.global_cache.get((id(vars(module)), name))
        if pending is not None:  # a global the trace wrote (or read) already: the same value
            return pending
        if name == "__dict__" and type(module) is types.ModuleType:
            # its globals, as its code sees them (also where the module is not in sys.modules)
            source = AttrSource(self.source, name) if self.source is not None else None
            if source is not None:
                frame.output.guards.globals_match(source, vars(module))
            return GlobalsDictVariable(vars(module), source)
        trusted = is_trusted_module(module.__name__)
        try:
            value = getattr(module, name)
        except AttributeError:
            if self.source is not None and not trusted:
                frame.output.guards.attribute_absent(self.source, module, name)
            raise Unsupported(
                f"module {module.__name__} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE
            ) from None
        if trusted:  # torch's own namespaces are not monkeypatched at run time: no guard on their members
            return frame.wrap_trusted_member(value, vars(module), name)
        return frame.wrap(value, AttrSource(self.source, name) if self.source is not None else None)

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`module.name = value`: a write to the module's globals, as `STORE_GLOBAL` in its code;
        or to a setting of one of torch's config modules (`torch.use_deterministic_algorithms`
        sets `torch._inductor.config.deterministic`), which its own `__setattr__` makes after the
        graph (one that warns, deprecated, or writes another, an alias, is refused)."""
        module = self.value_object
        entry = getattr(module, "_config", {}).get(name) if isinstance(module, ConfigModule) else None
        if entry is not None and not entry.deprecated and entry.alias is None:
            frame.output.side_effects.attribute_written(self, name, value)
            frame.output.global_cache[(id(vars(module)), name)] = value  # what the trace reads of it
            return
        if type(module) is not types.ModuleType or is_trusted_module(module.__name__):
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}")
        frame.output.side_effects.global_written(vars(module), name, value)
        frame.output.global_cache[(id(vars(module)), name)] = value

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.value_object, "module")


# the methods of a module's globals dict the trace answers (lookups; anything else breaks)
_GLOBALS_METHODS = frozenset({"get", "__getitem__", "__contains__"})


class GlobalsDictVariable(Variable):
    """A module's globals dict (what `globals()` returns): items are read lazily, each guarded
    through its own `GlobalSource`, instead of wrapping every global of the module."""

    def __init__(self, globals_dict: dict, source: Source | None) -> None:
        self.value_object = globals_dict
        self.source = source

    def python_type(self) -> type:
        return dict

    def describe(self) -> str:
        return f"globals of {self.value_object.get('__name__', '?')}"

    def truth(self, frame: Frame) -> bool:
        return True

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        name = key.as_constant()
        pending = frame.output.global_cache.get((id(self.value_object), name))
        if pending is not None:  # a global the trace wrote (or read) already
            return pending
        if name not in self.value_object:
            raise Unsupported(f"KeyError {name!r} in {self.describe()}")
        return frame.wrap(self.value_object[name], GlobalSource(name, self.value_object))

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in _GLOBALS_METHODS:
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self._has(frame, item.as_constant())

    def _has(self, frame: Frame, name: Any) -> bool:
        """Whether the module has the global `name`, guarded: a global added or deleted later
        changes the answer (the dict itself is fixed by the guard that found it)."""
        if (id(self.value_object), name) in frame.output.global_cache:
            return True  # written by the trace (or read already)
        present = name in self.value_object
        where = FixedObjectSource(self.value_object, self.describe())
        text = f"{self.describe()} {'holds' if present else 'lacks'} {name!r}"
        guards = frame.output.guards
        (guards.key_present if present else guards.key_absent)(where, name, text)
        return present

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(frame, args[0])
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            if self._has(frame, args[0].as_constant()):
                return self.getitem(frame, args[0])
            return args[1] if len(args) == 2 else constant(None)
        if name == "__contains__" and len(args) == 1:
            return constant(self._has(frame, args[0].as_constant()))
        raise Unsupported(f"method {name!r} of {self.describe()}")

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.namer.name_for(self.value_object)


class NewWeakrefVariable(Variable):
    """`weakref.ref(obj)` made in the frame, for an object read from the frame (which its caller
    keeps alive while the frame runs): calling it gives the object; rebuilt as a new weak
    reference to it where it escapes."""

    def __init__(self, target: Variable) -> None:
        self.target = target

    def python_type(self) -> type:
        return weakref.ref

    def describe(self) -> str:
        return f"weak reference to {self.target.describe()}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if args or kwargs:
            raise Unsupported("a weak reference called with arguments")
        if self.target.source is None:
            raise Unsupported("calling a weak reference to a tensor the frame computed (eagerly it may be dead)")
        return self.target

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.writer.bind(weakref.ref, 'weakref')}({rebuild.expr(self.target)})"


def new_weakref(args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`weakref.ref(obj)` called while tracing: a tracker for objects read from the frame and
    for tensors the graph computes (only rebuilt where it escapes: calling one while tracing
    breaks, since an intermediate only this frame holds may be dead already, as eagerly);
    other objects made in the frame and callbacks break."""
    if len(args) != 1 or kwargs or args[0].source is None and not isinstance(args[0], TensorVariable):
        raise Unsupported("weakref.ref() of an object made in the frame, or with a callback")
    return NewWeakrefVariable(args[0])


class WeakrefVariable(Variable):
    """A `weakref.ref` read from the frame; calling it gives its (guarded) referent."""

    def __init__(self, ref: Any, source: Source | None) -> None:
        self.value_object = ref
        self.source = source

    def python_type(self) -> type:
        return type(self.value_object)

    def describe(self) -> str:
        return "weak reference"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if args or kwargs:
            raise Unsupported("a weak reference called with arguments")
        source = WeakrefTargetSource(self.source) if self.source is not None else None
        return frame.wrap(self.value_object(), source)
