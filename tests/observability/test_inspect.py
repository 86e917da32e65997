"""stenograph.inspect(fn): every cache entry of a function and of its resume functions, readable."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stenograph

from ._support import breaking


def test_inspect_before_any_call_says_so():
    g = stenograph.compile(breaking, backend="eager")
    assert stenograph.inspect(g).entries == []
    assert "call the compiled function first" in str(stenograph.inspect(g))


@stenograph.config.patch(native_guards=False)  # the tensor check in its Python form
def test_inspect_lists_entries_of_the_function_and_its_resume_functions():
    g = stenograph.compile(breaking, backend="eager")
    g(torch.randn(4), 1)
    g(torch.randn(4), 2)
    info = stenograph.inspect(g)
    frames = [e.frame for e in info.entries]
    assert frames[0].startswith("breaking at ")
    assert sum(f.startswith("__resume_at_") for f in frames) == 2  # n == 1, then n symbolic
    first, resume = info.entries[0], info.entries[1]
    assert "def ___guard(x, n):" in first.guard_source
    assert "x.shape == (4,)" in first.guard_source
    assert first.graph_code is not None and "x * 2" in first.graph_code
    assert "___Continue(" in first.transformed_source  # the tail call into the resume function
    assert "torch.relu(" in (resume.graph_code or "")
    assert first.compile_seconds > 0 and first.capture_seconds > 0
    frame_number = first.compile_id.split("/")[0]
    assert frame_number.isdigit()
    resume_ids = [e.compile_id for e in info.entries[1:]]
    assert len({i.split("/")[0] for i in resume_ids}) == 1 and resume_ids[0] != resume_ids[1]


def test_inspect_text_has_every_part():
    g = stenograph.compile(breaking, backend="eager")
    g(torch.randn(4), 1)
    g(torch.randn(4), 2)
    text = str(stenograph.inspect(g))
    for part in ("--- guard", "--- graph", "--- transformed code", "compile time:", "=== recompiles of __resume_at_"):
        assert part in text
    assert "L['n'] == 1 (got 2)" in text


def test_inspect_a_compiled_module():
    model = stenograph.compile(nn.Linear(4, 2), backend="eager")
    model(torch.randn(3, 4))
    info = stenograph.inspect(model)
    assert len(info.entries) == 1
    entry = info.entries[0]
    assert entry.frame.startswith("Linear.forward at ")
    assert "def ___guard(self, input):" in entry.guard_source
    assert "_parameters['weight']" in entry.transformed_source
    assert "torch._C._nn.linear" in (entry.graph_code or "") or "linear" in (entry.graph_code or "")


def test_inspect_reports_a_frame_that_runs_eagerly():
    def add_one(x):
        return x + 1

    g = stenograph.compile(add_one, backend="eager")
    with stenograph.config.patch(recompile_limit=1), pytest.warns(stenograph.StenographWarning):
        g(torch.randn(2))
        g(torch.randn(3, 3))
    info = stenograph.inspect(g)
    assert len(info.entries) == 1
    assert list(info.runs_eagerly.values()) == ["recompile limit (1) reached"]
    assert "runs eagerly: recompile limit (1) reached" in str(info)


def test_inspect_needs_a_compiled_function():
    with pytest.raises(TypeError, match="stenograph.compile"):
        stenograph.inspect(breaking)
