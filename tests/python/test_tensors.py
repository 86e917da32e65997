"""Tensors: torch.Size arithmetic, indexing and index assignment, in-place ops (also on inputs,
visible to the caller), requires_grad_, dtype conversions and random ops under a seed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import stenograph

from ._support import check, t


def _sizes(x):
    b, c, *rest = x.shape
    new_shape = x.shape[:-1] + (2, x.shape[-1] // 2)
    numel = x.shape.numel()
    return x.reshape(new_shape), x.view(b * c, -1), torch.Size([b, c]), len(rest), numel, x.size(-1) * 2


def test_torch_size_arithmetic(cnt):
    check(_sizes, lambda i: (t(2, 3, 4, seed=i),), cnt)


def _indexing(x, idx, mask):
    a = x[0]
    b = x[:, 1:3]
    c = x[..., -1]
    d = x[None, :, None]
    e = x[idx]
    f = x[mask]
    g = x[1:, ::2]
    return a, b, c, d, e, f, g


def test_getitem_with_slices_ellipsis_none_and_tensor_indices(cnt):
    def args(i):
        return t(4, 5, seed=i), torch.tensor([0, 2]), torch.tensor([True, False, True, False])

    # a boolean-mask index has a data-dependent shape: a graph break, as in torch.compile
    check(_indexing, args, cnt, graphs=2)


def _setitem(x, idx):
    y = x.clone()
    y[0] = 1.0
    y[:, 1:3] = 2.0
    y[..., -1] = y[..., 0] * 3
    y[idx] = 0.0
    y[y > 1.5] = -1.0
    return y


def test_setitem_on_intermediates(cnt):
    check(_setitem, lambda i: (t(4, 5, seed=i, grad=False), torch.tensor([3])), cnt)


def _inplace_on_inputs(x, buf):
    buf.add_(1)
    buf[0] = x.sum()
    x.mul_(2)
    return x + buf


def test_in_place_ops_on_inputs_are_visible_to_the_caller(cnt):
    check(_inplace_on_inputs, lambda i: (t(3, seed=i), t(3, seed=i + 1)), cnt)


def _grad_and_dtypes(x):
    w = torch.ones(3).requires_grad_()
    y = (x * w).to(torch.float64)
    z = y.float() + x.double().float() + x.to(dtype=torch.float16).float()
    return z, w.requires_grad, y.dtype, x.long().dtype


def test_requires_grad_and_conversions(cnt):
    # requires_grad_() runs eagerly between graphs, as in torch.compile
    check(_grad_and_dtypes, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True, graphs=2)


def _random(x):
    noise = torch.randn(3)
    drop = F.dropout(x, p=0.5, training=True)
    return x + noise + torch.rand_like(x), drop


def test_random_ops_under_a_seed(cnt):
    check(_random, lambda i: (t(3, seed=i),), cnt)


def _inplace_chain(x):
    y = x.clone()
    y += 1
    y *= 2
    y.clamp_(max=3.0)
    y.sub_(x).div_(2)
    return y


def test_in_place_operator_chain(cnt):
    check(_inplace_chain, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True)


def _return_types(x):
    top = x.topk(2)
    return x.sort().values, torch.max(x, 0).indices, top, top.indices


def test_torch_return_types_keep_their_names(cnt):
    check(_return_types, lambda i: (t(5, seed=i),), cnt)
    result = stenograph.compile(_return_types, backend="eager")(t(5))
    assert type(result[2]) is torch.return_types.topk


def _scaled_grads(weight, bias):
    return weight.grad * 2, bias.grad is None


def _leaves(i):
    weight, bias = t(3, seed=i, grad=True), t(3, seed=10 + i, grad=True)
    (weight * 2).sum().backward()  # a gradient for the weight only
    return weight, bias


def test_grad_of_a_leaf_read_from_the_frame(cnt):
    """`p.grad` (as optimizers read it) is a graph input; a None gradient is guarded as None."""
    check(_scaled_grads, _leaves, cnt)
    compiled = stenograph.compile(_scaled_grads, backend=cnt)
    weight, bias = _leaves(0)
    bias.grad = torch.ones(3)
    out, no_grad = compiled(weight, bias)
    assert not no_grad and torch.equal(out, weight.grad * 2)
    assert cnt.frame_count == 2  # the bias gradient appeared: compiled again


def _grad_of_computed(x):
    y = x * 2
    return y, y.grad


def test_grad_of_a_computed_tensor_breaks():
    with pytest.warns(UserWarning, match="not a leaf"):  # eager's, from the eager read at the break
        reasons = stenograph.explain(_grad_of_computed)(t(3, grad=True)).break_reasons
    assert [r.reason for r in reasons] == [
        "reading Tensor.grad of tensor mul (3, float32), computed inside the compiled function"
    ]


def _grads_of_new_tensors(x):
    made = torch.ones(2, 2)
    computed_without_grad = x.detach() * 2
    return made.grad, computed_without_grad.grad, (x * 2).sum()


def test_grad_of_a_tensor_made_in_the_frame_is_none(cnt):
    """`.grad` of a tensor made in the frame that eager reads without a warning (a leaf, or one
    that needs no grad) is None, in the graph (torch.compile: the same)."""
    check(_grads_of_new_tensors, lambda i: (t(2, 2, seed=i, grad=True),), cnt, graphs=1)


def _add_into(a, b, out):
    torch.add(a, b, out=out)
    return out * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_out_argument_resizing_a_graph_input_breaks(backend):
    """`out=` an empty tensor the op resizes: AOTAutograd's functional graph cannot resize an
    input, so the op runs eagerly at a break (torch.compile breaks too); an `out=` tensor of the
    right size stays in the graph."""
    cnt = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_add_into, backend=cnt)
    a, b = t(3), t(3, seed=1)
    out, expected = torch.empty(0), torch.empty(0)
    torch.testing.assert_close(compiled(a, b, out), _add_into(a, b, expected))
    assert out.shape == (3,) and torch.equal(out, expected)
    assert cnt.frame_count == 1  # the multiplication after the break; the add ran eagerly
    stenograph.reset()
    cnt.clear()
    compiled_fit = stenograph.compile(_add_into, backend=cnt)
    fits = torch.empty(3)
    torch.testing.assert_close(compiled_fit(a, b, fits), _add_into(a, b, torch.empty(3)))
    assert cnt.frame_count == 1 and cnt.op_count == 2  # one graph: add into the input, then mul


def _outer_into(inputs):
    return torch.outer(**inputs)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_out_argument_of_the_right_size_on_a_recompile(backend):
    """`out=` a tensor of the op's size, called again with other sizes: the recompile that makes
    the sizes symbolic must not take the op's own size check for a resize (torch.compile's test
    `test_out_variants_with_resizing_on_graph_inputs_with_dynamic`); an `out=` that the op does
    resize still breaks."""
    cnt = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_outer_into, backend=cnt, fullgraph=True)
    for i, (n, m) in enumerate([(2, 1), (6, 1), (4, 1), (6, 1)]):
        given = {"input": t(n, seed=i), "vec2": t(m, seed=i + 1), "out": torch.empty(n, m)}
        expected = {**given, "out": torch.empty(n, m)}
        assert compiled(given) is given["out"]
        torch.testing.assert_close(given["out"], _outer_into(expected))
    assert cnt.frame_count == 3  # the repeated (6, 1) reuses its frame
    resized = {"input": t(5), "vec2": t(1), "out": torch.empty(3, 1)}
    with pytest.raises(stenograph.errors.Unsupported, match=r"torch\.outer\(\)"):
        compiled(resized)  # the op cannot resize a graph input


class _Table:
    @classmethod
    def weights(cls):
        return torch.Tensor([4, 5])


def _legacy_constructors(x):
    return (
        x.sum() + _Table.weights().sum(),
        torch.LongTensor([1, 2]) + x.shape[0],
        torch.Tensor((1.5, 2)),
        torch.BoolTensor([True, False]),
        torch.DoubleTensor([[1, 2], [3, 4]]) * 2,
        torch.Tensor(2, 3).shape,  # uninitialized values: only the shape is compared
        torch.Tensor().shape,
    )


def test_legacy_tensor_constructors(cnt):
    # torch.Tensor(data) in the default dtype, the typed constructors in theirs, sizes as empty
    check(_legacy_constructors, lambda i: (t(6, 4, seed=i),), cnt)


def test_legacy_constructor_follows_the_default_dtype(cnt):
    compiled = stenograph.compile(lambda x: x + torch.Tensor([1, 2]), backend=cnt)
    x = torch.ones(2, dtype=torch.float64)
    assert compiled(x).dtype == torch.float64
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert compiled(x.float()).dtype == torch.float64  # the default is guarded: recompiled
    finally:
        torch.set_default_dtype(previous)
    assert cnt.frame_count == 2


def _stored_through_a_double(x):
    return torch.tensor([x.sum()], dtype=torch.float32), torch.tensor([[x.max()], [x.min()]], dtype=torch.complex64)


def test_tensor_of_integer_tensors_in_a_float_dtype_rounds_as_eager(cnt):
    """Eager reads each element as a Python float, then stores it: an int64 such as
    2**53 + 2**29 + 1 rounds twice (to 2**53), not once (to 2**53 + 2**30)."""
    check(_stored_through_a_double, lambda i: (torch.tensor([2**53 + 2**29 + 1 - i, 0]),), cnt)


def test_legacy_constructor_of_tensors_eager_refuses_runs_eagerly():
    """`torch.LongTensor([t])` of a float tensor raises TypeError eagerly (by its dtype);
    `torch.IntTensor([t])` of an int64 one raises for values past int32's range: both run eagerly."""
    of_floats = lambda x: torch.LongTensor([x.sum()])  # noqa: E731
    with pytest.raises(stenograph.Unsupported, match="as torch.int64: eager raises TypeError for its type"):
        stenograph.compile(of_floats, backend="eager", fullgraph=True)(torch.ones(2))
    with pytest.raises(TypeError, match="only integer tensors"):
        stenograph.compile(of_floats, backend="eager")(torch.ones(2))
    of_int64 = lambda x: torch.IntTensor([x.sum()])  # noqa: E731
    reasons = [r.reason for r in stenograph.explain(of_int64)(torch.ones(2, dtype=torch.int64)).break_reasons]
    assert len(reasons) == 1
    assert "int64) as torch.int32: eager raises RuntimeError for a value such as -9223372036854775808" in reasons[0]
    with pytest.raises(RuntimeError, match="without overflow"):
        stenograph.compile(of_int64, backend="eager")(torch.tensor([2**40, 0]))


def _tagging(x, xs):
    x.tag = {"step": 1}
    x.count = getattr(x, "count", 0) + 1
    return x + 1, xs[0].tag, x.count, hasattr(xs[0], "count")  # the same tensor through a list


def test_python_attributes_written_on_an_input_tensor(cnt):
    compiled = stenograph.compile(_tagging, backend=cnt, fullgraph=True)
    x, x_eager = torch.ones(2), torch.ones(2)
    for _ in range(2):  # the second call finds the attributes the first one wrote
        assert repr(compiled(x, [x])) == repr(_tagging(x_eager, [x_eager]))
        assert (x.tag, x.count) == (x_eager.tag, x_eager.count)
    assert x.count == 2
    assert cnt.frame_count == 2  # `count` absent, then present: guarded


def test_tensor_own_attributes_and_new_tensors_still_break(cnt):
    def fn(x):
        y = x * 2
        y.tag = 1  # a tensor made in the frame
        x.requires_grad = False  # torch.Tensor's own attribute
        return y + 1

    x = torch.ones(2)
    torch.testing.assert_close(stenograph.compile(fn, backend=cnt)(x), fn(torch.ones(2)))
    assert cnt.frame_count == 2


def _data_then_add(x, y):
    x.data = y
    x.add_(1)
    return x


def _data_handed_on(x, y):
    z = x
    x.data = y  # y is read first: the graph's inputs are reordered for AOTAutograd's write-back
    y.data = torch.zeros([0])
    return x, x is z


def _run_five_times(fn, backend, requires_grad):
    cnt = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    for _ in range(5):
        eager_x, eager_y, x, y = (torch.ones(6, requires_grad=requires_grad) for _ in range(4))
        expected, actual = fn(eager_x, eager_y), compiled(x, y)
        assert repr(actual) == repr(expected)
        assert [x.shape, y.shape] == [eager_x.shape, eager_y.shape] and torch.equal(x, eager_x)
        if backend == "eager":  # AOTAutograd writes the storage back with `set_`, one version more (as torch.compile)
            assert (x._version, y._version) == (eager_x._version, eager_y._version)
        if requires_grad:
            grad = torch.randn(6)
            eager_x.backward(grad)
            x.backward(grad)
            assert torch.equal(x.grad, eager_x.grad)
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_data_assigned_on_inputs_in_one_graph(backend):
    """`x.data = y` swaps x's storage for y's, keeping x's autograd identity: one graph, as
    torch.compile makes (`set_` without grad, its version bump taken back)."""
    _run_five_times(_data_handed_on, backend, requires_grad=True)
    if backend == "eager":  # AOTAutograd refuses `set_` plus a change of data on one input
        _run_five_times(_data_then_add, backend, requires_grad=False)


def test_data_assignment_guards_the_new_sizes(cnt):
    def fn(x, y):
        x.data = y
        return x.sum(), x.shape

    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    for n, m in [(2, 5), (2, 7), (3, 8)]:
        x = torch.ones(n)
        assert compiled(x, torch.ones(m)) == fn(torch.ones(n), torch.ones(m))
        assert x.shape == (m,)


def test_data_assignments_that_still_break(cnt):
    def cycle(x, y):  # no order of the inputs writes both storages back
        x.data = y
        y.data = x
        return x + y

    def dtype(x):
        x.data = x.double()
        return x + 1

    for fn, args in [(cycle, (torch.ones(2), torch.zeros(2))), (dtype, (torch.ones(2),))]:
        eager_args = [a.clone() for a in args]
        assert repr(stenograph.compile(fn, backend=cnt)(*args)) == repr(fn(*eager_args))
        assert all(torch.equal(a, e) and a.dtype == e.dtype for a, e in zip(args, eager_args))
    assert cnt.frame_count == 4  # each: a graph before the break and one after it


def _sizes_compared(x):
    picked = x.cos() if x.size() != (2, 3) else x.sin()
    return picked, (
        x.size() == torch.Size([3, 2]),
        list(x.size()) == [3, 2],
        x.shape < (3, 3),
        x.shape >= (2,),
        x.shape == [2, 3],  # a tuple and a list: never equal
        tuple(x.shape) > (2, 3, 1),
    )


def test_sizes_compared_with_tuples_and_lists_once_dynamic(cnt):
    """Python's item-by-item comparison of sequences holding symbolic sizes (it was refused once
    automatic dynamic shapes made the sizes symbolic)."""
    shapes = [(2, 3), (3, 2), (2, 3), (4, 5), (3, 2), (3, 3)]
    check(_sizes_compared, lambda i: (torch.ones(shapes[i]),), cnt, calls=len(shapes), graphs=4)


def test_data_assignment_under_functorch_transforms_runs_eagerly(cnt):
    """Inputs wrapped by functionalize or vmap have no storage of their own to compare: the
    write breaks (under fullgraph: Unsupported), and eager's result or error comes out."""

    def fn(x, y):
        x.data = y
        return x + 1

    out = torch.func.functionalize(stenograph.compile(fn, backend=cnt))(torch.ones(5), torch.zeros(5))
    assert torch.equal(out, torch.ones(5))
    with pytest.raises(stenograph.Unsupported, match="sharing storage"):
        torch.func.functionalize(stenograph.compile(fn, backend="eager", fullgraph=True))(torch.ones(5), torch.zeros(5))
    with pytest.raises(RuntimeError, match="under vmap transform is not allowed"):
        torch.vmap(stenograph.compile(fn, backend=cnt))(torch.ones(3, 5), torch.ones(3, 5))
