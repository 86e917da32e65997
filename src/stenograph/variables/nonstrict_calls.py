"""Calls of functions marked `nonstrict_trace` (stenograph's or torch._dynamo's): one opaque
graph node instead of an inlined body.

The call's arguments are flattened while tracing into the values the graph holds (tensors and
symbolic numbers, the node's inputs) and a recipe for the rest: constants, lists, tuples, dicts,
`nn.Module`s (whose parameters and buffers become inputs too) and objects of classes registered
with `torch.utils._pytree` (their flatten function is traced, so writes made earlier in the frame
are seen). The node's target, a `NonstrictCall`, rebuilds the arguments from the recipe and calls
the function: on fake tensors while tracing (which gives the result's structure), on the graph's
values when the graph runs, and through AOTAutograd's tracer under `aot_eager`/`inductor`, which
traces into it. Results are flattened the same way and rebuilt as trackers after the node.

Constants and the structure are specialised per call site, as torch's are. Tensors the
function reads from globals or closures are constants of the graph (no gradient reaches them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree
from torch.nn.utils.stateless import _reparametrize_module

from ..errors import Unsupported
from ..marks import nonstrict_trace
from ..shapes.fake import is_symbolic
from .base import Variable
from .constants import constant
from .containers import DictVariable, ListVariable, TupleVariable
from .symbolic import SymNodeVariable
from .tensor import TensorVariable
from .trace_rules import is_frozen_dataclass

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

_INPUT_HINT = (
    "register the class with torch.utils._pytree (register_pytree_node, register_dataclass, or "
    "register_constant for immutable values), or pass its tensors and constants instead"
)


# -- recipes: how a value is rebuilt from the flat values the graph holds -----------------------


@dataclass(frozen=True)
class _Leaf:
    index: int  # position among the flat values


@dataclass(frozen=True)
class _Const:
    value: Any


@dataclass(frozen=True)
class _Seq:
    cls: type  # tuple, list or a namedtuple class
    items: tuple


@dataclass(frozen=True)
class _Dict:
    cls: type
    keys: tuple
    items: tuple


@dataclass(frozen=True)
class _Node:
    """An object of a class registered with pytree: its unflatten function rebuilds it."""

    cls: type
    context: Any
    children: tuple


@dataclass(frozen=True)
class _Fields:
    """A frozen dataclass made in the frame (passed to an `allow_in_graph` function): rebuilt
    with its fields set, as torch.compile builds it in the graph for such a call."""

    cls: type
    names: tuple[str, ...]
    children: tuple


@dataclass(frozen=True)
class _Module:
    """An `nn.Module`, run with the graph's values in place of its parameters and buffers (so
    AOTAutograd differentiates through them)."""

    module: torch.nn.Module
    names: tuple[str, ...]
    indices: tuple[int, ...]


def _rebuild(recipe: Any, flat: tuple, stack: contextlib.ExitStack) -> Any:
    if isinstance(recipe, _Leaf):
        return flat[recipe.index]
    if isinstance(recipe, _Const):
        return recipe.value
    if isinstance(recipe, _Seq):
        items = [_rebuild(r, flat, stack) for r in recipe.items]
        if recipe.cls in (tuple, list):
            return recipe.cls(items)
        return recipe.cls(*items)
    if isinstance(recipe, _Dict):
        return recipe.cls(zip(recipe.keys, (_rebuild(r, flat, stack) for r in recipe.items)))
    if isinstance(recipe, _Node):
        children = [_rebuild(r, flat, stack) for r in recipe.children]
        return pytree.SUPPORTED_NODES[recipe.cls].unflatten_fn(children, recipe.context)
    if isinstance(recipe, _Fields):
        made = object.__new__(recipe.cls)
        for name, child in zip(recipe.names, recipe.children):
            object.__setattr__(made, name, _rebuild(child, flat, stack))  # (frozen: its own setattr refuses)
        return made
    values = {name: flat[i] for name, i in zip(recipe.names, recipe.indices)}
    stack.enter_context(_reparametrize_module(recipe.module, values))
    return recipe.module


def _flatten_result(value: Any, flat: list, like: Any = None) -> Any:
    """The recipe of a result, its tensors and symbolic numbers appended to `flat`. `like` is the
    recipe the trace saw: where it had a symbolic number, the graph's number is a value too."""
    number_was_symbolic = isinstance(like, _Leaf) and isinstance(value, (bool, int, float))
    if isinstance(value, torch.Tensor) or is_symbolic(value) or number_was_symbolic:
        flat.append(value)
        return _Leaf(len(flat) - 1)
    if value is None or isinstance(value, (bool, int, float, complex, str, torch.dtype, torch.device)):
        return _Const(value)
    cls = type(value)
    if cls in (tuple, list) or pytree.is_namedtuple_instance(value):
        return _Seq(cls, tuple(_flatten_result(v, flat, p) for v, p in zip(value, _parts(like, len(value)))))
    if cls is dict:
        items = (_flatten_result(v, flat, p) for v, p in zip(value.values(), _parts(like, len(value))))
        return _Dict(cls, tuple(value), tuple(items))
    node = pytree.SUPPORTED_NODES.get(cls)
    if node is not None and not _is_constant_class(cls):
        children, context = node.flatten_fn(value)
        return _Node(
            cls, context, tuple(_flatten_result(v, flat, p) for v, p in zip(children, _parts(like, len(children))))
        )
    raise Unsupported(
        f"Unsupported output type for nonstrict_trace-ed function: {cls.__qualname__}",
        hint="return tensors, numbers, lists, tuples, dicts or objects of classes registered with torch.utils._pytree",
    )


def _parts(like: Any, count: int) -> Any:
    """The recipes of a traced container's parts, where it had `count` of them."""
    parts = like.items if isinstance(like, (_Seq, _Dict)) else like.children if isinstance(like, _Node) else None
    return parts if parts is not None and len(parts) == count else [None] * count


class NonstrictCall:
    """A graph target calling a `nonstrict_trace` function: takes the flat values, rebuilds the
    arguments, calls the function and returns its result's tensors and symbolic numbers as a
    tuple (the tracer rebuilds the rest from `result_recipe`, recorded while tracing)."""

    def __init__(self, fn: Any, args: tuple, kwargs: dict[str, Any], *, real_constants: bool = True) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        # tensors the body reads from globals or closures may be real (nonstrict_trace); a leaf
        # function's fake implementation must use its arguments only, as torch requires
        self.real_constants = real_constants
        self.result_recipe: Any = None  # the structure of the result, as the trace saw it
        self.__name__ = self.__qualname__ = f"nonstrict_{getattr(fn, '__name__', 'call')}"
        # another process could find the function by name, but not tell whether its body (or
        # anything it calls) changed since: a graph holding this is compiled again there
        self.not_persistable = (
            f"it calls nonstrict_trace-ed {getattr(fn, '__qualname__', fn)}, whose body is not fingerprinted"
        )

    def __call__(self, *flat: Any) -> tuple:
        with contextlib.ExitStack() as stack:
            fake_mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE)
            if self.real_constants and fake_mode is not None and not fake_mode.allow_non_fake_inputs:
                # traced (by stenograph or AOTAutograd): tensors the function reads from globals
                # or closures are real, constants of the graph
                stack.callback(setattr, fake_mode, "allow_non_fake_inputs", False)
                fake_mode.allow_non_fake_inputs = True
            args = [_rebuild(r, flat, stack) for r in self.args]
            kwargs = {k: _rebuild(r, flat, stack) for k, r in self.kwargs.items()}
            result = self.fn(*args, **kwargs)
        values: list = []
        recipe = _flatten_result(result, values, self.result_recipe)
        if self.result_recipe is None:
            self.result_recipe = recipe
        elif not _same_structure(recipe, self.result_recipe):
            # the graph would hand back the traced structure with these values in it
            raise AssertionError(
                f"{getattr(self.fn, '__qualname__', self.fn)}: output structure mismatch between the call traced "
                f"and this one: {self.result_recipe} was traced, {recipe} returned"
            )
        return tuple(values)

    def __repr__(self) -> str:
        return f"NonstrictCall({getattr(self.fn, '__qualname__', self.fn)})"


def _same_structure(a: Any, b: Any) -> bool:
    """Whether two result recipes have the same structure and constants (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, _Const):
        same = type(a.value) is type(b.value) and (a.value == b.value or (a.value != a.value and b.value != b.value))
        return bool(same)
    if isinstance(a, _Leaf):
        return a == b
    parts_a = a.items if isinstance(a, (_Seq, _Dict)) else a.children
    parts_b = b.items if isinstance(b, (_Seq, _Dict)) else b.children
    heads_same = a.cls is b.cls and getattr(a, "keys", None) == getattr(b, "keys", None)
    same_context = not isinstance(a, _Node) or a.context == b.context
    return (
        heads_same
        and same_context
        and len(parts_a) == len(parts_b)
        and all(_same_structure(x, y) for x, y in zip(parts_a, parts_b))
    )


# -- tracing a call -------------------------------------------------------------------------------


def call(
    frame: Frame,
    fn: Any,
    args: list[Variable],
    kwargs: dict[str, Variable],
    *,
    real_constants: bool = True,
    frozen_dataclasses: bool = False,
) -> Variable:
    """`fn(*args, **kwargs)` for a `nonstrict_trace` function (or a torch leaf function,
    `real_constants=False`; an `allow_in_graph` one taking frozen dataclasses made in the frame,
    `frozen_dataclasses=True`): one node, its result rebuilt."""
    name = getattr(fn, "__qualname__", repr(fn))
    flat: list[Variable] = []
    flatten = functools.partial(_flatten_argument, frozen_dataclasses=frozen_dataclasses)
    arg_recipes = tuple(flatten(frame, a, flat, name) for a in args)
    kwarg_recipes = {k: flatten(frame, v, flat, name) for k, v in kwargs.items()}
    target = NonstrictCall(fn, arg_recipes, kwarg_recipes, real_constants=real_constants)
    result = frame.output.call("call_function", target, flat, {}, f"{name}() (nonstrict_trace)")
    values = list(result.items) if isinstance(result, TupleVariable) else []
    return _rebuild_result(frame, target.result_recipe, values)


def _flatten_argument(
    frame: Frame, var: Variable, flat: list[Variable], name: str, *, frozen_dataclasses: bool = False
) -> Any:
    """The recipe of one argument; the trackers of its graph values appended to `flat`."""
    if isinstance(var, (TensorVariable, SymNodeVariable)):
        flat.append(var)
        return _Leaf(len(flat) - 1)
    if var.is_constant():
        return _Const(var.as_constant())

    def inner(v: Variable) -> Any:
        return _flatten_argument(frame, v, flat, name, frozen_dataclasses=frozen_dataclasses)

    cls = var.python_type()
    if cls in (tuple, list) and isinstance(var, (TupleVariable, ListVariable)):
        return _Seq(cls, tuple(inner(v) for v in var.items))
    if cls is dict and isinstance(var, DictVariable):
        if not all(isinstance(k, (str, int, float, bool, type(None))) for k in var.items):
            raise Unsupported(f"a dict passed to nonstrict_trace-ed function {name} has keys that are not constants")
        return _Dict(cls, tuple(var.items), tuple(inner(v) for v in var.items.values()))
    if issubclass(cls, tuple) and pytree.is_namedtuple_class(cls):
        items = tuple(var.getattr(frame, field) for field in cls._fields)
        return _Seq(cls, tuple(inner(v) for v in items))
    if frozen_dataclasses and is_frozen_dataclass(cls) and var.made_while_tracing():
        names = tuple(f.name for f in dataclasses.fields(cls))
        return _Fields(cls, names, tuple(inner(var.getattr(frame, n)) for n in names))
    value = var.value_object
    if isinstance(value, torch.nn.Module):
        return _module_argument(frame, var, value, flat, name)
    opaque = _opaque_kind(cls)
    if opaque is not None or _is_constant_class(cls):
        return _constant_object(frame, var, name, opaque)
    node = pytree.SUPPORTED_NODES.get(cls)
    if node is None:
        raise Unsupported(
            f"Invalid input type for nonstrict_trace-ed function {name}: {var.describe()} of class "
            f"{cls.__qualname__}, which torch.utils._pytree does not know",
            hint=_INPUT_HINT,
        )
    # the class's flatten function, traced: it reads the object as the frame has it now
    flattened = frame.wrap(node.flatten_fn, None).call(frame, [var], {})
    parts = flattened.unpack(frame)
    if len(parts) != 2 or not parts[1].is_constant():
        raise Unsupported(
            f"Invalid use of pytree_flatten with nonstrict_trace-ed function {name}: the flatten function of "
            f"{cls.__qualname__} must return (children, context) with a constant context",
            hint="return every tensor and object among the children, and only constants in the context",
        )
    children = tuple(_flatten_argument(frame, v, flat, name) for v in parts[0].unpack(frame))
    return _Node(cls, parts[1].as_constant(), children)


def _module_argument(frame: Frame, var: Variable, module: torch.nn.Module, flat: list[Variable], name: str) -> Any:
    """A module passed in: the node holds it (guarded by identity) and takes its parameters and
    buffers as inputs, read through the module's tracker (so they are graph inputs as anywhere)."""
    if var.source is None:
        raise Unsupported(f"module {var.describe()} made in the compiled region is passed to nonstrict_trace-ed {name}")
    frame.output.guards.id_match(var.source, module)
    names: list[str] = []
    indices: list[int] = []
    for path, _ in [*module.named_parameters(), *module.named_buffers()]:
        tracker = var
        for part in path.split("."):
            tracker = tracker.getattr(frame, part)
        if not isinstance(tracker, TensorVariable):
            raise Unsupported(f"{path} of {var.describe()}, passed to nonstrict_trace-ed {name}, is not a tensor")
        flat.append(tracker)
        names.append(path)
        indices.append(len(flat) - 1)
    return _Module(module, tuple(names), tuple(indices))


def _is_constant_class(cls: type) -> bool:
    """Registered with `pytree.register_constant` (torch 2.6 on)."""
    check = getattr(pytree, "is_constant_class", None)
    return check is not None and check(cls)


def _opaque_kind(cls: type) -> str | None:
    """ "value" or "reference" for a class registered with torch's opaque objects, else None."""
    registry = getattr(torch._library, "opaque_object", None)  # torch 2.10 on
    if registry is None or not registry.is_opaque_type(cls):
        return None
    return "value" if registry.is_opaque_value_type(cls) else "reference"


def _constant_object(frame: Frame, var: Variable, name: str, opaque: str | None) -> _Const:
    """An object the function takes as a constant: one passed in, guarded by value (by identity
    for opaque reference types)."""
    value = var.value_object
    if value is None or var.source is None:
        raise Unsupported(
            f"An opaque object was created in the middle of the program. {var.describe()} is passed to "
            f"nonstrict_trace-ed function {name}",
            hint="create the object outside the compiled region and pass it in",
        )
    if opaque == "reference":
        frame.output.guards.id_match(var.source, value)
    else:
        frame.output.guards.constant_match(var.source, value)
    return _Const(value)


def _rebuild_result(frame: Frame, recipe: Any, values: list[Variable]) -> Variable:
    """The tracker of the function's result, from its recipe and the node's items."""
    if isinstance(recipe, _Leaf):
        return values[recipe.index]
    if isinstance(recipe, _Const):
        return constant(recipe.value)
    if isinstance(recipe, _Seq):
        items = [_rebuild_result(frame, r, values) for r in recipe.items]
        if recipe.cls is list:
            return ListVariable(items)
        if recipe.cls is tuple:
            return TupleVariable(items)
        return frame.wrap(recipe.cls, None).call(frame, items, {})
    if isinstance(recipe, _Dict):
        return DictVariable({k: _rebuild_result(frame, r, values) for k, r in zip(recipe.keys, recipe.items)})
    children = ListVariable([_rebuild_result(frame, r, values) for r in recipe.children])
    unflatten = frame.wrap(pytree.SUPPORTED_NODES[recipe.cls].unflatten_fn, None)
    return unflatten.call(frame, [children, frame.wrap(recipe.context, None)], {})


class NonstrictDecoratorVariable(Variable):
    """`nonstrict_trace` itself called in compiled code (`nonstrict_trace(f)(x)`): the mark is
    made for real on a function defined outside the compiled region."""

    def describe(self) -> str:
        return "nonstrict_trace"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        fn = args[0] if len(args) == 1 and not kwargs else kwargs.get("traceable_fn") if not args else None
        if fn is None or len(kwargs) > (0 if args else 1):
            raise Unsupported("nonstrict_trace() takes one function (traceable_fn)")
        if fn.value_object is None or fn.source is None:
            shown = _function_name(frame, fn)
            raise Unsupported(
                f"Applying `nonstrict_trace` to function <{shown}>; however, `nonstrict_trace` currently requires "
                "the function to be defined outside `torch.compile` region.",
                hint="define the function at module level, or apply the decorator outside the compiled region",
            )
        return frame.wrap(nonstrict_trace(fn.value_object), None)


def _function_name(frame: Frame, fn: Variable) -> str:
    try:
        name = fn.getattr(frame, "__name__")
    except Unsupported:
        return fn.describe()
    return name.as_constant() if name.is_constant() else fn.describe()
