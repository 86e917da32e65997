"""Shared fixtures for the graph-break acceptance tests (issue: graph breaks and resume functions).

`stenograph.testing` is imported inside the fixture so that collection works before it lands.
"""

from __future__ import annotations

import pytest
import torch

import stenograph


@pytest.fixture(autouse=True)
def _fresh_state():
    """Every test starts with empty caches, default settings and a seeded RNG."""
    stenograph.reset()
    torch.manual_seed(0)
    default_dtype = torch.get_default_dtype()
    grad_enabled = torch.is_grad_enabled()
    yield
    torch.set_default_dtype(default_dtype)
    torch.set_grad_enabled(grad_enabled)
    stenograph.reset()


@pytest.fixture
def cnt():
    """A fresh counting backend: frame_count graphs, op_count ops, graphs the GraphModules."""
    from stenograph.testing import CompileCounter

    return CompileCounter()
