"""Numbers read from tensor data with `config.capture_scalar_outputs = True`: `float(t)`,
`int(t)`, `bool(t)` and `t.tolist()` (integer tensors) stay in the graph as unbacked symbols, as
`.item()` does and as torch.compile records them. A new value never recompiles; a Python branch
on the number breaks; reads eager refuses, or torch.compile does not capture, keep their break."""

import operator

import pytest
import torch
import torch._dynamo

import stenograph
from stenograph.errors import Unsupported
from stenograph.testing import CompileCounterWithBackend

from ._support import assert_same, check, t


@pytest.fixture(autouse=True)
def _capture():
    # torch.compile, the peer whose graph counts `check` compares, captures the same way
    with stenograph.config.patch(capture_scalar_outputs=True), torch._dynamo.config.patch(capture_scalar_outputs=True):
        yield


pytestmark = pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")


def _values(i):
    return ((t(4, seed=i) * 3).requires_grad_(),)


def _float(x):
    v = float(x.sum())
    return x * v + 1, v


def _int(x):
    n = int(x.sum())  # truncates toward zero, as Python's int()
    return x * n, n


def _int_of_int_tensor(x):
    n = int((x * 10).long().sum())
    return x + n, n


def _float_of_int_tensor(x):
    v = float((x * 10).long().sum())
    return x * v, v


def _bool(x):
    b = bool(x.sum() > 0)
    return x * b, b


def _bool_of_number(x):
    return bool(x.sum())


def _dunder(x):
    return x.sum().__float__() * x


def _one_element_1d(x):
    return x * float(x[:1])


def _tolist(x):
    items = (x * 10).long().tolist()
    return x * items[0] + items[3], items


def _tolist_2d(x):
    rows = (x * 10).int().reshape(2, 2).tolist()
    return x.sum() + rows[1][0] * rows[0][1], rows


def _tolist_0d(x):
    n = (x * 10).long().sum().tolist()
    return x * n, n


@pytest.mark.parametrize(
    "fn",
    [
        _float,
        _int,
        _int_of_int_tensor,
        _float_of_int_tensor,
        _bool,
        _bool_of_number,
        _dunder,
        _one_element_1d,
        _tolist,
        _tolist_2d,
        _tolist_0d,
    ],
)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_read_is_one_graph_and_new_values_do_not_recompile(fn, backend):
    """Results (numbers keep their Python type), gradients, one graph over six different values."""
    cnt = CompileCounterWithBackend(backend)
    check(fn, _values, cnt, graphs=1, calls=6, grads=True)


def test_the_read_is_recorded_as_torch_compile_records_it(cnt):
    """item() then sym_float / sym_int / `!= 0`; tolist() as indexing and item() per element."""
    stenograph.compile(_float, backend=cnt)(*_values(0))
    stenograph.compile(_int, backend=cnt)(*_values(0))
    stenograph.compile(_bool_of_number, backend=cnt)(*_values(0))
    stenograph.compile(_tolist, backend=cnt)(*_values(0))
    targets = [[n.target for n in g.graph.nodes if n.op in ("call_method", "call_function")] for g in cnt.graphs]
    assert targets[0][1:3] == ["item", torch.sym_float]
    assert targets[1][1:3] == ["item", torch.sym_int]
    assert targets[2][1:] == ["item", operator.ne]
    assert targets[3].count("item") == 4


def _branch(x):
    v = float(x.sum())
    if v > 0:
        return x + v
    return x - v


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_branch_on_the_number_breaks_cleanly(backend):
    """The graph before the branch, one resume graph per direction: three in all, whatever the
    values (torch.compile: four, it compiles a resume function again when the float it receives
    changes)."""
    cnt = CompileCounterWithBackend(backend)
    check(_branch, lambda i: (t(4, seed=i) * 3,), cnt, graphs=3, calls=8, torch_graphs=4)
    assert len({g.code for g in cnt.graphs}) == 3


def test_a_new_shape_recompiles(cnt):
    compiled = stenograph.compile(_float, backend=cnt)
    for n in (4, 4, 6, 6):
        x = torch.randn(n)
        assert_same(compiled(x), _float(x))
    assert cnt.frame_count == 2


def _float_of_many(x):
    return float(x)


def _tolist_float(x):
    return x * x.tolist()[0]


def _int_of_bool(x):
    return int(x.sum() > 0) + x


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (_tolist_float, "Tensor.tolist() reads the tensor's values"),  # as torch.compile
        (_int_of_bool, "int(tensor) reads the tensor's value"),
        # eager's ValueError, raised in the program: fullgraph cannot raise it from a graph
        (_float_of_many, "only one element tensors can be converted to Python scalars"),
    ],
)
def test_reads_not_captured_break_and_name_the_call(fn, reason):
    with pytest.raises(Unsupported, match=reason.replace("(", r"\(").replace(")", r"\)")):
        stenograph.compile(fn, backend="eager", fullgraph=True)(torch.randn(4))
    x = torch.randn(4)
    if fn is _float_of_many:
        with pytest.raises(ValueError, match="only one element tensors"):
            stenograph.compile(fn, backend="eager")(x)
        return
    assert_same(stenograph.compile(fn, backend="eager")(x), fn(x))


def test_without_the_setting_each_read_breaks(cnt):
    with stenograph.config.patch(capture_scalar_outputs=False):
        for fn in (_float, _int, _bool, _tolist):
            with pytest.raises(Unsupported, match="reads the tensor's value"):
                stenograph.compile(fn, backend=cnt, fullgraph=True)(*_values(0))


@pytest.mark.slow
@pytest.mark.parametrize("fn", [_float, _int, _bool, _tolist])
def test_inductor_compiles_the_read(fn):
    # int() / bool() differentiated: Inductor's backward names the symbol that item() made
    # without defining it (NameError), under torch.compile as well; inference works
    grads = fn in (_float, _tolist)
    cnt = CompileCounterWithBackend("inductor")
    with torch.set_grad_enabled(grads):
        check(fn, _values, cnt, graphs=1, calls=3, grads=grads)


# -- a 0-d tensor passed where an op takes a Python number -------------------------------------


def _foreach_addcmul(a, b, c, val):
    return torch._foreach_addcmul([a], [b], [c], value=1 - val)


def _foreach_addcdiv(a, b, c, val):
    return torch._foreach_addcdiv([a], [b], [c], value=1 - val)


def _scalar_arguments(a, b, c, val):
    return a.addcmul(b, c, value=val * 2) + torch.add(a, b, alpha=val)


def _scalar_args(i):
    return t(4, 4, seed=i), t(4, 4, seed=i + 1), t(4, 4, seed=i + 2), torch.tensor(0.5 + i, dtype=torch.float64)


@pytest.mark.parametrize("fn", [_foreach_addcmul, _foreach_addcdiv, _scalar_arguments])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_tensor_read_inside_an_op_as_its_scalar_argument(fn, backend):
    """test_misc's test_foreach_tensor_scalar: the op reads the 0-d tensor as its Scalar `value`
    or `alpha`; the number it makes sizes nothing, so it is let go and the graph calls the op
    with the tensor. One graph for every value (the value is not guarded)."""
    cnt = CompileCounterWithBackend(backend)
    check(fn, _scalar_args, cnt, graphs=1, calls=3)


def test_a_tensor_read_inside_an_op_breaks_without_the_setting(cnt):
    with stenograph.config.patch(capture_scalar_outputs=False):
        with pytest.raises(Unsupported, match="reads a tensor's value as a Python number"):
            stenograph.compile(_foreach_addcmul, backend=cnt, fullgraph=True)(*_scalar_args(0))


def _truth_of_item(x):
    return bool(x.item()), bool((x * 2).item())


@pytest.mark.parametrize("value", [3, 0, 0.5, 0.0, True, False])
def test_bool_of_a_captured_number_is_symbolic(cnt, value):
    """`bool(x.item())` is `item != 0` in the graph (a bool item as it is): no branch, no guard."""
    check(_truth_of_item, lambda i: (torch.tensor([value]),), cnt)


def _caught_conversion(x):
    try:
        return int(x * 2) + float(x)
    except ValueError as e:
        return x.sum() + len(str(e))


@pytest.mark.parametrize("captured", [True, False])
def test_a_tensor_of_several_elements_raises_eagers_value_error(cnt, captured):
    """`int(t)`/`float(t)` of a tensor of several elements raises eager's ValueError in the
    program (caught there: one graph), whether or not scalar outputs are captured."""
    with stenograph.config.patch(capture_scalar_outputs=captured):
        check(_caught_conversion, lambda i: (t(3, seed=i),), cnt, peer=False)  # torch.compile: its own error
