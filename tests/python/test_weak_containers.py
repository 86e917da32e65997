"""Weak containers (`variables/weak_containers.py`): `WeakKeyDictionary`, `WeakValueDictionary`
and `WeakSet` read as globals, passed in or made in the frame, compared with eager and with
torch.compile over calls between which their contents change.

Each scenario is built three times from scratch (eager, stenograph, torch.compile): the results
and what the containers hold after each call must agree with eager, and the graph counts with
torch.compile's unless a comment says why not."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import helpers
import pytest
import torch

import stenograph
from stenograph.errors import Unsupported
from stenograph.testing import CompileCounter

from ._support import assert_same


class Key:
    """A plain object compared by identity, as weak containers' keys usually are."""

    def __init__(self, n: int) -> None:
        self.n = n


def _held(container: Any) -> list:
    """What a weak container holds, comparable across the three runs (keys by their `n`)."""

    def name(obj: Any) -> Any:
        if isinstance(obj, Key):
            return ("Key", obj.n)
        if isinstance(obj, torch.nn.Module):
            return ("Module", obj.tag)
        if isinstance(obj, torch.Tensor):
            return ("Tensor", obj.tolist())
        return obj

    if isinstance(container, weakref.WeakSet):
        return sorted((name(m) for m in container), key=repr)
    return [(name(k), name(v)) for k, v in container.items()]


def _run(
    make: Callable[[], tuple[Callable, dict]],
    *,
    calls: int = 3,
    between: Callable[[dict, int], None] = lambda state, i: None,
    graphs: int,
    torch_graphs: int | None = None,
    fullgraph: bool = True,
) -> None:
    """`make()` gives a function of one tensor and the state it reads (weak containers among
    it); `between(state, i)` changes the state before call `i`."""
    runs: dict[str, list] = {}
    counts: dict[str, int] = {}
    for mode in ("eager", "stenograph", "torch"):
        fn, state = make()
        counter = CompileCounter()
        if mode == "stenograph":
            compiled = stenograph.compile(fn, backend=counter, fullgraph=fullgraph)
        elif mode == "torch":
            compiled = torch.compile(fn, backend=counter)  # a peer count: graph breaks allowed
        else:
            compiled = fn
        seen = []

        def go(compiled: Callable = compiled, state: dict = state, seen: list = seen) -> None:
            for i in range(calls):
                between(state, i)
                gc.collect()
                out = compiled(torch.full((2,), float(i)))
                seen.append((out, _weak_contents(state)))

        if mode == "torch":
            helpers.torch_peer(go)
        else:
            go()
        runs[mode], counts[mode] = seen, counter.frame_count
    for i, (actual, expected) in enumerate(zip(runs["stenograph"], runs["eager"])):
        assert_same(actual[0], expected[0], f"call {i}: result")
        assert actual[1] == expected[1], f"call {i}: contents {actual[1]} != eager {expected[1]}"
    assert counts["stenograph"] == graphs, f"stenograph gave {counts['stenograph']} graphs, expected {graphs}"
    if torch.__version__.startswith("2.13"):
        want = graphs if torch_graphs is None else torch_graphs
        assert counts["torch"] == want, f"torch.compile gave {counts['torch']} graphs, expected {want}"


class Holder:
    """Where a function stores the containers it makes (an attribute write, which guards nothing)."""


def _weak_contents(state: dict) -> dict:
    """What each weak container of `state` (or stored on a `Holder` of it) holds."""
    found = {}
    for name, value in state.items():
        for inner, item in vars(value).items() if isinstance(value, Holder) else [("", value)]:
            if isinstance(item, (weakref.WeakKeyDictionary, weakref.WeakValueDictionary, weakref.WeakSet)):
                found[f"{name}.{inner}"] = _held(item)
    return found


# -- reads ------------------------------------------------------------------------------------------


def test_the_repro_reads_a_global_weak_key_dictionary():
    def make():
        k = Key(1)
        wk = weakref.WeakKeyDictionary({k: 3})
        return (lambda x: x + wk[k]), {"wk": wk, "k": k}

    _run(make, graphs=1)


def test_reads_of_a_weak_key_dictionary():
    def make():
        a, b, c = Key(1), Key(2), Key(3)
        wk = weakref.WeakKeyDictionary({a: 10, b: 20})

        def fn(x):
            total = x + wk[a] + wk.get(c, 7) + wk.get(b) + len(wk)
            total = total + (a in wk) * 100 + (c in wk) * 1000 + (3 in wk) * 10000
            for key in wk:
                total = total + key.n
            for value in wk.values():
                total = total * 2 + value
            for key, value in wk.items():
                total = total - key.n * value
            return total if wk else -total

        return fn, {"wk": wk, "keys": (a, b, c)}

    _run(make, graphs=1)


def test_value_replaced_between_calls_recompiles():
    def make():
        k = Key(1)
        wk = weakref.WeakKeyDictionary({k: 3})
        return (lambda x: x + wk[k]), {"wk": wk, "k": k}

    def between(state, i):
        state["wk"][state["k"]] = 3 + i // 2  # calls 0, 1 read 3; call 2 reads 4

    _run(make, between=between, graphs=2)


def test_entry_added_or_removed_between_calls_recompiles():
    def make():
        k, other = Key(1), Key(2)
        wk = weakref.WeakKeyDictionary({k: 3})
        return (lambda x: x + wk[k]), {"wk": wk, "k": k, "other": other}

    def between(state, i):
        if i == 1:
            state["wk"][state["other"]] = 5  # the keys guarded whole, as torch.compile does
        if i == 2:
            del state["wk"][state["other"]]

    # stenograph's guards and torch.compile's are both on the key list: back to the first entry
    _run(make, between=between, graphs=2)


def test_a_key_that_dies_recompiles_and_drops_the_entry():
    def make():
        k, doomed = Key(1), Key(2)
        wk = weakref.WeakKeyDictionary({k: 3, doomed: 4})  # the second key dies before call 1
        return (lambda x: x + len(wk) + wk[k]), {"wk": wk, "k": k, "doomed": doomed}

    def between(state, i):
        if i == 1:
            state.pop("doomed")

    _run(make, between=between, graphs=2)


def test_the_cache_entry_of_a_dead_key_is_dropped():
    k = Key(1)
    wk = weakref.WeakKeyDictionary({k: 3})
    compiled = stenograph.compile(lambda x: x + len(wk), backend="eager", fullgraph=True)
    compiled(torch.zeros(2))
    assert len(stenograph.inspect(compiled).entries) == 1
    del k
    gc.collect()
    assert len(stenograph.inspect(compiled).entries) == 0  # its guard held the key weakly
    torch.testing.assert_close(compiled(torch.zeros(2)), torch.zeros(2))


def test_weak_key_dictionary_passed_in_keyed_by_modules_and_tensors():
    def make():
        m1, m2 = torch.nn.Identity(), torch.nn.Identity()
        m1.tag, m2.tag = "m1", "m2"
        t1 = torch.ones(2)
        wk = weakref.WeakKeyDictionary({m1: 2.0, m2: 3.0})
        wt = weakref.WeakKeyDictionary({t1: 5})

        def fn(x):
            total = x * wk[m2] + wk.get(m1) + (x in wt)
            for key, value in wt.items():
                total = total + key * value
            return total

        return fn, {"wk": wk, "wt": wt, "objects": (m1, m2, t1)}

    _run(make, graphs=1)


def test_weak_value_dictionary_reads():
    def make():
        a, b = Key(1), Key(2)
        wv = weakref.WeakValueDictionary({"a": a, "b": b})

        def fn(x):
            total = x + wv["a"].n + wv.get("zz", wv["a"]).n + ("b" in wv) + len(wv)
            for name, obj in wv.items():
                total = total + obj.n * len(name)
            return total

        return fn, {"wv": wv, "objects": (a, b)}

    def between(state, i):
        if i == 2:
            state["objects"] = state["objects"][:1]  # "b" dies

    # torch.compile runs the lookups eagerly (a graph break on KeyedRef.__call__): no recompile
    _run(make, between=between, graphs=2, torch_graphs=1)


def test_weak_set_reads():
    def make():
        a, b, c = Key(1), Key(2), Key(3)
        ws = weakref.WeakSet([a, b])

        def fn(x):
            total = x + len(ws) + (a in ws) * 10 + (c in ws) * 100 + ("s" in ws) * 1000
            for member in ws:
                total = total + member.n
            return total

        return fn, {"ws": ws, "objects": (a, b, c)}

    def between(state, i):
        if i == 2:
            state["ws"].add(state["objects"][2])

    _run(make, between=between, graphs=2)


# -- writes, replayed after the graph -----------------------------------------------------------------


def test_writes_to_a_weak_key_dictionary_are_replayed():
    def make():
        a, b, c = Key(1), Key(2), Key(3)
        wk = weakref.WeakKeyDictionary({a: 1, b: 2})

        def fn(x):
            wk[c] = wk.get(c, 0) + 1
            wk[a] = x.sum()
            del wk[b]
            del wk[c]
            wk.setdefault(b, 40)
            first = wk.pop(b)
            return x + first + wk.pop(c, 0) + wk.setdefault(c, 9) + len(wk)

        return fn, {"wk": wk, "objects": (a, b, c)}

    def between(state, i):
        state["wk"][state["objects"][1]] = 2  # put back what the last call removed

    _run(make, between=between, graphs=2)


def test_a_write_only_trace_reads_nothing():
    """A cache filled in the frame: no guard on what it held, so a new key does not recompile
    (torch.compile traces weakref.py's `__setitem__`, guards the keys and recompiles)."""

    def make():
        keys = [Key(n) for n in range(3)]
        wk = weakref.WeakKeyDictionary()
        state = {"wk": wk, "keys": keys, "key": keys[0]}

        def fn(x):
            wk[state["key"]] = x * 2
            return x + 1

        return fn, state

    def between(state, i):
        state["key"] = state["keys"][i]

    _run(make, between=between, graphs=1, torch_graphs=3)


def test_writes_to_a_weak_value_dictionary_and_a_weak_set():
    def make():
        a, b = Key(1), Key(2)
        wv = weakref.WeakValueDictionary({"a": a})
        ws = weakref.WeakSet([a])

        def fn(x):
            wv["b"] = b
            wv.pop("a")
            ws.add(b)
            ws.discard(a)
            ws.remove(b)
            ws.add(a)
            return x + len(wv) + len(ws) + wv.setdefault("b", a).n

        return fn, {"wv": wv, "ws": ws, "objects": (a, b)}

    def between(state, i):
        state["wv"]["a"] = state["objects"][0]  # put back what the last call removed

    # after call 0 the dictionary holds "b" then "a": read anew, as it differs from call 0's
    _run(make, between=between, graphs=2)


def test_clear():
    def make():
        a = Key(1)
        wk = weakref.WeakKeyDictionary({a: 1})
        ws = weakref.WeakSet([a])

        def fn(x):
            wk.clear()
            ws.clear()
            return x + len(wk) + len(ws)

        return fn, {"wk": wk, "ws": ws, "a": a}

    def between(state, i):
        state["wk"][state["a"]] = i

    _run(make, between=between, graphs=1)


def test_containers_made_in_the_frame():
    def make():
        a, b = Key(1), Key(2)
        holder = Holder()
        state: dict = {"a": a, "b": b, "holder": holder}

        def fn(x):
            wk = weakref.WeakKeyDictionary()
            wk[a] = x + 1
            wv = weakref.WeakValueDictionary({"b": b})
            ws = weakref.WeakSet([a, b])
            ws.discard(a)
            holder.wk = wk
            holder.ws = ws
            return wk[a] + len(wv) + len(ws)

        return fn, state

    _run(make, calls=2, graphs=1)


# -- what breaks the graph ------------------------------------------------------------------------------


def _unsupported(fn: Callable, *args: Any) -> str:
    with pytest.raises(Unsupported) as info:
        stenograph.compile(fn, backend="eager", fullgraph=True)(*args)
    return str(info.value).splitlines()[0]  # the reason, without the user code quoted


def test_an_object_made_in_the_frame_cannot_be_held_weakly():
    wk = weakref.WeakKeyDictionary()
    assert "made in the frame, held weakly" in _unsupported(lambda x: wk.__setitem__(Key(1), x), torch.zeros(2))
    ws = weakref.WeakSet()
    assert "made in the frame, held weakly" in _unsupported(lambda x: ws.add(x * 2), torch.zeros(2))


def test_a_missing_weak_key_breaks_and_runs_eagerly():
    wk = weakref.WeakKeyDictionary()
    k = Key(1)
    assert "KeyError holds a weak reference" in _unsupported(lambda x: x + wk[k], torch.zeros(2))
    compiled = stenograph.compile(lambda x: x + wk[k], backend="eager")
    with pytest.raises(KeyError) as info:
        compiled(torch.zeros(2))
    assert type(info.value.args[0]) is weakref.ref  # eager weakref.py's own error


def test_a_weak_key_that_takes_no_weak_reference_breaks():
    wk = weakref.WeakKeyDictionary()
    assert "eagerly a TypeError" in _unsupported(lambda x: x + wk.get(3, 1), torch.zeros(2))


def test_a_subclass_breaks():
    class Mine(weakref.WeakKeyDictionary):
        pass

    k = Key(1)
    mine = Mine({k: 1})
    reason = _unsupported(lambda x: x + mine[k], torch.zeros(2))
    assert "a subclass of weakref.WeakKeyDictionary (its methods may differ)" in reason


def test_iterating_a_weak_set_the_frame_added_to_breaks():
    a, b = Key(1), Key(2)
    ws = weakref.WeakSet([a])

    def fn(x):
        ws.add(b)
        return x + sum(m.n for m in ws)

    assert "hash-table history" in _unsupported(fn, torch.zeros(2))


def test_identical_calls_do_not_recompile(cnt):
    k = Key(1)
    wk = weakref.WeakKeyDictionary({k: 3})
    compiled = stenograph.compile(lambda x: x + wk[k] + len(wk), backend=cnt, fullgraph=True)
    for _ in range(3):
        compiled(torch.zeros(2))
    assert cnt.frame_count == 1


def test_a_weak_set_lookup_of_an_argument_is_guarded(cnt):
    a, b = Key(1), Key(2)
    ws = weakref.WeakSet([a])
    compiled = stenograph.compile(lambda x, k: x + (k in ws), backend=cnt, fullgraph=True)
    for k in (a, b, a):
        torch.testing.assert_close(compiled(torch.zeros(2), k), torch.zeros(2) + (k in ws))
    assert cnt.frame_count == 2


def test_a_module_attribute_cache_keyed_by_a_global(cnt):
    key = Key(4)

    class Cached(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cache = weakref.WeakKeyDictionary()

        def forward(self, x):
            if key in self.cache:
                return x + self.cache[key]
            self.cache[key] = x.sum()
            return x

    eager, compiled_module = Cached(), Cached()
    compiled = stenograph.compile(compiled_module, backend=cnt, fullgraph=True)
    for i in range(3):
        x = torch.full((2,), float(i + 1))
        torch.testing.assert_close(compiled(x), eager(x))
        torch.testing.assert_close(compiled_module.cache[key], eager.cache[key])
    assert cnt.frame_count == 2  # empty, then holding the key


def test_a_tensor_found_in_a_weak_key_dictionary_breaks():
    t = torch.ones(3)
    wt = weakref.WeakKeyDictionary({t: 1})
    assert "compares it with itself" in _unsupported(lambda x: x + wt[t], torch.zeros(3))
    with pytest.raises(RuntimeError):  # eager's own error, once the call runs eagerly
        stenograph.compile(lambda x: x + wt[t], backend="eager")(torch.zeros(3))


def test_weakref_ref_called_and_finalize():
    a = Key(3)
    compiled = stenograph.compile(lambda x, k: x + weakref.ref(k)().n, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(torch.zeros(2), a), torch.full((2,), 3.0))
    assert "registers a callback" in _unsupported(lambda x, k: weakref.finalize(k, print) and x, torch.zeros(2), a)
