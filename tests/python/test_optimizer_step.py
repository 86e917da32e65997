"""`optimizer.step()` of torch.optim optimizers inside a compiled training step.

`torch.optim` is not traced: `zero_grad`, `backward` and `step` run eagerly at graph breaks, the
forward and loss are one graph. Parameters, gradients and optimizer state (step counts, moments)
must match eager's after every step. torch.compile traces the optimizer too (2 graphs for this
step, where stenograph compiles 1 and runs the optimizer eagerly).
"""

import copy

import pytest
import torch
from torch import nn

import stenograph

from ._support import t

OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1),
}


def _make(name):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    return model, OPTIMIZERS[name](model.parameters())


def _train_step(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _state(opt):
    return [{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in s.items()} for s in opt.state.values()]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_steps_match_eager(cnt, name):
    model_e, opt_e = _make(name)
    model_c = copy.deepcopy(model_e)
    opt_c = OPTIMIZERS[name](model_c.parameters())
    eager, compiled = _train_step(model_e, opt_e), stenograph.compile(_train_step(model_c, opt_c), backend=cnt)
    for i in range(4):
        x, y = t(5, 4, seed=i), t(5, 1, seed=i + 100)
        torch.testing.assert_close(compiled(x, y), eager(x, y))
        for p_c, p_e in zip(model_c.parameters(), model_e.parameters()):
            torch.testing.assert_close(p_c, p_e)
            torch.testing.assert_close(p_c.grad, p_e.grad)
        state_c, state_e = _state(opt_c), _state(opt_e)
        assert len(state_c) == len(state_e) == 4
        for s_c, s_e in zip(state_c, state_e):
            assert s_c.keys() == s_e.keys()
            for key in s_e:
                torch.testing.assert_close(s_c[key], s_e[key])
    if name != "sgd":
        assert all(int(s["step"]) == 4 for s in _state(opt_c))
    assert cnt.frame_count == 1  # forward and loss; the optimizer runs eagerly


def test_step_alone_runs_eagerly_and_updates_state(cnt):
    model_e, opt_e = _make("adam")
    model_c = copy.deepcopy(model_e)
    opt_c = OPTIMIZERS["adam"](model_c.parameters())
    for model in (model_e, model_c):
        model(t(3, 4)).sum().backward()
    compiled_step = stenograph.compile(lambda: opt_c.step(), backend=cnt)
    for _ in range(3):
        compiled_step()
        opt_e.step()
    for p_c, p_e in zip(model_c.parameters(), model_e.parameters()):
        torch.testing.assert_close(p_c, p_e)
    assert [int(s["step"]) for s in _state(opt_c)] == [3] * 4
    assert cnt.frame_count == 0  # torch.compile: 1 (it traces Adam.step)


def test_training_step_guards(cnt):
    model, opt = _make("sgd")
    step = _train_step(model, opt)
    compiled = stenograph.compile(step, backend=cnt)
    x, y = t(5, 4), t(5, 1)
    compiled(x, y)
    compiled(x, y)
    assert cnt.frame_count == 1  # identical inputs: no recompile
    compiled(t(6, 4), t(6, 1))
    assert cnt.frame_count == 2  # a new batch size compiles again (then dynamic)
