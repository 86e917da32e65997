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
