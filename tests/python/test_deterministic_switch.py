"""`torch.use_deterministic_algorithms(...)` inside a compiled function: traced into the graph as
grad-mode switches are (`torch_flags`). The trace and the graph switch where the code does,
reads after it answer the new setting, and the setting (with inductor's `deterministic`, which
the function also writes) is eager's when the call returns or reaches a graph break."""

from __future__ import annotations

import pytest
import torch
import torch._inductor.config as inductor_config

import stenograph

from ._support import check, t


@pytest.fixture(autouse=True)
def _deterministic_off():
    """Each test starts with the setting off, and leaves it as it found it."""
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    config_before = inductor_config.deterministic
    torch.use_deterministic_algorithms(False)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    inductor_config.deterministic = config_before


def _setting() -> tuple[bool, bool, bool]:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        inductor_config.deterministic,
    )


def _deterministic_then_back(x):
    y = x + 1
    torch.use_deterministic_algorithms(True)
    z = y * 2 + torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    return z


def test_switch_and_switch_back_is_one_graph(cnt):
    check(_deterministic_then_back, lambda i: (t(3, seed=i),), cnt, graphs=1, calls=2)
    assert _setting() == (False, False, False)


def _switched(x):
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    after = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    return x + 1, before, after


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_setting_after_the_call_is_eagers_and_a_second_call_reuses_the_graph(backend):
    """The read before the switch answers the entry state (guarded: another entry state
    recompiles), the one after it the new setting; the call leaves the setting switched."""
    expected = _switched(torch.ones(2))
    switched = _setting()
    assert switched == (True, True, True)
    counter = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_switched, backend=counter, fullgraph=True)
    for _ in range(2):
        torch.use_deterministic_algorithms(False)
        inductor_config.deterministic = False
        assert compiled(torch.ones(2))[1:] == expected[1:]
        assert _setting() == switched
    assert counter.frame_count == 1
    assert compiled(torch.ones(2))[1] is True  # entered switched on: the guard recompiles
    assert counter.frame_count == 2


def _empty_after_the_switch(x):
    torch.use_deterministic_algorithms(True)
    return x + 1, torch.empty(4).isnan().all()


def test_operations_after_the_switch_in_the_graph_run_under_it(cnt):
    """Deterministic algorithms fill new tensors with NaN: the graph's `torch.empty` after the
    switch does too, as eager's (the plain graph runs the switch where the code makes it)."""
    compiled = stenograph.compile(_empty_after_the_switch, backend=cnt, fullgraph=True)
    _, filled = compiled(torch.ones(2))
    assert filled.item() is True and _setting()[0] is True
    assert cnt.frame_count == 1


def _switched_across_a_break(x):
    torch.use_deterministic_algorithms(True, warn_only=True)
    y = x + 1
    stenograph.graph_break()
    seen = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    return y * 2, seen


def test_code_after_a_break_runs_under_the_switched_setting(cnt):
    """The graph before the break ends in the state it started in; the setting the code made is
    set before the eager part and the resume function, which read it."""
    # (torch.compile does not know stenograph.graph_break: no peer)
    check(_switched_across_a_break, lambda i: (t(3, seed=i),), cnt, graphs=2, calls=2, peer=False)
    assert _setting() == (False, False, False)


def test_a_value_other_than_a_bool_runs_eagerly_and_raises(cnt):
    fn = lambda x: (torch.use_deterministic_algorithms(1), x + 1)  # noqa: E731
    with pytest.raises(stenograph.Unsupported, match="not a constant bool"):
        stenograph.compile(fn, backend=cnt, fullgraph=True)(torch.ones(1))
    with pytest.raises(TypeError, match="must be bool"):
        stenograph.compile(fn, backend=cnt)(torch.ones(1))


def _configured(x):
    inductor_config.max_autotune = True
    return x + 1, inductor_config.max_autotune


def test_a_write_to_torchs_config_module_is_replayed_after_the_graph(cnt):
    """`torch.use_deterministic_algorithms` writes `torch._inductor.config.deterministic`; such
    a setting, written in the trace, reads back as written and is set by the config module's own
    `__setattr__` after the graph, on every call (it was a graph break)."""
    before = inductor_config.max_autotune
    compiled = stenograph.compile(_configured, backend=cnt, fullgraph=True)
    try:
        for _ in range(2):
            inductor_config.max_autotune = False
            assert compiled(torch.ones(1))[1] is True
            assert inductor_config.max_autotune is True
    finally:
        inductor_config.max_autotune = before
    assert cnt.frame_count == 1
