"""Graph breaks inside `torch.inference_mode()` and `torch.autocast(...)` blocks (also
`torch.amp.autocast`, `torch.cpu.amp.autocast`, the decorator forms, and nested with grad-mode
blocks).

The graph before the break leaves the context it entered; the breaking instruction runs eagerly
inside the context, entered for real; the resume function enters it again in its graph and leaves
it where the block ends. So results, autocast dtypes, inference tensors, the state the eager part
sees and the state after the call are eager's, with one graph on each side of the break.
"""

from __future__ import annotations

import copy
import io
import sys
import warnings

import pytest
import torch
from helpers import assert_same, ops_of
from torch import nn

import stenograph

from ._support import assert_matches_eager, torch_graph_count

BF16 = torch.bfloat16


def _state():
    """The global state the code runs in, as the eager part prints it."""
    return (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.is_autocast_enabled("cpu"),
        torch.get_autocast_dtype("cpu"),
    )


def _pair(i, requires_grad=False):
    """The same two 3x3 tensors for the same `i` (eager and compiled get equal arguments)."""
    g = torch.Generator().manual_seed(i)
    return torch.randn(3, 3, generator=g, requires_grad=requires_grad), torch.randn(3, 3, generator=g)


def _kinds(values):
    """dtype, requires_grad and inference-ness of every tensor (assert_same checks the first two,
    not the last)."""
    return [(v.dtype, v.requires_grad, torch.is_inference(v)) if isinstance(v, torch.Tensor) else v for v in values]


def _inference_block(x, w):
    y = x * 2
    with torch.inference_mode():
        z = x + 1
        print("inside", _state(), z.is_inference())
        u = z * 3
    return y, z, u, u + y, _state()


def _inference_off_under_no_grad(x, w):
    with torch.no_grad():
        y = x * 2
        with torch.inference_mode(False):
            z = x * 3
            print("inside", _state(), z.requires_grad)
            u = z + y
        v = u * 2
    return y, z, u, v


def _autocast_block(x, w):
    with torch.autocast("cpu", dtype=BF16):
        y = x @ w
        print("inside", _state(), y.dtype)
        z = y @ w
    return y, z, z.float() + x, (x @ w).dtype


def _amp_autocast_under_no_grad(x, w):
    with torch.no_grad():
        with torch.amp.autocast("cpu", dtype=BF16):
            y = x @ w
            print("inside", _state(), y.requires_grad)
            z = y @ w
        u = z * 2
    return y, z, u


def _enable_grad_inside_autocast(x, w):
    with torch.autocast("cpu", dtype=BF16), torch.enable_grad():
        y = x @ w
        print("inside", _state(), y.requires_grad)
        z = y @ w
    return y, z, (z.float() @ w).dtype


def _set_grad_enabled_inside_inference_mode(x, w):
    with torch.inference_mode():
        with torch.set_grad_enabled(False):
            y = x * 2
            print("inside", _state())
            z = y + 1
        u = z * w
    return y, z, u


def _autocast_disabled(x, w):
    with torch.autocast("cpu", enabled=False):
        y = x @ w
        print("inside", _state())
        z = y @ w
    return y, z


def _autocast_bound_with_as(x, w):
    with torch.autocast("cpu", dtype=BF16) as ac:
        y = x @ w
        print("inside", _state(), ac.fast_dtype)
        z = y @ w
    return y, z, type(ac), ac.fast_dtype


BLOCKS = [
    pytest.param(_inference_block, True, id="inference_mode"),
    pytest.param(_inference_off_under_no_grad, False, id="inference_mode(False)-under-no_grad"),
    pytest.param(_autocast_block, False, id="autocast"),
    pytest.param(_amp_autocast_under_no_grad, False, id="amp.autocast-under-no_grad"),
    pytest.param(_enable_grad_inside_autocast, False, id="autocast+enable_grad"),
    pytest.param(_set_grad_enabled_inside_inference_mode, True, id="set_grad_enabled-inside-inference_mode"),
    pytest.param(_autocast_disabled, False, id="autocast-enabled=False"),
    pytest.param(_autocast_bound_with_as, False, id="autocast-as"),
]


@pytest.mark.parametrize(("fn", "inference_tensors"), BLOCKS)
def test_break_inside_the_block_resumes_inside_it(cnt, capsys, fn, inference_tensors):
    """A print inside the block: the eager part sees the block's state, the code after the break
    still runs in it, the code after the block outside it. Results (values, dtypes, requires_grad,
    inference tensors) and output equal eager's; 2 graphs, reused by later calls; nothing leaks."""
    before = _state()
    compiled = stenograph.compile(fn, backend=cnt)
    results = assert_matches_eager(fn, compiled, lambda i: _pair(i, requires_grad=True), capsys, calls=3)
    x, w = _pair(0, requires_grad=True)
    assert _kinds(compiled(x, w)) == _kinds(fn(x, w))
    assert any(torch.is_inference(r) for r in results[-1] if isinstance(r, torch.Tensor)) is inference_tensors
    assert cnt.frame_count == 2
    assert _state() == before


def _autocast_print(x, w):
    with torch.autocast("cpu", dtype=BF16):
        y = x @ w
        print("inside", y.dtype)
        z = y @ w
    return y, z


def test_autocast_break_counts_as_torch_compile(cnt, capsys):
    """torch.compile splits the autocast block at the print into the same 2 graphs."""
    peer = torch_graph_count(_autocast_print, _pair(0))
    compiled = stenograph.compile(_autocast_print, backend=cnt)
    assert_matches_eager(_autocast_print, compiled, _pair, capsys, calls=2)
    assert cnt.frame_count == 2 == peer


def test_each_graph_enters_and_leaves_the_context(cnt, capsys):
    """The graph before the break ends outside the block (it exits what it entered); the resume
    function's graph enters the block again, computes in it, and leaves it where the block ends."""
    compiled = stenograph.compile(_autocast_block, backend=cnt)
    compiled(torch.randn(4, 4), torch.randn(4, 4))
    before, after = (ops_of(gm) for gm in cnt.graphs)
    assert before == ["_enter_autocast", "matmul", "_exit_autocast"]
    assert after == ["_enter_autocast", "matmul", "_exit_autocast", "float", "add", "matmul"]


def _probe_states(x, probe):
    y = x * 2
    with torch.inference_mode():
        probe("inference_mode", y)
        with torch.autocast("cpu", dtype=BF16):
            probe("autocast", y)
        z = y + 1
    probe("after", z)
    return z


def test_functions_called_at_the_break_run_in_the_block(cnt):
    """A disabled function called at a break inside the blocks runs in their state (it is the
    eager part), as eagerly; graphs: [mul] | [add] | [] = 2."""
    events = []

    def probe(tag, t):
        events.append((tag, _state(), torch.is_inference(t * 1)))

    probe = stenograph.disable(probe)
    compiled = stenograph.compile(_probe_states, backend=cnt)
    for _ in range(2):
        events.clear()
        expected = _probe_states(torch.ones(3, requires_grad=True), probe)
        eager_events = list(events)
        events.clear()
        actual = compiled(torch.ones(3, requires_grad=True), probe)
        assert events == eager_events
        assert_same(actual, expected)
        assert torch.is_inference(actual)
    assert [e[1][1:3] for e in eager_events] == [(True, False), (True, True), (False, False)]
    assert cnt.frame_count == 2


def _loop_in_autocast(x, w):
    with torch.autocast("cpu", dtype=BF16):
        for i in range(3):
            x = x @ w
            print("step", i, x.dtype)
    return x, x.dtype


def test_break_in_a_loop_inside_autocast(cnt, capsys):
    """A break inside a loop skips the frame (as torch.compile does): autocast's dtypes, results
    and prints are eager's, and the mode is left as it was."""
    compiled = stenograph.compile(_loop_in_autocast, backend=cnt)
    assert_matches_eager(_loop_in_autocast, compiled, _pair, capsys)
    assert not torch.is_autocast_enabled("cpu")
    assert cnt.frame_count == 0


# ---------------------------------------------------------------------------------------------
# guards


def _autocast_to(x, w, dtype):
    with torch.autocast("cpu", dtype=dtype):
        y = x @ w
        print("dtype", y.dtype)
        z = y @ w
    return z


def test_a_changed_autocast_dtype_recompiles_both_sides_of_the_break(cnt, capsys):
    """The dtype is an argument: bfloat16 then float16 compiles the frame and its resume
    function again (the resume function's guard checks the dtype of the manager it enters);
    a repeated dtype reuses them."""
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    compiled = stenograph.compile(_autocast_to, backend=cnt)
    for dtype in (BF16, BF16, torch.float16, torch.float16, BF16):
        assert_matches_eager(_autocast_to, compiled, lambda i, dtype=dtype: (x, w, dtype), capsys, calls=1)
        assert compiled(x, w, dtype).dtype == dtype
    assert cnt.frame_count == 4


def test_an_outer_autocast_or_inference_mode_recompiles(cnt, capsys):
    """Called inside an outer autocast (another dtype) or inference mode, the graphs compiled
    outside do not fit: each state compiles its own, and each result equals eager's there."""
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    compiled = stenograph.compile(_autocast_disabled, backend=cnt)
    for outer in (lambda: torch.autocast("cpu", dtype=torch.float16), torch.inference_mode, torch.no_grad):
        with outer():
            results = assert_matches_eager(_autocast_disabled, compiled, lambda i: (x, w), capsys, calls=2)
            assert _kinds(results[-1]) == _kinds(_autocast_disabled(x, w))
    assert cnt.frame_count == 6


def _reads_inference_mode(x):
    return x + 1, torch.is_inference_mode_enabled()


def test_inference_mode_is_a_guarded_global(cnt):
    """A graph compiled under no_grad is not reused under inference mode (grad is off in both):
    the trace read `is_inference_mode_enabled()`, and inference mode is a guarded global."""
    compiled = stenograph.compile(_reads_inference_mode, backend=cnt)
    with torch.no_grad():
        assert compiled(torch.ones(2))[1] is False
    with torch.inference_mode():
        actual = compiled(torch.ones(2))
    assert actual[1] is True and torch.is_inference(actual[0])
    assert cnt.frame_count == 2


def test_inference_tensors_as_inputs(cnt):
    """Tensors made under inference mode are graph inputs like any other (they have no version
    counter to read)."""
    with torch.inference_mode():
        x = torch.randn(3)
    compiled = stenograph.compile(lambda t: t * 2, backend=cnt)
    torch.testing.assert_close(compiled(x), x * 2)
    assert cnt.frame_count == 1


# ---------------------------------------------------------------------------------------------
# training


class _MixedPrecision(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=BF16):
            h = torch.relu(self.fc1(x))
            print("hidden", h.dtype)
            out = self.fc2(h)
        return out.float().pow(2).mean()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_autocast_training_step_across_a_break(backend, capsys):
    """Loss and every parameter's gradient through the graphs on both sides of a break inside
    autocast equal eager's (the backward casts as the forward did)."""
    model = _MixedPrecision()
    reference = copy.deepcopy(model)
    compiled = stenograph.compile(model, backend=backend)
    x = torch.randn(5, 8, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    for _ in range(2):
        loss = compiled(x)
        expected = reference(x_ref)
        torch.testing.assert_close(loss, expected)
        loss.backward()
        expected.backward()
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=lambda m, name=name: f"{name}: {m}")
    torch.testing.assert_close(x.grad, x_ref.grad)
    assert capsys.readouterr().out == "hidden torch.bfloat16\n" * 4


# ---------------------------------------------------------------------------------------------
# exceptions


class _FailingStream(io.StringIO):
    def write(self, text):
        raise OSError("stream closed")


def _raises_inside(x, w, stream, inner):
    with torch.autocast("cpu", dtype=BF16):
        with inner():
            y = x @ w
            print("inside", file=stream)
            z = y * 2
    return z


@pytest.mark.parametrize("inner", [torch.inference_mode, torch.no_grad])
def test_an_exception_leaving_the_blocks_restores_the_state(cnt, inner):
    """The eager part raises inside both blocks: the exception leaves the function through their
    exits (the handlers' resume functions, which break again where it leaves), so grad mode,
    inference mode and autocast are back, as eagerly; without the failure the same code returns
    eager's result."""
    x, w = _pair(0, requires_grad=True)
    compiled = stenograph.compile(_raises_inside, backend=cnt)
    for run in (_raises_inside, compiled, compiled):
        with pytest.raises(OSError, match="stream closed"):
            run(x, w, _FailingStream(), inner)
        assert _state() == (True, False, False, BF16)
    expected = _raises_inside(x, w, io.StringIO(), inner)
    actual = compiled(x, w, io.StringIO(), inner)
    assert _kinds([actual]) == _kinds([expected])
    assert_same(actual, expected)


def _caught_inside(x, w):
    with torch.autocast("cpu", dtype=BF16):
        y = x @ w
        try:
            {}["missing"]
        except KeyError as e:
            print("caught", repr(e), _state())
        z = y @ w
    return z, _state()


def test_an_exception_caught_inside_the_block(cnt, capsys):
    """A handler inside the block with a break: its resume function runs in autocast too.

    From 3.12 the handler sits after the function's return and jumps back to the code after
    the `try`: torch.compile's loop test (which stenograph keeps, to skip the frames it skips)
    reads that as a loop, and the frame runs eagerly, its results and prints still eager's."""
    compiled = stenograph.compile(_caught_inside, backend=cnt)
    assert_matches_eager(_caught_inside, compiled, _pair, capsys)
    assert cnt.frame_count == (2 if sys.version_info < (3, 12) else 0)


# ---------------------------------------------------------------------------------------------
# other spellings


@torch.inference_mode()
def _decorated_inference(x):
    y = x * 2
    print("decorated", _state())
    return y + 1


@torch.autocast("cpu", dtype=BF16)
def _decorated_autocast(x, w):
    y = x @ w
    print("decorated", _state())
    return y @ w


def _calls_decorated(x, w):
    return _decorated_inference(x), _decorated_autocast(x, w).float() - 1


def test_decorator_forms(cnt, capsys):
    """`@torch.inference_mode()` / `@torch.autocast(...)` functions with a break, called from a
    compiled function: the decorated function runs in its state as a frame of its own."""
    compiled = stenograph.compile(_calls_decorated, backend=cnt)
    results = assert_matches_eager(_calls_decorated, compiled, _pair, capsys)
    assert torch.is_inference(results[-1][0])


def test_a_compiled_decorated_function(cnt, capsys):
    """The decorated function itself compiled: 2 graphs around its print (the decorator's own
    frame computes nothing)."""
    compiled = stenograph.compile(_decorated_autocast, backend=cnt)
    assert_matches_eager(_decorated_autocast, compiled, _pair, capsys)
    assert cnt.frame_count == 2


def _cpu_amp_autocast(x, w):
    with torch.cpu.amp.autocast(dtype=BF16):
        y = x @ w
        print("inside", _state())
        z = y @ w
    return y, z


def test_deprecated_cpu_amp_autocast(cnt, capsys):
    """`torch.cpu.amp.autocast` warns when made, every call as eagerly: it is made at a graph
    break, and the resume function enters the real manager in its graphs."""
    compiled = stenograph.compile(_cpu_amp_autocast, backend=cnt)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    for fn in (_cpu_amp_autocast, compiled, compiled):
        with pytest.warns(FutureWarning, match="torch.cpu.amp.autocast"):
            y, z = fn(x, w)
        assert y.dtype == z.dtype == BF16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert_matches_eager(_cpu_amp_autocast, compiled, lambda i: (x, w), capsys, calls=2)
    assert cnt.frame_count == 2


def _manually_entered(x):
    ctx = torch.autocast("cpu", dtype=BF16)
    ctx.__enter__()
    y = x @ x
    print("inside", _state())
    z = y @ x
    ctx.__exit__(None, None, None)
    return y, z


def test_a_context_entered_without_with_runs_the_frame_eagerly(cnt, capsys):
    """A break while an autocast entered by `__enter__()` is open cannot re-enter it around the
    eager part: the frame runs eagerly, with a warning saying why."""
    compiled = stenograph.compile(_manually_entered, backend=cnt)
    with pytest.warns(stenograph.StenographWarning, match="entered without `with`"):
        assert_matches_eager(_manually_entered, compiled, lambda i: _pair(i)[:1], capsys, calls=2)
    assert cnt.frame_count == 0
    assert sys.exc_info() == (None, None, None)


_HOOKS_OFF = "saved-tensor hooks are off here"


def _hooks_message():
    return torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()


def _register_hooks():
    """What registering saved-tensor hooks does in the current state (eager raises the message)."""
    try:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            return "registered"
    except RuntimeError as e:
        return str(e)


def _saved_hooks_off_block(x, w):
    y = x * w
    with torch.autograd.graph.disable_saved_tensors_hooks(_HOOKS_OFF):
        z = y.sin()
        print("inside", _register_hooks())
        with torch.autograd.graph.disable_saved_tensors_hooks("nested"):
            u = z * 2
            print("nested", _hooks_message())
        v = u + z
    return v, y, _hooks_message()


def _saved_hooks_off_decorated(x, w):
    @torch.autograd.graph.disable_saved_tensors_hooks(_HOOKS_OFF)
    def inner(a, b):
        return (a * b).cos()

    return inner(x, w) + x, _hooks_message()


def test_disable_saved_tensors_hooks_is_traced_in_one_graph():
    """torch.compile makes one graph of it (fullgraph), as a block and as a decorator; the state
    is eager's again after the call."""
    x, w = _pair(0, requires_grad=True)
    compiled = stenograph.compile(_saved_hooks_off_decorated, backend="aot_eager", fullgraph=True)
    assert_same(compiled(x, w), _saved_hooks_off_decorated(x, w))
    block = lambda x: torch.autograd.graph.disable_saved_tensors_hooks(_HOOKS_OFF)(torch.sin)(x) * 2  # noqa: E731
    assert_same(stenograph.compile(block, backend="eager", fullgraph=True)(x), block(x))
    assert _hooks_message() is None


def test_breaks_inside_disable_saved_tensors_hooks_run_in_it(cnt, capsys):
    """At each print the eager part sees hooks disabled with the innermost message (registering
    one raises it, as eagerly); the resume functions run inside the blocks, and the state after
    the call is eager's. No more graphs than torch.compile's (5); later calls compile nothing."""
    compiled = stenograph.compile(_saved_hooks_off_block, backend=cnt)
    results = assert_matches_eager(_saved_hooks_off_block, compiled, lambda i: _pair(i, requires_grad=True), capsys)
    assert results[-1][2] is None
    graphs = cnt.frame_count
    assert graphs == 3  # before the first print, between the prints, after the second
    assert graphs <= torch_graph_count(_saved_hooks_off_block, *[_pair(i, requires_grad=True) for i in range(3)])
    compiled(*_pair(5, requires_grad=True))
    assert cnt.frame_count == graphs
