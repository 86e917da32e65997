"""`register_hook` on intermediates kept in the graph: gradients equal eager's under the eager
and aot_eager backends, one graph (torch.compile's count), and what still breaks."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo.testing

import stenograph


def _plus_one(x):
    y = x * 2
    y.register_hook(lambda g: g + 1)
    return y.sum()


def _used_before_and_after(x):
    y = x.sin()
    before = y * 3
    y.register_hook(lambda g: g * 10)
    return (before + y.cos()).sum()


def _returns_none(x):
    y = x * 2
    y.register_hook(lambda g: None)
    return y.sum()


class _Scale:
    def __init__(self, value):
        self.value = value


SCALE = _Scale(3.0)


def _closure_and_tensor(x, w):
    y = x * w
    y.register_hook(lambda g: g * SCALE.value + w)  # an object's attribute and a tensor it reads
    y.register_hook(lambda g: g - 1)  # both, in order
    return (y * y).sum()


def _grads(fn, args, compiled):
    args = [a.detach().clone().requires_grad_() for a in args]
    (compiled or fn)(*args).backward()
    return [a.grad for a in args]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_plus_one, _used_before_and_after, _returns_none, _closure_and_tensor])
def test_hooks_on_intermediates_in_one_graph(fn, backend):
    cnt = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    args = [torch.randn(4) for _ in range(fn.__code__.co_argcount)]
    for _ in range(2):
        for got, want in zip(_grads(fn, args, compiled), _grads(fn, args, None)):
            torch.testing.assert_close(got, want)
    assert cnt.frame_count == 1
    peer = torch._dynamo.testing.CompileCounter()
    torch.compile(fn, backend=peer, fullgraph=True)(*[a.clone().requires_grad_() for a in args]).backward()
    assert peer.frame_count == 1


def test_a_hook_reading_an_attribute_recompiles_when_it_changes(cnt):
    compiled = stenograph.compile(_closure_and_tensor, backend=cnt, fullgraph=True)
    args = [torch.randn(4), torch.randn(4)]
    try:
        for value in (3.0, 5.0):
            SCALE.value = value
            for got, want in zip(_grads(_closure_and_tensor, args, compiled), _grads(_closure_and_tensor, args, None)):
                torch.testing.assert_close(got, want)
    finally:
        SCALE.value = 3.0
    assert cnt.frame_count == 2


def test_hooks_that_still_break(cnt):
    seen = []

    def effect(x):
        y = x * 2
        y.register_hook(lambda g: seen.append(1))  # changes Python state: runs for real
        return y.sum()

    def handle_used(x):
        y = x * 2
        y.register_hook(lambda g: g * 2).remove()
        return y.sum()

    for fn in (effect, handle_used):
        with pytest.raises(stenograph.Unsupported):
            stenograph.compile(fn, backend="eager", fullgraph=True)(torch.randn(3, requires_grad=True))
        x = torch.randn(3)
        got, want = _grads(fn, [x], stenograph.compile(fn, backend=cnt)), _grads(fn, [x], None)
        torch.testing.assert_close(got, want)
    assert seen == [1, 1]  # the compiled run's hook, then the eager run's


def _doubling(grad):
    return grad * 2


def _halve_grad(param):
    param.grad.mul_(0.5)


def _on_inputs(x, w):
    x.register_hook(_doubling)
    w.register_hook(lambda g: g + SCALE.value * x.detach())  # a closure over an input
    w.register_post_accumulate_grad_hook(_halve_grad)
    return (x * w).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_hooks_on_tensors_passed_in_are_registered_on_them(backend):
    """`x.register_hook(h)` on an argument: registered on the caller's tensor after the graph,
    so it fires in backward and stays on the tensor (a second call adds another, as eagerly)."""
    cnt = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_on_inputs, backend=cnt, fullgraph=True)
    args = [torch.randn(3, requires_grad=True) for _ in range(2)]
    eager_args = [a.detach().clone().requires_grad_() for a in args]
    for _ in range(2):
        compiled(*args).backward()
        _on_inputs(*eager_args).backward()
        for got, want in zip(args, eager_args):
            torch.testing.assert_close(got.grad, want.grad)
            assert len(got._backward_hooks or {}) == len(want._backward_hooks or {})
    assert cnt.frame_count == 1


def _removed_twice(x, y):
    handle = x.register_hook(lambda g: g * 2)
    z = y * y
    handle.remove()
    handle.remove()
    return x, z, handle, handle


def _kept(x, y):
    handle = x.register_hook(lambda g: g * 2)
    alias = handle
    return x, y * y, handle, alias


class _Holder:
    handle = None


def _stored(x, y, holder):
    holder.handle = x.register_hook(lambda g: g * 3)
    return x, y * y


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_handles_of_hooks_on_tensors_passed_in_can_be_kept(backend):
    """A hook's handle returned, aliased, stored on an object or removed (twice): the real
    handle of the registration made after the graph, one graph as torch.compile makes."""
    y = torch.randn(2)
    for fn, extra, scale in ((_removed_twice, (), 1.0), (_kept, (), 2.0), (_stored, (_Holder(),), 3.0)):
        cnt = stenograph.testing.CompileCounterWithBackend(backend)
        x = torch.zeros(3, requires_grad=True)
        result = stenograph.compile(fn, backend=cnt, fullgraph=True)(x, y, *extra)
        result[0].backward(torch.tensor([1.0, 2.0, 3.0]))
        torch.testing.assert_close(x.grad, torch.tensor([1.0, 2.0, 3.0]) * scale)
        handles = result[2:] if fn is not _stored else (extra[0].handle,)
        assert all(isinstance(h, torch.utils.hooks.RemovableHandle) for h in handles)
        assert handles[0] is handles[-1]
        assert cnt.frame_count == 1
        if fn is _kept:  # the returned handle removes the hook, as eager's
            handles[0].remove()
            x.grad = None
            x.backward(torch.ones(3))
            torch.testing.assert_close(x.grad, torch.ones(3))


def test_grad_written_then_read_on_a_tensor_passed_in(cnt):
    def fn(x, g):
        x.grad = g * 2
        return x.grad + 1

    x = torch.ones(2, requires_grad=True)
    result = stenograph.compile(fn, backend=cnt, fullgraph=True)(x, torch.ones(2))
    torch.testing.assert_close(result, torch.full((2,), 3.0))
    torch.testing.assert_close(x.grad, torch.full((2,), 2.0))
    assert cnt.frame_count == 1

    def wrong_shape(x, g):
        x.grad = g[:1]
        return x + 1

    with pytest.raises(RuntimeError, match="assign a gradient of size"):
        stenograph.compile(wrong_shape, backend="eager")(torch.ones(2, requires_grad=True), torch.ones(2))


def test_compiled_autograd_graphs_compiled_by_stenograph():
    """torch's compiled autograd hands stenograph the backward as a graph calling torch's helpers
    (`torch._dynamo.external_utils`), operations it marks with torch's `allow_in_graph`, and the
    runners of hooks stenograph's own graphs registered: all traced, gradients as eager's."""
    from torch._dynamo import compiled_autograd

    def fn(x, w):
        y = x * w
        y.register_hook(lambda g: g * 2)
        x.register_hook(lambda g: g + 1)
        return (y * y).sum()

    args = [torch.randn(4), torch.randn(4)]
    eager = _grads(fn, args, None)
    graphs = []

    def compiler(gm):
        graphs.append(gm)
        return stenograph.compile(gm, backend="eager", fullgraph=True)

    compiled = stenograph.compile(fn, backend="eager", fullgraph=True)
    with compiled_autograd._enable(compiler):
        got = _grads(fn, args, compiled)
    assert graphs  # the backward went through compiled autograd
    for a, b in zip(got, eager):
        torch.testing.assert_close(a, b)
