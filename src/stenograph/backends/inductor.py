"""The `inductor` backend: PyTorch's Inductor compiler (`torch._inductor.compile_fx`).

`mode=` / `options=` become Inductor config patches (see `modes.py`). Two entry points exist
because they serve different callers: the registered `inductor(gm, example_inputs, *, mode=...,
options=...)` follows the generic backend contract, and `inductor_backend(mode, options)` checks
mode and options once, when `compile()` is called, and returns a plain two-argument backend.

Both carry `stenograph_artifacts` (artifacts.py): what they compile can be stored and loaded in a
new process without compiling (`_inductor_artifacts.py` says how). The artifact's identity is
the config patches, so a `reduce-overhead` artifact never stands in for a default one.

Both also carry `before_tracing` (`start_compile_workers`), which the frame compiler calls when a
trace for this backend begins.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .. import config
from ._ptxas import use_inductors_ptxas
from ._static_inputs import mark_static_inputs
from .artifacts import declined
from .call_marks import wants_cuda_graphs
from .cuda_graph_runner import CudaGraphRunner, mutated_placeholders
from .modes import resolve_mode
from .subclass_graphs import unless_subclasses

if TYPE_CHECKING:
    from .registry import CompilerFn

__all__ = ["inductor", "inductor_backend", "load_artifact"]


def _compile(
    gm: torch.fx.GraphModule, example_inputs: list[Any], patches: dict[str, Any], name: str | None = None
) -> Callable[..., Any]:
    if not _replays_inference(example_inputs, patches):
        return _compile_fx(gm, example_inputs, patches, name)
    copy_back = mutated_placeholders(gm)
    compiled = _compile_fx(gm, example_inputs, _without_cuda_graphs(patches), name)
    return CudaGraphRunner(compiled, copy_back=copy_back, fallback_warning=None)


def _without_cuda_graphs(patches: dict[str, Any]) -> dict[str, Any]:
    """`patches` with Inductor's own CUDA graphs off (stenograph replays the graph instead)."""
    return {**patches, "triton.cudagraphs": False}


def _compile_fx(
    gm: torch.fx.GraphModule, example_inputs: list[Any], patches: dict[str, Any], name: str | None = None
) -> Callable[..., Any]:
    """Inductor's `compile_fx` with `patches`; `name` is compile()'s, which Inductor puts on the
    regions it compiles (`compile_region_name`: the `inductor_compiled_code` operator that
    `wrap_inductor_compiled_regions` runs them through carries it)."""
    # Imported here: torch._inductor takes seconds to import and most programs never need it.
    from torch._inductor.async_compile import maybe_warm_pool
    from torch._inductor.compile_fx import compile_fx

    # Inductor's pool of processes compiling Triton kernels takes seconds to start: started now,
    # it is ready when lowering ends (where Triton is installed; otherwise it does nothing).
    # Without it the first kernels compile one by one in this process.
    maybe_warm_pool()
    # every kernel of this process, in its workers or here, built by one ptxas (`_ptxas.py`)
    use_inductors_ptxas()

    if config.mark_static_inputs:
        # parameters/buffers are static for CUDA graphs, as under torch.compile (_static_inputs.py)
        mark_static_inputs(gm, example_inputs)
    # the region's name only where compile() was given one (older torch's compile_fx lacks it)
    named = {} if name is None else {"compile_region_name": name}
    return unless_subclasses(
        lambda gm, example_inputs: compile_fx(gm, example_inputs, config_patches=dict(patches), **named),
        gm,
        example_inputs,
    )


def start_compile_workers() -> None:
    """Start Inductor's pool of processes compiling Triton kernels, where a GPU and Triton are
    present (once per process: Inductor keeps the pool). The pool takes seconds to start in the
    background; started when a trace begins rather than when the backend is called (as
    torch.compile starts it), its start overlaps the trace and AOTAutograd."""
    if not torch.cuda.is_available() or importlib.util.find_spec("triton") is None:
        return
    from torch._inductor.async_compile import maybe_warm_pool  # torch._inductor: seconds of imports

    maybe_warm_pool()


def _replays_inference(example_inputs: list[Any], patches: dict[str, Any]) -> bool:
    """Whether a graph compiled with `patches` is replayed by stenograph's own CUDA graphs
    (cuda_graph_runner.py) rather than Inductor's cudagraph trees: a CUDA-graph mode, a graph that
    computes no gradients (as AOTAutograd decides it), plain tensors for inputs, some on a GPU."""
    if not config.cuda_graphs_for_inference or not wants_cuda_graphs(patches):
        return False
    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False
    plain = all(type(t) in (torch.Tensor, torch.nn.Parameter) for t in tensors)
    return plain and any(t.device.type == "cuda" for t in tensors)


def inductor(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """Compile `gm` with Inductor, with the config patches that `mode` or `options` select."""
    return _compile(gm, example_inputs, resolve_mode(mode, options))


class _Artifacts:
    """How `inductor` stores what it compiled (the `stenograph_artifacts` protocol of artifacts.py)."""

    loader = "stenograph.backends.inductor:load_artifact"
    # Inductor's generated wrapper modules import its kernel selection (and with it its lowerings)
    loads_with = ("stenograph.backends._inductor_artifacts", "torch._inductor.select_algorithm")

    def __init__(self, patches: dict[str, Any], name: str | None = None) -> None:
        self.patches = dict(patches)
        self.name = name
        # a stored graph keeps the region name it was compiled with
        named = "" if name is None else f" name={name!r}"
        try:
            self.identity = "inductor " + json.dumps(self.patches, sort_keys=True) + named
        except TypeError:  # an option whose value JSON cannot write (a custom pass): not stored
            self.identity = f"inductor (unstorable options {sorted(self.patches)})"
            self.storable = False
        else:
            self.storable = True

    def warm_up(self) -> None:
        # torch._inductor: seconds of imports, which the loaders pay anyway (`loads_with`)
        from ._inductor_artifacts import hash_sources_in_background

        hash_sources_in_background()

    def compile_with_artifact(
        self, gm: torch.fx.GraphModule, example_inputs: list[Any]
    ) -> tuple[Callable[..., Any], bytes | None]:
        if not self.storable:
            declined(self.identity, "options that cannot be written down")
            return _compile(gm, example_inputs, self.patches, self.name), None
        # torch._inductor takes seconds to import and most programs never need it.
        from ._inductor_artifacts import compile_storable

        replayed = _replays_inference(example_inputs, self.patches)
        patches = _without_cuda_graphs(self.patches) if replayed else self.patches
        copy_back = mutated_placeholders(gm) if replayed else None

        def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
            return _compile_fx(gm, example_inputs, patches, self.name)

        compiled, payload = compile_storable(gm, example_inputs, compile_graph, patches, self.identity, replayed)
        if replayed:
            compiled = CudaGraphRunner(compiled, copy_back=copy_back, fallback_warning=None)
        return compiled, payload


def load_artifact(payload: bytes) -> Callable[..., Any]:
    """The callable an `inductor` artifact holds, loaded without compiling."""
    from ._inductor_artifacts import load  # torch._inductor: seconds of imports

    return load(payload)


inductor.config_patches = {}  # type: ignore[attr-defined]  # none: Inductor's global config rules
inductor.stenograph_artifacts = _Artifacts({})  # type: ignore[attr-defined]
inductor.before_tracing = start_compile_workers  # type: ignore[attr-defined]


def inductor_backend(
    mode: str | None = None, options: dict[str, Any] | None = None, name: str | None = None
) -> CompilerFn:
    """An Inductor backend bound to `mode` or `options`, validated now rather than at first call,
    and to compile()'s `name` for the regions it compiles."""
    patches = resolve_mode(mode, options)

    def inductor_with_patches(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        return _compile(gm, example_inputs, patches, name)

    inductor_with_patches.__name__ = "inductor"
    inductor_with_patches.mode = mode  # type: ignore[attr-defined]
    inductor_with_patches.config_patches = dict(patches)  # type: ignore[attr-defined]
    inductor_with_patches.stenograph_artifacts = _Artifacts(patches, name)  # type: ignore[attr-defined]
    inductor_with_patches.before_tracing = start_compile_workers  # type: ignore[attr-defined]
    return inductor_with_patches
