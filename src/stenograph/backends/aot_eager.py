"""The `aot_eager` backend: AOTAutograd with compilers that do nothing.

Why it exists: AOTAutograd traces the graph down to ATen, functionalises it and splits forward
from backward, which is most of what Inductor sees. Running those graphs unchanged tells apart a
bug in AOTAutograd's handling of a captured graph from a bug in Inductor's code generation. The
split is Inductor's (and torch.compile's `aot_eager`'s): the min-cut partitioner, which recomputes
cheap operations in the backward pass rather than saving their results, and input mutations kept
in the inference graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._graph_outputs import with_flat_tuple_output

if TYPE_CHECKING:
    import torch.fx

__all__ = ["aot_eager"]


def _nop_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Run the ATen graph AOTAutograd hands over as it is."""
    return gm.forward


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Compile `gm` with AOTAutograd, using no-op forward and backward compilers."""
    # Imported here: AOTAutograd pulls in torch._inductor and torch._dynamo, seconds of imports.
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_compiler
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    # AOTAutograd calls compiled graphs with one list argument (the "boxed" convention, which
    # lets the callee free inputs early); make_boxed_compiler adapts our plain-call compiler.
    nop = make_boxed_compiler(_nop_compiler)
    flat_gm, restore = with_flat_tuple_output(gm)
    compiled = aot_module_simplified(
        flat_gm,
        example_inputs,
        fw_compiler=nop,
        bw_compiler=nop,
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=True,
    )
    return restore(compiled)
