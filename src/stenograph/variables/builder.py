"""Making trackers of Python values: real values read from the frame (`wrap`, installing their
guards) and objects the traced code creates by calling a class (`instantiate`).

`wrap(frame, value, source)` is the one entry point that turns a Python value into a tracker (values
read from the frame, globals, attributes, defaults, closure cells): it picks the tracker, in the
order `trace_rules` documents, and installs the guards the choice depends on. The choice is a
table, `WRAP_RULES`: one short function per kind of value, registered in the order the kinds are
tried (`@_rule(when)`); a value no entry answers is a user object. Results of graph
operations are made by `OutputGraph.wrap_result` (from fake values), constants computed while
tracing by `constants.constant`.

The trackers' modules lie below this one (it imports them all): they reach `wrap` and
`instantiate` through the frame they are handed (`Frame.wrap`, `Frame.instantiate`).

This is where specialisation happens: a Python int becomes a constant guarded on its value, a
tensor becomes a graph input guarded on its metadata, a module or function is guarded on its
identity. A value wrapped without a source (read from torch's own namespaces, or computed while
tracing) gets no guard.
"""

from __future__ import annotations

import collections
import enum
import functools
import itertools
import math
import os
import re
import sys
import types
import warnings
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .. import config
from ..errors import Unsupported
from ..guards.sources import (
    AppliedSource,
    AttrSource,
    ClassSource,
    GlobalSource,
    ItemSource,
    IterationItemSource,
    ProxiedMappingSource,
    Source,
    count_state,
    iterator_rest,
    proxied_mapping,
)
from ..marks import (
    graph_break,
    is_allowed_in_graph,
    is_compiling,
    is_disallowed_in_graph,
    is_exporting,
    is_forbidden,
    is_leaf_function,
    is_nonstrict_trace,
    is_nonstrict_trace_decorator,
    is_torch_decorator,
    substitute_for,
    wrapped_for_compiler,
)
from ..shapes.dynamic import mark_static
from ..shapes.named_sources import dynamic_int
from . import builtins as builtin_vars
from . import (
    collectives,
    library,
    numpy_arrays,
    random_draws,
    tensor_hooks,  # noqa: F401 - fills tensor.TRACED_METHODS
)
from .autograd_function import FunctionInstanceVariable
from .base import Variable
from .checkpoint import CheckpointVariable
from .class_lookup import class_lookup
from .collection_types import CounterVariable, DefaultDictVariable, DequeVariable
from .constants import C_FIELD_DESCRIPTORS, ConstantVariable, FieldGetVariable, GuardedOnUseConstant, constant
from .containers import (
    SEQUENCE_ITERATORS,
    DictVariable,
    InputIteratorVariable,
    ListVariable,
    SetVariable,
    SizeVariable,
    TupleVariable,
    dict_key,
    set_member_by_identity,
)
from .descriptors import class_attr_source, class_member
from .environ import EnvironVariable
from .frame_dicts import FrameDictVariable, key_looked_up_alone
from .frame_objects import (
    GlobalsDictVariable,
    NNModuleVariable,
    PythonModuleVariable,
    UserObjectVariable,
    WeakrefVariable,
    new_weakref,
)
from .func_transforms import GradVariable, VmapVariable
from .functional_call import FunctionalCallVariable
from .functions import (
    CachedFunctionVariable,
    CheckVariable,
    CompilerWrapperVariable,
    DisallowedCallVariable,
    FoldedCallVariable,
    ForbiddenCallVariable,
    FullgraphFunctionVariable,
    GraphBreakVariable,
    MarkStaticVariable,
    OpaqueCallableVariable,
    PartialVariable,
    SkipFrameVariable,
    StepUnsupportedVariable,
    SubstitutedVariable,
    TensorMethodRefVariable,
    TorchClassVariable,
    TorchOpVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from .global_contexts import (
    SavedTensorsHooksOff,
    error_on_break_factory,
    is_global_context_object,
    wrap_global_context,
)
from .higher_order import CondVariable, MapVariable
from .mapping_proxy import MappingProxyVariable
from .named_tuples import NamedTupleVariable, StructSeqVariable
from .new_modules import TorchModuleClassVariable, instantiate_module
from .nonstrict_calls import NonstrictDecoratorVariable
from .optimizers import OptimizerClassVariable, OptimizerVariable, optimizer_helper
from .profiler_ranges import ProfileExitVariable, resumed_profile_exit
from .tensor import TensorVariable
from .trace_rules import (
    TORCH_CLASSES,
    is_dict_key_constant,
    is_graph_op,
    is_literal,
    is_namedtuple_class,
    is_plain_function_class,
    is_sparse_tensor,
    is_structseq_class,
    is_tensor_method,
    is_torch_module_class,
    is_typing_marker,
    is_user_class,
)
from .user_classes import UserClassVariable, new_object
from .warning_blocks import make_catch_warnings
from .weak_containers import WEAK_CONTAINERS, WeakContainerVariable, new_weak_container

if TYPE_CHECKING:
    from ..guards.guard_set import GuardSet
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


_DICTS = (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)
# containers with one tracker per object however many names reach it
_CONTAINERS = (list, *_DICTS, collections.deque, set)


class SourceNeeded(Unsupported):
    """A value that can only be tracked as read from somewhere (a tensor, a user object followed
    through its attributes), met without a source."""


@dataclass(slots=True)
class Wrapping:
    """One call of `wrap`: what a rule of its table reads."""

    frame: Frame
    value: Any
    source: Source | None
    # the value is an attribute of an nn.Module, where ints stay constants
    module_attribute: bool = False

    @property
    def guards(self) -> GuardSet:
        return self.frame.output.guards


@dataclass(frozen=True)
class WrapRule:
    """One entry of `wrap`'s table: `build` makes the tracker of the values `when` accepts (given
    the value and its source), or passes them on (None) to the entries after it."""

    name: str
    when: Callable[[Any, Source | None], bool]
    build: Callable[[Wrapping], Variable | None]


# `wrap`'s table, in the order it is consulted (the order is semantics: a marked callable before
# anything else, a tensor before a number, a literal before a container, ...)
WRAP_RULES: list[WrapRule] = []
Build = Callable[[Wrapping], Variable | None]


def _rule(when: Callable[[Any, Source | None], bool]) -> Callable[[Build], Build]:
    """Files the decorated function as the next entry of `WRAP_RULES`, for the values `when` accepts."""

    def add(build: Build) -> Build:
        WRAP_RULES.append(WrapRule(build.__name__.lstrip("_"), when, build))
        return build

    return add


def wrap(frame: Frame, value: Any, source: Source | None, *, module_attribute: bool = False) -> Variable:
    """The tracker for `value`, guarded through `source` when there is one (`module_attribute`:
    the value is an attribute of an nn.Module, where ints stay constants): the first entry of
    `WRAP_RULES` that answers, or else a user object."""
    wrapping = Wrapping(frame, value, source, module_attribute)
    for rule in WRAP_RULES:
        if rule.when(value, source):
            var = rule.build(wrapping)
            if var is not None:
                return var
    return _user_object(wrapping)


def _guard_identity(w: Wrapping) -> None:
    if w.source is not None:
        w.guards.id_match(w.source, w.value)


@_rule(lambda value, source: is_forbidden(value))
def _forbidden(w: Wrapping) -> Variable:
    """Callables marked `forbid_in_graph`, classes included (stenograph's `set_stance`)."""
    _guard_identity(w)
    return ForbiddenCallVariable(w.value)


@_rule(lambda value, source: callable(value) and not isinstance(value, (type, torch.nn.Module)))
def _special_callable(w: Wrapping) -> Variable | None:
    """stenograph's own API functions, marked functions and compiled wrappers met while tracing."""
    special = _special_callable_tracker(w.value)
    if special is not None:
        _guard_identity(w)
    return special


def _traced_tensor(value: Any, source: Source | None) -> bool:
    return isinstance(value, torch.Tensor) and type(value) not in config.nontraceable_tensor_subclasses


@_rule(_traced_tensor)
def _tensor(w: Wrapping) -> Variable:
    """Tensors, subclass instances included; classes in `config.nontraceable_tensor_subclasses`
    are plain objects instead (reading their Python attributes is traced, a tensor operation on
    them breaks the graph), as torch.compile treats them. A sparse tensor makes the frame run
    eagerly, as torch.compile skips a frame reading one."""
    if w.source is None:
        raise SourceNeeded("a tensor with no known source (e.g. a tensor global of a library)")
    if is_sparse_tensor(w.value):
        refusal = Unsupported(
            f"{w.source.name()} is a sparse tensor ({w.value.layout}), which graphs do not carry",
            hint="torch.compile does not trace sparse tensors either; without fullgraph the frame runs eagerly",
        )
        refusal.whole_frame = True  # torch.compile skips the frame that reads one
        raise refusal
    return w.frame.output.tensor_input(w.value, w.source)


@_rule(lambda value, source: numpy_arrays.is_ndarray(value))
def _numpy_array(w: Wrapping) -> Variable:
    if w.source is None:
        raise SourceNeeded("a NumPy array with no known source")
    return numpy_arrays.array_input(w.frame, w.value, w.source)


@_rule(lambda value, source: source is not None and numpy_arrays.is_traced_scalar(value))
def _numpy_scalar(w: Wrapping) -> Variable:
    assert w.source is not None
    return numpy_arrays.scalar_input(w.frame, w.value, w.source)


# values that never change once made: the object read is the value traced
_IMMUTABLE_OBJECTS = (enum.Enum, re.Pattern, re.Match)


@_rule(lambda value, source: isinstance(value, _IMMUTABLE_OBJECTS))
def _immutable_object(w: Wrapping) -> Variable:
    """Enum members, compiled regular expressions and their matches: constants, guarded by
    identity; their methods run now on constant arguments (`pattern.fullmatch("2.1")`)."""
    _guard_identity(w)
    return ConstantVariable(w.value, w.source)


@_rule(lambda value, source: type(value) is torch.Size)
def _size(w: Wrapping) -> Variable:
    if w.source is not None:
        w.guards.constant_match(w.source, w.value)
    return SizeVariable([constant(int(s)) for s in w.value], w.source)


@_rule(lambda value, source: is_global_context_object(value) and source is not None)
def _global_context(w: Wrapping) -> Variable:
    assert w.source is not None
    return wrap_global_context(w.frame, w.value, w.source)


@_rule(lambda value, source: type(value) in (int, float) and source is not None)
def _dynamic_number(w: Wrapping) -> Variable | None:
    """A number the shape policy makes dynamic: a symbolic input of the graph. An int torch's
    compiler settings name (`named_sources`) is, whatever else holds."""
    value, source, policy = w.value, w.source, w.frame.output.policy
    assert source is not None
    if policy is None or not (type(value) is int or math.isfinite(value) and value != 0.0):
        return None
    # an int attribute of an nn.Module: a constant, unless `allow_unspec_int_on_nn_module`; an
    # int reached from a global (`COUNT`, `Registry.step`, `cfg.layers` of a global `cfg`): a
    # constant whatever `dynamic=` says, as torch.compile's (floats there go dynamic)
    automatic_only = w.module_attribute and type(value) is int
    if not (type(value) is int and dynamic_int(source, value)) and (
        (automatic_only and not config.allow_unspec_int_on_nn_module)
        or (type(value) is int and isinstance(source.root(), GlobalSource))
        or not policy.int_is_dynamic(source.name(), value, automatic_only=automatic_only)
    ):
        return None
    w.guards.type_match(source, value)
    if type(value) is float:
        w.guards.ordinary_float(source)
    return w.frame.output.symbolic_input(value, source, unbacked=policy.int_unbacked(source, value))


@_rule(lambda value, source: is_literal(value) and source is not None and type(value) in (int, float, str, bool))
def _guarded_on_use(w: Wrapping) -> Variable:
    """A number, string or bool read from the frame: its value is guarded once it is used."""
    value, source, guards = w.value, w.source, w.guards
    assert source is not None
    return GuardedOnUseConstant(value, source, lambda: guards.constant_match(source, value))


@_rule(lambda value, source: is_literal(value))
def _literal(w: Wrapping) -> Variable | None:
    """A constant: made in the code, or read from the frame and guarded by value. A tuple read
    from the frame is a sequence instead, each item guarded where it is used (`_sequence`), but
    for an nn.Module's attribute (`self.stride`), a constant as the module's ints are."""
    if w.source is None:
        return constant(w.value)
    if type(w.value) is tuple and not w.module_attribute:
        return None
    w.guards.constant_match(w.source, w.value)
    return ConstantVariable(w.value, w.source)


@_rule(lambda value, source: isinstance(value, torch.nn.Module))
def _module(w: Wrapping) -> Variable:
    if w.source is not None:
        # by class, not identity: instances of one class share compiled code, their parameters
        # and buffers being graph inputs; what the trace reads of the module (attributes,
        # members, hooks, training flag) is guarded where it is read
        w.guards.type_match(w.source, w.value)
    return NNModuleVariable(w.value, w.source)


@_rule(lambda value, source: isinstance(value, torch.optim.Optimizer) and source is not None)
def _optimizer(w: Wrapping) -> Variable:
    value, source, guards = w.value, w.source, w.guards
    assert source is not None
    return OptimizerVariable(value, source, lambda: guards.type_match(source, value))


@_rule(lambda value, source: isinstance(value, types.ModuleType))
def _python_module(w: Wrapping) -> Variable:
    _guard_identity(w)
    return PythonModuleVariable(w.value, w.source)


@_rule(lambda value, source: collectives.is_process_group(value))
def _process_group(w: Wrapping) -> Variable:
    _guard_identity(w)
    return ConstantVariable(w.value, w.source)


@_rule(lambda value, source: True)
def _library_function(w: Wrapping) -> Variable | None:
    """A function a handler table of `library`, `collectives`, `random_draws`, `optimizers` or
    `numpy_arrays` models."""
    value = w.value
    handled = (
        library.lookup(value)
        or collectives.lookup(value)
        or random_draws.lookup(value)
        or optimizer_helper(value)
        or numpy_arrays.lookup(value)
    )
    if handled is not None:
        _guard_identity(w)
    return handled


@_rule(lambda value, source: _hashable(value))
def _builtin(w: Wrapping) -> Variable | None:
    builtin = builtin_vars.lookup(w.value)
    if builtin is not None:
        _guard_identity(w)
    return builtin


@_rule(lambda value, source: is_graph_op(value))
def _graph_op(w: Wrapping) -> Variable:
    _guard_identity(w)
    return TorchOpVariable(w.value, w.source)


@_rule(lambda value, source: is_tensor_method(value))
def _tensor_method(w: Wrapping) -> Variable:
    return TensorMethodRefVariable(w.value, w.source)


@_rule(lambda value, source: isinstance(value, type))
def _class(w: Wrapping) -> Variable:
    value, source = w.value, w.source
    _guard_identity(w)
    factory = error_on_break_factory(value)
    if factory is not None:
        return factory
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


@_rule(lambda value, source: isinstance(value, types.FunctionType))
def _function(w: Wrapping) -> Variable:
    if w.source is not None:
        # the code, not the function object: a closure made anew on every call (and passed
        # to a resume function) is the same function; its cells and defaults are guarded
        # through their own sources where the inlined code reads them
        w.guards.type_match(w.source, w.value)
        w.guards.code_match(w.source, w.value)
    return UserFunctionVariable(w.value, w.source)


_FUNCTION_APPLY = getattr(torch.autograd.Function.__dict__["apply"], "__func__", None)  # (torch 2.15+: a C classmethod)


@_rule(lambda value, source: isinstance(value, types.MethodType))
def _method(w: Wrapping) -> Variable:
    frame, value, source = w.frame, w.value, w.source
    if not isinstance(value.__func__, types.FunctionType):
        return _wrap_opaque_method(frame, value, source)
    self_source = AttrSource(source, "__self__") if source is not None else None
    self_var = wrap(frame, value.__self__, self_source)
    fn_source = AttrSource(source, "__func__") if source is not None else None
    if fn_source is not None:
        wrap(frame, value.__func__, fn_source)  # guards the function like any other
    if value.__func__ is _FUNCTION_APPLY and is_plain_function_class(value.__self__):
        return self_var.getattr(frame, "apply")  # `self.fn = MyFunction.apply`, kept and called later
    return UserMethodVariable(value.__func__, self_var, source, fn_source=fn_source)


@_rule(lambda value, source: isinstance(value, functools.partial))
def _partial(w: Wrapping) -> Variable:
    return _wrap_partial(w.frame, w.value, w.source)


@_rule(lambda value, source: isinstance(value, functools._lru_cache_wrapper))
def _cached_function(w: Wrapping) -> Variable:
    _guard_identity(w)
    inner = AttrSource(w.source, "__wrapped__") if w.source is not None else None
    return CachedFunctionVariable(w.value, wrap(w.frame, w.value.__wrapped__, inner), w.source)


@_rule(lambda value, source: is_namedtuple_class(type(value)))
def _namedtuple(w: Wrapping) -> Variable:
    cls = type(w.value)
    if w.source is None:
        return NamedTupleVariable(_items(w, enumerate(w.value)), cls, None)
    w.guards.type_match(w.source, w.value)
    if cls.__getitem__ is tuple.__getitem__:
        return NamedTupleVariable(_items(w, enumerate(w.value)), cls, w.source)
    # `t[0]` would run the class's own `__getitem__`: the fields are read by name
    fields = [wrap(w.frame, v, AttrSource(w.source, f)) for f, v in zip(cls._fields, w.value)]
    return NamedTupleVariable(fields, cls, w.source)


@_rule(lambda value, source: source is not None and type(value) in _CONTAINERS)
def _known_container(w: Wrapping) -> Variable | None:
    """A list, dict, deque or set already tracked through another name: the same tracker."""
    assert w.source is not None
    return w.frame.output.known_container(w.value, w.source)


@_rule(lambda value, source: type(value) in (tuple, list))
def _sequence(w: Wrapping) -> Variable:
    if w.source is not None:
        w.guards.length_match(w.source, w.value)
    items = _contents(w, enumerate(w.value))
    if type(w.value) is tuple:
        return TupleVariable(items, w.source)
    return w.frame.output.register_container(w.value, ListVariable(items, w.source))


@_rule(lambda value, source: type(value) is set and all(is_literal(m) or _fixed_function(m) for m in value))
def _set_of_fixed_members(w: Wrapping) -> Variable | None:
    """A set of constants and of functions nothing of which can change unguarded (`{"a",
    torch.sin, torch.amp._exit_autocast}`), fixed by one guard comparing it with a frozen copy.
    (Other objects in it would have no source to guard what the trace reads of them by.)"""
    trackers = {}
    for member in w.value:
        if not is_literal(member):
            try:
                trackers[member] = wrap(w.frame, member, None)
            except SourceNeeded:
                return None
    if w.source is not None:
        w.guards.set_members_match(w.source, w.value)
    return w.frame.output.register_container(w.value, SetVariable.from_frame(w.frame, w.value, w.source, trackers))


@_rule(
    lambda value, source: source is not None and type(value) is set and all(isinstance(m, torch.Tensor) for m in value)
)
def _set_of_tensors(w: Wrapping) -> Variable:
    """A set of tensors: graph inputs read by their position in its order of iteration (their
    addresses'), the set's size guarded; found in it by identity."""
    assert w.source is not None
    w.guards.length_match(w.source, w.value)
    trackers = {m: wrap(w.frame, m, IterationItemSource(w.source, index)) for index, m in enumerate(w.value)}
    return w.frame.output.register_container(w.value, SetVariable.from_frame(w.frame, w.value, w.source, trackers))


def _fixed_function(value: Any) -> bool:
    """A module's builtin function, or a Python function: compared by identity, and what calling
    it reads besides its code (its module's globals, its defaults, its cells) is guarded where
    read, through the function itself for a function without a path of its own."""
    if isinstance(value, types.FunctionType):
        return True
    return isinstance(value, types.BuiltinFunctionType) and set_member_by_identity(value)


@_rule(lambda value, source: type(value) is weakref.ref)
def _weakref(w: Wrapping) -> Variable:
    if w.source is not None:
        w.guards.type_match(w.source, w.value)
    return WeakrefVariable(w.value, w.source)


@_rule(lambda value, source: isinstance(value, WEAK_CONTAINERS))
def _weak_container(w: Wrapping) -> Variable:
    """A WeakKeyDictionary, WeakValueDictionary or WeakSet read from the frame: modelled by its
    contents (`weak_containers`), read on first need; a subclass's methods may differ."""
    if type(w.value) not in WEAK_CONTAINERS:
        base = next(cls for cls in WEAK_CONTAINERS if isinstance(w.value, cls))
        name = type(w.value).__qualname__
        raise Unsupported(f"{name}, a subclass of weakref.{base.__name__} (its methods may differ)")
    if w.source is None:
        raise SourceNeeded(f"{type(w.value).__name__} with no source")
    known = w.frame.output.known_container(w.value, w.source)
    if known is not None:
        return known
    w.guards.type_match(w.source, w.value)
    return w.frame.output.register_container(w.value, WeakContainerVariable(type(w.value), w.value, w.source))


@_rule(lambda value, source: type(value) is dict and _is_module_globals(value))
def _module_globals(w: Wrapping) -> Variable:
    if w.source is not None:
        w.guards.globals_match(w.source, w.value)
    return GlobalsDictVariable(w.value, w.source)


@_rule(
    lambda value, source: (
        source is not None
        and type(value) in (dict, collections.OrderedDict)
        and all(key_looked_up_alone(key) for key in value)
    )
)
def _frame_dict(w: Wrapping) -> Variable:
    """A dict or OrderedDict read from the frame keyed by constants: its keys guarded as the
    trace uses them (`frame_dicts`), its class now."""
    assert w.source is not None
    w.guards.type_match(w.source, w.value)
    return w.frame.output.register_container(w.value, FrameDictVariable(w.value, w.source, w.frame))


@_rule(
    lambda value, source: type(value) in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)
)
def _dict(w: Wrapping) -> Variable:
    value, source = w.value, w.source
    if source is not None:
        w.guards.type_match(source, value)
        w.guards.dict_keys_match(source, value)
    items = dict(zip(_dict_keys(w), _contents(w, value.items())))
    if type(value) is collections.defaultdict:
        factory_source = AttrSource(source, "default_factory") if source is not None else None
        var: Variable = DefaultDictVariable(items, wrap(w.frame, value.default_factory, factory_source), source)
    elif type(value) is collections.Counter:
        var = CounterVariable(items, source)
    else:
        var = DictVariable(items, source, python_class=type(value))
    return w.frame.output.register_container(value, var)


@_rule(lambda value, source: type(value) is types.MappingProxyType and source is not None)
def _mapping_proxy(w: Wrapping) -> Variable | None:
    """A mappingproxy passed in: a read-only view of the dict it reads, that dict guarded (its
    keys, the values used) through the proxy on every call, as changes made to it show."""
    if type(proxied_mapping(w.value)) not in _DICTS:
        return None
    assert w.source is not None
    w.guards.type_match(w.source, w.value)
    mapping = wrap(w.frame, proxied_mapping(w.value), ProxiedMappingSource(w.source))
    return MappingProxyVariable(mapping, w.source)  # type: ignore[arg-type]


def _dict_keys(w: Wrapping) -> list[Any]:
    """The keys of a dict read from the frame as its tracker holds them: constants, and tensors
    (graph inputs read by their position, keyed by identity)."""
    keys = []
    for index, key in enumerate(w.value):
        if is_dict_key_constant(key):
            keys.append(key)
        elif isinstance(key, torch.Tensor) and w.source is not None:
            keys.append(dict_key(wrap(w.frame, key, IterationItemSource(w.source, index)), w.frame))
        else:
            raise Unsupported("dict with non-constant keys")
    return keys


@_rule(lambda value, source: source is not None and type(value) in SEQUENCE_ITERATORS)
def _sequence_iterator(w: Wrapping) -> Variable:
    """A list, tuple or range iterator passed in: the items it has left (their count guarded)."""
    assert w.source is not None
    w.guards.type_match(w.source, w.value)
    rest_source = AppliedSource(w.source, iterator_rest)
    rest = iterator_rest(w.value)
    w.guards.length_match(rest_source, rest)
    items = [wrap(w.frame, item, ItemSource(rest_source, k)) for k, item in enumerate(rest)]
    return InputIteratorVariable(items, w.source)


@_rule(lambda value, source: source is not None and type(value) is itertools.count)
def _count_passed_in(w: Wrapping) -> Variable:
    """An `itertools.count` passed in: its next value and step guarded (`InputCountVariable`)."""
    assert w.source is not None
    state = count_state(w.value)
    if state is None:
        raise Unsupported(f"{w.source.name()} is an itertools.count of values other than ints and floats")
    w.guards.type_match(w.source, w.value)
    w.guards.constant_match(AppliedSource(w.source, count_state), state)
    return library.InputCountVariable(constant(state[0]), constant(state[1]), w.source)


@_rule(lambda value, source: type(value) is collections.deque)
def _deque(w: Wrapping) -> Variable:
    value, source = w.value, w.source
    if source is not None:
        w.guards.type_match(source, value)
        w.guards.length_match(source, value)
        wrap(w.frame, value.maxlen, AttrSource(source, "maxlen")).as_constant()  # guards maxlen's value
    items = _contents(w, enumerate(value))
    return w.frame.output.register_container(value, DequeVariable(items, source, value.maxlen))


@_rule(lambda value, source: type(value) is os._Environ and source is not None)
def _environ(w: Wrapping) -> Variable:
    assert w.source is not None
    w.guards.id_match(w.source, w.value)
    return EnvironVariable(w.value, w.source)


@_rule(lambda value, source: isinstance(value, torch.autograd.graph.Node))
def _autograd_node(w: Wrapping) -> Variable:
    """A tensor's grad_fn, read eagerly at a graph break and handed to the resume function:
    opaque, compared by identity, guarded on its class (None or another node recompiles)."""
    if w.source is not None:
        w.guards.type_match(w.source, w.value)
    return UserObjectVariable(w.value, w.source)


@_rule(lambda value, source: is_typing_marker(value))
def _typing_marker(w: Wrapping) -> Variable:
    _guard_identity(w)
    return ConstantVariable(w.value, w.source)


def _is_field_get(value: Any) -> bool:
    """`descriptor.__get__` of a C field descriptor, bound (`type.__dict__["__dict__"].__get__`)."""
    return (
        type(value) is types.MethodWrapperType
        and value.__name__ == "__get__"
        and isinstance(value.__self__, C_FIELD_DESCRIPTORS)
    )


@_rule(lambda value, source: _is_field_get(value) and source is not None)
def _field_get(w: Wrapping) -> Variable:
    """A C field descriptor's bound `__get__` held by the frame (a helper a module keeps, as
    `_get_dunder_dict = type.__dict__["__dict__"].__get__`): the field read by name; the
    descriptor is guarded by identity (the method-wrapper is a new object each time it is taken)."""
    assert w.source is not None
    w.guards.type_match(w.source, w.value)
    w.guards.constant_match(AttrSource(w.source, "__name__"), "__get__")
    w.guards.id_match(AttrSource(w.source, "__self__"), w.value.__self__)
    return FieldGetVariable(w.value.__self__, w.source)


@_rule(lambda value, source: _is_bound_c_method(value) and source is not None)
def _bound_c_method(w: Wrapping) -> Variable:
    """A C method read before a break (`log.append`, `x.add`, `",".join` on the stack): a new
    object every call, so it is its owner's method by name, not an object by identity."""
    value, source = w.value, w.source
    assert source is not None
    w.guards.type_match(source, value)
    w.guards.constant_match(AttrSource(source, "__name__"), value.__name__)
    owner = wrap(w.frame, value.__self__, AttrSource(source, "__self__"))
    try:
        return owner.getattr(w.frame, value.__name__)
    except Unsupported:  # a method tracing does not know: calling it breaks the graph there
        return OpaqueCallableVariable(value, source)


@_rule(lambda value, source: callable(value) and not hasattr(value, "__dict__") and not isinstance(value, type))
def _c_callable(w: Wrapping) -> Variable:
    """A callable implemented in C that the tables above do not know."""
    value = w.value
    if w.source is None:
        raise Unsupported(
            f"call target {type(value).__qualname__} {getattr(value, '__qualname__', '')} "
            "is implemented in C and unknown to stenograph"
        )
    w.guards.id_match(w.source, value)
    return OpaqueCallableVariable(value, w.source)


def _user_object(w: Wrapping) -> Variable:
    """Anything the table does not answer: an object read through its source, whose attributes
    are traced through its class; without a source, only an inert one (a sentinel) can be a
    constant."""
    value, source, guards = w.value, w.source, w.guards
    if source is None:
        if _is_inert(value):
            return ConstantVariable(value)  # a sentinel or plain record: compared by identity
        raise SourceNeeded(f"{type(value).__qualname__} object with no source")
    return UserObjectVariable(value, source, lambda: guards.type_match(source, value))


# ids of the containers whose items are being wrapped (the compile lock keeps it one thread's)
_containers_open: set[int] = set()


def _contents(w: Wrapping, entries: Iterable[tuple[Any, Any]]) -> list[Variable]:
    """`_items` of a container, which must not hold itself (`x.append(x)`): a tracker is a
    tree, whose walks (constant or not, rebuilding it after the graph) would not end."""
    if id(w.value) in _containers_open:
        raise Unsupported(f"a {type(w.value).__name__} that holds itself")
    _containers_open.add(id(w.value))
    try:
        return _items(w, entries)
    finally:
        _containers_open.discard(id(w.value))


def _items(w: Wrapping, entries: Iterable[tuple[Any, Any]]) -> list[Variable]:
    """The trackers of a container's items `(key or index, value)`, each read through its item
    of the container's source (a dict's value under a tensor key: by its position)."""
    return [wrap(w.frame, v, _item_source(w.source, k, index)) for index, (k, v) in enumerate(entries)]


def _item_source(source: Source | None, key: Any, index: int) -> Source | None:
    if source is None:
        return None
    if isinstance(key, torch.Tensor):
        return IterationItemSource(source, index, "values")
    return ItemSource(source, key)


def instantiate(frame: Frame, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`cls(*args, **kwargs)` while tracing: an enum member looked up, a named tuple, a new module
    of a user `nn.Module` subclass, or another new object of a user class."""
    if issubclass(cls, enum.Enum):
        if all(a.is_constant() for a in [*args, *kwargs.values()]):
            return constant(cls(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()}))
        raise Unsupported(f"looking up enum {cls.__qualname__} by a non-constant value")
    if cls is weakref.ref:
        return new_weakref(args, kwargs)
    if cls in WEAK_CONTAINERS:
        return new_weak_container(frame, cls, args, kwargs)
    if cls is weakref.finalize:
        raise Unsupported("weakref.finalize registers a callback for the object's death (made eagerly, at a break)")
    if cls is warnings.catch_warnings:
        return make_catch_warnings(frame, args, kwargs)
    if is_plain_function_class(cls) and not args and not kwargs:
        return FunctionInstanceVariable(UserClassVariable(cls, None), cls)
    if type(cls).__call__ is dict:  # a TypedDict class: calling it makes a plain dict
        return wrap(frame, dict, None).call(frame, args, kwargs)
    if is_namedtuple_class(cls):
        return NamedTupleVariable.construct(frame, cls, args, kwargs)
    if is_structseq_class(cls):  # a `torch.return_types` class, called on a sequence
        return StructSeqVariable.build(frame, cls, args, kwargs)
    if issubclass(cls, torch.nn.Module):
        return instantiate_module(frame, cls, args, kwargs)
    if _tensor_subclass_of_a_tensor(cls, args, kwargs):
        # `Cls(t)` of a user's tensor class keeping torch's constructor: an alias of `t` of class
        # `Cls`, as `t.as_subclass(Cls)` (autograd history kept)
        return frame.output.call("call_method", "as_subclass", [args[0], constant(cls)], {}, f"{cls.__name__}(t)")
    return new_object(frame, cls, args, kwargs)


def _tensor_subclass_of_a_tensor(cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> bool:
    if not (issubclass(cls, torch.Tensor) and is_user_class(cls)) or kwargs or len(args) != 1:
        return False
    if not isinstance(args[0], TensorVariable):
        return False
    return all(class_lookup(cls, name)[0] is getattr(torch.Tensor, name) for name in ("__new__", "__init__"))


def class_member_of(frame: Frame, obj: Variable, cls: type, name: str) -> Variable:
    """`obj.name` found on `cls` (a method, property or class attribute a tensor subclass
    defines), bound as Python binds it and guarded on the class."""
    attr, _ = class_lookup(cls, name)
    source = class_attr_source(frame, cls, name, attr)
    return class_member(frame, obj, UserClassVariable(cls, ClassSource(cls)), attr, name, source)


def wrap_trusted_member(frame: Frame, value: Any, namespace: dict, name: str) -> Variable:
    """`namespace[name]` of a trusted module (torch's: its globals or its attributes), read
    unguarded; a value that can only be tracked through where it was read (a tensor, an object
    such as DDP's module `logger`) is read, and guarded, through the module's dict, as is an
    instance of a class traced like a user's (`torch.utils._pytree`'s shared `LeafSpec`)."""
    if is_user_class(type(value)) and not isinstance(value, type):
        return wrap(frame, value, GlobalSource(name, namespace))
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
    return PartialVariable(fn, args, kwargs, source, value)


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
        and not _shadowed_on_instance(value)
    )


def _shadowed_on_instance(method: types.BuiltinMethodType) -> bool:
    """Whether the owner's instance dict holds another value under the method's name: reading
    the method by name would find that value instead."""
    try:
        own = object.__getattribute__(method.__self__, "__dict__")
    except AttributeError:
        return False
    return isinstance(own, dict) and method.__name__ in own


def _is_inert(value: Any) -> bool:
    """Objects whose class has no methods of its own (sentinels, dataclass `Field`s)."""
    return all(name.startswith("__") for name, attr in vars(type(value)).items() if callable(attr))


# every spelling of "is this code being compiled?" (torch._dynamo's own is looked up only once
# the user imported torch._dynamo: importing it takes seconds)
_IS_COMPILING = (
    is_compiling,
    torch.compiler.is_compiling,
    torch.compiler.is_dynamo_compiling,
    torch._utils.is_compiling,
)


def _special_callable_tracker(value: Any) -> Variable | None:
    """The tracker of a stenograph API function, a marked function or a compiled wrapper."""
    dynamo_is_compiling = getattr(sys.modules.get("torch._dynamo.external_utils"), "is_compiling", None)
    if any(value is f for f in _IS_COMPILING) or (value is dynamo_is_compiling and value is not None):
        return FoldedCallVariable(value, True)
    if value is torch.fx._symbolic_trace.is_fx_symbolic_tracing:
        return FoldedCallVariable(value, False)  # its answer under torch.compiler.is_compiling()
    if value is torch.fx._symbolic_trace.is_fx_tracing and not config.force_compile_during_fx_trace:
        # False: compiled code never runs inside an FX trace (`entry._in_nested_trace`); its
        # one-time log warning is issued as eagerly
        torch.fx._symbolic_trace.is_fx_tracing_warning()
        return FoldedCallVariable(value, False)
    if value is is_exporting or value is torch.compiler.is_exporting:
        # not guarded: an export's trace is never cached, and a compile never exports
        return FoldedCallVariable(value, is_exporting())
    substitute = substitute_for(value)
    if substitute is not None:
        return SubstitutedVariable(value, substitute)
    if value is graph_break or is_torch_decorator(value, "graph_break"):
        return GraphBreakVariable()
    if is_torch_decorator(value, "skip_frame"):
        return SkipFrameVariable(value)
    if is_torch_decorator(value, "step_unsupported"):
        return StepUnsupportedVariable(value)
    if value is mark_static or is_torch_decorator(value, "mark_static"):
        return MarkStaticVariable(value)
    if value is torch._check:
        return CheckVariable(value)
    if value is torch.cond or value is torch.ops.higher_order.cond:  # the operator torch.cond calls
        return CondVariable()
    if value is torch.ops.higher_order.map_impl:  # what torch's `map` calls
        return MapVariable()
    if value is torch.utils.checkpoint.checkpoint:
        return CheckpointVariable()
    if value is resumed_profile_exit:  # a profiler block traced away, open where a break resumes
        return ProfileExitVariable(None)
    if value is torch.autograd.graph.disable_saved_tensors_hooks:  # a function making a context
        return TorchClassVariable(SavedTensorsHooksOff)
    if value is torch.vmap or value is torch.func.vmap:
        return VmapVariable()
    if value is torch.func.grad:
        return GradVariable()
    if value is torch.func.functional_call:
        return FunctionalCallVariable()
    if is_disallowed_in_graph(value):
        return DisallowedCallVariable(value)
    factory = error_on_break_factory(value)
    if factory is not None:
        return factory
    if is_nonstrict_trace(value) or is_leaf_function(value):  # before allow_in_graph: torch marks them as both
        return UserFunctionVariable(value)
    if is_nonstrict_trace_decorator(value):
        return NonstrictDecoratorVariable()
    if is_allowed_in_graph(value):
        return TorchOpVariable(value)
    wrapped = wrapped_for_compiler(value)
    if wrapped is not None:
        return CompilerWrapperVariable(value, wrapped)
    original = getattr(value, "__stenograph_original__", None)
    if isinstance(original, types.FunctionType):
        # a compiled function called from compiled code: inline its original
        if getattr(value, "__stenograph_fullgraph__", False):
            return FullgraphFunctionVariable(original)
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
