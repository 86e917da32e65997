"""Keeping Inductor's tuned kernel configurations when a compiled graph is loaded on torch 2.11.

Under `max-autotune` modes Inductor tunes each Triton kernel at its first run (benchmarking its
candidate configurations, then a coordinate descent from the best one) and writes the winner to
its autotune cache beside the kernel. A warm process loads the kernels that were compiled
(`TritonBundler`), each with the configurations it was compiled with, and asks the cache which one
won (`CachingAutotuner.recheck_autotune_cache`). torch 2.11 keeps the cache's answer only for
kernels with several compiled configurations and never marks it as found by coordinate descent:
every kernel compiled with one configuration (persistent reductions, most pointwise kernels under
`coordinate_descent_tuning`) tunes again from scratch in every warm process, 0.1-1.5 s a kernel on
an H200 (5.6 s of a warm Llama's 6.5 s first call). torch 2.12 applies the cache's answer in
both cases; on 2.11 `keep_tuned_configs()` replaces that one method with one doing so.

torch 2.11 also adds, after that answer, reduction configurations with a smaller RBLOCK
(`_dynamic_scale_rblock`), which then get benchmarked, and the winner among them is written back
as not found by coordinate descent: the next warm process no longer finds the tuned entry and
tunes the kernel from scratch (ViT-B/16's warm first calls alternated 0.6 s / 2-3.4 s). 2.12
skips the scaling on a cache hit; `keep_tuned_configs()` does the same on 2.11.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.torch_version import TorchVersion

__all__ = ["keep_tuned_configs"]

_FIXED_IN = "2.12"


def keep_tuned_configs() -> None:
    """Make reloaded Triton kernels use the configuration the autotune cache holds (torch 2.11
    only; idempotent). Called before a loaded artifact's kernels are first run."""
    if TorchVersion(torch.__version__) >= _FIXED_IN:
        return
    # optional (CUDA builds of torch install Triton) and heavy: imported once a graph is loaded
    from torch._inductor.runtime import triton_heuristics

    autotuner = triton_heuristics.CachingAutotuner
    if getattr(autotuner.recheck_autotune_cache, "keeps_tuned_configs", False):
        return
    autotuner.recheck_autotune_cache = _recheck_keeping_tuned_configs  # type: ignore[method-assign]
    scale = getattr(autotuner, "_dynamic_scale_rblock", None)
    if scale is not None:
        autotuner._dynamic_scale_rblock = _scaling_unless_cached(scale)  # type: ignore[attr-defined]


def _scaling_unless_cached(scale: Any) -> Any:
    """`CachingAutotuner._dynamic_scale_rblock`, skipped for a kernel the autotune cache answered."""

    def scale_unless_cached(self: Any) -> None:
        info = getattr(self, "autotune_cache_info", None)
        if info and info.get("autotune_cache_state") == "hit":
            return
        scale(self)

    return scale_unless_cached


def _recheck_keeping_tuned_configs(self: Any, reload_kernel_from_src: Any) -> None:
    """`CachingAutotuner.recheck_autotune_cache`: keep only the compiled configuration the cache
    names (marked as coordinate descent's if it was), compiling it if it was found after the
    kernel was stored."""
    # optional (CUDA builds of torch install Triton): only reached where it is
    from torch._inductor.runtime import triton_heuristics
    from torch._inductor.runtime.runtime_utils import triton_config_to_hashable

    configs = [result.config for result in self.compile_results]
    cached, _, self.autotune_cache_info = triton_heuristics.check_autotune_cache(
        configs, self.filename, self.inductor_meta
    )
    if len(cached) != 1:
        return
    best = cached[0]
    tuned = getattr(best, "found_by_coordesc", False)
    wanted = triton_config_to_hashable(best)
    for result in self.compile_results:
        if triton_config_to_hashable(result.config) == wanted:
            result.config.found_by_coordesc = tuned
            self.compile_results = [result]
            return
    if tuned:
        if self.fn.fn is None:
            self.fn = reload_kernel_from_src().fn
        self.compile_results = [self._precompile_config(best)]


_recheck_keeping_tuned_configs.keeps_tuned_configs = True  # type: ignore[attr-defined]
