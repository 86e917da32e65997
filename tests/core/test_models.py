"""Whole models and everyday Python/PyTorch constructs capture as exactly one graph."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_same
from torch import nn

import stenograph

from ._support import MLP, CausalSelfAttention, SmallCNN, TwoBlockNet, check_forward_backward

# ---------------------------------------------------------------------------------------------
# models: one graph, eager outputs, eager gradients


def test_mlp_one_graph_forward_and_gradients(cnt):
    """A 3-layer Linear/ReLU MLP: one graph, outputs and all parameter grads equal eager."""
    check_forward_backward(MLP(), torch.randn(4, 16), cnt, calls=2)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_cnn_one_graph_forward_buffers_and_gradients(cnt, training):
    """A Conv/BatchNorm/ReLU/MaxPool/flatten/Linear CNN in train and eval mode: one graph,
    eager outputs and grads, and (train) running stats updated exactly as eager on every call."""
    model = SmallCNN().train(training)
    before = {k: v.clone() for k, v in model.named_buffers()}
    check_forward_backward(model, torch.randn(4, 3, 8, 8), cnt, calls=2)
    changed = not torch.equal(before["bn1.running_mean"], model.bn1.running_mean)
    assert changed == training
    if training:
        assert int(model.bn1.num_batches_tracked) == 2


def test_causal_attention_block_one_graph_forward_and_gradients(cnt):
    """Hand-written causal attention (q/k/v, matmul, scale, triu mask, softmax, dropout(0), out,
    LayerNorm, residual): one graph, eager outputs and grads."""
    check_forward_backward(CausalSelfAttention(), torch.randn(2, 5, 16), cnt, calls=2)


def test_nn_sequential_one_graph(cnt):
    """nn.Sequential of layers: one graph, eager outputs and grads."""
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Tanh())
    check_forward_backward(model, torch.randn(3, 8), cnt)


def test_user_module_with_submodules_and_helpers_one_graph(cnt):
    """A user module calling submodules, its methods and module-level helpers: one graph."""
    check_forward_backward(TwoBlockNet(), torch.randn(5, 8), cnt)


def test_training_loop_matches_eager(cnt):
    """Three SGD steps on the compiled MLP give eager losses and weights, with one graph."""
    model = MLP()
    eager_model = copy.deepcopy(model)
    compiled = stenograph.compile(model, backend=cnt)
    opt_c = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_e = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    x, target = torch.randn(8, 16), torch.randn(8, 8)
    for _ in range(3):
        loss_c = F.mse_loss(compiled(x), target)
        loss_e = F.mse_loss(eager_model(x), target)
        torch.testing.assert_close(loss_c, loss_e)
        for opt, loss in ((opt_c, loss_c), (opt_e, loss_e)):
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, p_c), (_, p_e) in zip(model.named_parameters(), eager_model.named_parameters()):
        torch.testing.assert_close(p_c, p_e, msg=lambda m, name=name: f"{name}: {m}")
    assert cnt.frame_count == 1


# ---------------------------------------------------------------------------------------------
# Python and tensor constructs inside one function


def _compile_one(fn, cnt, *args):
    out = stenograph.compile(fn, backend=cnt)(*args)
    assert_same(out, fn(*args))
    assert cnt.frame_count == 1
    return out


def test_tensor_attributes(cnt):
    """x.shape[0], x.dtype, x.device, x.ndim, x.T and x.size(-1) are usable in one graph."""

    def fn(x):
        n = x.shape[0]
        d = x.size(-1)
        z = torch.zeros(n, d, dtype=x.dtype, device=x.device)
        return z + x * x.ndim, x.T @ x, n, d, x.dtype, x.device, tuple(x.shape)

    out = _compile_one(fn, cnt, torch.randn(3, 4))
    assert out[2:] == (3, 4, torch.float32, torch.device("cpu"), (3, 4))


def test_nested_containers_of_tensors_and_constants(cnt):
    """Returning nested dicts/tuples/lists of tensors and constants keeps types and values."""

    def fn(x, y):
        pair = (x + 1, [y * 2, 3])
        return {
            "pair": pair,
            "meta": ("tag", 2.5, None, True),
            "sums": [x.sum(), {"y": y.sum()}],
        }

    out = _compile_one(fn, cnt, torch.randn(3), torch.randn(3))
    assert type(out["pair"]) is tuple and type(out["pair"][1]) is list


def test_containers_as_inputs(cnt):
    """Tensors passed inside lists, tuples and dicts are read and rebuilt correctly."""

    def fn(items, table):
        a, b = items
        return [a + table["w"], (b * table["s"],)]

    items = [torch.randn(4), torch.randn(4)]
    table = {"w": torch.randn(4), "s": 3}
    _compile_one(fn, cnt, items, table)


def test_tuple_unpacking(cnt):
    """Tuple unpacking: plain, nested, starred and swap."""

    def fn(x):
        a, b = x.chunk(2)
        (c, d), e = (a + 1, b - 1), 3
        first, *rest = [c, d, e]
        c, d = d, c
        return first * rest[1] + rest[0], c, d

    _compile_one(fn, cnt, torch.randn(6))


def test_python_arithmetic_on_constants_is_folded(cnt):
    """Arithmetic on Python constants is computed at trace time: one op, the folded constant."""

    def fn(x):
        k = (((3 + 4) * 2 // 3 - 2**3 % 5) / 4.0 + (6 & 3 | 8) - (1 << 2) + (7 ^ 2) - -1.5) * 0.5
        return x * k

    expected_k = (((3 + 4) * 2 // 3 - 2**3 % 5) / 4.0 + (6 & 3 | 8) - (1 << 2) + (7 ^ 2) - -1.5) * 0.5
    _compile_one(fn, cnt, torch.randn(4))
    assert cnt.op_count == 1
    (gm,) = cnt.graphs
    assert any(expected_k in node.args for node in gm.graph.nodes), gm.code


def test_comparisons(cnt):
    """Python comparisons on constants and sizes, `is None`, and tensor comparisons."""

    def fn(x, n, maybe):
        outs = []
        if n > 2 and n <= 5 and n != 4 and not n == 3.5 and "a" < "b" and (1, 2) < (1, 3):
            outs.append(x > 0)
        if maybe is None and x.shape[0] >= 2:
            outs.append(x == x.abs())
        outs.append(torch.where(x >= 0, x, -x))
        outs.append(x.shape[0] < n)
        return tuple(outs)

    out = _compile_one(fn, cnt, torch.randn(5), 3, None)
    assert len(out) == 4 and out[0].dtype == torch.bool


def test_unary_ops(cnt):
    """Unary -, +, abs, ~, not on tensors and Python values."""

    def fn(x, flag, n):
        return -x, +x, abs(x), ~(x > 0), (not flag), -n, x.neg()

    _compile_one(fn, cnt, torch.randn(4), False, 7)


def test_functional_calls_with_keyword_arguments(cnt):
    """torch.nn.functional calls with keyword arguments."""

    def fn(x, w, b):
        h = F.linear(x, weight=w, bias=b)
        h = F.gelu(h, approximate="tanh")
        h = F.layer_norm(h, normalized_shape=(6,), eps=1e-5)
        h = F.dropout(h, p=0.0, training=False)
        h = F.pad(h, pad=(1, 1), value=0.5)
        return F.softmax(h, dim=-1), F.normalize(h, p=2.0, dim=-1), F.relu(h, inplace=False)

    _compile_one(fn, cnt, torch.randn(3, 8), torch.randn(6, 8), torch.randn(6))


def test_tensor_methods(cnt):
    """view, reshape, transpose, softmax(dim=-1), sum and mean as Tensor methods."""

    def fn(x):
        y = x.view(2, 3, 4).reshape(6, 4).transpose(0, 1).softmax(dim=-1)
        return y.sum(dim=0), y.mean(), y.sum(-1, keepdim=True), y.mean(dim=1)

    _compile_one(fn, cnt, torch.randn(24))


def test_returning_input_unchanged_is_same_object(cnt):
    """A function returning its input returns the very same tensor object."""

    def identity(x):
        return x

    x = torch.randn(3)
    assert stenograph.compile(identity, backend=cnt)(x) is x


def test_returning_input_beside_computed_value(cnt):
    """An input returned next to computed tensors is still the same object."""

    def fn(x):
        y = x * 2
        return x, y

    x = torch.randn(3)
    out = stenograph.compile(fn, backend=cnt)(x)
    assert out[0] is x
    assert_same(out[1], x * 2)
    assert cnt.frame_count == 1


def test_returning_none_and_constants(cnt):
    """Functions returning None or only Python constants give those values."""

    def returns_none(x):
        _ = x + 1
        return None

    def returns_constants(x):
        return 1, "a", None, 2.5, True, (x.ndim, x.shape[0])

    x = torch.randn(3)
    assert stenograph.compile(returns_none, backend=cnt)(x) is None
    out = stenograph.compile(returns_constants, backend=cnt)(x)
    assert_same(out, (1, "a", None, 2.5, True, (1, 3)))
