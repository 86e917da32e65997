"""Programs deeper than the tracer can follow (issue 27): deep recursion, deeply nested inputs and
outputs. Each gives eager's result: inlining stops at `config.inline_depth_limit` and the call
runs as a graph break, a compile that runs out of Python's depth runs that call eagerly, and a
rebuilt value nested past the parser's limit is built through locals."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

import stenograph

from ._support import assert_same


def _count_down(x, n):
    return _count_down(x + 1, n - 1) if n else x


@pytest.mark.parametrize("n", [10, 200, 900])
def test_recursive_function_breaks_past_the_inline_depth(cnt, n):
    """Past 64 inlined levels the recursive call runs at a graph break (compiled through the
    entry wrapper); the result is eager's at any depth eager reaches."""

    def fn(x):
        return _count_down(x, n)

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stenograph.StenographWarning)  # recompile limit of a level
        assert_same(compiled(x), fn(x))
        graphs = cnt.frame_count
        assert_same(compiled(x), fn(x))
    assert graphs == (1 if n <= 60 else 2)
    assert cnt.frame_count == graphs  # an identical call compiles nothing
    assert_same(compiled(torch.ones(2)), fn(torch.ones(2)))


def test_inline_depth_limit_is_a_setting(cnt):
    def fn(x):
        return _count_down(x, 8)

    with stenograph.config.patch(inline_depth_limit=4):
        assert_same(stenograph.compile(fn, backend=cnt)(torch.zeros(2)), fn(torch.zeros(2)))
    assert cnt.frame_count >= 2


def _nested_list(depth):
    value = [torch.ones(2)]
    for _ in range(depth):
        value = [value]
    return value


def _nested_dict(depth):
    value = {"t": torch.ones(2)}
    for _ in range(depth):
        value = {"a": value}
    return value


def _walk_list(v):
    while isinstance(v, list):
        v = v[0]
    return v + 1


def _walk_dict(v):
    while "a" in v:
        v = v["a"]
    return v["t"] + 1


@pytest.mark.parametrize(("walk", "make"), [(_walk_list, _nested_list)])
def test_input_too_deep_to_trace_runs_eagerly(cnt, walk, make):
    """An input nested 900 deep (eager walks it in a loop) is deeper than the tracer can wrap:
    the call runs eagerly with a warning instead of raising RecursionError, even with
    suppress_errors off; a shallow input compiles."""
    deep = make(900)
    compiled = stenograph.compile(walk, backend=cnt)
    with pytest.warns(stenograph.StenographWarning, match="ran out of recursion depth"):
        assert_same(compiled(deep), walk(deep))
    assert cnt.frame_count == 0
    shallow = make(20)
    assert_same(compiled(shallow), walk(shallow))
    assert cnt.frame_count == 1
    assert_same(compiled(make(20)), walk(make(20)))
    assert cnt.frame_count == 1  # guards pass on an equal structure
    assert_same(compiled(make(21)), walk(make(21)))
    assert cnt.frame_count == 2  # one level more: the structure guard fails


def test_deep_dict_read_key_by_key_compiles(cnt):
    """A dict nested 900 deep walked by key lookups: each level read only as far as looked up
    (`frame_dicts`), so the tracer never wraps the whole structure; one graph, kept for an
    equal structure, compiled again for one level more."""
    compiled = stenograph.compile(_walk_dict, backend=cnt)
    assert_same(compiled(_nested_dict(900)), _walk_dict(_nested_dict(900)))
    assert_same(compiled(_nested_dict(900)), _walk_dict(_nested_dict(900)))
    assert cnt.frame_count == 1
    assert_same(compiled(_nested_dict(901)), _walk_dict(_nested_dict(901)))
    assert cnt.frame_count == 2


def test_deeply_nested_output_is_rebuilt(cnt):
    """A tuple wrapped in itself 300 times is returned (a single expression would pass the
    parser's 200 nested brackets)."""

    def fn(x):
        v = x + 1
        for _ in range(300):
            v = (v,)
        return v

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1
    assert_same(compiled(x * 2), fn(x * 2))
    assert cnt.frame_count == 1


def test_deeply_nested_module_chain(cnt):
    """Sequential nested 200 deep (eager needs a raised recursion limit): the compiled model's
    output is eager's, compiled in as many graphs as the inline depth allows."""
    model = torch.nn.Linear(2, 2)
    for _ in range(200):
        model = torch.nn.Sequential(model)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)
    try:
        x = torch.randn(2)
        expected = model(x)
        compiled = stenograph.compile(model, backend=cnt)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stenograph.StenographWarning)
            assert_same(compiled(x), expected)
            graphs = cnt.frame_count
            assert_same(compiled(x), expected)
    finally:
        sys.setrecursionlimit(limit)
    assert graphs >= 1 and cnt.frame_count == graphs
