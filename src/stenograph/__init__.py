"""stenograph: a just-in-time graph capturer for PyTorch (public API only)."""

from . import compiler, config, errors, testing
from .api import (
    OptimizedModule,
    allow_in_graph,
    assume_constant_result,
    compile,
    disable,
    disallow_in_graph,
    graph_break,
    is_compiling,
    optimize,
    reset,
    run,
    skip,
)
from .backends.registry import list_backends, lookup_backend, register_backend
from .entry import StenographWarning
from .errors import BreakKind, ConstraintViolation, StenographError, Unsupported
from .export import ExportGuards, ExportResult, export
from .observability import logs, structured_trace
from .observability.explain import ExplainOutput, explain
from .observability.inspection import inspect
from .observability.logs import set_logs
from .shapes.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic

__all__ = [
    "BreakKind",
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
    "disable",
    "disallow_in_graph",
    "errors",
    "explain",
    "ExplainOutput",
    "export",
    "ExportGuards",
    "ExportResult",
    "graph_break",
    "inspect",
    "is_compiling",
    "list_backends",
    "lookup_backend",
    "mark_dynamic",
    "mark_static",
    "maybe_mark_dynamic",
    "optimize",
    "register_backend",
    "reset",
    "run",
    "set_logs",
    "skip",
    "testing",
]

logs.configure_from_env()
structured_trace.enable_from_env()
