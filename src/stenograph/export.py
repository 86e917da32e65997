"""`export(fn)(*args, **kwargs)`: one FX graph of a whole function, and the guards it assumes.

Mirrors `torch._dynamo.export`: the graph module takes the function's own parameters (a module's
forward without `self`) and returns what the function returns, so calling it with the same
arguments gives eager's result. Parameters and buffers of an exported module are attributes of
the graph module (the same tensors, under their qualified names); tensors read from globals or
closures are held as constants. A function that needs a graph break raises `Unsupported` naming
every break: it is then run once, with breaks, to find them all.
"""

from __future__ import annotations

import inspect
import operator
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
import torch.fx

from . import api, entry, events
from .errors import Unsupported
from .frame_compiler import Capture, capture_frame, frame_label
from .graph.resume import dynamic_arguments
from .guards.pyfunc import signature_only
from .guards.sources import AttrSource, ItemSource, LocalSource, ModuleMemberSource, Source
from .shapes.dynamic import DynamicPolicy
from .variables.base import Variable
from .variables.containers import DictVariable, ListVariable, TupleVariable
from .variables.symbolic import SymNodeVariable
from .variables.tensor import TensorVariable


class ExportGuards:
    """The checks the exported graph relies on (shapes, dtypes, constants it specialised on).

    Iterating gives each check as text; `check(*args, **kwargs)` says whether arguments satisfy
    them all, i.e. whether the graph module is valid for that call, and `failure(...)` which
    check they fail."""

    def __init__(self, texts: list[str], guard: types.FunctionType, explainer: Callable, prefix: tuple) -> None:
        self.texts = texts
        self._guard = guard
        self._explainer = explainer
        self._prefix = prefix

    def check(self, *args: Any, **kwargs: Any) -> bool:
        return bool(self._guard(*self._prefix, *args, **kwargs))

    def failure(self, *args: Any, **kwargs: Any) -> str | None:
        """The first check these arguments fail, with the value they pass; None if all pass."""
        failed = self._explainer(*self._prefix, *args, **kwargs)
        return None if failed is None else failed.reason

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts)

    def __len__(self) -> int:
        return len(self.texts)

    def __str__(self) -> str:
        return "\n".join(self.texts)


class ExportResult(NamedTuple):
    graph_module: torch.fx.GraphModule
    guards: ExportGuards


def export(
    fn: Callable, *extra_args: Any, dynamic: bool | None = None, **extra_kwargs: Any
) -> Callable[..., ExportResult]:
    """`export(fn)(*args, **kwargs)` -> `ExportResult(graph_module, guards)` for a function, a
    bound method, an `nn.Module` (its forward) or a compiled one of those. `dynamic` as in
    `compile`: None keeps sizes static unless marked (`mark_dynamic`), True makes every size and
    int argument symbolic, False none."""
    if extra_args or extra_kwargs:
        raise TypeError("use stenograph.export(fn)(*args, **kwargs)")
    if dynamic not in (None, False, True):
        raise TypeError(f"stenograph.export(dynamic=...) takes None, True or False, not {dynamic!r}")
    function, bound_self = _target(fn)

    def run(*args: Any, **kwargs: Any) -> ExportResult:
        full = (bound_self, *args) if bound_self is not None else args
        code = function.__code__
        try:
            captured = capture_frame(function, full, kwargs, DynamicPolicy(dynamic, dynamic_arguments(code)))
        except Unsupported as first:
            raise _every_break(fn, args, kwargs, first, frame_label(code)) from None
        module = bound_self if isinstance(bound_self, torch.nn.Module) else None
        graph_module = _graph_module(function, captured, module, frame_label(code))
        prefix = (function.__closure__,) if code.co_freevars else ()
        if bound_self is not None:
            prefix = (*prefix, bound_self)
        guard_set = captured.output.guards
        texts = [check.text for check in guard_set.ordered()]
        explainer = guard_set.build_explainer(code, signature_only(function), frame_label(code))
        return ExportResult(graph_module, ExportGuards(texts, captured.guard, explainer, prefix))

    return run


def _target(fn: Any) -> tuple[types.FunctionType, Any]:
    """The Python function to trace and the object bound as its first argument (or None)."""
    if isinstance(fn, torch.nn.Module):
        module = fn.__dict__.get("_orig_mod", fn)  # a compiled module: its original
        forward = type(module).forward
        if "forward" in module.__dict__ or not isinstance(forward, types.FunctionType):
            raise TypeError(f"stenograph.export() needs {type(module).__qualname__}.forward to be a Python method")
        return forward, module
    original = getattr(fn, "__stenograph_original__", fn)
    if isinstance(original, types.MethodType) and isinstance(original.__func__, types.FunctionType):
        return original.__func__, original.__self__
    if isinstance(original, types.FunctionType):
        return original, None
    raise TypeError(
        f"stenograph.export() needs a Python function or nn.Module, got {type(fn).__qualname__} ({fn!r:.60})"
    )


def _every_break(fn: Any, args: tuple, kwargs: dict, first: Unsupported, label: str) -> Unsupported:
    """An `Unsupported` naming every graph break `fn` needs: found by running it once with
    breaks allowed (a throwaway compilation, forgotten afterwards)."""
    found: list[str] = []

    def listen(event: events.CompileEvent) -> None:
        if isinstance(event, events.GraphBreak):
            where = "".join(
                f"\n      at {f}:{line} in {name}: {text.strip()}" for f, line, name, text in event.user_stack
            )
            found.append(f"{event.reason}{where}")
        elif isinstance(event, events.RunsEagerly):
            found.append(f"{event.label} cannot be captured: {event.reason}")

    def throwaway(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return gm.forward

    events.subscribe(listen)
    failure: BaseException | None = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", entry.StenographWarning)
            api.compile(fn, backend=throwaway)(*args, **kwargs)
    except Exception as e:  # the run is only there to list the breaks
        failure = e
    finally:
        events.unsubscribe(listen)
        entry.forget_backend(throwaway)
    if not found:
        found.append(str(first))
    lines = [f"stenograph.export needs {label} as one graph, but it needs {len(found)} graph break(s):"]
    lines += [f"  {i}. {reason}" for i, reason in enumerate(found, 1)]
    if failure is not None:
        lines.append(f"  (running it to list the breaks raised {type(failure).__name__}: {failure})")
    error = Unsupported(
        "\n".join(lines),
        location=first.location,
        source_line=first.source_line,
        hint="remove or move out the code named above; stenograph.explain(fn) shows each graph",
        user_stack=list(first.user_stack),
        instruction=first.instruction,
        kind=first.kind,
    )
    error.break_reasons = found  # type: ignore[attr-defined]
    return error


def _graph_module(
    fn: types.FunctionType, captured: Capture, module: torch.nn.Module | None, label: str
) -> torch.fx.GraphModule:
    """The traced graph with the function's own parameters as placeholders."""
    output = captured.output
    if output.side_effects:
        raise Unsupported(
            f"stenograph.export: {label} changes Python objects outside it (lists, dicts, attributes or "
            "globals), which a graph cannot do",
            hint="return the new values instead of storing them",
        )
    if captured.end_grad_mode != output.initial_grad_mode:
        raise Unsupported(f"stenograph.export: {label} leaves grad mode switched, which a graph cannot do")
    graph = torch.fx.Graph()
    builder = _InputBuilder(fn, graph, module)
    val_map: dict[torch.fx.Node, torch.fx.Node] = {}
    for graph_input in output.inputs:
        val_map[graph_input.node] = builder.node_for(graph_input.source, graph_input.example)
    graph.graph_copy(output.graph, val_map)
    graph.output(_output_arg(captured.result, val_map, label))
    graph_module = torch.fx.GraphModule(builder.attributes, graph, class_name="StenographExport")
    graph_module.meta["stenograph_frame"] = label
    return graph_module


class _InputBuilder:
    """Makes, in the export graph, the node that reads each input of the traced graph."""

    def __init__(self, fn: types.FunctionType, graph: torch.fx.Graph, module: torch.nn.Module | None) -> None:
        self.graph = graph
        self.nodes: dict[Source, torch.fx.Node] = {}
        self.attributes: dict[str, Any] = {}
        self.members: dict[int, str] = {}
        parameters = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
        if module is not None:
            parameters = parameters[1:]
            named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
            self.members = {id(tensor): name for name, tensor in reversed(named)}
        for p in parameters:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise Unsupported(f"stenograph.export needs named parameters; {fn.__qualname__} takes {p}")
            default = inspect.Signature.empty if p.default is p.empty else p.default
            self.nodes[LocalSource(p.name)] = graph.placeholder(p.name, default_value=default)

    def node_for(self, source: Source, value: Any) -> torch.fx.Node:
        member = self.members.get(id(value)) if isinstance(value, torch.Tensor) else None
        if member is not None:
            self.attributes[member] = value
            return self.graph.get_attr(member)
        path = self._path(source)
        if path is not None:
            return path
        if isinstance(value, torch.Tensor):
            name = f"_const_{len(self.attributes)}"
            self.attributes[name] = value
            return self.graph.get_attr(name)
        raise Unsupported(f"stenograph.export: {source.name()} is a symbolic number not read from an argument")

    def _path(self, source: Source) -> torch.fx.Node | None:
        """Nodes reading `source` from a parameter's placeholder, or None if it is not rooted
        at one (a global, a closure cell, `self` of a module)."""
        known = self.nodes.get(source)
        if known is not None:
            return known
        parent = source.base()
        if parent is None:
            return None
        base = self._path(parent)
        if base is None:
            return None
        if isinstance(source, AttrSource):
            node = self.graph.call_function(getattr, (base, source.attr))
        elif isinstance(source, ItemSource):
            node = self.graph.call_function(operator.getitem, (base, source.key))
        elif isinstance(source, ModuleMemberSource):
            node = self.graph.call_function(getattr, (base, source.key))
        else:
            raise Unsupported(f"stenograph.export cannot read {source.name()} inside a graph")
        self.nodes[source] = node
        return node


def _output_arg(var: Variable, val_map: dict[torch.fx.Node, torch.fx.Node], label: str) -> Any:
    """The returned tracker as an FX output argument (nodes, constants, tuples, lists, dicts)."""
    if isinstance(var, (TensorVariable, SymNodeVariable)):
        return val_map.get(var.node, var.node)
    if var.is_constant():
        return var.as_constant()
    if type(var) in (TupleVariable, ListVariable):
        items = [_output_arg(item, val_map, label) for item in var.items]
        return items if isinstance(var, ListVariable) else tuple(items)
    if isinstance(var, DictVariable) and var.python_type() is dict:
        return {key: _output_arg(value, val_map, label) for key, value in var.items.items()}
    raise Unsupported(
        f"stenograph.export: {label} returns {var.describe()}; an exported graph returns tensors, numbers "
        "and tuples, lists or dicts of them"
    )
