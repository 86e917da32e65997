"""`export(fn)(*args, **kwargs)`: one FX graph of a whole function, and the guards it assumes.

Mirrors `torch._dynamo.export`: the graph module takes the function's own parameters (a module's
forward without `self`) and returns what the function returns, so calling it with the same
arguments gives eager's result; with `aten_graph=True` its operations are ATen operators, as
`make_fx` records the captured graph. Parameters and buffers of an exported module are attributes
of the graph module (the same tensors, under their qualified names); tensors read from globals or
closures are held as constants. A function that needs a graph break raises `Unsupported` naming
every break: it is then run once, with breaks, to find them all. While it traces,
`is_exporting()` is True.
"""

from __future__ import annotations

import inspect
import operator
import re
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.autograd import grad_mode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo
from torch.utils._pytree import MappingKey, SequenceKey

from . import api, config, entry, events
from .errors import Unsupported
from .export_shapes import DeclaredDim, check_dims, declared_bounds, read_spec
from .frame_compiler import Capture, capture_frame, frame_label
from .graph.resume import dynamic_arguments
from .guards.pyfunc import signature_only
from .guards.sources import AttrSource, ItemSource, LocalSource, ModuleMemberSource, Source
from .marks import exporting
from .shapes.dynamic import DynamicPolicy
from .variables.base import Variable
from .variables.containers import DictVariable, ListVariable, TupleVariable
from .variables.symbolic import GraphValueVariable


class ExportGuards:
    """The checks the exported graph relies on (shapes, dtypes, constants it specialised on).

    Iterating gives each check as text; `check(*args, **kwargs)` says whether arguments satisfy
    them all, i.e. whether the graph module is valid for that call, and `failure(...)` which
    check they fail. `constraints` says, for each dimension `dynamic_shapes=` declared, what the
    trace made of it (`L['x'].size()[0]: batch in [2, 1024]`)."""

    def __init__(
        self,
        texts: list[str],
        guard: types.FunctionType,
        explainer: Callable,
        prefix: tuple,
        constraints: list[str] | None = None,
    ) -> None:
        self.texts = texts
        self._guard = guard
        self._explainer = explainer
        self._prefix = prefix
        self.constraints = constraints or []

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


# torch._dynamo.export's arguments that stenograph does not take, and why
_EXPORT_NOT_TAKEN = {
    "specialize_float": "float arguments are specialised (torch's default for export)",
    "constraints": "declare dynamic sizes with dynamic_shapes=",
    "disable_constraint_solver": "dynamic_shapes= declarations are checked by the trace itself",
    "prefer_deferred_runtime_asserts_over_guards": "sizes are guarded (ExportGuards)",
}
_TRACING_MODES = ("symbolic", "fake", "real")
_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD


def export(
    fn: Callable,
    *extra_args: Any,
    aten_graph: bool = False,
    pre_dispatch: bool = False,
    decomposition_table: dict | None = None,
    tracing_mode: str = "symbolic",
    dynamic: bool | None = None,
    dynamic_shapes: Any = None,
    assume_static_by_default: bool | None = None,
    same_signature: bool = True,
    **extra_kwargs: Any,
) -> Callable[..., ExportResult]:
    """`export(fn)(*args, **kwargs)` -> `ExportResult(graph_module, guards)` for a function, a
    bound method, an `nn.Module` (its forward) or a compiled one of those; torch._dynamo.export's
    arguments (torch 2.13's behaviour is the contract).

    `aten_graph=True` gives the graph in ATen operators (as `make_fx` records them, with
    `decomposition_table` applied; `pre_dispatch=True`: as autograd sees them, keeping
    grad-mode switches, which a graph that switches grad mode always is). `dynamic_shapes`
    declares dynamic dimensions as torch.export does (`export_shapes`), the others static. With
    neither it nor `dynamic`, sizes are symbolic, ints and floats constants, as torch._dynamo's
    export (`assume_static_by_default=False`); `assume_static_by_default=True` keeps sizes static
    unless marked (`mark_dynamic`). `dynamic` as in `compile`: True makes every size and int
    argument symbolic, False none, None the marked ones. `tracing_mode` "fake" or "real" keeps
    sizes static, as torch's, "symbolic" (the default) leaves that to the other arguments.
    `export(fn, *args, **kwargs)`, torch's older form, warns and exports.

    The graph module is called as `fn` is (`same_signature=True`, torch's default); with
    `same_signature=False` it takes the tensors and symbolic sizes the graph reads from the
    arguments, flattened in the order it reads them, and returns the flat tuple of the tensors
    and numbers it computes, as torch's graph without its signature rewrite."""
    not_taken = {k: _EXPORT_NOT_TAKEN[k] for k in extra_kwargs if k in _EXPORT_NOT_TAKEN}
    if not_taken:
        reasons = "; ".join(f"{k}: {why}" for k, why in not_taken.items())
        raise TypeError(f"stenograph.export() does not take {', '.join(not_taken)} ({reasons})")
    if dynamic not in (None, False, True):
        raise TypeError(f"stenograph.export(dynamic=...) takes None, True or False, not {dynamic!r}")
    if dynamic is not None and dynamic_shapes is not None:
        raise TypeError("stenograph.export() takes dynamic= or dynamic_shapes=, not both")
    if assume_static_by_default is not None and (dynamic is not None or dynamic_shapes is not None):
        raise TypeError("stenograph.export() takes assume_static_by_default= or dynamic=/dynamic_shapes=, not both")
    if tracing_mode not in _TRACING_MODES:
        raise ValueError(f"stenograph.export(tracing_mode=...) takes {', '.join(_TRACING_MODES)}, not {tracing_mode!r}")
    if (decomposition_table is not None or pre_dispatch) and not aten_graph:
        raise ExportArgumentError("stenograph.export(decomposition_table=..., pre_dispatch=...) need aten_graph=True")
    if tracing_mode != "symbolic":
        assume_static_by_default = True
    elif assume_static_by_default is None and dynamic is None and dynamic_shapes is None:
        assume_static_by_default = False  # torch._dynamo.export's default: every size symbolic
    settings = {} if assume_static_by_default is None else _SIZES[assume_static_by_default]
    function, bound_self = _target(fn)

    def run(*args: Any, **kwargs: Any) -> ExportResult:
        full = (bound_self, *args) if bound_self is not None else args
        code = function.__code__
        declared = [] if dynamic_shapes is None else _declared(function, bound_self, full, kwargs, dynamic_shapes)
        policy = DynamicPolicy(dynamic, dynamic_arguments(code), declared_bounds(declared))
        try:
            with exporting.on(), config.patch(settings):
                captured = capture_frame(function, full, kwargs, policy)
        except Unsupported as first:
            raise _every_break(fn, args, kwargs, first, frame_label(code)) from None
        constraints = check_dims(declared, captured.output.inputs, captured.output.fake_mode.shape_env)
        module = bound_self if isinstance(bound_self, torch.nn.Module) else None
        decompositions = decomposition_table or {} if aten_graph else None
        graph_module = _graph_module(
            function,
            captured,
            module,
            frame_label(code),
            decompositions,
            pre_dispatch,
            same_signature,
            _Call(args, kwargs, bound_self is not None),
        )
        prefix = (function.__closure__,) if code.co_freevars else ()
        if bound_self is not None:
            prefix = (*prefix, bound_self)
        guard_set = captured.output.guards
        texts = [check.text for check in guard_set.ordered()]
        explainer = guard_set.build_explainer(code, signature_only(function), frame_label(code))
        return ExportResult(graph_module, ExportGuards(texts, captured.guard, explainer, prefix, constraints))

    if extra_args or extra_kwargs:
        warnings.warn(_OLD_CALL_FORM.format("export"), FutureWarning, stacklevel=2)
        return run(*extra_args, **extra_kwargs)  # type: ignore[return-value]
    return run


#: torch._dynamo's words for `export(fn, *args)`/`explain(fn, *args)`, which it still runs
_OLD_CALL_FORM = "{0}(f, *args, **kwargs) is deprecated, use {0}(f)(*args, **kwargs) instead."


class ExportArgumentError(TypeError, AssertionError):
    """Export arguments that do not go together: a TypeError, and the AssertionError torch._dynamo's
    export raises for them."""


# the settings a trace runs under for `assume_static_by_default=` (torch's export specialises
# ints and floats whatever it does with sizes)
_SIZES = {
    True: {"assume_static_by_default": True, "automatic_dynamic_shapes": False},
    False: {
        "assume_static_by_default": False,
        "automatic_dynamic_shapes": False,
        "specialize_int": True,
        "specialize_float": True,
    },
}


def _declared(function: types.FunctionType, bound_self: Any, args: tuple, kwargs: dict, spec: Any) -> list[DeclaredDim]:
    """`dynamic_shapes` read against the call's arguments (by the parameters of `function`,
    less the bound `self`)."""
    signature = inspect.signature(function, follow_wrapped=False)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(
            f"stenograph.export: the arguments do not fit {function.__qualname__}{signature}: {e}"
        ) from None
    bound.apply_defaults()
    parameters = list(signature.parameters.values())[1 if bound_self is not None else 0 :]
    return read_spec(parameters, bound.arguments, spec)


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
    fn: types.FunctionType,
    captured: Capture,
    module: torch.nn.Module | None,
    label: str,
    decompositions: dict | None,
    pre_dispatch: bool,
    same_signature: bool = True,
    call: _Call | None = None,
) -> torch.fx.GraphModule:
    """The traced graph called as the function is (or, without `same_signature`, taking the
    values it reads from the arguments and returning a flat tuple); in ATen operators when
    `decompositions` is a table (possibly empty), recorded before dispatch if `pre_dispatch`.

    Called as the function is, the graph is torch._dynamo.export's: its placeholders are the
    call's arguments flattened by pytree (`(args, kwargs)`, the `in_spec`), its output the
    flattened result (`out_spec`), and a `_PyTreeCodeGen` gives `forward` the argument names
    and does the flattening, so `gm(*args, **kwargs)` and `Interpreter(gm).run(*flat)` both work.
    Where an input is read through something pytree does not flatten as the trace reads it,
    the placeholders are the parameters themselves (read item by item in the graph)."""
    if same_signature and call is not None:
        try:
            return _graph_module_of(fn, captured, module, label, decompositions, pre_dispatch, call)
        except _NotFlat:
            pass
    return _graph_module_of(fn, captured, module, label, decompositions, pre_dispatch, None, same_signature)


class _Call(NamedTuple):
    """The exported call: the user's arguments, and whether the traced function receives a bound
    `self` before them (a method)."""

    args: tuple
    kwargs: dict
    bound: bool


class _NotFlat(Exception):
    """(internal) An input is read from an argument by a path its pytree leaves do not give."""


def _graph_module_of(
    fn: types.FunctionType,
    captured: Capture,
    module: torch.nn.Module | None,
    label: str,
    decompositions: dict | None,
    pre_dispatch: bool,
    call: _Call | None,
    same_signature: bool = True,
) -> torch.fx.GraphModule:
    output = captured.output
    if output.side_effects:
        raise Unsupported(
            f"stenograph.export: {label} changes Python objects outside it (lists, dicts, attributes or "
            "globals), which a graph cannot do",
            hint="return the new values instead of storing them",
        )
    if output.side_effects.warnings:
        raise Unsupported(f"stenograph.export: {label} issues a warning, which a graph cannot do")
    for flag, value in captured.end_flags.items():
        if value != output.initial_flags[flag]:
            raise Unsupported(f"stenograph.export: {label} leaves {flag.name} switched, which a graph cannot do")
    graph = torch.fx.Graph()
    builder = _InputBuilder(fn, graph, module, same_signature, call)
    inputs = [builder.node_for(i.source, i.example) for i in output.inputs]
    for graph_input, node in zip(output.inputs, inputs):
        if node.op == "placeholder":
            node.meta.setdefault("val", graph_input.fake)  # as torch's export graphs have it
    if decompositions is None:
        val_map = dict(zip((i.node for i in output.inputs), inputs))
        graph.graph_copy(output.graph, val_map)
        attributes: dict[str, Any] = dict(output.submodules)
    else:
        val_map, attributes = _aten_copy(graph, captured, inputs, decompositions, pre_dispatch, label)
    if call is not None:
        flat, out_spec = pytree.tree_flatten(_output_arg(captured.result, val_map, label))
        graph.output(flat)
        names = builder.argument_names
        graph._codegen = _PyTreeCodeGen(_PyTreeInfo(names, builder.in_spec, out_spec))
    elif same_signature:
        graph.output(_output_arg(captured.result, val_map, label))
    else:
        results = dict.fromkeys(_result_nodes(captured.result, label))
        graph.output(tuple(val_map.get(node, node) for node in results))
    graph_module = torch.fx.GraphModule({**attributes, **builder.attributes}, graph, class_name="StenographExport")
    graph_module.meta["stenograph_frame"] = label
    return graph_module


def _aten_copy(
    graph: torch.fx.Graph,
    captured: Capture,
    inputs: list[torch.fx.Node],
    decompositions: dict,
    pre_dispatch: bool,
    label: str,
) -> tuple[dict[torch.fx.Node, Any], dict[str, Any]]:
    """The captured graph recorded again in ATen operators by `make_fx` (on the trace's fake
    inputs, so symbolic sizes stay symbolic) and copied into `graph` reading `inputs`; which
    node or value of it stands for each node the result reads, and the attributes it reads.

    Below autograd (the default) a grad-mode switch leaves no trace, so a graph that switches
    grad mode is recorded before dispatch (`pre_dispatch`), which keeps the switches: its
    operators are then those autograd sees (`aten.linear`, not `aten.addmm`)."""
    output = captured.output
    targets = {n.target for n in output.graph.nodes if n.op == "call_function"}
    if grad_mode._enter_inference_mode in targets:
        raise Unsupported(
            f"stenograph.export(aten_graph=True): {label} enters torch.inference_mode, which an ATen graph "
            "does not record (its outputs would track gradients)",
            hint="export without aten_graph, or leave inference_mode out of the function",
        )
    switches_grad_mode = torch._C._set_grad_enabled in targets
    results = list(dict.fromkeys(_result_nodes(captured.result, label)))
    flat = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    flat.graph_copy(output.graph, copies)
    flat.output(tuple(copies[n] for n in results))
    flat_module = torch.fx.GraphModule(dict(output.submodules), flat)

    def run(*args: Any) -> Any:
        with torch.fx.traceback.preserve_node_meta():
            return torch.fx.Interpreter(flat_module).run(*args)

    # (a tracing context: torch's `invoke_subgraph` records one subgraph per region there)
    context = torch._guards.TracingContext(output.fake_mode)
    with unset_fake_temporarily(), enable_python_dispatcher(), torch._guards.tracing(context), output.fake_mode:
        aten = make_fx(
            run,
            decomposition_table=decompositions,
            tracing_mode="real",
            _allow_non_fake_inputs=True,
            pre_dispatch=pre_dispatch or switches_grad_mode,
        )(*[i.fake for i in output.inputs])
    placeholders = aten.graph.find_nodes(op="placeholder")
    copied = graph.graph_copy(aten.graph, dict(zip(placeholders, inputs)))
    attributes = {n.target: getattr(aten, n.target) for n in aten.graph.find_nodes(op="get_attr")}
    return dict(zip(results, copied)), attributes


def _result_nodes(var: Variable, label: str) -> list[torch.fx.Node]:
    """The nodes of the traced graph that the returned value reads, in order."""
    nodes: list[torch.fx.Node] = []
    torch.fx.node.map_arg(_output_arg(var, {}, label), nodes.append)
    return nodes


class _InputBuilder:
    """Makes, in the export graph, the node that reads each input of the traced graph: from the
    function's parameters, or (not `same_signature`) a placeholder of its own."""

    def __init__(
        self,
        fn: types.FunctionType,
        graph: torch.fx.Graph,
        module: torch.nn.Module | None,
        same_signature: bool,
        call: _Call | None = None,
    ) -> None:
        self.graph = graph
        self.same_signature = same_signature
        self.passed: set[str] = set()  # parameters given placeholders per pytree leaf
        self.nodes: dict[Source, torch.fx.Node] = {}
        self.attributes: dict[str, Any] = {}
        self.members: dict[int, str] = {}
        self.module = module
        parameters = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
        if module is not None:
            parameters = parameters[1:]
            named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
            self.members = {id(tensor): name for name, tensor in reversed(named)}
        self.parameters = {p.name for p in parameters}
        if call is not None:
            self._leaves(fn, call)
            return
        for p in parameters if same_signature else ():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise Unsupported(f"stenograph.export needs named parameters; {fn.__qualname__} takes {p}")
            default = inspect.Signature.empty if p.default is p.empty else p.default
            self.nodes[LocalSource(p.name)] = graph.placeholder(p.name, default_value=default)

    def _leaves(self, fn: types.FunctionType, call: _Call) -> None:
        """One placeholder per pytree leaf of `(args, kwargs)`, as torch's export graph has,
        each known by the source the trace reads it through (a parameter, or an item of `*args`
        or `**kwargs`); `forward`'s parameters named as torch names them (`_argument_names`)."""
        tops, by_keyword = _argument_sources(inspect.signature(fn, follow_wrapped=False), call)
        self.argument_names = _argument_names(fn, call)
        self.passed = {self._root_name(source) for source in [*tops, *by_keyword.values()]}
        leaves, self.in_spec = pytree.tree_flatten_with_path((call.args, call.kwargs))
        for index, (path, _) in enumerate(leaves):
            source = _leaf_source(path, tops, by_keyword)
            node = self.graph.placeholder(f"arg{index}")
            if source is not None:
                self.nodes.setdefault(source, node)

    def node_for(self, source: Source, value: Any) -> torch.fx.Node:
        member = self.members.get(id(value)) if isinstance(value, torch.Tensor) else None
        if member is not None:
            self.attributes[member] = value
            node = self.graph.get_attr(member)
            node.meta["nn_module_stack"] = self._owners(member)
            return node
        if not self.same_signature and self._from_parameter(source):
            return self.graph.placeholder(re.sub(r"\W+", "_", source.name()))  # L['x'][0] -> L_x_0_, as torch names it
        path = self._path(source)
        if path is not None:
            return path
        if self._root_name(source) in self.passed:
            raise _NotFlat  # read from an argument, but not through its leaves
        if isinstance(value, torch.Tensor):
            name = f"_const_{len(self.attributes)}"
            self.attributes[name] = value
            return self.graph.get_attr(name)
        raise Unsupported(f"stenograph.export: {source.name()} is a symbolic number not read from an argument")

    def _owners(self, member: str) -> dict[str, tuple[str, type]]:
        """The module stack of a parameter or buffer (`block.lin.weight`): the submodules
        holding it, named as the traced graph's nodes name them (`L['self'].block.lin`)."""
        assert self.module is not None
        owners: dict[str, tuple[str, type]] = {}
        path = "L['self']"
        parts = member.split(".")[:-1]
        for depth in range(1, len(parts) + 1):
            path = f"{path}.{parts[depth - 1]}"
            owner = self.module.get_submodule(".".join(parts[:depth]))
            owners[re.sub(r"[^a-zA-Z0-9_]", "_", path)] = (path, type(owner))
        return owners

    def _from_parameter(self, source: Source) -> bool:
        """Whether `source` reads a parameter of the function (possibly nested in it)."""
        return self._root_name(source) in self.parameters

    @staticmethod
    def _root_name(source: Source) -> str | None:
        """The local `source` starts from, if it starts from one."""
        while source.base() is not None:
            source = source.base()
        return source.local_name if isinstance(source, LocalSource) else None

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


def _argument_sources(signature: inspect.Signature, call: _Call) -> tuple[list[Source], dict[str, Source]]:
    """Where the traced function receives each argument of the call: a parameter, or an item of
    its `*args` or `**kwargs` (found by binding stand-ins as Python binds the arguments)."""
    positional = [object() for _ in call.args]
    keyword = {k: object() for k in call.kwargs}
    try:
        bound = signature.bind(*([object()] if call.bound else []), *positional, **keyword)
    except TypeError:
        raise _NotFlat from None
    where: dict[int, Source] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            where.update({id(v): ItemSource(LocalSource(name), i) for i, v in enumerate(value)})
        elif kind == inspect.Parameter.VAR_KEYWORD:
            where.update({id(v): ItemSource(LocalSource(name), k) for k, v in value.items()})
        else:
            where[id(value)] = LocalSource(name)
    return [where[id(m)] for m in positional], {k: where[id(m)] for k, m in keyword.items()}


def _argument_names(fn: types.FunctionType, call: _Call) -> list[str]:
    """The graph module's parameter names, as torch._dynamo.export's: the names of the user's
    signature (a decorated function's original one, through `__wrapped__`, `self` left out) for
    the positional arguments, `{args}_{i}` for those its `*args` takes, then the keywords."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a `__wrapped__`/`__signature__` inspect cannot read: the function's own
        parameters = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
    if call.bound and parameters and parameters[0].kind in (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD):
        parameters = parameters[1:]
    positional = [p.name for p in parameters if p.kind in (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in parameters if p.kind == inspect.Parameter.VAR_POSITIONAL), "args")
    extra = [f"{star}_{i}" for i in range(len(call.args) - len(positional))]
    return [*positional[: len(call.args)], *extra, *call.kwargs]


def _leaf_source(path: tuple, tops: list[Source], by_keyword: dict[str, Source]) -> Source | None:
    """The source the trace reads a pytree leaf through, from its key path in `(args, kwargs)`
    (None for a path through something other than sequence items and dict keys)."""
    first, second, *rest = path
    if isinstance(second, SequenceKey) and first.idx == 0:
        source: Source = tops[second.idx]
    elif isinstance(second, MappingKey) and first.idx == 1:
        source = by_keyword[second.key]
    else:
        return None
    for key in rest:
        if isinstance(key, SequenceKey):
            source = ItemSource(source, key.idx)
        elif isinstance(key, MappingKey):
            source = ItemSource(source, key.key)
        else:
            return None
    return source


def _output_arg(var: Variable, val_map: dict[torch.fx.Node, torch.fx.Node], label: str) -> Any:
    """The returned tracker as an FX output argument (nodes, constants, tuples, lists, dicts)."""
    if isinstance(var, GraphValueVariable):
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
