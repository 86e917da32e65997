"""`collections.deque`, `defaultdict` and `Counter` made in the frame or passed in: one graph, the
real objects changed as eager changes them, guards on their type, length or keys, `maxlen` and
`default_factory`; plus `dict.setdefault` and `dict |` / `|=`."""

from __future__ import annotations

import collections

import torch

import stenograph

from ._support import check, t


def test_deque_made_in_the_frame_with_maxlen(cnt):
    def fn(x):
        d = collections.deque(maxlen=3)
        for i in range(5):
            d.append(x + i)
        d.appendleft(x * 10)
        d.extendleft([x - 1, x - 2])
        d.rotate(1)
        first = d.popleft()
        d.extend([x * 3])
        return first + d[0] + d[-1], len(d), d.maxlen, d

    check(fn, lambda i: (t(3, seed=i),), cnt, torch_graphs=2)


def test_deque_passed_in_is_changed_as_eager_changes_it(cnt):
    def fn(d, x):
        d.append(d[0] + x)
        y = d.popleft()
        d.rotate(-1)
        return y * 2, len(d)

    check(fn, lambda i: (collections.deque([t(3, seed=i), t(3, seed=i + 1)]), t(3, seed=9)), cnt, torch_graphs=2)


def test_deque_guards_length_and_maxlen(cnt):
    def fn(d, x):
        d.append(x)
        return sum(d), len(d)

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    for _ in range(2):
        d = collections.deque([x, x], maxlen=2)
        out, n = compiled(d, x)
        torch.testing.assert_close(out, x * 2)
        assert n == 2 and len(d) == 2
    assert cnt.frame_count == 1
    d = collections.deque([x, x], maxlen=3)
    assert compiled(d, x)[1] == 3 and len(d) == 3
    assert cnt.frame_count == 2
    d = collections.deque([x], maxlen=3)
    assert compiled(d, x)[1] == 2
    assert cnt.frame_count == 3


def test_deque_errors_are_the_programs(cnt):
    def fn(x):
        d = collections.deque()
        try:
            d.popleft()
        except IndexError as e:
            return x + 1, str(e)
        return x

    compiled = stenograph.compile(fn, backend=cnt)  # torch.compile fails on this one
    x = t(3)
    out, text = compiled(x)
    torch.testing.assert_close(out, x + 1)
    assert text == fn(x)[1] == "pop from an empty deque"
    assert cnt.frame_count == 1


def test_defaultdict_made_in_the_frame(cnt):
    def fn(x):
        groups = collections.defaultdict(list)
        counts = collections.defaultdict(int)
        for i, name in enumerate(["a", "b", "a"]):
            groups[name].append(x + i)
            counts[name] += 1
        missing = "z" in groups, groups.get("z")
        return groups["a"][1] + groups["b"][0], dict(counts), missing, groups

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_defaultdict_passed_in_is_changed_and_its_factory_guarded(cnt):
    def fn(x, d):
        d["n"] += 1
        d["m"]
        return x + d["n"]

    check(fn, lambda i: (t(3, seed=i), collections.defaultdict(int, {"n": 4})), cnt)
    cnt.clear()
    compiled = stenograph.compile(fn, backend=cnt)
    d = collections.defaultdict(int)
    compiled(t(3), d)
    assert d == {"n": 1, "m": 0} and cnt.frame_count == 1
    d = collections.defaultdict(float)
    compiled(t(3), d)
    assert d == {"n": 1.0, "m": 0.0} and type(d["m"]) is float
    assert cnt.frame_count == 2  # a new default_factory recompiles


def test_defaultdict_without_factory_raises_key_error(cnt):
    def fn(x):
        d = collections.defaultdict(None, {"a": 1})
        try:
            return d["b"]
        except KeyError:
            return x + d["a"]

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_counter_made_in_the_frame(cnt):
    def fn(x):
        c = collections.Counter("abcaba")
        c["z"] += 2
        c.update({"b": 5})
        c.update(["q"])
        c.subtract(a=1)
        return x * c["a"] + c["missing"], c.most_common(2), c.most_common(), c.total(), sorted(c.elements()), c

    # torch.compile runs this frame eagerly (heapq's C functions in most_common)
    check(fn, lambda i: (t(3, seed=i),), cnt, peer=False)


def test_counter_passed_in(cnt):
    def fn(x, c):
        c.update(["a", "a"])
        return x * c["a"] + c["b"]

    check(fn, lambda i: (t(3, seed=i), collections.Counter({"a": 1})), cnt)


def test_dict_setdefault(cnt):
    def fn(x, d):
        d.setdefault("a", []).append(x)
        d.setdefault("a", []).append(x + 1)
        k = d.setdefault("k", 3)
        return d["a"][0] + d["a"][1] + k

    check(fn, lambda i: (t(3, seed=i), {"k": 5}), cnt)


def test_dict_union_and_in_place_union(cnt):
    def fn(x, d):
        e = d | {"b": 2}
        d |= {"c": 3}
        o = collections.OrderedDict(a=1) | {"z": x}
        return x + e["b"] + d["c"] + o["a"], e, type(o)

    check(fn, lambda i: (t(3, seed=i), {"a": i}), cnt, torch_graphs=2)
