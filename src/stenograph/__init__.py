"""stenograph: a just-in-time graph capturer for PyTorch (public API only)."""

from . import config, errors, testing
from .api import (
    OptimizedModule,
    allow_in_graph,
    compile,
    disable,
    graph_break,
    is_compiling,
    optimize,
    reset,
)
from .backends.registry import list_backends, lookup_backend, register_backend
from .entry import StenographWarning
from .errors import StenographError, Unsupported
from .explain import ExplainOutput, explain

__all__ = [
    "OptimizedModule",
    "StenographError",
    "StenographWarning",
    "Unsupported",
    "allow_in_graph",
    "compile",
    "config",
    "disable",
    "errors",
    "explain",
    "ExplainOutput",
    "graph_break",
    "is_compiling",
    "list_backends",
    "lookup_backend",
    "optimize",
    "register_backend",
    "reset",
    "testing",
]
