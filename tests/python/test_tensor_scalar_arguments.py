"""A 0-d tensor passed where a pointwise op takes a Python number (`x.addcmul_(a, b, value=t)`,
`torch._foreach_pow(t, xs)`, `torch._foreach_lerp_(xs, ys, t)`): the op stays in the graph,
called with the tensor, so it reads the number as eager does (dtypes, rounding, in-place effects
and gradients are eager's) and a new value never recompiles. Other ops that read a tensor as
their Scalar keep the graph break without `capture_scalar_outputs`."""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_leaves

import stenograph
from stenograph.errors import Unsupported
from stenograph.testing import CompileCounterWithBackend

from ._support import check, t


def _addcmul_in_place(x, a, b, s):  # test_functions.py's test_addcmul_
    return x.addcmul_(a, b, value=s)


def _addcmul(x, a, b, s):
    return torch.addcmul(x, a, b, value=s), x.addcmul(b, a, value=s)


def _addcdiv(x, a, b, s):
    y = torch.addcdiv(x, a, b, value=s)
    return x.addcdiv_(b, a, value=s), y


def _addcdiv_method(x, a, b, s):
    return x.addcdiv(a, b, value=s)


def _foreach_pow(x, a, b, s):  # test_broadcast_foreach_pow: a Scalar base
    return torch._foreach_pow(s, [x, a, b])


def _foreach_pow_exponent(x, a, b, s):
    return torch._foreach_pow([x, a, b], s)


def _foreach_lerp_in_place(x, a, b, s):  # test_foreach_lerp_
    torch._foreach_lerp_([x, a], [b, b], s)


def _foreach_lerp(x, a, b, s):
    return torch._foreach_lerp([x, a], [b, b], weight=s)


# (the tensors' dtype, the 0-d tensor's dtype): eager reads the 0-d tensor as a number, which
# does not promote the tensors (a float64 one leaves float32 tensors float32), where tensor
# arithmetic with the 0-d tensor would promote in places
_DTYPES = [
    (torch.float32, torch.float64),
    (torch.float32, torch.int64),
    (torch.float64, torch.float32),
    (torch.bfloat16, torch.float64),
]
# each with whether torch.compile rewrites it into tensor arithmetic
_FUNCTIONS = [
    (_addcmul_in_place, True),
    (_addcmul, False),
    (_addcdiv, True),
    (_addcdiv_method, False),
    (_foreach_pow, True),
    (_foreach_pow_exponent, False),
    (_foreach_lerp_in_place, True),
    (_foreach_lerp, False),
]


def _torch_graphs(rewritten, scalar_dtype):
    """torch.compile reads an int64 or float64 0-d tensor as it reads its own tensors holding
    Python numbers; on another it breaks the graph (here: runs the frame eagerly)."""
    return 1 if rewritten or scalar_dtype in (torch.int64, torch.float64) else 0


def _arguments(dtype, scalar_dtype, grad=False):
    def make(i):
        tensors = [(t(3, 4, seed=i + k).abs() + 0.5).to(dtype).requires_grad_(grad) for k in range(3)]
        value = torch.tensor(0.3 + i if scalar_dtype.is_floating_point else 2 + i, dtype=scalar_dtype)
        return *tensors, value

    return make


def _assert_bitwise(fn, make_args, backend, calls):
    """The compiled results and mutated arguments are eager's to the bit (check() compares
    within a tolerance); the calls hit the cache entries check() made."""
    compiled = stenograph.compile(fn, backend=backend)
    for i in range(calls):
        args_e, args_c = make_args(i), make_args(i)
        expected, actual = (fn(*args_e), args_e), (compiled(*args_c), args_c)
        for a, e in zip(tree_leaves(actual), tree_leaves(expected), strict=True):
            if isinstance(e, torch.Tensor):
                assert a.dtype == e.dtype and torch.equal(a, e), f"call {i}: {a} != {e}"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("dtypes", _DTYPES, ids=str)
@pytest.mark.parametrize(("fn", "rewritten"), _FUNCTIONS, ids=lambda f: getattr(f, "__name__", str(f)))
def test_a_0d_tensor_as_the_scalar_stays_in_the_graph(fn, rewritten, dtypes, backend):
    """One graph for three values (the value is not guarded), eager's dtypes and values, the
    arguments mutated as eagerly."""
    cnt = CompileCounterWithBackend(backend)
    make_args = _arguments(*dtypes)
    check(fn, make_args, cnt, graphs=1, calls=3, torch_graphs=_torch_graphs(rewritten, dtypes[1]))
    _assert_bitwise(fn, make_args, cnt, calls=3)
    assert cnt.frame_count == 1


@pytest.mark.parametrize(("fn", "rewritten"), [(_addcmul, False), (_foreach_pow, True)])
def test_integer_tensors_with_an_integer_0d_tensor(cnt, fn, rewritten):
    make_args = _arguments(torch.int64, torch.int64)
    check(fn, make_args, cnt, graphs=1, calls=2, torch_graphs=_torch_graphs(rewritten, torch.int64))
    _assert_bitwise(fn, make_args, cnt, calls=2)


def _pow_of(base, exponents):
    return torch._foreach_pow(base, exponents)


def test_foreach_pow_of_0d_exponents_keeps_eagers_dtype(cnt):
    """test_broadcast_foreach_pow's inputs with a float64 base: eager's results are float32 (the
    base is a number); torch.compile's rewrite `_foreach_pow([t, t], xs)` gives float64 ones."""

    def args(i):
        return torch.tensor(0.8 + i, dtype=torch.float64), [torch.tensor(3.4 + i), torch.tensor(7.8)]

    check(_pow_of, args, cnt, graphs=1, calls=2)
    _assert_bitwise(_pow_of, args, cnt, calls=2)


def _differentiated(x, a, b, s):
    y = x * 1
    y.addcdiv_(a, b, value=s)
    return y.addcmul(a, b, value=s) * 2, torch.addcmul(b, x, y, value=s) + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize(("dtypes", "torch_graphs"), [(_DTYPES[0], 1), (_DTYPES[2], 3)], ids=str)
def test_gradients_are_eagers(backend, dtypes, torch_graphs):
    """The other tensors' gradients are eager's. The number carries none: eager refuses a tensor
    that requires grad as a Scalar (see the guard test)."""
    cnt = CompileCounterWithBackend(backend)
    make_args = _arguments(*dtypes, grad=True)
    check(_differentiated, make_args, cnt, graphs=1, calls=2, grads=True, torch_graphs=torch_graphs)


def _foreach_differentiated(x, a, b, s):
    y = torch._foreach_lerp(torch._foreach_pow(s, [x * 2, a]), [b, b], s)
    return y[0] + y[1]


@pytest.mark.parametrize("capture", [False, True])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_foreach_ops_whose_derivative_reads_the_number_break_when_differentiated(backend, capture):
    """Autograd's formulas for these read the number as a C++ double: AOTAutograd could not
    trace their backward, so where autograd records them the graph breaks there and they run
    eagerly (`capture_scalar_outputs` too); under no_grad they stay in the graph."""
    make_args = _arguments(torch.float32, torch.float64, grad=True)
    cnt = CompileCounterWithBackend(backend)
    with stenograph.config.patch(capture_scalar_outputs=capture):
        check(_foreach_differentiated, make_args, cnt, graphs=2, grads=True, peer=False)  # torch rewrites them
        reasons = stenograph.explain(_foreach_differentiated)(*make_args(0)).break_reasons
        assert [r.reason for r in reasons] == [
            f"torch.{op}() reads a tensor's value as a Python number" for op in ("_foreach_pow", "_foreach_lerp")
        ]
        cnt = CompileCounterWithBackend(backend)
        with torch.no_grad():
            check(_foreach_differentiated, make_args, cnt, graphs=1, torch_graphs=1)


@pytest.mark.slow
def test_inductor_compiles_the_ops_that_read_the_tensor():
    cnt = CompileCounterWithBackend("inductor")
    check(_differentiated, _arguments(*_DTYPES[0], grad=True), cnt, graphs=1, grads=True)
    cnt = CompileCounterWithBackend("inductor")
    check(_foreach_differentiated, _arguments(*_DTYPES[0]), cnt, graphs=1)


def test_a_new_dtype_of_the_0d_tensor_recompiles_an_identical_call_does_not(cnt):
    compiled = stenograph.compile(_addcmul, backend=cnt)
    for dtype, graphs in [(torch.float32, 1), (torch.float32, 1), (torch.float64, 2), (torch.float32, 2)]:
        args = _arguments(torch.float32, dtype)(0)
        for actual, expected in zip(compiled(*args), _addcmul(*args), strict=True):
            assert actual.dtype == expected.dtype and torch.equal(actual, expected)
        assert cnt.frame_count == graphs


def test_a_0d_tensor_that_requires_grad_raises_as_eagerly(cnt):
    """Eager takes no tensor that requires grad as a Scalar: the guard on requires_grad sends
    such a call to a new trace, whose op raises, so it runs eagerly and raises eager's error."""
    compiled = stenograph.compile(_addcmul_in_place, backend=cnt)
    compiled(*_arguments(torch.float32, torch.float32)(0))
    x, a, b, s = _arguments(torch.float32, torch.float32)(1)
    with pytest.raises(TypeError, match="argument 'value' must be Number, not Tensor"):
        compiled(x, a, b, s.requires_grad_())
    assert cnt.frame_count == 1


def _add_alpha(x, a, s):
    y = x * 1
    y = torch.add(y, a, alpha=-s)
    return y * 2


def test_other_ops_reading_a_tensor_as_their_scalar_break(cnt):
    """`alpha=` is read with `.item()` by torch.add: without `capture_scalar_outputs` the graph
    breaks there, with its reason (torch.compile breaks too)."""

    def args(i):
        return t(3, seed=i), t(3, seed=i + 1), torch.tensor(0.5 + i)

    check(_add_alpha, args, cnt, graphs=2)
    reasons = stenograph.explain(_add_alpha)(*args(0)).break_reasons
    assert [r.reason for r in reasons] == ["torch.add() reads a tensor's value as a Python number"]
    with pytest.raises(Unsupported, match="reads a tensor's value as a Python number"):
        stenograph.compile(_add_alpha, backend=cnt, fullgraph=True)(*args(0))
