"""`torch.autograd.Function` subclasses that change an input in place (`ctx.mark_dirty`) or define
forward-mode AD (`ctx.save_for_forward`, `jvp`).

A dirty input stays one graph node calling `Fn.apply`: the result is the input itself (`y is x`),
the caller's tensor is changed, version counters move (exactly as eager under the eager backend,
where the real `apply` runs), and autograd still refuses a saved tensor changed afterwards. A
Function with a `jvp` is one node outside a forward-AD level (guarded), and runs eagerly at a
graph break inside one, so its tangents are the user's `jvp`'s (torch.compile gives the
forward ops' own derivatives there).
"""

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import stenograph
from stenograph.testing import CompileCounterWithBackend

from ._support import assert_same, check, t

BACKENDS = ["eager", "aot_eager"]


class TripleInPlace(torch.autograd.Function):
    """Scales its input in place and returns it; the backward is deliberately not the
    derivative (+ 1), so only the user's backward gives these gradients."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(3)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 3 + 1


def dirty_intermediate(a):
    y = a * 2
    z = TripleInPlace.apply(y)
    return z.cos(), y, z is y


def dirty_input(x):
    z = TripleInPlace.apply(x)
    return z + 1, z is x


@pytest.mark.parametrize("backend", BACKENDS)
def test_mark_dirty_on_an_intermediate(backend):
    """The result is the intermediate itself, changed; gradients go through the user's backward."""
    check(dirty_intermediate, lambda i: (t(3, seed=i, grad=True),), CompileCounterWithBackend(backend), grads=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mark_dirty_changes_the_callers_tensor(backend):
    """`check` compares the argument after each call; one graph for both calls."""
    check(dirty_input, lambda i: (t(3, seed=i),), CompileCounterWithBackend(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_version_counter_of_a_dirty_input_moves(backend):
    """The eager backend runs the real apply: the same count as eager. AOTAutograd writes the
    new value into the input once (its count moves, as autograd's checks need)."""
    compiled = stenograph.compile(dirty_input, backend=backend)
    x_e, x_c = t(3), t(3)
    dirty_input(x_e)
    compiled(x_c)
    assert x_e._version == 2  # the in-place mul_, and apply marking the input dirty
    assert x_c._version == 2 if backend == "eager" else x_c._version >= 1


def _saved_then_dirtied(a):
    y = a * 2
    w = y.sin()  # saves y for its backward
    TripleInPlace.apply(y)
    return w


def test_autograd_refuses_a_saved_tensor_changed_by_mark_dirty():
    """Eager's error on backward, from the compiled graph too (under aot_eager AOTAutograd meets
    it while compiling, and the frame runs eagerly with a warning, giving the same error)."""
    a = t(3, grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _saved_then_dirtied(a).sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        stenograph.compile(_saved_then_dirtied, backend="eager")(a).sum().backward()


class UnreturnedDirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_dirty_input_not_returned_raises_eagers_error(cnt):
    """apply refuses it; the refusal happens while tracing, so the call runs at a break and
    raises as eager does."""
    with pytest.raises(RuntimeError, match="marked as dirty"):
        UnreturnedDirty.apply(t(3))
    compiled = stenograph.compile(lambda x: UnreturnedDirty.apply(x + 1), backend=cnt)
    with pytest.raises(RuntimeError, match="marked as dirty"):
        compiled(t(3))


class SquareWithJvp(torch.autograd.Function):
    """Both derivatives deliberately off (+ 1, + 10), so each shows which path computed it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x + 1

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return tangent * 2 * x + 10


def square_with_jvp(a):
    return SquareWithJvp.apply(a.sin()).cos()


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_for_forward_outside_forward_ad_is_one_graph(backend):
    # torch.compile breaks at a Function with its own jvp: the graphs around the apply and the
    # forward compiled as a frame of its own
    cnt = CompileCounterWithBackend(backend)
    check(square_with_jvp, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True, torch_graphs=3)


def _tangent(fn, primal, tangent):
    with fwAD.dual_level():
        return fwAD.unpack_dual(fn(fwAD.make_dual(primal, tangent))).tangent


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_ad_uses_the_users_jvp(backend):
    """Inside a dual level the apply runs eagerly between two graphs; calls outside reuse the
    first entry, calls inside the second pair."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(square_with_jvp, backend=cnt)
    x = t(3, grad=True)
    assert_same(compiled(x), square_with_jvp(x))
    assert cnt.frame_count == 1
    for seed in range(2):
        primal, tangent = t(3, seed=seed), t(3, seed=seed + 10)
        assert_same(_tangent(compiled, primal, tangent), _tangent(square_with_jvp, primal, tangent))
        assert cnt.frame_count == 3
    compiled(x)
    assert cnt.frame_count == 3


def test_forward_ad_through_a_function_without_jvp_raises_eagers_error(cnt):
    from .test_autograd_function import ScaledSquare

    def fn(x):
        return ScaledSquare.apply(x, 2.0)

    with pytest.raises(RuntimeError, match="jvp"):
        _tangent(fn, t(3), t(3))
    with pytest.raises(RuntimeError, match="jvp"):
        _tangent(stenograph.compile(fn, backend=cnt), t(3), t(3))


@pytest.mark.slow
@pytest.mark.parametrize("fn", [dirty_intermediate, dirty_input])
def test_inductor_with_mark_dirty(fn):
    grad = fn is dirty_intermediate
    check(fn, lambda i: (t(3, seed=i, grad=grad),), CompileCounterWithBackend("inductor"), grads=grad)
