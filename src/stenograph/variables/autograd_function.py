"""`torch.autograd.Function` subclasses applied in a traced frame.

`Fn.apply(*args)` becomes one graph node calling `Fn.apply`, so the user's forward computes the
result and the user's backward differentiates it, as in eager: the eager backend runs the node as
is, and AOTAutograd traces the user's backward through it when it builds the backward graph.

That node runs the user's forward on fake tensors while tracing, and AOTAutograd runs forward and
backward once while compiling: code with Python effects (printing, appending to a list, writing
globals) would then run at the wrong time. So forward and backward are first traced once with the
frame's own interpreter, with a stand-in `ctx` that keeps what forward saves and sets: anything the
tracer cannot capture, any change to Python state, or a tensor read from elsewhere than the
arguments (a global, a module's parameter) raises `Unsupported` there and the call runs eagerly at
a graph break. The nodes this speculation recorded are erased afterwards. A Function marked
`allow_in_graph` is taken at its word: its node is recorded without this check.

A forward that changes an input in place and marks it dirty (`ctx.mark_dirty`) returns that input:
the node's fake result is the argument's own fake, so the tracker is the argument's (`y is x`),
and the real `apply` (eager backend) or the backend's copy into the input (AOTAutograd) changes
the caller's tensor. Forward-mode AD (`save_for_forward`, `jvp`) needs the real `apply` with dual
tensors: see `_refuse_forward_ad`.
"""

from __future__ import annotations

import inspect
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch.autograd import forward_ad

from .. import process_state
from ..errors import Unsupported
from ..marks import is_allowed_in_graph
from .base import Variable, birth
from .constants import BoundMethodVariable, constant
from .containers import TupleVariable
from .tensor import TensorVariable
from .trace_rules import has_own_setup_context

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# what ctx methods do while speculating: kept (save_for_backward) or without effect on the trace
# (mark_dirty's in-place effect is the forward's own ops; save_for_forward only serves jvp, which
# never runs in the node: see _refuse_forward_ad)
_CTX_METHODS = frozenset({
    "save_for_backward", "mark_non_differentiable", "set_materialize_grads", "mark_dirty", "save_for_forward",
})  # fmt: skip


class FunctionCtxVariable(Variable):
    """The `ctx` forward and backward receive while they are speculated: attributes set on it,
    the tensors saved for backward, and which inputs need a gradient."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.fields: dict[str, Variable] = {}
        self.saved: list[Variable] = []
        self.needs_input_grad = needs_input_grad
        self.born = birth()

    def describe(self) -> str:
        return "autograd.Function ctx"

    def python_type(self) -> type:
        return torch.autograd.function.FunctionCtx

    def made_while_tracing(self) -> bool:
        return True

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in self.fields:
            return self.fields[name]
        if name == "saved_tensors":
            return TupleVariable(list(self.saved))
        if name == "needs_input_grad":
            return constant(self.needs_input_grad)
        if name in _CTX_METHODS:
            return BoundMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        self.fields[name] = value

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name not in _CTX_METHODS or kwargs:
            raise Unsupported(f"ctx.{name}() in an autograd.Function")
        if name == "save_for_backward":
            self.saved = list(args)
        return constant(None)


class FunctionApplyVariable(Variable):
    """`Fn.apply` of an autograd.Function subclass (the class itself is guarded by identity,
    forward and backward by the class-attribute guards of their lookups)."""

    def __init__(self, cls_var: Variable, cls: type) -> None:
        self.cls_var = cls_var
        self.cls = cls

    def describe(self) -> str:
        return f"{self.cls.__qualname__}.apply"

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.cls_var)}.apply"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        self._refuse_forward_ad(frame)
        if kwargs and has_own_setup_context(self.cls):
            args, kwargs = self._bound(frame, args, kwargs)
        if not is_allowed_in_graph(self.cls):  # marked: the node as it is, its bodies unread
            self._speculate(frame, args, kwargs)
        return frame.output.call("call_function", apply_of(self.cls), args, kwargs, f"{self.describe()}()")

    def _bound(
        self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]
    ) -> tuple[list[Variable], dict[str, Variable]]:
        """Keyword arguments of a `setup_context`-style Function bound to forward's signature,
        defaults filled in, as its `apply` binds them (setup_context sees them as `inputs`).
        Old-style Functions take them as they are: forward receives them."""
        try:
            bound = inspect.signature(self.cls.forward).bind(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"{self.describe()}(): {e}") from None
        bound.apply_defaults()

        def tracker(value: Any) -> Variable:
            return value if isinstance(value, Variable) else frame.wrap(value, None)

        return [tracker(a) for a in bound.args], {k: tracker(v) for k, v in bound.kwargs.items()}

    def _refuse_forward_ad(self, frame: Frame) -> None:
        """Under forward-mode AD, `apply` computes tangents with the Function's `jvp` (or raises
        for a Function without one). A backend that retraces the node (AOTAutograd) keeps only
        the forward's ops, whose own derivatives would give the tangents instead. So inside a
        `forward_ad.dual_level()` the apply runs eagerly at a break, and a graph holding it is
        guarded to run outside one (no dual tensor exists there)."""
        if _dual_level() >= 0:
            raise Unsupported(
                f"{self.describe()}() inside forward_ad.dual_level(): forward-mode AD runs the Function's jvp",
                hint="forward-mode AD through autograd.Function runs eagerly",
            )
        frame.output.guards.state_query(_dual_level, "forward_ad dual level", -1)

    def _speculate(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> None:
        """Trace forward and backward once, to refuse what the apply node could not reproduce."""
        output = frame.output
        nodes_before = set(output.graph.nodes)
        effects_before, inputs_before = output.side_effects.mark(), len(output.inputs)
        grad_mode = torch.is_grad_enabled()
        needs = tuple(grad_mode and isinstance(a, TensorVariable) and bool(a.fake.requires_grad) for a in args)
        ctx = FunctionCtxVariable(needs)
        torch._C._set_grad_enabled(False)  # forward runs without grad, as apply runs it
        try:
            forward = self.cls_var.getattr(frame, "forward")
            if has_own_setup_context(self.cls):
                result = forward.call(frame, args, kwargs)
                setup = self.cls_var.getattr(frame, "setup_context")
                setup.call(frame, [ctx, TupleVariable(list(args)), result], {})
            else:
                result = forward.call(frame, [ctx, *args], kwargs)
        finally:
            torch._C._set_grad_enabled(grad_mode)
        outputs = result.unpack(frame) if isinstance(result, TupleVariable) else [result]
        grads = [o if isinstance(o, TensorVariable) else constant(None) for o in outputs]
        torch._C._set_grad_enabled(False)  # backward runs without grad, as the engine runs it
        try:
            self.cls_var.getattr(frame, "backward").call(frame, [ctx, *grads], {})
        finally:
            torch._C._set_grad_enabled(grad_mode)
        if output.side_effects.changed_since(effects_before):
            raise Unsupported(f"{self.describe()}: forward or backward changes Python state")
        if len(output.inputs) != inputs_before:
            # a backend that traces the node would keep the tensor it read while compiling
            raise Unsupported(f"{self.describe()}: forward or backward reads tensors other than its arguments")
        _erase_unused(output.graph, nodes_before)


class FunctionInstanceVariable(Variable):
    """`Fn()`, an instance of an autograd.Function subclass made in the frame (an old spelling:
    `Fn().apply(x)`): its `apply` is the class's; rebuilt as `Fn()` where it escapes."""

    def __init__(self, cls_var: Variable, cls: type) -> None:
        self.cls_var = cls_var
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"{self.cls.__qualname__} object"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "apply":
            return FunctionApplyVariable(self.cls_var, self.cls)
        return super().getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.cls_var)}()"


def _dual_level() -> int:
    """The innermost forward-AD level entered (-1: none)."""
    return forward_ad._current_level


def apply_of(cls: type) -> Any:
    """The graph node's target for `cls.apply`: a plain function named after the class, which FX
    binds as an object in the graph's code (torch's own `apply` would be looked up by its module
    path, where it is not found); one per class, so graphs of one class compare equal."""
    fn = _apply_functions.get(cls)
    if fn is None:
        ref = weakref.ref(cls)  # the class's entry in the weak table must not keep it alive

        def fn(*args: Any, **kwargs: Any) -> Any:
            return ref().apply(*args, **kwargs)  # type: ignore[union-attr]

        fn.__name__ = fn.__qualname__ = f"{cls.__name__}_apply"
        _apply_functions[cls] = fn
    return fn


_apply_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
process_state.register_containers("variables.autograd_function_applies", _apply_functions, memo=True)


def _erase_unused(graph: torch.fx.Graph, keep: set[torch.fx.Node]) -> None:
    """Erase what speculation recorded, newest first. Inputs it added stay (placeholders), and so
    do symbolic sizes, which tensor trackers cache for later reads."""
    for node in reversed(list(graph.nodes)):
        if node in keep or node.op in ("placeholder", "output") or node.users:
            continue
        if isinstance(node.meta.get("example_value"), (torch.SymInt, torch.SymFloat, torch.SymBool)):
            continue
        graph.erase_node(node)
