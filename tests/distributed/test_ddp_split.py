"""The DDP optimizer in one process: a graph compiled while a (stand-in) DDP module is active is
split at its buckets, each piece compiled on its own, results and gradients those of eager, and
the split shown by explain(), the logs, the report and its trace. The 2-process runs against real
DDP are in test_ddp.py."""

from __future__ import annotations

import copy
import operator

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

import stenograph
from stenograph import structured_trace
from stenograph.backends.ddp_split import compile_split
from stenograph.report import from_trace, html, recorder
from stenograph.testing import CompileCounter, CompileCounterWithBackend

from .ddp_models import (
    TinyTransformer,
    compiled_function_nodes,
    expected_pieces,
    inside_ddp,
    module_bytes,
    stand_in_ddp,
)

X = (2, 5, 8)
CAPS = [(4096, None), (8192, None), (2048, None), (2048, 256), (1 << 30, None)]


@pytest.fixture(autouse=True)
def _logs_off():
    stenograph.set_logs()
    yield
    stenograph.set_logs()


def _train_step(model: nn.Module, ddp: object, x: torch.Tensor, backend: object) -> tuple[torch.Tensor, int]:
    """Loss and compiled autograd functions of one step of `model` compiled inside `ddp`'s forward."""
    compiled = stenograph.compile(model, backend=backend)
    with inside_ddp(ddp):
        loss = compiled(x).pow(2).mean()
    nodes = compiled_function_nodes(loss)
    loss.backward()
    return loss, nodes


@pytest.mark.parametrize(("cap", "first_cap"), CAPS, ids=["4k", "8k", "2k", "2k-first", "all"])
def test_pieces_follow_the_buckets_and_train_as_eager(cap, first_cap):
    model = TinyTransformer()
    reference = copy.deepcopy(model)
    x = torch.randn(X)
    counter = CompileCounterWithBackend("aot_eager")
    loss, nodes = _train_step(model, stand_in_ddp(model, cap, first_cap), x, counter)
    reference(x).pow(2).mean().backward()
    pieces = expected_pieces(module_bytes(model), cap, first_cap)
    assert counter.frame_count == pieces
    assert nodes == pieces  # one autograd node per piece: DDP's hooks fire bucket by bucket
    torch.testing.assert_close(loss, reference(x).pow(2).mean(), rtol=0, atol=1e-6)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-6)


def test_expected_count_is_not_trivial():
    """The caps above give different piece counts (the assertion is worth something)."""
    sizes = module_bytes(TinyTransformer())
    assert [expected_pieces(sizes, cap, first) for cap, first in CAPS] == [5, 3, 7, 8, 1]


def test_second_call_does_not_recompile_and_changed_input_does():
    model = TinyTransformer()
    counter = CompileCounter()
    compiled = stenograph.compile(model, backend=counter)
    ddp = stand_in_ddp(model, 4096)
    with inside_ddp(ddp):
        compiled(torch.randn(X))
        assert counter.frame_count == 5
        compiled(torch.randn(X))
        assert counter.frame_count == 5
        compiled(torch.randn(2, 7, 8))
    assert counter.frame_count == 10  # a new length: compiled again (with a symbolic length), split again


def test_optimize_ddp_off_or_no_ddp_gives_one_graph():
    model = TinyTransformer()
    counter = CompileCounter()
    with stenograph.config.patch(optimize_ddp=False), inside_ddp(stand_in_ddp(model, 4096)):
        stenograph.compile(model, backend=counter)(torch.randn(X))
    assert counter.frame_count == 1
    stenograph.reset()
    stenograph.compile(model, backend=counter)(torch.randn(X))  # no DDP module active
    assert counter.frame_count == 2
    assert stenograph.config.optimize_ddp is True


def test_ignored_and_frozen_parameters_count_nothing():
    model = TinyTransformer()
    for p in model.blocks[0].parameters():
        p.requires_grad_(False)
    ignored = tuple(name for name, _ in model.named_parameters() if name.startswith("blocks.1."))
    ddp = stand_in_ddp(model, 256, ignore=ignored)
    counted = {id(p) for name, p in model.named_parameters() if name not in ignored}
    sizes = module_bytes(model, counted)
    assert sizes == [576, 272]  # the embedding and the head: two buckets of their own
    assert expected_pieces(module_bytes(model), 256) == 6  # had block 1 counted
    counter = CompileCounter()
    _train_step(model, ddp, torch.randn(X), counter)
    assert counter.frame_count == expected_pieces(sizes, 256) == 2


def test_leading_ops_without_parameters_join_the_first_piece():
    model = nn.Sequential(nn.ReLU(), nn.Linear(4, 4), nn.Linear(4, 4))  # 80 bytes each
    counter = CompileCounter()
    compiled = stenograph.compile(model, backend=counter)
    with inside_ddp(stand_in_ddp(model, 16)):
        compiled(torch.randn(3, 4))
    first, second = counter.graphs  # not three: relu has no parameters
    assert "relu" in first.code and "linear" in first.code and "relu" not in second.code


class _TwoLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w0 = nn.Parameter(torch.randn(4, 4))
        self.w1 = nn.Parameter(torch.randn(4, 4))


class _ExampleValues(torch.fx.Interpreter):
    """Runs a graph, keeping each node's value as its `example_value` (as a trace leaves it)."""

    def run_node(self, n: torch.fx.Node) -> object:
        n.meta["example_value"] = result = super().run_node(n)
        return result


def test_a_tuple_never_crosses_pieces():
    """`h = x @ w0; parts = h.chunk(1); y = h @ w1; y + parts[0]` (the item read after w1's op):
    the cut after w0's op goes before the chunk, not between the chunk and its item."""
    module = _TwoLinears()
    x = torch.randn(4, 4)
    graph = torch.fx.Graph()
    inputs = [graph.placeholder(name) for name in ("x", "w0", "w1")]
    h = graph.call_function(torch.mm, (inputs[0], inputs[1]))
    parts = graph.call_function(torch.chunk, (h, 1))
    y = graph.call_function(torch.mm, (h, inputs[2]))
    item = graph.call_function(operator.getitem, (parts, 0))
    graph.output((graph.call_function(torch.add, (y, item)),))
    gm = torch.fx.GraphModule(nn.Module(), graph)
    examples = [x, module.w0, module.w1]
    _ExampleValues(gm).run(*examples)
    pieces: list[torch.fx.GraphModule] = []

    def backend(piece: torch.fx.GraphModule, example_inputs: list) -> object:
        pieces.append(piece)
        return piece.forward

    compiled, split, _ = compile_split(gm, examples, backend, stand_in_ddp(module, 16))
    assert len(pieces) == 2 and split is not None and [len(p.params) for p in split.pieces] == [1, 1]
    assert "chunk" not in pieces[0].code and "chunk" in pieces[1].code
    torch.testing.assert_close(compiled(*examples)[0], gm(*examples)[0])


def test_each_piece_gets_its_own_example_inputs():
    model = TinyTransformer()
    seen: list[list] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        seen.append(example_inputs)
        return gm.forward

    x = torch.randn(X)
    compiled = stenograph.compile(model, backend=backend)
    with inside_ddp(stand_in_ddp(model, 4096)):
        compiled(x)
    assert len(seen) == 5
    assert seen[0][0] is x  # the graph's own inputs keep their examples
    later = seen[-1]
    assert any(isinstance(e, FakeTensor) for e in later)  # values of earlier pieces: fakes
    assert all(isinstance(e, nn.Parameter) for e in later if not isinstance(e, FakeTensor))
    assert {id(e) for e in later if isinstance(e, nn.Parameter)} == {
        id(p) for p in [*model.blocks[1].fc1.parameters(), *model.blocks[1].fc2.parameters(), *model.head.parameters()]
    }


def test_explain_says_the_graph_was_split():
    model = TinyTransformer()
    with inside_ddp(stand_in_ddp(model, 4096)):
        result = stenograph.explain(model)(torch.randn(X))
    assert result.graph_count == 5  # what reached the backend: the pieces
    assert result.ddp_splits == ["_Stack.forward: " + _summary(5, "4.0 KiB", "4.0 KiB")]
    assert "DDP Splits:\n  _Stack.forward: graph split into 5 pieces for DDP buckets" in str(result)


def _summary(pieces: int, cap: str, first: str) -> str:
    return f"graph split into {pieces} pieces for DDP buckets (bucket cap {cap}, first bucket {first})"


def test_logs_show_the_pieces(capsys):
    stenograph.set_logs(ddp_graphs=True, graph_code=True)
    model = TinyTransformer()
    with inside_ddp(stand_in_ddp(model, 8192)):
        stenograph.compile(model, backend="eager")(torch.randn(X))
    err = capsys.readouterr().err
    assert "[stenograph.ddp_graphs] DDP SPLIT [" in err
    assert _summary(3, "8.0 KiB", "8.0 KiB") in err
    assert "piece 0: 704 B in 4 params, 2 ops: L['self'].blocks.0.ln1.weight" in err  # embed and ln1
    assert "piece 2: 8.8 KiB in 12 params, 22 ops: L['self'].head.weight, L['self'].head.bias, " in err
    assert "--- piece 2" in err and "class GraphModule(torch.nn.Module)" in err
    assert "STENOGRAPH_LOGS=ddp_graphs shows them)" in err  # the graph_code log points there


def test_report_and_trace_show_the_split(tmp_path):
    model = TinyTransformer()
    rec = recorder.Recorder(time_calls=False).start()
    try:
        with inside_ddp(stand_in_ddp(model, 8192)):
            stenograph.compile(model, backend="eager")(torch.randn(X))
    finally:
        rec.stop()
    (record,) = rec.session.compiles()
    assert record.ddp_split.startswith(_summary(3, "8.0 KiB", "8.0 KiB") + "\n  piece 0: ")
    page = html.render(rec.session)
    assert "<b>Split for DDP:</b> graph split into 3 pieces" in page
    writer = structured_trace.TraceWriter(str(tmp_path / "stenograph_trace_1_1.log"))
    frame = rec.session.frames[0]
    writer.on_record("started", frame, record)
    writer.on_record("compiled", frame, record)
    writer.close()
    assert from_trace.load(str(tmp_path)).compiles()[0].ddp_split == record.ddp_split


@pytest.mark.slow
def test_inductor_compiles_each_piece_also_with_symbolic_sizes():
    model = TinyTransformer(layers=1)
    reference = copy.deepcopy(model)
    counter = CompileCounterWithBackend("inductor")
    compiled = stenograph.compile(model, backend=counter)
    x, longer = torch.randn(X), torch.randn(2, 7, 8)
    with inside_ddp(stand_in_ddp(model, 4096)):
        out = compiled(x)
        out.pow(2).mean().backward()
        torch.testing.assert_close(compiled(longer), reference(longer))
    reference(x).pow(2).mean().backward()
    pieces = expected_pieces(module_bytes(model), 4096)
    assert pieces == 3 and counter.frame_count == 2 * pieces
    torch.testing.assert_close(out, reference(x))
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
