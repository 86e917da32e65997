"""Guard soundness: after each kind of change the compiled code recompiles or stays correct,
never returns a stale result."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from helpers import assert_same
from torch import nn

import stenograph

GLOBAL_MULTIPLIER = 2
GLOBAL_TENSOR = torch.ones(4)


def _times_global(x):
    return x * GLOBAL_MULTIPLIER


def _plus_global_tensor(x):
    return x + GLOBAL_TENSOR


def test_global_int_change(cnt, monkeypatch):
    """A module-level int the function reads: changing it changes the result."""
    fn = stenograph.compile(_times_global, backend=cnt)
    x = torch.randn(4)
    assert_same(fn(x), x * 2)
    monkeypatch.setitem(globals(), "GLOBAL_MULTIPLIER", 3)
    assert_same(fn(x), x * 3)
    monkeypatch.setitem(globals(), "GLOBAL_MULTIPLIER", 2)
    assert_same(fn(x), x * 2)
    assert cnt.frame_count == 2


def test_global_tensor_mutated_in_place(cnt):
    """A global tensor changed in place: the result reflects its current value."""
    fn = stenograph.compile(_plus_global_tensor, backend=cnt)
    x = torch.randn(4)
    try:
        assert_same(fn(x), x + 1)
        GLOBAL_TENSOR.add_(5)
        assert_same(fn(x), x + 6)
        GLOBAL_TENSOR.mul_(-1)
        assert_same(fn(x), x - 6)
    finally:
        GLOBAL_TENSOR.fill_(1.0)
    assert cnt.frame_count == 1


class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        return x * self.scale


def test_module_attribute_change(cnt):
    """A plain module attribute read in forward (self.scale 2.0 -> 3.0) is followed: the float
    goes dynamic after its first change, so a third value reuses that graph (torch.compile: 2)."""
    model = _Scaled()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(4)
    assert_same(compiled(x), x * 2.0)
    model.scale = 3.0
    assert_same(compiled(x), x * 3.0)
    compiled.scale = 4.0  # set through the wrapper: reaches the original module
    assert model.scale == 4.0
    assert_same(compiled(x), x * 4.0)
    assert cnt.frame_count == 2


class _Dropper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(p=0.5)

    def forward(self, x):
        return self.drop(x * 1.0)


def _assert_dropout_applied(out, x):
    zero = out == 0
    assert zero.any() and (~zero).any(), "train mode must drop some elements and keep others"
    torch.testing.assert_close(out[~zero], 2 * x[~zero])


def test_training_flag_dropout(cnt):
    """model.train()/eval() toggles Dropout in the compiled module: never a stale mode."""
    model = _Dropper()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.rand(1000) + 0.5  # no zeros of its own
    _assert_dropout_applied(compiled(x), x)
    model.eval()
    assert_same(compiled(x), x)
    model.train()
    _assert_dropout_applied(compiled(x), x)
    compiled.eval()
    assert_same(compiled(x), x)
    assert cnt.frame_count == 2


def test_training_flag_batchnorm(cnt):
    """model.train()/eval() toggles BatchNorm between batch and running statistics."""
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    eager = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    eager.load_state_dict(model.state_dict())
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(8, 4)
    for training in (True, False, True, False):
        model.train(training)
        eager.train(training)
        assert_same(compiled(x), eager(x))
        for (name, b), (_, b_e) in zip(model.named_buffers(), eager.named_buffers()):
            torch.testing.assert_close(b, b_e, msg=lambda m, name=name: f"{name}: {m}")
    assert cnt.frame_count == 2


def _branch_on_dtype(x):
    if x.dtype == torch.float64:
        return x + 1
    return x * 2


def test_dtype_guard(cnt):
    """A function branching on x.dtype follows each dtype, output dtype included."""
    fn = stenograph.compile(_branch_on_dtype, backend=cnt)
    for x in (
        torch.randn(4),
        torch.randn(4, dtype=torch.float64),
        torch.randn(4),
        torch.arange(4),
        torch.randn(4, dtype=torch.float64),
    ):
        out = fn(x)
        assert out.dtype == _branch_on_dtype(x).dtype
        assert_same(out, _branch_on_dtype(x))
    assert cnt.frame_count == 3


def _branch_on_shape(x):
    if x.shape[0] > 4:
        return x.view(2, -1).sum(0)
    return x * 2


def test_shape_guard(cnt):
    """A function branching on x.shape[0] follows each size, output shape included."""
    fn = stenograph.compile(_branch_on_shape, backend=cnt)
    for size in (4, 8, 3, 6, 4, 10):
        x = torch.randn(size)
        assert_same(fn(x), _branch_on_shape(x))
    assert cnt.frame_count == 3


def _branch_on_requires_grad(x):
    if x.requires_grad:
        return x * 3
    return x * 5


def test_requires_grad_guard(cnt):
    """A function branching on x.requires_grad follows it; gradients flow when required."""
    fn = stenograph.compile(_branch_on_requires_grad, backend=cnt)
    plain = torch.randn(4)
    leaf = torch.randn(4, requires_grad=True)
    assert_same(fn(plain), plain * 5)
    out = fn(leaf)
    assert_same(out, _branch_on_requires_grad(leaf))
    out.sum().backward()
    torch.testing.assert_close(leaf.grad, torch.full((4,), 3.0))
    assert_same(fn(plain), plain * 5)
    assert cnt.frame_count == 2


def test_grad_mode_guard_function(cnt):
    """torch.no_grad() around a call: output.requires_grad matches eager in both modes."""

    def fn(x):
        return x.sin() * 2

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(4, requires_grad=True)
    out = compiled(x)
    assert out.requires_grad and out.grad_fn is not None
    with torch.no_grad():
        out = compiled(x)
        expected = fn(x)
    assert out.requires_grad is False
    assert_same(out, expected)
    out = compiled(x)
    assert out.requires_grad
    assert_same(out, fn(x))
    assert cnt.frame_count == 2


def test_grad_mode_guard_module(cnt):
    """torch.no_grad() around a compiled module call: no autograd graph, then one again."""
    model = nn.Linear(4, 2)
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(3, 4)
    with torch.no_grad():
        out = compiled(x)
    assert out.requires_grad is False
    out = compiled(x)
    assert out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(model.bias.grad, torch.full((2,), 3.0))
    assert cnt.frame_count == 2


class _Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def _reference(model: _Holder, x):
    return torch.relu(F.linear(x, model.fc.weight, model.fc.bias))


def test_replaced_submodule_is_followed(cnt):
    """Replacing a submodule (model.fc = nn.Linear(...)) makes the result follow the new one
    (its parameters are graph inputs)."""
    model = _Holder()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(3, 4)
    first = compiled(x)
    assert_same(first, _reference(model, x))
    model.fc = nn.Linear(4, 4)
    second = compiled(x)
    assert_same(second, _reference(model, x))
    assert not torch.allclose(first, second)
    assert cnt.frame_count == 1  # the new Linear has the old one's class and shapes: same code


def test_replaced_parameter_is_followed(cnt):
    """Replacing a parameter object (fc.weight = nn.Parameter(...)) is followed."""
    model = _Holder()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(3, 4)
    first = compiled(x)
    assert_same(first, _reference(model, x))
    model.fc.weight = nn.Parameter(torch.randn(4, 4))
    second = compiled(x)
    assert_same(second, _reference(model, x))
    assert not torch.allclose(first, second)
    second.sum().backward()
    assert model.fc.weight.grad is not None
    assert cnt.frame_count == 1


def test_parameter_updated_in_place_is_followed(cnt):
    """An in-place parameter update (as an optimizer does) is seen without recompiling."""
    model = _Holder()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(3, 4)
    first = compiled(x)
    with torch.no_grad():
        model.fc.bias.add_(10.0)
    second = compiled(x)
    assert_same(second, _reference(model, x))
    assert not torch.allclose(first, second)
    assert cnt.frame_count == 1


def test_default_dtype_guard(cnt):
    """Tensors created with the default dtype follow torch.set_default_dtype between calls."""

    def fn(x):
        return torch.zeros(x.shape[0]) + x.sum()

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(4)
    assert compiled(x).dtype == torch.float32
    original = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        out = compiled(x)
        expected = fn(x)
    finally:
        torch.set_default_dtype(original)
    assert expected.dtype == torch.float64
    assert_same(out, expected)
    assert compiled(x).dtype == torch.float32
    assert cnt.frame_count == 2


_W = torch.randn(2, 2)


def _matmul_and_autocast_flag(x):
    return x @ _W, torch.is_autocast_enabled("cpu")


def test_autocast_state_is_guarded():
    compiled = stenograph.compile(_matmul_and_autocast_flag, backend="aot_eager")
    x = torch.randn(2, 2)
    for dtype in (torch.bfloat16, torch.float16, None):
        context = torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()
        with context:
            out, flag = compiled(x)
            expected, expected_flag = _matmul_and_autocast_flag(x)
        assert out.dtype == expected.dtype and flag == expected_flag


class _Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x + len(self.layers)


def test_appending_a_layer_recompiles(cnt):
    model = _Stack()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(4, 3)
    assert_same(compiled(x), model(x))
    model.layers.append(nn.Linear(3, 3))
    assert_same(compiled(x), model(x))
    assert cnt.frame_count == 2
    sequential = nn.Sequential(nn.Linear(3, 3))
    compiled_sequential = stenograph.compile(sequential, backend="eager")
    compiled_sequential(x)
    sequential.append(nn.ReLU())
    assert_same(compiled_sequential(x), sequential(x))


def _offset_and_bits(x):
    return x.storage_offset() + x.real, x.is_conj(), x.is_neg()


def test_storage_offset_and_view_bits_are_guarded():
    compiled = stenograph.compile(_offset_and_bits, backend="eager")
    base = torch.arange(10.0) + 1j
    for x in (base[:4], base[6:], base[3:7], base[:4].conj(), base[:4].conj().imag):
        assert_same(compiled(x), _offset_and_bits(x))
