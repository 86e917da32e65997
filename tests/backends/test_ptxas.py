"""Compiling and loading Inductor graphs point Triton at the `ptxas` Inductor chooses
(`backends/_ptxas.py`): a warm process's kernels are then built, and keyed in Triton's cache, as
the compiling process's were.

No GPU here: torch's setter is replaced by a recorder (CPU builds ship no `ptxas`, so the real one
sets nothing), and a graph of views only keeps Inductor's CPU compile free of C++ builds.
"""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torch._inductor.runtime import compile_tasks

from stenograph.backends import inductor_backend
from stenograph.backends.artifacts import compile_with_artifact, load_artifact


def _views(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (x.t().reshape(-1),)  # a flat tuple, as stenograph's graphs return


def test_compiling_and_loading_set_triton_ptxas_as_inductor_does(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    calls: list[str] = []
    monkeypatch.setattr(compile_tasks, "_set_triton_ptxas_path", lambda: calls.append("ptxas"))
    gm = torch.fx.symbolic_trace(_views)
    x = torch.randn(2, 3)
    compiled, artifact = compile_with_artifact(inductor_backend(), gm, [x])
    assert calls == ["ptxas"], "compiling did not set Triton's ptxas before Inductor compiled"
    assert artifact is not None
    loaded = load_artifact(artifact)
    assert calls == ["ptxas", "ptxas"], "loading did not set Triton's ptxas before kernels could compile"
    assert torch.equal(loaded(x)[0], _views(x)[0])
