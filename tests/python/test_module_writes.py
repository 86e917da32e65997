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


def test_counter_write_under_fullgraph_is_captured_and_recompiles(cnt):
    # with fullgraph=True a break is an error: the write is captured, and each new count fails
    # the guard on the old one and compiles again, as torch.compile does
    torch.manual_seed(0)
    model = _Counting()
    compiled = stenograph.compile(model, backend=cnt, fullgraph=True)
    x = t(2, 3)
    for expected_calls in (1, 2, 3):
        torch.testing.assert_close(compiled(x), model.lin(x))
        assert model.calls == expected_calls
    assert cnt.frame_count == 3


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


class _Clamping(nn.Module):
    """HF Swin's `set_shift_and_window_size`: numbers set from the input's size, the old values
    not read (shift) or read only to compare (window)."""

    def __init__(self, window):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.window = window
        self.shift = window // 2

    def forward(self, x):
        y = self.lin(x)
        if min(x.shape[0], x.shape[1]) <= self.window:
            self.shift = 0
            self.window = min(x.shape[0], x.shape[1])
        return y.roll(self.shift, 0) * self.window


@pytest.mark.parametrize("window", [4, 3])
def test_numbers_set_without_reading_them_are_one_graph(cnt, window):
    # window 4 over a 4 x 4 input: shift 2 -> 0, window 4 -> 4; window 3: the written values
    # differ from the old ones too. torch.compile: one graph; the writes replayed after it
    torch.manual_seed(0)
    eager, compiled_model = _Clamping(window), _Clamping(window)
    compiled_model.load_state_dict(eager.state_dict())
    compiled = stenograph.compile(compiled_model, backend=cnt)
    graphs = []
    for i in range(3):
        x = t(4, 4, seed=i)
        torch.testing.assert_close(compiled(x), eager(x))
        assert (compiled_model.shift, compiled_model.window) == (eager.shift, eager.window)
        graphs.append(cnt.frame_count)
    # one graph for the first call (no break at the writes); the second sees the clamped window
    # (guarded by the comparison): one recompile at most, then none
    assert graphs[0] == 1 and graphs[1] == graphs[2] <= 2, graphs


def test_clamped_numbers_recompile_when_the_input_grows(cnt):
    torch.manual_seed(0)
    eager, compiled_model = _Clamping(4), _Clamping(4)
    compiled_model.load_state_dict(eager.state_dict())
    compiled = stenograph.compile(compiled_model, backend=cnt)
    for shape in ((4, 4), (8, 4), (2, 4)):
        x = t(*shape, seed=shape[0])
        torch.testing.assert_close(compiled(x), eager(x))
        assert (compiled_model.shift, compiled_model.window) == (eager.shift, eager.window)
