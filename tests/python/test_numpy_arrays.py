"""NumPy code traced through torch._numpy (issue 27): arrays read from the frame, `t.numpy()`,
NumPy functions, ndarray methods and operators, each compared with eager (values, dtypes and
types of the results, writes to the arrays passed in), with guards that recompile for other
arrays, and refusals where the trace could differ from eager."""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest
import torch

import stenograph
from stenograph.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


def assert_same(actual, expected, path="out"):
    """Same types, dtypes, shapes and values (NaN equal to NaN)."""
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{path}: {actual.dtype} != {expected.dtype}"
        assert np.shape(actual) == np.shape(expected), path
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=path)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=path)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def run_both(fn, make_args, backend, calls=2):
    """`fn` eagerly and compiled on equal fresh arguments: results and the arguments afterwards."""
    counter = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(fn, backend=counter)
    for i in range(calls):
        eager_args, compiled_args = make_args(i), make_args(i)
        expected = fn(*eager_args)
        actual = compiled(*compiled_args)
        assert_same(actual, expected)
        assert_same(list(compiled_args), list(eager_args), "arguments after the call")
    return counter


def arrays(*shapes, dtype=np.float64):
    def make(i):
        rng = np.random.default_rng(i)
        return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)

    return make


# -- one graph, results as eager's ----------------------------------------------------------------


PROGRAMS = {
    "functions": lambda a: np.sum(np.exp(a) * 2 + 1, axis=0) - np.mean(a),
    "linalg_fft": lambda a: (np.linalg.norm(a, axis=0), np.fft.fftshift(a)),
    "methods": lambda a: (a.max(axis=0), a.all(axis=0), a.copy(), a.reshape([1, a.size]), a.transpose(1, 0)),
    "attributes": lambda a: (a.shape, a.ndim, a.size, a.dtype, a.strides, a.itemsize, a.T, a.real, a.imag),
    "operators": lambda a: (a @ a.T, -a, abs(a), a**2, a // 0.5, a % 0.3, a > 0, ~(a > 0), a[1:, ::2], a[[0, 2]]),
    "constructors": lambda a: (np.arange(5), np.linspace(0, 1, 5), np.ones_like(a, dtype=np.float32), np.eye(3)),
    "dtypes": lambda a: (
        (a * 5).astype(bool).astype(float).astype(int) + 8,
        np.full_like(a, 2.4, dtype=np.dtype("float")),
    ),
    "iteration": lambda a: [row.sum() for row in a] + [len(a)],
    "integer_division": lambda a: (
        np.arange(6).reshape(2, 3) / np.arange(1, 4),
        np.arange(4) / 2,
        np.true_divide(np.arange(3), 2),
    ),
    "scalars": lambda a: (np.sum(a), a[0, 0], np.argmax(a), (a > 0).sum(), np.asarray(np.sum(a))),
    "stack_meshgrid": lambda a: (np.stack([a, a], axis=1), np.meshgrid(a[0], a[1]), np.concatenate([a, a])),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_numpy_program_matches_eager(name, backend):
    counter = run_both(PROGRAMS[name], arrays((3, 4)), backend)
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_numpy_and_back(backend):
    def fn(x):
        a = x.numpy()
        b = np.mean(a, 1)
        return (
            torch.from_numpy(np.asarray(np.sum(b))),
            torch.from_numpy(a.T) * 2,
            torch.as_tensor(a, dtype=torch.float64),
        )

    counter = run_both(fn, lambda i: (torch.randn(3, 4, generator=torch.Generator().manual_seed(i)),), backend)
    assert counter.frame_count == 1


def test_numpy_array_made_from_a_tensor(cnt):
    fn = lambda x: (np.ones_like(x, dtype=np.float64) * 2, np.asarray(x) + 1)  # noqa: E731
    x = torch.randn(4)
    assert_same(stenograph.compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 1


def test_numpy_ufunc_of_a_tensor_is_refused():
    """NumPy hands a ufunc's result on a tensor back to torch (a tensor), and its reductions to
    the tensor's own methods: not torch._numpy's answers."""
    x = torch.ones(3)
    assert_same(_eager_with_reason(lambda x: np.sqrt(x), (x,), "given tensor"), np.sqrt(x))


def test_tensor_numpy_force(cnt):
    x = torch.randn(3, requires_grad=True)
    out = stenograph.compile(lambda x: x.numpy(force=True) * 2, backend=cnt)(x)
    assert_same(out, x.detach().numpy() * 2)
    assert cnt.frame_count == 1


# -- writes reach the arrays passed in ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_to_an_input_array(backend):
    def fn(a, b):
        a[0] = 5
        a += 1
        b *= 2
        return a, a.sum() + b

    run_both(fn, arrays((4,), (4,)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_arrays_are_not_taken_apart(backend):
    """Views of one buffer passed as two arrays: a write through one is seen through the other.
    The frame runs eagerly for them (torch would see two storages), and code compiled for
    separate arrays is not reused for overlapping ones."""

    def fn(a, b):
        a += 1
        return b * 2

    compiled = stenograph.compile(fn, backend=backend)
    apart = np.arange(6.0), np.arange(6.0)
    assert_same(compiled(*apart), fn(np.arange(6.0), np.arange(6.0)))
    x, y = np.arange(6.0), np.arange(6.0)
    with pytest.warns(stenograph.StenographWarning, match="share memory"):
        out = compiled(x, x[1:])
    assert_same(out, fn(y, y[1:]))
    t, u = torch.arange(6.0), torch.arange(6.0)
    assert_same(compiled(t.numpy(), t), fn(u.numpy(), u))


def test_returning_the_input_array_returns_it(cnt):
    a = np.arange(3.0)
    assert stenograph.compile(lambda a: a, backend=cnt)(a) is a


# -- guards ---------------------------------------------------------------------------------------


def test_other_dtype_shape_or_kind_recompiles(cnt):
    compiled = stenograph.compile(lambda a: a * 2 + [len(a)] if isinstance(a, list) else a * 2 + len(a), backend=cnt)
    for value in [np.arange(3.0), np.arange(3.0) + 1, np.arange(3), np.arange(4.0), np.arange(6.0)[::2]]:
        assert_same(compiled(value), value * 2 + len(value))
    assert cnt.frame_count == 4  # the second array reuses the first's graph
    assert compiled([1.0, 2.0]) == [1.0, 2.0] * 2 + [2]  # a list is not an array


def test_global_array_is_read_on_each_call(cnt):
    global GLOBAL_ARRAY
    GLOBAL_ARRAY = np.arange(4.0)
    compiled = stenograph.compile(lambda y: y + GLOBAL_ARRAY, backend=cnt)
    assert_same(compiled(np.ones(4)), np.ones(4) + np.arange(4.0))
    GLOBAL_ARRAY = np.arange(4.0) * 10
    assert_same(compiled(np.ones(4)), np.ones(4) + np.arange(4.0) * 10)
    assert cnt.frame_count == 1


def test_numpy_scalar_argument_is_a_graph_input(cnt):
    """A NumPy scalar passed in is a 0-d graph input (`test_numpy_scalars`): its integer `%` runs
    eagerly (its errors depend on the values) and the graph after it is reused for new values."""
    compiled = stenograph.compile(lambda x, a, b: x + (a % b), backend=cnt)
    x = torch.randn(3)
    assert_same(compiled(x, 4096, np.int64(8)), x + 0)
    assert_same(compiled(x, 4096, np.int64(7)), x + 1)
    assert_same(compiled(x, 4096, np.int64(7)), x + 1)
    assert cnt.frame_count == 1


# -- graph breaks ---------------------------------------------------------------------------------


def test_arrays_cross_a_graph_break(cnt):
    def fn(x, y):
        a, b = x.numpy(), y.numpy()
        c = np.ones_like(a)
        stenograph.graph_break()
        return np.add(a, c), np.multiply(b.real, 2.0)

    compiled = stenograph.compile(fn, backend=cnt)
    for _ in range(3):
        x, y = torch.randn(1, 3), torch.randn(1, 3)
        assert_same(compiled(x, y), fn(x, y))
    assert cnt.frame_count == 2


def test_data_dependent_result_breaks_and_runs_numpy(cnt):
    def fn():
        x = np.asarray([1, 1, 2, 2, 3], dtype=np.float16)
        return np.unique(x)

    assert_same(stenograph.compile(fn, backend=cnt)(), fn())


# -- refusals: the code runs eagerly, as eager runs it ---------------------------------------------


def _eager_with_reason(fn, args, reason, before=None):
    """`fn` compiled, with `reason` among its graph breaks or eager runs; its result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stenograph.StenographWarning)
        reasons = [r.reason for r in stenograph.explain(fn)(*args).break_reasons]
        reasons += [str(w.message) for w in caught if issubclass(w.category, stenograph.StenographWarning)]
        assert any(reason in r for r in reasons), reasons
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stenograph.StenographWarning)
        stenograph.reset()
        if before is not None:
            before()
        return stenograph.compile(fn, backend="eager")(*args)


def test_numpy_random_runs_eagerly_by_default():
    def fn(x):
        return x + np.random.randn(3)

    np.random.seed(0)
    expected = fn(np.zeros(3))
    seeded = _eager_with_reason(fn, (np.zeros(3),), "random draws run eagerly", before=lambda: np.random.seed(0))
    assert_same(seeded, expected)


def test_read_only_and_foreign_dtype_arrays_run_eagerly():
    fn = lambda x: x  # noqa: E731
    read_only = np.broadcast_to(np.arange(3), (2, 3))
    assert _eager_with_reason(fn, (read_only,), "torch cannot share its memory") is read_only
    odd = np.array([42], dtype=np.uint16)
    assert _eager_with_reason(lambda x: isinstance(x, torch.Tensor), (odd,), "uint16") is False


@pytest.mark.parametrize(
    "op", [operator.add, operator.lt, operator.iadd, operator.itruediv, operator.floordiv, operator.pow]
)
@pytest.mark.parametrize("array_left", [True, False])
def test_array_beside_a_tensor_runs_eagerly(op, array_left):
    """Eager answers through torch for some operators and dtypes, through NumPy for others
    (`t += a` makes a new float64 tensor) or raises: the operation runs eagerly."""
    fn = lambda x, y: op(x, y)  # noqa: E731

    def args():
        a, t = np.full(3, 2, dtype=np.float32), torch.ones(3, dtype=torch.int64)
        return (a, t) if array_left else (t, a)

    try:
        expected = fn(*args())
    except TypeError:
        with pytest.raises(TypeError):
            _eager_with_reason(fn, args(), "an array beside a tensor")
        return
    given = args()
    assert_same(_eager_with_reason(fn, given, "an array beside a tensor"), expected)
    assert_same(list(given), list(args()), "arguments after the call")


def test_numpy_scalar_that_changes_the_result_dtype_is_refused():
    fn = lambda a: a * np.float64(2.5)  # noqa: E731 - NumPy 2 keeps the scalar's float64
    a = np.ones(3, dtype=np.float32)
    assert_same(
        _eager_with_reason(fn, (a,), "result differs from NumPy's (a tensor of float32, NumPy: ndarray of float64)"),
        fn(a),
    )
    same_dtype = lambda a: a * np.float32(2.5)  # noqa: E731
    assert_same(stenograph.compile(same_dtype, backend="eager", fullgraph=True)(a), same_dtype(a))


def test_reading_values_breaks_or_captures(cnt):
    compiled = stenograph.compile(lambda x: x.tolist(), backend=cnt)
    with stenograph.config.patch(capture_scalar_outputs=True):
        assert compiled(np.arange(5)) == [0, 1, 2, 3, 4]
    assert cnt.frame_count == 1
    assert _eager_with_reason(lambda x: bool(x.sum() > 0), (np.ones(3),), "reads the array's values") is True


def test_trace_numpy_off_runs_numpy_eagerly():
    with stenograph.config.patch(trace_numpy=False):
        assert_same(_eager_with_reason(lambda a: np.sum(a), (np.ones(3),), "trace_numpy is off"), np.float64(3.0))


# -- where torch._numpy differs from NumPy: found on stand-ins while tracing, run eagerly -----------


DIFFERING = {
    "python_number_out_of_dtype_range": (lambda a: a < -1, np.uint8, "result differs"),
    "result_dtype": (lambda a: np.sum(a), np.uint8, "result differs"),
    "kernel_missing_for_dtype": (lambda a: np.floor(a), np.bool_, "torch._numpy raises"),
    "integer_floor_division": (lambda a: a // a, np.int64, "torch raises on a division by zero"),
    "integer_power_of_an_array": (lambda a: 2**a, np.int64, "NumPy raises on a negative exponent"),
    "numpy_raises": (lambda a: a - 2**40, np.int32, "NumPy raises OverflowError"),
}


@pytest.mark.parametrize("name", sorted(DIFFERING))
def test_where_torch_numpy_differs_the_call_runs_eagerly(name):
    fn, dtype, reason = DIFFERING[name]
    values = np.array([0, 1, 3, -2], dtype=np.int64)
    given, again = values.astype(dtype), values.astype(dtype)
    try:
        expected = fn(again)
    except Exception as e:  # eager's own error, raised by the compiled function too
        with pytest.raises(type(e)):
            _eager_with_reason(fn, (given,), reason)
        return
    assert_same(_eager_with_reason(fn, (given,), reason), expected)


def test_scalar_methods_give_scalars(cnt):
    fn = lambda a: (a.max().copy(), (a.max() / 2.5).astype(bool), a.any(), np.asarray(a.max()))  # noqa: E731
    a = np.arange(4, dtype=np.float16)
    assert_same(stenograph.compile(fn, backend=cnt)(a), fn(a))
    assert cnt.frame_count == 1


def test_checking_leaves_numpys_random_state_alone(cnt):
    np.random.seed(3)
    stenograph.compile(lambda a: np.exp(a) + 1, backend=cnt)(np.ones(3))
    drawn = np.random.rand()
    np.random.seed(3)
    assert drawn == np.random.rand()


def test_copies_views_and_identity_as_numpy_makes_them(cnt):
    """`astype` to the same dtype copies in NumPy (torch's would be the operand: copied);
    `reshape` views; `np.asarray(a)` is `a`; writes through each reach what they should."""

    def fn(a):
        c = a.astype(a.dtype)
        c[0] = 100
        e = a.reshape(-1)
        e[1] = -5
        return c, np.asarray(a) is a, e

    compiled = stenograph.compile(fn, backend=cnt)
    a, b = np.arange(4.0), np.arange(4.0)
    assert_same(compiled(a), fn(b))
    assert_same(a, b, "the array passed in")
    assert cnt.frame_count == 1


def test_one_array_under_two_names_stays_one_object_across_a_break(cnt):
    def fn(a):
        v0 = np.maximum(a, 1.0)
        v1 = np.asarray(v0)
        stenograph.graph_break()
        return v0, v1

    v0, v1 = stenograph.compile(fn, backend=cnt)(np.arange(3.0))
    assert v0 is v1
    assert_same(v0, np.maximum(np.arange(3.0), 1.0))


def test_numpy_float_scalar_nan_and_signed_zero_are_guarded(cnt):
    """A NumPy float32 is no Python float: its NaN failed the `==` guard on every call (a compile
    each time), and -0.0 passed the one compiled for 0.0 (`np.copysign` folded to 1)."""

    def fn(x, s):
        return x + 1 if s != s else x * np.copysign(1.0, s)

    compiled = stenograph.compile(fn, backend=cnt)
    for s in [np.float32("nan"), np.float32("nan"), np.float32(0.0), np.float32(-0.0), np.float32(-0.0)]:
        assert_same(compiled(torch.ones(1), s), fn(torch.ones(1), s))
    assert cnt.frame_count == 3


# -- torch.tensor() and the legacy constructors of NumPy scalars ----------------------------------


def _picked_from_a_new_array():
    x = np.array([1, 2, 3, 4, 5, 6], dtype=np.int64)
    return torch.LongTensor([x[0], x[2], x[4]])


_OF_SCALARS = {
    "tensor": lambda a: torch.tensor([a[0], a[2]]),
    "tensor_nested": lambda a: torch.tensor([[a[0]], [a[1]]]),
    "tensor_with_a_float": lambda a: torch.tensor([a[0], 1.5]),
    "tensor_float64": lambda a: torch.tensor([a[0], a[1]], dtype=torch.float64),
    "LongTensor": lambda a: torch.LongTensor([a[0], a[2]]),
    "FloatTensor": lambda a: torch.FloatTensor([a[0], a[2]]),
    "DoubleTensor": lambda a: torch.DoubleTensor([a[1]]),
    "BoolTensor": lambda a: torch.BoolTensor([a[1], a[2]]),
}


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32, np.float64, np.bool_])
@pytest.mark.parametrize("name", sorted(_OF_SCALARS))
def test_tensor_of_numpy_scalars_is_built_in_the_graph(cnt, name, dtype):
    """`torch.tensor([a[0], a[2]])` and `torch.LongTensor(...)` of the NumPy scalars an array's
    items are: one graph, values and dtype as eager's (the dtype NumPy's scalar type gives). A
    combination eager refuses by the element's type (a float32 into int64) raises as eager's; a
    float64 into int64, which eager refuses for some values (NaN), runs eagerly."""
    fn = _OF_SCALARS[name]
    make = lambda i: (np.array([i + 1.5, -2, 3 * i], dtype=np.float64).astype(dtype),)  # noqa: E731
    try:
        expected = fn(*make(0))
    except TypeError as e:  # eager's conversion of this type: refused, then raised as eager does
        with pytest.raises(stenograph.Unsupported, match="eager raises TypeError for its type"):
            stenograph.compile(fn, backend=cnt, fullgraph=True)(*make(0))
        with warnings.catch_warnings(), pytest.raises(TypeError, match=str(e)):
            warnings.simplefilter("ignore", stenograph.StenographWarning)
            stenograph.compile(fn, backend=cnt)(*make(0))
        return
    if (name, dtype) == ("LongTensor", np.float64):
        assert_same(_eager_with_reason(fn, make(0), "for a value such as nan"), expected)
        return
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    for i in range(3):
        expected, actual = fn(*make(i)), compiled(*make(i))
        assert actual.dtype == expected.dtype
        assert_same(actual, expected)
    assert cnt.frame_count == 1


def test_legacy_constructor_of_items_of_an_array_made_in_the_function(cnt):
    assert_same(stenograph.compile(_picked_from_a_new_array, backend=cnt, fullgraph=True)(), torch.tensor([1, 3, 5]))
    assert cnt.frame_count == 1


def test_tensor_of_numpy_scalars_of_another_dtype_recompiles(cnt):
    compiled = stenograph.compile(_OF_SCALARS["tensor"], backend=cnt, fullgraph=True)
    assert compiled(np.arange(3, dtype=np.int32)).dtype == torch.int32
    assert compiled(np.arange(3, dtype=np.float16)).dtype == torch.float16
    assert cnt.frame_count == 2


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (lambda a: torch.IntTensor([a[0]]), "for a value such as -9223372036854775808"),  # int64 overflows int32
        (lambda a: torch.LongTensor([a[0] / 2]), "for a value such as nan"),  # NaN cannot be an int64
        (lambda a: torch.tensor([a[0] * 1j], dtype=torch.float32), "ComplexWarning"),  # NumPy warns
        (lambda a: torch.tensor([a[:1]]), "a NumPy array"),  # a sequence of arrays
        (lambda a: torch.tensor([a[0], np.uint64(1)]), "raises RuntimeError eagerly"),  # no int64/uint64 promotion
    ],
)
def test_tensor_of_numpy_scalars_eager_may_refuse_runs_eagerly(fn, reason):
    """Conversions eager makes for some values only (an overflow, NaN), or with a warning, and
    element types torch refuses to promote: refused, the call runs eagerly."""
    a = np.arange(1, 4, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        warnings.simplefilter("ignore", UserWarning)  # torch's: a list of arrays is slow
        try:
            expected = fn(a)
        except (TypeError, RuntimeError) as e:
            with pytest.raises(type(e)):
                _eager_with_reason(fn, (a,), reason)
            return
        assert_same(_eager_with_reason(fn, (a,), reason), expected)
