"""Programs compiled for CUDA graphs advance the CUDA-graph trees' call counter once per user call.

The functions here contain no tensor operation, so no graph reaches Inductor and the tests stay
fast on a CPU-only machine; what is checked is the counter the trees read, and eager's results.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.mutation_guard import GenerationTracker

import stenograph


def passthrough(x):
    return x


def with_break(x):
    y = x
    stenograph.graph_break()
    return y


class Passthrough(torch.nn.Module):
    def forward(self, x):
        return x


def generations_used(fn, *args, calls: int = 3) -> int:
    before = GenerationTracker.generation
    for _ in range(calls):
        assert fn(*args) is args[-1]
    return GenerationTracker.generation - before


MODES_PER_CALL = [("reduce-overhead", 1), ("max-autotune", 1), ("default", 0), ("max-autotune-no-cudagraphs", 0)]


@pytest.mark.parametrize(("mode", "per_call"), MODES_PER_CALL)
def test_one_mark_per_call_in_cuda_graph_modes(mode: str, per_call: int) -> None:
    x = torch.ones(2)
    assert generations_used(stenograph.compile(passthrough, mode=mode), x) == 3 * per_call
    assert generations_used(stenograph.compile(Passthrough(), mode=mode), x) == 3 * per_call


def test_graph_breaks_do_not_add_marks() -> None:
    """Graphs of one call must not free each other's outputs: one mark per call, not per graph."""
    compiled = stenograph.compile(with_break, mode="reduce-overhead")
    assert generations_used(compiled, torch.ones(2)) == 3


def test_bound_methods_and_options() -> None:
    holder = Passthrough()
    method = stenograph.compile(holder.forward, options={"triton.cudagraphs": True})
    assert generations_used(method, torch.ones(2)) == 3
    plain = stenograph.compile(passthrough, options={"triton.cudagraphs": False})
    assert generations_used(plain, torch.ones(2)) == 0


def test_global_inductor_config_counts() -> None:
    from torch._inductor import config

    with config.patch({"triton.cudagraphs": True}):
        compiled = stenograph.compile(passthrough)
    assert generations_used(compiled, torch.ones(2)) == 3
    assert generations_used(stenograph.compile(passthrough), torch.ones(2)) == 0


def test_other_backends_never_mark() -> None:
    assert generations_used(stenograph.compile(passthrough, backend="eager"), torch.ones(2)) == 0
    with stenograph.config.patch(cudagraph_call_marks=False):
        assert generations_used(stenograph.compile(passthrough, mode="reduce-overhead"), torch.ones(2)) == 0


def test_marked_wrapper_keeps_the_entry_attributes() -> None:
    compiled = stenograph.compile(passthrough, mode="reduce-overhead")
    compiled(torch.ones(2))
    assert compiled.__stenograph_original__ is passthrough
    assert stenograph.inspect(compiled) is not None
    assert stenograph.compile(compiled, backend="eager")(torch.ones(2)).shape == (2,)
