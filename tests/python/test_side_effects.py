"""Side effects: mutations of lists, dicts, user objects and globals happen exactly once per
call, in program order, after the graph; module attribute writes are a graph break."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from torch import nn

import stenograph

from ._support import assert_same, check, t, torch_graph_count

_counter = 0
_registry: dict = {}


class _State:
    def __init__(self):
        self.calls = 0
        self.history = []
        self.last = None


def _mutate_inputs(x, log, table, state):
    log.append(x * 2)
    log.extend([1, 2])
    log[0] = log[0] + 1
    log.pop(1)
    table["seen"] = table.get("seen", 0) + 1
    table.update(last="x")
    del table["drop"]
    state.calls += 1
    state.history.append(state.calls)
    state.last = x.sum()
    return x + 1


def test_mutations_of_input_lists_dicts_and_objects(cnt):
    check(_mutate_inputs, lambda i: (t(3, seed=i), [], {"seen": 3, "drop": 0}, _State()), cnt)


def _globals(x):
    global _counter
    _counter += 1
    _registry["n"] = _registry.get("n", 0) + 1
    return x * _counter


def test_global_writes_happen_once_per_call(cnt):
    global _counter
    compiled = stenograph.compile(_globals, backend=cnt)
    x = t(3)
    _counter = 0
    _registry.clear()
    expected = [_globals(x), _globals(x)]
    _counter = 0
    _registry.clear()
    actual = [compiled(x), compiled(x)]
    assert_same(actual, expected)
    assert _counter == 2 and _registry["n"] == 2
    # the global's value is guarded: each new value compiles again, as with torch.compile
    assert cnt.frame_count == 2
    assert torch_graph_count(_globals, lambda i: (x,), 2) == 2


class _Node:
    def __init__(self, value, parent=None):
        self.value = value
        self.parent = parent


def _build_objects(x, holder):
    root = _Node(x)
    child = _Node(x * 2, parent=root)
    holder.append(child)
    root.value = root.value + 1
    return child, root


def test_objects_created_in_the_frame_return_as_real_objects_with_aliasing(cnt):
    results = check(_build_objects, lambda i: (t(3, seed=i), []), cnt)
    child, root = results[0]
    assert child.parent is root and isinstance(root, _Node)


def _write_then_read(state, x):
    state.last = x
    state.calls = state.calls + 1
    y = state.last * state.calls
    state.history = [y]
    return y


def test_attribute_writes_are_seen_by_later_reads_in_the_trace(cnt):
    check(_write_then_read, lambda i: (_State(), t(3, seed=i)), cnt)


class _Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.steps = 0

    def forward(self, x):
        self.steps = self.steps + 1
        return self.fc(x)


def test_module_attribute_write_is_a_graph_break_and_happens_once(cnt):
    # module attribute writes graph-break by design (BEHAVIOUR 14): the graph after the break is
    # reused; torch.compile guards on the counter and compiles once per call
    model = _Counting()
    check(lambda x: model(x), lambda i: (t(2, 3, seed=i),), cnt, graphs=1, calls=2, torch_graphs=2)
    assert model.steps == 6


def test_replay_side_effects_off_drops_outside_mutations(cnt):
    """config.replay_side_effects=False: the graph's result is unchanged, the mutation of the
    caller's list is not replayed (the knob's documented meaning)."""

    def fn(x, items):
        items.append(1)
        return x + len(items)

    with stenograph.config.patch(replay_side_effects=False):
        compiled = stenograph.compile(fn, backend=cnt)
        items = []
        out = compiled(torch.ones(2), items)
    torch.testing.assert_close(out, torch.ones(2) + 1)
    assert items == []
    stenograph.reset()
    items = []
    stenograph.compile(fn, backend=cnt)(torch.ones(2), items)
    assert items == [1]


class _Settings(nn.Module):
    def __init__(self):
        super().__init__()
        self.const = 4
        self.tensor = None

    def forward(self, x):
        self.const = 5
        self.tensor = x.sin()
        return x.cos() + self.tensor


_NOT_REPLAYED = "While compiling, we found certain side effects happened in the model.forward. Here are the list"


@pytest.mark.parametrize("policy", ["info", "silent", "warn", "error"])
def test_side_effect_replay_policy_tells_what_was_not_replayed(policy):
    """With the replay off, `side_effect_replay_policy` "warn" warns and "error" raises
    RuntimeError (whatever suppress_errors says), naming the changed objects as torch.compile
    does; "info" and "silent" drop the replay quietly. With the replay on, nothing is said."""

    def fn(x, items):
        items.append(x + 1)
        return x * 2

    x = torch.tensor([5.0])
    with stenograph.config.patch(replay_side_effects=False, side_effect_replay_policy=policy, suppress_errors=True):
        items = []
        if policy == "error":
            with pytest.raises(
                RuntimeError,
                match=re.escape(_NOT_REPLAYED + " of potential sources you can double check: [\"L['items']\"]"),
            ):
                stenograph.compile(fn, backend="eager")(x, items)
            with pytest.raises(RuntimeError, match=re.escape("check: [\"L['self']\"]")):
                stenograph.compile(_Settings(), backend="eager", fullgraph=True)(x)
        elif policy == "warn":
            with pytest.warns(UserWarning, match=re.escape(_NOT_REPLAYED)):
                assert_same(stenograph.compile(fn, backend="eager")(x, items), x * 2)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert_same(stenograph.compile(fn, backend="eager")(x, items), x * 2)
            model = _Settings()
            stenograph.compile(model, backend="eager", fullgraph=True)(x)
            assert (model.const, model.tensor) == (4, None)
        assert items == []
    stenograph.reset()
    with stenograph.config.patch(side_effect_replay_policy="error"):
        items = []
        assert_same(stenograph.compile(fn, backend="eager")(x, items), x * 2)
        assert_same(items[0], x + 1)


class _Holder:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is _Holder and other.v == self.v


def _reads_before_writes(x, d, lst, obj):
    old = d["k"]
    d["k"] = 10
    popped = lst.pop()
    first = lst[0]
    lst.insert(0, 7)
    lst.reverse()
    before = obj.v
    obj.v = 5
    return x + old, old, popped, first, lst[0], before, d.pop("j")


def test_values_read_from_inputs_before_they_change(cnt, capsys):
    """Outputs read from inputs are taken before the mutations are replayed on those inputs."""

    def args(i):
        return t(2, seed=i), {"k": 4, "j": 2}, [3, 1, 6], _Holder(8)

    check(_reads_before_writes, args, cnt)


def _reads_before_writes_at_a_break(x, d):
    old = d["k"]
    d["k"] = 10
    print("old value:", old)
    return x + old, old


def test_values_read_before_writes_at_a_break(cnt, capsys):
    check(_reads_before_writes_at_a_break, lambda i: (t(2, seed=i), {"k": 3}), cnt, capsys)


class _Box:
    def __init__(self, items):
        self.items = items


def _appends_through_two_names(x, first, second, box):
    first.append(1)
    second.append(2)
    box.items.append(3)
    return x + len(first)


def test_one_list_reached_through_several_names(cnt):
    """The same list passed twice (and held by an object) is one list to the trace; a call
    with distinct lists must not reuse that entry, nor the other way round."""
    compiled = stenograph.compile(_appends_through_two_names, backend=cnt)
    for aliased in (True, False, True, False):
        expected_lists, actual_lists = [], []
        for out in (expected_lists, actual_lists):
            first = []
            second = first if aliased else []
            out.append((first, second, _Box(first)))
        expected = _appends_through_two_names(torch.ones(1), *expected_lists[0])
        actual = compiled(torch.ones(1), *actual_lists[0])
        assert_same(actual, expected)
        assert actual_lists[0][0] == expected_lists[0][0] and actual_lists[0][1] == expected_lists[0][1]
    assert cnt.frame_count == 2
