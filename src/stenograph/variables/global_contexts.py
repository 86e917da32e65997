"""`torch.inference_mode()` and `torch.autocast(...)` blocks traced into the graph.

Both change global dispatch state that fake tensors must see (autocast changes result dtypes),
so entering one while tracing enters the real context for the rest of the trace, and records
torch's own enter/exit functions as graph nodes so the compiled graph switches at the same
points. The real contexts a trace entered are listed on its `OutputGraph` (`open_contexts`);
those of a trace that stops early are closed by `close_abandoned(output)`. A graph
break inside such a block is not possible (the frame then runs eagerly).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.amp import autocast_mode
from torch.autograd import grad_mode

from ..errors import Unsupported
from .base import Variable, constant

if TYPE_CHECKING:
    from ..graph.output_graph import OutputGraph
    from ..interpreter.frame import Frame

# class -> (enter function, exit function, parameter names of the enter function)
_KINDS: dict[type, tuple[Any, Any, tuple[str, ...]]] = {
    torch.inference_mode: (grad_mode._enter_inference_mode, grad_mode._exit_inference_mode, ("mode",)),
    torch.autocast: (
        autocast_mode._enter_autocast,
        autocast_mode._exit_autocast,
        ("device_type", "dtype", "enabled", "cache_enabled"),
    ),
}
_DEFAULTS = {"mode": True, "dtype": None, "enabled": True, "cache_enabled": None}


def is_global_context_class(value: Any) -> bool:
    return value in _KINDS


def make_global_context(cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch.inference_mode(...)` / `torch.autocast(...)` called while tracing."""
    _, _, names = _KINDS[cls]
    values = dict(zip(names, args))
    values.update(kwargs)
    if set(values) - set(names) or not all(v.is_constant() for v in values.values()):
        raise Unsupported(f"{cls.__qualname__}() with non-constant or unknown arguments")
    plain = tuple(values[n].as_constant() if n in values else _DEFAULTS[n] for n in names)
    return GlobalContextVariable(cls, plain)


def close_abandoned(output: OutputGraph) -> None:
    """Exit, innermost first, the real contexts of a trace that ended inside their blocks."""
    while output.open_contexts:
        output.open_contexts.pop().__exit__(None, None, None)


class GlobalContextVariable(Variable):
    """An inference-mode or autocast context manager object, not yet entered."""

    def __init__(self, cls: type, args: tuple) -> None:
        self.cls = cls
        self.args = args
        self.real: Any = None
        self.node: Any = None

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"{self.cls.__qualname__}{self.args}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("__enter__", "__exit__"):
            return _ContextMethod(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")


class _ContextMethod(Variable):
    def __init__(self, context: GlobalContextVariable, name: str) -> None:
        self.context = context
        self.name = name

    def describe(self) -> str:
        return f"{self.context.describe()}.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        ctx = self.context
        enter, exit_, _ = _KINDS[ctx.cls]
        graph = frame.output.graph
        if self.name == "__enter__":
            ctx.real = enter(*ctx.args)
            frame.output.open_contexts.append(ctx.real)
            ctx.node = graph.create_node("call_function", enter, ctx.args, {})
            return constant(None)
        open_contexts = frame.output.open_contexts
        if ctx.real is None or not open_contexts or open_contexts[-1] is not ctx.real:
            raise Unsupported(f"{self.describe()} out of order")
        open_contexts.pop()
        exit_(ctx.real)
        graph.create_node("call_function", exit_, (ctx.node,), {})
        return constant(False)
