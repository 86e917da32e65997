"""requires_grad and grad-mode changes are guarded: they recompile and stay correct.

AOTAutograd compiles a different program for each (forward only vs forward + backward), so a
graph compiled for one setting must never serve the other.
"""

from __future__ import annotations

import copy

import pytest
import torch
from core._support import MLP

import stenograph
from stenograph.testing import CompileCounterWithBackend


def scaled_sum(x, y):
    return (torch.sin(x) * y).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_input_requires_grad_flip_recompiles(backend):
    cnt = CompileCounterWithBackend(backend)
    fn = stenograph.compile(scaled_sum, backend=cnt)
    x, y = torch.randn(6), torch.randn(6)

    out = fn(x, y)
    assert cnt.frame_count == 1 and not out.requires_grad
    torch.testing.assert_close(out, scaled_sum(x, y))

    x_c = x.clone().requires_grad_(True)
    x_e = x.clone().requires_grad_(True)
    out_c = fn(x_c, y)
    out_e = scaled_sum(x_e, y)
    assert cnt.frame_count == 2  # the requires_grad guard failed: compiled again
    assert out_c.requires_grad
    out_c.backward()
    out_e.backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)

    fn(x, y)  # back to the first setting: its entry is still cached
    fn(x_c, y)
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_no_grad_around_the_call_recompiles(backend):
    model = MLP()
    eager_model = copy.deepcopy(model)
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(3, 16)

    out = compiled(x)
    assert out.requires_grad and cnt.frame_count == 1

    with torch.no_grad():
        out_ng = compiled(x)
        expected = eager_model(x)
    assert cnt.frame_count == 2  # grad mode is a guarded global
    assert not out_ng.requires_grad and out_ng.grad_fn is None
    torch.testing.assert_close(out_ng, expected)

    out_again = compiled(x)  # grad mode back on: the first entry serves it, differentiable
    assert cnt.frame_count == 2
    out_again.sum().backward()
    eager_model(x).sum().backward()
    for (name, p), (_, p_e) in zip(model.named_parameters(), eager_model.named_parameters()):
        torch.testing.assert_close(p.grad, p_e.grad, msg=lambda m, name=name: f"{name}: {m}")


def test_freezing_a_parameter_recompiles_and_stops_its_gradient():
    model = MLP()
    eager_model = copy.deepcopy(model)
    cnt = CompileCounterWithBackend("aot_eager")
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(3, 16)
    compiled(x).sum().backward()
    assert cnt.frame_count == 1

    for m in (model, eager_model):
        m.zero_grad(set_to_none=True)
        m.fc1.weight.requires_grad_(False)
        m.fc1.bias.requires_grad_(False)
    compiled(x).sum().backward()
    eager_model(x).sum().backward()
    assert cnt.frame_count == 2
    assert model.fc1.weight.grad is None and model.fc1.bias.grad is None
    for name in ("fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"):
        torch.testing.assert_close(model.get_parameter(name).grad, eager_model.get_parameter(name).grad)


def test_enable_grad_inside_no_grad_matches_eager():
    """A function that turns grad on for part of its body, called under no_grad."""

    def f(x, w):
        y = x * 2
        with torch.enable_grad():
            z = (y * w).sum()
        return y, z

    cnt = CompileCounterWithBackend("aot_eager")
    fn = stenograph.compile(f, backend=cnt)
    x, w = torch.randn(4), torch.randn(4, requires_grad=True)
    with torch.no_grad():
        y_c, z_c = fn(x, w)
        y_e, z_e = f(x, w)
    assert y_c.requires_grad == y_e.requires_grad
    assert z_c.requires_grad == z_e.requires_grad
    torch.testing.assert_close(z_c, z_e)
    (g_c,) = torch.autograd.grad(z_c, w)
    (g_e,) = torch.autograd.grad(z_e, w)
    torch.testing.assert_close(g_c, g_e)
