"""NumPy scalars passed in (`np.int64(3)`, `np.float32(2.5)`, `np.bool_(True)`): a 0-d graph
input, as torch.compile takes them, so a new value of the same type reuses the graph and another
type compiles again. Compiled vs eager: values, dtypes and the NumPy scalar types of results;
graph counts vs torch.compile (torch 2.13 counts one graph from the first call, for every
`dynamic` setting); the guards that recompile."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import stenograph

from ._support import assert_same, check

# each NumPy scalar type the graph carries, with four values of it
VALUES = {
    np.int64: [2, 3, -4, 5],
    np.int32: [2, 3, -4, 2**31 - 1],
    np.uint8: [2, 3, 250, 0],
    np.float64: [2.5, -3.25, 1e30, 0.1],
    np.float32: [2.5, -3.25, 0.1, 3e38],
    np.float16: [2.5, -3.25, 0.1, 6e4],
    np.bool_: [True, False, True, False],
}
TYPES = list(VALUES)


def _args(kind, dtype=torch.float32):
    return lambda i: (torch.tensor([-1, 1, 2, 3]).to(dtype), kind(VALUES[kind][i]))


@pytest.mark.parametrize("dynamic", [None, True, False])
@pytest.mark.parametrize("kind", TYPES)
def test_new_value_reuses_the_graph(cnt, kind, dynamic):
    """The task's repro: `t * n` over four values of one NumPy type is one graph (a value
    guard compiled four times before), as torch.compile's, whatever `dynamic` says."""
    fn = lambda t, n: t * n  # noqa: E731
    compiled = stenograph.compile(fn, backend=cnt, dynamic=dynamic)
    for i in range(4):
        assert_same(compiled(*_args(kind)(i)), fn(*_args(kind)(i)))
    assert cnt.frame_count == 1


_RESULTS = {
    "type": lambda t, n: (t + 1, type(n)),
    "returned": lambda t, n: (t + 1, n),
    "plus_int": lambda t, n: (t + 1, n + 1),
    "times_float": lambda t, n: (t + 1, n * 2.5),
    "squared": lambda t, n: (t + 1, n * n),
    "plus_int64": lambda t, n: (t + 1, n + np.int64(1)),
    "absolute": lambda t, n: (t + 1, abs(n)),
    "sqrt": lambda t, n: (t + 1, np.sqrt(abs(n))),
    "attributes": lambda t, n: (t + 1, n.dtype, n.shape, n.ndim),
    "tensor_of": lambda t, n: (t + 1, torch.tensor(n), torch.as_tensor(n)),
    "tensor_times": lambda t, n: t * n,
    "tensor_plus": lambda t, n: t + n,
    "scalar_minus": lambda t, n: n - t,
    "scalar_over": lambda t, n: n / t,
    "compared": lambda t, n: (t < n, n <= t, t == n),
}


@pytest.mark.parametrize("kind", TYPES)
@pytest.mark.parametrize("name", sorted(_RESULTS))
def test_results_and_types_equal_eager(cnt, name, kind):
    """Python-visible results keep NumPy's scalar types and dtypes (`n + 1` an np.int64, `n * 2.5`
    of a float32 a float32), tensor results the dtype eager's gives; one graph over three values.
    torch.compile (peer=False) hands back 0-d ndarrays for the NumPy results, and breaks
    differently on some operators, so only stenograph's count is asserted."""
    fn = _RESULTS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's overflow warnings, eager's too
        check(fn, _args(kind), cnt, calls=3, peer=False)


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.float64, np.float32, np.float16, np.bool_])
@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.uint8, torch.float16, torch.float32])
def test_tensor_operators_promote_as_for_a_python_number(cnt, kind, dtype):
    """Eager's tensor operators read an np.integer as an int and any other NumPy scalar as a float
    (np.bool_ too): `int32_t * np.float64(2.5)` is float32, `bool_t + np.bool_` is float32, where
    a 0-d tensor of the scalar's dtype would give float64 and bool. Reflected forms too."""

    def fn(t, n):
        return t * n, n + t, t < n, n - t.to(torch.float32) if dtype is torch.bool else n - t

    # torch.compile subtracts np.bool_'s 0-d bool tensor, which raises where eager's float does not
    results = check(fn, _args(kind, dtype), cnt, calls=3, peer=kind is not np.bool_)
    expected = fn(*_args(kind, dtype)(2))
    assert [r.dtype for r in results[2]] == [e.dtype for e in expected]


def test_another_type_recompiles(cnt):
    """Guarded on the type: a value of another NumPy type (or a Python int) compiles again; the
    same types again compile nothing."""
    fn = lambda t, n: (t * n, n + 1)  # noqa: E731
    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(3)
    values = [np.int64(2), np.int64(7), np.int32(2), np.float32(2.5), np.bool_(True), 3, 4, np.float32(-1.0)]
    for value in values:
        assert_same(compiled(x, value), fn(x, value))
    frames = cnt.frame_count
    assert frames == 6  # int64, int32, float32, bool_, then a Python int (3, then symbolic 4)
    for value in values:
        assert_same(compiled(x, value), fn(x, value))
    assert cnt.frame_count == frames


def test_value_deciding_control_flow_breaks_and_is_guarded_after(cnt):
    """`if n > 3` reads the value: the graph breaks there (as torch.compile's), each branch
    compiles once, and values on one side of the test reuse that branch's graph."""

    def fn(t, n):
        t = t * n
        if n > 3:
            return t + 1
        return t - 1

    make = lambda i: (torch.ones(3), np.int64([5, 1, 7, 2][i]))  # noqa: E731
    check(fn, make, cnt, graphs=3, calls=4)


def test_value_read_by_range_breaks(cnt):
    """`range(n)` reads the value: the graph before it serves every value, the loop after the
    break is compiled once per value read (guarded on it)."""

    def fn(t, n):
        t = t * n
        for i in range(n):
            t = t + i
        return t

    make = lambda i: (torch.ones(2), np.int64([2, 3, 3][i]))  # noqa: E731
    # torch 2.13 gives 2: its resumed loop fails to trace for the second value and runs eagerly
    check(fn, make, cnt, graphs=3, calls=3, peer=False)


def test_other_torch_calls_given_a_scalar_run_eagerly(cnt):
    """A tensor method or torch function given a NumPy scalar would read it as a 0-d tensor
    (float64 for `int_t.add(np.float64(2.5))`, where eager gives float32): the call runs eagerly."""

    def fn(t, n):
        return t.add(n), torch.mul(t, n), t.clamp(max=n), torch.full((2,), n)

    make = lambda i: (torch.arange(3, dtype=torch.int32), np.float64(2.5 + i))  # noqa: E731
    for i in range(2):
        expected, actual = fn(*make(i)), stenograph.compile(fn, backend=cnt)(*make(i))
        assert [a.dtype for a in actual] == [e.dtype for e in expected] == [torch.float32] * 4
        assert_same(actual, expected)
    assert cnt.frame_count == 0


def test_from_numpy_of_a_scalar_raises_as_eager(cnt):
    with pytest.raises(TypeError, match="expected np.ndarray"):
        torch.from_numpy(np.int64(1))
    with warnings.catch_warnings(), pytest.raises(TypeError, match="expected np.ndarray"):
        warnings.simplefilter("ignore", stenograph.StenographWarning)
        stenograph.compile(lambda t, n: (t + 1, torch.from_numpy(n)), backend=cnt)(torch.ones(1), np.int64(1))


def test_conversions_of_a_scalar_are_new_tensors(cnt):
    def fn(t, n):
        a, b = torch.as_tensor(n), torch.asarray(n)
        a += 1
        return a, b, torch.tensor(n), t + a

    check(fn, lambda i: (torch.ones(2), np.int64(i)), cnt, calls=3, peer=False)  # torch: see above
    assert cnt.frame_count == 1


def test_complex_scalar_beside_a_tensor_runs_eagerly(cnt):
    """Eager's tensor operator drops a complex scalar's imaginary part, warning: refused."""
    fn = lambda t, n: t * n  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        assert_same(stenograph.compile(fn, backend=cnt)(torch.ones(2), np.complex64(2 + 1j)), torch.full((2,), 2.0))
    assert cnt.frame_count == 0


def test_trace_numpy_off_keeps_value_guards(cnt):
    with stenograph.config.patch(trace_numpy=False):
        compiled = stenograph.compile(lambda t, n: t * n, backend=cnt)
        for v in [2, 3, 3]:
            assert_same(compiled(torch.ones(2), np.int64(v)), torch.full((2,), float(v)))
    assert cnt.frame_count == 2
