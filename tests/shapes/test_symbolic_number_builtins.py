"""min()/max() over symbolic numbers, math.floor/ceil/trunc and round() of them (dynamic sizes beside
fixed limits and scaled by floats, as torchvision's detection transform resizes images) are
recorded: one graph, no guard on which item wins or on the value, eager's result."""

import math

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter


def clamp_rows(x, limit):
    rows = min(x.shape[0], limit)
    cols = max(4, x.shape[1], 2)
    return x[:rows].sum(0) * cols


@pytest.mark.parametrize("shape", [(3, 5), (9, 2), (6, 6)])
def test_min_max_over_dynamic_sizes_is_one_graph_whichever_wins(shape):
    cnt = CompileCounter()
    compiled = stenograph.compile(clamp_rows, backend=cnt, dynamic=True)
    for rows, cols in [shape, (7, 3), (2, 8)]:  # the minimum and maximum switch sides
        x = torch.randn(rows, cols)
        torch.testing.assert_close(compiled(x, 6), clamp_rows(x, 6))
    assert cnt.frame_count == 1
    targets = {node.target for gm in cnt.graphs for node in gm.graph.nodes}
    assert {torch.sym_min, torch.sym_max} <= targets


def test_a_bool_beside_a_symbolic_int_keeps_python_semantics():
    """max(True, 1) is True (the first extreme), which sym_max cannot tell: not recorded."""

    def fn(x, flag):
        return x.sum(), max(flag, x.shape[0])

    compiled = stenograph.compile(fn, backend=CompileCounter(), dynamic=True)
    for n in (1, 4):
        x = torch.randn(n)
        got, expected = compiled(x, True), fn(x, True)
        torch.testing.assert_close(got[0], expected[0])
        assert (type(got[1]), got[1]) == (type(expected[1]), expected[1])


def test_min_with_key_over_symbolic_ints_is_eagers_result():
    def fn(x):
        return x * min(x.shape[0], 5, key=lambda n: -n)

    cnt = CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt, dynamic=True)
    for n in (3, 8):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), fn(x))


def resize_like(x, short, long):
    scale = min(short / min(x.shape), long / max(x.shape))
    rows, cols = math.floor(x.shape[0] * scale), math.ceil(x.shape[1] * scale)
    return x.new_zeros(rows, cols) + math.trunc(scale * 10), scale


@pytest.mark.parametrize("first", [(4, 6), (10, 3)])
def test_float_min_and_rounding_of_symbolic_sizes_is_one_graph(first):
    cnt = CompileCounter()
    compiled = stenograph.compile(resize_like, backend=cnt, dynamic=True)
    for shape in [first, (5, 9), (12, 2)]:
        x = torch.randn(shape)
        (got, got_scale), (expected, expected_scale) = compiled(x, 8, 12), resize_like(x, 8, 12)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected)
        assert (type(got_scale), got_scale) == (type(expected_scale), expected_scale)
    assert cnt.frame_count == 1
    targets = {node.target for gm in cnt.graphs for node in gm.graph.nodes}
    assert {math.floor, math.ceil, math.trunc, torch.sym_min} <= targets


def test_mixed_int_and_float_min_keeps_python_types():
    """min(3, 3.5) is the int 3: an int beside a float is not recorded as one symbolic kind."""

    def fn(x):
        return x.sum(), min(x.shape[0], x.shape[0] / 2 + 1.5)

    compiled = stenograph.compile(fn, backend=CompileCounter(), dynamic=True)
    for n in (3, 2, 8):
        x = torch.randn(n)
        got, expected = compiled(x), fn(x)
        assert (type(got[1]), got[1]) == (type(expected[1]), expected[1])


SIZES = (128, 256, 512)


def choose(x, n):
    return x * SIZES[n // 2]


def test_constant_tuple_indexed_by_a_symbolic_int_specialises_with_a_guard():
    """The index is guarded to its value (as a list indexed by it is): another index recompiles,
    the same index does not."""
    cnt = CompileCounter()
    compiled = stenograph.compile(choose, backend=cnt, dynamic=True)
    x = torch.randn(3)
    for n, graphs in [(2, 1), (3, 1), (4, 2), (5, 2), (0, 3)]:
        torch.testing.assert_close(compiled(x, n), choose(x, n))
        assert cnt.frame_count == graphs


def half_rows(x):
    return x[: round(x.shape[0] / 2)], round(2.5), round(3.14159, 2)


def test_round_of_a_symbolic_float_is_one_graph_rounding_half_to_even():
    cnt = CompileCounter()
    compiled = stenograph.compile(half_rows, backend=cnt, dynamic=True)
    for rows in (6, 9, 5, 7):  # 4.5 and 2.5 round to the even neighbour, as Python's round
        x = torch.randn(rows, 3)
        got, expected = compiled(x), half_rows(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
    assert cnt.frame_count == 1
    assert round in {node.target for gm in cnt.graphs for node in gm.graph.nodes}


def test_export_keeps_round_of_a_symbolic_size():
    gm, _ = stenograph.export(lambda x: x[: round(x.shape[0] / 2)], aten_graph=True)(torch.ones(6, 4))
    for rows in (6, 9):
        assert gm(torch.ones(rows, 4)).shape == (round(rows / 2), 4)
