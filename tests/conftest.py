"""Fixtures shared by every test folder: a clean state around each test, and a counting backend.

Folder conftests add only what is their own (the backend registry, logs off); a folder fixture
with the same name as one here replaces it for that folder.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import stenograph
from stenograph import events
from stenograph.testing import CompileCounter


@pytest.fixture(autouse=True)
def _fresh_state():
    """Every test starts with empty caches, default settings and a seeded RNG."""
    stenograph.reset()
    torch.manual_seed(0)
    default_dtype = torch.get_default_dtype()
    grad_enabled = torch.is_grad_enabled()
    with warnings.catch_warnings(), stenograph.config.patch(suppress_errors=False):
        warnings.simplefilter("error", stenograph.StenographWarning)
        yield
    torch.set_default_dtype(default_dtype)
    torch.set_grad_enabled(grad_enabled)
    stenograph.reset()


@pytest.fixture
def cnt() -> CompileCounter:
    """A fresh counting backend: frame_count graphs, op_count ops, graphs the GraphModules."""
    return CompileCounter()


@pytest.fixture
def compiles() -> list:
    """Every compile started, in order (frames whose graph has no op count here too, unlike
    CompileCounter's graphs)."""
    started: list = []
    listener = events.subscribe(lambda e: started.append(e) if isinstance(e, events.CompileStarted) else None)
    yield started
    events.unsubscribe(listener)
