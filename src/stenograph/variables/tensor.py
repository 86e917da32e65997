"""The tensor tracker: an FX node plus its fake value.

Metadata (shape, dtype, device, ndim, requires_grad) is answered from the fake tensor and is
therefore a constant at trace time, which the input guards make safe. Anything whose answer
depends on the tensor's data (`.item()`, `bool(t)`, `.tolist()`) is `tensor_scalars`' concern: an
unbacked symbol with `config.capture_scalar_outputs`, otherwise refused with a precise reason.
"""

from __future__ import annotations

import enum
import functools
import inspect
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .. import config
from ..errors import BreakKind, Unsupported
from ..graph.side_effects import DELETED
from ..guards.sources import AttrSource
from ..shapes.fake import is_symbolic
from . import function_modes, tensor_scalars
from .base import Variable
from .class_lookup import MISSING, class_lookup
from .constants import ConstantVariable, constant
from .containers import DictVariable, SequenceVariable, SizeVariable, SliceVariable, iterate
from .double_backward import creates_graph
from .symbolic import GraphValueVariable, SymNodeVariable
from .tensor_effects import changes_input_metadata, changes_nothing, refuse_effect
from .trace_rules import (
    TENSOR_DATA_HINT,
    TENSOR_DATA_METHODS,
    TENSOR_GUARDED_METADATA_METHODS,
    TENSOR_METADATA,
    TENSOR_METADATA_METHODS,
    TENSOR_PROPERTIES,
    is_literal,
)

if TYPE_CHECKING:
    import torch.fx

    from ..interpreter.frame import Frame


class TensorVariable(GraphValueVariable):
    fake: torch.Tensor
    # an input of a tensor subclass (its class, guarded by the input's type check); the graph
    # records plain operations on it, which its `__torch_function__` handles when they run
    subclass: type | None = None
    # computed from a subclass instance: its class is whatever that `__torch_function__` makes
    from_subclass: bool = False
    # Python attributes the trace set on a tensor it made (`y.tag = flag`, `y.grad = g`): set on
    # the real tensor where it leaves the graph, read back by the trace
    attributes: dict[str, Variable] | None = None

    def is_tensor(self) -> bool:
        return True

    def reconstruct(self, rebuild: Any) -> str:
        value = rebuild.graph_value(self.node)
        if not self.attributes:
            return value
        attributes = self.attributes

        def fill(name: str) -> list[str]:
            return [f"setattr({name}, {key!r}, {rebuild.expr(v)})" for key, v in attributes.items()]

        return rebuild.build_object(self, value, fill)

    def python_type(self) -> type:
        if self.subclass is not None:
            return self.subclass
        if self.from_subclass:
            raise Unsupported(
                f"the type of {self.describe()}, computed from a tensor subclass instance "
                "(its __torch_function__ decides it when the operation runs)"
            )
        return torch.nn.Parameter if isinstance(self.fake, torch.nn.Parameter) else torch.Tensor

    def describe(self) -> str:
        shape = "x".join(str(s) for s in self.fake.shape) or "scalar"
        return f"tensor {self.node.name} ({shape}, {str(self.fake.dtype).removeprefix('torch.')})"

    def truth(self, frame: Frame) -> bool:
        raise Unsupported(
            f"data-dependent branch on {self.describe()}: `if tensor` needs its value",
            hint=TENSOR_DATA_HINT,
            kind=BreakKind.DATA_DEPENDENT,
        )

    def length(self, frame: Frame) -> int:
        function_modes.refuse_unrouted(frame, f"len() of {self.describe()}")
        if _overrides(self.subclass, "__len__"):
            assert self.subclass is not None
            size = frame.class_member(self, self.subclass, "__len__").call(frame, [], {})
            if not size.is_constant():
                raise Unsupported(f"len() of {self.describe()}: its class's __len__ gave {size.describe()}")
            return size.as_constant()
        if self.fake.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        return int(self.fake.shape[0])

    def unpack(self, frame: Frame) -> list[Variable]:
        return [self.getitem(frame, constant(i)) for i in range(self.length(frame))]

    def unary_op(self, frame: Frame, op: Any) -> Variable | None:
        if op is operator.not_:
            raise Unsupported(f"`not` on {self.describe()} needs its value")
        routed = function_modes.dispatch(frame, op, [self], {})
        if routed is not None:
            return routed
        return frame.output.call("call_function", op, [self], {}, f"operator {op.__name__}")

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        if function_modes.dispatch(frame, operator.setitem, [self, key, value], {}) is not None:
            return
        _refuse_masked_assignment_with_grad(self, key, value)
        frame.output.call("call_function", operator.setitem, [self, key, value], {}, "tensor item assignment")

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        routed = function_modes.dispatch(frame, operator.getitem, [self, key], {})
        if routed is not None:
            return routed
        if isinstance(key, SymNodeVariable) and isinstance(key.fake, torch.SymInt):
            # `x[n]` reads n's value through `__index__` (specialising the size it came from);
            # `select` keeps it symbolic, as torch.compile records it
            return frame.output.call("call_function", torch.select, [self, constant(0), key], {}, "tensor indexing")
        return frame.output.call("call_function", operator.getitem, [self, key], {}, "tensor indexing")

    def getattr(self, frame: Frame, name: str) -> Variable:
        if _overrides(self.subclass, name):
            assert self.subclass is not None
            return frame.class_member(self, self.subclass, name)
        getter = _getter(name)
        if getter is not None:  # a property's getter consults modes
            routed = function_modes.dispatch(frame, getter, [self], {})
            if routed is not None:
                return routed
        if name in TENSOR_METADATA or name == "shape":
            _refuse_other_answers(frame, self, name)
        if name == "__class__":  # its class, with the class's own members (`x.__class__.__name__`)
            return frame.wrap(self.python_type(), None)
        return self.tensor_attribute(frame, name)

    def tensor_attribute(self, frame: Frame, name: str, *, through_super: bool = False) -> Variable:
        """Attribute `name` as `torch.Tensor` defines it; `through_super`: read by `super().name`
        in a subclass's override, whose methods the graph calls as `torch.Tensor`'s."""
        if through_super and callable(getattr(torch.Tensor, name, None)):
            return TensorMethodVariable(self, name, as_tensor=True)
        fake = self.fake
        if name == "shape":
            return SizeVariable([frame.output.sym_size(self, d) for d in range(fake.dim())])
        if name in TENSOR_METADATA:
            return constant(getattr(fake, name))
        if name in TENSOR_PROPERTIES:
            return frame.output.call("call_function", getattr, [self, constant(name)], {}, f"Tensor.{name}")
        if self.attributes and name in self.attributes:
            return self.attributes[name]
        if name == "data":
            return frame.output.call("call_function", torch._C._autograd._get_data_attr, [self], {}, "Tensor.data")
        if name == "grad":
            return _read_grad(frame, self)
        if callable(getattr(torch.Tensor, name, None)):
            return TensorMethodVariable(self, name)
        if not hasattr(torch.Tensor, name):
            return _instance_attribute(frame, self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        """`x.tag = value` on a tensor read from the frame: a Python attribute of the real tensor,
        written after the graph as other objects' attributes are (later reads in the trace see
        it). Attributes the tensor's class has (torch.Tensor's `data`, `grad`, `requires_grad`, a
        subclass's properties) and tensors made in the frame: graph break."""
        if hasattr(torch.Tensor, name):  # a property's setter consults modes
            function_modes.refuse_unrouted(frame, f"setting tensor attribute {name!r}")
        real = frame.output.real_object(self)
        if name == "data" and real is not None and isinstance(value, TensorVariable):
            _assign_data(frame, self, value)
            return
        if name == "grad" and real is not None and self.source is not None:
            _write_grad(frame, self, value)
            return
        if self.source is None and real is None and _settable_on_new_tensor(self, name, value):
            self.attributes = {**(self.attributes or {}), name: value}
            return
        if self.source is None or real is None or hasattr(type(real), name):
            raise Unsupported(f"setting tensor attribute {name!r}")
        frame.output.side_effects.attribute_written(self, name, value)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if _overrides(self.subclass, name):
            return self.getattr(frame, name).call(frame, args, kwargs)
        return TensorMethodVariable(self, name).call(frame, args, kwargs)


@functools.cache
def _getter(name: str) -> Any:
    """torch.Tensor's getter of attribute `name` (a C descriptor or a property), as the mode probe
    calls it (`function_modes.dispatch`); None for methods and plain class attributes. On a fake
    tensor `tensor.name` could find FakeTensor's own getter (`device`), which consults no mode."""
    found = inspect.getattr_static(torch.Tensor, name, None)
    if found is None or callable(found) or not hasattr(type(found), "__get__"):
        return None
    return lambda tensor: found.__get__(tensor, torch.Tensor)


# what the tensor subclass protocol itself defines: run by torch when operations run, not read
_PROTOCOL = frozenset({"__torch_function__", "__torch_dispatch__", "__new__", "__init__", "__class__"})


def _overrides(subclass: type | None, name: str) -> bool:
    """Whether a user's tensor subclass defines `name` itself (a method, property or class
    attribute in place of the tensor's: `to`, `numel`, `ndim`, `__len__`), which eager then reads.
    torch's own subclasses and traceable wrapper subclasses (`__tensor_flatten__`) are left to
    the graph, whose operations run on the real instances."""
    if subclass is None or name in _PROTOCOL or subclass.__module__.startswith("torch."):
        return False
    if hasattr(subclass, "__tensor_flatten__"):
        return False
    attr, owner = class_lookup(subclass, name)
    return attr is not MISSING and owner is not None and owner not in _TENSOR_CLASSES


_TENSOR_CLASSES = frozenset(torch.Tensor.__mro__)


def _refuse_other_answers(frame: Frame, tensor: TensorVariable, name: str) -> None:
    """Metadata (`ndim`, `dtype`, `shape`, ...) of an input whose class defines its own
    `__torch_function__`: eager asks that function, which may answer something else than the
    tensor's own value (`ndim` of 10); the trace computes it from the tensor, so where the two
    differ the read is a graph break."""
    cls = tensor.subclass
    if cls is None or class_lookup(cls, "__torch_function__")[1] in _TENSOR_CLASSES:
        return
    real = frame.output.real_object(tensor)
    if real is None:
        return
    with torch._C.DisableTorchFunctionSubclass():
        own = getattr(real, name)
    answer = getattr(real, name)
    try:
        same = type(answer) is type(own) and bool(answer == own)
    except Exception:  # an answer that does not compare (a tensor of several values): not the same
        same = False
    if not same:
        raise Unsupported(f"{name} of {tensor.describe()}: its class's __torch_function__ answers {answer!r}")


def _assign_data(frame: Frame, tensor: TensorVariable, value: TensorVariable) -> None:
    """`x.data = y` on a tensor read from the frame: eager swaps x's storage and metadata for y's
    and leaves its autograd identity and version counter alone. The graph does the same with
    `set_` run without grad (AOTAutograd carries it out on the real input as a storage change)
    and then takes back the version bump `set_` made. A change of dtype, tensor subclasses, views
    and tensors sharing storage with other inputs break."""
    output = frame.output
    entry = next(i for i in output.inputs if i.node is tensor.node)
    real = entry.example
    if tensor.subclass is not None or value.subclass is not None or value.from_subclass:
        raise Unsupported("`.data = ...` on a tensor subclass")
    if tensor.fake.dtype != value.fake.dtype:
        raise Unsupported(f"`.data = ...` changing the dtype of {tensor.describe()}")
    if output.graph is not output.root_graph:
        raise Unsupported("`.data = ...` inside a traced body")
    if real._base is not None or real.storage_offset() != 0 or _shares_storage(real, output.inputs):
        raise Unsupported(f"`.data = ...` on {tensor.describe()}, a view or an input sharing storage")
    if value.node.op == "placeholder":
        if not output.hand_over_storage(tensor.node, value.node):
            raise Unsupported("`.data = ...` handing storage around a cycle of inputs")
    elif value.fake._base is not None:
        raise Unsupported(f"`.data = ...` given a view, {value.describe()}")
    # the input's guards (its shape relations, its storage shared or not) describe the tensor
    # passed in: they keep a fake of it as it was, and count it as changed
    with output.fake_mode:
        entry.fake = torch.empty_strided(
            tensor.fake.shape, tensor.fake.stride(), dtype=tensor.fake.dtype, device=tensor.fake.device
        )
    entry.version = None
    entry.node.meta["example_value"] = entry.fake
    grad_mode = torch.is_grad_enabled()
    output.set_grad_enabled(False)
    output.call("call_function", torch.Tensor.set_, [tensor, value], {}, "`.data = ...`")
    output.set_grad_enabled(grad_mode)
    output.graph.create_node("call_function", _undo_version_bump, (tensor.node,), {})


def _shares_storage(real: torch.Tensor, inputs: list) -> bool:
    """Whether another tensor input of the graph may lie in `real`'s storage (a tensor whose
    storage cannot be read, a functorch wrapper or a functional tensor, may)."""
    others = [i.example for i in inputs if isinstance(i.example, torch.Tensor) and i.example is not real]
    storages = [_storage_address(t) for t in (real, *others)]
    return None in storages or storages[0] in storages[1:]


def _storage_address(tensor: torch.Tensor) -> int | None:
    """Its storage's data pointer, which functional and functorch-wrapped tensors refuse (their
    storage object alone, `shapes.lifted`'s key, reads even there, so it cannot tell them)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # no storage of its own (vmap, grad, functionalize)
        return None


def _undo_version_bump(tensor: torch.Tensor) -> None:
    """Put the version counter back where it stood before the `set_` of a `.data` write."""
    torch._C._autograd._unsafe_set_version_counter((tensor,), (max(tensor._version - 1, 0),))


def _refuse_masked_assignment_with_grad(tensor: TensorVariable, key: Variable, value: Variable) -> None:
    """`x[mask] = y` (a boolean or uint8 mask, alone or in a tuple) where autograd records it:
    its backward selects gradients by the mask's `nonzero()`, whose size only the data tells, and
    AOTAutograd fails to trace it (the forward alone is fine). It runs eagerly, as torch.compile
    breaks there too, unless `config.capture_dynamic_output_shape_ops` gives such sizes symbols."""
    keys = key.items if isinstance(key, SequenceVariable) else [key]
    masked = any(isinstance(k, TensorVariable) and k.fake.dtype in (torch.bool, torch.uint8) for k in keys)
    if not masked or config.capture_dynamic_output_shape_ops or not torch.is_grad_enabled():
        return
    if tensor.fake.requires_grad or (isinstance(value, TensorVariable) and value.fake.requires_grad):
        raise Unsupported(
            "assignment through a boolean mask recorded by autograd: its backward's size depends on the mask's data",
            hint="compute it as torch.where(mask, value, x), or set config.capture_dynamic_output_shape_ops",
            kind=BreakKind.DATA_DEPENDENT,
        )


def _settable_on_new_tensor(tensor: TensorVariable, name: str, value: Variable) -> bool:
    """Whether `tensor.name = value` on a plain tensor the trace made can wait until the tensor
    leaves the graph: an attribute torch.Tensor does not define, or a gradient eager would accept
    (None, or a tensor of its shape, dtype and device). On an instance of a user's subclass made
    in the frame: an attribute neither the class nor torch.Tensor defines, with object's own
    `__setattr__` (it lands in the instance dict, as eagerly)."""
    if tensor.from_subclass:  # its class is decided when it runs, by __torch_function__
        return False
    if tensor.subclass is not None:
        cls = tensor.subclass
        plain = cls.__setattr__ is torch.Tensor.__setattr__ and cls.__getattribute__ is torch.Tensor.__getattribute__
        return plain and name != "grad" and class_lookup(cls, name)[0] is MISSING
    if name != "grad":
        return not hasattr(torch.Tensor, name)
    if value.is_constant():
        return value.as_constant() is None
    if not isinstance(value, TensorVariable):
        return False
    grad, fake = value.fake, tensor.fake
    return grad.shape == fake.shape and grad.dtype == fake.dtype and grad.device == fake.device


def _instance_attribute(frame: Frame, tensor: TensorVariable, name: str) -> Variable:
    """An attribute a user set on a tensor read from the frame (`x.tag = ...`), from the real
    tensor's `__dict__` or the value the trace wrote; its absence is guarded (a `hasattr` answered
    False must not hold for a later call with a tensor that has it). A tensor made in the frame
    has none: writes to its attributes are graph breaks."""
    real = frame.output.real_object(tensor)
    if real is not None and tensor.source is not None:
        pending = frame.output.side_effects.pending_attribute(tensor, name)
        if pending is DELETED:
            raise Unsupported(f"{tensor.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
        if pending is not None:
            return pending
        instance_dict = real.__dict__
        dict_source = AttrSource(tensor.source, "__dict__")
        if name in instance_dict:
            frame.output.guards.key_present(dict_source, name, f"{tensor.source.name()}.__dict__ holds {name!r}")
            return frame.wrap(instance_dict[name], AttrSource(tensor.source, name))
        frame.output.guards.key_absent(dict_source, name, f"{tensor.source.name()}.__dict__ lacks {name!r}")
    else:
        flattened = _flattened_member(frame, tensor, name)
        if flattened is not None:
            return flattened
    raise Unsupported(f"{tensor.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)


def _flattened_member(frame: Frame, tensor: TensorVariable, name: str) -> Variable | None:
    """A member of a traceable wrapper subclass made in the frame (a `ScaledTensor` that an op
    on one returned) that its `__tensor_flatten__` names: an inner tensor (a graph node reading
    it) or a key of its context dict (the constant it holds: the context of the inputs it came
    from is guarded). None for any other name."""
    fake = tensor.fake
    if not is_traceable_wrapper_subclass(fake):
        return None
    inner_names, context = fake.__tensor_flatten__()
    if name in inner_names:
        return frame.output.call("call_function", getattr, [tensor, constant(name)], {}, f"Tensor.{name}")
    if isinstance(context, dict) and name in context and is_literal(context[name]):
        return constant(context[name])
    return None


def _read_grad(frame: Frame, tensor: TensorVariable) -> Variable:
    """`p.grad` of a leaf read from the frame (a parameter, as an optimizer reads it): the real
    gradient, read through `p.grad` as another graph input (a None gradient guarded as None).
    Graphs never change which tensor `.grad` holds: backward, `zero_grad` and `.grad` writes run
    eagerly at graph breaks."""
    real = frame.output.real_object(tensor)
    if real is None and tensor.source is None and (tensor.fake.is_leaf or not tensor.fake.requires_grad):
        # made in the frame: no backward ran since (backward breaks the graph), so None, as eagerly
        # (a non-leaf that requires grad makes eager warn: left to the eager run below)
        return constant(None)
    if real is None or tensor.source is None:
        raise Unsupported(f"reading Tensor.grad of {tensor.describe()}, computed inside the compiled function")
    written = frame.output.side_effects.pending_attribute(tensor, "grad")
    if written is not None:
        return written
    if not real.is_leaf and not real.retains_grad:
        raise Unsupported(f"reading Tensor.grad of {tensor.describe()}, which is not a leaf (eager warns)")
    return frame.wrap(real.grad, AttrSource(tensor.source, "grad"))


def _write_grad(frame: Frame, tensor: TensorVariable, value: Variable) -> None:
    """`p.grad = g` on a tensor read from the frame (compiled autograd's accumulation does it):
    written after the graph, as other attributes are, and read back by later `p.grad` reads. A
    gradient eager would refuse (another shape, dtype or device) breaks the graph, where eager
    raises its error."""
    if isinstance(value, TensorVariable):
        mine, given = tensor.fake, value.fake
        if (mine.dtype, mine.device, mine.layout) != (given.dtype, given.device, given.layout):
            raise Unsupported(f"assigning a gradient of another dtype, device or layout to {tensor.describe()}")
        if len(mine.shape) != len(given.shape) or not all(bool(a == b) for a, b in zip(mine.shape, given.shape)):
            raise Unsupported(f"assigning a gradient of another shape to {tensor.describe()}")
    elif not (value.is_constant() and value.as_constant() is None):
        raise Unsupported(f"assigning {value.describe()} to Tensor.grad")
    frame.output.side_effects.attribute_written(tensor, "grad", value)


_SCALAR_READS = {
    "item": tensor_scalars.item,
    "tolist": tensor_scalars.to_list,
    "__float__": lambda frame, tensor: tensor_scalars.number(frame, tensor, float),
    "__int__": lambda frame, tensor: tensor_scalars.number(frame, tensor, int),
    "__bool__": lambda frame, tensor: tensor_scalars.number(frame, tensor, bool),
}


def _is_symbolic_result(result: object) -> bool:
    if isinstance(result, (tuple, list)):
        return any(is_symbolic(r) for r in result)
    return is_symbolic(result)


def _writes_overlapping_memory(name: str, fake: torch.Tensor) -> bool:
    """Whether `tensor.name()` writes in place into a tensor some of whose elements are one
    memory location (`expand`'s stride 0; `unsqueeze_` and the other in-place view ops break too,
    which only costs a graph). Eager refuses it with a RuntimeError; fake tensors do
    not check, and AOTAutograd fails compiling the graph instead (F21)."""
    if not name.endswith("_") or name.endswith("__"):
        return False
    # read without guards: a stride of 0 over more than one element (a symbolic size counts)
    return any(
        type(st) is int and st == 0 and not (type(sz) is int and sz <= 1) for sz, st in zip(fake.size(), fake.stride())
    )


# tensor methods with effects that a later module of the package keeps in the graph, by name
# (`tensor_hooks`: `register_hook` on an intermediate); each raises Unsupported where it cannot
TRACED_METHODS: dict[str, Callable[[Frame, TensorVariable, list[Variable], dict[str, Variable]], Variable]] = {}


class TensorMethodVariable(Variable):
    """`tensor.method`, bound: calling it records a `call_method` node."""

    def __init__(self, tensor: TensorVariable, name: str, *, as_tensor: bool = False) -> None:
        self.tensor = tensor
        self.name = name
        # `super().name` inside a subclass's override: the graph calls `torch.Tensor.name`, which
        # the override (dispatched on the real instance) would otherwise take
        self.as_tensor = as_tensor

    def describe(self) -> str:
        return f"Tensor.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = self.name
        if not self.as_tensor:
            routed = function_modes.dispatch(frame, getattr(torch.Tensor, name), [self.tensor, *args], kwargs)
            if routed is not None:
                return routed
        if name in TENSOR_DATA_METHODS:
            if args or kwargs or name not in _SCALAR_READS:
                raise tensor_scalars.refuse(name)
            return _SCALAR_READS[name](frame, self.tensor)
        if changes_nothing(name, self.tensor.fake, args, kwargs):
            return self.tensor
        if _writes_overlapping_memory(name, self.tensor.fake):
            raise Unsupported(
                f"in-place Tensor.{name}() on a tensor whose elements share memory (an expanded one)",
                hint="eager raises RuntimeError there: the call runs eagerly, after the effects before it",
            )
        if name == "type" and not args and not kwargs:
            return constant(self.tensor.fake.type())  # the legacy type's name: dtype and device
        if name == "__iter__" and not args and not kwargs:
            return iterate(frame, self.tensor)  # `x.__iter__()`: what `iter(x)` gives
        traced = TRACED_METHODS.get(name)
        if traced is not None:
            return traced(frame, self.tensor, args, kwargs)
        double = name == "backward" and creates_graph(torch.Tensor.backward, [self.tensor, *args], kwargs)
        refuse_effect(name, f"Tensor.{name}()", double)
        if self.tensor.source is not None and changes_input_metadata(name):
            raise Unsupported(
                f"Tensor.{name}() changes the sizes or strides of {self.tensor.describe()}, read from the frame, in "
                "place; it runs eagerly between graphs (as torch.compile does)",
                hint="use the out-of-place form (`x = x.unsqueeze(0)`) to keep one graph",
            )
        if name in TENSOR_GUARDED_METADATA_METHODS and not args and not kwargs:
            result = getattr(self.tensor.fake, name)()
            if not _is_symbolic_result(result):
                if self.tensor.source is not None:
                    frame.output.guards.method_result(self.tensor.source, name, result)
                return constant(result)
        if name in TENSOR_METADATA_METHODS:
            if name == "size" and not kwargs:
                if not args:
                    return self.tensor.tensor_attribute(frame, "shape")
                dim = args[0].as_constant()
                return frame.output.sym_size(self.tensor, dim % max(self.tensor.fake.dim(), 1))
            plain_args = [unwrap(a)[1] for a in args]
            plain_kwargs = {k: unwrap(v)[1] for k, v in kwargs.items()}
            result = getattr(self.tensor.fake, name)(*plain_args, **plain_kwargs)
            if _is_symbolic_result(result):
                return self._record(frame, name, args, kwargs)
            if isinstance(result, torch.Size):
                return SizeVariable([constant(int(s)) for s in result])
            if isinstance(result, tuple):
                return constant(tuple(int(s) for s in result))
            return constant(result)
        if name == "type" and args and args[0].is_constant() and type(args[0].as_constant()) is _TENSOR_TYPE:
            # a legacy tensor type (`torch.HalfTensor`) by the name `type()` also takes: the
            # graph's code can spell a string, not the class
            legacy = args[0].as_constant()
            args = [constant(f"{legacy.__module__}.{legacy.__name__}"), *args[1:]]
        if name == "new" and len(args) == 1 and isinstance(args[0], SizeVariable):
            # `x.new(size)` takes a torch.Size as sizes but a tuple as data; the graph keeps no
            # torch.Size: the sizes are passed one by one (`x.new(5, 8)`), or `new_empty(())`
            if not args[0].items:
                return frame.output.call(
                    "call_method", "new_empty", [self.tensor, constant(())], kwargs, "Tensor.new()"
                )
            args = list(args[0].items)
        return self._record(frame, name, args, kwargs)

    def _record(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.as_tensor:
            method = getattr(torch.Tensor, name)
            return frame.output.call("call_function", method, [self.tensor, *args], kwargs, f"Tensor.{name}()")
        return frame.output.call("call_method", name, [self.tensor, *args], kwargs, f"Tensor.{name}()")

    def reconstruct(self, rebuild: Any) -> str:
        if self.as_tensor:
            return f"{rebuild.writer.bind(torch.Tensor, 'Tensor')}.{self.name}.__get__({rebuild.expr(self.tensor)})"
        return f"{rebuild.expr(self.tensor)}.{self.name}"


_TENSOR_TYPE = type(torch.FloatTensor)  # torch.tensortype: the classes torch.HalfTensor, ...


def _python_number(value: Any) -> Any:
    """A NumPy integer or float scalar as the Python number torch treats it as (the graph's
    code cannot name NumPy); a NumPy bool is not one (`int_tensor + np.bool_` is float)."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        number = value.item()
        if type(number) in (int, float):  # not a bool's True
            return number
    return value


_WRITABLE = (int, float, bool, str, bytes, complex, type(None), torch.dtype, torch.device, torch.layout)


def _refuse_unwritable(value: Any) -> None:
    """A constant the graph's code cannot spell (a pybind11 enum such as
    `torch._C.DispatchKey.Python`: FX would write its repr, `<DispatchKey.Python: 13>`)."""
    if isinstance(value, _WRITABLE) or isinstance(value, enum.Enum) or callable(value):
        return  # FX writes enums and callables as globals
    if repr(value).startswith("<"):
        raise Unsupported(f"{value!r} passed to a graph operation (the graph's code cannot spell it)")


def unwrap(var: Variable) -> tuple[Any, Any]:
    """(fx argument, fake value) for a tracker passed to a graph operation."""
    if isinstance(var, GraphValueVariable):
        return var.node, var.fake
    if isinstance(var, ConstantVariable):
        value = _python_number(var.value)
        _refuse_unwritable(value)
        return value, value
    if isinstance(var, SequenceVariable):
        pairs = [unwrap(item) for item in var.items]
        kind = list if var.python_class is list else tuple
        return kind(p[0] for p in pairs), kind(p[1] for p in pairs)
    if isinstance(var, SliceVariable):
        pairs = [unwrap(p) for p in var.parts]
        return slice(*(p[0] for p in pairs)), slice(*(p[1] for p in pairs))
    if isinstance(var, DictVariable):
        pairs = {k: unwrap(v) for k, v in var.items.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    kind = var.as_constant() if var.is_constant() else None
    if isinstance(kind, type) and kind in _PYTHON_TYPE_DTYPES:
        # `x.to(float)`: torch's argument parser takes Python's number types as the dtypes below
        return _PYTHON_TYPE_DTYPES[kind], _PYTHON_TYPE_DTYPES[kind]
    raise Unsupported(f"{var.describe()} cannot be passed to a tensor operation")


_PYTHON_TYPE_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}
