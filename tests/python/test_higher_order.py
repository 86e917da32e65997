"""Higher-order torch functions: `torch.cond` (recorded with branch graphs) and the function
transforms `torch.func.grad` / `torch.vmap` (recorded with their body graphs).

Compiled vs eager on results, gradients and printed output, with graph counts beside
torch.compile's.
"""

import pytest
import torch
from torch import nn

import stenograph
from stenograph.testing import CompileCounterWithBackend

from ._support import check, t

BACKENDS = ["eager", "aot_eager"]


def _signs(i):
    """Arguments whose branch alternates: positive, negative, positive."""
    x = t(3, 4, seed=i, grad=True)
    with torch.no_grad():
        x.abs_().mul_(1 if i % 2 == 0 else -1)
    return (x,)


def cond_fn(x):
    y = x * 2
    out = torch.cond(y.sum() > 0, lambda a: a.sin() * 3, lambda a: a.cos() - a, (y,))
    return out + 1


def cond_two_outputs(x):
    def true_fn(a, b):
        return a + b, a * b

    def false_fn(a, b):
        return a - b, b.exp()

    p, q = torch.cond(x.mean() > 0, true_fn, false_fn, [x, x.tanh()])
    return p * q


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [cond_fn, cond_two_outputs])
def test_cond_is_one_graph_with_both_branches(backend, fn):
    cnt = CompileCounterWithBackend(backend)
    check(fn, _signs, cnt, calls=3, grads=True)
    nodes = [n for n in cnt.graphs[0].graph.nodes if n.target is torch.ops.higher_order.cond]
    assert len(nodes) == 1
    assert sum(1 for n in cnt.graphs[0].graph.nodes if n.op == "get_attr") == 2


def test_the_cond_operator_called_directly_is_one_graph(cnt):
    """`torch.ops.higher_order.cond`, the operator `torch.cond` calls (torch's eager path compiles
    a wrapper calling it), with nested functions as branches."""

    def fn(pred, x):
        def deep(a):
            return torch.cond(a[0][0] > 0, lambda b: b + 2, lambda b: b - 2, [a])

        return torch.ops.higher_order.cond(pred, lambda a: a * 2, deep, [x])

    check(fn, lambda i: (torch.tensor(i % 2 == 0), t(3, 3, seed=i)), cnt, calls=3)
    assert cnt.frame_count == 1


def test_cond_on_a_python_bool_inlines_the_branch(cnt):
    def fn(x, flag):
        return torch.cond(flag, lambda a: a + 1, lambda a: a - 1, (x,))

    check(fn, lambda i: (t(3, seed=i), i % 2 == 0), cnt, calls=2, graphs=2)
    assert all(n.target is not torch.ops.higher_order.cond for g in cnt.graphs for n in g.graph.nodes)


class Gate(nn.Module):
    """Branches that read a parameter, a closure's tensor and a value computed before the cond."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, bias):
        y = x * 3
        return torch.cond(x.sum() > 0, lambda a: self.lin(a) + bias, lambda a: a * y - self.lin.bias, (x,)).sin()


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_branches_reading_other_tensors_take_them_as_operands(backend):
    torch.manual_seed(0)
    cnt = CompileCounterWithBackend(backend)
    check(Gate(), lambda i: (*_signs(i), t(4, seed=9, grad=True)), cnt, calls=3, grads=True)
    (cond,) = [n for n in cnt.graphs[0].graph.nodes if n.target is torch.ops.higher_order.cond]
    assert len(cond.args[3]) == 5  # x, then bias, lin.weight, lin.bias and y


def _stacked_powers(a):
    parts = []  # a list the branch makes and fills: its own state, not the program's
    for k in range(1, 4):
        parts.append(a**k)
    return torch.stack(parts).sum(0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cond_branch_building_its_own_list_is_one_graph(backend):
    def fn(x):
        return torch.cond(x.sum() > 0, _stacked_powers, lambda a: a.cos(), (x,))

    check(fn, lambda i: (_signs(i)[0],), CompileCounterWithBackend(backend), calls=3, grads=True)


def test_cond_guards(cnt):
    compiled = stenograph.compile(cond_fn, backend=cnt)
    for i in range(3):
        torch.testing.assert_close(compiled(*_signs(i)), cond_fn(*_signs(i)))
    assert cnt.frame_count == 1  # either branch: the predicate is data, not a guard
    x = t(5, 4)
    torch.testing.assert_close(compiled(x), cond_fn(x))
    assert cnt.frame_count == 2  # a new shape compiles again


def transforms(x):
    y = x.sin()
    g = torch.func.grad(lambda a: (a**3).sum())(y)
    v = torch.vmap(lambda row: row * row.sum())(y)
    w = torch.func.vmap(lambda a, b: a * b, in_dims=(0, None))(y, y[0])
    return (g + v + w).cos()


@pytest.mark.parametrize("backend", BACKENDS)
def test_func_grad_and_vmap_are_captured(backend):
    cnt = CompileCounterWithBackend(backend)
    check(transforms, lambda i: (t(3, 4, seed=i, grad=True),), cnt, grads=True)
    targets = {getattr(n.target, "__name__", "") for n in cnt.graphs[0].graph.nodes}
    assert {"grad_apply", "vmap_apply"} <= targets


def test_transforms_guards(cnt):
    compiled = stenograph.compile(transforms, backend=cnt)
    for i in range(2):
        torch.testing.assert_close(compiled(t(3, 4, seed=i)), transforms(t(3, 4, seed=i)))
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled(t(3, 5)), transforms(t(3, 5)))
    assert cnt.frame_count == 2  # a new shape


def test_transform_reading_other_tensors(cnt):
    def fn(x, w):
        s = x.sum()
        v = torch.vmap(lambda row: row * s + w)(x.cos())
        g = torch.func.grad(lambda a: (a * w).pow(2).sum())(x)
        return v + g

    check(fn, lambda i: (t(3, 4, seed=i, grad=True), t(4, seed=7, grad=True)), cnt, grads=True)


def _vmapped_in_place(x, z):
    y = torch.vmap(torch.Tensor.acos_)(x)
    a, b = torch.vmap(lambda p, q: (p.mul_(2), q + 1))(x, z)
    moved = torch.vmap(lambda r: r, in_dims=1, out_dims=0)(z)
    return y is x, a is x, b is z, moved is z, y, b, moved


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_returning_its_argument_gives_that_tensor(backend):
    # torch.compile's own test (`y is x` after a vmapped in-place op): eagerly vmap hands back
    # the very tensor its function returned as it came in, along the same dimension (this was
    # a new tensor: `y is x` was False, silently)
    cnt = CompileCounterWithBackend(backend)
    results = check(_vmapped_in_place, lambda i: (t(4, 2, seed=i).clamp(-0.4, 0.4), t(4, 2, seed=i + 1)), cnt)
    assert results[0][:4] == (True, True, False, False)


def test_grad_with_aux_runs_eagerly_at_a_break(cnt):
    def fn(x):
        return torch.func.grad(lambda a: ((a**2).sum(), a), has_aux=True)(x.cos())[0].sin()

    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(2):
        torch.testing.assert_close(compiled(t(3, 4, seed=i)), fn(t(3, 4, seed=i)))
    assert cnt.frame_count == 2  # before and after the eager transform (torch.compile: 1)


def test_branch_with_python_effects_raises_as_eager_does(cnt):
    """torch.cond refuses such a branch in eager too; run eagerly at the break, it raises the same."""
    log = []

    def fn(x):
        def true_fn(a):
            log.append(1)
            return a + 1

        return torch.cond(x.sum() > 0, true_fn, lambda a: a - 1, (x,)).sin()

    with pytest.raises(Exception) as eager:
        fn(t(3))
    with pytest.raises(type(eager.value)):
        stenograph.compile(fn, backend=cnt)(t(3))
    assert log == []


@pytest.mark.slow
def test_cond_under_inductor():
    check(cond_fn, _signs, CompileCounterWithBackend("inductor"), calls=3, grads=True)


def test_cond_on_a_predicate_of_several_elements_raises_eagers_error(cnt):
    def fn(x, pred):
        return torch.cond(pred, lambda a: a.sin(), lambda a: a.cos(), (x,))

    compiled = stenograph.compile(fn, backend=cnt)
    x, pred = t(4), t(2, seed=3)
    with pytest.raises(RuntimeError) as eager:
        fn(x, pred)
    with pytest.raises(RuntimeError) as compiled_error:
        compiled(x, pred)
    assert str(compiled_error.value) == str(eager.value)


# -- map (functorch.experimental.control_flow.map) ------------------------------------------------


class _Mapped(nn.Module):
    """A body over slices that reads a parameter and an extra argument; two outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, xs, scale):
        from functorch.experimental.control_flow import map as map_

        def body(x, s):
            y = x.sin() + self.lin(x) * s
            return y, y.sum()

        stacked, sums = map_(body, xs, scale)
        return stacked * 2, sums


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_is_one_graph_with_its_body(backend):
    torch.manual_seed(0)
    cnt = CompileCounterWithBackend(backend)
    check(_Mapped(), lambda i: (t(4, 5, seed=i, grad=True), t(5, seed=i + 3, grad=True)), cnt, grads=True)
    nodes = [n for n in cnt.graphs[0].graph.nodes if n.target is torch.ops.higher_order.map_impl]
    assert len(nodes) == 1
    assert len(nodes[0].args[2]) == 3  # scale, then lin.weight and lin.bias lifted


def test_map_guards_the_leading_size(cnt):
    torch.manual_seed(0)
    module = _Mapped()
    compiled = stenograph.compile(module, backend=cnt)
    for rows in (4, 4, 6):
        xs, scale = t(rows, 5, seed=rows), t(5)
        for got, want in zip(compiled(xs, scale), module(xs, scale)):
            torch.testing.assert_close(got, want)
    assert cnt.frame_count == 2


def test_map_body_changing_python_state_runs_eagerly(cnt):
    from functorch.experimental.control_flow import map as map_

    seen = []

    def fn(xs):
        def body(x):
            seen.append(1)
            return x + 1

        return map_(body, xs)

    xs = t(3, 2)
    torch.testing.assert_close(stenograph.compile(fn, backend=cnt)(xs), xs + 1)
    assert len(seen) == 3  # the body ran eagerly, once per slice
