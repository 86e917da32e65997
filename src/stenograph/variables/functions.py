"""Trackers for callables: user Python functions (inlined), graph operations, bound methods, and
the base of the functions a handler table models (`HandledFunctionVariable`, `handler_registry`:
builtins, standard-library functions, collectives)."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import torch

from .. import torch_flags, torch_state
from ..errors import BreakKind, ForbiddenCall, FullgraphBreak, Unsupported
from ..guards.sources import AttrSource, FixedObjectSource
from ..marks import (
    Substitute,
    disabled_reason,
    graph_break,
    is_allowed_in_graph,
    is_compile_entry,
    is_constant_result,
    is_disabled,
    is_exporting,
    is_leaf_function,
    is_nonstrict_trace,
    is_torch_disabled,
    torch_disables_recursively,
)
from ..shapes.fake import specialised_size
from . import function_modes, nonstrict_calls, numpy_arrays
from .base import Variable
from .cells import LazyValue, RealCellVariable
from .constants import ConstantVariable, constant, name_attribute
from .containers import DictVariable, ListVariable, SizeVariable, TupleVariable
from .contexts import grad_mode_class, make_grad_context
from .double_backward import creates_graph
from .exceptions import raise_new, raise_python_error
from .global_contexts import is_global_context_class, make_global_context
from .new_parameters import make_parameter
from .numpy_arrays import NdarrayVariable
from .profiler_ranges import (
    inside_profile,
    is_profile_class,
    is_record_function_class,
    make_profile,
    make_record_function,
)
from .symbolic import GraphValueVariable, SymNodeVariable
from .tensor import TensorVariable
from .tensor_effects import refuse_effect
from .tensor_literals import tensor_of_graph_values
from .trace_rules import (
    LEGACY_TENSOR_CONSTRUCTORS,
    is_frozen_dataclass,
    is_literal,
    is_python_state_reader,
    is_state_reader,
    is_user_class,
    trace_constant,
    untraced_library,
)

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


class UserFunctionVariable(Variable):
    """A Python function whose bytecode is inlined into the current graph when called."""

    def __init__(self, fn: types.FunctionType, source: Source | None = None) -> None:
        self.fn = fn
        self.value_object = fn
        self.source = source

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"

    def truth(self, frame: Frame) -> bool:
        return True  # functions define neither __bool__ nor __len__

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if is_disabled(self.fn):
            why = disabled_reason(self.fn)
            mark = "stenograph.disable"
            if is_torch_disabled(self.fn):
                # torch's words for it (recursive: its callees run eagerly too)
                mark = "torch.compiler.disable (Skip calling `torch.compiler.disable()`d function)"
                if not torch_disables_recursively(self.fn):
                    mark = "torch._dynamo.disable(recursive=False)"
            raise Unsupported(
                f"call to {self.fn.__qualname__}, which is marked {mark}" + (f": {why}" if why else ""),
                hint="disabled functions run eagerly",
                kind=BreakKind.UNTRACED_CALL,
            )
        if is_compile_entry(self.fn) and args and isinstance(args[0], _TRACED_CALLABLES):
            return args[0]  # `compile(fn, ...)` inside a compiled function: fn, traced where it is called
        if is_nonstrict_trace(self.fn) or is_leaf_function(self.fn):
            return nonstrict_calls.call(frame, self.fn, args, kwargs, real_constants=not is_leaf_function(self.fn))
        if is_python_state_reader(self.fn) and not args and not kwargs:
            value = self.fn()
            frame.output.guards.state_query(self.fn, f"{self.fn.__module__}.{self.fn.__qualname__}", value)
            return constant(value)
        if self.fn is torch.set_default_device:
            return function_modes.set_default_device(frame, args, kwargs)
        refuse_untraced_library(self.fn, args, kwargs)
        if is_constant_result(self.fn):
            return _constant_result(frame, self.fn, args, kwargs)
        return frame.inline_call(self.fn, args, kwargs, closure=None, fn_source=self.source)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__code__", "__defaults__", "__kwdefaults__"):
            return ConstantVariable(getattr(self.fn, name))
        if name == "__class__":
            return constant(types.FunctionType)
        if name in getattr(self.fn, "__dict__", {}) or name in _READ_THROUGH:
            # function attributes (`__wrapped__`, flags) and the mutable ones `functools.wraps` copies
            source = AttrSource(self.source, name) if self.source is not None else None
            return frame.wrap(getattr(self.fn, name), source)
        return super().getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


# a function's attributes that are containers, read through their source
_READ_THROUGH = frozenset({"__dict__", "__annotations__", "__annotate__", "__type_params__"})


def _constant_result(
    frame: Frame, fn: types.FunctionType, args: list[Variable], kwargs: dict[str, Variable]
) -> Variable:
    """A call of a function marked `assume_constant_result`: run it now, once, with the real
    arguments (a tensor's value in this call, the graph so far run on the call's inputs, as
    torch does); its result is a constant of the graph and is not guarded (as in torch)."""
    name = fn.__qualname__
    graph_values: dict[int, Variable] = {}  # id of a real value passed -> its tracker

    def real(arg: Variable) -> Any:
        if arg.is_constant():
            return arg.as_constant()
        if isinstance(arg, GraphValueVariable):
            value = frame.output.real_value(arg)
            graph_values[id(value)] = arg
            return value
        if arg.value_object is not None and arg.source is not None:
            frame.output.guards.id_match(arg.source, arg.value_object)
            return arg.value_object
        raise Unsupported(
            f"argument {arg.describe()} of {name} (marked assume_constant_result) is not a constant",
            hint="pass Python constants or objects read from the frame",
        )

    values = [real(a) for a in args]
    keywords = {k: real(v) for k, v in kwargs.items()}
    return _result_tracker(frame, name, fn(*values, **keywords), graph_values)


def _result_tracker(frame: Frame, name: str, result: Any, graph_values: dict[int, Variable]) -> Variable:
    """The constant an `assume_constant_result` call gave, as the graph holds it: numbers and
    other literals, tensors (held by the compiled code), and tuples, lists and dicts of them."""
    if type(result) is torch.Tensor:
        given_back = graph_values.get(id(result))
        if given_back is not None:  # `return x`
            if not is_exporting():
                return given_back  # torch.compile's graph goes on reading the argument
            result = result.detach().clone()  # torch's export stores its value now
        # the tensor itself is a graph input, held by the compiled code (always this object)
        return frame.output.tensor_input(result, FixedObjectSource(result, f"result of {name}"))
    if is_literal(result):
        return constant(result)
    if type(result) in (list, dict) and not is_exporting():
        # possibly an object the program holds (`return self.cache`): the tracker of that very
        # object, so that changes to it are changes to it, as eagerly
        return frame.wrap(result, FixedObjectSource(result, f"result of {name}"))
    if type(result) in (tuple, list):
        items = [_result_tracker(frame, name, item, graph_values) for item in result]
        return TupleVariable(items) if type(result) is tuple else ListVariable(items)
    if type(result) is dict and all(is_literal(key) for key in result):
        # export's graph holds the values of the call it traced, as torch's
        return DictVariable({key: _result_tracker(frame, name, v, graph_values) for key, v in result.items()})
    raise Unsupported(
        f"{name} (marked assume_constant_result) returned {type(result).__qualname__}, "
        "which cannot be a constant of the graph",
        hint="return tensors, numbers, strings, bools, None, dtypes, devices, or tuples, lists or dicts of them",
    )


class FullgraphFunctionVariable(UserFunctionVariable):
    """A function compiled with `fullgraph=True`, called from compiled code: inlined, and a graph
    break inside it is an error (`FullgraphBreak`) whatever the caller's fullgraph."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        try:
            return super().call(frame, args, kwargs)
        except FullgraphBreak:
            raise
        except Unsupported as e:
            raise FullgraphBreak(
                f"{e.reason}, inside {self.fn.__qualname__}, compiled with fullgraph=True",
                location=e.location,
                source_line=e.source_line,
                hint="a function compiled with fullgraph=True must be one graph wherever it is called from",
                user_stack=e.user_stack,
                kind=e.kind,
            ) from e


class MarkedFunctionVariable(Variable):
    """A function the user marked (disallowed, substituted, folded): what its call does is the
    subclass's; the function itself is rebuilt by binding the object."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.value_object = fn

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"function {getattr(self.fn, '__qualname__', self.fn)}"

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


class CompilerWrapperVariable(MarkedFunctionVariable):
    """A wrapper that only changes how compiled code runs inside it (`stenograph.run(f)`,
    torch._dynamo's compile and `run()` wrappers): a traced call inlines the function it wraps,
    as torch.compile does. Where that function breaks the graph, the call runs at the break
    through the wrapper itself (rebuilt by binding it), which then applies to the eager part."""

    def __init__(self, fn: Any, inner: types.FunctionType) -> None:
        super().__init__(fn)
        self.inner = inner

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return UserFunctionVariable(self.inner).call(frame, args, kwargs)


class _MarkerCallVariable(MarkedFunctionVariable):
    """A call of one of torch._dynamo's markers (`skip_frame(msg)`, `step_unsupported(msg)`): a
    graph break naming it and its message, with the `Unsupported` flag (`effect`) saying what
    then runs eagerly."""

    marker = ""
    effect = ""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        message = (args[0] if args else kwargs.get("msg", constant(""))).as_constant()
        refusal = Unsupported(f"{self.marker}(){f': {message}' if message else ''}", kind=BreakKind.EXPLICIT)
        setattr(refusal, self.effect, True)
        raise refusal


class SkipFrameVariable(_MarkerCallVariable):
    """`torch._dynamo.skip_frame(msg)`: the frame calling it runs eagerly, as a whole (no graph
    before it, no resume after), as torch.compile skips it; functions it calls are compiled."""

    marker, effect = "skip_frame", "whole_frame"


class StepUnsupportedVariable(_MarkerCallVariable):
    """`torch._dynamo.step_unsupported()`: the graph traced so far is compiled, and the rest of
    the frame runs as plain Python (no resume function is compiled), as torch.compile does."""

    marker, effect = "step_unsupported", "rest_eager"


class DisallowedCallVariable(MarkedFunctionVariable):
    """A function marked `disallow_in_graph` (stenograph's or torch's): each call is a graph
    break, run eagerly."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(
            f"call to {getattr(self.fn, '__name__', self.fn)}, which is marked disallow_in_graph",
            hint="it runs eagerly between graphs",
            kind=BreakKind.UNTRACED_CALL,
        )


class ForbiddenCallVariable(MarkedFunctionVariable):
    """A callable marked `forbid_in_graph` (stenograph's or torch's, such as the functions that
    set the stance): a traced call of it is the program's error, raised to the caller as
    torch.compile raises it, not a graph break."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise ForbiddenCall(f"Attempt to trace forbidden callable {self.fn!r}")


def refuse_untraced_library(fn: types.FunctionType, args: list[Variable], kwargs: dict[str, Variable]) -> None:
    """Calls into untraced libraries break the graph at the user's call."""
    library = untraced_library(fn)
    if library is not None:
        reason = Unsupported(
            f"call to {fn.__module__}.{fn.__qualname__} ({library} is not traced)",
            hint=f"{library} runs eagerly at a graph break; move it out of the compiled function to keep one graph",
            kind=BreakKind.TWICE_DIFFERENTIABLE if creates_graph(fn, args, kwargs) else BreakKind.UNTRACED_CALL,
        )
        raise reason


class NestedFunctionVariable(Variable):
    """A function made by MAKE_FUNCTION while tracing (lambdas, inner functions, comprehensions)."""

    def __init__(
        self,
        code: types.CodeType,
        globals_dict: dict,
        defaults: tuple[Variable, ...],
        kwdefaults: dict[str, Variable],
        closure: tuple[Any, ...] | None,
    ) -> None:
        self.code = code
        self.globals_dict = globals_dict
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure  # tuple of interpreter cells
        # MAKE_FUNCTION's annotations: names and values alternating (up to 3.13), or 3.14's
        # function computing them; given back to the function rebuilt at a break
        self.annotations: Variable | None = None
        self.annotate: Variable | None = None
        # attributes set while tracing (`functools.wraps`): the ones a function keeps in slots,
        # and its `__dict__`; both are set on the function rebuilt at a break
        self.slots: dict[str, Variable] = {}
        self.attrs = DictVariable({})

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"function {self.code.co_qualname}"

    def setattr(self, frame: Frame, name: str, value: Variable) -> None:
        if name in _FUNCTION_SLOTS:
            if name in ("__name__", "__qualname__") and value.python_type() is not str:
                raise Unsupported(f"setting {name} of {self.describe()} to {value.describe()}")
            self.slots[name] = value
        elif name.startswith("__") and name != "__wrapped__":
            raise Unsupported(f"setting attribute {name!r} of {self.describe()}")
        else:
            self.attrs.items[name] = value

    def truth(self, frame: Frame) -> bool:
        return True  # functions define neither __bool__ nor __len__

    def getattr(self, frame: Frame, name: str) -> Variable:
        """The attributes that follow from how the function was made (`__name__`, `__code__`,
        ...) and those set while tracing; others are the base's answer."""
        if name in self.slots:
            return self.slots[name]
        if name in self.attrs.items:
            return self.attrs.items[name]
        if name == "__dict__":
            return self.attrs
        if name in ("__name__", "__qualname__"):
            return constant(self.code.co_name if name == "__name__" else self.code.co_qualname)
        if name == "__module__":
            return constant(self.globals_dict.get("__name__"))
        if name == "__code__":
            return constant(self.code)
        if name in ("__doc__", "__type_params__") and hasattr(self._bare_function(), name):
            # CPython's rule for the docstring; type parameters (3.12+) of a function made
            # without PEP 695's syntax: none
            return constant(getattr(self._bare_function(), name))
        if name == "__annotate__" and hasattr(self._bare_function(), name):  # 3.14+
            return self.annotate if self.annotate is not None else constant(None)
        if name == "__annotations__":
            # made on first read and kept, as CPython's: from MAKE_FUNCTION's names and values,
            # or (3.14+) what the function's `__annotate__` gives for the VALUE format
            if self.annotate is not None:
                self.slots[name] = self.annotate.call(frame, [constant(1)], {})
            else:
                pairs = self.annotations.unpack(frame) if self.annotations is not None else []
                self.slots[name] = DictVariable({k.as_constant(): v for k, v in zip(pairs[::2], pairs[1::2])})
            return self.slots[name]
        if name == "__defaults__":
            return TupleVariable(list(self.defaults)) if self.defaults else constant(None)
        return super().getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        """A real function again, built once: same code, defaults rebuilt, and its closure:
        existing cells as themselves, cells of the traced frames as new cells that receive their
        current values once the function exists (so a function that calls itself through its
        cell works), one per cell for all the functions rebuilt (which keep sharing it). At a
        graph break, where the frame goes on with its own cell, a copy is only right while nobody
        assigns the variable again (`Cell.copy_is_safe`), unless the resume function receives that
        very cell (`rebuild.shared_cells`); once the frame has returned, the rebuilt functions
        are the cell's only users."""
        make = rebuild.writer.bind(types.FunctionType, "FunctionType")
        cells, copied = [], []
        for index, (c, var_name) in enumerate(zip(self.closure or (), self.code.co_freevars)):
            if c.real is not None:
                cells.append(_existing_cell(rebuild, c))
                continue
            if not rebuild.frame_ended and id(c) not in rebuild.shared_cells and not c.copy_is_safe():
                raise Unsupported(
                    f"{self.code.co_qualname} shares the variable {var_name!r} with the frame, which assigns "
                    "it again: a function rebuilt at a graph break cannot share that cell",
                    hint="the frame runs eagerly; assign the variable once, or pass it as an argument",
                )
            cells.append(rebuild.new_cell(c))
            if c.contents is not None:
                copied.append((index, c.contents))
        closure = "(" + "".join(c + ", " for c in cells) + ")" if self.closure else "None"
        code = rebuild.writer.bind(self.code, "code")
        globals_name = rebuild.writer.namer.name_for(self.globals_dict)
        create = f"{make}({code}, {globals_name}, {self.code.co_name!r}, None, {closure})"

        def fill(fn: str) -> list[str]:
            lines = []
            for index, contents in copied:
                lazy = isinstance(contents, LazyValue)
                value = rebuild.writer.source(contents.source) if lazy else rebuild.expr(contents)
                lines.append(f"{fn}.__closure__[{index}].cell_contents = {value}")
            if self.defaults:
                lines.append(f"{fn}.__defaults__ = ({''.join(rebuild.expr(d) + ', ' for d in self.defaults)})")
            if self.kwdefaults:
                items = ", ".join(f"{k!r}: {rebuild.expr(v)}" for k, v in self.kwdefaults.items())
                lines.append(f"{fn}.__kwdefaults__ = {{{items}}}")
            if self.annotations is not None:
                pairs = rebuild.expr(self.annotations)
                lines.append(f"{fn}.__annotations__ = {rebuild.writer.bind(_annotation_dict, 'fn')}({pairs})")
            if self.annotate is not None:
                lines.append(f"{fn}.__annotate__ = {rebuild.expr(self.annotate)}")
            for name, value in self.slots.items():
                lines.append(f"{fn}.{name} = {rebuild.expr(value)}")
            if self.attrs.items:
                lines.append(f"{fn}.__dict__.update({rebuild.expr(self.attrs)})")
            return lines

        return rebuild.build_object(self, create, fill)

    def _bare_function(self) -> types.FunctionType:
        """A function of this code over empty cells, with no defaults."""
        placeholder_cells = tuple(types.CellType() for _ in self.code.co_freevars)
        return types.FunctionType(self.code, self.globals_dict, self.code.co_name, None, placeholder_cells)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        fn = self._bare_function()
        defaults = (self.defaults, self.kwdefaults)
        return frame.inline_call(fn, args, kwargs, closure=self.closure, defaults=defaults, maker=self)


# attributes a function keeps outside its `__dict__` that code sets (`functools.wraps`)
_FUNCTION_SLOTS = frozenset(
    {"__name__", "__qualname__", "__module__", "__doc__", "__annotations__", "__annotate__", "__type_params__"}
)


def _annotation_dict(pairs: tuple) -> dict:
    """A function's `__annotations__` from MAKE_FUNCTION's tuple of names and values."""
    return dict(zip(pairs[::2], pairs[1::2]))


def _existing_cell(rebuild: Any, cell: Any) -> str:
    """An existing closure cell itself, reached the way the next call will reach its own."""
    return rebuild.expr(RealCellVariable(cell, cell.root_index))


class UserMethodVariable(Variable):
    """A Python function bound to a tracked object (`self` is a tracker)."""

    def __init__(
        self,
        fn: types.FunctionType,
        self_var: Variable,
        source: Source | None = None,
        *,
        fn_source: Source | None = None,
    ) -> None:
        self.fn = fn
        self.self_var = self_var
        self.source = source
        # where the function itself is reached (its defaults and cells are guarded through it)
        self.fn_source = fn_source

    def python_type(self) -> type:
        return types.MethodType

    def describe(self) -> str:
        return f"method {self.fn.__qualname__}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return UserFunctionVariable(self.fn, self.fn_source).call(frame, [self.self_var, *args], kwargs)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "__func__":
            return UserFunctionVariable(self.fn, self.fn_source)
        if name == "__self__":
            return self.self_var
        return UserFunctionVariable(self.fn, self.fn_source).getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        method = rebuild.writer.bind(types.MethodType, "MethodType")
        return f"{method}({rebuild.writer.bind(self.fn, 'fn')}, {rebuild.expr(self.self_var)})"


def _takes_made_frozen_dataclass(args: list[Variable], kwargs: dict[str, Variable]) -> bool:
    """Whether an argument is a frozen dataclass made in the frame (an `allow_in_graph`
    function's node then takes its fields, and rebuilds it)."""
    return any(
        is_frozen_dataclass(a.python_type()) and a.made_while_tracing()
        for a in [*args, *kwargs.values()]
        if not isinstance(a, (TensorVariable, ConstantVariable))
    )


class TorchOpVariable(Variable):
    """A torch function: calling it records a `call_function` node (or folds a constant)."""

    def __init__(self, fn: Any, source: Source | None = None) -> None:
        self.fn = fn
        self.value_object = fn
        self.source = source

    def python_type(self) -> type:
        return type(self.fn)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if isinstance(self.fn, torch._ops.OpOverloadPacket) and name in self.fn.overloads():
            # `torch.ops.aten.add.Tensor`: one overload of the operator, itself a graph op
            return TorchOpVariable(
                getattr(self.fn, name), None if self.source is None else AttrSource(self.source, name)
            )
        named = name_attribute(self.fn, name)  # `func.__name__` in a mode's handler
        return named if named is not None else super().getattr(frame, name)

    def describe(self) -> str:
        module = getattr(self.fn, "__module__", None) or "torch"
        return f"{module}.{getattr(self.fn, '__name__', self.fn)}"

    def _dispatch_torch_function(
        self, frame: Frame, classes: list[type], args: list[Variable], kwargs: dict[str, Variable]
    ) -> Variable:
        """`torch.add(w, 1.0)` where `w` is an object (not a tensor) whose class defines
        `__torch_function__`: eager calls the first such class's handler with the function, the
        overriding classes, and the arguments; so does the trace, inlining it (the handler
        usually unwraps the object and calls the function again on tensors)."""
        frame.output.guards.state_query(torch._C._is_torch_function_enabled, "torch function enabled", True)
        kinds = TupleVariable([frame.wrap(cls, None) for cls in classes])
        for cls in classes:  # a handler answering NotImplemented passes to the next class's
            handler = frame.wrap(cls, None).getattr(frame, "__torch_function__")
            result = handler.call(frame, [self, kinds, TupleVariable(list(args)), DictVariable(dict(kwargs))], {})
            if not (result.is_constant() and result.as_constant() is NotImplemented):
                return result
        # eager raises a TypeError whose text differs between torch versions: the call runs there
        raise Unsupported(f"every __torch_function__ handler answered NotImplemented for {self.describe()}")

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if self.fn in function_modes.STACK_FUNCTIONS:
            return function_modes.stack_call(frame, self.fn, args, kwargs)
        routed = function_modes.dispatch(frame, self.fn, args, kwargs)
        if routed is not None:
            return routed
        kwargs = function_modes.with_default_device(frame, self.fn, kwargs)
        folded = trace_constant(self.fn)
        if folded is not None and all(a.is_constant() for a in [*args, *kwargs.values()]):
            return constant(folded(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()}))
        if any(isinstance(a, NdarrayVariable) for a in [*args, *kwargs.values()]):
            args = numpy_arrays.torch_conversion(frame, self.fn, args, kwargs)
            if self.fn is torch.from_numpy:
                return args[0]
        overriding = _torch_function_classes(args, kwargs)
        if overriding:
            return self._dispatch_torch_function(frame, overriding, args, kwargs)
        if not args and not kwargs and isinstance(self.fn, types.BuiltinFunctionType):
            return self._query_state(frame)
        if self.fn is torch._C._set_grad_enabled and len(args) == 1 and args[0].is_constant():
            frame.output.set_grad_enabled(bool(args[0].as_constant()), called=True)
            return constant(None)
        if self.fn is torch._C._set_deterministic_algorithms:
            return _switch_deterministic_algorithms(frame, args, kwargs)
        if self.fn is torch._C._set_default_dtype:
            return _switch_default_dtype(frame, args, kwargs)
        if self.fn is torch.is_tensor and len(args) == 1:
            return constant(isinstance(args[0], TensorVariable))
        if self.fn is torch.is_floating_point and len(args) == 1 and isinstance(args[0], TensorVariable):
            return constant(args[0].fake.is_floating_point())
        if self.fn in (torch.numel,) and isinstance(args[0], TensorVariable):
            return constant(args[0].fake.numel())
        if self.fn is torch.tensor and len(args) == 1:
            built = tensor_of_graph_values(frame, args[0], kwargs)
            if built is not None:
                return built
        if self.fn is torch._shape_as_tensor and len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
            # the sizes as an int64 tensor (on fake tensors the op would read data they lack), built
            # from the sizes as `torch.tensor(x.shape)`, symbolic ones included
            sizes = ListVariable(args[0].getattr(frame, "shape").unpack(frame))
            int64 = {"dtype": constant(torch.int64)}
            built = tensor_of_graph_values(frame, sizes, int64)
            return built or frame.output.call("call_function", torch.tensor, [sizes], int64, "torch._shape_as_tensor()")
        if _takes_made_frozen_dataclass(args, kwargs) and is_allowed_in_graph(self.fn):
            return nonstrict_calls.call(frame, self.fn, args, kwargs, frozen_dataclasses=True)
        refuse_effect(getattr(self.fn, "__name__", ""), f"{self.describe()}()")
        wants_grad = kwargs.get("requires_grad")
        if wants_grad is not None and wants_grad.is_constant() and wants_grad.as_constant() is True:
            # a new leaf that requires grad: AOTAutograd's graph would hand it back without
            # (a graph makes no leaves), so it is made eagerly and enters the next graph as an input
            raise Unsupported(
                f"{self.describe()}(..., requires_grad=True) makes a leaf tensor that requires grad; "
                "it runs eagerly between graphs",
                hint="make the tensor outside the compiled function (a parameter or an argument)",
            )
        return frame.output.call("call_function", self.fn, args, kwargs, f"{self.describe()}()")

    def _query_state(self, frame: Frame) -> Variable:
        """A torch C function called with no arguments.

        A factory returns a tensor and is recorded; anything else reads global state (the dispatch-mode
        stack, a backend flag) that would be wrong if asked under the tracer's fake mode. A reader
        (`_get_*`, `is_*`, `_len_*`, ...) is asked for real and its answer guarded; other calls run
        eagerly at a graph break.
        """
        describe = f"{self.describe()}()"
        if self.fn is torch._C._autograd._profiler_enabled and inside_profile(frame):
            return constant(True)  # eager's answer inside a profiler block traced away
        if is_state_reader(self.fn):
            with torch_state.program_modes():  # the user's modes a compile set aside count
                value = self.fn()
            if isinstance(value, (bool, int, float, str, torch.dtype, torch.device)) or value is None:
                frame.output.guards.state_query(self.fn, self.describe(), value)
                return constant(value)
        result = frame.output.call("call_function", self.fn, [], {}, describe)
        if isinstance(result, ConstantVariable) and result.value is not None:
            raise Unsupported(f"{describe} returns global state that tracing cannot reproduce")
        return result

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


def _switch_deterministic_algorithms(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch._C._set_deterministic_algorithms(mode, warn_only=...)` (what
    `torch.use_deterministic_algorithms` calls): switched for the rest of the trace and at this
    point in the graph (`torch_flags`). Eager takes bools only (TypeError for others)."""
    values = dict(zip(("mode",), args)) | kwargs
    given = [*args, *kwargs.values()]
    if len(args) > 1 or "mode" not in values or set(values) - {"mode", "warn_only"}:
        raise Unsupported("torch._C._set_deterministic_algorithms() with arguments it does not take")
    if not all(v.is_constant() and type(v.as_constant()) is bool for v in given):
        raise Unsupported("torch._C._set_deterministic_algorithms() of a value that is not a constant bool")
    warn_only = values["warn_only"].as_constant() if "warn_only" in values else False
    frame.output.switch(torch_flags.DETERMINISTIC, (values["mode"].as_constant(), warn_only))
    return constant(None)


# the dtypes `torch.set_default_dtype` takes (others raise; bfloat16 is set, then raises)
_DEFAULT_DTYPES = (torch.float16, torch.float32, torch.float64)


def _switch_default_dtype(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch._C._set_default_dtype(dtype)` (what `torch.set_default_dtype` calls): switched for the
    rest of the trace and at this point in the graph (`torch_flags`). Other arguments break, and
    eager raises or sets them itself."""
    if kwargs or len(args) != 1 or not args[0].is_constant() or args[0].as_constant() not in _DEFAULT_DTYPES:
        raise Unsupported("torch.set_default_dtype() of a value other than a constant float16/32/64 dtype")
    frame.output.switch(torch_flags.DEFAULT_DTYPE, args[0].as_constant(), called=True)
    return constant(None)


def _torch_function_classes(args: list[Variable], kwargs: dict[str, Variable]) -> list[type]:
    """The classes of the objects among a torch function's arguments (and the items of list and
    tuple arguments) that are not tensors and define a Python `__torch_function__`, in the
    order torch consults them: a subclass before its base, then left to right."""
    found: list[type] = []
    for var in [*args, *kwargs.values()]:
        for item in var.items if isinstance(var, (ListVariable, TupleVariable)) else [var]:
            if isinstance(item, (TensorVariable, ConstantVariable, GraphValueVariable)):
                continue
            if item.source is None and not item.made_while_tracing():
                continue
            try:
                cls = item.python_type()
            except Unsupported:
                continue
            handler = getattr(cls, "__torch_function__", None)
            if issubclass(cls, torch.Tensor) or not isinstance(getattr(handler, "__func__", None), types.FunctionType):
                continue
            if cls not in found:
                at = next((i for i, seen in enumerate(found) if issubclass(cls, seen)), len(found))
                found.insert(at, cls)
    return found


def _size_item(frame: Frame, item: Variable) -> Variable:
    """An element of `torch.Size(items)`: an int or a symbolic int; another constant as
    `torch.Size` takes it (`True` is 1; a float raises its TypeError in the program). A tensor
    element is read through its `__index__`, its value: refused."""
    if isinstance(item, SymNodeVariable) and item.python_type() is int:
        return item
    if not item.is_constant():
        raise Unsupported(f"torch.Size of {item.describe()} reads its value", hint="build it from ints or x.shape")
    try:
        (size,) = torch.Size([item.as_constant()])
    except TypeError as e:
        raise_python_error(frame, e)
    return constant(size)


class OpaqueCallableVariable(Variable):
    """A callable implemented in C that tracing knows nothing of (`sys.exc_info`, a C extension's
    function), reached through a source: loading it is fine (guarded by identity), calling it is
    a graph break where Python calls it."""

    def __init__(self, fn: Any, source: Source) -> None:
        self.fn = fn
        self.value_object = fn
        self.source = source

    def describe(self) -> str:
        if isinstance(self.fn, types.MethodType):  # a pybind11 method's __qualname__ names its capsule
            return f"method {type(self.fn.__self__).__qualname__}.{getattr(self.fn.__func__, '__name__', '?')}"
        return f"{type(self.fn).__qualname__} {getattr(self.fn, '__qualname__', '')}".strip()

    def python_type(self) -> type:
        return type(self.fn)  # one fixed object, guarded by identity

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(
            f"call target {self.describe()} is implemented in C and unknown to stenograph",
            kind=BreakKind.UNTRACED_CALL,
        )


class TensorMethodRefVariable(Variable):
    """`torch.Tensor.method` taken from the class and called with the tensor first."""

    def __init__(self, fn: Any, source: Source | None = None) -> None:
        self.fn = fn
        self.value_object = fn
        self.source = source

    def describe(self) -> str:
        return f"torch.Tensor.{self.fn.__name__}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        named = name_attribute(self.fn, name)  # `func.__name__` in a mode's handler
        return named if named is not None else super().getattr(frame, name)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args or not isinstance(args[0], TensorVariable):
            raise Unsupported(f"{self.describe()} called without a tensor first")
        return args[0].call_method(frame, self.fn.__name__, args[1:], kwargs)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


_CONSTANT_RECORDS = (torch.device, torch.finfo, torch.iinfo)


def _legacy_tensor(frame: Frame, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch.Tensor([1, 2])` (a tensor of the data, in the constructor's dtype), `torch.Tensor()`
    and `torch.Tensor(2, 3)` (uninitialized: `torch.empty`), recorded as `torch.tensor` and
    `torch.empty` calls are. Other forms (a tensor, a storage, `device=`) break."""
    dtype = LEGACY_TENSOR_CONSTRUCTORS[cls] or torch.get_default_dtype()
    if kwargs:
        raise Unsupported(f"{cls.__qualname__}() with keyword arguments")
    data = args[0] if len(args) == 1 else None
    constant_data = data is not None and data.is_constant() and type(data.as_constant()) in (list, tuple)
    if constant_data or isinstance(data, (ListVariable, TupleVariable)):
        return frame.wrap(torch.tensor, None).call(frame, args, {"dtype": constant(dtype)})
    if all(a.is_constant() and type(a.as_constant()) is int or isinstance(a, SymNodeVariable) for a in args):
        sizes = args if args else [constant(0)]
        return frame.wrap(torch.empty, None).call(frame, list(sizes), {"dtype": constant(dtype)})
    raise Unsupported(f"{cls.__qualname__}() of {', '.join(a.describe() for a in args)}")


class TorchClassVariable(ConstantVariable):
    """torch classes whose construction is modelled: torch.Size, grad-mode contexts, the constant
    records `torch.device`, `torch.finfo`, `torch.iinfo` (folded: `finfo()` reads the default dtype,
    which every entry guards), the legacy tensor constructors (`torch.Tensor([1, 2])`),
    `torch.nn.Parameter` (new_parameters.py) and the profiler's contexts (profiler_ranges.py)."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if grad_mode_class(self.value):
            return make_grad_context(frame, self.value, args, kwargs)
        if is_global_context_class(self.value):
            return make_global_context(self.value, args, kwargs)
        if is_record_function_class(self.value):
            return make_record_function(frame, args, kwargs)
        if is_profile_class(self.value):
            return make_profile(frame, self.value, args, kwargs)
        if self.value is torch.Size:
            items = args[0].unpack(frame) if args else []
            return SizeVariable([_size_item(frame, item) for item in items])
        if self.value is torch.nn.Parameter:
            return make_parameter(frame, args, kwargs)
        if self.value in LEGACY_TENSOR_CONSTRUCTORS:
            return _legacy_tensor(frame, self.value, args, kwargs)
        if self.value in _CONSTANT_RECORDS and all(a.is_constant() for a in [*args, *kwargs.values()]):
            try:
                record = self.value(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
            except (TypeError, ValueError, RuntimeError) as e:  # `torch.finfo(torch.int32)`
                raise_python_error(frame, e)
            return constant(record)
        raise Unsupported(f"constructing {self.value.__qualname__} while tracing")

    def getattr(self, frame: Frame, name: str) -> Variable:
        if self.value is torch.Tensor and name == "_make_subclass":
            return MakeSubclassVariable(torch.Tensor._make_subclass)
        return super().getattr(frame, name)


class MakeSubclassVariable(MarkedFunctionVariable):
    """`torch.Tensor._make_subclass(cls, data)` of a user's tensor class (or `torch.Tensor`): an
    instance of `cls` sharing `data`'s storage, detached (`require_grad=False`, the default):
    recorded as `data.detach().as_subclass(cls)` (a node naming the class), or `data.detach()`.
    Other arguments break the graph."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        bound = dict(zip(("cls", "data", "require_grad"), args)) | kwargs
        known = {name: v.as_constant() for name, v in bound.items() if name != "data" and v.is_constant()}
        made, data = known.get("cls"), bound.get("data")
        plain = (
            set(bound) <= {"cls", "data", "require_grad"}
            and set(bound) - {"data"} <= set(known)
            and known.get("require_grad", False) is False
            and isinstance(made, type)
            and (made is torch.Tensor or issubclass(made, torch.Tensor) and is_user_class(made))
            and isinstance(data, TensorVariable)
        )
        if not plain:
            raise Unsupported("torch.Tensor._make_subclass() other than (user's class, tensor, require_grad=False)")
        detached = frame.output.call("call_method", "detach", [data], {}, "Tensor._make_subclass()")
        if made is torch.Tensor:  # a plain tensor sharing the storage: the detached alias itself
            return detached
        return frame.output.call("call_method", "as_subclass", [detached, constant(made)], {}, f"{made.__name__}(...)")


class FoldedCallVariable(MarkedFunctionVariable):
    """A function whose result is known while tracing (e.g. `is_compiling()` is True)."""

    def __init__(self, fn: Any, result: Any) -> None:
        super().__init__(fn)
        self.result = result

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return constant(self.result)


class MarkStaticVariable(MarkedFunctionVariable):
    """`mark_static(x, dim)` called in compiled code: the dimension's size is specialised there
    (its value guarded), as torch.compile forces it static while tracing; on an nn.Module class
    it returns the class, as eagerly."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        bound = dict(zip(("t", "index"), args)) | kwargs
        target, index = bound.get("t"), bound.get("index", constant(None))
        if target is not None and not isinstance(target, TensorVariable) and target.is_constant():
            if isinstance(target.as_constant(), type):
                return target  # a module class: nothing to trace
        if not isinstance(target, TensorVariable) or not index.is_constant():
            raise Unsupported(f"{self.describe()} of {target.describe() if target else 'nothing'}")
        dims = index.as_constant()
        shape = target.fake.shape
        for dim in range(len(shape)) if dims is None else [dims] if isinstance(dims, int) else dims:
            if specialised_size(shape[dim]) is None:
                raise Unsupported(f"{self.describe()} of a data-dependent size", kind=BreakKind.DATA_DEPENDENT)
        return constant(None)


class CheckVariable(MarkedFunctionVariable):
    """`torch._check(cond, message)`: a condition known while tracing is checked now (eager's
    RuntimeError when it fails); a symbolic one (a value `.item()` read) is told to the ShapeEnv,
    so later decisions on it need no guard, and recorded as `aten._assert_scalar`, which raises
    when the graph runs, as torch.compile records it."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        bound = dict(zip(("cond", "message"), args)) | kwargs
        cond = bound.get("cond")
        if isinstance(cond, SymNodeVariable) and cond.python_type() is bool:
            try:
                torch._check(cond.fake)
            except RuntimeError:  # false for this call's sizes (the ShapeEnv guarded that)
                _fail_check(frame, bound.get("message"))
            text = "torch._check failed in the compiled function"
            frame.output.call("call_function", torch.ops.aten._assert_scalar.default, [cond, constant(text)], {}, text)
            return constant(None)
        if cond is not None and cond.is_constant() and type(cond.as_constant()) is bool:
            if cond.as_constant():
                return constant(None)
            _fail_check(frame, bound.get("message"))
        raise Unsupported(f"{self.describe()} of {cond.describe() if cond is not None else 'nothing'}")


def _fail_check(frame: Frame, message: Variable | None) -> NoReturn:
    """Raise in the traced program what a failing `torch._check` raises eagerly: RuntimeError
    with the text its message callable returns (called only now, as eager calls it), or
    torch's own text without one."""
    if message is None:
        try:
            torch._check(False)
        except RuntimeError as e:
            raise_python_error(frame, e)
    text = message.call(frame, [], {})
    if not (text.is_constant() and isinstance(text.as_constant(), str)):
        raise Unsupported(f"torch._check failing with a message of {text.describe()}")
    raise_python_error(frame, RuntimeError(text.as_constant()))


class SubstitutedVariable(MarkedFunctionVariable):
    """A function with a `substitute_in_graph` substitute: a call traces the substitute, or, when
    it may be folded and every argument is a constant, calls the function now and uses its result."""

    def __init__(self, fn: Any, substitute: Substitute) -> None:
        super().__init__(fn)
        self.substitute = substitute

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        substitute = self.substitute
        if substitute.can_constant_fold_through and all(a.is_constant() for a in [*args, *kwargs.values()]):
            keywords = {k: v.as_constant() for k, v in kwargs.items()}
            try:
                result = substitute.original(*[a.as_constant() for a in args], **keywords)
            except Exception as e:
                raise_python_error(frame, e)
            if is_literal(result):
                return constant(result)
        return frame.inline_call(substitute.traceable, args, kwargs, closure=None)


class GraphBreakVariable(Variable):
    """`stenograph.graph_break()`: asks for a graph break at the call."""

    def describe(self) -> str:
        return "stenograph.graph_break"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(
            "stenograph.graph_break() called", hint="remove the call to keep one graph", kind=BreakKind.EXPLICIT
        )

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(graph_break, "fn")


_ABSENT = object()
_PROBE_PARTIAL = functools.partial(len)  # what a partial's own attributes are, beside its function's


class PartialVariable(Variable):
    """A `functools.partial`: calling it calls the function with the stored arguments first."""

    def __init__(
        self,
        fn: Variable,
        args: list[Variable],
        kwargs: dict[str, Variable],
        source: Source | None = None,
        value: functools.partial | None = None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.source = source
        self.value = value  # the partial itself, when the trace read it (rather than made it)

    @staticmethod
    def make(fn: Variable, args: list[Variable], kwargs: dict[str, Variable]) -> PartialVariable:
        """`partial(fn, ...)`; a partial of a partial flattens, as functools does."""
        if isinstance(fn, PartialVariable):
            return PartialVariable(fn.fn, [*fn.args, *args], {**fn.kwargs, **kwargs})
        return PartialVariable(fn, args, kwargs)

    def python_type(self) -> type:
        return functools.partial

    def describe(self) -> str:
        return f"functools.partial of {self.fn.describe()}"

    def made_while_tracing(self) -> bool:
        return self.value is None  # a new object: compared and hashed by identity (a dict key)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.fn.call(frame, [*self.args, *args], {**self.kwargs, **kwargs})

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(self.kwargs)
        if name == "__call__":
            return self  # the bound `__call__` calls the partial
        if self.source is None:  # made in the frame: its instance `__dict__` is empty, as the probe's
            found = getattr(_PROBE_PARTIAL, name, _ABSENT)
            if found is _ABSENT:
                raise raise_new(frame, AttributeError, f"'functools.partial' object has no attribute {name!r}")
            if found is None or isinstance(found, (str, int)):  # `__doc__`, `__module__`
                return constant(found)
            if name == "__class__":
                return constant(functools.partial)
            if name == "__dict__":
                return DictVariable({})
            if callable(found):  # a method every partial has (`__repr__`, `__reduce__`, ...)
                return PartialMethodVariable(self, name)
        elif self.value is not None and name in vars(self.value):  # set on this partial
            return frame.wrap(vars(self.value)[name], AttrSource(self.source, name))
        elif self.value is not None and not hasattr(self.value, name):  # (`hasattr(p, "__name__")`)
            frame.output.guards.attribute_absent(self.source, self.value, name)
            raise raise_new(frame, AttributeError, f"'functools.partial' object has no attribute {name!r}")
        return super().getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        def render() -> str:
            partial = rebuild.writer.bind(functools.partial, "partial")
            parts = [rebuild.expr(self.fn), *[rebuild.expr(a) for a in self.args]]
            parts += [f"{k}={rebuild.expr(v)}" for k, v in self.kwargs.items()]
            return f"{partial}({', '.join(parts)})"

        return rebuild.build_once(self, render)  # one object, however many places hold it


class PartialMethodVariable(Variable):
    """A method of `functools.partial` read from a partial made in the frame (`hasattr(p,
    "__repr__")` needs no more); calling it runs eagerly at a graph break."""

    def __init__(self, partial: PartialVariable, name: str) -> None:
        self.partial = partial
        self.name = name

    def python_type(self) -> type:
        return type(getattr(_PROBE_PARTIAL, self.name))

    def describe(self) -> str:
        return f"method {self.name} of {self.partial.describe()}"

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.partial)}.{self.name}"


class CachedFunctionVariable(Variable):
    """A function wrapped by `functools.lru_cache` / `functools.cache`. Called with constant
    arguments, the wrapped function is inlined, as torch._dynamo does: for the same arguments a
    cached call returns what the function computes, so only the cache's statistics differ. With
    other arguments (a tensor is cached by identity: eager may return an earlier result for an
    input changed in place) the call is a graph break, where the real wrapper runs."""

    def __init__(self, wrapper: Any, wrapped: Variable, source: Source | None) -> None:
        self.wrapper = wrapper
        self.wrapped = wrapped
        self.value_object = wrapper
        self.source = source

    def python_type(self) -> type:
        return type(self.wrapper)

    def describe(self) -> str:
        return f"lru_cache-wrapped {self.wrapped.describe()}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"call of {self.describe()} with arguments that are not constants (cached by identity)")
        return self.wrapped.call(frame, args, kwargs)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "__wrapped__":
            return self.wrapped
        return super().getattr(frame, name)

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.wrapper, "cached")


H = TypeVar("H")


def handler_registry(table: dict[Any, H]) -> Callable[..., Callable[[H], H]]:
    """A decorator factory for a module's handler table: `@register(fn, ...)` files the handler it
    decorates in `table` under each `fn`."""

    def register(*fns: Any) -> Callable[[H], H]:
        def add(handler: H) -> H:
            for fn in fns:
                table[fn] = handler
            return handler

        return add

    return register


class HandledFunctionVariable(Variable):
    """A function or class whose calls a handler table models (builtins, standard-library functions)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.value_object = fn

    def python_type(self) -> type:
        return type(self.fn)

    def getattr(self, frame: Frame, name: str) -> Variable:
        named = name_attribute(self.fn, name)  # `next.__name__`
        if named is not None:
            return named
        method = getattr(self.fn, name, None) if isinstance(self.fn, type) else None
        if isinstance(method, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            # `OrderedDict.get` (dict's), `OrderedDict.move_to_end`: called on an instance, the
            # instance's own method runs
            return constant(method)
        return super().getattr(frame, name)


# what `compile(fn)` called while tracing hands back to be traced where it is called
_TRACED_CALLABLES = (UserFunctionVariable, NestedFunctionVariable, UserMethodVariable)
