"""The `aot_eager` backends: AOTAutograd with compilers that do nothing.

Why they exist: AOTAutograd traces the graph down to ATen, functionalises it and splits forward
from backward, which is most of what Inductor sees. Running those graphs unchanged tells apart a
bug in AOTAutograd's handling of a captured graph from a bug in Inductor's code generation. The
three differ in how much of Inductor's front end they apply, as torch.compile's backends of the
same names do (torch's behaviour is the contract):

- `aot_eager`: the min-cut partitioner, which recomputes cheap operations in the backward pass
  rather than saving their results, and input mutations kept in the inference graph;
- `aot_eager_default_partitioner`: AOTAutograd's default partitioner (saves what the backward
  reads), input mutations kept in the inference graph;
- `aot_eager_decomp_partition`: Inductor's decomposition table and Inductor's flavour of the
  min-cut partitioner, so the graphs are the ones Inductor would generate code for.

`aot_eager`'s artifact (artifacts.py) is AOTAutograd's own cache entry (`_aot_bundle.py`): the forward and
backward graphs, stored as graphs, with the metadata from which AOTAutograd rebuilds its runtime
wrappers (input mutations, aliased outputs, detaching) on load; plus the wrapper restoring the
graph's output structure. Loading traces and partitions nothing; the backward is compiled when
the forward is, not at the first backward call.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._graph_outputs import with_flat_tuple_output
from .artifacts import ArtifactError, NotPersistable, declined
from .subclass_graphs import unless_subclasses

if TYPE_CHECKING:
    import torch.fx

__all__ = [
    "aot_eager",
    "aot_eager_decomp_partition",
    "aot_eager_default_partitioner",
    "compile_with_aot",
    "load_artifact",
]

# added to AOTAutograd's cache key, whose key leaves out the compilers and the partitioner; the
# revision changes whenever what GraphCode stores does (entries of revision 1 held no compile
# time, on which torch 2.15's cache hits fail)
_CACHE_TAG = "stenograph aot_eager rev 2: min-cut partitioner, graphs run as they are"


def _nop_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Run the ATen graph AOTAutograd hands over as it is."""
    return gm.forward


def compile_with_aot(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    compiler: Callable[..., Any] | None = None,
    **aot_options: Any,
) -> Callable[..., Any]:
    """Compile `gm` with AOTAutograd, handing its forward and backward graphs to `compiler`, a
    compiler in AOTAutograd's boxed convention (as functorch's are), or running them as they
    are (None); `aot_options` go to `aot_module_simplified`."""
    # Imported here: AOTAutograd pulls in torch._inductor and torch._dynamo, seconds of imports.
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_compiler

    # AOTAutograd calls compiled graphs with one list argument (the "boxed" convention, which
    # lets the callee free inputs early); make_boxed_compiler adapts our plain-call compiler.
    boxed = compiler or make_boxed_compiler(_nop_compiler)

    def aot(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        flat_gm, restore = with_flat_tuple_output(gm)
        compiled = aot_module_simplified(flat_gm, example_inputs, fw_compiler=boxed, bw_compiler=boxed, **aot_options)
        return restore(compiled)

    return unless_subclasses(aot, gm, example_inputs)


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """AOTAutograd with the min-cut partitioner and no-op compilers."""
    # Imported here: AOTAutograd is slow to import (see compile_with_aot).
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return compile_with_aot(
        gm, example_inputs, partition_fn=min_cut_rematerialization_partition, keep_inference_input_mutations=True
    )


def aot_eager_default_partitioner(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """AOTAutograd with its default partitioner and no-op compilers."""
    return compile_with_aot(gm, example_inputs, keep_inference_input_mutations=True)


def aot_eager_decomp_partition(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """AOTAutograd with Inductor's decompositions and partitioner, and no-op compilers."""
    # Imported here: Inductor and AOTAutograd are slow to import (see compile_with_aot).
    from torch._functorch import config as functorch_config
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.compile_fx import select_decomp_table

    # effect tokens (from ops with side effects) become plain graph inputs, as Inductor wants them
    with functorch_config.patch(unlift_effect_tokens=True):
        return compile_with_aot(
            gm,
            example_inputs,
            decompositions=select_decomp_table(),
            partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"),
        )


class _Artifacts:
    """How `aot_eager` stores what it compiled (the `stenograph_artifacts` protocol of artifacts.py)."""

    identity = "aot_eager"
    loader = "stenograph.backends.aot_eager:load_artifact"
    loads_with = ("stenograph.backends._aot_bundle",)

    def compile_with_artifact(
        self, gm: torch.fx.GraphModule, example_inputs: list[Any]
    ) -> tuple[Callable[..., Any], bytes | None]:
        # Imported here: AOTAutograd pulls in torch._inductor and torch._dynamo, seconds of imports.
        from torch._functorch.aot_autograd import aot_module_simplified
        from torch._functorch.partitioners import min_cut_rematerialization_partition

        from . import _aot_bundle  # torch._inductor too, as above

        flat_gm, restore = with_flat_tuple_output(gm)
        try:
            with _aot_bundle.bundling(_CACHE_TAG):
                compiler = _aot_bundle.graph_code_compiler()
                compiled = aot_module_simplified(
                    flat_gm,
                    example_inputs,
                    fw_compiler=compiler,
                    bw_compiler=compiler,
                    partition_fn=min_cut_rematerialization_partition,
                    keep_inference_input_mutations=True,
                )
        except NotPersistable as reason:
            declined(self.identity, reason)
            return aot_eager(gm, example_inputs), None
        try:
            entry = _aot_bundle.dumps_entry(_aot_bundle.bundled_entry(compiled))
            payload = pickle.dumps((entry, restore, _aot_bundle.config_digest()))
        except (NotPersistable, pickle.PicklingError, TypeError, AttributeError) as reason:
            declined(self.identity, reason)
            payload = None
        return restore(compiled), payload


def load_artifact(payload: bytes) -> Callable[..., Any]:
    """The callable an `aot_eager` artifact holds, with AOTAutograd's runtime wrappers."""
    from . import _aot_bundle  # imports torch._inductor: seconds, paid only by loading

    entry, restore, digest = pickle.loads(payload)
    if digest != _aot_bundle.config_digest():
        raise ArtifactError("AOTAutograd's settings (torch._functorch.config) differ from the artifact's")
    return restore(_aot_bundle.rebuild(pickle.loads(entry)))


aot_eager.stenograph_artifacts = _Artifacts()  # type: ignore[attr-defined]
