"""`torch.set_default_dtype(...)` inside a compiled function, as a statement or in a
`@contextmanager` that sets it and restores it in `finally`: traced into the graph as the other
process flags are (`torch_flags`). Factories and Python-number promotion after it make the new
default dtype in the graph, reads answer it, the default dtype after the call (also after an
exception) is eager's, and an operation whose dtype the default decides states that dtype in the
graph (`pinned_dtypes`), so that a backend retracing the graph keeps it."""

from __future__ import annotations

import contextlib

import pytest
import torch

import stenograph

from ._support import assert_same, check, t


@contextlib.contextmanager
def default_dtype(dtype):
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        yield
    finally:
        torch.set_default_dtype(old)


def _in_region(x):
    with default_dtype(torch.float64):
        ones = torch.ones(3)
        literal = torch.tensor([3.0, 3.0 + 5.0j])
        drawn = torch.randn(2)
        promoted = torch.arange(3) * 0.5
        inside = torch.get_default_dtype()
        y = x * ones
    return y, literal, drawn, promoted, inside, torch.ones(1)


def test_factories_and_promotion_in_a_contextmanager_region_are_one_graph(cnt):
    out = check(_in_region, lambda i: (t(3, seed=i, grad=True),), cnt, graphs=1, calls=2, grads=True)
    y, literal, drawn, promoted, inside, after = out[0]
    assert (y.dtype, literal.dtype, drawn.dtype, promoted.dtype) == (torch.float64, torch.complex128) + (
        torch.float64,
    ) * 2
    assert inside is torch.float64 and after.dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32


def test_the_graph_switches_where_the_code_does(cnt):
    """As torch.compile's (test_ctx_manager's test_ctx_basic0): the setter nodes around the
    factory, whose dtype the constant data and the switched default decide."""

    @stenograph.compile(backend=cnt, fullgraph=True)
    def fn():
        with default_dtype(torch.float64):
            x = torch.tensor([3.0, 3.0 + 5.0j])
        return x

    assert fn().dtype == torch.complex128
    code = cnt.graphs[0].code
    assert "torch.set_default_dtype(torch.float64)" in code
    assert "torch.tensor([3.0, (3+5j)])" in code
    assert code.index("torch.set_default_dtype(torch.float64)") < code.index("torch.tensor(")
    assert code.index("torch.tensor(") < code.index("torch.set_default_dtype(torch.float32)")


def _switched(x):
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    return x + torch.ones(2), torch.full((2,), 1.5), torch.arange(3) * 0.1, before, torch.get_default_dtype()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_statement_leaves_the_default_switched_and_a_second_call_reuses_the_graph(backend):
    torch.set_default_dtype(torch.float32)
    expected = _switched(torch.ones(2))
    assert torch.get_default_dtype() == torch.float64
    counter = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_switched, backend=counter, fullgraph=True)
    for _ in range(2):
        torch.set_default_dtype(torch.float32)
        assert_same(compiled(torch.ones(2)), expected)
        assert torch.get_default_dtype() == torch.float64
    assert counter.frame_count == 1


def test_the_default_at_entry_is_guarded(cnt):
    """Entered with float64 already set, the function compiles again: its read before the
    switch, and the graph's entry state, are another."""
    compiled = stenograph.compile(_switched, backend=cnt, fullgraph=True)
    torch.set_default_dtype(torch.float32)
    assert compiled(torch.ones(2))[3] is torch.float32
    torch.set_default_dtype(torch.float64)
    out = compiled(torch.ones(2, dtype=torch.float64))
    assert out[3] is torch.float64 and out[0].dtype == torch.float64
    assert cnt.frame_count == 2


def _switched_at_float32(x):
    torch.set_default_dtype(torch.float32)
    return torch.arange(5) * 0.1, torch.linspace(0, 1, 7), x


def test_under_aot_eager_the_graph_states_the_dtypes_the_default_decided():
    """A retracing backend keeps no setter: the factory records `dtype=`, the Python number a
    0-dim tensor of the default dtype; the values are eager's (here float32 switched from float64:
    the number is rounded as the kernel rounds it)."""
    graphs = []

    def aot_recording(gm, example_inputs):
        graphs.append(gm)
        return stenograph.backends.lookup_backend("aot_eager")(gm, example_inputs)

    torch.set_default_dtype(torch.float64)
    expected = _switched_at_float32(torch.ones(1))
    compiled = stenograph.compile(_switched_at_float32, backend=aot_recording, fullgraph=True)
    for _ in range(2):
        torch.set_default_dtype(torch.float64)
        got = compiled(torch.ones(1))
        assert_same(got, expected)
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
        assert torch.get_default_dtype() == torch.float32
    assert len(graphs) == 1
    code = graphs[0].code
    assert "torch.linspace(0, 1, 7, dtype = torch.float32)" in code
    assert "torch.tensor(0.1, dtype = torch.float32)" in code


def _int_sqrt(x):
    torch.set_default_dtype(torch.float64)
    return torch.arange(4).sqrt() + x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_operation_that_cannot_state_its_dtype_breaks(backend):
    """An integer tensor's square root takes the default dtype and no `dtype=`: it runs eagerly
    at a break, in the switched default."""
    with pytest.raises(stenograph.Unsupported, match="makes a dtype that the default dtype decides"):
        stenograph.compile(_int_sqrt, backend=backend, fullgraph=True)(torch.ones(4))
    stenograph.reset()
    torch.set_default_dtype(torch.float32)
    expected = _int_sqrt(torch.ones(4))
    counter = stenograph.testing.CompileCounterWithBackend(backend)
    torch.set_default_dtype(torch.float32)
    assert_same(stenograph.compile(_int_sqrt, backend=counter)(torch.ones(4)), expected)
    assert torch.get_default_dtype() == torch.float64


def _across_a_break(x):
    torch.set_default_dtype(torch.float64)
    y = x + torch.ones(3)
    stenograph.graph_break()
    z = y * torch.ones(3) + 0.5
    seen = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    return z, torch.zeros(1), seen


def test_code_after_a_break_runs_in_the_switched_default(cnt):
    # (torch.compile does not know stenograph.graph_break: no peer)
    out = check(_across_a_break, lambda i: (t(3, seed=i, grad=True),), cnt, graphs=2, calls=2, grads=True, peer=False)
    assert out[0][0].dtype == torch.float64 and out[0][2] is torch.float64
    assert torch.get_default_dtype() == torch.float32


def _printing_in_region(x):
    with default_dtype(torch.float64):
        y = x + torch.ones(3)
        print("inside", torch.get_default_dtype())
        z = torch.randn(3)
    return y, z, torch.ones(1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_break_inside_a_contextmanager_region(backend, capsys):
    """The print breaks; the region's code around it (resume functions) runs in float64 and the
    code after it in float32, under either backend. (torch.compile cannot break inside a
    `@contextmanager` region and runs the whole frame eagerly: 0 graphs.)"""
    counter = stenograph.testing.CompileCounterWithBackend(backend)
    check(_printing_in_region, lambda i: (t(3, seed=i),), counter, capsys, graphs=3, calls=2, torch_graphs=0)
    assert torch.get_default_dtype() == torch.float32


def _indexing_in_region(x, index):
    with default_dtype(torch.float64):
        y = torch.ones(3)[index] + x
    return y


def _indexing_after_statement(x, index):
    torch.set_default_dtype(torch.float64)
    return torch.ones(3)[index] + x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize(
    ("fn", "left"), [(_indexing_in_region, torch.float32), (_indexing_after_statement, torch.float64)]
)
def test_an_error_inside_the_graph_leaves_the_default_eager_leaves(backend, fn, left):
    """An index out of range raises where the graph runs: eager's `finally` restores float32,
    eager's statement leaves float64; so does the compiled call, under either backend."""
    compiled = stenograph.compile(fn, backend=backend)
    torch.set_default_dtype(torch.float32)
    assert compiled(torch.ones(1), torch.tensor([1])).dtype == torch.float64
    for run in (fn, compiled):
        torch.set_default_dtype(torch.float32)
        with pytest.raises(IndexError):
            run(torch.ones(1), torch.tensor([7]))
        assert torch.get_default_dtype() == left


def test_a_dtype_it_does_not_take_runs_eagerly_and_raises(cnt):
    fn = lambda x: (torch.set_default_dtype(torch.int64), x + 1)  # noqa: E731
    with pytest.raises(stenograph.Unsupported, match="constant float16/32/64 dtype"):
        stenograph.compile(fn, backend=cnt, fullgraph=True)(torch.ones(1))
    with pytest.raises(TypeError, match="only floating-point types"):
        stenograph.compile(fn, backend=cnt)(torch.ones(1))
