"""A reloaded Triton kernel keeps the configuration Inductor's autotune cache holds
(`backends/_autotune_reload.py`, in place of torch 2.11's `recheck_autotune_cache`).

No GPU here: the method is run on a stand-in for a `CachingAutotuner` whose compiled
configurations and cache answer are given, which is all the method reads.
"""

from __future__ import annotations

import types

import pytest
import torch
from torch._inductor.runtime import triton_heuristics
from torch.torch_version import TorchVersion

from stenograph.backends import _autotune_reload


class _Config:
    def __init__(self, block: int, warps: int, found_by_coordesc: bool = False) -> None:
        self.kwargs = {"XBLOCK": block}
        self.num_warps = warps
        self.num_stages = 1
        if found_by_coordesc:
            self.found_by_coordesc = True


def _kernel(*configs: _Config) -> types.SimpleNamespace:
    compiled: list[_Config] = []

    def precompile(config: _Config) -> types.SimpleNamespace:
        compiled.append(config)
        return types.SimpleNamespace(config=config)

    return types.SimpleNamespace(
        compile_results=[types.SimpleNamespace(config=c) for c in configs],
        filename="/cache/ab/kernel.py",
        inductor_meta={"coordinate_descent_tuning": True},
        fn=types.SimpleNamespace(fn=object()),
        _precompile_config=precompile,
        compiled=compiled,
    )


def _cache_answers(monkeypatch: pytest.MonkeyPatch, answer: list[_Config]) -> None:
    monkeypatch.setattr(
        triton_heuristics, "check_autotune_cache", lambda configs, filename, meta: (answer, None, {"hit": bool(answer)})
    )


def _recheck(kernel: types.SimpleNamespace) -> None:
    _autotune_reload._recheck_keeping_tuned_configs(kernel, lambda: pytest.fail("the kernel's source was reloaded"))


def test_single_configuration_kernel_keeps_the_coordinate_descent_result(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch 2.11 ignored the cache for a kernel compiled with one configuration: tuned again
    compiled = _Config(256, 4)
    _cache_answers(monkeypatch, [_Config(256, 4, found_by_coordesc=True)])
    kernel = _kernel(compiled)
    _recheck(kernel)
    assert [r.config for r in kernel.compile_results] == [compiled]
    assert compiled.found_by_coordesc is True
    assert kernel.compiled == []


def test_a_tuned_configuration_not_compiled_is_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    tuned = _Config(512, 8, found_by_coordesc=True)
    _cache_answers(monkeypatch, [tuned])
    kernel = _kernel(_Config(256, 4), _Config(1024, 4))
    _recheck(kernel)
    assert kernel.compiled == [tuned]
    assert [r.config for r in kernel.compile_results] == [tuned]


def test_a_heuristic_winner_is_kept_and_still_tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _Config(256, 4), _Config(1024, 4)
    _cache_answers(monkeypatch, [_Config(1024, 4)])
    kernel = _kernel(first, second)
    _recheck(kernel)
    assert [r.config for r in kernel.compile_results] == [second]
    assert second.found_by_coordesc is False  # coordinate descent still runs from it
    assert kernel.autotune_cache_info == {"hit": True}


def test_a_cache_miss_keeps_every_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    configs = (_Config(256, 4), _Config(1024, 4))
    _cache_answers(monkeypatch, [])
    kernel = _kernel(*configs)
    _recheck(kernel)
    assert [r.config for r in kernel.compile_results] == list(configs)
    assert not hasattr(configs[0], "found_by_coordesc")


def test_rblock_scaling_is_skipped_after_a_cache_hit() -> None:
    """torch 2.11 scaled a reduction's RBLOCK after the cache answered, benchmarked the variants
    and wrote the winner back as not tuned: the next process tuned the kernel again."""
    scaled = []
    scale = _autotune_reload._scaling_unless_cached(lambda kernel: scaled.append(kernel))
    hit = types.SimpleNamespace(autotune_cache_info={"autotune_cache_state": "hit"})
    miss = types.SimpleNamespace(autotune_cache_info={"autotune_cache_state": "miss"})
    for kernel in (hit, miss, types.SimpleNamespace()):
        scale(kernel)
    assert scaled[0] is miss and len(scaled) == 2


def test_installed_only_where_torch_lacks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    original = triton_heuristics.CachingAutotuner.recheck_autotune_cache
    monkeypatch.setattr(triton_heuristics.CachingAutotuner, "recheck_autotune_cache", original)
    scale = getattr(triton_heuristics.CachingAutotuner, "_dynamic_scale_rblock", None)
    if scale is not None:
        monkeypatch.setattr(triton_heuristics.CachingAutotuner, "_dynamic_scale_rblock", scale)
    _autotune_reload.keep_tuned_configs()
    installed = triton_heuristics.CachingAutotuner.recheck_autotune_cache
    if TorchVersion(torch.__version__) >= "2.12":
        assert installed is original
    else:
        assert installed is _autotune_reload._recheck_keeping_tuned_configs
        _autotune_reload.keep_tuned_configs()  # idempotent
        assert triton_heuristics.CachingAutotuner.recheck_autotune_cache is installed
