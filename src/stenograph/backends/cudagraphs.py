"""The `cudagraphs` backend: AOTAutograd graphs replayed as CUDA graphs, without Inductor.

Why: small models on a GPU are often bound by kernel-launch overhead, not by the kernels. A CUDA
graph records every launch of one forward (or backward) once and replays them with a single call.
This backend keeps PyTorch's own kernels (no code generation) and only removes that overhead.

How, for each graph AOTAutograd hands over (forward, backward, inference):

* the first call with a given input signature (shapes, strides, dtypes, devices, scalar values)
  runs eagerly on a side stream: a warm-up that also initialises cuBLAS workspaces and the like;
* the second call captures a CUDA graph. Inputs whose storage did not move since the first call
  (parameters, buffers) are read in place; every other input gets a private static copy;
* later calls copy the moving inputs into their static buffers, replay, and return *clones* of the
  outputs, because the next replay overwrites the static outputs (simpler and safer than
  Inductor's cudagraph trees, at the cost of one copy per output);
* a graph that touches non-CUDA tensors runs eagerly, with one warning, as does one whose capture
  fails: a backend must never change results.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from ..errors import InvalidBackend
from ._graph_outputs import with_flat_tuple_output

__all__ = ["cudagraphs"]


def _require_cuda() -> None:
    if not torch.cuda.is_available():
        raise InvalidBackend(
            "the 'cudagraphs' backend requires CUDA, but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}). "
            "Use backend='inductor' or 'eager' on this machine."
        )


def _signature(arg: Any) -> Any:
    """What a captured graph is specialised on for one input."""
    if isinstance(arg, torch.Tensor):
        return ("T", tuple(arg.shape), arg.stride(), arg.dtype, arg.device, arg.requires_grad)
    if isinstance(arg, (int, float, bool, type(None))):
        return ("V", type(arg), arg)
    return ("O", type(arg), id(arg))


def _graph_devices_ok(gm: torch.fx.GraphModule) -> bool:
    """True when every tensor the graph produces lives on a CUDA device (as far as meta says)."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else (val,)
        for v in vals:
            if isinstance(v, torch.Tensor) and v.device.type != "cuda":
                return False
    return True


class _Recording:
    """One captured CUDA graph and the static tensors it reads from and writes to."""

    def __init__(
        self,
        graph: torch.cuda.CUDAGraph,
        static_inputs: list[Any],
        moving: list[int],
        pinned_ptrs: dict[int, int],
        static_outputs: Any,
    ) -> None:
        self.graph = graph
        self.static_inputs = static_inputs
        self.moving = moving  # indices copied into static buffers before each replay
        self.pinned_ptrs = pinned_ptrs  # index -> data_ptr read in place by the graph
        self.static_outputs = static_outputs


class _CudaGraphRunner:
    """Callable that runs one AOTAutograd graph through per-signature CUDA graphs."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm
        self.eager_only = not _graph_devices_ok(gm)
        self.warned = False
        self.first_ptrs: dict[Any, list[int | None]] = {}  # signature -> ptrs at warm-up
        self.never_pin: dict[Any, set[int]] = {}  # signature -> inputs seen moving after capture
        self.recordings: dict[Any, _Recording] = {}

    def _eager(self, args: Sequence[Any], why: str) -> Any:
        if not self.warned:
            self.warned = True
            warnings.warn(f"cudagraphs backend: running a graph eagerly because {why}", stacklevel=3)
        return self.gm(*args)

    def __call__(self, *args: Any) -> Any:
        if self.eager_only:
            return self._eager(args, "it uses tensors that are not on a CUDA device")
        if any(isinstance(a, torch.Tensor) and not a.is_cuda for a in args):
            return self._eager(args, "one of its inputs is not on a CUDA device")
        key = tuple(_signature(a) for a in args)
        rec = self.recordings.get(key)
        if rec is None:
            if key not in self.first_ptrs:
                return self._warm_up(key, args)
            try:
                rec = self._capture(key, args)
            except Exception as exc:  # e.g. an op that synchronises: not capturable
                self.eager_only = True
                return self._eager(args, f"CUDA graph capture failed ({type(exc).__name__}: {exc})")
            self.recordings[key] = rec
        else:
            moved = {i for i, p in rec.pinned_ptrs.items() if args[i].data_ptr() != p}
            if moved:
                # An input we read in place has moved (a replaced parameter, or an activation that
                # merely happened to reuse its address): copy it from now on, and capture again.
                del self.recordings[key]
                self.never_pin.setdefault(key, set()).update(moved)
                return self(*args)
        for i in rec.moving:
            rec.static_inputs[i].copy_(args[i])
        rec.graph.replay()
        return self._clone_outputs(rec.static_outputs)

    @staticmethod
    def _ptr(arg: Any) -> int | None:
        return arg.data_ptr() if isinstance(arg, torch.Tensor) else None

    @staticmethod
    def _clone_outputs(outputs: Any) -> Any:
        cloned = [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]
        return tuple(cloned) if isinstance(outputs, tuple) else cloned

    def _warm_up(self, key: Any, args: Sequence[Any]) -> Any:
        self.first_ptrs[key] = [self._ptr(a) for a in args]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = self.gm(*args)
        torch.cuda.current_stream().wait_stream(stream)
        return out

    def _capture(self, key: Any, args: Sequence[Any]) -> _Recording:
        first = self.first_ptrs[key]
        never_pin = self.never_pin.get(key, set())
        static_inputs: list[Any] = []
        moving: list[int] = []
        pinned: dict[int, int] = {}
        for i, arg in enumerate(args):
            if not isinstance(arg, torch.Tensor):
                static_inputs.append(arg)
            elif arg.data_ptr() == first[i] and i not in never_pin:
                static_inputs.append(arg)  # stable storage (a parameter): read it in place
                pinned[i] = arg.data_ptr()
            else:
                static_inputs.append(arg.detach().clone())
                moving.append(i)
        # One more eager run on a side stream so lazily created handles exist before capture.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.gm(*static_inputs)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_outputs = self.gm(*static_inputs)
        rec = _Recording(graph, static_inputs, moving, pinned, static_outputs)
        rec.graph.replay()  # the capture only recorded; this call still needs its results
        return rec


def _cudagraph_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    return _CudaGraphRunner(gm)


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
