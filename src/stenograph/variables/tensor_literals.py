"""`torch.tensor(data)` where `data` holds values only the graph has: tensors of one element,
NumPy scalars the graph computed (`a[0]` of an array) and symbolic numbers
(`torch.tensor([v.item()])`, `torch.tensor([a, a])`), or is a tensor (a copy). The legacy
constructors (`torch.LongTensor([...])`) come here as `torch.tensor(..., dtype=...)`.

`torch.tensor` reads Python numbers out of its data; handed graph values it cannot run on fake
tensors. Built instead from graph operations, as torch.compile builds it: each element a 0-d
tensor of the result's dtype (`reshape(())` of a tensor, `torch.scalar_tensor` of a number),
stacked and reshaped to the data's nesting. The dtype is the one `torch.tensor` infers, found by
calling it on stand-ins of the elements' types (a 0-d tensor of each tensor's dtype, a NumPy
scalar of each NumPy scalar's type, 0, 0.0 or False), so its promotion rules are torch's own.

Eager stores each element through a Python number (a float, or an int where the dtype is
integral, which it checks for overflow): it raises TypeError for some element types (a float32
into an integer dtype), and for some values (NaN into int64, 2**40 into int32). Each element's
conversion is therefore tried on values spanning its dtype's range first; where one raises (or
warns), eager could raise, and the call is refused. Integers reach a floating dtype through a
double, as eager's do.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import Variable
from .constants import constant
from .containers import ListVariable, SequenceVariable
from .numpy_arrays import NdarrayVariable, numpy_dtype
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
    samples = [_samples(leaf) for leaf in leaves]
    dtype = options.get("dtype") or _inferred_dtype([values[0] for values in samples], shape)
    for leaf, values in zip(leaves, samples):
        _check_conversion(leaf, values, dtype)
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


def _samples(leaf: Variable) -> list[Any]:
    """Values of `leaf`'s type for `torch.tensor` to take: a stand-in first (zero, or the
    constant itself), then the edges of its dtype's range (none for a symbolic number)."""
    if isinstance(leaf, NdarrayVariable):
        if not leaf.scalar:  # eager reads a 0-d array as an unsized sequence and raises
            raise Unsupported(f"torch.tensor() of a sequence holding {leaf.describe()}, a NumPy array")
        scalar_type = numpy_dtype(leaf.fake.dtype).type
        return [scalar_type(v) for v in _range_edges(leaf.fake.dtype)]
    if isinstance(leaf, TensorVariable):
        return [torch.tensor(v, dtype=leaf.fake.dtype) for v in _range_edges(leaf.fake.dtype)]
    if isinstance(leaf, SymNodeVariable):
        return [leaf.python_type()(0)]
    if leaf.is_constant():
        return [leaf.as_constant()]
    raise Unsupported(f"torch.tensor() of {leaf.describe()}")


def _range_edges(dtype: torch.dtype) -> list[Any]:
    """Zero and the values at the edges of `dtype`'s range: a conversion that raises for none of
    them raises for no value of the dtype."""
    if dtype is torch.bool:
        return [False, True]
    if not (dtype.is_floating_point or dtype.is_complex):
        info = torch.iinfo(dtype)
        return [0, info.min, info.max]
    limits = torch.finfo(dtype)
    edges = [0.0, math.nan, math.inf, -math.inf, limits.min, limits.max]
    return [complex(v, v) for v in edges] if dtype.is_complex else edges


def _inferred_dtype(stand_ins: list[Any], shape: tuple[int, ...]) -> torch.dtype:
    """The dtype `torch.tensor` infers for data of the stand-ins' types, nested as `shape`."""
    nested: list[Any] = stand_ins
    for size in reversed(shape):
        nested = [nested[i : i + size] for i in range(0, len(nested), size)] if size else [[]]
    try:
        return torch.tensor(nested[0]).dtype
    except (TypeError, RuntimeError) as e:  # `[np.uint64(1), np.int64(1)]`: no promotion
        raise Unsupported(f"torch.tensor() of these element types raises {type(e).__name__} eagerly: {e}") from e


def _check_conversion(leaf: Variable, samples: list[Any], dtype: torch.dtype) -> None:
    """Refuse `leaf` where eager's conversion of it to `dtype` raises or warns for some value."""
    for value in samples:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                torch.tensor([value], dtype=dtype)
            except Exception as e:  # TypeError, an overflow's RuntimeError, a warning made an error
                which = "its type" if value is samples[0] else f"a value such as {value}"
                verb = "warns" if isinstance(e, Warning) else "raises"
                raise Unsupported(
                    f"torch.tensor() storing {leaf.describe()} as {dtype}: eager {verb} {type(e).__name__} "
                    f"for {which} ({e})"
                ) from e


def _element(frame: Frame, leaf: Variable, dtype: torch.dtype) -> Variable:
    """`leaf` as a 0-d tensor of `dtype`."""
    output = frame.output
    if isinstance(leaf, NdarrayVariable):
        leaf = leaf.as_tensor()
    if isinstance(leaf, TensorVariable):
        scalar = output.call("call_method", "reshape", [leaf, constant(())], {}, "torch.tensor()")
        integral = not (leaf.fake.dtype.is_floating_point or leaf.fake.dtype.is_complex)
        if integral and (dtype.is_floating_point or dtype.is_complex) and dtype != torch.float64:
            # eager reads the element as a Python float first: two roundings, as here
            scalar = output.call("call_method", "to", [scalar, constant(torch.float64)], {}, "torch.tensor()")
        return output.call("call_method", "to", [scalar, constant(dtype)], {}, "torch.tensor()")
    return output.call("call_function", torch.scalar_tensor, [leaf], {"dtype": constant(dtype)}, "torch.tensor()")
