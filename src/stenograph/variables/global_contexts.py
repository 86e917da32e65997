"""`torch.inference_mode()`, `torch.autocast(...)`, `torch._C.DisableTorchFunctionSubclass()` and
`torch.autograd.graph.disable_saved_tensors_hooks(...)` blocks traced into the graph.

They change global state (autocast changes result dtypes, which fake tensors must see), so
entering one while tracing enters the real context for the rest of the trace, and records
torch's own enter/exit functions as graph nodes so the compiled graph switches at the same
points. The contexts a trace entered and has not left are listed on its `OutputGraph`
(`open_contexts`); those of a trace that stops early are closed by `close_abandoned(output)`.

At a graph break inside such a block the graph before it leaves the contexts still open
(`close_in_graph`), the transformed code enters them for real around the eager part and leaves
them again, and the resume function's prologue enters them anew as the `with` statement would
(`resume_code.REENTERED_CONTEXT`): its trace meets the real context manager as an argument
(`wrap_global_context`), so its graph enters and exits the context where the code does.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch
from torch.amp import autocast_mode
from torch.autograd import grad_mode

from ..errors import Unsupported
from ..guards.sources import AttrSource
from ..marks import (
    enter_error_on_graph_break,
    error_on_graph_break,
    is_torch_decorator,
    leave_error_on_graph_break,
    torch_error_on_graph_break_class,
)
from .base import Variable
from .constants import constant

if TYPE_CHECKING:
    from ..graph.output_graph import OutputGraph
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


def _enter_subclass_functions_off() -> Any:
    """Enter `torch._C.DisableTorchFunctionSubclass()`: the open context, to leave it with."""
    context = torch._C.DisableTorchFunctionSubclass()
    context.__enter__()
    return context


def _exit_subclass_functions_off(context: Any) -> None:
    context.__exit__(None, None, None)


_autograd = torch._C._autograd


def _enter_saved_tensors_hooks_off(error_message: str) -> str | None:
    """Disable saved-tensor hooks (registering one raises `error_message`): the message this
    replaced, None where they were enabled."""
    previous = _autograd._saved_tensors_hooks_get_disabled_error_message()
    _autograd._saved_tensors_hooks_disable(error_message)
    return previous


def _exit_saved_tensors_hooks_off(previous: str | None) -> None:
    if previous is None:
        _autograd._saved_tensors_hooks_enable()
    else:
        _autograd._saved_tensors_hooks_disable(previous)


class SavedTensorsHooksOff(contextlib.ContextDecorator):
    """`torch.autograd.graph.disable_saved_tensors_hooks(message)` (a generator-based context
    manager, a decorator too) as a class with the same effect: what a call of torch's function
    makes while tracing, and what code rebuilt at a break inside the block enters."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message
        self._previous: str | None = None

    def _recreate_cm(self) -> SavedTensorsHooksOff:  # each decorated call enters a new one
        return SavedTensorsHooksOff(self.error_message)

    def __enter__(self) -> None:
        self._previous = _enter_saved_tensors_hooks_off(self.error_message)

    def __exit__(self, *exc_info: object) -> None:
        _exit_saved_tensors_hooks_off(self._previous)


# class -> (enter function, exit function, parameter names of the enter function)
_KINDS: dict[type, tuple[Any, Any, tuple[str, ...]]] = {
    # tensor subclasses' `__torch_function__` skipped inside (as `torch.Tensor.__torch_function__`
    # does): the ops run on the real instances when the graph runs, so the graph enters it too
    torch._C.DisableTorchFunctionSubclass: (_enter_subclass_functions_off, _exit_subclass_functions_off, ()),
    torch.inference_mode: (grad_mode._enter_inference_mode, grad_mode._exit_inference_mode, ("mode",)),
    torch.autocast: (
        autocast_mode._enter_autocast,
        autocast_mode._exit_autocast,
        ("device_type", "dtype", "enabled", "cache_enabled"),
    ),
    SavedTensorsHooksOff: (_enter_saved_tensors_hooks_off, _exit_saved_tensors_hooks_off, ("error_message",)),
}
_DEFAULTS = {"mode": True, "dtype": None, "enabled": True, "cache_enabled": None}
# where a real context object keeps the arguments of its enter function (autocast's resolved)
_ATTRIBUTES = {
    torch.inference_mode: ("mode",),
    torch.autocast: ("device", "fast_dtype", "_enabled", "_cache_enabled"),
    torch._C.DisableTorchFunctionSubclass: (),
    SavedTensorsHooksOff: ("error_message",),
}
# the graph nodes that only switch state
STATE_FUNCTIONS = frozenset(f for enter, exit_, _ in _KINDS.values() for f in (enter, exit_))

# `error_on_graph_break(flag)` blocks (stenograph's class, or torch._dynamo's once loaded): a
# setting of the compiler, not of the program. Entered for real while tracing, so that a break
# met inside is judged by it; nothing is recorded in the graph.
_ERROR_ON_BREAK = (enter_error_on_graph_break, leave_error_on_graph_break, ("error_on_graph_break",))
_KINDS[error_on_graph_break] = _ERROR_ON_BREAK
_ATTRIBUTES[error_on_graph_break] = ("error_on_graph_break",)


def _spec(kind: type) -> tuple[Any, Any, tuple[str, ...]]:
    return _KINDS.get(kind, _ERROR_ON_BREAK)  # the one kind not in the table: torch's class


def is_global_context_class(value: Any) -> bool:
    return value in _KINDS or (value is not None and value is torch_error_on_graph_break_class())


def _kind_of(cls: type) -> type | None:
    """The modelled class `cls` is or derives from (`torch.cpu.amp.autocast` is an autocast)."""
    torch_class = torch_error_on_graph_break_class()
    if torch_class is not None and issubclass(cls, torch_class):
        return torch_class
    return next((kind for kind in _KINDS if issubclass(cls, kind)), None)


def is_global_context_object(value: Any) -> bool:
    return _kind_of(type(value)) is not None


def make_global_context(cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch.inference_mode(...)` / `torch.autocast(...)` called while tracing."""
    _, _, names = _spec(cls)
    values = dict(zip(names, args))
    values.update(kwargs)
    if set(values) - set(names) or len(args) > len(names) or not all(v.is_constant() for v in values.values()):
        raise Unsupported(f"{cls.__qualname__}() with non-constant or unknown arguments")
    if any(n not in values and n not in _DEFAULTS for n in names):
        raise Unsupported(f"{cls.__qualname__}() without its arguments")  # eager raises TypeError
    plain = tuple(values[n].as_constant() if n in values else _DEFAULTS[n] for n in names)
    if _spec(cls) is _ERROR_ON_BREAK and not isinstance(plain[0], bool):
        # torch's class takes anything and torch.compile refuses it while compiling: an error
        raise TypeError(f"error_on_graph_break() takes a bool, got {type(plain[0]).__qualname__}")
    return GlobalContextVariable(cls, plain)


def wrap_global_context(frame: Frame, value: Any, source: Source) -> Variable:
    """A real inference-mode or autocast object read from the frame (the manager a resume
    function enters, the one torch's decorators keep in a closure, a global), as the context it
    enters: guarded on its class and on the arguments it enters with."""
    kind = _kind_of(type(value))
    assert kind is not None
    guards = frame.output.guards
    guards.type_match(source, value)
    args = []
    for name in _ATTRIBUTES.get(kind, _ERROR_ON_BREAK[2]):
        attribute = getattr(value, name)
        guards.constant_match(AttrSource(source, name), attribute)
        args.append(attribute)
    return GlobalContextVariable(type(value), tuple(args), source)


def close_abandoned(output: OutputGraph) -> None:
    """Exit, innermost first, the real contexts of a trace that ended inside their blocks."""
    while output.open_contexts:
        context = output.open_contexts.pop()
        _spec(context.kind)[1](context.real)


def close_in_graph(output: OutputGraph) -> None:
    """End a graph cut by a graph break in the state it started in: leave the contexts still
    open, innermost first, in the graph and in the trace (the break re-enters them for real)."""
    while output.open_contexts:
        output.open_contexts[-1].exit(output)


class GlobalContextVariable(Variable):
    """An inference-mode or autocast context manager object."""

    def __init__(self, cls: type, args: tuple, source: Source | None = None) -> None:
        kind = _kind_of(cls)
        assert kind is not None
        self.cls = cls
        self.kind = kind
        self.args = args
        self.source = source
        self.real: Any = None  # what the enter function returned while tracing (an open context)
        self.node: Any = None  # its graph node
        self.grad_before = False  # the grad mode it was entered from (inference mode sets it)

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"{self.cls.__qualname__}{self.args}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("__enter__", "__exit__"):
            return GlobalContextMethod(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        """Used as a decorator (`@torch.inference_mode()` on a nested function): the function,
        run inside a context like this one each time it is called."""
        if len(args) != 1 or kwargs or self.kind is torch._C.DisableTorchFunctionSubclass:
            raise Unsupported(f"calling {self.describe()} with other than one function")
        return ContextDecoratedFunctionVariable(self, args[0])

    def reconstruct(self, rebuild: Any) -> str:
        """A manager entering the same context (one object per tracker, `with ... as c` keeps it)."""

        def render() -> str:
            cls = rebuild.writer.bind(self.kind, "cls")
            return f"{cls}({', '.join(rebuild.constant(a) for a in self.args)})"

        return rebuild.build_once(self, render)

    def enter(self, output: OutputGraph) -> None:
        enter, _, _ = _spec(self.kind)
        self.grad_before = torch.is_grad_enabled()
        self.real = enter(*self.args)
        output.open_contexts.append(self)
        if enter is not enter_error_on_graph_break:
            self.node = output.graph.create_node("call_function", enter, self.args, {})

    def exit(self, output: OutputGraph) -> None:
        _, exit_, _ = _spec(self.kind)
        output.open_contexts.pop()
        exit_(self.real)
        if exit_ is not leave_error_on_graph_break:
            output.graph.create_node("call_function", exit_, (self.node,), {})


class ContextDecoratedFunctionVariable(Variable):
    """A function decorated by one of this module's contexts: each call is traced inside a new
    context with the same arguments, entered and left in the graph around it."""

    def __init__(self, context: GlobalContextVariable, fn: Variable) -> None:
        self.context = context
        self.fn = fn

    def describe(self) -> str:
        return f"{self.fn.describe()} decorated by {self.context.describe()}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        context = GlobalContextVariable(self.context.cls, self.context.args)
        context.enter(frame.output)
        result = self.fn.call(frame, args, kwargs)
        context.exit(frame.output)  # a break inside leaves it open: the trace closes it
        return result

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.context)}({rebuild.expr(self.fn)})"


class GlobalContextMethod(Variable):
    """`__enter__` or `__exit__` of a `GlobalContextVariable` (a `with` block keeps the bound
    `__exit__` on the stack)."""

    def __init__(self, context: GlobalContextVariable, name: str) -> None:
        self.context = context
        self.name = name
        self.called = False  # a `with` block's exception exit keeps it on the stack after the call

    def describe(self) -> str:
        return f"{self.context.describe()}.{self.name}"

    def is_open_exit(self, output: OutputGraph) -> bool:
        """The `__exit__` of a context the trace is inside."""
        return self.name == "__exit__" and any(c is self.context for c in output.open_contexts)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        ctx = self.context
        output = frame.output
        self.called = True
        if self.name == "__enter__":
            ctx.enter(output)
            return ctx if ctx.kind is torch.autocast else constant(None)  # autocast's returns itself
        if not output.open_contexts or output.open_contexts[-1] is not ctx:
            raise Unsupported(f"{self.describe()} out of order")
        ctx.exit(output)
        return constant(False)


class ErrorOnBreakFactoryVariable(Variable):
    """`error_on_graph_break` (stenograph's class, torch's class or torch's function making one)
    called while tracing: the context object."""

    def __init__(self, fn: Any, kind: type) -> None:
        self.fn = fn
        self.value_object = fn
        self.kind = kind

    def describe(self) -> str:
        return "error_on_graph_break"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return make_global_context(self.kind, args, kwargs)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


class ErrorOnBreakFunctionVariable(Variable):
    """A function decorated by stenograph's `error_on_graph_break(flag)`: traced inside the
    setting, as the decorator's wrapper runs it."""

    def __init__(self, wrapper: Any, context: error_on_graph_break) -> None:
        self.wrapper = wrapper
        self.value_object = wrapper
        self.context = context

    def describe(self) -> str:
        return f"function {self.wrapper.__qualname__} under error_on_graph_break({self.context.error_on_graph_break})"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        context = GlobalContextVariable(error_on_graph_break, (self.context.error_on_graph_break,))
        context.enter(frame.output)
        result = frame.wrap(self.wrapper.__wrapped__, None).call(frame, args, kwargs)
        context.exit(frame.output)  # a break inside leaves it open: the trace closes it
        return result

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.wrapper, "fn")


def error_on_break_factory(value: Any) -> Variable | None:
    """The tracker of `value` if it makes `error_on_graph_break` contexts (or is a function its
    decorator made), else None."""
    context = getattr(value, "__stenograph_error_on_break__", None)
    if isinstance(context, error_on_graph_break):
        return ErrorOnBreakFunctionVariable(value, context)
    if value is error_on_graph_break:
        return ErrorOnBreakFactoryVariable(value, value)
    torch_class = torch_error_on_graph_break_class()
    if torch_class is None:
        return None
    if value is torch_class or is_torch_decorator(value, "error_on_graph_break"):
        return ErrorOnBreakFactoryVariable(value, torch_class)
    return None
