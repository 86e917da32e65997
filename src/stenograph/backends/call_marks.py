"""Mark where each call of a compiled program begins, for Inductor's CUDA-graph trees.

Why: in `mode="reduce-overhead"` / `"max-autotune"` Inductor replays CUDA graphs out of one
memory pool, so a replay overwrites the outputs of the previous replay. The trees
(`torch._inductor.cudagraph_trees`) only allow that once a *new call of the compiled program* has
begun (or the old outputs are dead), and they learn that a new call began from one counter,
`GenerationTracker.generation`, which torch.compile advances each time a compiled function is
entered. If nothing advances it, a loop that still holds the last result when it calls again
(`out = model(x)`) never replays: every call records one more graph behind the last one. So
stenograph advances the same counter, once per call of the function or module the user compiled.

Only at the user's call, never per graph: graphs of one call that a graph break separates must not
overwrite each other's outputs, which the next graph may still read. The mark costs one extra
Python call, so it is added only to programs compiled for CUDA graphs (`wants_call_marks`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from .. import config

__all__ = ["marking_calls", "wants_call_marks", "wants_cuda_graphs"]


def wants_call_marks(compiler: Any) -> bool:
    """True for a backend that compiles with Inductor's CUDA graphs (its mode, options or config)."""
    patches = getattr(compiler, "config_patches", None)
    return config.cudagraph_call_marks and patches is not None and wants_cuda_graphs(patches)


def wants_cuda_graphs(patches: dict[str, Any]) -> bool:
    """True when Inductor compiles with CUDA graphs under `patches` (or its global config)."""
    if "triton.cudagraphs" in patches:
        return bool(patches["triton.cudagraphs"])
    inductor_config = sys.modules.get("torch._inductor.config")  # set globally by the user?
    return inductor_config is not None and bool(inductor_config.triton.cudagraphs)


def marking_calls(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, advancing the CUDA-graph trees' call counter before each call."""
    # the counter as the trees themselves reach it (its class is defined with torch.compile's
    # front end; stenograph only advances it)
    from torch._inductor.cudagraph_trees import GenerationTracker

    def call(*args: Any, **kwargs: Any) -> Any:
        GenerationTracker.generation += 1
        return fn(*args, **kwargs)

    return functools.update_wrapper(call, fn)
