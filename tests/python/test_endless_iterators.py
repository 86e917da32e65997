"""Generators and iterators that never end, consumed while tracing: refused once one gives more
than `MOST_ITEMS` values (torch.compile's bound on a generator's yields), rather than traced
forever; a long but finite one within the bound is still captured."""

from __future__ import annotations

import contextlib
import itertools
import signal

import pytest
import torch

import stenograph
from stenograph.errors import BreakKind, Unsupported
from stenograph.variables.constants import MOST_ITEMS

from ._support import check, t


@contextlib.contextmanager
def _within(seconds: int):
    """Fail instead of hanging when the block runs longer than `seconds` (a trace never ending)."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _naturals():
    i = 0
    while True:
        yield i
        i += 1


def _endless_list(x):
    def gen():
        while True:
            yield x

    return list(gen())


def test_the_bound_is_torch_compiles():
    assert MOST_ITEMS == 100 * 1024


def test_list_of_an_endless_generator_is_refused_under_fullgraph(cnt):
    """torch.compile raises Unsupported ("infinite generator detected"); the trace stopped
    only when the process was killed."""
    with _within(60), pytest.raises(Unsupported, match=f"yielded more than {MOST_ITEMS} values") as info:
        stenograph.compile(_endless_list, backend=cnt, fullgraph=True)(t(2))
    assert info.value.kind is BreakKind.GENERATOR
    assert cnt.frame_count == 0


@pytest.mark.parametrize(
    "consume",
    [
        pytest.param(lambda: list(map(abs, itertools.count())), id="map-of-count"),
        pytest.param(lambda: sum(_naturals()), id="sum-of-a-generator"),
    ],
)
def test_other_endless_iterators_consumed_whole_are_refused(cnt, consume):
    def fn(x):
        return x + len(consume())

    with _within(60), pytest.raises(Unsupported, match=f"more than {MOST_ITEMS}"):
        stenograph.compile(fn, backend=cnt, fullgraph=True)(t(2))


def _exactly_the_bound(x):
    def gen():
        yield from range(MOST_ITEMS)

    return x + sum(gen())


def test_a_generator_yielding_exactly_the_bound_is_captured(cnt):
    compiled = stenograph.compile(_exactly_the_bound, backend=cnt, fullgraph=True)
    x = t(2)
    torch.testing.assert_close(compiled(x), _exactly_the_bound(x))
    assert cnt.frame_count == 1


def _long_generator(x, n):
    def gen():
        for i in range(n):
            yield x * i

    return torch.stack(list(gen())).sum(0)


def test_a_long_finite_generator_is_one_graph(cnt):
    check(_long_generator, lambda i: (t(3, seed=i), 300), cnt)


def _loop_ending_past_the_bound(x):
    y = x * 2
    for v in _naturals():
        if v > MOST_ITEMS:
            break
    return y + v


def test_without_fullgraph_the_generator_past_the_bound_runs_eagerly(cnt):
    """The generator's call is a graph break, so it runs for real and the loop ends as eagerly;
    the work around it is still captured. torch.compile skips the whole frame (0 graphs), so
    the counts are not compared."""
    check(_loop_ending_past_the_bound, lambda i: (t(2, seed=i),), cnt, graphs=2, peer=False)


_COUNTER = itertools.count()


def _scaled_by_the_counter(x):
    return x * (next(_COUNTER) + 1)


def test_a_count_from_outside_gives_its_values_and_is_advanced(cnt):
    # torch.compile's own test: each call finds the counter moved on and compiles again (its
    # value is guarded), and the real counter ends where eager leaves it
    compiled = stenograph.compile(_scaled_by_the_counter, backend=cnt, fullgraph=True)
    x = t(2, 5)
    start = next(_COUNTER)
    torch.testing.assert_close(compiled(x), x * (start + 2))
    torch.testing.assert_close(compiled(x), x * (start + 3))
    assert next(_COUNTER) == start + 3
    assert cnt.frame_count == 2


@pytest.mark.parametrize("made", [lambda: itertools.count(5), lambda: itertools.count(1.5, -0.25)])
def test_a_count_passed_in_and_returned_is_the_callers(cnt, made):
    def f(x, counter):
        first = next(counter)
        second = next(counter)
        return x + first * second, counter

    compiled = stenograph.compile(f, backend=cnt, fullgraph=True)
    for call in range(2):  # the second call gets a new counter in the same state: no compile
        x, counter, eager_counter = t(3, seed=call), made(), made()
        expected, _ = f(x, eager_counter)
        out, returned = compiled(x, counter)
        torch.testing.assert_close(out, expected)
        assert returned is counter and repr(counter) == repr(eager_counter)  # advanced as eagerly
    assert cnt.frame_count == 1


def test_a_count_of_other_numbers_is_a_graph_break(cnt):
    import fractions  # only this test uses it

    counter = itertools.count(fractions.Fraction(1, 2))
    with pytest.raises(Unsupported, match="itertools.count of values other than ints and floats"):
        stenograph.compile(lambda x, c: x * next(c), backend="eager", fullgraph=True)(t(2), counter)
    assert next(counter) == fractions.Fraction(1, 2)  # not advanced by the refused trace
