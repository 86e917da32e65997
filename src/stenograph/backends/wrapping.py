"""A backend object standing for another one, to carry what one compile() call asked for.

Compiled caches are keyed by the backend object, and that object is handed to every frame a
compile() call compiles (its resume functions, the functions called at its graph breaks), so
settings that belong to the call ride on a wrapper of its compiler: `optimize()`'s guard hooks,
`compile(recompile_limit=..., isolate_recompiles=...)`'s region. A wrapper compiles as its
compiler does, and what code reads off a backend (Inductor's `config_patches`, a backend's
stored-artifact codec) it reads off the compiler, through any number of wrappers.
"""

from __future__ import annotations

from typing import Any

import torch


class WrappedBackend:
    """Calls and attribute reads go to `compiler`; subclasses add attributes of their own."""

    def __init__(self, compiler: Any) -> None:
        self.compiler = compiler
        self.__name__ = getattr(compiler, "__name__", type(compiler).__name__)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Any:
        return self.compiler(gm, example_inputs)

    def __getattr__(self, name: str) -> Any:
        # called only for names the wrapper lacks; before __init__ ran (unpickling) there is none
        if "compiler" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["compiler"], name)
