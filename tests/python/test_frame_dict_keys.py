"""Dicts read from the frame (`variables/frame_dicts.py`): a key looked up guards that key's
presence or absence and the value read, so an unused key may come and go without a recompile;
the first use of the dict whole (iteration, `len`, views, `==`, a change) guards its keys in
order, as torch.compile guards them."""

from __future__ import annotations

import collections
from collections import OrderedDict

import torch

import stenograph

from ._support import check, t


def _keys_of(i):
    """Two key sets sharing "a" and "b": the other keys differ from call to call."""
    return ["a", "b", "c"] if i == 0 else ["d", "b", "a"]


def test_unused_key_added_or_popped_does_not_recompile(cnt):
    def fn(d, x):
        return x * d["a"] + d.get("b", 0) + ("q" in d) + d.get("zz", 5)

    check(fn, lambda i: ({k: 2 + len(k) for k in _keys_of(i)}, t(3, seed=i)), cnt, graphs=1)


def test_global_dict_read_by_key_keeps_one_graph():
    table = {"a": 2, "b": 3, "c": 5}

    def fn(x):
        return x * table["a"]

    cnt = stenograph.testing.CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    compiled(x)
    table.pop("c")
    table["d"] = 10
    torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 1
    table["a"] = 7  # the value read changed
    torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 2
    del table["a"]  # the key read is gone: eager's KeyError
    try:
        compiled(x)
    except KeyError as e:
        assert e.args == ("a",)
    else:
        raise AssertionError("no KeyError")


def test_class_keys_looked_up_alone():
    table = {list: 2, dict: 3, OrderedDict: 5, collections.namedtuple: 7}

    def fn(x):
        return x * table[list] + (tuple in table)

    cnt = stenograph.testing.CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    x = t(3)
    compiled(x)
    table.pop(dict)
    table[collections.defaultdict] = 10
    torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 1
    table[tuple] = 1  # a key found absent is now there
    torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 2


def test_absent_key_that_appears_recompiles(cnt):
    def fn(d, x):
        return x + d.get("b", 10)

    check(fn, lambda i: ({"a": 1} if i == 0 else {"a": 1, "b": 2}, t(3)), cnt, graphs=2)


def test_whole_dict_uses_guard_the_keys(cnt):
    def fn(d, x):
        return x * len(d) + sum(v for v in d.values()) + d["a"]

    check(fn, lambda i: ({k: 1 for k in _keys_of(i)}, t(3)), cnt, graphs=2)


def test_same_keys_in_another_order_recompile_once_iterated(cnt):
    def fn(d, x):
        return [x * v for v in d.values()]

    check(fn, lambda i: ({"a": 1, "b": 2} if i == 0 else {"b": 2, "a": 1}, t(3)), cnt, graphs=2)


def test_dict_looked_up_then_iterated(cnt):
    """Values read key by key keep their trackers when the dict is later used whole."""

    def fn(d, x):
        y = x * d["a"]
        for k, v in d.items():
            y = y + v * len(k)
        return y, list(d)

    check(fn, lambda i: ({"a": t(3, seed=i), "bb": t(3, seed=i + 5)}, t(3)), cnt, graphs=1)


def test_dict_changed_is_replayed_and_guards_its_keys(cnt):
    """(torch.compile also compiles again for the unused value of "z" that changed.)"""

    def fn(d, x):
        d["c"] = d["a"] + d.pop("b")
        d.setdefault("e", 4)
        return x * d["c"]

    check(
        fn,
        lambda i: ({"a": 1, "b": 2, "z": i} if i < 2 else {"a": 1, "b": 2}, t(3)),
        cnt,
        graphs=2,
        calls=3,
        torch_graphs=3,
    )


def test_dict_returned_unchanged_and_changed_after_a_read(cnt):
    def fn(d, x):
        y = x + d["a"]
        if "b" not in d:
            d["b"] = y
        return d, y

    check(fn, lambda i: ({"a": t(3, seed=i)}, t(3)), cnt, graphs=1)


def test_ordered_dict_looked_up_by_key(cnt):
    def fn(d, x):
        return x * d["a"] + d.get("q", 1)

    check(fn, lambda i: (OrderedDict((k, 2) for k in _keys_of(i)), t(3)), cnt, graphs=1)


def test_dict_holding_itself_breaks_the_graph():
    table = {"x": 3}
    table["self"] = table

    def fn(x):
        return x * table["self"]["x"]

    cnt = stenograph.testing.CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt)
    torch.testing.assert_close(compiled(t(3)), fn(t(3)))
