"""`compile(dynamic=...)` holds for the whole function, graph breaks included: the resume
functions and the functions a break calls compile with the breaking frame's setting, as the
frame itself does (torch.compile applies its setting to everything one compiled call runs)."""

import io
from contextlib import redirect_stdout

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter


def _breaking(x):
    y = x.sin()
    print("between graphs")
    return y.cos() * x.shape[0]


def _helper(x):
    y = x + 1
    print("inside helper")
    return y * 2


def _calls_helper(x):
    stenograph.graph_break()
    return _helper(x).sin()


def _symbolic_graphs(cnt):
    """How many compiled graphs have a placeholder with a symbolic size."""
    found = 0
    for gm in cnt.graphs:
        shapes = [n.meta["example_value"].shape for n in gm.graph.nodes if n.op == "placeholder"]
        shapes = [s for s in shapes if isinstance(s, torch.Size)]
        found += any(not isinstance(d, int) for s in shapes for d in s)
    return found


def _run(fn, compiled, sizes):
    for n in sizes:
        x = torch.randn(n)
        eager_out, compiled_out = io.StringIO(), io.StringIO()
        with redirect_stdout(eager_out):
            expected = fn(x)
        with redirect_stdout(compiled_out):
            got = compiled(x)
        torch.testing.assert_close(got, expected)
        assert compiled_out.getvalue() == eager_out.getvalue()


def test_dynamic_false_keeps_resume_functions_static():
    cnt = CompileCounter()
    compiled = stenograph.compile(_breaking, backend=cnt, dynamic=False)
    _run(_breaking, compiled, [2, 3, 4, 5])
    assert cnt.frame_count == 8  # the frame and its resume function, once per size
    assert _symbolic_graphs(cnt) == 0
    _run(_breaking, compiled, [2, 3, 4, 5])
    assert cnt.frame_count == 8


def test_automatic_resume_functions_go_dynamic_after_one_change():
    """The default (None) is unchanged: the second size makes both graphs dynamic."""
    cnt = CompileCounter()
    compiled = stenograph.compile(_breaking, backend=cnt)
    _run(_breaking, compiled, [2, 3, 4, 5])
    assert cnt.frame_count == 4
    assert _symbolic_graphs(cnt) == 2


def test_dynamic_true_makes_resume_functions_dynamic_from_the_first_call():
    cnt = CompileCounter()
    compiled = stenograph.compile(_breaking, backend=cnt, dynamic=True)
    _run(_breaking, compiled, [2, 3, 4, 5])
    assert cnt.frame_count == 2
    assert _symbolic_graphs(cnt) == 2


@pytest.mark.parametrize("dynamic, frames, symbolic", [(False, 9, 0), (True, 3, 3)])
def test_functions_called_at_a_break_take_the_setting(dynamic, frames, symbolic):
    """`_helper` is compiled as its own frame (called at a break), and breaks itself."""
    cnt = CompileCounter()
    compiled = stenograph.compile(_calls_helper, backend=cnt, dynamic=dynamic)
    _run(_calls_helper, compiled, [2, 3, 4])
    assert cnt.frame_count == frames
    assert _symbolic_graphs(cnt) == symbolic
