"""Training through compiled graphs: 20 optimizer steps give eager's losses and weights.

Tolerances: aot_eager runs the same ATen kernels as eager; its losses were bitwise equal to
eager's here, and rtol 1e-5 only leaves room for a different accumulation order of gradients in
AOTAutograd's backward on other builds. Inductor fuses and reorders float32 reductions, which
moves each step's weights by a few ulps and compounds over 20 steps: observed up to 5e-7
relative on these models, compared at rtol 1e-4. A wrong gradient changes the losses far more
(the losses fall by 40-85% over the 20 steps, so a broken update shows in the first digits).
"""

from __future__ import annotations

import copy

import pytest
import torch
from core._support import MLP, SmallCNN

import stenograph
from stenograph.testing import CompileCounterWithBackend

STEPS = 20
LOSS_RTOL = {"aot_eager": 1e-5, "inductor": 1e-4}


def _train(model, optimizer_cls, data, steps, **opt_kwargs):
    opt = optimizer_cls(model.parameters(), **opt_kwargs)
    losses = []
    for step in range(steps):
        x, target = data[step % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _data(shape, n_classes, batches=4):
    g = torch.Generator().manual_seed(1)
    return [
        (torch.randn(*shape, generator=g), torch.randint(0, n_classes, (shape[0],), generator=g))
        for _ in range(batches)
    ]


def _check_training(backend, model, data, optimizer_cls, **opt_kwargs):
    eager_model = copy.deepcopy(model)
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(model, backend=cnt)
    got = _train(compiled, optimizer_cls, data, STEPS, **opt_kwargs)
    want = _train(eager_model, optimizer_cls, data, STEPS, **opt_kwargs)
    rtol = LOSS_RTOL[backend]
    for (name, b), (_, b_e) in zip(model.named_buffers(), eager_model.named_buffers()):
        torch.testing.assert_close(b, b_e, rtol=rtol * 10, atol=1e-5, msg=lambda m, name=name: f"buffer {name}: {m}")
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=rtol, atol=1e-6)
    assert want[-1] < want[0]  # the loop really trains (a constant loss would prove little)
    for (name, p), (_, p_e) in zip(model.named_parameters(), eager_model.named_parameters()):
        torch.testing.assert_close(p, p_e, rtol=rtol * 10, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")
    return cnt


@pytest.mark.parametrize(
    ("optimizer_cls", "opt_kwargs"),
    [(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}), (torch.optim.Adam, {"lr": 1e-2})],
    ids=["sgd_momentum", "adam"],
)
def test_aot_eager_mlp_training_loop_matches_eager(optimizer_cls, opt_kwargs):
    cnt = _check_training("aot_eager", MLP(d_out=5), _data((8, 16), 5), optimizer_cls, **opt_kwargs)
    # in-place optimizer updates need no guard: the one graph serves all 20 steps
    assert cnt.frame_count == 1


def test_aot_eager_cnn_training_loop_matches_eager():
    """BatchNorm in training mode: running stats and weights follow eager through 20 SGD steps."""
    model = SmallCNN(n_classes=10).train()
    cnt = _check_training("aot_eager", model, _data((4, 3, 8, 8), 10), torch.optim.SGD, lr=0.05)
    assert cnt.frame_count == 1
    assert int(model.bn1.num_batches_tracked) == STEPS


@pytest.mark.slow
@pytest.mark.parametrize(
    ("optimizer_cls", "opt_kwargs"),
    [(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}), (torch.optim.Adam, {"lr": 1e-2})],
    ids=["sgd_momentum", "adam"],
)
def test_inductor_mlp_training_loop_matches_eager(optimizer_cls, opt_kwargs):
    cnt = _check_training("inductor", MLP(d_out=5), _data((8, 16), 5), optimizer_cls, **opt_kwargs)
    assert cnt.frame_count == 1


@pytest.mark.slow
def test_inductor_cnn_training_loop_matches_eager():
    cnt = _check_training("inductor", SmallCNN(n_classes=10).train(), _data((4, 3, 8, 8), 10), torch.optim.SGD, lr=0.05)
    assert cnt.frame_count == 1
