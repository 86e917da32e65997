"""`tensor.register_hook(hook)` on a tensor the frame computed, kept in the graph.

A hook on an intermediate fires on the gradient flowing into that tensor during backward. The
hook is traced on a fake gradient into a graph of its own (as a `cond` branch is, `trace_body`);
the frame's graph then registers that graph as the hook when it runs: the eager backend on the
real intermediate, AOTAutograd on the tensor it traces, whose backward then computes the hook.
A hook whose result is None changes nothing and registers nothing.

What stays a graph break (the hook is registered eagerly between graphs, as before): a hook that
changes Python state or returns something other than a tensor or None, a hook on a tensor read
from the frame (it lives on after the call, on the caller's tensor), and a call whose handle the
code keeps (to `remove()`, return or store it: it exists only when the graph runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from ..errors import Unsupported
from .base import Variable
from .constants import ConstantVariable
from .higher_order import close_bodies, trace_body
from .tensor import TRACED_METHODS, TensorVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class GraphHookHandleVariable(Variable):
    """The handle of a hook the graph registers when it runs, which the code drops at once."""

    def python_type(self) -> type:
        return torch.utils.hooks.RemovableHandle

    def describe(self) -> str:
        return "the handle of a hook registered on an intermediate tensor"


def register_hook(frame: Frame, tensor: TensorVariable, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`tensor.register_hook(hook)` on an intermediate that requires grad, in the graph."""
    kept = tensor.source is not None or not _dropped(frame)
    inside_body = frame.output.graph is not frame.output.root_graph  # (a cond branch, a checkpointed function)
    if kept or inside_body or kwargs or len(args) != 1 or not tensor.fake.requires_grad:
        raise Unsupported("Tensor.register_hook() installs a Python autograd hook; it runs eagerly between graphs")
    hook = args[0]
    fake = tensor.fake
    with frame.output.fake_mode:
        grad = torch.empty_strided(fake.shape, fake.stride(), dtype=fake.dtype, device=fake.device)

    def call(inner: list[Variable]) -> Variable:
        result = hook.call(frame, inner, {})
        if isinstance(result, ConstantVariable) and result.value is None:
            return inner[0]  # the gradient passes unchanged
        return result

    body = trace_body(frame, call, [grad], "a tensor hook", bare=True, numbers=True)
    if not body.single:
        raise Unsupported("a tensor hook returning something other than one tensor")
    output = body.graph.find_nodes(op="output")[0]
    if output.args[0] is next(iter(body.graph.nodes)):
        return GraphHookHandleVariable()  # returns the gradient it was given: nothing to register
    (module,), free = close_bodies([body])
    graph = frame.output.graph
    hook_node = frame.output.add_submodule(module, "tensor_hook")
    node = graph.create_node("call_function", register_hook_graph, (tensor.node, hook_node, *free), {})
    node.meta["example_value"] = None
    return GraphHookHandleVariable()


def _dropped(frame: Frame) -> bool:
    """Whether the call's result, the handle, is dropped at once (the next instruction pops it):
    a handle kept (to `remove()`, return or store it) needs the call to run for real."""
    following = frame.instructions[frame.ip] if frame.ip < len(frame.instructions) else None
    return following is not None and following.opname == "POP_TOP"


def register_hook_graph(tensor: torch.Tensor, hook: torch.fx.GraphModule, *free: Any) -> None:
    """Run by the graph: `hook` (taking the gradient, then the tensors it reads) as `tensor`'s hook."""
    tensor.register_hook(lambda grad: hook(grad, *free))


torch.fx.node.has_side_effect(register_hook_graph)  # kept though nothing uses its result
TRACED_METHODS["register_hook"] = register_hook
