"""Breaks in recursive functions and in generators consumed by the compiled frame."""

from __future__ import annotations

import torch
from helpers import assert_same

import stenograph

from ._support import assert_matches_eager, torch_graph_count

# ---------------------------------------------------------------------------------------------
# recursion


def _rec(x, ws):
    if not ws:
        print("bottom")
        return x
    x = x @ ws[0]
    return torch.tanh(_rec(x, ws[1:]))


def test_recursive_function_with_break_at_the_bottom(cnt, capsys):
    """Recursion 3 deep, print at the bottom: eager results and output on every call.

    Each level is compiled as its own frame when the inlined recursion breaks: [mm] at each of
    the 3 levels; the bottom level has no tensor work; the resume function after the recursive
    call only needs its return value, so its one graph [tanh] serves all 3 levels: 4 (torch: 4).
    """
    ws = tuple(torch.randn(4, 4) for _ in range(3))
    inputs = [torch.randn(2, 4) for _ in range(3)]
    peer = torch_graph_count(_rec, (inputs[0], ws))
    fn = stenograph.compile(_rec, backend=cnt)
    assert_matches_eager(_rec, fn, lambda i: (inputs[i], ws), capsys, calls=3)
    assert cnt.frame_count == 4 == peer


def test_recursive_function_backward_matches_eager(cnt, capsys):
    """Gradients through the graphs of all recursion levels equal eager's."""
    ws0 = [torch.randn(4, 4) for _ in range(3)]
    x0 = torch.randn(2, 4)
    fn = stenograph.compile(_rec, backend=cnt)
    ws_c = tuple(w.clone().requires_grad_() for w in ws0)
    ws_e = tuple(w.clone().requires_grad_() for w in ws0)
    x_c, x_e = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    fn(x_c, ws_c).sum().backward()
    _rec(x_e, ws_e).sum().backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)
    for w_c, w_e in zip(ws_c, ws_e):
        torch.testing.assert_close(w_c.grad, w_e.grad)


def _sin_tower(x, depth):
    if depth == 0:
        return x
    return torch.sin(_sin_tower(x, depth - 1)) + depth


def test_recursion_without_break_is_inlined_into_one_graph(cnt):
    """Recursion with no break is inlined completely: 1 graph (torch: 1)."""
    x = torch.randn(5)
    peer = torch_graph_count(_sin_tower, (x, 3))
    fn = stenograph.compile(_sin_tower, backend=cnt)
    for _ in range(2):
        assert_same(fn(x, 3), _sin_tower(x, 3))
    assert cnt.frame_count == 1 == peer
    assert cnt.op_count == 6


# ---------------------------------------------------------------------------------------------
# generators


def _gen(x, n):
    for i in range(n):
        x = x * 2
        print("gen step", i)
        yield x


def _consume(x):
    x = x.cos()
    total = torch.zeros_like(x)
    for y in _gen(x, 3):
        total = total + y.sin()
    return total * 0.5


def test_generator_with_break_consumed_in_the_frame(cnt, capsys):
    """A generator whose body prints, consumed by a for loop: eager results and output, every call.

    The frame is not given up: at least the work before the loop is captured. torch.compile
    gives 0 graphs (a break while inlining the generator inside a loop makes it skip the frame),
    so the counts are not compared; later calls must add no graph.
    """
    inputs = [torch.randn(4) for _ in range(3)]
    fn = stenograph.compile(_consume, backend=cnt)
    assert_matches_eager(_consume, fn, lambda i: (inputs[i],), capsys, calls=1)
    first = cnt.frame_count
    assert first >= 1
    assert_matches_eager(_consume, fn, lambda i: (inputs[i],), capsys, calls=3)
    assert cnt.frame_count == first


def _consume_with_list(x):
    ys = list(_gen(x.abs(), 2))
    return torch.stack(ys).sum(0)


def test_generator_with_break_consumed_by_list(cnt, capsys):
    """list(generator) whose body prints: eager results and output, every call, no new graphs.

    torch.compile gives 0 graphs here (frame skipped), so the counts are not compared.
    """
    inputs = [torch.randn(3) for _ in range(3)]
    fn = stenograph.compile(_consume_with_list, backend=cnt)
    assert_matches_eager(_consume_with_list, fn, lambda i: (inputs[i],), capsys, calls=1)
    first = cnt.frame_count
    assert first >= 1
    assert_matches_eager(_consume_with_list, fn, lambda i: (inputs[i],), capsys, calls=3)
    assert cnt.frame_count == first
