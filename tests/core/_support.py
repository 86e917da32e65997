"""Models (also run by the end-to-end backend tests) and the forward/backward check of the
capture-core acceptance tests; the generic helpers are in tests/helpers.py."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from helpers import assert_same
from torch import nn

import stenograph

# ---------------------------------------------------------------------------------------------
# comparison


def check_forward_backward(model: nn.Module, x: torch.Tensor, cnt, *, calls: int = 1) -> None:
    """Compiled `model` vs an identical eager deepcopy: outputs, buffers, input and param grads.

    The compiled model is called `calls` times (same input shape); every call must match eager,
    buffers (e.g. BatchNorm running stats) must be updated identically, and exactly one graph must
    have been captured. Then a weighted-sum loss is backpropagated through the last outputs.
    """
    eager_model = copy.deepcopy(model)
    compiled = stenograph.compile(model, backend=cnt)
    for _ in range(calls):
        x_c = x.detach().clone().requires_grad_(True)
        x_e = x.detach().clone().requires_grad_(True)
        out_c = compiled(x_c)
        out_e = eager_model(x_e)
        assert_same(out_c, out_e)
        for (name, b_c), (_, b_e) in zip(model.named_buffers(), eager_model.named_buffers()):
            torch.testing.assert_close(b_c, b_e, msg=lambda m, name=name: f"buffer {name}: {m}")
    assert cnt.frame_count == 1

    weight = torch.randn_like(out_e)
    (out_c * weight).sum().backward()
    (out_e * weight).sum().backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)
    params_c = dict(model.named_parameters())
    params_e = dict(eager_model.named_parameters())
    assert list(params_c) == list(params_e) and params_c
    for name, p_e in params_e.items():
        p_c = params_c[name]
        assert p_e.grad is not None, name
        assert p_c.grad is not None, f"no gradient reached parameter {name}"
        torch.testing.assert_close(p_c.grad, p_e.grad, msg=lambda m, name=name: f"{name}: {m}")
    # backward through the captured graph does not capture anything new
    assert cnt.frame_count == 1


# ---------------------------------------------------------------------------------------------
# models


class MLP(nn.Module):
    """Three Linear layers with ReLU between them."""

    def __init__(self, d_in: int = 16, d_hidden: int = 32, d_out: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)
        self.act = nn.ReLU()

    def forward(self, x):
        x = self.act(self.fc1(x))
        x = self.act(self.fc2(x))
        return self.fc3(x)


class SmallCNN(nn.Module):
    """Conv2d/BatchNorm2d/ReLU/MaxPool2d twice, flatten, Linear; input (N, 3, 8, 8)."""

    def __init__(self, n_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, n_classes)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        x = self.pool(self.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        return self.fc(x)


class CausalSelfAttention(nn.Module):
    """Pre-LayerNorm causal multi-head self-attention written out by hand, with a residual."""

    def __init__(self, d_model: int = 16, n_heads: int = 2) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.scale = self.head_dim**-0.5
        self.ln = nn.LayerNorm(d_model)
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(p=0.0)

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln(x)
        q = self.q(h).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        attn = self.dropout(attn)
        y = (attn @ v).transpose(1, 2).reshape(B, T, C)
        return x + self.out(y)


def scaled_residual(x, y, scale):
    """Module-level helper called from a forward (inlined by the tracer)."""
    return x + scale * y


def gelu_then_norm(x, norm):
    """Module-level helper that receives a submodule as an argument."""
    return norm(F.gelu(x))


class ResidualBlock(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.scale = 0.5

    def inner(self, x):
        return gelu_then_norm(self.fc(x), self.norm)

    def forward(self, x):
        return scaled_residual(x, self.inner(x), self.scale)


class TwoBlockNet(nn.Module):
    """A user module calling submodules, its own methods and module-level helper functions."""

    def __init__(self, d: int = 8, d_out: int = 3) -> None:
        super().__init__()
        self.block1 = ResidualBlock(d)
        self.block2 = ResidualBlock(d)
        self.head = nn.Linear(d, d_out)

    def forward(self, x):
        x = self.block2(self.block1(x))
        return self.head(torch.tanh(x))
