"""Replay a compiled graph as CUDA graphs, one per input signature, returning copies of its outputs.

Why: a small model on a GPU is bound by kernel launches, and a CUDA graph replays all the launches
of one call with one. Two backends use this runner: `cudagraphs` (AOTAutograd's graphs, PyTorch's
kernels) and `inductor` in the CUDA-graph modes (`reduce-overhead`, `max-autotune`) for graphs that
compute no gradients, in place of Inductor's cudagraph trees. The trees replay into one shared
memory pool and reclaim a replay's outputs when the next call of the program begins; a caller that
still holds an earlier call's outputs then reads overwritten memory (torch.compile raises "accessing
tensor output of CUDAGraphs that has been overwritten"), which is what HF `generate()` does with a
compiled forward. Here every replay's outputs are cloned before they are returned, so a caller owns
what it gets, at the cost of one copy per output.

For each input signature (shapes, strides, dtypes, devices, scalar values):

* the first call runs the compiled function on a side stream (a warm-up: kernels load, cuBLAS
  makes its workspace) and notes where each input tensor lives;
* the second call records a CUDA graph. Inputs whose storage did not move since the first call
  (parameters, buffers, a static KV cache) are read and written in place; every other input gets a
  private static copy, which later calls fill before each replay. The recording call runs the
  graph once (the replay after the capture): a graph that updates a counter in place must not run
  twice;
* inputs with a private copy that the graph may write (`copy_back`) are copied back to the caller's
  tensors after each replay, so in-place updates reach them as they would eagerly;
* an input read in place that moves later (a parameter replaced) is copied from then on, after a
  new recording.

A call whose tensors are not all on a CUDA device, a graph whose recording fails (an operation
that synchronises with the host), and signatures past `MAX_RECORDINGS` (shapes that change every
call) run the compiled function as it is: correct, only without the replay.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

__all__ = ["MAX_RECORDINGS", "CudaGraphRunner", "mutated_placeholders"]

#: recordings kept per runner; further signatures run without CUDA graphs (each holds its memory)
MAX_RECORDINGS = 16

_IN_PLACE_OPERATORS = {
    operator.setitem,
    operator.iadd,
    operator.isub,
    operator.imul,
    operator.itruediv,
    operator.ifloordiv,
    operator.imod,
    operator.ipow,
    operator.iand,
    operator.ior,
    operator.ixor,
    operator.ilshift,
    operator.irshift,
    operator.imatmul,
}


# methods and functions whose result may be a view of their first argument
_VIEW_NAMES = frozenset(
    "view view_as reshape reshape_as transpose transpose_ permute t narrow select expand expand_as unsqueeze "
    "squeeze flatten unflatten split split_with_sizes chunk unbind contiguous detach as_strided diagonal movedim "
    "moveaxis swapaxes swapdims unfold getitem __getitem__ to type_as real imag view_as_real view_as_complex "
    "tensor_split hsplit vsplit dsplit alias indices values".split()
)


def _signature(arg: Any) -> Any:
    """What a recorded graph is specialised on for one input."""
    if isinstance(arg, torch.Tensor):
        return ("T", tuple(arg.shape), arg.stride(), arg.dtype, arg.device, arg.requires_grad)
    if isinstance(arg, (int, float, bool, type(None))):
        return ("V", type(arg), arg)
    return ("O", type(arg), id(arg))


def _writes_first_argument(node: torch.fx.Node) -> bool:
    """Whether `node` may write into the tensor passed as its first argument (in place or `out=`)."""
    target = node.target
    if node.kwargs.get("out") is not None or node.kwargs.get("inplace") is True:
        return True
    if node.op == "call_method":
        return isinstance(target, str) and target.endswith("_") and not target.startswith("__")
    if node.op != "call_function":
        return False
    if target in _IN_PLACE_OPERATORS:
        return True
    schema = getattr(target, "_schema", None)  # an OpOverload
    if schema is not None:
        return schema.is_mutable
    name = getattr(target, "__name__", "")
    return name.endswith("_") and not name.startswith("__")


def _returns_alias(node: torch.fx.Node) -> bool:
    """Whether `node`'s result may share memory with its first argument (a view, or an in-place
    operation returning it)."""
    if node.op not in ("call_method", "call_function"):
        return False
    schema = getattr(node.target, "_schema", None)  # an OpOverload
    if schema is not None:
        return any(r.alias_info is not None for r in schema.returns)
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name in _VIEW_NAMES or _writes_first_argument(node)


def mutated_placeholders(gm: torch.fx.GraphModule) -> frozenset[int]:
    """Positions of the placeholders that the graph may write into, directly or through a view of
    them."""
    placeholders = {node: i for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    found: set[int] = set()
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function") or not _writes_first_argument(node):
            continue
        written = node.kwargs["out"] if node.kwargs.get("out") is not None else node.args[:1]
        pending = _nodes_in(written)
        seen: set[torch.fx.Node] = set()
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in placeholders:
                found.add(placeholders[current])
            elif _returns_alias(current):
                pending.extend(_nodes_in(current.args[:1]))
    return frozenset(found)


def _overlaps_itself(tensor: torch.Tensor) -> bool:
    """An expanded tensor (a stride of 0): nothing can be copied into it, nor was it written."""
    return any(stride == 0 and size > 1 for stride, size in zip(tensor.stride(), tensor.shape))


def _nodes_in(value: Any) -> list[torch.fx.Node]:
    nodes: list[torch.fx.Node] = []
    torch.fx.node.map_arg(value, nodes.append)
    return nodes


class _Recording:
    """One recorded CUDA graph and the static tensors it reads from and writes to."""

    def __init__(
        self,
        graph: torch.cuda.CUDAGraph,
        static_inputs: list[Any],
        moving: list[int],
        copy_back: list[int],
        pinned_ptrs: dict[int, int],
        static_outputs: Any,
    ) -> None:
        self.graph = graph
        self.static_inputs = static_inputs
        self.moving = moving  # indices copied into static buffers before each replay
        self.copy_back = copy_back  # moving indices copied back to the caller after each replay
        self.pinned_ptrs = pinned_ptrs  # index -> data_ptr read in place by the graph
        self.static_outputs = static_outputs


class CudaGraphRunner:
    """Calls `fn` (a compiled graph taking positional inputs) through per-signature CUDA graphs.

    `copy_back`: the inputs `fn` may write into (`mutated_placeholders`); None when unknown, then
    every input with a private copy is copied back. `fallback_warning`: a message naming the backend
    when a call runs without a replay; None to fall back quietly (Inductor's compiled code is still
    compiled code).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        copy_back: frozenset[int] | None,
        fallback_warning: str | None,
        devices_ok: bool = True,
    ) -> None:
        self.fn = fn
        self.copy_back = copy_back
        self.fallback_warning = fallback_warning
        self.eager_only = not devices_ok
        self.first_ptrs: dict[Any, list[int | None]] = {}  # signature -> ptrs at warm-up
        self.never_pin: dict[Any, set[int]] = {}  # signature -> inputs seen moving after capture
        self.recordings: dict[Any, _Recording] = {}

    def _plain(self, args: Sequence[Any], why: str) -> Any:
        if self.fallback_warning is not None:
            warnings.warn(f"{self.fallback_warning} because {why}", stacklevel=3)
            self.fallback_warning = None  # once per runner
        return self.fn(*args)

    def __call__(self, *args: Any) -> Any:
        if self.eager_only:
            return self._plain(args, "it uses tensors that are not on a CUDA device")
        if any(isinstance(a, torch.Tensor) and not a.is_cuda for a in args):
            return self._plain(args, "one of its inputs is not on a CUDA device")
        key = tuple(_signature(a) for a in args)
        rec = self.recordings.get(key)
        if rec is None:
            if key not in self.first_ptrs:
                if len(self.first_ptrs) >= MAX_RECORDINGS:
                    return self._plain(args, f"its inputs took more than {MAX_RECORDINGS} signatures")
                return self._warm_up(key, args)
            try:
                return self._record(key, args)
            except Exception as exc:  # e.g. an op that synchronises: not capturable
                self.eager_only = True
                return self._plain(args, f"CUDA graph capture failed ({type(exc).__name__}: {exc})")
        moved = {i for i, p in rec.pinned_ptrs.items() if args[i].data_ptr() != p}
        if moved:
            # An input read in place has moved (a replaced parameter, or an activation that merely
            # happened to reuse its address): copy it from now on, and record again.
            del self.recordings[key]
            self.never_pin.setdefault(key, set()).update(moved)
            return self._record(key, args)
        return self._replay(rec, args)

    def _replay(self, rec: _Recording, args: Sequence[Any]) -> Any:
        for i in rec.moving:
            rec.static_inputs[i].copy_(args[i])
        rec.graph.replay()
        for i in rec.copy_back:
            args[i].copy_(rec.static_inputs[i])
        outputs = rec.static_outputs
        if isinstance(outputs, torch.Tensor):  # Inductor returns a graph's single output as it is
            return outputs.clone()
        cloned = [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]
        return tuple(cloned) if isinstance(outputs, tuple) else cloned

    def _warm_up(self, key: Any, args: Sequence[Any]) -> Any:
        self.first_ptrs[key] = [a.data_ptr() if isinstance(a, torch.Tensor) else None for a in args]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out = self.fn(*args)
        torch.cuda.current_stream().wait_stream(stream)
        return out

    def _record(self, key: Any, args: Sequence[Any]) -> Any:
        first = self.first_ptrs[key]
        never_pin = self.never_pin.get(key, set())
        static_inputs: list[Any] = []
        moving: list[int] = []
        pinned: dict[int, int] = {}
        for i, arg in enumerate(args):
            if not isinstance(arg, torch.Tensor):
                static_inputs.append(arg)
            elif arg.data_ptr() == first[i] and i not in never_pin:
                static_inputs.append(arg)  # stable storage (a parameter, a static cache): in place
                pinned[i] = arg.data_ptr()
            else:
                static_inputs.append(arg.detach().clone())
                moving.append(i)
        if self.copy_back is None:  # unknown: every copied input that can be written goes back
            copy_back = [i for i in moving if not _overlaps_itself(args[i])]
        else:
            copy_back = [i for i in moving if i in self.copy_back]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_outputs = self.fn(*static_inputs)
        rec = _Recording(graph, static_inputs, moving, copy_back, pinned, static_outputs)
        self.recordings[key] = rec
        # the capture only recorded the kernels: this call's results come from the first replay
        return self._replay(rec, args)
