"""`torch.autograd.Function` subclasses applied in a traced frame.

`Fn.apply(*args)` becomes one graph node calling `Fn.apply`, so the user's forward computes the
result and the user's backward differentiates it, as in eager: the eager backend runs the node as
is, and AOTAutograd traces the user's backward through it when it builds the backward graph.

That node runs the user's forward on fake tensors while tracing, and AOTAutograd runs forward and
backward once while compiling: code with Python effects (printing, appending to a list, writing
globals) would then run at the wrong time. So forward and backward are first traced once with the
frame's own interpreter, with a stand-in `ctx` that keeps what forward saves and sets: anything the
tracer cannot capture, or any change to Python state, raises `Unsupported` there and the call runs
eagerly at a graph break. The nodes this speculation recorded are erased afterwards. A Function
marked `allow_in_graph` is taken at its word: its node is recorded without this check.

The node would read, while a backend traces it, the real tensors forward reaches other than
through its arguments (a global, a module's parameter, a dataclass field): where the speculation
reads any, or an argument cannot be a node's argument (a module, an object), forward and backward
are traced into graphs of their own instead (`_lifted`). Where no backward can follow (grad
disabled, no tensor argument requiring grad), forward is traced in place (`_inline`).

A forward that changes an input in place and marks it dirty (`ctx.mark_dirty`) returns that input:
the node's fake result is the argument's own fake, so the tracker is the argument's (`y is x`),
and the real `apply` (eager backend) or the backend's copy into the input (AOTAutograd) changes
the caller's tensor. Forward-mode AD (`save_for_forward`, `jvp`) needs the real `apply` with dual
tensors: see `_refuse_forward_ad`.
"""

from __future__ import annotations

import dataclasses
import inspect
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._functorch.autograd_function import autograd_function_apply
from torch.autograd import forward_ad

from .. import process_state
from ..errors import Unsupported
from ..marks import is_allowed_in_graph
from .base import Variable, birth
from .constants import BoundMethodVariable, constant, is_none
from .containers import DictVariable, ListVariable, TupleVariable
from .higher_order import close_bodies, outer_nodes, trace_body
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
        # the tensors given to mark_dirty and mark_non_differentiable; set_materialize_grads' value
        self.marked: dict[str, list[Variable]] = {"mark_dirty": [], "mark_non_differentiable": []}
        self.materialize: bool | None = None
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
        elif name in self.marked:
            self.marked[name].extend(args)
        elif name == "set_materialize_grads":
            self.materialize = bool(args[0].as_constant()) if args and args[0].is_constant() else None
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
            traced = self._traced(frame, args, kwargs)
            if traced is not None:
                return traced
        return frame.output.call("call_function", apply_of(self.cls), args, kwargs, f"{self.describe()}()")

    def _traced(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable | None:
        """The apply traced through forward (`_inline`) or its bodies (`_lifted`), or None where
        the apply node is recorded (the bodies, speculated, need only the arguments)."""
        if frame.output.transform_bodies:
            # inside a functorch transform's body only the real apply runs functorch's rules for
            # the Function (its vmap rule, or its errors): the node, whose trace must read nothing else
            if self._speculate(frame, args, kwargs):
                raise Unsupported(f"{self.describe()}: reads tensors other than its arguments inside a func transform")
            return None
        if not (torch.is_grad_enabled() and any(_requires_grad(a) for a in args)):
            inlined = self._inline(frame, args, kwargs)
            if inlined is not None:
                return inlined
        # a list, an object given to forward is the lifted trace's: the speculation, whose
        # Python effects are not undone, must not change it first
        if not all(map(_passable, [*args, *kwargs.values()])) or self._speculate(frame, args, kwargs):
            return self._lifted(frame, args, kwargs)
        return None

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

    def _forward(
        self, frame: Frame, ctx: FunctionCtxVariable, args: list[Variable], kwargs: dict[str, Variable]
    ) -> Variable:
        """The user's forward (and setup_context) on `ctx`, without grad, as apply runs them."""
        grad_mode = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        try:
            forward = self.cls_var.getattr(frame, "forward")
            if not has_own_setup_context(self.cls):
                return forward.call(frame, [ctx, *args], kwargs)
            result = forward.call(frame, args, kwargs)
            setup = self.cls_var.getattr(frame, "setup_context")
            setup.call(frame, [ctx, TupleVariable(list(args)), result], {})
            return result
        finally:
            torch._C._set_grad_enabled(grad_mode)

    def _backward(self, frame: Frame, ctx: FunctionCtxVariable, grads: list[Variable]) -> list[Variable]:
        """The user's backward, without grad as the engine runs it; its gradients as a list."""
        grad_mode = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)
        try:
            result = self.cls_var.getattr(frame, "backward").call(frame, [ctx, *grads], {})
        finally:
            torch._C._set_grad_enabled(grad_mode)
        return result.unpack(frame) if isinstance(result, TupleVariable) else [result]

    def _inline(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable | None:
        """Without grad, or with no tensor argument requiring it, apply only runs forward (no
        backward can follow): forward is traced into the frame's graph as it is, Python effects
        included. Beyond forward, eager's apply bumps the version of a tensor marked dirty,
        checks that it is returned, returns an alias of an argument returned as it is, and
        detaches a result requiring grad: there the apply node is recorded instead (None), or,
        where forward had Python effects, the call runs eagerly at a break."""
        output = frame.output
        nodes_before, effects_before = set(output.graph.nodes), output.side_effects.mark()
        ctx = FunctionCtxVariable(tuple(_requires_grad(a) for a in args))  # as eagerly, even without grad
        result = self._forward(frame, ctx, args, kwargs)
        tensors = [item for item in _items(frame, result) if isinstance(item, TensorVariable)]
        if not ctx.marked["mark_dirty"] and not any(t.fake.requires_grad or _among(t, args) for t in tensors):
            return result
        if output.side_effects.changed_since(effects_before):
            raise Unsupported(f"{self.describe()}: forward changes Python state and marks or returns inputs")
        _erase_unused(output.graph, nodes_before)
        return None

    def _speculate(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> bool:
        """Trace forward and backward once, to refuse what the apply node could not reproduce;
        whether they read tensors other than the arguments (see `_lifted`)."""
        output = frame.output
        nodes_before = set(output.graph.nodes)
        effects_before, inputs_before = output.side_effects.mark(), len(output.inputs)
        ctx = FunctionCtxVariable(tuple(_requires_grad(a) for a in args))
        outputs = _items(frame, self._forward(frame, ctx, args, kwargs))
        grads = [o if isinstance(o, TensorVariable) else constant(None) for o in outputs]
        self._backward(frame, ctx, grads)
        if output.side_effects.changed_since(effects_before):
            raise Unsupported(f"{self.describe()}: forward or backward changes Python state")
        own = {a.node for a in [*args, *kwargs.values()] if isinstance(a, TensorVariable)}
        new = [node for node in output.graph.nodes if node not in nodes_before]
        read = {used for node in new for used in node.all_input_nodes if used in nodes_before}
        read |= {o.node for o in outputs if isinstance(o, TensorVariable) and o.node in nodes_before}
        elsewhere = len(output.inputs) != inputs_before or any(
            isinstance(node.meta.get("example_value"), torch.Tensor) for node in read - own
        )
        _erase_unused(output.graph, nodes_before)
        return elsewhere

    def _lifted(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        """forward and backward traced into graphs of their own, recorded as torch's
        `autograd_function_apply` op (which AOTAutograd knows), as torch.compile records them.
        forward's graph takes the tensor arguments, then the tensors it reads from elsewhere
        (a dataclass's field, a module's parameter, a global): those are read, as eagerly,
        but get no gradient (backward's graph gives None for them). It returns its tensor
        results, then the tensors that objects it returns hold (marked non-differentiable:
        eager leaves them as forward made them), then the tensors backward uses (saved, or kept
        on ctx), which backward's graph takes after the gradients."""
        if any(isinstance(v, TensorVariable) for v in kwargs.values()):
            raise Unsupported(f"{self.describe()}: tensors passed by keyword")
        forward = _LiftedForward(self, frame, args, kwargs)
        fakes = [t.fake for t in forward.tensors]
        fwd = trace_body(frame, forward.run, fakes, f"{self.describe()} forward", judged=True)
        ctx = forward.ctx
        if ctx.marked["mark_dirty"] or ctx.materialize is False:
            raise Unsupported(f"{self.describe()}: ctx.mark_dirty or set_materialize_grads(False) with lifted tensors")
        items = _items(frame, forward.returned)
        with frame.output.fake_mode:
            grad_fakes = [torch.empty_like(o.fake) for o in forward.flat]

        def run_backward(grads: list[Variable]) -> Variable:
            it = iter(grads)
            given = [next(it) if isinstance(item, TensorVariable) else constant(None) for item in items]
            got = self._backward(frame, ctx, given)
            if len(got) < len(args) or any(not is_none(g) for g in got[len(args) :]):
                raise Unsupported(f"{self.describe()}: backward returns {len(got)} gradients for {len(args)} inputs")
            if any(not is_none(g) for i, g in enumerate(got[: len(args)]) if i not in forward.positions):
                raise Unsupported(
                    f"{self.describe()}: backward returns a gradient for a non-tensor input (eager raises)"
                )
            return TupleVariable([got[i] for i in forward.positions])

        bwd = trace_body(frame, run_backward, grad_fakes, f"{self.describe()} backward", nones=True)
        own = sum(isinstance(item, TensorVariable) for item in items)  # flat[:own]: forward's own results
        results = self._record_apply(frame, fwd, bwd, forward, own)

        def outside(k: int) -> Variable:
            """The tracker the caller sees for `flat[k]`: the op's result, except for a tensor
            an object holds that forward did not make (an argument, a tensor read elsewhere):
            eager's object holds that very tensor."""
            var = forward.flat[k]
            if k < own or (var.node.graph is fwd.graph and var.node.op != "placeholder"):
                return results[k]
            return next((t for t, i in zip(forward.tensors, forward.inner) if i is var), var)

        swapped = {id(var): outside(k) for k, var in enumerate(forward.flat)}
        for holder, key in forward.slots:
            holder[key] = swapped.get(id(holder[key]), holder[key])
        rebuilt = [swapped[id(item)] if isinstance(item, TensorVariable) else item for item in items]
        return TupleVariable(rebuilt) if isinstance(forward.returned, TupleVariable) else rebuilt[0]

    def _record_apply(self, frame: Frame, fwd: Any, bwd: Any, forward: _LiftedForward, own: int) -> list[Variable]:
        """Join forward's and backward's graphs (backward's free values become forward's extra
        results, the tensors forward read from elsewhere inputs of both) into one
        `autograd_function_apply` node of the frame's graph; the trackers of its results."""
        output, ctx = frame.output, forward.ctx
        saved = bwd.free
        fwd_out = next(n for n in fwd.graph.nodes if n.op == "output")
        fwd_out.args = ((fwd_out.args[0], tuple(saved)),)
        fwd.free = outer_nodes(fwd.graph)
        (fwd_gm,), lifted = close_bodies([fwd])
        bwd_out = next(n for n in bwd.graph.nodes if n.op == "output")
        bwd_out.args = ((*bwd_out.args[0], *[None] * len(lifted)),)
        (bwd_gm,), _ = close_bodies([bwd])
        marked = ctx.marked["mark_non_differentiable"]
        options = {
            "non_differentiable_idx": [k for k, o in enumerate(forward.flat) if k >= own or _among(o, marked)],
            "saved_for_backward_idx": [k for k, n in enumerate(saved) if any(n is s.node for s in ctx.saved)],
        }
        fakes = [t.fake for t in forward.tensors] + [n.meta["example_value"] for n in lifted]
        try:
            with output.fake_mode, enable_python_dispatcher():
                fake = autograd_function_apply(fwd_gm, bwd_gm, *fakes, **options)
        except Exception as e:
            raise Unsupported(f"{self.describe()}: traced forward fails: {type(e).__name__}: {e}") from e
        node = output.graph.create_node(
            "call_function",
            autograd_function_apply,
            (
                output.add_submodule(fwd_gm, "fwd_body"),
                output.add_submodule(bwd_gm, "bwd_body"),
                *[t.node for t in forward.tensors],
                *lifted,
            ),
            options,
        )
        return output.wrap_result(node, fake, f"{self.describe()}()").unpack(frame)


class _LiftedForward:
    """forward as `_lifted` traces it into its own graph: `run(tensors)` calls it with the tensor
    arguments replaced by the graph's inputs, and collects the graph's results (`flat`: forward's
    own tensors, then those that lists it appended to and dataclasses it returned hold, whose
    places are `slots`)."""

    def __init__(
        self, apply: FunctionApplyVariable, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]
    ) -> None:
        self.apply, self.frame, self.args, self.kwargs = apply, frame, args, kwargs
        self.positions = [i for i, a in enumerate(args) if isinstance(a, TensorVariable)]
        self.tensors: list[TensorVariable] = [args[i] for i in self.positions]  # type: ignore[misc]
        self.ctx = FunctionCtxVariable(tuple(_requires_grad(a) for a in args))
        self.returned: Variable = constant(None)  # what forward returned
        self.inner: list[Variable] = []  # the tensor arguments as forward's graph takes them
        self.flat: list[TensorVariable] = []  # forward's graph's results: its own, then those held elsewhere
        self.slots: list[tuple[Any, Any]] = []  # (dict or list, key): where objects and lists hold tensors

    def run(self, given_tensors: list[Variable]) -> Variable:
        frame, output, what = self.frame, self.frame.output, self.apply.describe()
        self.inner.extend(given_tensors)
        given = list(self.args)
        for i, var in zip(self.positions, given_tensors):
            given[i] = var
        mark = output.side_effects.mark()
        self.returned = self.apply._forward(frame, self.ctx, given, self.kwargs)
        if output.side_effects.changed_since(mark, frame_containers=False):
            raise Unsupported(f"{what}: forward changes Python state")
        for changed in output.side_effects.frame_containers_changed_since(mark):
            if not (isinstance(changed, ListVariable) and all(map(_tensor_or_constant, changed.items))):
                raise Unsupported(f"{what}: forward changes {changed.describe()}")
            self.slots.extend((changed.items, k) for k in range(len(changed.items)))
        for item in _items(frame, self.returned):
            if isinstance(item, TensorVariable):
                self.flat.append(item)
            elif not item.is_constant():
                attrs = _made_dataclass_dict(frame, item, mark.born)
                if attrs is None:
                    raise Unsupported(f"{what}: forward returns {item.describe()}")
                self.slots.extend((attrs.items, name) for name in attrs.items)
        for holder, key in self.slots:
            if isinstance(holder[key], TensorVariable) and not _among(holder[key], self.flat):
                self.flat.append(holder[key])
        return TupleVariable(list(self.flat))


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


def _requires_grad(var: Variable) -> bool:
    return isinstance(var, TensorVariable) and bool(var.fake.requires_grad)


def _items(frame: Frame, result: Variable) -> list[Variable]:
    """forward's results as apply sees them: a tuple's items, or the one result."""
    return result.unpack(frame) if isinstance(result, TupleVariable) else [result]


def _tensor_or_constant(var: Variable) -> bool:
    return isinstance(var, TensorVariable) or var.is_constant()


def _made_dataclass_dict(frame: Frame, var: Variable, born: int) -> DictVariable | None:
    """The instance `__dict__` of a dataclass object made after `born` (by forward) whose
    attributes are all tensors or constants (a dataclass of results); None for anything else."""
    if not (var.made_while_tracing() and dataclasses.is_dataclass(var.python_type())):
        return None
    attrs = var.getattr(frame, "__dict__")
    if not isinstance(attrs, DictVariable) or attrs.born <= born:
        return None
    return attrs if all(map(_tensor_or_constant, attrs.items.values())) else None


def _among(var: Variable, group: list[Variable]) -> bool:
    return any(var is other for other in group)


def _passable(var: Variable) -> bool:
    """Whether the apply node can take `var` as it is: a tensor, or a constant forward cannot
    change (not a list, dict or set)."""
    return isinstance(var, TensorVariable) or (
        var.is_constant() and not isinstance(var.as_constant(), (list, dict, set))
    )


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
