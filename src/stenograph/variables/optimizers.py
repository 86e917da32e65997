"""torch.optim optimizers: `optimizer.step()` traced into a graph that updates parameters and
optimizer state in place.

The optimizer's own Python (`step`, `_init_group`, the functional `adam`/`sgd`, foreach or not) is
inlined like user code; three things about an optimizer object are modelled here:

- `opt.state` is a dict keyed by the parameters themselves. `opt.state[p]`, for a parameter `p`
  read from the frame, is that parameter's state dict, reached through `OptimizerStateSource`
  (its keys guarded; its tensors become graph inputs changed in place).
- `_init_group(group, ...)` creates missing state on the first step (zeros, a step count). It
  is run for real before being traced, so the state exists and the graph is the one every later
  step uses (one compilation, as torch.compile): eager would create the same state at this point
  of the same call, from nothing a graph computes (which parameters have gradients, their
  shapes). Python changes pending in the trace could change what it sees, so it then breaks.
- `param_groups` are read with `capturable` True where a group has the flag: the capturable
  formulas keep the bias corrections as tensors, where the others turn the step count into a
  Python number (`.item()`), which a graph cannot do. Only the trace sees the flag; the groups
  and the state are left as they are. Results equal eager's within float rounding (torch.compile
  traces the same formulas).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from ..guards.sources import AttrSource, OptimizerStateSource
from .base import ConstantVariable, Variable, constant
from .containers import DictVariable, ListVariable
from .frame_objects import UserObjectVariable
from .functions import UserMethodVariable
from .tensor import TensorVariable
from .user_classes import UserClassVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


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
            frame.output.guards.type_match(source, state)
            return OptimizerStateVariable(state, source)
        found = super().getattr(frame, name)
        if name == "param_groups":
            _view_groups(frame, self, found)
        if name == "_init_group" and isinstance(found, UserMethodVariable):
            return _InitGroupVariable(self, found)
        return found


#: group flags whose step runs eagerly, as a whole: torch.optim skips some of its checks when it
#: sees a compiler (the devices `capturable` supports), a differentiable step records autograd
#: history through the parameters, and fused kernels are left alone, as torch.compile leaves them
_EAGER_FLAGS = ("capturable", "fused", "differentiable")


def _view_groups(frame: Frame, optimizer: OptimizerVariable, groups: Variable) -> None:
    """Check the groups' flags (each guarded) and, when torch.optim's own code reads the groups,
    give it `capturable` True (see the module text). The view replaces the flag's tracker without
    recording a mutation; being marked, it is applied once per group tracker."""
    if not isinstance(groups, ListVariable):
        return
    for group in groups.items:
        if not isinstance(group, DictVariable) or isinstance(group.items.get("capturable"), _CapturableView):
            continue
        for name in _EAGER_FLAGS:
            if name in group.items and group.items[name].as_constant():
                refusal = Unsupported(
                    f"{type(optimizer.value_object).__qualname__} with {name}=True: its step runs eagerly",
                    hint=f"{name}=False lets the step be captured",
                )
                refusal.eager_callee = True
                raise refusal
        flag = group.items.get("capturable")
        if flag is not None and frame.f_globals.get("__name__", "").startswith("torch.optim."):
            group.items["capturable"] = _CapturableView(True, flag.source)


class _CapturableView(ConstantVariable):
    """`group["capturable"]` as the optimizer's traced step sees it. Rebuilt through its source
    (the real flag): a changed group written back, or a value crossing a graph break, is the
    user's own."""


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
    """`opt.state`: read by parameter (`opt.state[p]`, `.get(p)`, `p in opt.state`)."""

    def __init__(self, state: Any, source: AttrSource) -> None:
        self.state = state
        self.source = source

    def python_type(self) -> type:
        return type(self.state)

    def describe(self) -> str:
        return "optimizer state"

    def _entry(self, frame: Frame, key: Variable) -> tuple[Any, OptimizerStateSource]:
        """The real state dict of the parameter `key` (None if it has none) and its source."""
        param = frame.output.real_object(key) if isinstance(key, TensorVariable) else None
        if param is None or key.source is None:
            raise Unsupported(f"optimizer state looked up by {key.describe()}, not a tensor read from the frame")
        return self.state.get(param), OptimizerStateSource(self.source, key.source)

    def _present(self, frame: Frame, key: Variable) -> Variable | None:
        # cycle: variables.builder imports this module at module level
        from .builder import wrap

        entry, source = self._entry(frame, key)
        if entry is None:
            frame.output.guards.constant_match(source, None)
            return None
        return wrap(frame, entry, source)

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        found = self._present(frame, key)
        if found is None:
            raise Unsupported(f"optimizer state of {key.describe()}, which it has not set up")
        return found

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self._present(frame, item) is not None

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            found = self._present(frame, args[0])
            if found is not None:
                return found
            return args[1] if len(args) == 2 else constant(None)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(frame, args[0])
        raise Unsupported(f"method {name!r} of optimizer state")
