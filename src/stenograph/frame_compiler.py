"""Compiling one frame: trace its bytecode, compile the graph, generate guards and code.

This is the miss path of the entry wrapper (DESIGN "How a call flows"): everything here runs
once per cache entry, never per call.
"""

from __future__ import annotations

import inspect
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._guards
import torch.fx

from . import config, events, torch_state
from .backends.ddp_split import DdpSplit, active_ddp_module, compile_split
from .backends.float_restart import SpecialiseFloats, float_restart_requests
from .backends.lstm_training import lstm_training_decomposition
from .backends.recompute_regions import uncached_recompute_regions
from .bytecode.instructions import decoded
from .bytecode.resume_code import enclosing_with_statements, with_statement_start
from .errors import BackendCompilerFailed, BreakKind, StenographError, Unsupported
from .graph.breaks import BreakWriter, can_break_at
from .graph.codegen import build_returning
from .graph.output_graph import OutputGraph
from .graph.resume import frame_name
from .graph.runtime import Runtime
from .guards.failures import GuardFailure
from .guards.guard_set import same_literal
from .guards.pyfunc import signature_only
from .guards.sources import ClosureSource, LocalSource
from .interpreter.frame import Frame
from .shapes.dynamic import DynamicPolicy
from .shapes.exact_floats import exact_python_floats
from .shapes.fake import is_symbolic
from .shapes.guards import shape_guards
from .shapes.lifted import lift_aliased_input_symbols
from .variables.cells import Cell, LazyValue
from .variables.generators import has_cleanup
from .variables.global_contexts import close_abandoned
from .verify import verify_on_first_call


@dataclass(slots=True)
class CacheEntry:
    """One compiled version of a code object: run `fn` when `guard` passes."""

    guard: types.FunctionType
    fn: types.FunctionType
    graph: torch.fx.GraphModule | None
    guard_set: Any
    code: types.CodeType
    label: str
    capture_seconds: float
    backend_seconds: float
    _explainer: types.FunctionType | None = field(default=None, repr=False)
    like: types.FunctionType | None = field(default=None, repr=False)
    # weak references that drop this entry when a guarded object dies (set by the cache)
    watchers: list = field(default_factory=list, repr=False)
    compile_id: Any = None  # events.CompileId, set when the entry is published
    # the compiled function's defaults: `guard` and `fn` bind missing arguments to these, so a
    # function of the same code with other defaults must not use this entry
    defaults: tuple | None = field(default=None, repr=False)
    kwdefaults: dict | None = field(default=None, repr=False)

    def takes_defaults_of(self, fn: Any) -> bool:
        """Whether this entry may run a call of `fn`: compiled with the same defaults tuple and
        dict, or with equal literals (its guard and code bind missing arguments to them)."""
        d, k = fn.__defaults__, fn.__kwdefaults__
        return self.defaults is d and self.kwdefaults is k or self.same_defaults(d, k)

    def same_defaults(self, defaults: tuple | None, kwdefaults: dict | None) -> bool:
        """Whether a function with these defaults behaves like the one compiled: the same
        objects, or literals equal in type and value (-0.0 is not 0.0)."""
        mine, theirs = self.kwdefaults or {}, kwdefaults or {}
        return (
            _same_items(self.defaults or (), defaults or ())
            and mine.keys() == theirs.keys()
            and _same_items(tuple(mine.values()), tuple(theirs[k] for k in mine))
        )

    def guard_failure(self, args: tuple, kwargs: dict) -> GuardFailure | None:
        """The first check that fails for these arguments (built on demand: misses only)."""
        if self._explainer is None:
            self._explainer = self.guard_set.build_explainer(self.code, self.like, self.label)
        return self._explainer(*args, **kwargs)

    @property
    def ddp_split(self) -> DdpSplit | None:
        """How the entry's graph was split at DDP's gradient buckets (None: not split)."""
        return self.graph.meta.get("stenograph_ddp_split") if self.graph is not None else None

    @property
    def guard_source(self) -> str:
        return self.guard.__stenograph_source__

    @property
    def transformed_source(self) -> str:
        return self.fn.__stenograph_source__


def _same_items(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y or (type(x) in _LITERAL_TYPES and same_literal(x, y)) for x, y in zip(a, b))


_LITERAL_TYPES = frozenset({int, float, bool, str, bytes, complex, tuple, type(None)})
_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def frame_label(code: types.CodeType) -> str:
    return f"{frame_name(code)} at {code.co_filename}:{code.co_firstlineno}"


def compile_frame(
    fn: types.FunctionType,
    args: tuple,
    kwargs: dict,
    backend: Any,
    backend_name: str,
    fullgraph: bool = False,
    policy: DynamicPolicy | None = None,
    *,
    runtime: Runtime,
) -> CacheEntry:
    """Trace `fn(*args, **kwargs)` (a real call's arguments) and build a cache entry.

    A frame that meets an instruction it cannot capture is traced a second time up to that
    instruction, and gets a graph break there (unless `fullgraph`). Raises `Unsupported` when
    neither works and `BackendCompilerFailed` when the backend raises. `runtime` is the entry
    layer's wrappers, which a breaking frame's generated code calls.
    """
    start = time.perf_counter()
    code = fn.__code__
    label = frame_label(code)
    if code.co_flags & _GENERATOR_FLAGS:
        raise Unsupported(
            f"{code.co_qualname} is a generator or coroutine function; it runs eagerly", kind=BreakKind.GENERATOR
        )
    grad_mode = torch.is_grad_enabled()
    timing = {"backend": 0.0}
    graph_module: list[torch.fx.GraphModule] = []
    eager_generators: set[types.CodeType] = set()
    traces: list[OutputGraph] = []  # every trace made, whose real contexts close at the end
    while True:
        try:
            try:
                output, frame, result = _trace(fn, args, kwargs, None, policy, eager_generators, traces)
                compile_graph = _graph_compiler(output, backend, backend_name, label, timing, graph_module)
                inputs = [i.source for i in output.inputs]
                modes = (output.initial_grad_mode, torch.is_grad_enabled())
                transformed = build_returning(
                    code, fn, inputs, output.side_effects, result, compile_graph, label, modes, frame.line
                )
            except Unsupported as reason:
                if fullgraph or reason.break_index is None:
                    raise
                _close_abandoned(traces)
                torch._C._set_grad_enabled(grad_mode)
                output, frame, transformed = _compile_break(
                    fn,
                    args,
                    kwargs,
                    reason,
                    backend,
                    backend_name,
                    label,
                    timing,
                    graph_module,
                    policy,
                    eager_generators,
                    traces,
                    runtime,
                )
            break
        except Unsupported as reason:
            # a generator whose body cannot be traced is run for real instead (its call breaks),
            # unless it has cleanup code: resumed code would drop it (and run that) too late
            if fullgraph or reason.generator_code is None or reason.generator_code in eager_generators:
                raise
            if has_cleanup(reason.generator_code):
                reason.reason += f" (and generator {reason.generator_code.co_qualname} has try/with cleanup)"
                raise
            eager_generators.add(reason.generator_code)
            graph_module.clear()
        except SpecialiseFloats as request:
            # the backend wants these floats as constants: trace again with them specialised
            if policy is None or not policy.specialise([s.name() for s in request.sources]):
                raise BackendCompilerFailed(backend_name, request) from request
            graph_module.clear()
        finally:
            _close_abandoned(traces)
            torch._C._set_grad_enabled(grad_mode)
    output.guards.shape_relations(
        shape_guards(output.fake_mode.shape_env, [(i.fake, i.source) for i in output.inputs if i.symbolic])
    )
    output.guard_mutated_tensors_distinct()
    for graph_input in output.inputs:
        graph_input.example = None  # entries must not keep user tensors alive
    output.guard_mutated_containers_distinct()
    guard = output.guards.build(code, fn, label)
    backend_seconds = timing["backend"]
    capture_seconds = time.perf_counter() - start - backend_seconds
    gm = graph_module[0] if graph_module else None
    like = signature_only(fn)
    return CacheEntry(
        guard,
        transformed,
        gm,
        output.guards,
        code,
        label,
        capture_seconds,
        backend_seconds,
        like=like,
        defaults=fn.__defaults__,
        kwdefaults=fn.__kwdefaults__,
    )


@dataclass(slots=True)
class Capture:
    """A frame traced whole into one graph, not compiled (what `export` builds on)."""

    output: OutputGraph  # the graph (no output node yet), its inputs with their real values
    result: Any  # the returned tracker
    guard: types.FunctionType  # takes the frame's own arguments (closure cells first)
    end_grad_mode: bool  # grad mode where the function returns


def capture_frame(fn: types.FunctionType, args: tuple, kwargs: dict, policy: DynamicPolicy | None = None) -> Capture:
    """Trace `fn(*args, **kwargs)` as one graph: raises `Unsupported` at the first instruction
    that would need a graph break. Nothing is compiled or run; the inputs keep their real values."""
    code = fn.__code__
    if code.co_flags & _GENERATOR_FLAGS:
        raise Unsupported(f"{code.co_qualname} is a generator or coroutine function", kind=BreakKind.GENERATOR)
    grad_mode = torch.is_grad_enabled()
    traces: list[OutputGraph] = []
    try:
        with torch_state.preserved():
            output, _, result = _trace(fn, args, kwargs, None, policy, set(), traces)
            end_grad_mode = torch.is_grad_enabled()
            output.restore_grad_mode()
    finally:
        _close_abandoned(traces)
        torch._C._set_grad_enabled(grad_mode)
    output.guards.shape_relations(
        shape_guards(output.fake_mode.shape_env, [(i.fake, i.source) for i in output.inputs if i.symbolic])
    )
    output.guard_mutated_tensors_distinct()
    output.guard_mutated_containers_distinct()
    return Capture(output, result, output.guards.build(code, fn, frame_label(code)), end_grad_mode)


def _trace(
    fn: types.FunctionType,
    args: tuple,
    kwargs: dict,
    stop_index: int | None,
    policy: DynamicPolicy | None,
    eager_generators: set[types.CodeType],
    traces: list[OutputGraph],
) -> tuple[OutputGraph, Frame, Any]:
    output = OutputGraph(policy)
    traces.append(output)
    output.eager_generators = eager_generators
    local_values, cells = _root_state(fn, args, kwargs)
    frame = Frame(fn.__code__, fn.__globals__, local_values, cells, output, stop_index=stop_index)
    return output, frame, frame.run()


def _compile_break(
    fn: types.FunctionType,
    args: tuple,
    kwargs: dict,
    reason: Unsupported,
    backend: Any,
    backend_name: str,
    label: str,
    timing: dict,
    graph_module: list,
    policy: DynamicPolicy | None,
    eager_generators: set[types.CodeType],
    traces: list[OutputGraph],
    runtime: Runtime,
) -> tuple[OutputGraph, Frame, types.FunctionType]:
    """Trace again up to the unsupported instruction and build the breaking transformed code.

    Where no break is possible at the instruction because the `with` block around it has a context
    manager that cannot be rebuilt outside the graph (a `@contextmanager` generator, a torch mode),
    the break moves to that `with` statement: its `__enter__` runs eagerly and the block is traced
    by the resume function, which holds the real context manager. Where the context manager itself
    cannot be rebuilt (it holds a traced generator), the break moves to the call that made it.
    """
    index = reason.break_index
    assert index is not None
    code = fn.__code__
    inst = decoded(code).instructions[index]
    if not can_break_at(inst):
        raise reason
    dec = decoded(code)
    earlier = []
    for offset in enclosing_with_statements(code, inst.offset):
        enters = dec.index_of_offset[offset]
        earlier.append(enters)
        start = with_statement_start(dec, enters + 1)
        if start and dec.instructions[start - 1].opname == "CALL":
            earlier.append(start - 1)  # the call making the context manager: a real one then
    failure: Exception | None = None
    grad_mode = torch.is_grad_enabled()
    for at in [index, *earlier]:
        try:
            output, frame, transformed = _break_at(
                fn, args, kwargs, at, reason, backend, backend_name, label, timing, graph_module, policy,
                eager_generators, traces, runtime,
            )  # fmt: skip
        except (Unsupported, _NoBreakThere) as problem:
            failure = failure or problem
            _close_abandoned(traces)
            torch._C._set_grad_enabled(grad_mode)
            continue
        if at != index:
            assert isinstance(failure, (Unsupported, _NoBreakThere))
            why = failure.problem.reason if isinstance(failure, _NoBreakThere) else failure.reason
            reason.reason += f" (the graph breaks at the enclosing `with` statement instead: {why})"
        break
    else:
        if isinstance(failure, _NoBreakThere):
            reason.reason = f"{reason.reason} (and no graph break is possible there: {failure.problem.reason})"
            raise reason from failure.problem
        assert failure is not None
        raise failure
    internal = "".join(traceback.format_tb(reason.__traceback__))
    events.publish(
        events.GraphBreak(
            fn.__code__,
            label,
            reason.reason,
            list(reason.user_stack),
            reason.instruction or inst.opname,
            internal,
            kind=reason.kind,
        )
    )
    return output, frame, transformed


class _NoBreakThere(Exception):
    """The frame traced up to the instruction, but the break could not be written there."""

    def __init__(self, problem: Unsupported) -> None:
        super().__init__(problem.reason)
        self.problem = problem


def _break_at(
    fn: types.FunctionType,
    args: tuple,
    kwargs: dict,
    index: int,
    reason: Unsupported,
    backend: Any,
    backend_name: str,
    label: str,
    timing: dict,
    graph_module: list,
    policy: DynamicPolicy | None,
    eager_generators: set[types.CodeType],
    traces: list[OutputGraph],
    runtime: Runtime,
) -> tuple[OutputGraph, Frame, types.FunctionType]:
    """The breaking transformed code for a break before instruction `index`."""
    output, frame, result = _trace(fn, args, kwargs, index, policy, eager_generators, traces)
    if result is not None or frame.ip != index:
        raise reason  # the second trace did not stop where the first one failed
    try:
        writer = BreakWriter(frame, index, fn, backend, backend_name, runtime, compile_callees=not reason.eager_callee)
        # a create_graph=True backward at the break differentiates this graph's backward again
        graph_backend = backend
        if reason.kind is BreakKind.TWICE_DIFFERENTIABLE:
            graph_backend = _as_captured
            if "differentiable twice" not in reason.reason:
                reason.reason += " (create_graph=True: the graph before it runs as captured, differentiable twice)"
        compile_graph = _graph_compiler(output, graph_backend, backend_name, label, timing, graph_module)
        return output, frame, writer.build(compile_graph, [i.source for i in output.inputs], label)
    except Unsupported as problem:
        graph_module.clear()
        raise _NoBreakThere(problem) from problem


def _close_abandoned(traces: list[OutputGraph]) -> None:
    """Exit the real contexts still open in `traces`, the newest trace first."""
    for output in reversed(traces):
        close_abandoned(output)
    traces.clear()


def _as_captured(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
    """Run a graph as captured: autograd records its ops one by one, differentiable twice."""
    return gm.forward


def _graph_compiler(
    output: OutputGraph,
    backend: Any,
    backend_name: str,
    label: str,
    timing: dict,
    graph_module: list,
) -> Any:
    """The callback codegen calls once the graph's outputs are known."""

    def compile_graph(outputs: list[torch.fx.Node]) -> Any:
        if output.op_count() == 0:
            return None
        output.restore_grad_mode()
        output.graph.output(tuple(outputs))
        root = torch.nn.Module()
        for name, submodule in output.submodules.items():
            root.add_module(name, submodule)
        gm = torch.fx.GraphModule(root, output.graph, class_name="StenographGraph")
        gm.meta["stenograph_frame"] = label
        graph_module.append(gm)
        # symbolic ints/floats go to the backend as the SymInt/SymFloat the trace used (as torch.compile
        # does): AOTAutograd would otherwise make a fresh symbol whose guards no entry checks
        example_inputs = [i.fake if is_symbolic(i.fake) else i.example for i in output.inputs]
        float_sources = [i.source for i in output.inputs if isinstance(i.fake, torch.SymFloat)]
        # inputs that alias another input take their symbols along as inputs of their own (lifted.py)
        backend_gm, backend_inputs, unlift = lift_aliased_input_symbols(
            gm, example_inputs, [i.fake for i in output.inputs]
        )
        t0 = time.perf_counter()
        try:
            # backends that re-trace (AOTAutograd, Inductor) find our fake mode and ShapeEnv here
            with (
                torch._guards.tracing(torch._guards.TracingContext(output.fake_mode)),
                lstm_training_decomposition(gm, example_inputs),
                uncached_recompute_regions(gm),
                float_restart_requests(float_sources),
            ):
                ddp = active_ddp_module() if config.optimize_ddp else None
                if ddp is None:
                    compiled = backend(backend_gm, backend_inputs)
                else:
                    compiled, split = compile_split(backend_gm, backend_inputs, backend, ddp)
                    if split is not None:
                        gm.meta["stenograph_ddp_split"] = split
        except StenographError:
            raise
        except Exception as e:
            raise BackendCompilerFailed(backend_name, e) from e
        finally:
            timing["backend"] += time.perf_counter() - t0
        if not callable(compiled):
            problem = TypeError(f"backend returned {type(compiled).__name__}, not a callable")
            raise BackendCompilerFailed(backend_name, problem)
        compiled = unlift(compiled)
        # floats computed from Python numbers alone: as Python computes them (exact_floats.py)
        exact = exact_python_floats(gm)
        if exact is not None:
            compiled = exact(compiled)
        if config.verify_correctness:
            compiled = verify_on_first_call(gm, compiled, backend_name)
        return compiled

    return compile_graph


def accepts(fn: types.FunctionType, args: tuple, kwargs: dict) -> bool:
    """Whether Python binds these arguments to `fn`'s parameters (a call that does not raises
    TypeError before the body runs: there is nothing to compile)."""
    try:
        inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _root_state(fn: types.FunctionType, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Cell]]:
    """Lazy locals and cells of the frame being compiled, each with its source."""
    bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    bound.apply_defaults()
    code = fn.__code__
    local_values: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if name not in code.co_varnames and name.startswith("implicit"):
            name = "." + name.removeprefix("implicit")  # inspect's name for a comprehension's `.0`
        local_values[name] = LazyValue(value, LocalSource(name))
    cells: dict[str, Cell] = {}
    for name in code.co_cellvars:
        cells[name] = Cell(local_values.pop(name, None))
        cells[name].owner = (code, name)
    for index, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
        try:
            cells[name] = Cell(LazyValue(cell.cell_contents, ClosureSource(index, name)), cell)
            cells[name].root_index = index
        except ValueError:
            cells[name] = Cell(None, cell)
            cells[name].root_index = index
    return local_values, cells
