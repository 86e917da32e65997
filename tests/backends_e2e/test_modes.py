"""`mode=` / `options=` through stenograph.compile (BEHAVIOUR case 12).

The fast tests replace Inductor's compile_fx call by a recorder, so they check what reaches it
(the config patches of the mode) without compiling; the slow ones compile for real.
"""

from __future__ import annotations

import pytest
import torch
from core._support import MLP

import stenograph
from stenograph.backends import inductor as inductor_mod
from stenograph.backends import resolve_mode
from stenograph.errors import InvalidBackend, StenographError

MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def f(x):
    return torch.relu(x) * 2 + 1


@pytest.fixture
def recorded(monkeypatch):
    """Config patches handed to Inductor, one dict per compiled graph; graphs run as they are."""
    calls: list[dict] = []

    def fake_compile(gm, example_inputs, patches, name=None):
        calls.append(dict(patches))
        return gm.forward

    monkeypatch.setattr(inductor_mod, "_compile", fake_compile)
    return calls


@pytest.mark.parametrize("mode", MODES)
def test_mode_reaches_inductor_as_its_config_patches(recorded, mode):
    fn = stenograph.compile(f, mode=mode)
    x = torch.randn(5)
    torch.testing.assert_close(fn(x), f(x))
    assert recorded == [resolve_mode(mode)]
    if mode in ("reduce-overhead", "max-autotune"):
        assert recorded[0]["triton.cudagraphs"] is True
    if mode.startswith("max-autotune"):
        assert recorded[0]["max_autotune"] is True


def test_mode_on_a_module(recorded):
    model = MLP()
    compiled = stenograph.compile(model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(2, 16)
    torch.testing.assert_close(compiled(x), model(x))
    assert recorded == [resolve_mode("max-autotune-no-cudagraphs")]


def test_decorator_with_mode(recorded):
    @stenograph.compile(mode="reduce-overhead")
    def g(x):
        return x.sin() + 1

    x = torch.randn(3)
    torch.testing.assert_close(g(x), x.sin() + 1)
    assert recorded == [{"triton.cudagraphs": True}]


def test_options_pass_through(recorded):
    fn = stenograph.compile(f, options={"max_autotune": True, "epilogue_fusion": False})
    fn(torch.randn(4))
    assert recorded == [{"max_autotune": True, "epilogue_fusion": False}]


def test_no_mode_means_no_patches(recorded):
    fn = stenograph.compile(f, backend="inductor")
    fn(torch.randn(4))
    # the registered `inductor` (no mode, no options) goes through the same _compile
    assert recorded == [{}]


def test_unknown_mode_fails_at_compile_and_lists_valid_modes():
    with pytest.raises(InvalidBackend) as info:
        stenograph.compile(f, mode="fastest")
    message = str(info.value)
    assert "unknown mode 'fastest'" in message
    for mode in MODES:
        assert mode in message
    assert isinstance(info.value, StenographError)


def test_unknown_mode_as_decorator_fails_before_decorating():
    with pytest.raises(InvalidBackend, match="Did you mean 'reduce-overhead'"):
        stenograph.compile(mode="reduce_overhead")


def test_mode_and_options_together_rejected():
    with pytest.raises(InvalidBackend, match="Either mode or options can be specified"):
        stenograph.compile(f, mode="default", options={"max_autotune": True})


def test_unknown_option_rejected_at_compile():
    with pytest.raises(InvalidBackend, match="unknown Inductor option 'max_autotunes'"):
        stenograph.compile(f, options={"max_autotunes": True})


def test_each_mode_gets_its_own_cache(recorded):
    """The same function compiled with two modes compiles twice (caches are per backend)."""
    a = stenograph.compile(f, mode="default")
    b = stenograph.compile(f, mode="max-autotune-no-cudagraphs")
    x = torch.randn(4)
    a(x)
    b(x)
    a(x)
    assert recorded == [{}, resolve_mode("max-autotune-no-cudagraphs")]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_real_inductor_compile_in_each_mode(mode):
    """On this CPU-only machine: every mode compiles and gives eager's result (CUDA graphs are
    skipped by Inductor for CPU tensors, so reduce-overhead behaves like default here)."""
    fn = stenograph.compile(f, mode=mode)
    x = torch.randn(32)
    torch.testing.assert_close(fn(x), f(x))
    torch.testing.assert_close(fn(x + 1), f(x + 1))
