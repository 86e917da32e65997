"""Wrapping real values read from the frame into trackers, installing their guards.

`wrap(frame, value, source)` is the one entry point that turns a Python value into a tracker (values
read from the frame, globals, attributes, defaults, closure cells): it picks the tracker, in the
order `trace_rules` documents, and installs the guards the choice depends on. Results of graph
operations are made by `OutputGraph.wrap_result` (from fake values), constants computed while
tracing by `base.constant`.

This is where specialisation happens: a Python int becomes a constant guarded on its value, a
tensor becomes a graph input guarded on its metadata, a module or function is guarded on its
identity. A value wrapped without a source (read from torch's own namespaces, or computed while
tracing) gets no guard.
"""

from __future__ import annotations

import collections
import enum
import functools
import math
import os
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from ..guards.sources import AttrSource, GlobalSource, ItemSource
from ..marks import (
    graph_break,
    is_allowed_in_graph,
    is_compiling,
    is_disallowed_in_graph,
    is_exporting,
    substitute_for,
)
from ..shapes.dynamic import may_be_dynamic
from . import builtins as builtin_vars
from . import collectives, library
from .base import ConstantVariable, GuardedOnUseConstant, Variable, constant
from .checkpoint import CheckpointVariable
from .collection_types import CounterVariable, DefaultDictVariable, DequeVariable
from .containers import (
    DictVariable,
    ListVariable,
    NamedTupleVariable,
    SetVariable,
    SizeVariable,
    TupleVariable,
    is_namedtuple_class,
)
from .environ import EnvironVariable
from .frame_objects import (
    GlobalsDictVariable,
    NNModuleVariable,
    PythonModuleVariable,
    TorchModuleClassVariable,
    UserObjectVariable,
    WeakrefVariable,
)
from .func_transforms import GradVariable, VmapVariable
from .functions import (
    DisallowedCallVariable,
    FoldedCallVariable,
    GraphBreakVariable,
    OpaqueCallableVariable,
    PartialVariable,
    SubstitutedVariable,
    TensorMethodRefVariable,
    TorchClassVariable,
    TorchOpVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from .global_contexts import is_global_context_object, wrap_global_context
from .higher_order import CondVariable
from .optimizers import OptimizerClassVariable, OptimizerVariable, optimizer_helper
from .trace_rules import (
    TORCH_CLASSES,
    is_dict_key_constant,
    is_graph_op,
    is_literal,
    is_tensor_method,
    is_torch_module_class,
    is_typing_marker,
    is_user_class,
)
from .user_classes import UserClassVariable

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


# containers with one tracker per object however many names reach it
_CONTAINERS = (
    list,
    dict,
    collections.OrderedDict,
    collections.defaultdict,
    collections.Counter,
    collections.deque,
    set,
)


class SourceNeeded(Unsupported):
    """A value that can only be tracked as read from somewhere (a tensor, a user object followed
    through its attributes), met without a source."""


def wrap(frame: Frame, value: Any, source: Source | None, *, module_attribute: bool = False) -> Variable:
    """The tracker for `value`, guarded through `source` when there is one (`module_attribute`:
    the value is an attribute of an nn.Module, where ints stay constants)."""
    guards = frame.output.guards
    special = _special_callable(value)
    if special is not None:
        if source is not None:
            guards.id_match(source, value)
        return special
    if isinstance(value, torch.Tensor):
        if source is None:
            raise SourceNeeded("a tensor with no known source (e.g. a tensor global of a library)")
        return frame.output.tensor_input(value, source)
    if isinstance(value, enum.Enum):
        if source is not None:
            guards.id_match(source, value)
        return ConstantVariable(value, source)
    if type(value) is torch.Size:
        if source is not None:
            guards.constant_match(source, value)
        return SizeVariable([constant(int(s)) for s in value], source)
    if is_global_context_object(value) and source is not None:
        return wrap_global_context(frame, value, source)
    policy = frame.output.policy
    if (
        type(value) in (int, float)
        and source is not None
        and policy is not None
        and (type(value) is int or math.isfinite(value) and value != 0.0)
        and may_be_dynamic(source, is_tensor=False, module_attribute=module_attribute and type(value) is int)
        and policy.int_is_dynamic(source.name(), value)
    ):
        guards.type_match(source, value)
        if type(value) is float:
            guards.ordinary_float(source)
        return frame.output.symbolic_input(value, source)
    if is_literal(value) and source is not None and type(value) in (int, float, str, bool):
        return GuardedOnUseConstant(value, source, lambda: guards.constant_match(source, value))
    if is_literal(value):
        if source is not None:
            guards.constant_match(source, value)
        return ConstantVariable(value, source) if source is not None else constant(value)
    if isinstance(value, torch.nn.Module):
        if source is not None:
            # by class, not identity: instances of one class share compiled code, their
            # parameters and buffers being graph inputs; what the trace reads of the module
            # (attributes, members, hooks, training flag) is guarded where it is read
            guards.type_match(source, value)
        return NNModuleVariable(value, source)
    if isinstance(value, torch.optim.Optimizer) and source is not None:
        return OptimizerVariable(value, source, lambda: guards.type_match(source, value))
    if isinstance(value, types.ModuleType):
        if source is not None:
            guards.id_match(source, value)
        return PythonModuleVariable(value, source)
    if collectives.is_process_group(value):
        if source is not None:
            guards.id_match(source, value)
        return ConstantVariable(value, source)
    library_fn = library.lookup(value) or collectives.lookup(value) or optimizer_helper(value)
    if library_fn is not None:
        if source is not None:
            guards.id_match(source, value)
        return library_fn
    builtin = builtin_vars.lookup(value) if _hashable(value) else None
    if builtin is not None:
        if source is not None:
            guards.id_match(source, value)
        return builtin
    if is_graph_op(value):
        if source is not None:
            guards.id_match(source, value)
        return TorchOpVariable(value, source)
    if is_tensor_method(value):
        return TensorMethodRefVariable(value, source)
    if isinstance(value, type):
        if source is not None:
            guards.id_match(source, value)
        if collectives.is_reduce_op_class(value):
            return collectives.ReduceOpClassVariable(value, source)
        if value in TORCH_CLASSES:
            return TorchClassVariable(value, source)
        if issubclass(value, torch.optim.Optimizer):
            return OptimizerClassVariable(value, source)
        if is_user_class(value):
            return UserClassVariable(value, source)
        if is_torch_module_class(value):
            return TorchModuleClassVariable(value, source)
        return ConstantVariable(value, source)
    if isinstance(value, types.FunctionType):
        if source is not None:
            # the code, not the function object: a closure made anew on every call (and passed
            # to a resume function) is the same function; its cells and defaults are guarded
            # through their own sources where the inlined code reads them
            guards.type_match(source, value)
            guards.code_match(source, value)
        return UserFunctionVariable(value, source)
    if isinstance(value, types.MethodType):
        if not isinstance(value.__func__, types.FunctionType):
            return _wrap_opaque_method(frame, value, source)
        self_source = AttrSource(source, "__self__") if source is not None else None
        self_var = wrap(frame, value.__self__, self_source)
        fn_source = AttrSource(source, "__func__") if source is not None else None
        if fn_source is not None:
            wrap(frame, value.__func__, fn_source)  # guards the function like any other
        return UserMethodVariable(value.__func__, self_var, source, fn_source=fn_source)
    if isinstance(value, functools.partial):
        return _wrap_partial(frame, value, source)
    if is_namedtuple_class(type(value)):
        if source is not None:
            guards.type_match(source, value)
        items = [wrap(frame, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        return NamedTupleVariable(items, type(value), source)
    if source is not None and type(value) in _CONTAINERS:
        known = frame.output.known_container(value, source)
        if known is not None:
            return known
    if type(value) in (tuple, list):
        if source is not None:
            guards.length_match(source, value)
        items = [wrap(frame, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        if type(value) is tuple:
            return TupleVariable(items, source)
        return frame.output.register_container(value, ListVariable(items, source))
    if type(value) is set and all(is_literal(m) for m in value):
        if source is not None:
            guards.set_members_match(source, value)
        return frame.output.register_container(value, SetVariable.from_frame(value, source))
    if type(value) is weakref.ref:
        if source is not None:
            guards.type_match(source, value)
        return WeakrefVariable(value, source)
    if type(value) is dict and _is_module_globals(value):
        if source is not None:
            guards.globals_match(source, value)
        return GlobalsDictVariable(value, source)
    if type(value) in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
        if source is not None:
            guards.type_match(source, value)
            guards.dict_keys_match(source, value)
        if not all(is_dict_key_constant(k) for k in value):
            raise Unsupported("dict with non-constant keys")
        items = {k: wrap(frame, v, ItemSource(source, k) if source is not None else None) for k, v in value.items()}
        if type(value) is collections.defaultdict:
            factory_source = AttrSource(source, "default_factory") if source is not None else None
            var: Variable = DefaultDictVariable(items, wrap(frame, value.default_factory, factory_source), source)
        elif type(value) is collections.Counter:
            var = CounterVariable(items, source)
        else:
            var = DictVariable(items, source, python_class=type(value))
        return frame.output.register_container(value, var)
    if type(value) is collections.deque:
        if source is not None:
            guards.type_match(source, value)
            guards.length_match(source, value)
            wrap(frame, value.maxlen, AttrSource(source, "maxlen")).as_constant()  # guards maxlen's value
        items = [wrap(frame, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        return frame.output.register_container(value, DequeVariable(items, source, value.maxlen))
    if type(value) is os._Environ and source is not None:
        guards.id_match(source, value)
        return EnvironVariable(value, source)
    if isinstance(value, torch.autograd.graph.Node):
        # a tensor's grad_fn, read eagerly at a graph break and handed to the resume function:
        # opaque, compared by identity, guarded on its class (None or another node recompiles)
        if source is not None:
            guards.type_match(source, value)
        return UserObjectVariable(value, source)
    if is_typing_marker(value):
        if source is not None:
            guards.id_match(source, value)
        return ConstantVariable(value, source)
    if _is_bound_c_method(value) and source is not None:
        # a C method read before a break (`log.append`, `x.add`, `",".join` on the stack): a new
        # object every call, so it is its owner's method by name, not an object by identity
        guards.type_match(source, value)
        guards.constant_match(AttrSource(source, "__name__"), value.__name__)
        return wrap(frame, value.__self__, AttrSource(source, "__self__")).getattr(frame, value.__name__)
    if callable(value) and not hasattr(value, "__dict__") and not isinstance(value, type):
        if source is not None:
            guards.id_match(source, value)
            return OpaqueCallableVariable(value, source)
        raise Unsupported(
            f"call target {type(value).__qualname__} {getattr(value, '__qualname__', '')} "
            "is implemented in C and unknown to stenograph"
        )
    if source is None:
        if _is_inert(value):
            return ConstantVariable(value)  # a sentinel or plain record: compared by identity
        raise SourceNeeded(f"{type(value).__qualname__} object with no source")
    return UserObjectVariable(value, source, lambda: guards.type_match(source, value))


def wrap_trusted_member(frame: Frame, value: Any, namespace: dict, name: str) -> Variable:
    """`namespace[name]` of a trusted module (torch's: its globals or its attributes), read
    unguarded; a value that can only be tracked through where it was read (a tensor, an object
    such as DDP's module `logger`) is read, and guarded, through the module's dict."""
    try:
        return wrap(frame, value, None)
    except SourceNeeded:
        return wrap(frame, value, GlobalSource(name, namespace))


def _wrap_partial(frame: Frame, value: functools.partial, source: Source | None) -> Variable:
    def part(v: Any, *path: Any) -> Variable:
        if source is None:
            return wrap(frame, v, None)
        inner = AttrSource(source, path[0])
        return wrap(frame, v, ItemSource(inner, path[1]) if len(path) > 1 else inner)

    if source is not None:
        frame.output.guards.type_match(source, value)
        frame.output.guards.length_match(AttrSource(source, "args"), value.args)
        frame.output.guards.dict_keys_match(AttrSource(source, "keywords"), value.keywords)
    fn = part(value.func, "func")
    args = [part(a, "args", i) for i, a in enumerate(value.args)]
    kwargs = {k: part(v, "keywords", k) for k, v in value.keywords.items()}
    return PartialVariable(fn, args, kwargs, source)


def _wrap_opaque_method(frame: Frame, value: types.MethodType, source: Source | None) -> Variable:
    """A method object binding a function that is not Python code (a pybind11 class's method,
    `reducer.prepare_for_forward`, read before a graph break and handed to the resume function).
    It is a new object on every call, so it is guarded by its type and its function's identity;
    calling it is a graph break, where Python calls the method object itself."""
    if source is None:
        raise Unsupported(f"bound method of {type(value.__func__).__name__} with no source")
    guards = frame.output.guards
    guards.type_match(source, value)
    guards.id_match(AttrSource(source, "__func__"), value.__func__)
    return OpaqueCallableVariable(value, source)


def _is_bound_c_method(value: Any) -> bool:
    """A C method bound to an object (`log.append`, `x.add`), not a module's function (`math.sin`,
    whose `__self__` is the module) nor a plain C function (`__self__` None)."""
    return (
        isinstance(value, types.BuiltinMethodType)
        and value.__self__ is not None
        and not isinstance(value.__self__, types.ModuleType)
    )


def _is_inert(value: Any) -> bool:
    """Objects whose class has no methods of its own (sentinels, dataclass `Field`s)."""
    return all(name.startswith("__") for name, attr in vars(type(value)).items() if callable(attr))


def _special_callable(value: Any) -> Variable | None:
    """stenograph's own API functions and compiled wrappers met while tracing."""
    if not callable(value) or isinstance(value, (type, torch.nn.Module)):
        return None
    if value is is_compiling or value is torch.compiler.is_compiling:
        return FoldedCallVariable(value, True)
    if value is is_exporting or value is torch.compiler.is_exporting:
        # not guarded: an export's trace is never cached, and a compile never exports
        return FoldedCallVariable(value, is_exporting())
    substitute = substitute_for(value)
    if substitute is not None:
        return SubstitutedVariable(value, substitute)
    if value is graph_break:
        return GraphBreakVariable()
    if value is torch.cond:
        return CondVariable()
    if value is torch.utils.checkpoint.checkpoint:
        return CheckpointVariable()
    if value is torch.vmap or value is torch.func.vmap:
        return VmapVariable()
    if value is torch.func.grad:
        return GradVariable()
    if is_disallowed_in_graph(value):
        return DisallowedCallVariable(value)
    if is_allowed_in_graph(value):
        return TorchOpVariable(value)
    original = getattr(value, "__stenograph_original__", None)
    if isinstance(original, types.FunctionType):
        # a compiled function called from compiled code: inline its original
        return UserFunctionVariable(original)
    if isinstance(value, torch.jit.ScriptFunction):
        # `torch.jit.script` keeps the Python function it compiled (under the name torch gives
        # it for compilers): the trace inlines that, which computes what the script does
        scripted = getattr(value, "_torchdynamo_inline", None)
        if isinstance(scripted, types.FunctionType):
            return UserFunctionVariable(scripted)
    return None


def _is_module_globals(value: dict) -> bool:
    name = value.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is value


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
