"""The tensor tracker: an FX node plus its fake value.

Metadata (shape, dtype, device, ndim, requires_grad) is answered from the fake tensor and is
therefore a constant at trace time, which the input guards make safe. Anything whose answer
depends on the tensor's data (`.item()`, `bool(t)`, `.tolist()`) is `tensor_scalars`' concern: an
unbacked symbol with `config.capture_scalar_outputs`, otherwise refused with a precise reason.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch

from ..errors import BreakKind, Unsupported
from ..guards.sources import AttrSource
from ..shapes.fake import is_symbolic
from . import tensor_scalars
from .base import Variable
from .constants import ConstantVariable, constant
from .containers import DictVariable, SequenceVariable, SizeVariable, SliceVariable
from .double_backward import creates_graph
from .symbolic import GraphValueVariable
from .tensor_effects import changes_nothing, refuse_effect
from .trace_rules import (
    TENSOR_DATA_HINT,
    TENSOR_DATA_METHODS,
    TENSOR_GUARDED_METADATA_METHODS,
    TENSOR_METADATA,
    TENSOR_METADATA_METHODS,
    TENSOR_PROPERTIES,
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

    def is_tensor(self) -> bool:
        return True

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
        if self.fake.dim() == 0:
            raise Unsupported("len() of a 0-d tensor")
        return int(self.fake.shape[0])

    def unpack(self, frame: Frame) -> list[Variable]:
        return [self.getitem(frame, constant(i)) for i in range(self.length(frame))]

    def unary_op(self, frame: Frame, op: Any) -> Variable | None:
        if op is operator.not_:
            raise Unsupported(f"`not` on {self.describe()} needs its value")
        return frame.output.call("call_function", op, [self], {}, f"operator {op.__name__}")

    def setitem(self, frame: Frame, key: Variable, value: Variable) -> None:
        frame.output.call("call_function", operator.setitem, [self, key, value], {}, "tensor item assignment")

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        return frame.output.call("call_function", operator.getitem, [self, key], {}, "tensor indexing")

    def getattr(self, frame: Frame, name: str) -> Variable:
        fake = self.fake
        if name == "shape":
            return SizeVariable([frame.output.sym_size(self, d) for d in range(fake.dim())])
        if name in TENSOR_METADATA:
            return constant(getattr(fake, name))
        if name in TENSOR_PROPERTIES:
            return frame.output.call("call_function", getattr, [self, constant(name)], {}, f"Tensor.{name}")
        if name == "data":
            return frame.output.call("call_method", "detach", [self], {}, "Tensor.data")
        if name == "grad":
            return _read_grad(frame, self)
        if callable(getattr(torch.Tensor, name, None)):
            return TensorMethodVariable(self, name)
        if not hasattr(torch.Tensor, name):
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        raise Unsupported(f"setting tensor attribute {name!r}")

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return TensorMethodVariable(self, name).call(frame, args, kwargs)


def _read_grad(frame: Frame, tensor: TensorVariable) -> Variable:
    """`p.grad` of a leaf read from the frame (a parameter, as an optimizer reads it): the real
    gradient, read through `p.grad` as another graph input (a None gradient guarded as None).
    Graphs never change which tensor `.grad` holds: backward, `zero_grad` and `.grad` writes run
    eagerly at graph breaks."""
    real = frame.output.real_object(tensor)
    if real is None or tensor.source is None:
        raise Unsupported(f"reading Tensor.grad of {tensor.describe()}, computed inside the compiled function")
    if not real.is_leaf and not real.retains_grad:
        raise Unsupported(f"reading Tensor.grad of {tensor.describe()}, which is not a leaf (eager warns)")
    return frame.wrap(real.grad, AttrSource(tensor.source, "grad"))


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


class TensorMethodVariable(Variable):
    """`tensor.method`, bound: calling it records a `call_method` node."""

    def __init__(self, tensor: TensorVariable, name: str) -> None:
        self.tensor = tensor
        self.name = name

    def describe(self) -> str:
        return f"Tensor.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = self.name
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
        double = name == "backward" and creates_graph(torch.Tensor.backward, [self.tensor, *args], kwargs)
        refuse_effect(name, f"Tensor.{name}()", double)
        if name in TENSOR_GUARDED_METADATA_METHODS and not args and not kwargs:
            result = getattr(self.tensor.fake, name)()
            if not _is_symbolic_result(result):
                if self.tensor.source is not None:
                    frame.output.guards.method_result(self.tensor.source, name, result)
                return constant(result)
        if name in TENSOR_METADATA_METHODS:
            if name == "size" and not kwargs:
                if not args:
                    return self.tensor.getattr(frame, "shape")
                dim = args[0].as_constant()
                return frame.output.sym_size(self.tensor, dim % max(self.tensor.fake.dim(), 1))
            plain_args = [unwrap(a)[1] for a in args]
            plain_kwargs = {k: unwrap(v)[1] for k, v in kwargs.items()}
            result = getattr(self.tensor.fake, name)(*plain_args, **plain_kwargs)
            if _is_symbolic_result(result):
                return frame.output.call("call_method", name, [self.tensor, *args], kwargs, f"Tensor.{name}()")
            if isinstance(result, torch.Size):
                return SizeVariable([constant(int(s)) for s in result])
            if isinstance(result, tuple):
                return constant(tuple(int(s) for s in result))
            return constant(result)
        return frame.output.call("call_method", name, [self.tensor, *args], kwargs, f"Tensor.{name}()")

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.tensor)}.{self.name}"


def unwrap(var: Variable) -> tuple[Any, Any]:
    """(fx argument, fake value) for a tracker passed to a graph operation."""
    if isinstance(var, GraphValueVariable):
        return var.node, var.fake
    if isinstance(var, ConstantVariable):
        return var.value, var.value
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
    raise Unsupported(f"{var.describe()} cannot be passed to a tensor operation")
