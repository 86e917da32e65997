"""Generators made in the compiled function that leave it (returned, inside a returned `zip`, or
live at a graph break): rebuilt as real generators when their body has not started or has
finished (one suspended at a `yield`: test_suspended_generators.py)."""

from __future__ import annotations

import types

import pytest
import torch

import stenograph

from ._support import assert_same, check, t


def _whoo(x, log):
    log.append("started")
    yield x + 1
    yield x + 2


def _both(fn, *make):
    """fn's result eagerly and compiled (fullgraph), each on fresh arguments from `make`."""
    eager = fn(*[m() for m in make])
    compiled = stenograph.compile(fn, backend="eager", fullgraph=True)(*[m() for m in make])
    return eager, compiled


def test_a_returned_generator_runs_its_body_when_the_caller_pulls(cnt):
    def fn(x, log):
        return _whoo(x.sin(), log)

    log_e, log_c = [], []
    eager = fn(t(3), log_e)
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)(t(3), log_c)
    assert isinstance(compiled, types.GeneratorType)
    assert compiled.__qualname__ == eager.__qualname__
    assert log_c == [] == log_e  # nothing of the body has run yet
    assert_same(list(compiled), list(eager))
    assert log_c == ["started"] == log_e
    assert cnt.frame_count == 1


def test_the_argument_is_the_object_the_frame_changed_after_making_the_generator():
    def gen(items):
        yield from items

    def fn(x):
        items = [x]
        g = gen(items)
        items.append(x * 2)
        return g, items

    (g_e, items_e), (g_c, items_c) = _both(fn, lambda: t(2))
    items_e.append(0)
    items_c.append(0)
    assert_same(list(g_c), list(g_e))


def test_parameters_of_every_kind_and_a_closure():
    def fn(x, *rest, **named):
        scale = x.cos()

        def inner(a, b=2, *more, c, **kw):
            yield a * scale + b + c
            yield more, kw

        return inner(x, 3, *rest, c=4, **named)

    eager, compiled = _both(fn, lambda: t(2), lambda: 5)
    assert_same(list(compiled), list(eager))


def test_a_generator_expression_reads_its_list_live():
    def fn(x):
        items = [x, x + 1]
        return (v * 2 for v in items), items

    (g_e, items_e), (g_c, items_c) = _both(fn, lambda: t(2))
    items_e.append(t(2, seed=1))
    items_c.append(t(2, seed=1))
    assert_same(list(g_c), list(g_e))


def test_a_list_iterator_returned_reads_its_list_live():
    def fn(x):
        items = [x, x + 1, x + 2]
        it = iter(items)
        next(it)
        return it, items

    (it_e, items_e), (it_c, items_c) = _both(fn, lambda: t(2))
    items_e.append(t(2, seed=1))
    items_c.append(t(2, seed=1))
    assert type(it_c) is type(it_e)
    assert_same(list(it_c), list(it_e))


def test_an_iterator_reached_twice_is_one_iterator():
    def fn(x):
        it = iter((x, x + 1, x + 2))
        next(it)
        numbered = enumerate(_whoo(x, []))
        return it, [it], numbered, [numbered]

    (it_e, _, numbered_e, _), (it_c, holder_c, numbered_c, numbered_holder_c) = _both(fn, lambda: t(2))
    assert holder_c[0] is it_c and numbered_holder_c[0] is numbered_c
    assert_same([list(it_c), list(numbered_c)], [list(it_e), list(numbered_e)])


def test_a_zip_over_a_generator_is_rebuilt_as_a_zip():
    def fn(x):
        return zip(range(3), _whoo(x, [])), enumerate(_whoo(x, []), 5), x.sin()

    eager, compiled = _both(fn, lambda: t(2))
    assert [type(v) for v in compiled] == [type(v) for v in eager]
    assert_same([list(compiled[0]), list(compiled[1])], [list(eager[0]), list(eager[1])])


def test_a_finished_generator_stays_finished():
    def fn(x):
        g = _whoo(x, [])
        total = sum(g)
        return g, total

    (g_e, total_e), (g_c, total_c) = _both(fn, lambda: t(2))
    assert_same(total_c, total_e)
    assert isinstance(g_c, types.GeneratorType) and g_c.__qualname__ == g_e.__qualname__
    assert g_c.gi_frame is None
    with pytest.raises(StopIteration):
        next(g_c)


def test_a_generator_made_before_a_graph_break_is_pulled_after_it(cnt):
    def fn(x, log):
        y = x.sin()
        g = _whoo(y, log)
        torch._dynamo.graph_break()
        return list(g), y.cos()

    # the graphs before and after the break (torch.compile runs the frame eagerly)
    check(fn, lambda i: (t(2, seed=i), []), cnt, graphs=2, torch_graphs=0)
