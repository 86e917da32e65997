"""Python numbers read from a tensor's data: `t.item()`, `float(t)`, `int(t)`, `bool(t)`,
`t.tolist()`.

Tracing cannot know the value, so by default each read is a graph break naming the call (the
number then reaches the resume function as a symbolic input). With
`config.capture_scalar_outputs` the read stays in the graph as an unbacked symbol, recorded as
torch.compile records it: `item()`, then `sym_float`/`sym_int` for `float()`/`int()` and `!= 0`
for `bool()`; `tolist()` of an integer tensor is a nested list of such symbols. Arithmetic and
tensor ops on the symbol are captured; a Python decision on it (`if v > 0`) still breaks. Reads
eager would refuse (several elements, complex values) and those torch.compile does not capture
(`tolist()` of a floating-point or bool tensor) keep the break, where eager runs the read.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import torch

from .. import config
from ..errors import BreakKind, Unsupported
from ..shapes.fake import is_symbolic, specialised_size
from .base import Variable
from .constants import constant
from .containers import ListVariable
from .exceptions import raise_python_error
from .trace_rules import TENSOR_DATA_HINT, TENSOR_DATA_METHODS

if TYPE_CHECKING:
    from ..interpreter.frame import Frame
    from .tensor import TensorVariable

# the dunder each conversion calls, whose entry in TENSOR_DATA_METHODS is the break's reason
_DUNDERS = {float: "__float__", int: "__int__", bool: "__bool__"}
_INTEGER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


def refuse(method: str) -> Unsupported:
    """The break for a read that is not captured, naming the call."""
    return Unsupported(TENSOR_DATA_METHODS[method], hint=TENSOR_DATA_HINT, kind=BreakKind.DATA_DEPENDENT)


def _one_element(tensor: TensorVariable) -> bool:
    numel = tensor.fake.numel()
    return not is_symbolic(numel) and numel == 1


def item(frame: Frame, tensor: TensorVariable) -> Variable:
    """`t.item()`: an unbacked symbol when captured."""
    if not config.capture_scalar_outputs:
        raise refuse("item")
    return frame.output.call("call_method", "item", [tensor], {}, "Tensor.item()")


def number(frame: Frame, tensor: TensorVariable, kind: type) -> Variable:
    """`float(t)`, `int(t)` or `bool(t)` of a one-element tensor (`kind` is the builtin)."""
    dtype = tensor.fake.dtype
    numel = tensor.fake.numel()
    if kind is not bool and not is_symbolic(numel) and numel != 1:
        try:  # eager's ValueError (the running torch's message, the same for any other numel)
            kind(torch.zeros(2))
        except ValueError as e:
            raise_python_error(frame, e)
    # int()/float() of a bool tensor would convert a SymBool, which the ShapeEnv cannot do
    converts_bool = dtype is torch.bool and kind is not bool
    if not config.capture_scalar_outputs or not _one_element(tensor) or dtype.is_complex or converts_bool:
        raise refuse(_DUNDERS[kind])
    value = item(frame, tensor)
    what = f"{kind.__name__}(tensor)"
    if kind is bool:
        if dtype is torch.bool:
            return value
        return frame.output.call("call_function", operator.ne, [value, constant(0)], {}, what)
    convert = torch.sym_float if kind is float else torch.sym_int
    return frame.output.call("call_function", convert, [value], {}, what)


def to_list(frame: Frame, tensor: TensorVariable) -> Variable:
    """`t.tolist()` of an integer tensor: nested lists of `t[i]...item()`. A dynamic size is
    specialised (its value guarded: the list's length is Python structure), as torch.compile
    does; a data-dependent one keeps the break."""
    captured = config.capture_scalar_outputs and tensor.fake.dtype in _INTEGER_DTYPES
    if not captured:
        raise refuse("tolist")
    shape = [specialised_size(s) for s in tensor.fake.shape]
    if None in shape:
        raise refuse("tolist")
    return _nested(frame, tensor, shape)


def _nested(frame: Frame, tensor: TensorVariable, shape: list[int]) -> Variable:
    if not shape:
        return item(frame, tensor)
    rows = [tensor.getitem(frame, constant(i)) for i in range(shape[0])]
    return ListVariable([_nested(frame, row, shape[1:]) for row in rows])
