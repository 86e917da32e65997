"""`stenograph.compiler`: the part of `torch.compiler`'s namespace that stenograph has.

Code written against `torch.compiler` (`torch.compiler.reset()`, `torch.compiler.disable`,
`torch.compiler.is_compiling()` in model code) reads the same with `stenograph.compiler`. Every
name is the object of the same name in `stenograph` itself: `is_compiling` and its older
spelling `is_dynamo_compiling` are the one function the tracer folds to True.
"""

from __future__ import annotations

from . import config
from .api import allow_in_graph, assume_constant_result, compile, disable, reset
from .backends.registry import list_backends
from .marks import is_compiling

# torch.compiler's older name for is_compiling
is_dynamo_compiling = is_compiling

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "config",
    "disable",
    "is_compiling",
    "is_dynamo_compiling",
    "list_backends",
    "reset",
]
