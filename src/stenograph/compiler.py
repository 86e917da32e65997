"""`stenograph.compiler`: the part of `torch.compiler`'s namespace that stenograph has.

Code written against `torch.compiler` (`torch.compiler.reset()`, `torch.compiler.disable`,
`torch.compiler.is_compiling()` in model code, `torch.compiler.set_stance("force_eager")`) reads
the same with `stenograph.compiler`. Every name is the object of the same name in `stenograph`
itself: `is_compiling` and its older spelling `is_dynamo_compiling` are the one function the
tracer folds to True.
"""

from __future__ import annotations

from . import config
from .api import (
    allow_in_graph,
    assume_constant_result,
    compile,
    cudagraph_mark_step_begin,
    disable,
    is_exporting,
    nested_compile_region,
    reset,
    set_stance,
    substitute_in_graph,
)
from .backends.registry import get_default_backend, list_backends, set_default_backend
from .marks import is_compiling

# torch.compiler's older name for is_compiling
is_dynamo_compiling = is_compiling

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "config",
    "cudagraph_mark_step_begin",
    "disable",
    "get_default_backend",
    "is_compiling",
    "is_dynamo_compiling",
    "is_exporting",
    "list_backends",
    "nested_compile_region",
    "reset",
    "set_default_backend",
    "set_stance",
    "substitute_in_graph",
]
