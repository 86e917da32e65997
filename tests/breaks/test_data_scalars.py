"""Python numbers read from tensor data at a graph break (`.item()`, `.tolist()`, `float(t)`)
flow into the resume function as graph inputs, symbolic from its first compile: a second call
with the same input compiles nothing, and a value that changes on every call does not make one
cache entry per value."""

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounterWithBackend


def _inputs(i):
    return (torch.randn(4, generator=torch.Generator().manual_seed(i)) * 5,)


def _scaled(x):
    s = x.sum().item()
    return x * s + 1


def _from_list(x):
    a, b = x[:2].tolist()
    return x * a + b


def _from_float(x):
    v = float(x.sum())
    return x / (v + 100)


def _two_breaks(x):
    s = x.sum().item()
    y = x * s
    t = y.mean().item()
    return y + t * s


def _truncated(x):
    n = int(x.sum().item())
    return x * n


def _branch(x):
    s = x.sum().item()
    if s > 0:
        return x + s
    return x - s


def _check(fn, backend, calls=6):
    """Compiled vs eager on `calls` different inputs (and each one twice); the graph counts
    after each call."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(fn, backend=cnt)
    counts = []
    for i in range(calls):
        for _ in range(2):
            torch.testing.assert_close(compiled(*_inputs(i)), fn(*_inputs(i)))
            counts.append(cnt.frame_count)
    return counts


# torch before 2.13: AOTAutograd's tensorify pass cannot turn `x / (v + 100)` with a float input
# `v` into tensor math and asks for `v` as a constant (see backends/float_restart.py), so each
# value gets its own resume graph (up to config.recompile_limit) after one restarted attempt.
_FLOAT_DIVISION_SPECIALISED = tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_scaled, _from_list, _from_float])
def test_number_read_at_a_break_is_a_graph_input(fn, backend):
    if fn is _from_float and backend == "aot_eager" and _FLOAT_DIVISION_SPECIALISED:
        assert _check(fn, backend) == [3 + i // 2 for i in range(12)]
        return
    # the graph before the break, and the resume function's graph, for every value
    assert _check(fn, backend) == [2] * 12


def test_number_carried_across_a_second_break_stays_symbolic():
    assert _check(_two_breaks, "eager") == [3] * 12


def test_int_of_a_symbolic_float_truncates_without_a_guard():
    assert _check(_truncated, "eager") == [2] * 12


def test_branch_on_the_number_guards_the_branch_only():
    # inputs 0..5 give sums of both signs: one resume graph per side of the branch
    signs = [_inputs(i)[0].sum().item() > 0 for i in range(6)]
    assert set(signs) == {True, False}
    flip = signs.index(not signs[0])
    expected = [2] * (2 * flip) + [3] * (12 - 2 * flip)
    assert _check(_branch, "eager") == expected


def test_resume_graph_takes_the_number_as_a_symbolic_input():
    cnt = CompileCounterWithBackend("eager")
    compiled = stenograph.compile(_scaled, backend=cnt)
    compiled(*_inputs(0))
    resume_graph = cnt.graphs[1]
    examples = [n.meta["example_value"] for n in resume_graph.graph.nodes if n.op == "placeholder"]
    assert any(isinstance(e, torch.SymFloat) for e in examples)
