"""Models and comparisons shared by the end-to-end backend tests.

The models are the capture core's acceptance models (tests/core/_support.py), imported so both
suites exercise the same programs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from core._support import MLP, CausalSelfAttention, SmallCNN
from torch import nn

import stenograph
from stenograph.testing import CompileCounterWithBackend

__all__ = ["MODELS", "Tol", "compare_forward_backward", "make_model", "TOL"]


@dataclass(frozen=True)
class Tol:
    rtol: float
    atol: float


# eager runs the captured graph itself and aot_eager the same ATen kernels after AOTAutograd, so
# torch.testing's float32 defaults (rtol 1.3e-6, atol 1e-5) apply. Inductor fuses and reorders
# reductions (layer_norm, softmax, sums in backward), which moves float32 results by a few ulps
# per reduction: 1e-4 relative leaves room for that and still catches any wrong formula.
TOL = {
    "eager": Tol(1.3e-6, 1e-5),
    "aot_eager": Tol(1.3e-6, 1e-5),
    "inductor": Tol(1e-4, 1e-5),
}

# name -> (constructor, input shape)
MODELS: dict[str, tuple[Any, tuple[int, ...]]] = {
    "mlp": (lambda: MLP(), (4, 16)),
    "cnn_train": (lambda: SmallCNN().train(), (4, 3, 8, 8)),
    "attention": (lambda: CausalSelfAttention(), (2, 5, 16)),
}


def make_model(name: str) -> tuple[nn.Module, torch.Tensor]:
    ctor, shape = MODELS[name]
    return ctor(), torch.randn(*shape)


def close(actual: torch.Tensor, expected: torch.Tensor, tol: Tol, what: str) -> None:
    torch.testing.assert_close(actual, expected, rtol=tol.rtol, atol=tol.atol, msg=lambda m: f"{what}: {m}")


def compare_forward_backward(
    backend: str, model: nn.Module, x: torch.Tensor, *, calls: int = 2
) -> CompileCounterWithBackend:
    """Compiled `model` vs an eager deepcopy: outputs and buffers on every call, then gradients.

    Returns the counting backend so callers can check how many graphs were compiled.
    """
    tol = TOL[backend]
    eager_model = copy.deepcopy(model)
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(model, backend=cnt)
    for call in range(calls):
        x_c = x.detach().clone().requires_grad_(True)
        x_e = x.detach().clone().requires_grad_(True)
        out_c = compiled(x_c)
        out_e = eager_model(x_e)
        assert out_c.requires_grad and out_c.grad_fn is not None, "compiled output is not differentiable"
        close(out_c, out_e, tol, f"output of call {call}")
        for (name, b_c), (_, b_e) in zip(model.named_buffers(), eager_model.named_buffers()):
            close(b_c, b_e, tol, f"buffer {name} after call {call}")
    weight = torch.randn_like(out_e)
    (out_c * weight).sum().backward()
    (out_e * weight).sum().backward()
    close(x_c.grad, x_e.grad, tol, "input gradient")
    params_e = dict(eager_model.named_parameters())
    for name, p_c in model.named_parameters():
        assert p_c.grad is not None, f"no gradient reached {name}"
        close(p_c.grad, params_e[name].grad, tol, f"gradient of {name}")
    return cnt
