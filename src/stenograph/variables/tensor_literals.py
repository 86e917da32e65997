"""`torch.tensor(data)` where `data` holds values only the graph has: tensors of one element and
symbolic numbers (`torch.tensor([v.item()])`, `torch.tensor([a, a])`), or is a tensor (a copy).

`torch.tensor` reads Python numbers out of its data; handed graph values it cannot run on fake
tensors. Built instead from graph operations, as torch.compile builds it: each element a 0-d
tensor of the result's dtype (`reshape(())` of a tensor, `torch.scalar_tensor` of a number),
stacked and reshaped to the data's nesting. The dtype is the one `torch.tensor` infers, found by
calling it on stand-ins of the elements' types (a 0-d tensor of each tensor's dtype, 0, 0.0 or
False), so its promotion rules are torch's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import Variable
from .constants import constant
from .containers import ListVariable, SequenceVariable
from .symbolic import GraphValueVariable, SymNodeVariable
from .tensor import TensorVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

__all__ = ["tensor_of_graph_values"]

_TAKEN = frozenset({"dtype", "device"})


def tensor_of_graph_values(frame: Frame, data: Variable, kwargs: dict[str, Variable]) -> Variable | None:
    """The tracker of `torch.tensor(data, **kwargs)` built in the graph; None where `data` holds
    no graph value (the call is recorded as it is)."""
    leaves: list[Variable] = []
    shape = _nesting(data, leaves)
    if not any(isinstance(leaf, GraphValueVariable) for leaf in leaves):
        return None
    if set(kwargs) - _TAKEN or not all(v.is_constant() for v in kwargs.values()):
        raise Unsupported(f"torch.tensor() of graph values with {', '.join(kwargs)}")
    options = {k: v.as_constant() for k, v in kwargs.items()}
    output = frame.output
    if isinstance(data, TensorVariable):  # a copy of the tensor, as eager's (which also warns)
        result = output.call("call_method", "detach", [data], {}, "torch.tensor()")
        result = output.call("call_method", "clone", [result], {}, "torch.tensor()")
        changes = {k: constant(v) for k, v in options.items() if v is not None}
        return output.call("call_method", "to", [result], changes, "torch.tensor()") if changes else result
    dtype = options.get("dtype") or torch.tensor(_stand_ins(leaves, shape)).dtype
    elements = [_element(frame, leaf, dtype) for leaf in leaves]
    if shape:
        result = output.call("call_function", torch.stack, [ListVariable(elements)], {}, "torch.tensor()")
        result = output.call("call_method", "reshape", [result, constant(shape)], {}, "torch.tensor()")
    else:
        result = elements[0]
    if options.get("device") is not None:
        result = output.call("call_method", "to", [result, constant(options["device"])], {}, "torch.tensor()")
    return output.call("call_method", "detach", [result], {}, "torch.tensor()")  # a new leaf, as eager's


def _nesting(data: Variable, leaves: list[Variable]) -> tuple[int, ...]:
    """The sizes of `data`'s nested lists and tuples (appending its elements to `leaves`)."""
    if not (isinstance(data, SequenceVariable) and data.python_type() in (list, tuple)):
        leaves.append(data)
        return ()
    shapes = [_nesting(item, leaves) for item in data.items]
    if any(s != shapes[0] for s in shapes):
        raise Unsupported("torch.tensor() of nested sequences of different lengths")
    return (len(shapes), *(shapes[0] if shapes else ()))


def _stand_ins(leaves: list[Variable], shape: tuple[int, ...]) -> Any:
    """Values of the elements' types, nested as the data is, for `torch.tensor` to infer from."""
    flat: list[Any] = []
    for leaf in leaves:
        if isinstance(leaf, TensorVariable):
            flat.append(torch.zeros((), dtype=leaf.fake.dtype))
        elif isinstance(leaf, SymNodeVariable):
            flat.append(leaf.python_type()(0))
        elif leaf.is_constant():
            flat.append(leaf.as_constant())
        else:
            raise Unsupported(f"torch.tensor() of {leaf.describe()}")
    for size in reversed(shape):
        flat = [flat[i : i + size] for i in range(0, len(flat), size)] if size else [[]]
    return flat[0]


def _element(frame: Frame, leaf: Variable, dtype: torch.dtype) -> Variable:
    """`leaf` as a 0-d tensor of `dtype`."""
    output = frame.output
    if isinstance(leaf, TensorVariable):
        scalar = output.call("call_method", "reshape", [leaf, constant(())], {}, "torch.tensor()")
        return output.call("call_method", "to", [scalar, constant(dtype)], {}, "torch.tensor()")
    return output.call("call_function", torch.scalar_tensor, [leaf], {"dtype": constant(dtype)}, "torch.tensor()")
