"""`nested_compile_region`: a function traced into a subgraph its calls share when their inputs
match; compiled vs eager on results and gradients on every backend, the sharing visible in the
graph, torch's invoke_subgraph under AOTAutograd, and what is inlined or breaks instead."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._functorch.aot_autograd import aot_module_simplified

import stenograph
from stenograph.testing import CompileCounterWithBackend
from stenograph.variables.compile_regions import invoke_region

from ._support import check, t

BACKENDS = ["eager", "aot_eager"]


@stenograph.nested_compile_region
def block(x, w):
    return torch.sin(x @ w) * 2


def two_blocks(x, w1, w2):
    return block(block(x, w1), w2).sum()


def _region_calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.target is invoke_region]


def _subgraphs_read(gm: torch.fx.GraphModule) -> list[str]:
    return [n.args[0].target for n in _region_calls(gm)]


def _square(i):
    return t(3, 3, seed=i, grad=True), t(3, 3, seed=i + 10, grad=True), t(3, 3, seed=i + 20, grad=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_with_matching_inputs_share_one_subgraph(backend):
    cnt = CompileCounterWithBackend(backend)
    check(two_blocks, _square, cnt, calls=2, grads=True, peer=False)
    gm = cnt.graphs[0]
    assert _subgraphs_read(gm) == ["subgraph", "subgraph"]  # two calls, one subgraph
    assert [name for name, _ in gm.named_children()] == ["subgraph"]
    assert [n.op for n in gm.subgraph.graph.nodes] == ["placeholder", "placeholder", *["call_function"] * 3, "output"]


def test_eager_calls_run_the_function():
    x, w = t(2, 2), t(2, 2)
    torch.testing.assert_close(block(x, w), torch.sin(x @ w) * 2)
    assert block.__name__ == "block"


def test_inputs_of_other_shapes_or_constants_get_subgraphs_of_their_own(cnt):
    @stenograph.nested_compile_region
    def scaled(x, factor):
        return x.relu() * factor

    def f(x, y):
        return scaled(x, 2) + scaled(x, 3) + scaled(y, 2).sum() + scaled(x * 5, 2)

    check(f, lambda i: (t(4, seed=i), t(2, 4, seed=i)), cnt, calls=2, peer=False)
    assert _subgraphs_read(cnt.graphs[0]) == ["subgraph", "subgraph_1", "subgraph_2", "subgraph"]


def test_floats_differing_only_in_sign_of_zero_do_not_share(cnt):
    @stenograph.nested_compile_region
    def scaled(x, factor):
        return x * factor

    def f(x):
        return 1 / scaled(x, 0.0), 1 / scaled(x, -0.0)

    check(f, lambda i: (t(3, seed=i),), cnt, calls=1, peer=False)
    assert _subgraphs_read(cnt.graphs[0]) == ["subgraph", "subgraph_1"]


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)

    @stenograph.nested_compile_region
    def forward(self, x):
        return x + self.norm(self.fc(x)).relu()


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_layers_of_a_model_share_one_subgraph_with_their_own_parameters(backend):
    cnt = CompileCounterWithBackend(backend)
    model = Stack()
    reference = Stack()
    reference.load_state_dict(model.state_dict())
    compiled = stenograph.compile(model, backend=cnt)
    x = t(4, 8, grad=True)  # as the layers' outputs are: all three calls have inputs alike
    out, expected = compiled(x), reference(x)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    assert cnt.frame_count == 1
    gm = cnt.graphs[0]
    assert _subgraphs_read(gm) == ["subgraph"] * 3
    assert all(len(n.args) == 2 + 1 + 4 for n in _region_calls(gm))  # x, then each layer's parameters
    compiled(t(4, 8, seed=1, grad=True))
    assert cnt.frame_count == 1


def test_a_function_torch_marked_is_a_region_too(cnt):
    @torch.compiler.nested_compile_region
    def body(x):
        return x.cos() + 1

    def f(x):
        return body(x) * body(x + 1)

    check(f, lambda i: (t(5, seed=i, grad=True),), cnt, calls=2, grads=True)
    assert _subgraphs_read(cnt.graphs[0]) == ["subgraph", "subgraph"]


def test_changed_inputs_recompile_the_frame_and_keep_sharing_with_symbolic_sizes(cnt):
    compiled = stenograph.compile(two_blocks, backend=cnt)
    compiled(*_square(0))
    args = (t(2, 3, grad=True), t(3, 3, grad=True), t(3, 3, grad=True))
    torch.testing.assert_close(compiled(*args), two_blocks(*args))
    assert cnt.frame_count == 2  # the first dimension of x is symbolic from now on
    assert _subgraphs_read(cnt.graphs[1]) == ["subgraph", "subgraph"]  # both inputs (s0, 3)
    for rows in (3, 7):
        args = (t(rows, 3, grad=True), t(3, 3, grad=True), t(3, 3, grad=True))
        torch.testing.assert_close(compiled(*args), two_blocks(*args))
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbolic_sizes_of_their_own_get_subgraphs_of_their_own(backend):
    @stenograph.nested_compile_region
    def scaled_block(x, w):
        return torch.sin(x @ w) * x.shape[0]

    def f(x, w1, w2):
        return scaled_block(scaled_block(x, w1), w2).sum()

    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(f, backend=cnt, dynamic=True)
    for rows in (3, 5):
        args = (t(rows, 3, seed=rows, grad=True), t(3, 3, seed=1, grad=True), t(3, 3, seed=2, grad=True))
        same = [a.detach().clone().requires_grad_() for a in args]
        out, expected = compiled(*args), f(*same)
        torch.testing.assert_close(out, expected)
        out.backward()
        expected.backward()
        for a, b in zip(args, same):
            torch.testing.assert_close(a.grad, b.grad)
    assert cnt.frame_count == 1
    assert _subgraphs_read(cnt.graphs[0]) == ["subgraph", "subgraph_1"]  # w1 and w2 have sizes of their own


def test_regions_within_regions_are_inlined(cnt):
    @stenograph.nested_compile_region
    def outer(x, w):
        return block(x, w) + block(x, w)

    def f(x, w):
        return outer(x, w)

    check(f, lambda i: (t(3, 3, seed=i), t(3, 3, seed=5)), cnt, calls=1, peer=False)
    assert _subgraphs_read(cnt.graphs[0]) == ["subgraph"]
    assert not _region_calls(cnt.graphs[0].subgraph)  # the inner calls are plain operations there


def test_a_region_returning_a_list_gives_a_list(cnt):
    @stenograph.nested_compile_region
    def pair(x):
        return [x.sin(), x.cos()]

    def f(x):
        a, b = pair(x)
        return pair(x)[0] + a * b, type(pair(x)).__name__

    check(f, lambda i: (t(3, seed=i),), cnt, calls=2, peer=False)


def test_a_body_that_cannot_be_a_subgraph_runs_eagerly_at_a_graph_break(cnt, capsys):
    @stenograph.nested_compile_region
    def chatty(x):
        print("in the region")
        return x * 2

    @stenograph.nested_compile_region
    def counts(x):
        return x.sum(), 3

    def f(x):
        return chatty(x + 1) - 1

    def g(x):
        total, n = counts(x + 1)
        return total * n

    # the graph before the call; the region's wrapper, called at the break, is compiled as a frame
    # of its own (one graph each side of the print), like any function a break calls
    check(f, lambda i: (t(3, seed=i),), cnt, capsys, calls=2, graphs=3, peer=False)
    other = CompileCounterWithBackend("eager")
    check(g, lambda i: (t(3, seed=i),), other, calls=2, graphs=3, peer=False)


def test_nested_compile_region_refuses_what_is_not_a_function():
    with pytest.raises(TypeError, match="needs a function, got int"):
        stenograph.nested_compile_region(3)
    with pytest.raises(TypeError, match="needs a function, got type"):
        stenograph.nested_compile_region(Layer)
    assert stenograph.compiler.nested_compile_region() is stenograph.nested_compile_region


def test_aot_autograd_records_torchs_invoke_subgraph_once_per_subgraph():
    forward_graphs = []

    def capture(gm, example_inputs):
        forward_graphs.append(gm)
        return gm.forward

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=capture, bw_compiler=lambda gm, _: gm.forward)

    args = _square(3)
    out = stenograph.compile(two_blocks, backend=backend)(*args)
    torch.testing.assert_close(out, two_blocks(*args))
    hop = torch.ops.higher_order.invoke_subgraph
    # (AOTAutograd partitions each call's forward apart, as for torch.compile's graphs)
    assert len([n for n in forward_graphs[0].graph.nodes if n.target is hop]) == 2


@pytest.mark.slow
def test_inductor_compiles_the_shared_subgraph():
    model = Stack()
    reference = Stack()
    reference.load_state_dict(model.state_dict())
    x = t(4, 8)
    out = stenograph.compile(model, backend="inductor")(x)
    expected = reference(x)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
