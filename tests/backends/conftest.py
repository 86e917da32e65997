"""Shared fixtures: a fresh backend registry per test, and a small MLP traced with torch.fx."""

from __future__ import annotations

import copy

import pytest
import torch

from stenograph.backends import registry


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> registry._State:
    """Each test sees only the built-ins, and nothing it registers leaks into the next test."""
    state = registry._State()
    monkeypatch.setattr(registry, "_state", state)
    return state


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x))).sum(-1)


@pytest.fixture
def mlp() -> tuple[torch.nn.Module, torch.nn.Module, torch.fx.GraphModule]:
    """(reference model, an identical copy, a GraphModule traced from the copy).

    The GraphModule shares parameters with the copy, so gradients of compiled runs land there and
    can be compared with the reference's.
    """
    torch.manual_seed(0)
    ref = MLP()
    model = copy.deepcopy(ref)
    return ref, model, torch.fx.symbolic_trace(model)
