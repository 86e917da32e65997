"""`torch.nn.Parameter(x, requires_grad)` called in the frame on a tensor it reads.

Eager makes a new leaf that shares `x`'s storage (never `x`'s autograd history): a graph cannot
make one (AOTAutograd hands its outputs back as non-leaves, and gradients only reach inputs). So
the compiled code makes the parameter before its graph, on each call, exactly as eager does
(`NewParameterSource`), and passes it to the graph as an input: the graph's ops on it see its
storage, shared with `x`, and gradients flow to it as to any leaf input. Every use of the object
(returned, stored, live at a graph break) is that one parameter. torch.compile does the same.

The input must be the tensor as read from the frame: one the trace computed (or whose storage it
swapped, `x.data = y`) has no value before the graph, and the call breaks the graph, as
torch.compile's does (its `graph_break_on_nn_param_ctor`), to make the parameter eagerly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from ..errors import Unsupported
from ..guards.sources import NewParameterSource
from ..marks import is_exporting
from .base import Variable
from .tensor import TensorVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

__all__ = ["make_parameter"]


def make_parameter(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch.nn.Parameter(data, requires_grad=True)` while tracing."""
    bound = dict(zip(("data", "requires_grad"), args)) | kwargs
    if len(args) > 2 or not set(bound) <= {"data", "requires_grad"}:
        raise Unsupported("torch.nn.Parameter() with arguments it does not take")
    data, flag = bound.get("data"), bound.get("requires_grad")
    requires_grad = True if flag is None else flag.as_constant() if flag.is_constant() else None
    if not isinstance(requires_grad, bool):
        raise Unsupported("torch.nn.Parameter() whose requires_grad is not a bool constant")
    if not isinstance(data, TensorVariable):
        what = "no tensor" if data is None else data.describe()
        raise Unsupported(f"torch.nn.Parameter() of {what}: it is made eagerly")
    if is_exporting():
        raise Unsupported("torch.nn.Parameter() in export (an exported graph takes no parameter it makes)")
    output = frame.output
    read = next((i for i in output.inputs if i.node is data.node and i.guarded and i.fake is data.fake), None)
    if read is None or type(read.example) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported(
            f"torch.nn.Parameter() of {data.describe()}, a tensor the compiled function computed: it is made eagerly",
            hint="torch.compile breaks here too; create the parameter from a tensor passed in, or outside",
        )
    try:
        with unset_fake_temporarily():
            example = torch.nn.Parameter(read.example, requires_grad)
    except RuntimeError as e:  # an integer tensor cannot require grad: eager raises this
        raise Unsupported(f"torch.nn.Parameter() of {data.describe()} raises {e}") from e
    with output.fake_mode:
        fake = torch.nn.Parameter(data.fake, requires_grad)
    index = sum(isinstance(i.source, NewParameterSource) for i in output.inputs)
    return output.made_tensor_input(example, fake, NewParameterSource(read.source, requires_grad, index))
