"""`error_on_graph_break(flag)` (stenograph's, and torch._dynamo's): a context manager and
decorator deciding, while compiling, whether a graph break is an error; inside compiled code it
applies to the block it opens. `fullgraph=True` wins. And `torch._dynamo.skip_frame()`."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from helpers import assert_same

import stenograph
from stenograph.testing import CompileCounter

SPELLINGS = [stenograph.error_on_graph_break, torch._dynamo.error_on_graph_break]


@pytest.mark.parametrize("setting", SPELLINGS, ids=["stenograph", "torch"])
def test_a_block_allowing_breaks_inside_a_call_that_forbids_them(setting):
    counter = CompileCounter()

    @setting(True)
    @stenograph.compile(backend=counter)
    def f(x):
        x = x + 1
        with setting(False):
            stenograph.graph_break()
            x = x + 2
            stenograph.graph_break()
        return x + 4

    x = torch.ones(3)
    assert_same(f(x), x + 7)
    assert counter.frame_count == 3  # the break re-enters the block: the resume allows the second


@pytest.mark.parametrize("setting", SPELLINGS, ids=["stenograph", "torch"])
def test_a_block_forbidding_breaks_raises_and_compiles_nothing(setting):
    counter = CompileCounter()

    @stenograph.compile(backend=counter)
    def f(x):
        x = x + 1
        with setting(True):
            stenograph.graph_break()
        return x + 1

    with pytest.raises(stenograph.Unsupported, match="graph_break"):
        f(torch.ones(3))
    assert counter.frame_count == 0

    @stenograph.compile(backend=counter)
    def allowed(x):  # the same break outside the block is a break
        x = x + 1
        with setting(True):
            x = x * 2
        stenograph.graph_break()
        return x + 1

    assert_same(allowed(torch.ones(3)), (torch.ones(3) + 1) * 2 + 1)
    assert counter.frame_count == 2


def test_the_setting_of_a_compiled_function_traced_from_another():
    inner_errors = stenograph.error_on_graph_break(True)(stenograph.compile(lambda x: _breaks(x), backend="eager"))
    outer = stenograph.error_on_graph_break(False)(stenograph.compile(lambda x: inner_errors(x), backend="eager"))
    with pytest.raises(stenograph.Unsupported):
        outer(torch.ones(2))
    inner_allows = stenograph.error_on_graph_break(False)(stenograph.compile(lambda x: _breaks(x), backend="eager"))
    outer = stenograph.error_on_graph_break(True)(stenograph.compile(lambda x: inner_allows(x), backend="eager"))
    assert_same(outer(torch.ones(2)), torch.ones(2) + 3)


def _breaks(x):
    x = x + 1
    stenograph.graph_break()
    return x + 2


def test_fullgraph_wins_and_bad_settings_are_refused():
    @stenograph.compile(backend="eager", fullgraph=True)
    def f(x):
        with stenograph.error_on_graph_break(False):
            stenograph.graph_break()
        return x + 1

    with pytest.raises(stenograph.Unsupported):
        f(torch.ones(2))
    with pytest.raises(TypeError, match="takes a bool"):
        stenograph.error_on_graph_break("yes")

    @stenograph.compile(backend="eager")
    def torch_spelling(x):
        with torch._dynamo.error_on_graph_break("yes"):  # torch's class takes it eagerly
            return x + 1

    with pytest.raises(TypeError, match="takes a bool"):
        torch_spelling(torch.ones(2))
    # the setting is left as it was whatever happened
    assert not stenograph.marks.errors_on_graph_break()


def test_skip_frame_runs_the_whole_frame_eagerly():
    counter = CompileCounter()

    @stenograph.compile(backend=counter)
    def skipped(x):
        x = x + 1
        torch._dynamo.skip_frame()
        return x + 1

    @stenograph.compile(backend=counter)
    def skipped_after_a_break(x):
        x = x + 1
        stenograph.graph_break()
        x = x + 1
        torch._dynamo.skip_frame()
        return x + 1

    x = torch.ones(3)
    assert_same(skipped(x), x + 2)
    assert counter.frame_count == 0
    assert_same(skipped_after_a_break(x), x + 3)
    assert counter.frame_count == 1


def test_step_unsupported_compiles_the_graph_so_far_and_runs_the_rest_eagerly(capsys):
    counter = CompileCounter()

    @stenograph.compile(backend=counter)
    def stepped(x):
        x = x + 1 + 2
        torch._dynamo.step_unsupported()
        print("after", x.shape)
        return x + 4

    @stenograph.compile(backend=counter)
    def at_the_start(x):
        torch._dynamo.step_unsupported("nothing before")
        return x + 1

    x = torch.ones(3)
    for _ in range(2):  # the second call reuses the entry: nothing compiles again
        assert_same(stepped(x), x + 7)
    assert (counter.frame_count, counter.op_count) == (1, 2)  # the resume function was not compiled
    assert capsys.readouterr().out == "after torch.Size([3])\n" * 2
    assert_same(at_the_start(x), x + 1)
    assert counter.frame_count == 1
    reasons = stenograph.explain(at_the_start)(x).break_reasons
    assert [r.reason for r in reasons] == ["step_unsupported(): nothing before"]
    # a new shape recompiles the graph before the step, the rest still runs eagerly
    y = torch.ones(2, 2)
    assert_same(stepped(y), y + 7)
    assert counter.frame_count == 2
    capsys.readouterr()
