"""A graph break inside a loop: the frame runs eagerly and the functions and modules it calls are
compiled as frames of their own, as torch.compile skips such a frame.

Resumed inside the loop instead, the frame would be compiled again on every pass (its guards see
the loop's position) until the recompile limit. Each test compares with eager (results, printed
output, gradients) and with torch.compile's graph count on the same program (the breaks are
prints: torch.compile traces through `stenograph.graph_break`).
"""

from __future__ import annotations

import sys
import warnings

import pytest
import torch
from helpers import assert_same

import stenograph
from stenograph import events
from stenograph.testing import CompileCounter

from ._support import assert_matches_eager, torch_graph_count


def _sin(x):
    return torch.sin(x)


def _for_loop(x):
    for i in range(5):
        x = _sin(x) + i
        print("step", i)
    return x


def _while_loop(x):
    i = 6
    while i > 3:
        x = _sin(x)
        i -= 1
        print("left", i)
    return x


def _break_before_loop(x):
    print("before")
    for _ in range(4):
        x = _sin(x)
    return x


def _break_after_loop(x):
    for _ in range(3):
        x = _sin(x)
    print("done")
    return x * 2


def test_a_break_in_a_for_loop_skips_the_frame_and_compiles_its_callee(capsys):
    cnt = CompileCounter()
    reasons = []
    listener = events.subscribe(lambda e: isinstance(e, events.RunsEagerly) and reasons.append(e.reason))
    try:
        compiled = stenograph.compile(_for_loop, backend=cnt)
        assert_matches_eager(_for_loop, compiled, lambda i: (torch.full((3,), float(i)),), capsys)
    finally:
        events.unsubscribe(listener)
    assert (cnt.frame_count, cnt.op_count) == (1, 1)  # `_sin`, compiled once, hit on every pass
    assert any("call to print (inside a loop" in r for r in reasons)  # said, without a warning
    assert cnt.frame_count == torch_graph_count(_for_loop, (torch.ones(3),))


def test_a_break_in_a_while_loop_on_a_counter():
    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(stenograph.compile(_while_loop, backend=cnt)(x), _while_loop(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 1)
    assert cnt.frame_count == torch_graph_count(_while_loop, (x,))


@pytest.mark.parametrize("fn, graphs", [(_break_before_loop, 1), (_break_after_loop, 2)])
def test_a_break_outside_the_loop_still_resumes(fn, graphs):
    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(stenograph.compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == graphs == torch_graph_count(fn, (x,))


def _loops_and_breaks(x):
    for _ in range(3):
        x = x + 1
        print("pass")
    return x


def _calls_a_looping_function(x):
    x = x + 2
    x = _loops_and_breaks(x)
    return x * 3


def test_a_callee_that_breaks_in_its_loop_is_skipped_alone():
    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(stenograph.compile(_calls_a_looping_function, backend=cnt)(x), _calls_a_looping_function(x))
    # the graphs before and after the call; the callee's loop runs eagerly
    assert (cnt.frame_count, cnt.op_count) == (2, 2)
    assert cnt.frame_count == torch_graph_count(_calls_a_looping_function, (x,))


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.linear(x))


class _Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(_Block() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            print("norm", round(float(x.detach().norm()), 4))
        return x.sum()


def test_modules_called_by_a_skipped_frame_are_compiled_with_equal_gradients(capsys):
    torch.manual_seed(0)
    model = _Stack()
    cnt = CompileCounter()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(2, 4)
    expected = model(x)
    expected.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    eager_out = capsys.readouterr().out
    model.zero_grad()
    actual = compiled(x)
    actual.backward()
    assert capsys.readouterr().out == eager_out
    assert_same(actual, expected)
    for p, g in zip(model.parameters(), grads):
        assert_same(p.grad, g)
    # the blocks' forward, compiled as a frame of its own (`nn.Linear`, torch's, is not)
    frames = cnt.frame_count
    assert frames >= 1
    assert frames == torch_graph_count(model, (x,))
    compiled(x)
    assert cnt.frame_count == frames  # the second call compiles nothing


def test_a_callee_of_a_skipped_frame_recompiles_when_its_guards_fail():
    cnt = CompileCounter()
    compiled = stenograph.compile(_for_loop, backend=cnt)
    compiled(torch.ones(3))
    compiled(torch.ones(3))
    assert cnt.frame_count == 1
    compiled(torch.ones(3, dtype=torch.float64))
    assert cnt.frame_count == 2


def _generator(x):
    yield _sin(x)
    yield _sin(x) * 2


def test_a_frame_given_up_for_another_reason_compiles_its_callees():
    cnt = CompileCounter()
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = list(stenograph.compile(_generator, backend=cnt)(x))
    assert_same(got, list(_generator(x)))
    assert cnt.frame_count == 1


def _plus_two(x):
    return x + 2


@stenograph.disable(recursive=False)
def _frame_only(x):
    return _plus_two(x) * 1


def _calls_frame_only(x):
    x = x * 2
    x = _frame_only(x)
    return x - 1


def test_disable_recursive_false_compiles_the_callees():
    cnt = CompileCounter()
    x = torch.randn(3)
    # compiled itself, the function is compiled whole: torch.compile unwraps the disable
    assert_same(stenograph.compile(_frame_only, backend=cnt)(x), x + 2)
    assert (cnt.frame_count, cnt.op_count) == (1, 2)

    cnt = CompileCounter()
    assert_same(stenograph.compile(_calls_frame_only, backend=cnt)(x), _calls_frame_only(x))
    assert cnt.frame_count == 3  # before the call, `_plus_two`, after it

    cnt = CompileCounter()
    before = cnt.frame_count
    assert_same(_frame_only(x), x + 2)  # called from eager code: nothing compiles
    assert cnt.frame_count == before


def test_disable_recursive_false_compiles_comprehensions_and_a_modules_callees():
    """3.11 runs a comprehension as a function of its own, called with its iterator in the
    method slot of the call; a module's forward disabled alone runs eagerly with its calls
    compiled (torch.compile's test_listcomp: one frame of 8 ops)."""

    @stenograph.disable(recursive=False)
    def summed(x):
        return sum([i * torch.cos(x) for i in range(4)])

    class Module(torch.nn.Module):
        @stenograph.disable(recursive=False)
        def forward(self, x):
            values = [i * torch.cos(x) for i in range(4)]
            return sum(values)

    model = Module()
    x = torch.randn(4)
    for fn in (lambda x: summed(x), lambda x: model(x)):
        cnt = CompileCounter()
        assert_same(stenograph.compile(fn, backend=cnt)(x), fn(x))
        if sys.version_info < (3, 12):  # 3.12+ inlines comprehensions into the disabled frame
            assert (cnt.frame_count, cnt.op_count) == (1, 8)
        else:
            assert cnt.frame_count == 0


def _sigmoid_then_plus_two(x):
    if stenograph.is_compiling() or torch.compiler.is_compiling():
        raise RuntimeError("this frame must run eagerly")
    return _plus_two(x.sigmoid())


def test_torchs_disable_recursive_false_compiles_the_callees(cnt):
    """torch's `torch._dynamo.disable(f, recursive=False)` as stenograph's: f's own frame runs
    eagerly, what it calls is compiled (torch.compile: 2 frames, the caller and `_plus_two`)."""
    frame_only = torch._dynamo.disable(_sigmoid_then_plus_two, recursive=False)

    def caller(x):
        return frame_only(x.tan())

    x = torch.randn(4)
    assert_same(stenograph.compile(caller, backend=cnt)(x), caller(x))
    assert cnt.frame_count == 2 == torch_graph_count(caller, (x,))


def test_disable_recursive_true_runs_callees_eagerly():
    @stenograph.disable
    def everything_eager(x):
        return _plus_two(x)

    cnt = CompileCounter()
    x = torch.randn(3)
    assert_same(stenograph.compile(everything_eager, backend=cnt)(x), x + 2)
    assert cnt.frame_count == 0
