"""torch.optim optimizers: `optimizer.step()` traced into a graph that updates parameters and
optimizer state in place, computing what eager computes.

The optimizer's own Python (`step`, `_init_group`, the functional `adam`/`sgd`, foreach or not) is
inlined like user code. It sees a compiler (`torch.compiler.is_compiling()` is True while
tracing), which makes it skip checks that are slow to trace and group foreach tensors in one
list. What is modelled here:

- `opt.state` is a dict keyed by the parameters themselves. `opt.state[p]`, for a parameter `p`
  read from the frame, is that parameter's state dict, reached through `OptimizerStateSource`
  (its keys guarded; its tensors become graph inputs changed in place). A parameter without
  state gets a new dict, stored into `opt.state` after the graph (optimizers written in Python
  that set up their state in `step`).
- `_init_group(group, ...)` creates missing state on the first step (zeros, a step count). It
  is run for real before being traced, so the state exists and the graph is the one every later
  step uses (one compilation, as torch.compile): eager would create the same state at this point
  of the same call, from nothing a graph computes (which parameters have gradients, their
  shapes). Python changes pending in the trace could change what it sees, so it then breaks.
- `_get_value(step)`, which under a compiler hands the step count on as a tensor for the
  `capturable` formulas (float32 tensor arithmetic), reads it as a Python number, as eager does:
  an unbacked float in the graph, so the bias corrections are the same float64 arithmetic and
  the results equal eager's bit for bit. `_stack_if_compiling` leaves those numbers a list.
- Groups with `capturable`, `fused` or `differentiable` set run their whole step eagerly (the
  break's callee is not compiled, `Unsupported.eager_callee`): torch.optim skips its device
  checks for `capturable` under a compiler, a differentiable step records autograd history
  through the parameters, and fused kernels are left alone as torch.compile leaves them.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch.optim import optimizer as torch_optimizer

from ..errors import Unsupported
from ..guards.sources import AttrSource, OptimizerStateSource
from .base import Variable
from .constants import constant
from .containers import DictVariable, ListVariable
from .frame_objects import UserObjectVariable
from .functions import UserMethodVariable
from .tensor import TensorVariable
from .user_classes import UserClassVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

#: group flags whose step runs eagerly, as a whole (see the module text)
_EAGER_FLAGS = ("capturable", "fused", "differentiable")


class OptimizerClassVariable(UserClassVariable):
    """An optimizer class (`Optimizer`, `Adam`): its static and class methods are traced
    (`Optimizer._group_tensors_by_device_and_dtype`); making an optimizer is left to Python."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(f"creating a {self.value.__qualname__} optimizer inside a compiled function")


class OptimizerVariable(UserObjectVariable):
    """A `torch.optim.Optimizer` read from the frame."""

    def getattr(self, frame: Frame, name: str) -> Variable:
        pending = frame.output.side_effects.pending_attribute(self, name)
        if pending is not None or self.source is None:
            return super().getattr(frame, name)
        if name == "state":
            self._use()
            source = AttrSource(self.source, "state")
            state = self.value_object.state
            known = frame.output.known_container(state, source)
            if known is not None:
                return known
            frame.output.guards.type_match(source, state)
            return frame.output.register_container(state, OptimizerStateVariable(state, source))
        found = super().getattr(frame, name)
        if name == "param_groups" and _is_torchs_own(type(self.value_object)):
            _refuse_eager_flags(self, found)
        if name == "_init_group" and isinstance(found, UserMethodVariable):
            method = _without_compiler_wrapper(found)
            if method.fn.__globals__.get("__name__", "").startswith("torch.optim."):
                return _InitGroupVariable(self, method)  # torch's own, which only makes state
        return found


def _is_torchs_own(cls: type) -> bool:
    """One of torch.optim's optimizers, or a subclass of one (whose group flags mean what
    torch.optim makes them mean)."""
    return any(
        klass.__module__.startswith("torch.optim.") and klass is not torch_optimizer.Optimizer for klass in cls.__mro__
    )


def _refuse_eager_flags(optimizer: OptimizerVariable, groups: Variable) -> None:
    """A group with a flag of `_EAGER_FLAGS` set makes the step run eagerly; the flags of the
    others are guarded (setting one later recompiles, and then runs eagerly)."""
    if not isinstance(groups, ListVariable):
        return
    for group in groups.items:
        if not isinstance(group, DictVariable):
            continue
        for name in _EAGER_FLAGS:
            if name in group.items and group.items[name].as_constant():
                refusal = Unsupported(
                    f"{type(optimizer.value_object).__qualname__} with {name}=True: its step runs eagerly",
                    hint=f"{name}=False lets the step be captured",
                )
                refusal.eager_callee = True
                raise refusal


def _without_compiler_wrapper(method: UserMethodVariable) -> UserMethodVariable:
    """The method itself where torch.compile, once used in the process, replaced it on the class
    with a wrapper that keeps its own tracer out (it handles `_init_group` the way this module
    does); the wrapper itself is guarded as the class attribute."""
    fn = method.fn
    if fn.__globals__.get("__name__") == "torch._dynamo.eval_frame" and isinstance(
        getattr(fn, "__wrapped__", None), types.FunctionType
    ):
        return UserMethodVariable(fn.__wrapped__, method.self_var)
    return method


class _InitGroupVariable(Variable):
    """`opt._init_group`: calling it runs it for real (creating missing state), then traces it."""

    def __init__(self, optimizer: OptimizerVariable, method: UserMethodVariable) -> None:
        self.optimizer = optimizer
        self.method = method

    def describe(self) -> str:
        return self.method.describe()

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if frame.output.side_effects:
            raise Unsupported(
                f"{self.describe()} after Python changes pending in the same graph (it runs for real first)",
                hint="call optimizer.step() apart from code that changes Python objects",
            )
        real_args = [_real_argument(frame, a) for a in args]
        real_kwargs = {k: _real_argument(frame, v) for k, v in kwargs.items()}
        try:
            self.method.fn(self.optimizer.value_object, *real_args, **real_kwargs)
        except Exception as e:
            raise Unsupported(f"{self.describe()} raised {type(e).__name__}: {e}") from e
        return self.method.call(frame, args, kwargs)


def _real_argument(frame: Frame, var: Variable) -> Any:
    """The value `_init_group` is run with for a traced argument: a parameter group read from
    the frame is the real dict; a list made while tracing (filled by the call) a new empty list."""
    if isinstance(var, ListVariable) and var.made_while_tracing() and not var.items:
        return []
    if var.is_constant():
        return var.as_constant()
    real = frame.output.real_object(var) if isinstance(var, DictVariable) else None
    if real is None:
        raise Unsupported(f"optimizer _init_group called with {var.describe()}")
    return real


class OptimizerStateVariable(Variable):
    """`opt.state`: read by parameter (`opt.state[p]`, `.get(p)`, `p in opt.state`). One tracker
    per state dict in a trace. `opt.state[p]` of a parameter without state makes its empty dict,
    as the defaultdict does (an optimizer written in Python that sets up its state in `step`):
    made while tracing, filled by the traced code, stored into `opt.state` after the graph."""

    def __init__(self, state: Any, source: AttrSource) -> None:
        self.state = state
        self.source = source
        self.added: dict[int, tuple[TensorVariable, DictVariable]] = {}  # by id of the parameter

    def python_type(self) -> type:
        return type(self.state)

    def describe(self) -> str:
        return "optimizer state"

    def _param(self, frame: Frame, key: Variable) -> tuple[Any, TensorVariable]:
        param = frame.output.real_object(key) if isinstance(key, TensorVariable) else None
        if param is None or key.source is None:
            raise Unsupported(f"optimizer state looked up by {key.describe()}, not a tensor read from the frame")
        assert isinstance(key, TensorVariable)
        return param, key

    def _entry(self, frame: Frame, key: Variable) -> Variable | None:
        """The tracker of parameter `key`'s state dict, None if it has none (guarded)."""
        param, key_var = self._param(frame, key)
        if id(param) in self.added:
            return self.added[id(param)][1]
        source = OptimizerStateSource(self.source, key_var.source)
        entry = self.state.get(param)
        if entry is None:
            frame.output.guards.constant_match(source, None)
            return None
        return frame.wrap(entry, source)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        found = self._entry(frame, key)
        if found is not None:
            return found
        if getattr(self.state, "default_factory", None) is not dict:
            raise Unsupported(f"optimizer state of {key.describe()}, which it has not set up")
        param, key_var = self._param(frame, key)
        made = DictVariable({})
        self.added[id(param)] = (key_var, made)
        frame.output.side_effects.container_mutated(self)
        return made

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self._entry(frame, item) is not None

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            found = self._entry(frame, args[0])
            if found is not None:
                return found
            return args[1] if len(args) == 2 else constant(None)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(frame, args[0])
        raise Unsupported(f"method {name!r} of optimizer state")

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        return "; ".join(f"{target}[{expr(param)}] = {pin(expr(made))}" for param, made in self.added.values())


class _StepNumberVariable(Variable):
    """`torch.optim.optimizer._get_value(x)`: a step-count tensor read as a Python number
    (`.item()`, an unbacked float of the graph), anything else as it is."""

    def describe(self) -> str:
        return "torch.optim.optimizer._get_value"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.describe()} with {len(args)} arguments")
        if isinstance(args[0], TensorVariable):
            return frame.output.call("call_method", "item", [args[0]], {}, "the optimizer's step count")
        return args[0]


class _UnstackedVariable(Variable):
    """`torch.optim.optimizer._stack_if_compiling(x)`: `x`, as eager leaves it."""

    def describe(self) -> str:
        return "torch.optim.optimizer._stack_if_compiling"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.describe()} with {len(args)} arguments")
        return args[0]


_HELPERS: dict[Any, type[Variable]] = {
    torch_optimizer._get_value: _StepNumberVariable,
    torch_optimizer._stack_if_compiling: _UnstackedVariable,
}


def optimizer_helper(value: Any) -> Variable | None:
    """The tracker of one of torch.optim's helpers that behave differently under a compiler."""
    if not isinstance(value, types.FunctionType):
        return None
    kind = _HELPERS.get(value)
    return kind() if kind is not None else None
