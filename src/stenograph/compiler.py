"""Compiling one frame: trace its bytecode, compile the graph, generate guards and code.

This is the miss path of the entry wrapper (DESIGN "How a call flows"): everything here runs
once per cache entry, never per call.
"""

from __future__ import annotations

import inspect
import time
import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from .errors import BackendCompilerFailed, StenographError
from .graph.codegen import build_transformed
from .graph.output_graph import OutputGraph
from .guards.sources import ClosureSource, LocalSource
from .interpreter.frame import Cell, Frame, LazyValue


@dataclass
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

    def failure_reason(self, args: tuple, kwargs: dict) -> str | None:
        """The first check that fails for these arguments (built on demand: misses only)."""
        if self._explainer is None:
            self._explainer = self.guard_set.build_explainer(self.code, self.like, self.label)
        return self._explainer(*args, **kwargs)

    @property
    def guard_source(self) -> str:
        return self.guard.__stenograph_source__

    @property
    def transformed_source(self) -> str:
        return self.fn.__stenograph_source__


def frame_label(code: types.CodeType) -> str:
    return f"{code.co_qualname} at {code.co_filename}:{code.co_firstlineno}"


def compile_frame(
    fn: types.FunctionType,
    args: tuple,
    kwargs: dict,
    backend: Any,
    backend_name: str,
) -> CacheEntry:
    """Trace `fn(*args, **kwargs)` (a real call's arguments) and build a cache entry.

    Raises `Unsupported` when the frame cannot be captured and `BackendCompilerFailed` when the
    backend raises.
    """
    start = time.perf_counter()
    code = fn.__code__
    label = frame_label(code)
    output = OutputGraph()
    local_values, cells = _root_state(fn, args, kwargs)
    frame = Frame(code, fn.__globals__, local_values, cells, output)
    result = frame.run()

    backend_seconds = 0.0
    graph_module: torch.fx.GraphModule | None = None

    def compile_graph(outputs: list[torch.fx.Node]) -> Any:
        nonlocal backend_seconds, graph_module
        if output.op_count() == 0:
            return None
        output.graph.output(tuple(outputs))
        graph_module = torch.fx.GraphModule(torch.nn.Module(), output.graph, class_name="StenographGraph")
        graph_module.meta["stenograph_frame"] = label
        example_inputs = [i.example for i in output.inputs]
        t0 = time.perf_counter()
        try:
            compiled = backend(graph_module, example_inputs)
        except StenographError:
            raise
        except Exception as e:
            raise BackendCompilerFailed(backend_name, e) from e
        finally:
            backend_seconds = time.perf_counter() - t0
        if not callable(compiled):
            raise BackendCompilerFailed(backend_name, TypeError(f"backend returned {type(compiled).__name__}, not a callable"))
        return compiled

    transformed, _ = build_transformed(
        code, fn, [i.source for i in output.inputs], result, compile_graph, label
    )
    for graph_input in output.inputs:
        graph_input.example = None  # entries must not keep user tensors alive
    guard = output.guards.build(code, fn, label)
    capture_seconds = time.perf_counter() - start - backend_seconds
    return CacheEntry(guard, transformed, graph_module, output.guards, code, label,
                      capture_seconds, backend_seconds, like=fn)


def _root_state(
    fn: types.FunctionType, args: tuple, kwargs: dict
) -> tuple[dict[str, Any], dict[str, Cell]]:
    """Lazy locals and cells of the frame being compiled, each with its source."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    code = fn.__code__
    local_values: dict[str, Any] = {
        name: LazyValue(value, LocalSource(name)) for name, value in bound.arguments.items()
    }
    cells: dict[str, Cell] = {}
    for name in code.co_cellvars:
        cells[name] = Cell(local_values.pop(name, None))
    for index, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
        try:
            cells[name] = Cell(LazyValue(cell.cell_contents, ClosureSource(index, name)))
        except ValueError:
            cells[name] = Cell(None)
    return local_values, cells

