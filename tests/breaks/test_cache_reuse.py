"""Resume functions are compiled on first call, guarded and cached like any frame.

Second and later calls run the cached code (the counting backend sees no new graph); resume
functions are cached per (code, offset) and reused by every entry of their parent; changed
inputs recompile the resume functions too; reset() forgets them; each backend has its own.
"""

from __future__ import annotations

import pytest
import torch
from helpers import assert_same, ops_of

import stenograph
from stenograph.testing import CompileCounter

from ._support import assert_matches_eager, torch_graph_count


def _case5(x):
    x = x * 2
    print("Debug:", x)
    x = torch.relu(x)
    return x


def _by_flag_then_print(x, flag):
    if flag:
        x = x + 1
    else:
        x = x - 1
    print("mid")
    return x * 2


def _mode_after_print(x, mode):
    y = x * 2
    print("mid")
    if mode == "a":
        return y + 1
    return y - 1


def test_second_and_later_calls_add_no_graphs(cnt, capsys):
    """Ten calls with new values of the same shape: still the 2 graphs of the first call."""
    fn = stenograph.compile(_case5, backend=cnt)
    inputs = [torch.randn(4) for _ in range(10)]
    assert_matches_eager(_case5, fn, lambda i: (inputs[i],), capsys, calls=1)
    assert cnt.frame_count == 2
    graphs = list(cnt.graphs)
    assert_matches_eager(_case5, fn, lambda i: (inputs[i],), capsys, calls=10)
    assert cnt.frame_count == 2
    assert all(a is b for a, b in zip(cnt.graphs, graphs))


def test_resume_function_is_reused_by_every_entry_of_its_parent(cnt, capsys):
    """flag=True and flag=False compile the first part twice but share one resume function.

    `flag` is dead after the break, so the resume function's guards cannot depend on it:
    [add] | [mul], then [sub] with the cached [mul] = 3 graphs (torch: 3).
    """
    x = torch.randn(4)
    peer = torch_graph_count(_by_flag_then_print, (x, True), (x, False))
    fn = stenograph.compile(_by_flag_then_print, backend=cnt)
    for flag, count in [(True, 2), (True, 2), (False, 3), (False, 3), (True, 3)]:
        assert_matches_eager(_by_flag_then_print, fn, lambda i, flag=flag: (x, flag), capsys, calls=1)
        assert cnt.frame_count == count, flag
    assert cnt.frame_count == peer
    assert [ops_of(gm) for gm in cnt.graphs] == [["add"], ["mul"], ["sub"]]


def test_value_used_only_after_the_break_recompiles_only_the_resume_function(cnt, capsys):
    """`mode` is read only after the break: a new mode recompiles the resume function alone.

    [mul] | [add] for "a", then only [sub] for "b" = 3 graphs (torch: 3).
    """
    x = torch.randn(4)
    peer = torch_graph_count(_mode_after_print, (x, "a"), (x, "b"))
    fn = stenograph.compile(_mode_after_print, backend=cnt)
    for mode, count in [("a", 2), ("a", 2), ("b", 3), ("b", 3), ("a", 3)]:
        assert_matches_eager(_mode_after_print, fn, lambda i, mode=mode: (x, mode), capsys, calls=1)
        assert cnt.frame_count == count, mode
    assert cnt.frame_count == peer
    assert [ops_of(gm) for gm in cnt.graphs] == [["mul"], ["add"], ["sub"]]


def test_new_shape_recompiles_the_resume_function_too(cnt, capsys):
    """A new input shape recompiles both the frame and its resume function (torch: 4).

    Going back to either shape afterwards compiles nothing.
    """
    a, b = torch.randn(4), torch.randn(7)
    peer = torch_graph_count(_mode_after_print, (a, "a"), (b, "a"))
    fn = stenograph.compile(_mode_after_print, backend=cnt)
    assert_matches_eager(_mode_after_print, fn, lambda i: (a, "a"), capsys, calls=2)
    assert cnt.frame_count == 2
    out = fn(b, "a")
    assert out.shape == (7,)
    assert_same(out, _mode_after_print(b, "a"))
    assert cnt.frame_count == 4 == peer
    assert [ops_of(gm) for gm in cnt.graphs[2:]] == [["mul"], ["add"]]
    capsys.readouterr()
    for x in (a, b, torch.randn(4), torch.randn(7)):
        assert_same(fn(x, "a"), _mode_after_print(x, "a"))
    assert cnt.frame_count == 4


def test_dtype_and_requires_grad_changes_recompile_the_resume_function(cnt, capsys):
    """float64 and requires_grad inputs recompile both parts; the outputs keep dtype and grad."""
    fn = stenograph.compile(_case5, backend=cnt)
    x = torch.randn(3)
    fn(x)
    assert cnt.frame_count == 2
    out = fn(x.double())
    assert out.dtype == torch.float64
    assert_same(out, _case5(x.double()))
    assert cnt.frame_count == 4
    xg = x.clone().requires_grad_()
    out = fn(xg)
    assert out.requires_grad
    assert cnt.frame_count == 6
    out.sum().backward()
    torch.testing.assert_close(xg.grad, 2.0 * (x * 2 > 0).float())


def test_reset_forgets_resume_functions(cnt, capsys):
    """After stenograph.reset() the frame and its resume function are compiled again."""
    fn = stenograph.compile(_case5, backend=cnt)
    x = torch.randn(4)
    fn(x)
    fn(x)
    assert cnt.frame_count == 2
    stenograph.reset()
    fn(x)
    assert cnt.frame_count == 4
    fn(x)
    assert cnt.frame_count == 4


def test_each_backend_has_its_own_resume_functions(capsys):
    """The same function compiled for two backends: each backend is given both graphs."""
    first, second = CompileCounter(), CompileCounter()
    fn1 = stenograph.compile(_case5, backend=first)
    fn2 = stenograph.compile(_case5, backend=second)
    x = torch.randn(4)
    assert_same(fn1(x), _case5(x))
    assert_same(fn2(x), _case5(x))
    assert first.frame_count == 2
    assert second.frame_count == 2
    fn1(x)
    fn2(x)
    assert (first.frame_count, second.frame_count) == (2, 2)


def test_recompile_limit_applies_to_resume_functions(cnt, capsys):
    """A resume function that keeps failing its guards stops compiling at recompile_limit.

    The resume part specialises on the string `mode` (one entry per value); with the limit at 3
    and 5 distinct modes it is compiled 3 times, warns once, and results stay correct.
    """
    x = torch.randn(4)
    with stenograph.config.patch(recompile_limit=3), pytest.warns(stenograph.StenographWarning) as record:
        fn = stenograph.compile(_mode_after_print, backend=cnt)
        for mode in ["a", "b", "c", "d", "e", "a", "b"]:
            assert_same(fn(x, mode), _mode_after_print(x, mode))
        # 1 graph before the break; the resume function compiles 3 times ("a", "b", "c")
        assert cnt.frame_count == 1 + 3
    assert len(record) == 1 and "recompile_limit" in str(record[0].message), [str(w.message) for w in record]
