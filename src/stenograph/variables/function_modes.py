"""TorchFunctionModes with handlers of their own, traced: each handler inlined where eager calls it.

Eagerly, while such a mode is on torch's function-mode stack, every torch function, tensor
method, operator, indexing and attribute read on a tensor first calls the top mode's
`__torch_function__(func, types, args, kwargs)`. That mode is off the stack while its handler
runs, so the handler's own `func(*args, **kwargs)` reaches the mode below it, or the operation.
A compile takes these modes off the real stack (`function_mode_stack`); the trace calls the
handler instead, at each of those operations (`dispatch`), with the modes from the handler's up
hidden meanwhile (`TracedModes.visible`). The graph then holds what the handlers did.

What the handler is given is what eager gives it. The operation is first run on the arguments'
fake values under a probe mode, which records the `func`, `types`, `args` and `kwargs` torch
passes and stops the operation there. Operations whose handler calls the trace does not
reproduce (`len()`, iteration, `in`, builtins over tensors, writes to a tensor's properties)
break the graph under such a mode (`refuse_unrouted`), and run eagerly, seen by the mode.

The traced code may change the stack: `with Mode():`, torch's `_push_on_torch_function_stack` /
`_pop_torch_function_stack`, `torch.set_default_device`. The trace keeps the stack as the code
leaves it (`TracedModes`) and answers `_len_torch_function_stack` and `_get_function_stack_at`
from it; the changes are replayed on torch's stack after the graph (`SideEffects`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._device
from torch.overrides import TorchFunctionMode, get_ignored_functions

from .. import function_mode_stack
from ..errors import Unsupported
from ..guards.sources import FixedObjectSource, FunctionModeSource
from .base import Variable
from .constants import ConstantVariable, constant
from .containers import DictVariable, ListVariable, TupleVariable
from .symbolic import GraphValueVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# what torch passes a handler besides tensors and containers, kept as constants
_CONSTANT_TYPES = (
    bool,
    int,
    float,
    complex,
    str,
    type(None),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)


class _Seen(Exception):
    """The probe's stop: what torch passed the top mode's handler."""

    def __init__(self, func: Any, kinds: tuple, args: tuple, kwargs: dict) -> None:
        super().__init__()
        self.func, self.kinds, self.args, self.kwargs = func, kinds, args, kwargs


class _Probe(TorchFunctionMode):
    def __torch_function__(self, func: Any, kinds: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        raise _Seen(func, tuple(kinds), tuple(args), dict(kwargs or {}))


@functools.cache
def _ignored() -> frozenset:
    # torch's list of functions a tensor argument cannot override, less the factories (which
    # take no tensor, but a mode sees them: a device context gives them their device)
    return frozenset(get_ignored_functions()) - torch.utils._device._device_constructors()


def _never_shown_to_modes(operation: Any) -> bool:
    """One of torch's functions that never consult a mode (state readers and setters): not
    probed, which would run it."""
    try:
        return operation in _ignored()
    except TypeError:  # unhashable: not one of them
        return False


@dataclass
class _Entry:
    """A mode on the traced stack: one of the program's at the frame's entry (`index` on that
    stack), or one the traced code pushed (its `tracker`)."""

    kind: str  # function_mode_stack.DEVICE, INERT or HANDLER
    index: int | None = None
    tracker: Variable | None = None  # None for a device context `torch.set_default_device` made


class TracedModes:
    """The function-mode stack as the traced code has left it, bottom first."""

    def __init__(self) -> None:
        program = function_mode_stack.program_stack()
        self.entries = [_Entry(function_mode_stack.kind(mode), index=i) for i, mode in enumerate(program)]
        self.visible: int | None = None  # while a handler is traced: how many entries lie below its mode
        # the default device factories get after `torch.set_default_device` in the trace
        # (None: the program's stack decides, as it does when the graph runs)
        self.default_device: torch.device | None = None
        self.device_changed = False


def traced_modes(frame: Frame) -> TracedModes:
    modes = frame.output.function_modes
    if modes is None:
        modes = frame.output.function_modes = TracedModes()
    return modes


def live_handler(frame: Frame) -> _Entry | None:
    """The mode whose handler eager would call now, or None: the topmost handler mode the trace
    sees (inert modes and device contexts above it only pass the call on)."""
    modes = traced_modes(frame)
    if not modes.entries:  # the common case, met at every tensor operation of every trace
        return None
    visible = modes.entries if modes.visible is None else modes.entries[: modes.visible]
    live = next((entry for entry in reversed(visible) if entry.kind == function_mode_stack.HANDLER), None)
    if live is None or torch._C._is_torch_function_all_disabled():
        return None
    return live


def refuse_unrouted(frame: Frame, what: str) -> None:
    """Break the graph at an operation on a tensor whose handler call the trace does not follow,
    where a handler mode would see it."""
    if live_handler(frame) is not None:
        raise Unsupported(f"{what} under a TorchFunctionMode with its own __torch_function__ (it runs eagerly)")


def dispatch(frame: Frame, operation: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable | None:
    """What the live handler answers for `operation(*args, **kwargs)`, traced; None where no
    handler mode sees the operation (none is live, or torch does not consult modes for it)."""
    entry = live_handler(frame)
    if entry is None or _never_shown_to_modes(operation):
        return None
    known: dict[int, Variable] = {}
    stand_ins = [_stand_in(a, known) for a in args]
    kw_stand_ins = {k: _stand_in(v, known) for k, v in kwargs.items()}
    seen = _probe(frame, operation, stand_ins, kw_stand_ins)
    if seen is None:
        return None
    handler = _tracker(frame, entry).getattr(frame, "__torch_function__")
    func = frame.wrap(seen.func, FixedObjectSource(seen.func, describe_function(seen.func)))
    kinds = TupleVariable([frame.wrap(cls, None) for cls in seen.kinds])
    given = TupleVariable([_tracker_of(a, known) for a in seen.args])
    given_kwargs = DictVariable({k: _tracker_of(v, known) for k, v in seen.kwargs.items()})
    modes = traced_modes(frame)
    outer = modes.visible
    modes.visible = next(i for i, candidate in enumerate(modes.entries) if candidate is entry)
    try:
        answer = handler.call(frame, [func, kinds, given, given_kwargs], {})
    finally:
        modes.visible = outer
    if answer.is_constant() and answer.as_constant() is NotImplemented:
        # torch then asks tensor subclasses' handlers, or raises its TypeError: run eagerly
        raise Unsupported(f"a TorchFunctionMode's handler answered NotImplemented for {describe_function(seen.func)}")
    return answer


def describe_function(func: Any) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


def with_default_device(frame: Frame, fn: Any, kwargs: dict[str, Variable]) -> dict[str, Variable]:
    """A factory's arguments, with the device `torch.set_default_device` gave in the trace made
    explicit: the graph runs before that call is replayed on the real stack."""
    modes = frame.output.function_modes
    if modes is None or not modes.device_changed or fn not in torch.utils._device._device_constructors():
        return kwargs
    given = kwargs.get("device")
    if given is not None and not (given.is_constant() and given.as_constant() is None):
        return kwargs
    return {**kwargs, "device": constant(modes.default_device or torch.device("cpu"))}


# the functions of torch's C stack the trace answers from its own stack
STACK_FUNCTIONS = frozenset({
    torch._C._len_torch_function_stack,
    torch._C._get_function_stack_at,
    torch._C._push_on_torch_function_stack,
    torch._C._pop_torch_function_stack,
})  # fmt: skip


def stack_call(frame: Frame, fn: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`fn` (one of `STACK_FUNCTIONS`) on the traced stack; a change is replayed after the graph."""
    modes = traced_modes(frame)
    if modes.visible is not None or kwargs:
        raise Unsupported(f"{fn.__name__}() inside a TorchFunctionMode's handler")
    if fn is torch._C._len_torch_function_stack and not args:
        return constant(len(modes.entries))
    if fn is torch._C._get_function_stack_at and len(args) == 1 and args[0].is_constant():
        at = args[0].as_constant()
        if not isinstance(at, int) or not 0 <= at < len(modes.entries):
            raise Unsupported(f"torch._C._get_function_stack_at({at!r}) past the stack's end")
        return _tracker(frame, modes.entries[at])
    if fn is torch._C._pop_torch_function_stack and not args:
        if not modes.entries:
            raise Unsupported("Attempted to pop from empty torch function mode stack")
        if modes.entries[-1].kind == function_mode_stack.DEVICE:
            raise Unsupported("popping a torch.device context off the function-mode stack")
        popped = _tracker(frame, modes.entries.pop())
        frame.output.side_effects.function_modes_changed(("pop",))
        return popped
    if fn is torch._C._push_on_torch_function_stack and len(args) == 1:
        mode = args[0]
        cls = mode.python_type()
        if not issubclass(cls, TorchFunctionMode) or function_mode_stack.class_kind(cls) == function_mode_stack.DEVICE:
            raise Unsupported(f"pushing {mode.describe()} on the function-mode stack")
        modes.entries.append(_Entry(function_mode_stack.class_kind(cls), tracker=mode))
        frame.output.side_effects.function_modes_changed(("push", mode))
        return constant(None)
    raise Unsupported(f"{fn.__name__}() with these arguments")


def set_default_device(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch.set_default_device(device)`: the context it set before leaves the bottom of the
    stack, a new one for `device` (unless None) goes there; replayed after the graph."""
    given = [*args, *kwargs.values()]
    if len(given) != 1 or set(kwargs) - {"device"} or not given[0].is_constant():
        raise Unsupported("torch.set_default_device() of a value that is not a constant device")
    device = given[0].as_constant()
    try:
        device = None if device is None else torch.device(device)
    except (TypeError, RuntimeError) as e:
        raise Unsupported(f"torch.set_default_device({device!r}) raises {type(e).__name__}") from None
    modes = traced_modes(frame)
    if modes.visible is not None:
        raise Unsupported("torch.set_default_device() inside a TorchFunctionMode's handler")
    frame.output.guards.state_query(default_device_set, "torch's default device set", default_device_set())
    set_before = modes.default_device is not None if modes.device_changed else default_device_set()
    devices = [entry for entry in modes.entries if entry.kind == function_mode_stack.DEVICE]
    if set_before and (not devices or devices[0] is not modes.entries[0] or len(devices) > 1):
        raise Unsupported("torch.set_default_device() while another torch.device context is active")
    if not set_before and devices:
        raise Unsupported("torch.set_default_device() inside a `with torch.device(...)` block")
    if set_before:
        modes.entries.pop(0)
    if device is not None:
        modes.entries.insert(0, _Entry(function_mode_stack.DEVICE))
    modes.default_device, modes.device_changed = device, True
    frame.output.side_effects.function_modes_changed(("default_device", constant(device)))
    return constant(None)


def default_device_set() -> bool:
    """Whether `torch.set_default_device` set a device (its context is the stack's bottom one)."""
    return getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not None


def _probe(frame: Frame, operation: Any, args: list[Any], kwargs: dict[str, Any]) -> _Seen | None:
    """What torch hands the top mode for the operation, or None where it hands it nothing."""
    try:
        with frame.output.fake_mode, _Probe():
            operation(*args, **kwargs)
    except _Seen as seen:
        return seen
    except Exception:  # noqa: BLE001 - rejected before any mode is consulted: the trace reports it
        return None
    return None


def _stand_in(var: Variable, known: dict[int, Variable]) -> Any:
    """The Python value the probe passes for `var` (fake for a tensor), remembered by identity."""
    if isinstance(var, ConstantVariable):
        return var.value
    if isinstance(var, GraphValueVariable):
        value = var.fake
    elif isinstance(var, (ListVariable, TupleVariable)):
        items = [_stand_in(item, known) for item in var.items]
        value = items if isinstance(var, ListVariable) else tuple(items)
    else:
        raise Unsupported(f"{var.describe()} passed to a tensor operation under a TorchFunctionMode's handler")
    known[id(value)] = var
    return value


def _tracker_of(value: Any, known: dict[int, Variable]) -> Variable:
    """The tracker of a value torch passes the handler: an argument it was given, or a constant."""
    if id(value) in known:
        return known[id(value)]
    if isinstance(value, _CONSTANT_TYPES) or value is Ellipsis:
        return constant(value)
    if isinstance(value, slice) and all(
        isinstance(part, (int, type(None))) for part in (value.start, value.stop, value.step)
    ):
        return constant(value)
    if isinstance(value, (list, tuple)):
        items = [_tracker_of(item, known) for item in value]
        return ListVariable(items) if isinstance(value, list) else TupleVariable(items)
    raise Unsupported(f"{type(value).__name__} handed to a TorchFunctionMode's handler")


def _tracker(frame: Frame, entry: _Entry) -> Variable:
    """The tracker of a mode on the traced stack: one per mode of the program's stack, so its
    handler's writes to it are seen by its later calls."""
    if entry.tracker is None:
        if entry.index is None:  # a context `set_default_device` made: the trace reads nothing of it
            raise Unsupported("reading the torch.device context torch.set_default_device() made in the frame")
        mode = function_mode_stack.program_stack()[entry.index]
        entry.tracker = frame.wrap(mode, FunctionModeSource(entry.index))
    return entry.tracker
