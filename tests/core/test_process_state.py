"""Process-wide state lives in one registry (`stenograph.process_state`) that `reset()` clears."""

from __future__ import annotations

import gc
import weakref

import torch

import stenograph
from stenograph import entry, process_state


class Inner(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print("", end="")  # a graph break inside: the caller breaks at this call (a module caller)
        return x.cos() * 2


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x.sin()) + 1


def _compile_and_run(cnt) -> tuple[object, torch.Tensor]:
    def scaled(x: torch.Tensor, k: int) -> torch.Tensor:
        try:
            return {"a": x}["a"] * k
        except KeyError:
            return x

    fn = stenograph.compile(scaled, backend=cnt)
    fn(torch.ones(3), 2)
    model = stenograph.compile(Outer(), backend=cnt)
    out = model(torch.ones(3))
    return (fn, model), out


def test_registry_names_the_process_state() -> None:
    names = set(process_state.names())
    assert {"entry.caches", "entry.module_callers", "graph.resume", "events.numbering"} <= names
    memos = set(process_state.names(memos=True)) - names
    assert {
        "bytecode.decoded",  # the one decoder: the interpreter and the break writer share it
        "interpreter.opcode_tables",
    } <= memos


def test_reset_empties_every_registration(cnt) -> None:
    compiled, _ = _compile_and_run(cnt)
    held = {name: size for name, size in process_state.sizes(memos=True).items() if size}
    for name in ("entry.caches", "entry.module_callers", "graph.resume", "bytecode.decoded"):
        assert held.get(name), f"{name} holds nothing after compiling: {held}"
    stenograph.reset()
    assert process_state.sizes() == dict.fromkeys(process_state.names(), 0)
    assert process_state.sizes(memos=True)["bytecode.decoded"]  # memos survive a reset
    process_state.clear_all(memos=True)
    assert process_state.sizes(memos=True) == dict.fromkeys(process_state.names(memos=True), 0)
    assert compiled  # the compiled function and module are alive: reset empties their caches anyway


def test_reset_leaves_no_entry_or_module_caller_alive(cnt) -> None:
    (fn, model), _ = _compile_and_run(cnt)
    entries = [weakref.ref(e.fn) for cache in entry.all_caches() for e in cache.entries]
    callers = [weakref.ref(c) for c in entry._module_callers.values()]
    assert entries and callers
    stenograph.reset()
    gc.collect()
    assert [r for r in entries if r() is not None] == []
    assert [r for r in callers if r() is not None] == []
    assert fn.__stenograph_cache__.entries == []


def test_a_compiled_function_compiles_again_after_reset(cnt) -> None:
    (fn, model), out = _compile_and_run(cnt)
    frames = cnt.frame_count
    stenograph.reset()
    torch.testing.assert_close(model(torch.ones(3)), out)
    assert cnt.frame_count > frames


def test_every_reset_forgets_what_a_live_wrapper_compiled(cnt) -> None:
    """A wrapper kept across resets compiles into the cache it holds; each later reset forgets
    that one too (a constant assumed by the first trace after a reset went stale at the second)."""
    state = {"v": 1.0}

    @stenograph.assume_constant_result
    def current() -> float:
        return state["v"]

    stenograph.reset()
    compiled = stenograph.compile(lambda x: x + current(), backend=cnt)
    for v in [1.0, 2.0, 3.0, 4.0]:
        state["v"] = v
        stenograph.reset()
        assert compiled(torch.zeros(2)).tolist() == [v, v]
    assert cnt.frame_count == 4


def test_allow_in_graph_marks_are_settings_and_survive_reset(cnt) -> None:
    def opaque(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    stenograph.allow_in_graph(opaque)
    stenograph.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        return opaque(x) * 2

    torch.testing.assert_close(stenograph.compile(f, backend=cnt)(torch.ones(2)), torch.full((2,), 4.0))
    assert any(node.target is opaque for gm in cnt.graphs for node in gm.graph.nodes)


def test_clearing_the_memos_drops_the_warm_stores() -> None:
    """A folder's store (made by the first compile with a cache folder, or by save_artifacts)
    is a memo: kept by reset(), dropped with the memos, and made again when next used."""
    from stenograph.warm.store import store_for

    store_for(None)
    assert process_state.sizes(memos=True)["warm.stores"] >= 1
    stenograph.reset()
    assert process_state.sizes(memos=True)["warm.stores"] >= 1
    process_state.clear_all(memos=True)
    assert process_state.sizes(memos=True)["warm.stores"] == 0
    assert store_for(None) is store_for(None)
