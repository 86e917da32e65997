"""Attributes written on modules inside forward (cached tensors, flags, counters, a buffer replaced,
a parameter aliased): captured and replayed on the module after the graph through
`nn.Module.__setattr__`, which files them as it does eagerly. Submodule writes and writes that
`nn.Module.__setattr__` refuses run eagerly at a graph break."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stenograph

from ._support import check, t


class _Caching(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.ready = False

    def forward(self, x):
        y = self.lin(x)
        self.cached = y * 2
        self.ready = True
        self.note = f"seen {x.shape[0]}"
        return y + self.cached, self.ready, self.note


def _call(model, x):
    return model(x)


def _seeded(cls):
    torch.manual_seed(0)
    return cls()


def test_plain_attribute_writes_in_forward(cnt):
    check(_call, lambda i: (_seeded(_Caching), t(2, 3, seed=i)), cnt, grads=True)


def test_written_attributes_land_in_the_module_dict(cnt):
    torch.manual_seed(0)
    model = _Caching()
    compiled = stenograph.compile(model, backend=cnt)
    x = t(2, 3)
    out = compiled(x)
    assert model.ready is True and model.note == "seen 2"
    torch.testing.assert_close(model.cached * 1.5, out[0])
    assert "cached" in vars(model) and "cached" not in model._buffers
    compiled(x)
    assert cnt.frame_count == 1


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x):
        self.calls = self.calls + 1
        return self.lin(x)


def test_counter_write_runs_eagerly_and_the_graph_is_reused(cnt):
    # a number replacing a number: captured, its guard would recompile on every call (as
    # torch.compile does: 3 graphs); at a break the graph after it serves every call
    torch.manual_seed(0)
    model = _Counting()
    check(lambda x: model(x), lambda i: (t(2, 3, seed=i),), cnt, graphs=1, calls=3, torch_graphs=3)
    assert model.calls == 9  # 3 calls each: eager, stenograph, torch.compile as the peer


class _Registering(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("stat", torch.zeros(3))

    def forward(self, x):
        self.alias = self.lin.weight  # a Parameter: registered by nn.Module.__setattr__
        self.stat = x.detach().mean(0)  # a buffer's name: stays a buffer
        return self.lin(x) + self.stat


def test_writes_that_register_a_parameter_or_replace_a_buffer(cnt):
    check(_call, lambda i: (_seeded(_Registering), t(2, 3, seed=i)), cnt)


class _Swapping(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        self.head = self.a  # registers a submodule
        return self.head(x)


def test_submodule_write_runs_eagerly_at_a_break(cnt):
    torch.manual_seed(0)
    model = _Swapping()
    compiled = stenograph.compile(model, backend=cnt)
    x = t(2, 3)
    torch.testing.assert_close(compiled(x), model.a(x))
    assert model._modules["head"] is model.a


class _BadWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        self.lin.weight = y  # a plain tensor under a parameter's name: nn.Module refuses
        return y


def test_write_nn_module_refuses_raises_its_type_error(cnt):
    compiled = stenograph.compile(_BadWrite(), backend=cnt)
    with pytest.raises(TypeError, match="cannot assign"):
        compiled(t(2, 3))
