"""stenograph.testing: counting backends and `same`."""

from __future__ import annotations

import collections

import pytest
import torch

from stenograph.errors import InvalidBackend
from stenograph.testing import (
    CompileCounter,
    CompileCounterWithBackend,
    EagerAndRecordGraphs,
    count_ops,
    same,
)


def test_compile_counter_counts_graphs_and_ops(mlp) -> None:
    _, _, gm = mlp  # fc1 (call_module), relu (call_function), fc2 (call_module), sum (call_method)
    small = torch.fx.symbolic_trace(lambda x: x + 1)
    counter = CompileCounter()
    fn = counter(gm, [torch.randn(2, 8)])
    assert fn == gm.forward
    counter(small, [torch.randn(2)])
    assert counter.frame_count == 2
    assert counter.op_count == 4 + 1 == count_ops(gm) + count_ops(small)
    assert counter.graphs == [gm, small]
    assert "frame_count=2" in repr(counter)
    counter.clear()
    assert (counter.frame_count, counter.op_count, counter.graphs) == (0, 0, [])


def test_compile_counter_with_backend_delegates(mlp) -> None:
    ref, _, gm = mlp
    counter = CompileCounterWithBackend("aot_eager")
    x = torch.randn(3, 8)
    compiled = counter(gm, [x])
    assert compiled != gm.forward
    assert same(compiled(x), ref(x))
    assert (counter.frame_count, counter.op_count, counter.graphs) == (1, 4, [gm])


def test_compile_counter_with_backend_rejects_unknown_names() -> None:
    with pytest.raises(InvalidBackend, match="unknown backend 'nope'"):
        CompileCounterWithBackend("nope")


def test_eager_and_record_graphs(mlp) -> None:
    _, _, gm = mlp
    recorder = EagerAndRecordGraphs()
    assert recorder(gm, []) == gm.forward
    assert recorder.graphs == [gm]


Point = collections.namedtuple("Point", "x y")


def test_same_on_nested_values() -> None:
    t = torch.randn(3, 4)
    assert same({"a": [t, (1, "s")], "b": None}, {"b": None, "a": [t.clone(), (1, "s")]})
    assert same(t, t + 1e-7)
    assert not same(t, t + 1e-3)
    assert same(t, t + 1e-3, tol=1e-2)
    assert same(1.0, 1.0 + 1e-9) and not same(1.0, 1.1)
    assert same(float("nan"), float("nan"))
    assert same(torch.tensor([float("nan")]), torch.tensor([float("nan")]))
    assert not same(torch.tensor([float("nan")]), torch.tensor([float("nan")]), equal_nan=False)


def test_same_takes_a_number_for_an_expected_tensor_as_torch_dynamos_does() -> None:
    # every element equals the number, dtype included
    assert same(torch.tensor([6]), 6)
    assert same(torch.ones(2), 1.0)
    assert not same(torch.ones(2), 2.0)
    assert not same(torch.tensor([1, 6]), 6)
    assert not same(torch.tensor([6]), 6.0)
    assert same(torch.tensor([6]), 6.0, exact_dtype=False)


def test_same_is_strict_about_structure_and_metadata() -> None:
    t = torch.ones(2)
    assert not same([t], (t,))
    assert not same([t], [t, t])
    assert not same({"a": t}, {"b": t})
    assert not same(t, torch.ones(1, 2))
    assert not same(t, t.double())
    assert same(t, t.double(), exact_dtype=False)
    assert not same(1.0, t)
    assert not same(Point(1, 2), (1, 2))
    assert same(Point(1, 2), Point(1, 2))
    assert same(torch.tensor([1, 2]), torch.tensor([1, 2]))
    assert not same(torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert not same(1, True)
    assert same(torch.Size([2, 3]), (2, 3))


def test_same_ignores_autograd_state() -> None:
    a = torch.randn(3, requires_grad=True)
    assert same(a * 1, a.detach())
