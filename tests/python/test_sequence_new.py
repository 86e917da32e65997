"""`list.__new__` and `tuple.__new__` called directly (TorchDynamo's test_list): a new empty list
(list's `__new__` ignores its arguments), a tuple of the items, of the class given, with
CPython's errors."""

from __future__ import annotations

import collections

import pytest

import stenograph

from ._support import check, t

_Point = collections.namedtuple("_Point", "a b")


class _PlainList(list):
    pass


class _GrandchildList(_PlainList):
    pass


def test_list_new_of_list_ignores_its_arguments(cnt):
    def fn(x):
        made = list.__new__(list)
        made.append(x)
        return made, list.__new__(list, [1, 2], extra="ignored"), x + 1

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_tuple_new_of_tuple_takes_the_items(cnt):
    def fn(x):
        return tuple.__new__(tuple, [x, 1]), tuple.__new__(tuple, (v * 2 for v in [x])), x + 1

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_tuple_new_of_tuple_without_items(cnt):
    def fn(x):
        return tuple.__new__(tuple), x + 1

    check(fn, lambda i: (t(2, seed=i),), cnt, peer=False)  # torch.compile: IndexError inside dynamo


def test_list_new_of_a_subclass_through_its_class(cnt):
    def fn(x):
        made = _GrandchildList.__new__(_GrandchildList, [1, 2], extra="ignored")
        made.append(x)
        return made, type(made) is _GrandchildList, x + 1

    results = check(fn, lambda i: (t(2, seed=i),), cnt)
    assert type(results[0][0]) is _GrandchildList


def test_cpythons_errors_of_tuple_new(cnt):
    def fn(x):
        errors = []
        for call in (
            lambda: tuple.__new__(tuple, [1], extra=1),
            lambda: tuple.__new__(tuple, [1], [2]),
            lambda: tuple.__new__(list, [1]),
        ):
            try:
                call()
            except TypeError as e:
                errors.append(str(e))
        return errors, x + 1

    out = check(fn, lambda i: (t(2, seed=i),), cnt, torch_graphs=0)  # torch.compile runs it eagerly
    assert len(out[0][0]) == 3


def test_tuple_new_of_a_named_tuple_class_is_refused(cnt):
    def fn(x):
        return tuple.__new__(_Point, [x, 1]), x + 1

    with pytest.raises(stenograph.Unsupported, match="tuple.__new__ of class _Point"):
        stenograph.compile(fn, backend=cnt, fullgraph=True)(t(2))
