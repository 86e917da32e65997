"""The `inductor` backend: PyTorch's Inductor compiler (`torch._inductor.compile_fx`).

`mode=` / `options=` become Inductor config patches (see `modes.py`). Two entry points exist
because they serve different callers: the registered `inductor(gm, example_inputs, *, mode=...,
options=...)` follows the generic backend contract, and `inductor_backend(mode, options)` checks
mode and options once, when `compile()` is called, and returns a plain two-argument backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import config
from ._static_inputs import mark_static_inputs
from .modes import resolve_mode

if TYPE_CHECKING:
    import torch.fx

    from .registry import CompilerFn

__all__ = ["inductor", "inductor_backend"]


def _compile(gm: torch.fx.GraphModule, example_inputs: list[Any], patches: dict[str, Any]) -> Callable[..., Any]:
    # Imported here: torch._inductor takes seconds to import and most programs never need it.
    from torch._inductor.compile_fx import compile_fx

    if config.mark_static_inputs:
        # parameters/buffers are static for CUDA graphs, as under torch.compile (_static_inputs.py)
        mark_static_inputs(gm, example_inputs)
    return compile_fx(gm, example_inputs, config_patches=dict(patches))


def inductor(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """Compile `gm` with Inductor, with the config patches that `mode` or `options` select."""
    return _compile(gm, example_inputs, resolve_mode(mode, options))


inductor.config_patches = {}  # type: ignore[attr-defined]  # none: Inductor's global config rules


def inductor_backend(mode: str | None = None, options: dict[str, Any] | None = None) -> CompilerFn:
    """An Inductor backend bound to `mode` or `options`, validated now rather than at first call."""
    patches = resolve_mode(mode, options)

    def inductor_with_patches(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        return _compile(gm, example_inputs, patches)

    inductor_with_patches.__name__ = "inductor"
    inductor_with_patches.mode = mode  # type: ignore[attr-defined]
    inductor_with_patches.config_patches = dict(patches)  # type: ignore[attr-defined]
    return inductor_with_patches
