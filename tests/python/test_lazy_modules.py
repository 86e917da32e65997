"""`nn.Lazy*` modules (issue 27): uninitialised parameters are materialised on the first call,
compiled directly or called inside a compiled model. The trace runs the module's shape
inference on the real module (as its first eager call would, drawing the same random initial
values) and traces the frame again, now seeing a `Linear` / `Conv2d` with real parameters: one
graph, as torch.compile."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stenograph
from stenograph.testing import CompileCounterWithBackend

from ._support import assert_same


class _WithLazy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.LazyLinear(3)

    def forward(self, x):
        return self.proj(x).relu() * 2


_MODELS = {
    "linear": (lambda: nn.LazyLinear(3), (2, 4)),
    "conv2d": (lambda: nn.LazyConv2d(4, 3), (1, 2, 6, 6)),
    "batchnorm": (lambda: nn.LazyBatchNorm1d(), (3, 4)),
    "sequential": (lambda: nn.Sequential(nn.LazyLinear(5), nn.ReLU(), nn.LazyLinear(2)), (2, 4)),
    "submodule": (_WithLazy, (2, 4)),
    "conv_in_sequential": (lambda: nn.Sequential(nn.LazyConv2d(3, 3), nn.Flatten(), nn.LazyLinear(2)), (2, 1, 5, 5)),
}


def _pair(make):
    torch.manual_seed(0)
    eager = make()
    torch.manual_seed(0)
    return eager, make()


@pytest.mark.parametrize("backend", ["counter", "aot_eager"])
@pytest.mark.parametrize("name", list(_MODELS))
def test_lazy_module_materialised_as_eager(cnt, name, backend):
    make, shape = _MODELS[name]
    eager, model = _pair(make)
    counter = cnt if backend == "counter" else CompileCounterWithBackend(backend)
    compiled = stenograph.compile(model, backend=counter)
    for i in range(2):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(i))
        torch.manual_seed(i)  # the first call draws the initial parameters
        expected = eager(x)
        torch.manual_seed(i)
        actual = compiled(x)
        assert_same(actual, expected)
    # materialised as eager leaves it: the same classes, parameters and buffers
    assert [type(m) for m in model.modules()] == [type(m) for m in eager.modules()]
    assert not any(isinstance(p, nn.parameter.UninitializedParameter) for p in model.parameters())
    assert_same(dict(model.named_parameters()), dict(eager.named_parameters()))
    assert_same(dict(model.named_buffers()), dict(eager.named_buffers()))
    assert counter.frame_count == 1


def test_lazy_module_gradients_and_recompile_on_new_shape(cnt):
    eager, model = _pair(_MODELS["sequential"][0])
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(2, 4)
    torch.manual_seed(1)
    eager(x).sum().backward()
    torch.manual_seed(1)
    compiled(x).sum().backward()
    for (name, a), (_, e) in zip(model.named_parameters(), eager.named_parameters()):
        assert_same(a.grad, e.grad, name)
    assert cnt.frame_count == 1
    compiled(x)
    assert cnt.frame_count == 1  # an identical call compiles nothing
    wider = torch.randn(2, 6)  # the materialised Linear takes 4 features: eager raises, so does the call
    with pytest.raises(RuntimeError):
        eager(wider)
    with pytest.raises(RuntimeError):
        compiled(wider)
    batch = torch.randn(5, 4)
    assert_same(compiled(batch), eager(batch))
    assert cnt.frame_count == 2  # another batch size: the shape guard fails


def test_lazy_module_inside_compiled_function(cnt):
    eager, model = _pair(lambda: nn.LazyLinear(2))

    def fn(m, x):
        return m(x + 1) - x.sum()

    x = torch.randn(3, 5)
    torch.manual_seed(1)
    expected = fn(eager, x)
    torch.manual_seed(1)
    assert_same(stenograph.compile(fn, backend=cnt)(model, x), expected)
    assert type(model) is nn.Linear and model.in_features == 5
    assert_same(model.weight, eager.weight)
    assert cnt.frame_count == 1


def test_lazy_module_exported():
    eager, model = _pair(_MODELS["sequential"][0])
    x = torch.randn(2, 4)
    torch.manual_seed(1)
    expected = eager(x)
    torch.manual_seed(1)
    gm = stenograph.export(model)(x).graph_module
    assert_same(gm(x), expected)
    assert_same(dict(model.named_parameters()), dict(eager.named_parameters()))
