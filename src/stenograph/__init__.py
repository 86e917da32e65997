"""stenograph: a just-in-time graph capturer for PyTorch (public API only)."""

from . import compiler, config, errors, testing
from .api import (
    DisabledModule,
    GuardFail,
    OptimizedModule,
    allow_in_graph,
    assume_constant_result,
    compile,
    cudagraph_mark_step_begin,
    disable,
    disallow_in_graph,
    error_on_graph_break,
    forbid_in_graph,
    graph_break,
    is_compiling,
    is_exporting,
    nested_compile_region,
    nonstrict_trace,
    optimize,
    optimize_assert,
    reset,
    run,
    set_stance,
    skip,
    substitute_in_graph,
)
from .backends.registry import (
    get_default_backend,
    list_backends,
    lookup_backend,
    register_backend,
    set_default_backend,
)
from .compile_callbacks import CallbackArgs, CallbackTrigger, on_compile_end, on_compile_start
from .entry import StenographWarning
from .errors import BreakKind, ConstraintViolation, RecompileError, StenographError, Unsupported
from .export import ExportGuards, ExportResult, export
from .observability import logs, structured_trace
from .observability.explain import ExplainOutput, explain
from .observability.inspection import inspect
from .observability.logs import set_logs
from .shapes.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic
from .warm import load_artifacts, save_artifacts

__all__ = [
    "BreakKind",
    "CallbackArgs",
    "CallbackTrigger",
    "DisabledModule",
    "GuardFail",
    "OptimizedModule",
    "StenographError",
    "StenographWarning",
    "Unsupported",
    "ConstraintViolation",
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "compiler",
    "config",
    "cudagraph_mark_step_begin",
    "disable",
    "disallow_in_graph",
    "forbid_in_graph",
    "error_on_graph_break",
    "errors",
    "explain",
    "ExplainOutput",
    "export",
    "ExportGuards",
    "ExportResult",
    "get_default_backend",
    "graph_break",
    "inspect",
    "is_compiling",
    "is_exporting",
    "list_backends",
    "load_artifacts",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "nested_compile_region",
    "nonstrict_trace",
    "on_compile_end",
    "on_compile_start",
    "optimize",
    "optimize_assert",
    "RecompileError",
    "register_backend",
    "reset",
    "run",
    "save_artifacts",
    "set_default_backend",
    "set_logs",
    "set_stance",
    "skip",
    "substitute_in_graph",
    "testing",
]

logs.configure_from_env()
structured_trace.enable_from_env()
