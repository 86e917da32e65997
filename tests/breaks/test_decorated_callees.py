"""Breaks inside callees that a context's decorator wraps, or that torch's untraced Python calls.

A break inside `torch.no_grad()(f)` (or `@torch.inference_mode()` on a nested function) is a
break at the call site; the call then runs the context's decorator around f's entry wrapper, so
f's code after the break is compiled too, in the mode the decorator sets, as torch.compile's hook
compiles f under torch's `decorate_context`. A user function handed to one of torch's untraced
helpers at a break is compiled the same way: the helper runs with its calls routed.
"""

from __future__ import annotations

import pytest
import torch
from helpers import assert_same, ops_of
from torch._dynamo.testing import _skipped_function_for_test_reconstruct as _torch_helper

import stenograph

from ._support import torch_graph_count


class _Probe:
    """What a callee saw after its break: (is_compiling, grad mode). An attribute, not a list
    (appending to a global list guards its length, so each call would compile again)."""

    seen = None


_probe = _Probe()


def _callee(x):
    x = x + 1
    torch._dynamo.graph_break()
    _probe.seen = (torch.compiler.is_compiling(), torch.is_grad_enabled())
    return x * 2


def _wrapped_in_the_frame(x):
    y = torch.no_grad()(_callee)(x)
    return y - 1, torch.is_grad_enabled()


def _decorated_nested(x, a):
    @torch.no_grad()
    def inner(t):
        t = t + a
        torch._dynamo.graph_break()
        _probe.seen = (torch.compiler.is_compiling(), torch.is_grad_enabled())
        return t * a

    return inner(x) - 1, torch.is_grad_enabled()


class _Scaler:
    def __init__(self):
        self.a = 3.0

    def scale(self, x):
        x = x + self.a
        torch._dynamo.graph_break()
        _probe.seen = (torch.compiler.is_compiling(), torch.is_grad_enabled())
        return x * self.a


def _wrapped_method_assigned(obj, x):
    obj.scale = torch.no_grad()(obj.scale)
    return obj.scale(x) - 1


def _through_torch_helper(x):
    y = torch.no_grad()(_torch_helper)(_callee, x)
    return y - 1, torch.is_grad_enabled()


def _helper_without_decorator(x):
    return _torch_helper(_callee, x) - 1


def _inference_decorated(x):
    return torch.inference_mode()(_callee)(x) - 1


def _run(fn, cnt, make_args, calls=3):
    """Compiled vs eager over `calls` argument sets; returns what the callee saw after its break."""
    compiled = stenograph.compile(fn, backend=cnt)
    seen = []
    for i in range(calls):
        expected = fn(*make_args(i))
        _probe.seen = None
        assert_same(compiled(*make_args(i)), expected, f"call {i}")
        seen.append(_probe.seen)
    return seen


def _leaf(i):
    return (torch.full((3,), float(i), requires_grad=True),)


def test_no_grad_wrapped_callee_resumes_compiled(cnt):
    """`torch.no_grad()(f)(x)`: f's code after its break is a compiled graph, run without grad;
    the caller's rest has grad again. 3 graphs (f before and after its break, the caller's
    rest), as torch.compile."""
    seen = _run(_wrapped_in_the_frame, cnt, _leaf)
    assert seen == [(True, False)] * 3
    assert cnt.frame_count == 3 == torch_graph_count(_wrapped_in_the_frame, *(_leaf(i) for i in range(3)))
    assert [ops_of(gm) for gm in cnt.graphs] == [["add"], ["mul"], ["sub"]]


def test_decorated_nested_function_resumes_compiled(cnt):
    """`@torch.no_grad()` on a function made in the frame, closing over its variables."""
    seen = _run(_decorated_nested, cnt, lambda i: (*_leaf(i), 2.0))
    assert seen == [(True, False)] * 3
    args = [(*_leaf(i), 2.0) for i in range(3)]
    assert cnt.frame_count == 3 == torch_graph_count(_decorated_nested, *args)


def test_wrapped_bound_method_assigned_in_the_frame(cnt):
    """`obj.m = torch.no_grad()(obj.m)` then `obj.m(x)`: the method's rest is compiled; the object
    keeps the wrapper the frame assigned (a real `decorate_context`, as eagerly)."""
    seen = _run(_wrapped_method_assigned, cnt, lambda i: (_Scaler(), *_leaf(i)))
    assert seen == [(True, False)] * 3
    obj = _Scaler()
    stenograph.compile(_wrapped_method_assigned, backend="eager")(obj, torch.ones(3))
    wrapped = obj.scale.__wrapped__  # the method bound to obj, as eagerly
    assert wrapped.__func__ is _Scaler.scale and wrapped.__self__ is obj


def test_callee_of_an_untraced_torch_helper_is_compiled(cnt):
    """A user function passed through one of torch's untraced helpers (here wrapped by no_grad
    too) is compiled as a frame of its own; the helper's frame runs as it is."""
    seen = _run(_through_torch_helper, cnt, _leaf)
    assert seen == [(True, False)] * 3
    assert cnt.frame_count == 3 == torch_graph_count(_through_torch_helper, *(_leaf(i) for i in range(3)))
    cnt.clear()
    seen = _run(_helper_without_decorator, cnt, _leaf)
    assert seen == [(True, True)] * 3
    assert cnt.frame_count == 3 == torch_graph_count(_helper_without_decorator, *(_leaf(i) for i in range(3)))


def test_inference_mode_decorated_callee(cnt):
    """`torch.inference_mode()(f)(x)`: f's rest compiled inside inference mode (results are
    inference tensors, as eagerly)."""
    seen = _run(_inference_decorated, cnt, _leaf)
    assert seen == [(True, False)] * 3
    assert cnt.frame_count == 3 == torch_graph_count(_inference_decorated, *(_leaf(i) for i in range(3)))


def _set_grad_enabled_decorated(x):
    return torch.set_grad_enabled(False)(_callee)(x) - 1, torch.is_grad_enabled()


def _enable_grad_under_no_grad(x):
    with torch.no_grad():
        return torch.enable_grad()(_callee)(x) - 1, torch.is_grad_enabled()


def _autocast_decorated(x):
    return torch.autocast("cpu", dtype=torch.bfloat16)(_matmul_callee)(x).float() - 1


def _matmul_callee(x):
    y = x * 2
    torch._dynamo.graph_break()
    _probe.seen = (torch.compiler.is_compiling(), torch.get_autocast_dtype("cpu"))
    return y @ y.T


@pytest.mark.parametrize(
    ("fn", "after"),
    [
        (_set_grad_enabled_decorated, (True, False)),
        (_enable_grad_under_no_grad, (True, True)),
        (_autocast_decorated, (True, torch.bfloat16)),
    ],
)
def test_other_context_decorators(cnt, fn, after):
    """The callee's rest is compiled in the mode each decorator sets: `set_grad_enabled(False)`
    (whose construction switches the mode and whose `__call__` switches it back), `enable_grad`
    inside a no_grad block, autocast (its matmul in bfloat16, as eagerly)."""
    seen = _run(fn, cnt, lambda i: (torch.full((3, 3), float(i), requires_grad=True),))
    assert seen == [after] * 3
    args = [(torch.full((3, 3), float(i), requires_grad=True),) for i in range(3)]
    assert cnt.frame_count == 3 == torch_graph_count(fn, *args)


def test_guards_of_the_decorated_callee(cnt):
    """Identical calls compile nothing more. Called under no_grad, only the caller compiles again
    (its grad-mode guard): the callee's entries saw the decorator's mode both times. A new dtype
    compiles all three graphs again."""
    compiled = stenograph.compile(_wrapped_in_the_frame, backend=cnt)
    x = torch.ones(3)
    compiled(x)
    compiled(x)
    assert cnt.frame_count == 3
    with torch.no_grad():
        assert_same(compiled(x), _wrapped_in_the_frame(x))
        assert _probe.seen == (False, False)  # the eager call ran last
        compiled(x)
        assert _probe.seen == (True, False)
    assert [ops_of(gm) for gm in cnt.graphs[3:]] == [["sub"]]
    xd = torch.ones(3, dtype=torch.float64)
    assert_same(compiled(xd), _wrapped_in_the_frame(xd))
    assert [ops_of(gm) for gm in cnt.graphs[4:]] == [["add"], ["mul"], ["sub"]]


def _helper_in_a_loop(x):
    for _ in range(2):
        x = _torch_helper(_callee, x)
    return x


def test_skipped_frame_routes_through_an_untraced_torch_helper(cnt):
    """A frame skipped for a break inside its loop runs with its calls routed: the torch helper
    it calls runs routed in turn, so the user function the helper calls is compiled (2 graphs,
    reused by the second pass and the later calls), as torch.compile's hook compiles it."""
    seen = _run(_helper_in_a_loop, cnt, _leaf)
    assert seen == [(True, True)] * 3
    assert cnt.frame_count == 2 == torch_graph_count(_helper_in_a_loop, *(_leaf(i) for i in range(3)))
