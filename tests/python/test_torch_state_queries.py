"""torch C functions that read global state, called with no arguments.

Tracing runs ops under a fake-tensor mode, which is itself on the dispatch-mode stack: asking
`torch._C._len_torch_dispatch_stack()` there answers 1 where the program sees 0. Readers are
asked for real and guarded (a changed answer recompiles); other state calls break.
"""

from __future__ import annotations

import torch
from helpers import assert_same
from torch.fx._symbolic_trace import is_fx_symbolic_tracing, is_fx_tracing
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

import stenograph


class PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class Quiet(PassThrough):
    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True


def stack_depth(x):
    return x + torch._C._len_torch_dispatch_stack()


def modes_in_use(x):
    return x * (len(_get_current_dispatch_mode_stack()) + 1)


def thread_count(x):
    return x + torch.get_num_threads()


def shows_config(x):
    return x + len(torch._C._show_config())


def test_dispatch_stack_depth_is_the_programs_not_the_tracers(cnt) -> None:
    compiled = stenograph.compile(stack_depth, backend=cnt)
    x = torch.zeros(2)
    assert_same(compiled(x), stack_depth(x))
    assert cnt.frame_count == 1
    with PassThrough():  # a mode that must see every op: the call runs eagerly, as torch.compile's
        assert_same(compiled(x), stack_depth(x))
    assert cnt.frame_count == 1
    with Quiet():
        # a mode that ignores compile internals: set aside while compiling, but the answer the
        # trace reads and guards is the program's (one mode), so the guard sees it: recompile
        assert_same(compiled(x), stack_depth(x))
        assert_same(compiled(x), stack_depth(x))
    assert cnt.frame_count == 2
    assert_same(compiled(x), stack_depth(x))
    assert cnt.frame_count == 2


def test_library_helper_reading_the_mode_stack(cnt) -> None:
    compiled = stenograph.compile(modes_in_use, backend=cnt)
    x = torch.ones(2)
    assert_same(compiled(x), modes_in_use(x))
    assert cnt.frame_count == 1  # one graph: the empty stack's list comprehension is traced


def test_reader_answers_are_guarded(cnt) -> None:
    compiled = stenograph.compile(thread_count, backend=cnt)
    x = torch.zeros(1)
    threads = torch.get_num_threads()
    try:
        assert_same(compiled(x), thread_count(x))
        torch.set_num_threads(threads + 1)
        assert_same(compiled(x), thread_count(x))
        assert cnt.frame_count == 2
        assert f"torch.get_num_threads() == {threads + 1}" in str(stenograph.explain(thread_count)(x))
    finally:
        torch.set_num_threads(threads)


def test_other_state_calls_break_and_run_eagerly(cnt) -> None:
    compiled = stenograph.compile(shows_config, backend=cnt)
    x = torch.zeros(1)
    assert_same(compiled(x), shows_config(x))
    explanation = stenograph.explain(shows_config)(x)
    assert explanation.graph_break_count == 1
    assert "torch._C._show_config()" in str(explanation.break_reasons[0])


def _branch_on_fx_tracing(x):
    if is_fx_tracing() or is_fx_symbolic_tracing():
        return x - 1
    return x + 1


def test_is_fx_tracing_answers_false_in_one_graph(cnt) -> None:
    # torch.compile's own test: compiled code never runs inside an FX trace (calling it there
    # raises or runs it as it is), so both answer False, with no break at is_fx_tracing's
    # one-time log warning
    x = torch.randn(3)
    compiled = stenograph.compile(_branch_on_fx_tracing, backend=cnt, fullgraph=True)
    assert_same(compiled(x), x + 1)
    assert cnt.frame_count == 1
    traced = torch.fx.symbolic_trace(_branch_on_fx_tracing)  # eagerly under FX: the other branch
    assert_same(traced(x), x - 1)


def checkpoint_validity(x):
    if torch.autograd._is_checkpoint_valid():
        return x + 1
    return x - 1


class _AsksInBackward(torch.autograd.Function):
    """A backward that calls a compiled function: `torch.autograd.grad` runs it where the engine
    says checkpoints are not valid, `.backward()` where they are."""

    compiled = None

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return _AsksInBackward.compiled(grad)


def test_checkpoint_validity_is_asked_and_guarded(cnt) -> None:
    """`torch.autograd._is_checkpoint_valid()` (torch's Python reader of the autograd engine's
    state) is answered while tracing, as torch.compile's, and its answer guarded."""
    _AsksInBackward.compiled = stenograph.compile(checkpoint_validity, backend=cnt, fullgraph=True)
    leaf = torch.zeros(2, requires_grad=True)
    _AsksInBackward.apply(leaf).sum().backward()
    assert_same(leaf.grad, torch.ones(2) + 1)  # valid inside .backward()
    assert cnt.frame_count == 1
    (grad,) = torch.autograd.grad(_AsksInBackward.apply(leaf).sum(), leaf)
    assert_same(grad, torch.ones(2) - 1)  # not valid inside autograd.grad: the guard recompiles
    assert cnt.frame_count == 2
    leaf.grad = None
    _AsksInBackward.apply(leaf).sum().backward()
    assert_same(leaf.grad, torch.ones(2) + 1)
    assert cnt.frame_count == 2
