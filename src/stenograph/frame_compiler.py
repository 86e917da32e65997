"""Compiling one frame: trace its bytecode, compile the graph, generate guards and code.

This is the miss path of the entry wrapper (DESIGN "How a call flows"): everything here runs
once per cache entry, never per call.
"""

from __future__ import annotations

import contextlib
import dis
import inspect
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch._guards
import torch.fx

from . import config, events, torch_flags, torch_state
from .backends.artifacts import compile_with_artifact
from .backends.ddp_split import DdpSplit, active_ddp_module, compile_split
from .backends.float_restart import SpecialiseFloats, float_restart_requests
from .backends.lstm_training import lstm_training_decomposition
from .backends.recompute_regions import uncached_recompute_regions
from .bytecode.instructions import decoded
from .bytecode.resume_code import enclosing_with_statements, only_with_blocks, with_statement_start
from .errors import BackendCompilerFailed, BreakKind, FullgraphBreak, StenographError, TraceAgain, Unsupported
from .function_mode_stack import program_has_handlers, without_handlers
from .graph.breaks import BreakWriter, can_break_at
from .graph.codegen import build_returning
from .graph.output_graph import OutputGraph
from .graph.resume import frame_name
from .graph.runtime import Runtime
from .guards.failures import GuardFailure
from .guards.guard_filter import apply_guard_filter
from .guards.guard_set import same_literal
from .guards.pyfunc import signature_only
from .guards.sources import AttrSource, ClosureSource, LocalSource
from .interpreter.frame import Frame
from .shapes.dynamic import DynamicPolicy, marked_bounds
from .shapes.exact_floats import exact_python_floats
from .shapes.fake import input_symbols, is_symbolic
from .shapes.guards import broken_unbacked_facts, shape_guards
from .shapes.lifted import lift_aliased_input_symbols
from .variables.cells import Cell, LazyValue
from .variables.generators import has_cleanup, unclosed_refusal
from .variables.global_contexts import close_abandoned
from .verify import reference_copy, verify_on_first_call

# where a graph break goes: (code, instruction index) of each frame from the compiled one to the
# one that runs the instruction eagerly (one entry: a break in the compiled frame itself)
BreakPath = tuple[tuple[types.CodeType, int], ...]


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
    # for the persisted cache (`warm/`): the compiled graph the code holds and the backend's
    # artifact of it, or why it cannot be stored; None: the entry holds no graph
    artifact: tuple[Any, bytes] | str | None = field(default=None, repr=False)
    installed: bool = False  # made by another process, installed from the persisted cache

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


@dataclass(frozen=True, slots=True)
class FrameCall:
    """A call the tracer starts from: the function, the call's real arguments and the frame
    cache's dynamic-shape policy."""

    fn: types.FunctionType
    args: tuple
    kwargs: dict
    policy: DynamicPolicy | None = None
    # whether the caller is handling an exception (None: not known): the `__context__` of one
    # the frame raises while handling none of its own, and what `sys.exc_info()` answers there
    caller_handles: bool | None = None
    fullgraph: bool = False  # a graph break is an error

    @property
    def code(self) -> types.CodeType:
        return self.fn.__code__

    @property
    def label(self) -> str:
        return frame_label(self.fn.__code__)


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameCompile(FrameCall):
    """One miss's compile of a frame, handed whole down the steps of `compile_frame`.

    `runtime` is the entry layer's wrappers, which a breaking frame's generated code calls.
    """

    backend: Any
    backend_name: str
    runtime: Runtime
    persist: bool = False  # keep the backend's artifact of the graph, for the persisted cache


@dataclass(frozen=True, slots=True)
class Compiled:
    """What a step of `compile_frame` built, returned up to it."""

    output: OutputGraph  # the trace the entry is made of (its guards, its inputs)
    transformed: types.FunctionType
    graph: torch.fx.GraphModule | None  # the graph the backend compiled (None: no ops, no call)
    # seconds in the backend: a step's own call; as `_compile_until_built` returns it, every call
    # of the compile, given-up attempts' too (a restart may be asked for from inside the backend)
    backend_seconds: float
    artifact: tuple[Any, bytes] | str | None = None  # `CacheEntry.artifact`


def compile_frame(request: FrameCompile) -> CacheEntry:
    """Trace `request.fn(*request.args, **request.kwargs)` (a real call's arguments) and build a
    cache entry.

    A frame that meets an instruction it cannot capture is traced a second time up to that
    instruction, and gets a graph break there (unless `request.fullgraph`). Raises `Unsupported`
    when neither works and `BackendCompilerFailed` when the backend raises.
    """
    start = time.perf_counter()
    _refuse_generators(request.code, "; it runs eagerly")
    # what the backend can start in the background while the frame is traced (Inductor's
    # kernel-compiling processes: backends/inductor.py)
    before_tracing = getattr(request.backend, "before_tracing", None)
    if before_tracing is not None:
        before_tracing()
    with _one_compile(request.policy):
        compiled = _compile_until_built(request)
    output = compiled.output
    _guard_relations(output)
    guard_filter = getattr(request.backend, "guard_filter_fn", None)
    if guard_filter is not None:
        apply_guard_filter(output.guards, guard_filter, request.fn, request.args, request.kwargs)
    for graph_input in output.inputs:
        graph_input.example = None  # entries must not keep user tensors alive
    guard = output.guards.build(request.code, request.fn, request.label)
    capture_seconds = time.perf_counter() - start - compiled.backend_seconds
    return CacheEntry(
        guard,
        compiled.transformed,
        compiled.graph,
        output.guards,
        request.code,
        request.label,
        capture_seconds,
        compiled.backend_seconds,
        like=signature_only(request.fn),
        defaults=request.fn.__defaults__,
        kwdefaults=request.fn.__kwdefaults__,
        artifact=compiled.artifact,
    )


def _refuse_generators(code: types.CodeType, consequence: str = "") -> None:
    """A generator or coroutine frame is not traced (its body runs between its callers')."""
    if code.co_flags & _GENERATOR_FLAGS:
        raise Unsupported(
            f"{code.co_qualname} is a generator or coroutine function{consequence}", kind=BreakKind.GENERATOR
        )


def _guard_relations(output: OutputGraph) -> None:
    """The guards on how the inputs relate, known once the trace is final: their size
    symbols, storage shared by a tensor changed in place, objects one or distinct."""
    symbolic = [i for i in output.inputs if i.symbolic]
    marks = [marked_bounds(i.example) if isinstance(i.example, torch.Tensor) else {} for i in symbolic]
    inputs = [(i.fake, i.source) for i in symbolic]
    # a view's base is fakeified with size symbols of its own; one no input carries (a relation
    # AOTAutograd makes when it merges two views of one tensor changed in place may name it)
    # needs the base's source. A base whose symbols the inputs carry adds nothing but guards on
    # its duck-sized equalities, which nothing relies on
    carried = set().union(*(input_symbols(fake) for fake, _ in inputs))
    bases = [
        (i.fake._base, AttrSource(i.source, "_base"))
        for i in symbolic
        if isinstance(i.fake, torch.Tensor) and i.fake._base is not None and input_symbols(i.fake._base) - carried
    ]
    relations = shape_guards(output.fake_mode.shape_env, inputs + bases, marks + [{}] * len(bases))
    output.guards.shape_relations(relations)
    output.guard_mutated_tensors_distinct()
    output.guard_arrays_apart()
    output.guard_keyed_inputs_distinct()
    output.guard_object_identities()


@contextlib.contextmanager
def _one_compile(policy: DynamicPolicy | None) -> Iterator[None]:
    """A compile's scope: backed sizes where unbacked ones were broken (`_require_unbacked_facts`)
    hold for it only; the next compile starts unbacked again."""
    try:
        yield
    finally:
        if policy is not None:
            policy.backed_only = False


def _require_unbacked_facts(output: OutputGraph, policy: DynamicPolicy | None) -> None:
    """Trace again with backed sizes where this call's inputs break what the trace took for
    granted of its unbacked ones (shapes/guards.py): its guards would reject the very call."""
    symbolic = [(i.fake, i.example) for i in output.inputs if i.symbolic]
    broken = broken_unbacked_facts(output.fake_mode.shape_env, symbolic)
    if broken:
        assert policy is not None and not policy.backed_only  # only a policy makes sizes unbacked
        policy.backed_only = True
        raise TraceAgain(f"this call breaks what the trace took for granted of unbacked sizes: {', '.join(broken)}")


class _Attempts:
    """What the traces of one compile share (a graph break or a restart traces the frame again):
    the generators found to run for real, the traces whose real contexts are still open, the
    process flags (`torch_flags`) each attempt starts in, and every graph compiler made, whose
    backend time counts whether or not its attempt was given up."""

    def __init__(self) -> None:
        self.eager_generators: set[types.CodeType] = set()
        self.flags = torch_flags.current()
        self._open: list[OutputGraph] = []
        self._compilers: list[_GraphCompiler] = []
        self.restarts = 0  # traces given up to see state the trace changed (`TraceAgain`)

    def trace(
        self, call: FrameCall, stop_index: int | None = None, stop_path: BreakPath | None = None
    ) -> tuple[OutputGraph, Frame, Any]:
        """Trace the call (up to instruction `stop_index`, or up to the end of `stop_path` in an
        inlined call): its graph, frame and returned tracker."""
        output = OutputGraph(call.policy, call.caller_handles, breaks_allowed=not call.fullgraph)
        self._open.append(output)
        output.eager_generators = self.eager_generators
        local_values, cells = _root_state(call.fn, call.args, call.kwargs)
        frame = Frame(
            call.code, call.fn.__globals__, local_values, cells, output, stop_index=stop_index, stop_path=stop_path
        )
        result = frame.run()
        _require_unbacked_facts(output, call.policy)
        return output, frame, result

    def graph_compiler(self, request: FrameCompile, output: OutputGraph, backend: Any) -> _GraphCompiler:
        compiler = _GraphCompiler(request, output, backend)
        self._compilers.append(compiler)
        return compiler

    def close(self) -> None:
        """Exit the real contexts the traces left open, the newest trace first, and restore the
        process flags."""
        for output in reversed(self._open):
            close_abandoned(output)
        self._open.clear()
        torch_flags.restore(self.flags)

    @property
    def backend_seconds(self) -> float:
        return sum(compiler.seconds for compiler in self._compilers)


# traces given up for `TraceAgain` in one compile at most (each materialises one lazy module)
_MAX_RESTARTS = 64


def _compile_until_built(request: FrameCompile) -> Compiled:
    """Compile the frame, tracing it again for as long as a restart is asked for: a generator
    to run for real instead, floats the backend wants as constants, or state the trace changed
    (a lazy module materialised)."""
    attempts = _Attempts()
    while True:
        try:
            compiled = _compile_once(request, attempts)
            return replace(compiled, backend_seconds=attempts.backend_seconds)
        except Unsupported as reason:
            generator = _generator_to_run_eagerly(request, attempts, reason)
            if generator is None:
                raise
            attempts.eager_generators.add(generator)
            _forget_trace(reason)
        except TraceAgain as restart:
            if attempts.restarts >= _MAX_RESTARTS:
                raise Unsupported(f"traced again {_MAX_RESTARTS} times: {restart}") from restart
            attempts.restarts += 1
            _forget_trace(restart)
        except SpecialiseFloats as restart:
            policy = request.policy
            if policy is None or not policy.specialise([s.name() for s in restart.sources]):
                raise BackendCompilerFailed(request.backend_name, restart) from restart
            _forget_trace(restart)
        finally:
            attempts.close()


def _forget_trace(error: BaseException) -> None:
    """Let go of a given-up trace: the frames of its traceback (the tracer's, whose locals hold
    the trace and through it the real objects read: gradients, optimizer state) form a cycle
    with the error, which would keep them alive until the next garbage collection."""
    traceback.clear_frames(error.__traceback__)


def _generator_to_run_eagerly(request: FrameCompile, attempts: _Attempts, reason: Unsupported) -> types.CodeType | None:
    """The generator whose body could not be traced, to be run for real instead (its call
    breaks); None when there is none or it must not (`reason` then says why)."""
    generator = reason.generator_code
    if request.fullgraph or generator is None or generator in attempts.eager_generators:
        return None
    if has_cleanup(generator):
        # resumed code would drop it (and run that cleanup) too late
        reason.reason += f" (and generator {generator.co_qualname} has try/with cleanup)"
        return None
    return generator


def _compile_once(request: FrameCompile, attempts: _Attempts) -> Compiled:
    """The whole frame as one graph, or else a graph break where the trace stopped."""
    try:
        return _compile_whole(request, attempts)
    except Unsupported as reason:
        if request.fullgraph or reason.break_index is None or reason.error_on_break:
            raise
        attempts.close()
        _forget_trace(reason)
        return _compile_break(request, attempts, reason)


def _compile_whole(request: FrameCompile, attempts: _Attempts) -> Compiled:
    """The frame traced to its return, and the transformed function returning its value."""
    output, frame, result = attempts.trace(request)
    compiler = attempts.graph_compiler(request, output, request.backend)
    transformed = build_returning(
        request.code,
        request.fn,
        [i.source for i in output.inputs],
        output.side_effects,
        result,
        compiler,
        request.label,
        output,
        torch_flags.current(),
        frame.line,
    )
    return Compiled(output, transformed, compiler.graph, compiler.seconds, compiler.artifact)


def _compile_break(request: FrameCompile, attempts: _Attempts, reason: Unsupported) -> Compiled:
    """Trace again up to the unsupported instruction and build the breaking transformed code.

    Where no break is possible at the instruction because the `with` block around it has a context
    manager that cannot be rebuilt outside the graph (a `@contextmanager` generator, a torch mode),
    the break moves to that `with` statement: its `__enter__` runs eagerly and the block is traced
    by the resume function, which holds the real context manager. Where the context manager itself
    cannot be rebuilt (it holds a traced generator), the break moves to the call that made it.
    """
    index = reason.break_index
    assert index is not None
    inst = decoded(request.code).instructions[index]
    if not can_break_at(inst):
        raise reason
    if not reason.breaks_inside_loops and _may_loop_back(request.code, index):
        # resumed there, the frame would be compiled again for each pass of the loop (its
        # guards see the loop's position): it runs eagerly, its callees compiled (`callee_routing`)
        reason.reason += " (inside a loop: the frame runs eagerly, its callees compiled, as torch.compile skips it)"
        reason.in_loop = True
        raise reason
    here = [((request.code, at),) for at in [index, *_enclosing_breaks(request.code, inst)]]
    compiled = _first_possible_break(request, attempts, reason, [*_nested_breaks(request, reason), *here])
    internal = "".join(traceback.format_tb(reason.__traceback__))
    events.publish(
        events.GraphBreak(
            request.code,
            request.label,
            reason.reason,
            list(reason.user_stack),
            reason.instruction or inst.opname,
            internal,
            kind=reason.kind,
        )
    )
    return compiled


def _may_loop_back(code: types.CodeType, index: int) -> bool:
    """Whether the code after instruction `index`, up to the first return, jumps back to before
    it: then a break there is inside a loop. A heuristic, torch.compile's own (a return inside
    the loop's body hides the loop), so that the same frames are skipped."""
    instructions = decoded(code).instructions
    here = instructions[index].offset
    for inst in instructions[index + 1 :]:
        if inst.opname in ("RETURN_VALUE", "RETURN_CONST"):
            return False
        if inst.target is not None and inst.target < here:
            return True
    return False


def _nested_breaks(request: FrameCompile, reason: Unsupported) -> list[BreakPath]:
    """With `config.nested_graph_breaks`, where a break inside an inlined call may go instead
    of at the compiled frame's call, deepest first: the way down from the compiled frame
    (`reason.frame_path`) as far as each call on it returns straight to its caller
    (`Frame.resumable`) and lies outside any loop, and outside `try` blocks but in the deepest
    frame. The frames on the way are then resumed after their calls, one graph for all of them."""
    if not config.nested_graph_breaks or not _nestable(reason):
        return []
    path = list(reversed(reason.frame_path))  # the compiled frame first
    if len(path) < 2 or path[0][0] is not request.code or path[0][1] != reason.break_index:
        return []
    if not only_with_blocks(request.code, decoded(request.code).instructions[reason.break_index].offset):
        return []
    depth = 0
    for code, index, resumable in path[1:]:
        inst = decoded(code).instructions[index]
        if not resumable or not can_break_at(inst) or _may_loop_back(code, index):
            break
        depth += 1
        if not only_with_blocks(code, inst.offset):
            break  # the deepest frame may be in a `try` block: its handler then takes what it raises
    return [tuple((code, index) for code, index, _ in path[: d + 1]) for d in range(depth, 0, -1)]


def _nestable(reason: Unsupported) -> bool:
    """Whether a break for `reason` may go inside an inlined call (a frame run as a whole, a
    generator's body, a backward differentiated again: no)."""
    if isinstance(reason, FullgraphBreak) or reason.whole_frame or reason.generator_code is not None:
        return False
    return reason.kind is not BreakKind.TWICE_DIFFERENTIABLE


def _enclosing_breaks(code: types.CodeType, inst: dis.Instruction) -> list[int]:
    """Where else the break may go, innermost first: each `with` statement around `inst`, and
    the call making its context manager (a real one then)."""
    dec = decoded(code)
    found = []
    for offset in enclosing_with_statements(code, inst.offset):
        enters = dec.index_of_offset[offset]
        found.append(enters)
        start = with_statement_start(dec, enters + 1)
        if start and dec.instructions[start - 1].opname == "CALL":
            found.append(start - 1)
    return found


def _first_possible_break(
    request: FrameCompile, attempts: _Attempts, reason: Unsupported, candidates: list[BreakPath]
) -> Compiled:
    """The break at the first of `candidates` where one can be written; `reason` says where it
    went, or why none could."""
    failure: Unsupported | _NoBreakThere | None = None
    for at in candidates:
        try:
            compiled = _break_at(request, attempts, at, reason)
        except (Unsupported, _NoBreakThere) as problem:
            failure = failure or problem
            attempts.close()
            continue
        if at != candidates[0] and len(at) == 1 and len(candidates[0]) == 1:
            assert failure is not None
            why = failure.problem.reason if isinstance(failure, _NoBreakThere) else failure.reason
            reason.reason += f" (the graph breaks at the enclosing `with` statement instead: {why})"
        return compiled
    if isinstance(failure, _NoBreakThere):
        reason.reason = f"{reason.reason} (and no graph break is possible there: {failure.problem.reason})"
        raise reason from failure.problem
    assert failure is not None
    raise failure


class _NoBreakThere(Exception):
    """The frame traced up to the instruction, but the break could not be written there."""

    def __init__(self, problem: Unsupported) -> None:
        super().__init__(problem.reason)
        self.problem = problem


def _break_at(request: FrameCompile, attempts: _Attempts, path: BreakPath, reason: Unsupported) -> Compiled:
    """The breaking transformed code for a break before the last instruction of `path`."""
    code, index = path[-1]
    if len(path) == 1:
        output, frame, result = attempts.trace(request, index)
        if result is not None or frame.ip != index:
            raise reason  # the second trace did not stop where the first one failed
        fn, callers = request.fn, []
    else:
        output, root, result = attempts.trace(request, stop_path=path)
        frame = root.stopped_inside
        if result is not None or frame is None or frame.code is not code or frame.ip != index:
            raise reason
        assert frame.function is not None
        fn, callers = frame.function, []
        caller = frame.parent
        while caller is not None:
            callers.append(caller)
            caller = caller.parent
    try:
        writer = BreakWriter(
            frame,
            index,
            fn,
            request.backend,
            request.backend_name,
            request.runtime,
            compile_callees=not reason.eager_callee,
            compile_resume=not reason.rest_eager,
            callers=callers,
            root_fn=request.fn,
        )
        compiler = attempts.graph_compiler(request, output, _graph_backend(request, reason))
        transformed = writer.build(compiler, [i.source for i in output.inputs], request.label)
    except Unsupported as problem:
        raise _NoBreakThere(problem) from problem
    return Compiled(output, transformed, compiler.graph, compiler.seconds, compiler.artifact)


def _graph_backend(request: FrameCompile, reason: Unsupported) -> Any:
    """The backend of the graph before a break: the frame's, or, where a create_graph=True
    backward at the break differentiates this graph's backward again, the graph as captured."""
    if reason.kind is not BreakKind.TWICE_DIFFERENTIABLE:
        return request.backend
    if "differentiable twice" not in reason.reason:
        reason.reason += " (create_graph=True: the graph before it runs as captured, differentiable twice)"
    return _as_captured


def _as_captured(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
    """Run a graph as captured: autograd records its ops one by one, differentiable twice."""
    return gm.forward


@dataclass(slots=True)
class Capture:
    """A frame traced whole into one graph, not compiled (what `export` builds on)."""

    output: OutputGraph  # the graph (no output node yet), its inputs with their real values
    result: Any  # the returned tracker
    guard: types.FunctionType  # takes the frame's own arguments (closure cells first)
    end_flags: dict[torch_flags.Flag, Any]  # the process flags where the function returns


def capture_frame(fn: types.FunctionType, args: tuple, kwargs: dict, policy: DynamicPolicy | None = None) -> Capture:
    """Trace `fn(*args, **kwargs)` as one graph: raises `Unsupported` at the first instruction
    that would need a graph break. Nothing is compiled or run; the inputs keep their real values."""
    call = FrameCall(fn, args, kwargs, policy)
    _refuse_generators(call.code)
    with _one_compile(policy):
        output, result, end_flags = _capture_until_traced(call)
    unclosed, output.unclosed_generators = output.unclosed_generators, []  # (they refer to the trace)
    if unclosed:  # nothing is rebuilt from a capture: each is dropped unclosed
        raise unclosed_refusal(unclosed[0])
    _guard_relations(output)
    return Capture(output, result, output.guards.build(call.code, fn, call.label), end_flags)


def _capture_until_traced(call: FrameCall) -> tuple[OutputGraph, Any, Any]:
    """The trace, its returned tracker and the torch flags it ended with, traced again for as
    long as a restart is asked for."""
    for _ in range(_MAX_RESTARTS):
        attempts = _Attempts()
        try:
            with torch_state.preserved():
                output, _, result = attempts.trace(call)
                end_flags = torch_flags.current()
                output.restore_flags()
            return output, result, end_flags
        except TraceAgain:
            continue  # a lazy module materialised, or unbacked sizes were broken: trace again
        finally:
            attempts.close()
    raise Unsupported(f"traced again {_MAX_RESTARTS} times (lazy modules materialising)")


class _GraphCompiler:
    """The callback codegen calls once a trace's graph outputs are known: it builds the graph
    module, has the backend compile it and wraps what comes back. It keeps the module and the
    backend's seconds for the compile's result."""

    def __init__(self, request: FrameCompile, output: OutputGraph, backend: Any) -> None:
        self.request = request
        self.output = output
        self.backend = backend
        self.graph: torch.fx.GraphModule | None = None
        self.seconds = 0.0
        self.artifact: tuple[Any, bytes] | str | None = None

    def __call__(self, outputs: list[torch.fx.Node]) -> Any:
        output = self.output
        _drop_unused_numbers(output.graph, set(outputs))
        if output.op_count() == 0:
            return None
        output.restore_flags()
        gm = self.graph = _graph_module(output, outputs, self.request.label)
        # symbolic ints/floats go to the backend as the SymInt/SymFloat the trace used (as torch.compile
        # does): AOTAutograd would otherwise make a fresh symbol whose guards no entry checks
        example_inputs = [i.fake if is_symbolic(i.fake) else i.example for i in output.inputs]
        # inputs that alias another input take their symbols along as inputs of their own (lifted.py)
        backend_gm, backend_inputs, unlift = lift_aliased_input_symbols(
            gm, example_inputs, [i.fake for i in output.inputs]
        )
        # the graph as captured, for verification: a backend may rewrite the one it is given
        reference = reference_copy(gm) if config.verify_correctness else None
        compiled = unlift(self._backend_compiled(gm, example_inputs, backend_gm, backend_inputs))
        # floats computed from Python numbers alone: as Python computes them (exact_floats.py)
        exact = exact_python_floats(gm)
        if exact is not None:
            compiled = exact(compiled)
            self._not_stored("it recomputes Python floats around the compiled graph")
        if backend_gm is not gm:
            self._not_stored("inputs that share storage take their size symbols as inputs")
        if program_has_handlers():
            compiled = without_handlers(compiled)  # their handlers are traced into the graph
            self._not_stored("it was traced under a TorchFunctionMode's handler")
        if reference is not None:
            compiled = verify_on_first_call(reference, compiled, self.request.backend_name)
        if isinstance(self.artifact, bytes):
            self.artifact = (compiled, self.artifact)
        return compiled

    def _not_stored(self, reason: str) -> None:
        if self.request.persist:
            self.artifact = f"the compiled graph cannot be stored: {reason}"

    def _backend_compiled(
        self, gm: torch.fx.GraphModule, example_inputs: list, backend_gm: torch.fx.GraphModule, backend_inputs: list
    ) -> Any:
        """What the backend returns for the graph (split at DDP's buckets under a DDP forward),
        timed; its failures are `BackendCompilerFailed`."""
        backend_name = self.request.backend_name
        float_sources = [i.source for i in self.output.inputs if isinstance(i.fake, torch.SymFloat)]
        t0 = time.perf_counter()
        try:
            # backends that re-trace (AOTAutograd, Inductor) find our fake mode and ShapeEnv here
            with (
                torch._guards.tracing(torch._guards.TracingContext(self.output.fake_mode)),
                lstm_training_decomposition(gm, example_inputs),
                uncached_recompute_regions(gm),
                float_restart_requests(float_sources),
            ):
                ddp = active_ddp_module() if config.optimize_ddp else None
                if ddp is None and self.request.persist:
                    compiled, artifact = compile_with_artifact(self.backend, backend_gm, backend_inputs)
                    self.artifact = artifact if artifact is not None else "the backend did not store it"
                elif ddp is None:
                    compiled = self.backend(backend_gm, backend_inputs)
                else:
                    compiled, split, artifact = compile_split(
                        backend_gm, backend_inputs, self.backend, ddp, self.request.persist
                    )
                    if split is not None:
                        gm.meta["stenograph_ddp_split"] = split
                    if self.request.persist:
                        self.artifact = artifact if artifact is not None else "the backend did not store it"
        except StenographError:
            raise
        except Exception as e:
            raise BackendCompilerFailed(backend_name, e) from e
        finally:
            self.seconds += time.perf_counter() - t0
        if not callable(compiled):
            problem = TypeError(f"backend returned {type(compiled).__name__}, not a callable")
            raise BackendCompilerFailed(backend_name, problem)
        return compiled


def _graph_module(output: OutputGraph, outputs: list[torch.fx.Node], label: str) -> torch.fx.GraphModule:
    """The trace's graph returning `outputs`, its submodules under an empty root module."""
    output.graph.output(tuple(outputs))
    root = torch.nn.Module()
    for name, submodule in output.submodules.items():
        root.add_module(name, submodule)
    gm = torch.fx.GraphModule(root, output.graph, class_name="StenographGraph")
    gm.meta["stenograph_frame"] = label
    return gm


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
# how a graph computes a number from sizes and other numbers, with no effect besides the result
_NUMBER_METHODS = frozenset({"size", "stride", "numel", "dim", "storage_offset"})


def _drop_unused_numbers(graph: torch.fx.Graph, outputs: set[torch.fx.Node]) -> None:
    """Drop number arithmetic nothing reads, neither a node nor the graph's `outputs` (a
    comparison a branch decided while tracing, a size taken and left unused): it has no effect,
    and torch.compile's graphs hold none, so graphs (and the frames counted for them) match its."""
    for node in reversed(list(graph.nodes)):
        if node.users or node in outputs or not isinstance(node.meta.get("example_value"), _SYMBOLIC):
            continue
        pure_function = node.op == "call_function" and getattr(node.target, "__module__", None) in (
            "_operator",
            "operator",
            "math",
        )
        if pure_function or node.op == "call_method" and node.target in _NUMBER_METHODS:
            graph.erase_node(node)


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
