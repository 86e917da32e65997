"""The old sequence protocol: iterating an object whose class has `__getitem__` but no `__iter__`
calls `obj[0]`, `obj[1]`, ... until IndexError (or StopIteration), lazily, in one graph."""

from __future__ import annotations

import torch

import stenograph

from ._support import check, t


class Seq:
    def __init__(self, items, log=None):
        self.items = items
        self.log = log

    def __getitem__(self, i):
        if self.log is not None:
            self.log.append(i)
        return self.items[i]


class Countdown:
    """Ends with StopIteration from `__getitem__` rather than IndexError."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise StopIteration
        return self.n - i


def test_for_loop_over_an_object_made_in_the_frame(cnt):
    def fn(x, log):
        out = x
        for v in Seq([x, x + 1, x + 2], log):
            log.append("body")
            out = out + v
        return out, list(Seq([1, 2])), [*Seq("ab")], sum(Countdown(3))

    check(fn, lambda i: (t(3, seed=i), []), cnt)


def test_iterating_an_object_passed_in(cnt):
    def fn(s, x):
        a, b = s
        return [v * x for v in s], a + b, 2 in Seq([1, 2])

    check(fn, lambda i: (Seq([t(3, seed=i), t(3, seed=i + 1)]), t(3, seed=5)), cnt)


def test_a_changed_length_recompiles(cnt):
    def fn(s):
        return sum(v * 2 for v in s)

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(Seq([x, x])), x * 4)
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled(Seq([x, x, x])), x * 6)
    assert cnt.frame_count == 2


def test_an_iter_added_to_the_class_recompiles(cnt):
    class Late:
        def __getitem__(self, i):
            if i > 1:
                raise IndexError(i)
            return i

    def fn(x, obj):
        return x + sum(obj)

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    torch.testing.assert_close(compiled(x, Late()), x + 1)
    Late.__iter__ = lambda self: iter([5, 6])
    torch.testing.assert_close(compiled(x, Late()), x + 11)
    assert cnt.frame_count == 2


def test_other_errors_of_getitem_propagate(cnt):
    class Broken:
        def __getitem__(self, i):
            raise KeyError(i)

    def fn(x):
        try:
            for _ in Broken():
                pass
        except KeyError as e:
            return x + 1, e.args
        return x

    check(fn, lambda i: (t(3, seed=i),), cnt)
