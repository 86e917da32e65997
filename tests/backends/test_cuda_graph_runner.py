"""stenograph's own CUDA-graph replay (backends/cuda_graph_runner.py): which inputs a graph writes,
when Inductor's CUDA-graph modes use it, and (on a GPU) that replays return what eager returns,
with outputs a caller holds never overwritten and in-place updates applied exactly once."""

from __future__ import annotations

import operator

import pytest
import torch

import stenograph
from stenograph.backends import inductor as inductor_backend
from stenograph.backends.cuda_graph_runner import MAX_RECORDINGS, CudaGraphRunner, mutated_placeholders

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _graph(build) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    build(graph)
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_writes_through_methods_views_setitem_and_out_are_found() -> None:
    def build(g: torch.fx.Graph) -> None:
        keys, length, pos, k, x, z, w, unused = (g.placeholder(n) for n in "keys length pos k x z w unused".split())
        g.call_method("add_", (length, 1))
        g.call_method("index_copy_", (keys, 2, pos, k))
        doubled = g.call_function(operator.mul, (x, 2))
        g.call_method("add_", (doubled, 1))  # a new tensor made from x: x itself is not written
        row = g.call_function(operator.getitem, (z, 0))
        g.call_method("mul_", (g.call_method("transpose", (row, 0, 1)), 2))
        g.call_function(torch.add, (k, 1), {"out": w})
        g.output((keys, doubled, unused))

    assert mutated_placeholders(_graph(build)) == {0, 1, 5, 6}


def test_setitem_and_augmented_assignment_are_writes() -> None:
    def build(g: torch.fx.Graph) -> None:
        a, b, c = g.placeholder("a"), g.placeholder("b"), g.placeholder("c")
        g.call_function(operator.setitem, (a, 0, 1.0))
        g.call_function(operator.iadd, (g.call_method("view", (b, -1)), 1))
        g.output(g.call_function(torch.relu, (c,)))

    assert mutated_placeholders(_graph(build)) == {0, 1}


def test_graphs_on_the_cpu_are_never_replayed() -> None:
    replays = inductor_backend._replays_inference
    with torch.no_grad():
        assert not replays([torch.randn(2)], {"triton.cudagraphs": True})


@needs_cuda
def test_inductor_replays_only_inference_graphs_in_cuda_graph_modes() -> None:
    weight = torch.nn.Parameter(torch.randn(2, device="cuda"))
    replays = inductor_backend._replays_inference
    assert not replays([weight], {})
    assert not replays([weight], {"triton.cudagraphs": False})
    assert not replays([weight], {"triton.cudagraphs": True})  # grad on, a parameter: training graph
    with torch.no_grad():
        assert replays([weight], {"triton.cudagraphs": True})
    assert replays([torch.randn(2, device="cuda")], {"triton.cudagraphs": True})
    with stenograph.config.patch(cuda_graphs_for_inference=False):
        assert not replays([torch.randn(2, device="cuda")], {"triton.cudagraphs": True})


def test_tensors_off_the_gpu_run_the_function_as_it_is() -> None:
    calls = []

    def fn(a: torch.Tensor) -> tuple[torch.Tensor]:
        calls.append(a)
        return (a + 1,)

    runner = CudaGraphRunner(fn, copy_back=frozenset(), fallback_warning=None)
    for _ in range(3):
        assert torch.equal(runner(torch.ones(2))[0], torch.full((2,), 2.0))
    assert len(calls) == 3 and not runner.recordings


def test_the_cudagraphs_backend_warns_once_when_it_cannot_replay() -> None:
    runner = CudaGraphRunner(lambda a: (a * 2,), copy_back=frozenset(), fallback_warning="backend X: eager")
    with pytest.warns(UserWarning, match="backend X: eager because one of its inputs is not on a CUDA device"):
        runner(torch.ones(1))
    runner(torch.ones(1))  # no second warning (pytest's filter turns one into an error otherwise)


class _Decoder(torch.nn.Module):
    """A static KV cache updated in place and a step counter, as HF's StaticCache has them."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.register_buffer("keys", torch.zeros(1, 8, 16))
        self.register_buffer("length", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        k = self.proj(x)
        self.keys.index_copy_(1, position, k)
        self.length.add_(1)
        return self.keys.sum(1) + self.length


@needs_cuda
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_decode_loop_holds_every_output_and_updates_the_cache_once_per_call(mode: str) -> None:
    torch.manual_seed(0)
    eager, model = _Decoder().cuda(), _Decoder().cuda()
    model.load_state_dict(eager.state_dict())
    compiled = stenograph.compile(model, backend="inductor", mode=mode)
    held, expected = [], []
    with torch.no_grad():
        for step in range(6):
            x = torch.randn(1, 1, 16, device="cuda")
            position = torch.tensor([step], device="cuda")
            expected.append(eager(x, position))
            held.append(compiled(x, position))  # every output kept while the loop goes on
    for got, want in zip(held, expected):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(model.keys, eager.keys)
    assert int(model.length) == int(eager.length) == 6


@needs_cuda
def test_an_input_written_in_place_is_updated_for_the_caller() -> None:
    def step(x: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
        counter.add_(1)
        return x * counter

    compiled = stenograph.compile(step, backend="inductor", mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):
            counter = torch.zeros(3, device="cuda")  # a new tensor each call: copied, then copied back
            x = torch.randn(3, device="cuda")
            out = compiled(x, counter)
            torch.testing.assert_close(counter, torch.ones(3, device="cuda"))
            torch.testing.assert_close(out, x)


@needs_cuda
def test_replays_are_recorded_once_per_signature_and_capped() -> None:
    calls = []

    def fn(a: torch.Tensor) -> tuple[torch.Tensor]:
        calls.append(1)
        return (a + 1,)

    runner = CudaGraphRunner(fn, copy_back=frozenset(), fallback_warning=None)
    a = torch.ones(4, device="cuda")
    for _ in range(5):
        torch.testing.assert_close(runner(a)[0], a + 1)
    assert len(calls) == 2 and len(runner.recordings) == 1  # warm-up, recording; then replays only
    for n in range(1, MAX_RECORDINGS + 3):
        bigger = torch.ones(n + 4, device="cuda")
        torch.testing.assert_close(runner(bigger)[0], bigger + 1)
    assert len(runner.first_ptrs) == MAX_RECORDINGS
