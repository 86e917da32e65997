"""Shared fixtures for the observability tests (logs, trace, inspect, report, CLI)."""

from __future__ import annotations

import pytest
import torch

import stenograph


@pytest.fixture(autouse=True)
def _fresh_state():
    """Empty caches, logs off and a seeded RNG around every test."""
    stenograph.reset()
    stenograph.set_logs()
    torch.manual_seed(0)
    yield
    stenograph.set_logs()
    stenograph.reset()
