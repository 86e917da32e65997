"""Fixtures of the observability tests (logs, trace, inspect, report, CLI); tests/conftest.py
empties the caches and seeds the RNG around each test."""

from __future__ import annotations

import pytest

import stenograph


@pytest.fixture(autouse=True)
def _logs_off():
    """Logs off around every test."""
    stenograph.set_logs()
    yield
    stenograph.set_logs()
