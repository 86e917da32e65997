"""Breaks inside inlined calls.

A break inside a user function being inlined becomes a break at the call site in the outer
frame; the callee then runs through the entry wrapper and is compiled as its own frame (with its
own break). Graph order shows it: each frame's graphs are compiled on its first call.
"""

from __future__ import annotations

import copy
import functools

import torch
from helpers import assert_same, ops_of
from torch import nn

import stenograph
from stenograph.testing import CompileCounter

from ._support import assert_matches_eager, torch_graph_count


def _leaf(x):
    x = x * 3
    print("leaf", tuple(x.shape))
    return x - 1


def _middle(x):
    x = x + 2
    x = _leaf(x)
    return x.sin()


def _top(x):
    x = x.cos()
    x = _middle(x)
    return x.exp()


def test_break_two_inlined_calls_deep(cnt, capsys):
    """top -> middle -> leaf(print): 6 graphs (torch: 6), one op each, in execution order."""
    inputs = [torch.randn(5) for _ in range(3)]
    peer = torch_graph_count(_top, (inputs[0],))
    fn = stenograph.compile(_top, backend=cnt)
    assert_matches_eager(_top, fn, lambda i: (inputs[i],), capsys, calls=3)
    assert cnt.frame_count == 6 == peer
    # top before the call, middle (own frame) before its call, leaf (own frame) before and after
    # its print, then middle's and top's resume functions
    assert [ops_of(gm) for gm in cnt.graphs] == [["cos"], ["add"], ["mul"], ["sub"], ["sin"], ["exp"]]


def test_callees_are_only_compiled_through_compiled_code(cnt, capsys):
    """Calling the callees directly (not through the compiled function) compiles nothing."""
    fn = stenograph.compile(_top, backend=cnt)
    x = torch.randn(3)
    fn(x)
    assert cnt.frame_count == 6
    assert_same(_middle(x), _middle(x))
    _leaf(x)
    assert cnt.frame_count == 6


def test_callee_compiled_as_own_frame_reused_from_another_caller(cnt, capsys):
    """A second compiled caller of the same callee reuses the callee's cached frames (same backend)."""

    def other_top(x):
        x = x.tan()
        return _middle(x) * 2

    fn = stenograph.compile(_top, backend=cnt)
    fn(torch.randn(4))
    assert cnt.frame_count == 6
    other = stenograph.compile(other_top, backend=cnt)
    x = torch.randn(4)
    capsys.readouterr()
    expected = other_top(x)
    eager_text = capsys.readouterr().out
    assert_same(other(x), expected)
    assert capsys.readouterr().out == eager_text
    # only other_top's own graphs are new: [tan] and [mul]; middle's and leaf's are cached
    assert cnt.frame_count == 8
    assert [ops_of(gm) for gm in cnt.graphs[6:]] == [["tan"], ["mul"]]


def _inner(x):
    x = x * 3
    print("inner")
    return x + 1


def _uses_stack(x):
    return x.sin() + _inner(x)


def test_break_in_callee_with_partial_expression_on_the_stack(cnt, capsys):
    """`x.sin() + inner(x)`: the pending x.sin() survives the break on the value stack (torch: 4)."""
    inputs = [torch.randn(4) for _ in range(3)]
    peer = torch_graph_count(_uses_stack, (inputs[0],))
    fn = stenograph.compile(_uses_stack, backend=cnt)
    assert_matches_eager(_uses_stack, fn, lambda i: (inputs[i],), capsys, calls=3)
    assert cnt.frame_count == 4 == peer


def _closure_caller(x, k):
    scale = k * 2

    def helper(y):
        y = y * scale
        print("helper", scale)
        return y + scale

    return helper(x.sin()).cos()


def test_break_in_nested_closure(cnt, capsys):
    """A closure over the caller's locals, compiled as its own frame with its cells (torch: 4)."""
    x = torch.randn(4)
    peer = torch_graph_count(_closure_caller, (x, 3))
    fn = stenograph.compile(_closure_caller, backend=cnt)
    assert_matches_eager(_closure_caller, fn, lambda i: (x, 3), capsys, calls=3)
    assert cnt.frame_count == 4 == peer


def _kw_callee(x, *, scale=1.0, shift=0.0):
    x = x * scale
    print("kw callee", scale, shift)
    return x + shift


def _kw_caller(x, extra):
    x = x.abs()
    return _kw_callee(x, shift=-1.5, **extra).neg()


def test_break_in_callee_called_with_keywords(cnt, capsys):
    """A callee called with keyword arguments and **kwargs, broken inside: eager results (torch: 4)."""
    x = torch.randn(4)
    peer = torch_graph_count(_kw_caller, (x, {"scale": 2.0}))
    fn = stenograph.compile(_kw_caller, backend=cnt)
    assert_matches_eager(_kw_caller, fn, lambda i: (x, {"scale": 2.0}), capsys, calls=3)
    assert cnt.frame_count == 4 == peer


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        print("block", tuple(y.shape))
        return torch.relu(y)


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = _Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = x * 2
        x = self.block(x)
        return self.head(x)


def test_break_in_submodule_forward(cnt, capsys):
    """A print in a submodule's forward: 4 graphs (torch: 4), outputs and gradients equal eager."""
    model = _Outer()
    reference = copy.deepcopy(model)
    x0 = torch.randn(3, 4)
    peer = torch_graph_count(copy.deepcopy(model), (x0,))
    peer_with_grad_input = torch_graph_count(copy.deepcopy(model), (x0,), (x0.clone().requires_grad_(),))
    compiled = stenograph.compile(model, backend=cnt)
    assert_matches_eager(reference, compiled, lambda i: (x0,), capsys, calls=2)
    assert cnt.frame_count == 4 == peer

    x_c, x_e = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    compiled(x_c).pow(2).sum().backward()
    reference(x_e).pow(2).sum().backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)
    for (name, p_c), (_, p_e) in zip(model.named_parameters(), reference.named_parameters()):
        assert p_c.grad is not None, name
        torch.testing.assert_close(p_c.grad, p_e.grad, msg=lambda m, name=name: f"{name}: {m}")
    # the requires_grad input recompiles the two frames that receive it (outer's first graph and
    # the block's first graph); both resume functions see the same inputs as before (torch: 6)
    assert cnt.frame_count == 6 == peer_with_grad_input


def _disabled_helper(x):
    return x * 10


def test_call_of_disabled_function_is_a_break_and_runs_eagerly(cnt, capsys):
    """A stenograph.disable'd function called from compiled code runs eagerly, at a break."""
    helper = stenograph.disable(_disabled_helper)

    def caller(x):
        x = x + 1
        x = helper(x)
        return x - 1

    fn = stenograph.compile(caller, backend=cnt)
    for _ in range(3):
        x = torch.randn(3)
        assert_same(fn(x), caller(x))
    assert cnt.frame_count == 2
    assert [ops_of(gm) for gm in cnt.graphs] == [["add"], ["sub"]]


def _scaled_leaf(scale, x, *, shift):
    x = x * scale
    print("scaled leaf", tuple(x.shape))
    return x.cos() + shift


def _calls_partial(x):
    return functools.partial(_scaled_leaf, 2, shift=1.0)(x.sin()) - 1


def test_break_inside_a_partial_compiles_its_function_as_own_frame(cnt, capsys):
    """A partial called by compiled code (or compiled itself) whose function breaks: the function
    is compiled as its own frame, with the partial's stored arguments, on both sides of its break
    (torch.compile: the same graph counts)."""
    inputs = [torch.randn(4) for _ in range(3)]
    peer = torch_graph_count(_calls_partial, (inputs[0],))
    assert_matches_eager(
        _calls_partial, stenograph.compile(_calls_partial, backend=cnt), lambda i: (inputs[i],), capsys, calls=3
    )
    assert cnt.frame_count == peer == 4
    assert [ops_of(gm) for gm in cnt.graphs] == [["sin"], ["mul"], ["cos", "add"], ["sub"]]

    bound = functools.partial(_scaled_leaf, 3, shift=0.5)
    compiled = stenograph.compile(bound, backend=(counter := CompileCounter()))
    peer = torch_graph_count(bound, (inputs[0],))
    assert_matches_eager(bound, compiled, lambda i: (inputs[i],), capsys, calls=3)
    assert counter.frame_count == peer == 2
