"""Backends: the compilers that captured graphs are handed to.

Importing this package is cheap: it imports no compiler. The built-in backends (torch.compile's
names: `inductor`, `cudagraphs`, `eager`, `aot_eager`, ...; `registry`) are registered by module
path and imported on first lookup; `inductor_backend` is imported on first access.
"""

from typing import Any

from .modes import resolve_mode, valid_modes
from .registry import (
    ENTRY_POINT_GROUP,
    TORCH_ENTRY_POINT_GROUP,
    CompilerFn,
    list_backends,
    lookup_backend,
    register_backend,
    resolve_backend,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "TORCH_ENTRY_POINT_GROUP",
    "CompilerFn",
    "inductor_backend",
    "list_backends",
    "lookup_backend",
    "register_backend",
    "resolve_backend",
    "resolve_mode",
    "valid_modes",
]


def __getattr__(name: str) -> Any:
    """`inductor_backend`, imported when first read: the built-ins load on first use."""
    if name == "inductor_backend":
        from .inductor import inductor_backend  # imported here: loaded on first use, as the built-ins

        return inductor_backend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
