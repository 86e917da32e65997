"""Instances of user `nn.Module` subclasses created while tracing (`m = MyBlock(4)` in forward).

The class's own `__init__`, `forward` and other methods are inlined as for any class made in the
frame. What `nn.Module` itself does is modelled here instead of traced (its Python code runs
global registration hooks and type checks through module globals): `__init__`, `__setattr__`
filing submodules, buffers and plain attributes where eager Python files them, `__getattr__`
finding them, `__delattr__`, `register_buffer`, `register_module` / `add_module`, `train` /
`eval`, and the call, which runs `forward` (a new module has no hooks of its own; global forward hooks and registration
hooks are guarded absent). A parameter created in the frame (`nn.Parameter(torch.randn(n))`) is
a graph break, where torch.compile breaks too: the call making the module then runs eagerly and
the code after it is traced with the real module. Other `nn.Module` methods (`to`,
`parameters`) are Unsupported, naming the method.

Buffers computed while tracing are graph values. A module that escapes (returned, stored, live at
a graph break) is rebuilt once as a real module: `cls.__new__`, `nn.Module.__init__`, then its
attributes and tables. Eager code makes a new module on every call; so does every compiled call.
"""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from ..guards.sources import MODULE_TABLES
from ..module_hooks import has_registration_hooks
from .base import Variable
from .class_lookup import class_lookup
from .constants import ConstantVariable, constant, is_none
from .containers import DictVariable
from .descriptors import class_attr_source
from .exceptions import raise_new
from .frame_objects import NewModuleVariable, guard_global_hooks, value_type
from .trace_rules import is_user_class
from .user_classes import NewObjectVariable, inline_own_new

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# nn.Module's methods modelled for a module made while tracing; any other is Unsupported
_MODELLED = frozenset(
    {
        "__init__", "__setattr__", "__getattr__", "__delattr__", "__call__", "_wrapped_call_impl", "_call_impl",
        "register_buffer", "register_module", "add_module", "train", "eval",
    }
)  # fmt: skip
_SIGNATURES = {
    name: inspect.signature(getattr(torch.nn.Module, name))
    for name in ("__setattr__", "__getattr__", "__delattr__", "register_buffer", "register_module", "add_module")
    + ("train", "eval")
}


def instantiate_module(frame: Frame, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`cls(*args, **kwargs)` for a user subclass of `nn.Module`: its `__init__` inlined on a new
    module tracker."""
    name = cls.__qualname__
    for klass in cls.__mro__:
        if klass not in (torch.nn.Module, object) and not is_user_class(klass):
            base = f"{klass.__module__}.{klass.__qualname__}"
            raise Unsupported(f"creating module {name}, a subclass of {base}, inside the compiled function")
    if type(cls).__call__ is not type.__call__:  # a metaclass keeping type's (ABCMeta) is fine
        raise Unsupported(f"creating module {name}, whose metaclass {type(cls).__qualname__} has its own __call__")
    if class_lookup(cls, "__getattribute__")[1] is not object:
        raise Unsupported(f"creating module {name}, whose class defines __getattribute__")
    new, owner = class_lookup(cls, "__new__")
    if owner is not object:  # a factory: what its __new__ returns, if not an instance of cls
        obj, made = inline_own_new(frame, cls, new, args, kwargs)
        if issubclass(made, cls):
            raise Unsupported(f"creating module {name}, whose __new__ makes an instance of it")
        return obj
    module = NewModuleObjectVariable(cls)
    init = module.class_hook(frame, "__init__")
    assert init is not None  # nn.Module's, modelled, if the class has none of its own
    init.call(frame, args, kwargs)
    return module


def _is_module(var: Variable) -> bool:
    kind = value_type(var)
    return kind is not None and issubclass(kind, torch.nn.Module)


class NewModuleObjectVariable(NewObjectVariable):
    """An instance of a user `nn.Module` subclass created while tracing: `attrs` holds its plain
    attributes (`training` too), `tables` its `_parameters`, `_buffers` and `_modules`."""

    def __init__(self, cls: type) -> None:
        super().__init__(cls)
        self.tables = {table: DictVariable({}) for table in MODULE_TABLES}
        self.non_persistent: dict[str, None] = {}  # buffer names left out of the state dict, in order
        self.initialised = False  # nn.Module.__init__ ran

    def describe(self) -> str:
        return f"module {self.cls.__qualname__} created while tracing"

    def inherited_member(self, frame: Frame, found_on: type, owner: type, name: str, attr: Any) -> Variable | None:
        if owner is not torch.nn.Module:
            return None
        if not isinstance(attr, types.FunctionType):
            return None  # a plain class attribute (`dump_patches`, `call_super_init`)
        class_attr_source(frame, found_on, name, attr)  # the class overriding it later recompiles
        if name not in _MODELLED:
            raise Unsupported(f"nn.Module.{name} of a {self.describe()}")
        return ModuleMethodVariable(self, name)

    def object_getattr(self, frame: Frame, name: str) -> Variable:
        if name in MODULE_TABLES and self.initialised:
            return self.tables[name]
        if name == "__dict__":
            raise Unsupported(f"__dict__ of a {self.describe()}")
        return super().object_getattr(frame, name)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        hook = self.class_hook(frame, "__call__")
        assert hook is not None  # nn.Module's, modelled, if the class has none of its own
        return hook.call(frame, args, kwargs)

    def fill(self, rebuild: Any, name: str) -> list[str]:
        """`nn.Module.__init__` gives the new real module its tables (and hook dicts), which then
        receive this module's entries."""
        lines = [f"{rebuild.writer.bind(torch.nn.Module.__init__, 'module_init')}({name})"] if self.initialised else []
        lines += super().fill(rebuild, name)
        for table, entries in self.tables.items():
            if entries.items:
                fields = ", ".join(f"{k!r}: {rebuild.expr(v)}" for k, v in entries.items.items())
                lines.append(f"{name}.{table}.update({{{fields}}})")
        if self.non_persistent:
            lines.append(f"{name}._non_persistent_buffers_set.update({list(self.non_persistent)!r})")
        return lines

    # -- what nn.Module does -------------------------------------------------------------------

    def module_init(self, args: list[Variable], kwargs: dict[str, Variable]) -> None:
        if args or kwargs:  # nn.Module.__init__ refuses them (unless `call_super_init`)
            raise Unsupported(f"nn.Module.__init__ of {self.describe()} called with arguments")
        self.initialised = True
        self.attrs.items["training"] = constant(True)
        for table in MODULE_TABLES:
            self.tables[table] = DictVariable({})
        self.non_persistent = {}

    def module_setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`nn.Module.__setattr__`: files `value` as eager Python does. What it would refuse, or
        a parameter created in the frame, is Unsupported (the statement runs eagerly)."""
        kind = value_type(value)
        tables = {table: self.tables[table].items for table in MODULE_TABLES}
        if kind is not None and issubclass(kind, torch.nn.Parameter):
            if value.source is None:
                raise Unsupported(
                    f"a torch.nn.Parameter created inside the compiled function, assigned to {self.describe()}"
                )
            self._register(frame, "_parameters", name, value)
        elif name in tables["_parameters"]:
            raise Unsupported(f"assigning {value.describe()} to parameter {name!r} of {self.describe()}")
        elif _is_module(value):
            self._register(frame, "_modules", name, value)
        elif name in tables["_modules"]:
            if not is_none(value):
                raise Unsupported(f"assigning {value.describe()} to submodule {name!r} of {self.describe()}")
            self._register(frame, "_modules", name, value)
        elif name in tables["_buffers"]:
            if not (is_none(value) or (kind is not None and issubclass(kind, torch.Tensor))):
                raise Unsupported(f"assigning {value.describe()} to buffer {name!r} of {self.describe()}")
            tables["_buffers"][name] = value  # its persistence is kept
        else:
            self.object_setattr(frame, name, value)

    def _register(self, frame: Frame, table: str, name: str, value: Variable) -> None:
        """`value` filed under `name` in `table`, and removed from the other places it could be."""
        if not self.initialised:
            raise Unsupported(f"registering {name!r} on {self.describe()} before nn.Module.__init__ ran")
        guard_no_registration_hooks(frame)
        self.attrs.items.pop(name, None)
        for other in MODULE_TABLES:
            if other != table:
                self.tables[other].items.pop(name, None)
        if table != "_buffers":
            self.non_persistent.pop(name, None)
        self.tables[table].items[name] = value

    def module_train(self, mode: bool) -> None:
        """`train(mode)`: this module's flag and its children's; a module from outside among them
        would change outside the frame, which is Unsupported."""
        self.attrs.items["training"] = constant(mode)
        for child in self.tables["_modules"].items.values():
            if isinstance(child, NewModuleObjectVariable):
                child.module_train(mode)
            elif isinstance(child, NewModuleVariable):
                child.set_training(mode)
            elif not is_none(child):
                raise Unsupported(f"train/eval of {self.describe()}, which holds {child.describe()} from outside")

    def module_getattr(self, frame: Frame, name: str) -> Variable:
        """`nn.Module.__getattr__` (the lookup after instance and class found nothing)."""
        for table in MODULE_TABLES:
            if name in self.tables[table].items:
                return self.tables[table].items[name]
        raise raise_new(frame, AttributeError, f"'{self.cls.__name__}' object has no attribute '{name}'")

    def module_delattr(self, frame: Frame, name: str) -> None:
        for table in MODULE_TABLES:
            if name in self.tables[table].items:
                del self.tables[table].items[name]
                self.non_persistent.pop(name, None)
                return
        self.object_delattr(frame, name)

    def register_buffer(self, frame: Frame, name: Any, tensor: Variable, persistent: Any) -> None:
        kind = value_type(tensor)
        is_tensor = kind is not None and issubclass(kind, torch.Tensor) and not issubclass(kind, torch.nn.Parameter)
        if not self._new_name(name, "_buffers") or not (is_tensor or is_none(tensor)) or type(persistent) is not bool:
            raise Unsupported(f"register_buffer({name!r}, {tensor.describe()}) on {self.describe()}")
        self._register(frame, "_buffers", name, tensor)
        if persistent:
            self.non_persistent.pop(name, None)
        else:
            self.non_persistent[name] = None

    def add_module(self, frame: Frame, name: Any, module: Variable) -> None:
        if not self._new_name(name, "_modules") or not (_is_module(module) or is_none(module)):
            raise Unsupported(f"add_module({name!r}, {module.describe()}) on {self.describe()}")
        self._register(frame, "_modules", name, module)

    def _new_name(self, name: Any, table: str) -> bool:
        """The checks `register_buffer` / `add_module` make of a name: a non-empty string without
        dots that is not already another attribute (eagerly they raise; here the call breaks)."""
        if not isinstance(name, str) or not name or "." in name:
            return False
        taken = name in self.attrs.items or class_lookup(self.cls, name)[1] is not None
        taken = taken or any(name in self.tables[other].items for other in MODULE_TABLES if other != table)
        return not taken


def guard_no_registration_hooks(frame: Frame) -> None:
    """Registering on a module runs the global registration hooks: the trace models none."""
    if has_registration_hooks():
        raise Unsupported("global nn.Module registration hooks are registered")
    frame.output.guards.state_query(has_registration_hooks, "has_registration_hooks", False)


class ModuleMethodVariable(Variable):
    """A method of `nn.Module` bound to a module created while tracing, run as `NewModuleObject
    Variable` models it."""

    def __init__(self, module: NewModuleObjectVariable, name: str) -> None:
        self.module = module
        self.name = name

    def describe(self) -> str:
        return f"nn.Module.{self.name} of a {self.module.describe()}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        module, name = self.module, self.name
        if name == "__init__":
            module.module_init(args, kwargs)
            return constant(None)
        if name in ("__call__", "_wrapped_call_impl", "_call_impl"):
            if not module.initialised or guard_global_hooks(frame):
                raise Unsupported(f"calling a {module.describe()} (global module hooks, or no nn.Module.__init__)")
            return module.getattr(frame, "forward").call(frame, args, kwargs)
        values = self._arguments(args, kwargs)
        if name in ("train", "eval"):
            mode = values.get("mode", False)
            if type(mode) is not bool:  # eagerly a ValueError
                raise Unsupported(f"{self.describe()} with mode {mode!r}")
            module.module_train(mode)
            return module
        if name == "__getattr__":
            return module.module_getattr(frame, values["name"])
        if name == "__setattr__":
            module.module_setattr(frame, values["name"], values["value"])
        elif name == "__delattr__":
            module.module_delattr(frame, values["name"])
        elif name == "register_buffer":
            module.register_buffer(frame, values["name"], values["tensor"], values["persistent"])
        else:  # register_module / add_module
            module.add_module(frame, values["name"], values["module"])
        return constant(None)

    def _arguments(self, args: list[Variable], kwargs: dict[str, Variable]) -> dict[str, Any]:
        """The call's arguments by parameter name, defaults filled in; the names and flags must
        be constants (given as Python values), other arguments stay trackers."""
        try:
            bound = _SIGNATURES[self.name].bind(self.module, *args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"{self.describe()}: {e}") from None
        bound.apply_defaults()
        values = dict(bound.arguments)
        del values["self"]
        for key in ("name", "persistent", "mode"):
            value = values.get(key)
            if isinstance(value, Variable):
                if not value.is_constant():
                    raise Unsupported(f"{self.describe()} with {key} not known while tracing")
                values[key] = value.as_constant()
        return values


class UnboundModuleMethodVariable(ConstantVariable):
    """`nn.Module.name` taken from the class (a constant: the function) and called with the
    module first (old-style `nn.Module.__init__(self)`): modelled for a module made while tracing."""

    def __init__(self, name: str) -> None:
        super().__init__(torch.nn.Module.__dict__[name])
        self.name = name

    def describe(self) -> str:
        return f"nn.Module.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args or not isinstance(args[0], NewModuleObjectVariable) or self.name not in _MODELLED:
            raise Unsupported(f"{self.describe()} called on {args[0].describe() if args else 'nothing'}")
        return ModuleMethodVariable(args[0], self.name).call(frame, args[1:], kwargs)


class TorchModuleClassVariable(ConstantVariable):
    """A `torch.nn` module class (`nn.CrossEntropyLoss`): a constant that can also be called."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return NewModuleVariable.create(self.value, args, kwargs)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if self.value is torch.nn.Module and isinstance(torch.nn.Module.__dict__.get(name), types.FunctionType):
            return UnboundModuleMethodVariable(name)  # `nn.Module.__init__(self)`
        return super().getattr(frame, name)
