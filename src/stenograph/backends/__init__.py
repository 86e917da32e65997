"""Backends: the compilers that captured graphs are handed to.

Importing this package is cheap: it imports no compiler. The built-in backends (`eager`,
`aot_eager`, `inductor`, `cudagraphs`) are registered by module path and imported on first lookup.
"""

from .inductor import inductor_backend
from .modes import resolve_mode, valid_modes
from .registry import (
    ENTRY_POINT_GROUP,
    CompilerFn,
    list_backends,
    lookup_backend,
    register_backend,
    resolve_backend,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "CompilerFn",
    "inductor_backend",
    "list_backends",
    "lookup_backend",
    "register_backend",
    "resolve_backend",
    "resolve_mode",
    "valid_modes",
]
