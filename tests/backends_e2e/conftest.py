"""Fixtures for the end-to-end backend tests: every test starts from empty caches and a seeded RNG."""

from __future__ import annotations

import pytest
import torch

import stenograph


@pytest.fixture(autouse=True)
def _fresh_state():
    stenograph.reset()
    torch.manual_seed(0)
    grad_enabled = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(grad_enabled)
    stenograph.reset()
