"""`stenograph.export(fn, aten_graph=True)`: the captured graph recorded again in ATen operators,
with the function's own signature, a module's parameters and buffers, symbolic sizes, a
decomposition table, and higher-order ops (torch.cond, nested compile regions)."""

from __future__ import annotations

import copy
import operator

import pytest
import torch
from helpers import assert_same
from torch import nn

import stenograph


def _only_aten(gm: torch.fx.GraphModule) -> None:
    """Every operation is an ATen operator (or reads an item of a result, or is size arithmetic)."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            target = node.target
            ok = isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator))
            assert ok or target in (operator.getitem, operator.floordiv, operator.mul), node.format_node()
        assert node.op != "call_method", node.format_node()


def _shaped(x, y, n=2):
    return torch.relu(x) * n + y.sum(), [x.shape[0]], {"mean": x.mean()}


def test_a_function_in_aten_operators_with_its_own_signature():
    x, y = torch.randn(3), torch.randn(2)
    gm, guards = stenograph.export(_shaped, aten_graph=True)(x, y)
    _only_aten(gm)
    assert [n.name for n in gm.graph.find_nodes(op="placeholder")] == ["arg0", "arg1"]  # pytree leaves, as torch's
    assert torch.ops.aten.relu.default in [n.target for n in gm.graph.nodes]
    other = (torch.randn(3), torch.randn(2))
    assert_same(gm(*other), _shaped(*other))
    # torch._dynamo.export's default: sizes symbolic (but 0 and 1), ints specialised
    assert guards.check(*other) and guards.check(torch.randn(4), torch.randn(5))
    assert not guards.check(torch.randn(1), torch.randn(2)) and not guards.check(*other, n=3)
    longer = (torch.randn(5), torch.randn(4))
    assert_same(gm(*longer), _shaped(*longer))
    assert list(guards) == list(stenograph.export(_shaped)(x, y).guards)  # the same checks as the torch-level graph


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x):
        return torch.relu(self.norm(self.fc(x)))


def test_a_module_keeps_its_parameters_buffers_and_gradients():
    model = Block()
    reference = copy.deepcopy(model)
    x = torch.randn(5, 3)
    gm, _ = stenograph.export(model, aten_graph=True)(x)
    _only_aten(gm)
    assert gm.get_parameter("fc.weight") is model.fc.weight
    assert gm.get_buffer("norm.running_var") is model.norm.running_var
    out, expected = gm(x), reference(x)
    assert_same(out, expected)
    assert_same(model.norm.running_mean, reference.norm.running_mean)  # updated in place, as eager
    out.sum().backward()
    expected.sum().backward()
    assert_same(model.fc.weight.grad, reference.fc.weight.grad)


def test_symbolic_sizes_stay_symbolic():
    def f(x):
        return x.reshape(-1, 2).sum(0) * x.shape[0]

    x = torch.randn(6)
    gm, guards = stenograph.export(f, aten_graph=True, dynamic=True)(x)
    _only_aten(gm)
    assert torch.ops.aten.sym_size.int in [n.target for n in gm.graph.nodes]
    for size in (4, 10):
        other = torch.randn(size)
        assert guards.check(other)
        assert_same(gm(other), f(other))
    assert not guards.check(torch.randn(5))  # reshape(-1, 2) needs an even size


def test_a_decomposition_table_is_applied():
    def clamp_relu(x):
        return torch.ops.aten.clamp_min.default(x, 0.0)

    x = torch.randn(3)
    table = {torch.ops.aten.relu.default: clamp_relu}
    gm, _ = stenograph.export(lambda x: torch.relu(x) + 1, aten_graph=True, decomposition_table=table)(x)
    targets = [n.target for n in gm.graph.nodes]
    assert torch.ops.aten.clamp_min.default in targets and torch.ops.aten.relu.default not in targets
    assert_same(gm(x), torch.relu(x) + 1)


def test_higher_order_ops_are_kept():
    @stenograph.nested_compile_region
    def block(x, w):
        return torch.sin(x @ w) * 2

    def f(x, w1, w2):
        y = block(block(x, w1), w2)
        return torch.cond(y.sum() > 0, lambda a: a * 2, lambda a: a - 1, (y,))

    args = [torch.randn(3, 3) for _ in range(3)]
    for aten in (False, True):
        gm, _ = stenograph.export(f, aten_graph=aten, assume_static_by_default=True)(*args)
        assert_same(gm(*args), f(*args))
        other = [torch.randn(3, 3) for _ in range(3)]
        assert_same(gm(*other), f(*other))
    hop = torch.ops.higher_order.invoke_subgraph
    calls = [n for n in gm.graph.nodes if n.target is hop]
    assert len(calls) == 2 and calls[0].args[0].target == calls[1].args[0].target  # one shared subgraph
    assert torch.ops.higher_order.cond in [n.target for n in gm.graph.nodes]


def test_grad_mode_switches_are_kept_so_gradients_match_eager():
    def f(x):
        with torch.no_grad():
            y = x * 2
        return (y + x).sum()

    x = torch.randn(3, requires_grad=True)
    gm, _ = stenograph.export(f, aten_graph=True)(x)
    assert [n.target for n in gm.graph.nodes].count(torch._C._set_grad_enabled) == 2
    a, b = (x.detach().clone().requires_grad_() for _ in range(2))
    gm(a).backward()
    f(b).backward()
    assert_same(a.grad, b.grad)  # ones: y does not depend on x for autograd


def test_inference_mode_which_an_aten_graph_cannot_record_is_refused():
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y

    x = torch.randn(3)
    with pytest.raises(stenograph.Unsupported, match="enters torch.inference_mode, which an ATen graph"):
        stenograph.export(f, aten_graph=True)(x)
    gm, _ = stenograph.export(f)(x)
    assert gm(x).is_inference()


def test_pre_dispatch_records_the_operators_autograd_sees():
    model = Block().eval()
    x = torch.randn(2, 3)
    gm, _ = stenograph.export(model, aten_graph=True, pre_dispatch=True)(x)
    targets = [n.target for n in gm.graph.nodes]
    assert torch.ops.aten.linear.default in targets and torch.ops.aten.addmm.default not in targets
    assert_same(gm(x), model(x))


def test_a_decomposition_table_and_pre_dispatch_need_aten_graph():
    for options in ({"decomposition_table": {}}, {"pre_dispatch": True}):
        with pytest.raises(TypeError, match="need aten_graph=True") as raised:
            stenograph.export(_shaped, **options)
        assert isinstance(raised.value, AssertionError)  # what torch._dynamo.export raises
