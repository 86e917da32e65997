"""Regressions found by the differential fuzzer (tests/fuzz, FINDINGS F1, F3, F7, F8, F14, F15, F16).

Each compares the compiled function with eager (results, arguments and globals afterwards, the
RNG stream), with exact graph counts and a second identical call that compiles nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from helpers import assert_same

import stenograph
from stenograph.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


def _scaled(x, n):
    i = 1
    i *= n  # an in-place operator on a number: `i = i * n`, with n symbolic after a change
    return x + i


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_operator_on_a_symbolic_number(backend):
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_scaled, backend=cnt)
    x = torch.randn(3)
    for n in (2, 3, 4, 4):
        assert_same(compiled(x, n), _scaled(x, n))
    assert cnt.frame_count == 2  # 2, then n symbolic from 3 on


def _draws_unused(x):
    unused = torch.rand(3)  # noqa: F841 - the draw still advances the generator
    torch.randn(2).normal_()
    torch.randn(x.shape).clamp(min=-1.0)  # used only by an operation whose result is unused
    shaped = x.reshape(torch.randn(x.shape).shape)  # a draw whose size alone is used
    return shaped + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_random_draws_advance_the_generator(backend):
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_draws_unused, backend=cnt)
    for size in (2, 3, 4, 4):  # from 3 on the size is symbolic
        x = torch.zeros(size)
        torch.manual_seed(0)
        expected = _draws_unused(x), torch.rand(4)
        torch.manual_seed(0)
        actual = compiled(x), torch.rand(4)
        assert_same(actual, expected)
    assert cnt.frame_count == 2


G = 0


def _global_from_popped(x, d):
    global G
    G = d.get("a", 0)
    d.pop("a", None)
    return x + 1


def _global_from_list_pop(x, lst):
    global G
    v = lst.pop()
    if x.size(1) % 2 == 0:
        G = v
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_written_from_a_container_the_frame_then_shrinks(backend):
    """The global's new value is taken before the container's change is replayed."""
    global G
    for fn, calls in (
        (_global_from_popped, [(torch.zeros(1), {"a": 2}), (torch.zeros(1), {"a": 5})]),
        (_global_from_list_pop, [(torch.randn(3, 5), [3, 1, 1]), (torch.randn(5, 6), [0, 2, 2])]),
    ):
        cnt = CompileCounterWithBackend(backend)
        compiled = stenograph.compile(fn, backend=cnt)
        for x, box in calls:
            G = 0
            mine, theirs = type(box)(box), type(box)(box)
            expected = fn(x, theirs), theirs, G
            G = 0
            actual = compiled(x, mine), mine, G
            assert_same(actual, expected)
        assert cnt.frame_count == (1 if fn is _global_from_popped else 2)


def _long_branch_after_two_breaks() -> Callable:
    """`if bool(...)` in a resume function whose jump needs an EXTENDED_ARG prefix (its body is
    longer than 255 code units): the resume offset after the call lands on that prefix (F7)."""
    body = "".join(f"        a = a + {i}\n" for i in range(80))
    source = (
        "def f(x, s):\n"
        "    a = 0\n"
        "    if x.mean() > 0:\n"
        "        a = 1\n"
        "    if bool(torch.tensor(s) > 0):\n"
        f"{body}"
        "    return x + a\n"
    )
    namespace = {"torch": torch}
    exec(source, namespace)
    return namespace["f"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_before_a_jump_with_an_extended_argument(backend):
    fn = _long_branch_after_two_breaks()
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(fn, backend=cnt)
    for x, s in ((torch.ones(2), 1.0), (torch.ones(2), 1.0), (-torch.ones(2), -1.0)):
        assert_same(compiled(x, s), fn(x, s))
    assert cnt.frame_count == 5  # the frame and its resume functions, for both branches


def _mutates_the_base_of_a_view(x, v):
    x.mul_(2)  # v, a view of x, changes too
    return v + 1


def _view_kept_across_a_break(x):
    v = x.reshape(-1).reshape(x.shape)  # a view of x, passed to the resume function with x
    x.mul_(-1.0)
    if v.sum() > -1.0:  # a graph break: the resume function changes x in place
        x.mul_(-1.0)
    return v


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_aliasing_a_changed_input_with_symbolic_sizes(backend):
    """An input that is a view of another input the graph changes in place, with dynamic sizes
    (F14): AOTAutograd rebuilds the view from one synthetic base by replaying its view function,
    which needs the view's own size symbols as graph inputs."""
    for fn, make_args, frames in (
        (_mutates_the_base_of_a_view, lambda x: (x, x[1:]), 2),
        (_mutates_the_base_of_a_view, lambda x: (x, x.t()), 2),
        (_view_kept_across_a_break, lambda x: (x,), 4),
        # two overlapping views of a base that is no input: AOTAutograd guards the base's size
        (_add_to_one_of_two_views, lambda x: (x[:-1], x[1:]), 2),
    ):
        cnt = CompileCounterWithBackend(backend)
        compiled = stenograph.compile(fn, backend=cnt)
        for n in (2, 2, 3, 4, 4):  # from 3 on the sizes are symbolic
            x = -torch.arange(n * 3.0).reshape(n, 3) - 1
            mine, theirs = x.clone(), x.clone()
            expected = fn(*make_args(theirs)), theirs
            actual = compiled(*make_args(mine)), mine
            assert_same(actual, expected)
        assert cnt.frame_count == frames  # static, then symbolic (each resume function too)


def _add_to_one_of_two_views(a, b):
    a.add_(1)  # b shares a's storage: its values change too where the two overlap
    return a + b.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_that_overlap_where_the_compiled_ones_did_not(backend):
    """Two views of one storage with the sizes and strides of the compiled call, that overlap now
    and did not then (F15): the graph's functional form depends on the overlap, so the storage
    offsets are guarded."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_add_to_one_of_two_views, backend=cnt)
    calls = (
        lambda: (lambda base: (base[0], base[1]))(torch.arange(12.0).reshape(2, 2, 3)),  # apart
        lambda: (lambda base: (base[:2], base[1:]))(torch.arange(9.0).reshape(3, 3)),  # overlapping
        lambda: (lambda base: (base[:2], base[1:]))(torch.arange(9.0).reshape(3, 3)),
    )
    for make in calls:
        mine, theirs = make(), make()
        expected = _add_to_one_of_two_views(*theirs), theirs[0]._base
        actual = compiled(*mine), mine[0]._base
        assert_same(actual, expected)
    assert cnt.frame_count == 2


class _Scale:
    k = 2

    def __init__(self, v):
        self.v = v


def _float_from_numbers(x, n, obj):
    v1 = float(_Scale.k) * obj.v - _Scale.k
    for _ in range(n):
        v1 *= 0.0  # -0.0 for a negative v1
    return x + 1, v1, -(v1 - v1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_results_keep_the_sign_of_zero(backend):
    """A float computed from symbolic numbers only, returned to the caller (F16): a backend's
    symbolic simplification turns `s * 0.0` into 0.0, so such floats are computed by Python."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_float_from_numbers, backend=cnt)
    x = torch.randn(3)
    try:
        for n, v, k in [(0, 3, 2), (0, 2, 4), (1, 0, 4), (1, 0, 4), (1, 2, 3)]:
            _Scale.k = k
            actual, expected = compiled(x, n, _Scale(v)), _float_from_numbers(x, n, _Scale(v))
            assert_same(actual, expected)
            assert [math.copysign(1, f) for f in actual[1:]] == [math.copysign(1, f) for f in expected[1:]]
    finally:
        _Scale.k = 2
    assert cnt.frame_count == 3  # constants; then k, v symbolic; then n symbolic, loop guarded per n


class _DropoutBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.nn.functional.dropout(self.fc(x), 0.25, training=True).relu()


class _CountZeros(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the zero tensors made while it is active (the autograd engine's, for gradients
    of differentiable outputs nothing used)."""

    def __init__(self) -> None:
        super().__init__()
        self.zeros = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.zeros += func in (torch.ops.aten.zeros.default, torch.ops.aten.zeros_like.default)
        return func(*args, **(kwargs or {}))


def test_random_draws_kept_as_outputs_get_no_gradient():
    """A draw kept alive as an extra graph output is returned detached: the backward pass gets
    no zero gradient for it, and results and gradients equal eager's on the same seeds."""
    model = _DropoutBlock()
    compiled = stenograph.compile(model, backend="aot_eager")
    x = torch.randn(4, 8)
    for _ in range(2):
        torch.manual_seed(1)
        expected = model(x)
        expected.sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        torch.manual_seed(1)
        out = compiled(x)
        counter = _CountZeros()
        with counter:
            out.sum().backward()
        assert counter.zeros == 0
        assert_same(out, expected)
        for p, grad in zip(model.parameters(), grads):
            torch.testing.assert_close(p.grad, grad)
        model.zero_grad()
