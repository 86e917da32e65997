"""The `cudagraphs` backend: AOTAutograd graphs replayed as CUDA graphs, without Inductor.

Why: small models on a GPU are often bound by kernel-launch overhead, not by the kernels. A CUDA
graph records every launch of one forward (or backward) once and replays them with a single call.
This backend keeps PyTorch's own kernels (no code generation) and only removes that overhead.

Each graph AOTAutograd hands over (forward, backward, inference) is replayed by
`cuda_graph_runner.CudaGraphRunner`: warmed up on the first call of an input signature, recorded
on the second, replayed after that, outputs copied out; a graph that touches non-CUDA tensors runs
eagerly, with one warning, as does one whose capture fails: a backend must never change results.
AOTAutograd's graphs are functional (it applies input mutations itself), so nothing is copied back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from ..errors import InvalidBackend
from ._graph_outputs import with_flat_tuple_output
from .cuda_graph_runner import CudaGraphRunner

__all__ = ["cudagraphs"]


def _require_cuda() -> None:
    if not torch.cuda.is_available():
        raise InvalidBackend(
            "the 'cudagraphs' backend requires CUDA, but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}). "
            "Use backend='inductor' or 'eager' on this machine."
        )


def _graph_devices_ok(gm: torch.fx.GraphModule) -> bool:
    """True when every tensor the graph produces lives on a CUDA device (as far as meta says)."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else (val,)
        for v in vals:
            if isinstance(v, torch.Tensor) and v.device.type != "cuda":
                return False
    return True


def _cudagraph_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    return CudaGraphRunner(
        gm,
        copy_back=frozenset(),
        fallback_warning="cudagraphs backend: running a graph eagerly",
        devices_ok=_graph_devices_ok(gm),
    )


def cudagraphs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Compile `gm` with AOTAutograd, replaying its forward and backward as CUDA graphs."""
    _require_cuda()
    # slow optional import (torch._inductor / AOTAutograd): loaded on first use
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_compiler

    compiler = make_boxed_compiler(_cudagraph_compiler)
    flat_gm, restore = with_flat_tuple_output(gm)
    compiled = aot_module_simplified(
        flat_gm, example_inputs, fw_compiler=compiler, bw_compiler=compiler, decompositions=None
    )
    return restore(compiled)
