"""Generators driven by `send`, delegating with `yield from`, and returning a value
(`StopIteration.value`, the result of `yield from`): interleaved with the consumer in one graph."""

from __future__ import annotations

import pytest
import torch

import stenograph

from ._support import check, t


def _accumulate(log):
    total = 0
    while True:
        v = yield total
        if v is None:
            return total
        log.append("got")
        total = total + v


def test_send_into_a_generator(cnt):
    def fn(x, log):
        g = _accumulate(log)
        first = next(g)
        g.send(x)
        r = g.send(x * 2)
        try:
            g.send(None)
        except StopIteration as e:
            return first, r, e.value * 3
        return None

    check(fn, lambda i: (t(3, seed=i), []), cnt, peer=False)  # torch.compile raises AttributeError


def _inner(x):
    yield x
    yield x + 1
    return x * 10


def _outer(x, log):
    r = yield from _inner(x)
    log.append("inner done")
    yield r
    yield from [x - 1, x - 2]
    return "outer"


def test_yield_from_with_the_delegates_return_value(cnt):
    def fn(x, log):
        return list(_outer(x, log))

    check(fn, lambda i: (t(3, seed=i), []), cnt)


def test_send_through_yield_from(cnt):
    def fn(x, log):
        g = _outer(x, log)
        out = [next(g), g.send(None), next(g)]
        return out, [v * 2 for v in g]

    check(fn, lambda i: (t(3, seed=i), []), cnt)


def test_stop_iteration_value_of_an_exhausted_generator(cnt):
    def fn(x):
        g = _inner(x)
        next(g)
        next(g)
        try:
            next(g)
        except StopIteration as e:
            return e.value + 1, e.args[0].shape
        return None

    check(fn, lambda i: (t(3, seed=i),), cnt, peer=False)  # torch.compile runs it eagerly


def test_send_errors_are_the_programs(cnt):
    def fn(x, log):
        g = _accumulate(log)
        try:
            g.send(1)
        except TypeError as e:
            return x + 1, str(e)
        return x

    check(fn, lambda i: (t(3, seed=i), []), cnt)


def test_close_of_a_finished_or_new_generator(cnt):
    def fn(x):
        g = _inner(x)
        g.close()
        h = _inner(x)
        total = sum(h)
        h.close()
        return total, list(g)

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_guards_of_code_inside_a_generator_recompile(cnt):
    def fn(x, n):
        g = _accumulate([])
        next(g)
        return g.send(x * n)

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    for n in (2, 2):
        torch.testing.assert_close(compiled(x, n), x * n)
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled(t(4), 2), t(4) * 2)
    assert cnt.frame_count == 2


@pytest.mark.parametrize("value", [None, 0])
def test_yield_from_an_iterator_that_is_not_a_generator(cnt, value):
    def gen(x):
        got = yield from iter([x, x + 1])
        yield got

    def fn(x):
        return list(gen(x))

    check(fn, lambda i: (t(3, seed=i),), cnt)
