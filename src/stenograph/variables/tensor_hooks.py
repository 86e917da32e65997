"""Tensor hooks registered in compiled code (`register_hook`, `register_post_accumulate_grad_hook`).

On a tensor read from the frame the hook outlives the call, on the caller's tensor: it is
registered on that tensor after the graph, as other effects on objects passed in are replayed.

On a tensor the frame computed, it fires on the gradient flowing into that tensor during
backward. The hook is traced on a fake gradient into a graph of its own (as a `cond` branch is,
`trace_body`); the frame's graph then registers that graph as the hook when it runs: the eager
backend on the real intermediate, AOTAutograd on the tensor it traces, whose backward then
computes the hook. A hook whose result is None changes nothing and registers nothing.

What stays a graph break (the hook is registered eagerly between graphs, as before): a hook on an
intermediate that changes Python state or returns something other than a tensor or None, a call
whose handle the code keeps (to `remove()`, return or store it: there is none while tracing), a
call inside a traced body, a tensor without grad.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from ..errors import Unsupported
from .base import Variable
from .constants import BoundMethodVariable, ConstantVariable, constant
from .higher_order import close_bodies, trace_body
from .tensor import TRACED_METHODS, TensorVariable
from .trace_rules import TRACED_OWN_CODE

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class GraphHookHandleVariable(Variable):
    """The handle of a hook registered by the graph or after it, which the code drops at once."""

    def python_type(self) -> type:
        return torch.utils.hooks.RemovableHandle

    def describe(self) -> str:
        return "the handle of a hook registered on an intermediate tensor"


class InputHookHandleVariable(Variable):
    """The handle of a hook registered after the graph on a tensor read from the frame, kept by
    the code (returned, stored, removed): the registration's real handle, made where it is
    replayed; `remove()` in the trace removes it right after (eager's handle, removed)."""

    def __init__(self, tensor: TensorVariable, method: str, hook: Variable) -> None:
        self.tensor = tensor
        self.method = method
        self.hook = hook
        self.removed = False

    def python_type(self) -> type:
        return torch.utils.hooks.RemovableHandle

    def describe(self) -> str:
        return f"the handle of a hook on {self.tensor.describe()}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "remove":
            return BoundMethodVariable(self, name)
        return super().getattr(frame, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name != "remove" or args or kwargs:
            return super().call_method(frame, name, args, kwargs)
        self.removed = True  # removing twice is what eager allows too
        return constant(None)

    def reconstruct(self, rebuild: Any) -> str:
        def register() -> str:
            return f"{rebuild.expr(self.tensor)}.{self.method}({rebuild.expr(self.hook)})"

        return rebuild.build_once(self, register)


def register_hook(frame: Frame, tensor: TensorVariable, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`tensor.register_hook(hook)`: on a tensor read from the frame, registered on it after the
    graph (its handle may be kept); on an intermediate, in the graph."""
    if tensor.source is not None:
        return _register_on_input(frame, tensor, "register_hook", args, kwargs)
    _refuse_unusual(frame, tensor, "register_hook", args, kwargs, handle_kept=not _dropped(frame))
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


def register_post_accumulate_grad_hook(
    frame: Frame, tensor: TensorVariable, args: list[Variable], kwargs: dict[str, Variable]
) -> Variable:
    """On a leaf read from the frame: registered on it after the graph (it fires after its
    `.grad` is accumulated, in a later backward)."""
    if tensor.source is None or not tensor.fake.is_leaf:
        raise Unsupported("Tensor.register_post_accumulate_grad_hook() on a tensor other than a leaf passed in")
    return _register_on_input(frame, tensor, "register_post_accumulate_grad_hook", args, kwargs)


def _register_on_input(
    frame: Frame, tensor: TensorVariable, method: str, args: list[Variable], kwargs: dict[str, Variable]
) -> Variable:
    """A hook on a tensor read from the frame: registered after the graph, in order."""
    _refuse_unusual(frame, tensor, method, args, kwargs)
    handle = None if _dropped(frame) else InputHookHandleVariable(tensor, method, args[0])
    frame.output.side_effects.hook_registered(tensor, method, args[0], handle)
    return handle or GraphHookHandleVariable()


def _refuse_unusual(
    frame: Frame,
    tensor: TensorVariable,
    method: str,
    args: list[Variable],
    kwargs: dict[str, Variable],
    *,
    handle_kept: bool = False,
) -> None:
    """What neither way serves: a tensor without grad (eager's error), more arguments, a call
    inside a traced body (a `cond` branch, a checkpointed function); and on an intermediate, its
    handle kept (`handle_kept`)."""
    inside_body = frame.output.graph is not frame.output.root_graph
    if handle_kept or inside_body or kwargs or len(args) != 1 or not tensor.fake.requires_grad:
        raise Unsupported(f"Tensor.{method}() installs a Python autograd hook; it runs eagerly between graphs")


def _dropped(frame: Frame) -> bool:
    """Whether the call's result, the handle, is dropped at once (the next instruction pops it):
    a handle kept (to `remove()`, return or store it) needs the call to run for real."""
    following = frame.instructions[frame.ip] if frame.ip < len(frame.instructions) else None
    return following is not None and following.opname == "POP_TOP"


def register_hook_graph(tensor: torch.Tensor, hook: torch.fx.GraphModule, *free: Any) -> None:
    """Run by the graph: `hook` (taking the gradient, then the tensors it reads) as `tensor`'s hook."""
    tensor.register_hook(functools.partial(_run_hook_graph, hook, free))


def _run_hook_graph(hook: torch.fx.GraphModule, free: tuple, grad: torch.Tensor) -> Any:
    return hook(grad, *free)


# traced where it is met (a graph of torch's compiled autograd calls the hooks of a backward)
setattr(_run_hook_graph, TRACED_OWN_CODE, True)


torch.fx.node.has_side_effect(register_hook_graph)  # kept though nothing uses its result
TRACED_METHODS["register_hook"] = register_hook
TRACED_METHODS["register_post_accumulate_grad_hook"] = register_post_accumulate_grad_hook
