"""Parameters and buffers are announced to Inductor as static inputs (for its CUDA graphs).

Checked on CPU through the same reader AOTAutograd uses; what it is worth on a GPU is measured by
benchmarks/transformer_block.py --no-static-hint (docs/benchmarks-history.md, run A).
"""

from __future__ import annotations

import copy

import pytest
import torch
from core._support import SmallCNN

import stenograph
from stenograph.backends import _static_inputs
from stenograph.backends._static_inputs import mark_static_inputs, static_input_indices
from stenograph.testing import EagerAndRecordGraphs


def _captured_cnn():
    model = SmallCNN().train()
    rec = EagerAndRecordGraphs()
    x = torch.randn(2, 3, 8, 8)
    stenograph.compile(model, backend=rec)(x)
    (gm,) = rec.graphs
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return model, gm, placeholders


def _example_inputs(model, placeholders, x):
    """The real tensors behind each placeholder, found through its recorded source name."""
    tensors = {f"L['self'].{k}": v for k, v in [*model.named_parameters(), *model.named_buffers()]}
    return [tensors.get(n.meta["source"], x) for n in placeholders]


def test_parameters_and_buffers_are_static_inputs_are_not():
    model, gm, placeholders = _captured_cnn()
    indices = static_input_indices(gm, [None] * len(placeholders))
    names = {placeholders[i].meta["source"] for i in indices}
    n_params = len(list(model.parameters()))
    n_buffers = len(list(model.buffers()))
    assert len(indices) == n_params + n_buffers
    assert "L['self'].bn1.running_mean" in names and "L['self'].conv1.weight" in names
    assert "L['x']" not in names


def test_aot_autograd_reads_the_marks():
    from torch._functorch._aot_autograd.frontend_utils import _try_get_metadata_from_dynamo

    _, gm, placeholders = _captured_cnn()
    marked = mark_static_inputs(gm, [None] * len(placeholders))
    assert marked
    _, static = _try_get_metadata_from_dynamo(gm, {}.keys(), len(placeholders), [])
    assert static == marked


def test_marked_graph_still_compiles_and_trains_with_aot_eager():
    """BatchNorm's in-place buffer updates on static inputs: results, buffers, grads as eager."""
    model, gm, placeholders = _captured_cnn()
    x = torch.randn(2, 3, 8, 8)
    eager_model = copy.deepcopy(model)
    inputs = _example_inputs(model, placeholders, x)
    assert mark_static_inputs(gm, inputs)
    from stenograph.backends.aot_eager import aot_eager

    compiled = aot_eager(gm, inputs)
    (out,) = compiled(*inputs)
    expected = eager_model(x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(model.bn1.running_mean, eager_model.bn1.running_mean)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(model.conv1.weight.grad, eager_model.conv1.weight.grad)


def test_marks_are_removed_when_the_reader_disagrees(monkeypatch):
    _, gm, placeholders = _captured_cnn()
    monkeypatch.setattr(_static_inputs, "_reader_agrees", lambda gm, n, indices: False)
    assert mark_static_inputs(gm, [None] * len(placeholders)) == []
    assert "dynamo_compile_id" not in gm.meta
    assert not hasattr(gm, "_param_name_to_source")
    for node in placeholders:
        assert not hasattr(node, "_dynamo_source")
        assert "tensor_dict" not in node.meta


def test_graph_without_parameters_is_left_alone():
    rec = EagerAndRecordGraphs()
    stenograph.compile(lambda x: x + 1, backend=rec)(torch.randn(3))
    (gm,) = rec.graphs
    assert mark_static_inputs(gm, [torch.randn(3)]) == []
    assert "dynamo_compile_id" not in gm.meta


@pytest.mark.parametrize("enabled", [True, False])
def test_inductor_backend_marks_before_compile_fx(monkeypatch, enabled):
    import torch._inductor.compile_fx as compile_fx_mod

    seen = []

    def fake_compile_fx(gm, example_inputs, config_patches=None):
        seen.append(gm.meta.get("dynamo_compile_id", "absent"))
        return gm.forward

    monkeypatch.setattr(compile_fx_mod, "compile_fx", fake_compile_fx)
    model = SmallCNN().eval()
    x = torch.randn(2, 3, 8, 8)
    with stenograph.config.patch(mark_static_inputs=enabled):
        torch.testing.assert_close(stenograph.compile(model)(x), model(x))
    assert seen == ([None] if enabled else ["absent"])


def test_parameters_and_optimizer_state_of_a_step_are_static_inputs_gradients_are_not():
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 3)).sum().backward()
    rec = EagerAndRecordGraphs()
    stenograph.compile(opt.step, backend=rec)()
    (gm,) = rec.graphs
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    static = {placeholders[i].meta["source"] for i in static_input_indices(gm, [None] * len(placeholders))}
    others = {n.meta["source"] for n in placeholders} - static
    assert len(static) == 2 + 2 * 3  # weight and bias; their step counts and two moments
    assert all(name.endswith(".grad") for name in others) and len(others) == 2


def _recorded_graph_of_add(k):
    rec = EagerAndRecordGraphs()
    stenograph.compile(lambda t, k: t + k, backend=rec)(torch.randn(3), k)
    (gm,) = rec.graphs
    return gm, [n for n in gm.graph.nodes if n.op == "placeholder"]


@pytest.mark.parametrize("guard", [False, True])
def test_a_tensor_given_mark_static_address_is_a_static_input(guard):
    """HF's static KV cache marks its tensors so: under CUDA graphs they are not copied in."""
    k = torch.randn(3)
    torch._dynamo.mark_static_address(k, guard=guard)
    gm, placeholders = _recorded_graph_of_add(k)
    static = {placeholders[i].meta["source"] for i in static_input_indices(gm, [None] * len(placeholders))}
    assert static == {"L['k']"}
    gm, placeholders = _recorded_graph_of_add(torch.randn(3))
    assert static_input_indices(gm, [None] * len(placeholders)) == []


def test_mark_static_address_with_guard_recompiles_for_another_tensor():
    """guard=True: the graph serves that tensor alone (torch.compile recompiles likewise);
    unguarded marks and unmarked tensors share a graph."""
    counts = {}
    for name, compile_fn in (("stenograph", stenograph.compile), ("torch", torch.compile)):
        torch._dynamo.reset()
        cnt = torch._dynamo.testing.CompileCounter()
        f = compile_fn(lambda t, k: t + k, backend=cnt)
        x = torch.randn(3)
        a, b, c, u = (torch.randn(3) for _ in range(4))
        torch._dynamo.mark_static_address(a, guard=True)
        torch._dynamo.mark_static_address(b, guard=True)
        torch._dynamo.mark_static_address(u)
        seen = []
        for k in (a, a, b, c, u, a):
            torch.testing.assert_close(f(x, k), x + k)
            seen.append(cnt.frame_count)
        counts[name] = seen
    assert counts["stenograph"] == [1, 1, 2, 3, 3, 3]
    assert counts["stenograph"] == counts["torch"]
