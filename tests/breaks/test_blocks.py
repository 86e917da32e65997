"""Graph breaks inside blocks: `for` loops, grad-mode `with` blocks, `try/except/finally`.

The live state at the break (the loop's iterator, lists under construction, the active context
managers, the enclosing exception handlers) must be rebuilt so that the eager part and the
resumed part behave exactly as in eager Python.
"""

from __future__ import annotations

import copy
import io
import warnings

import pytest
import torch
from helpers import assert_same
from torch import nn

import stenograph

from ._support import assert_matches_eager, torch_graph_count

# ---------------------------------------------------------------------------------------------
# for loops


class _ThreeLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            print("layer", i, tuple(x.shape))
            x = torch.relu(x)
        return x.sum()


def test_break_in_for_loop_over_three_layers(cnt, capsys):
    """A print in the body of a loop over a ModuleList of 3 layers: prints in order, every call.

    A break inside a loop skips the frame, as torch.compile does: it runs eagerly, and what it
    calls is compiled unless it is torch's own (`nn.Linear`), so no graph at all, as torch's.
    (tests/breaks/test_loop_breaks.py has loops whose callees compile.)
    """
    model = _ThreeLayers()
    compiled = stenograph.compile(model, backend=cnt)
    inputs = [torch.randn(2, 8) for _ in range(3)]
    assert_matches_eager(model, compiled, lambda i: (inputs[i],), capsys, calls=3)
    assert cnt.frame_count == 0 == torch_graph_count(model, (inputs[0],))


def test_break_in_for_loop_backward_matches_eager(cnt, capsys):
    """Parameter and input gradients of the skipped frame equal eager's."""
    model = _ThreeLayers()
    reference = copy.deepcopy(model)
    compiled = stenograph.compile(model, backend=cnt)
    x0 = torch.randn(2, 8)
    x_c, x_e = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    compiled(x_c).backward()
    reference(x_e).backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)
    for (name, p_c), (_, p_e) in zip(model.named_parameters(), reference.named_parameters()):
        assert p_c.grad is not None, name
        torch.testing.assert_close(p_c.grad, p_e.grad, msg=lambda m, name=name: f"{name}: {m}")
    assert cnt.frame_count == 0


def _range_loop(x):
    for i in range(3):
        x = torch.sin(x) + i
        print("step", i)
    return x * 2


def test_break_in_for_loop_over_range(cnt, capsys):
    """A loop over range(3) with a print at the end of its body: the frame is skipped (0 graphs),
    as torch.compile skips it, instead of compiling a resume function per pass."""
    inputs = [torch.randn(4) for _ in range(3)]
    fn = stenograph.compile(_range_loop, backend=cnt)
    assert_matches_eager(_range_loop, fn, lambda i: (inputs[i],), capsys, calls=3)
    assert cnt.frame_count == 0 == torch_graph_count(_range_loop, (inputs[0],))


def _collect(xs):
    outs = []
    for t in list(xs):
        u = t.relu()
        print("item", tuple(u.shape))
        outs.append(u * 2)
    return outs


def test_break_in_loop_over_list_building_a_list(cnt, capsys):
    """A list built in a loop with a break: eager results and prints every call, the frame
    skipped (torch.compile: 0 graphs too)."""
    xs = [torch.randn(3), torch.randn(3), torch.randn(3)]
    fn = stenograph.compile(_collect, backend=cnt)
    assert_matches_eager(_collect, fn, lambda i: (list(xs),), capsys, calls=3)
    assert cnt.frame_count == 0 == torch_graph_count(_collect, (list(xs),))


def _collect_growing(xs):
    outs = []
    for t in xs:
        print("item", tuple(t.shape))
        if len(xs) < 4:
            xs.append(t + 1)
        outs.append(t * 2)
    return outs


def test_break_in_loop_over_a_list_the_rest_can_change_runs_eagerly(cnt, capsys):
    """A loop over the caller's list with a break inside, the loop appending to the list: the
    frame is skipped, so the loop sees the list grow as eager's does (torch.compile: 0 graphs)."""
    xs = [torch.randn(3), torch.randn(3)]
    fn = stenograph.compile(_collect_growing, backend=cnt)
    assert_matches_eager(_collect_growing, fn, lambda i: (list(xs),), capsys, calls=3)
    assert cnt.frame_count == 0


# ---------------------------------------------------------------------------------------------
# grad-mode blocks


def _no_grad_block(x):
    y = x * 2
    with torch.no_grad():
        z = x + 1
        print("inside", z.requires_grad)
        w = z * 3 + x
    v = w + y
    return y, z, w, v


def _enable_grad_block(x):
    y = x * 2
    with torch.enable_grad():
        z = x + 1
        print("inside", z.requires_grad)
        w = z * 3 + x
    v = w + y
    return y, z, w, v


def _set_grad_enabled_block(x):
    y = x * 2
    with torch.set_grad_enabled(False):
        z = x + 1
        print("inside", z.requires_grad)
        w = z * 3 + x
    v = w + y
    return y, z, w, v


GRAD_BLOCKS = [
    pytest.param(_no_grad_block, True, id="no_grad"),
    pytest.param(_enable_grad_block, False, id="enable_grad-under-no_grad"),
    pytest.param(_set_grad_enabled_block, True, id="set_grad_enabled-False"),
]


@pytest.mark.parametrize(("fn", "outer_grad"), GRAD_BLOCKS)
def test_break_inside_grad_mode_block_resumes_in_the_same_mode(cnt, capsys, fn, outer_grad):
    """A print inside the block: the resumed part of the block still runs in the block's mode.

    Every output's requires_grad equals eager's (w is computed after the break, inside the block;
    v after the block, in the outer mode). 2 graphs (torch: 2).
    """
    x0 = torch.randn(5)
    with torch.set_grad_enabled(outer_grad):
        peer = torch_graph_count(fn, (x0.clone().requires_grad_(),))
    compiled = stenograph.compile(fn, backend=cnt)
    with torch.set_grad_enabled(outer_grad):
        results = assert_matches_eager(fn, compiled, lambda i: (x0.clone().requires_grad_(),), capsys, calls=3)
    y, z, w, v = results[-1]
    block_grad = fn is _enable_grad_block
    assert z.requires_grad is block_grad and w.requires_grad is block_grad
    assert v.requires_grad is outer_grad
    assert torch.is_grad_enabled()  # the fixture's mode is restored: nothing leaked out of the block
    assert cnt.frame_count == 2 == peer


def test_break_inside_no_grad_backward_matches_eager(cnt, capsys):
    """Backward through the graphs on both sides of a break inside no_grad equals eager."""
    x0 = torch.randn(5)
    compiled = stenograph.compile(_no_grad_block, backend=cnt)
    x_c, x_e = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    _, _, _, v_c = compiled(x_c)
    _, _, _, v_e = _no_grad_block(x_e)
    (v_c * torch.arange(5.0)).sum().backward()
    (v_e * torch.arange(5.0)).sum().backward()
    torch.testing.assert_close(x_c.grad, x_e.grad)


def test_grad_mode_after_a_block_split_by_a_break_is_restored(cnt, capsys):
    """After the compiled call returns, grad mode is what it was before (no leaked no_grad)."""
    compiled = stenograph.compile(_no_grad_block, backend=cnt)
    compiled(torch.randn(3, requires_grad=True))
    assert torch.is_grad_enabled()
    with torch.no_grad():
        compiled(torch.randn(3, requires_grad=True))
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()


def _make_probe(disable):
    """A function that the given disable() keeps out of graphs; it records the eager grad mode."""
    events = []

    def probe(tag, t):
        events.append((tag, torch.is_grad_enabled(), (t * 1).requires_grad))

    return disable(probe), events


def _probed_no_grad(x, probe):
    y = x * 2
    with torch.no_grad():
        probe("inside", y)
        z = y * 3
    probe("after", y)
    return y, z


def test_eager_part_inside_no_grad_sees_no_grad(cnt):
    """The call run eagerly at the break inside no_grad runs without grad; after the block, with grad.

    The probe is a disabled function (a break). Graphs: [mul] | [mul] = 2; torch.compile with
    torch._dynamo.disable on the same probe gives the same count.
    """
    import torch._dynamo

    x0 = torch.randn(4)
    torch_probe, _ = _make_probe(torch._dynamo.disable)
    peer = torch_graph_count(_probed_no_grad, (x0.clone().requires_grad_(), torch_probe))

    probe, events = _make_probe(stenograph.disable)
    compiled = stenograph.compile(_probed_no_grad, backend=cnt)
    for _ in range(3):
        events.clear()
        expected = _probed_no_grad(x0.clone().requires_grad_(), probe)
        eager_events = list(events)
        events.clear()
        actual = compiled(x0.clone().requires_grad_(), probe)
        assert events == eager_events == [("inside", False, False), ("after", True, True)]
        assert_same(actual, expected)
    assert cnt.frame_count == 2 == peer


def _loop_in_no_grad(model, x):
    with torch.no_grad():
        for layer in model.layers:
            x = layer(x)
            print("norm", x.norm())
    return x


def test_break_in_loop_inside_no_grad(cnt, capsys):
    """Loop inside no_grad with a break in the body: no output requires grad, eager prints, the
    frame skipped (torch.compile: 0 graphs too)."""
    model = _ThreeLayers()
    compiled = stenograph.compile(_loop_in_no_grad, backend=cnt)
    x = torch.randn(2, 8, requires_grad=True)
    results = assert_matches_eager(_loop_in_no_grad, compiled, lambda i: (model, x), capsys, calls=2)
    assert results[-1].requires_grad is False
    assert cnt.frame_count == 0 == torch_graph_count(_loop_in_no_grad, (model, x))


# ---------------------------------------------------------------------------------------------
# try / except / finally


class _FailingStream:
    """A file-like object whose write raises, so that the eager print at the break raises."""

    def __init__(self) -> None:
        self.writes = 0

    def write(self, text):
        self.writes += 1
        raise OSError("stream closed")

    def flush(self):
        pass


def _try_except_finally(x, stream, log):
    y = x + 1
    try:
        y = y * 2
        print("value", y, file=stream)
        y = y - 100
        log.append("after print")
    except OSError as e:
        log.append("caught")
        log.append(e)
        y = y + 10
    finally:
        log.append("finally")
        y = y * 3
    return y


def _run_try(fn, x, stream_factory):
    stream, log = stream_factory(), []
    out = fn(x, stream, log)
    return out, stream, log


def test_eager_part_raises_and_the_frames_own_except_catches_it(cnt):
    """The print at the break raises OSError: the frame's own handler and finally run, as eager.

    Graphs: [add, mul] before the break, [add, mul] in the handler/finally = 2 (torch.compile
    gives 0: a break inside a try block makes it skip the frame).
    """
    fn = stenograph.compile(_try_except_finally, backend=cnt)
    for _ in range(3):
        x = torch.randn(4)
        out_e, stream_e, log_e = _run_try(_try_except_finally, x, _FailingStream)
        out_c, stream_c, log_c = _run_try(fn, x, _FailingStream)
        assert_same(out_c, out_e)
        assert stream_c.writes == stream_e.writes == 1
        assert log_c[0] == log_e[0] == "caught"
        assert type(log_c[1]) is OSError and str(log_c[1]) == "stream closed"
        assert log_c[2:] == log_e[2:] == ["finally"]
    assert cnt.frame_count == 2


def test_break_in_try_without_exception_runs_rest_of_try_and_finally(cnt):
    """Same function, a working stream: the rest of the try block and finally run once each.

    Graphs: [add, mul] | [sub, mul] = 2 (torch.compile: 0, frame skipped for the try break).
    """
    fn = stenograph.compile(_try_except_finally, backend=cnt)
    for _ in range(3):
        x = torch.randn(4)
        out_e, stream_e, log_e = _run_try(_try_except_finally, x, io.StringIO)
        out_c, stream_c, log_c = _run_try(fn, x, io.StringIO)
        assert_same(out_c, out_e)
        assert stream_c.getvalue() == stream_e.getvalue()
        assert log_c == log_e == ["after print", "finally"]
    assert cnt.frame_count == 2


def test_both_paths_of_the_same_try_share_the_cache(cnt):
    """Alternating failing and working streams: each path compiled once, results always eager's."""
    fn = stenograph.compile(_try_except_finally, backend=cnt)
    x = torch.randn(4)
    for factory in (_FailingStream, io.StringIO, _FailingStream, io.StringIO):
        out_e, _, log_e = _run_try(_try_except_finally, x, factory)
        out_c, _, log_c = _run_try(fn, x, factory)
        assert_same(out_c, out_e)
        assert [item for item in log_c if isinstance(item, str)] == [item for item in log_e if isinstance(item, str)]
    # [add, mul] before the break, then one graph for the handler path and one for the normal path
    assert cnt.frame_count == 3


def _try_finally_no_handler(x, stream, log):
    y = x * 2
    try:
        print("value", file=stream)
        y = y + 1
    finally:
        log.append("finally")
    return y


def test_exception_from_eager_part_propagates_after_finally(cnt):
    """No matching handler: the OSError reaches the caller, after finally ran once; every call."""
    fn = stenograph.compile(_try_finally_no_handler, backend=cnt)
    for _ in range(3):
        log_e, log_c = [], []
        with pytest.raises(OSError, match="stream closed"):
            _try_finally_no_handler(torch.randn(3), _FailingStream(), log_e)
        # the handler's resume function runs the finally body, then re-raises at a graph break
        with warnings.catch_warnings():
            warnings.simplefilter("error", stenograph.StenographWarning)
            with pytest.raises(OSError, match="stream closed"):
                fn(torch.randn(3), _FailingStream(), log_c)
        assert log_c == log_e == ["finally"]
    assert cnt.frame_count == 1


def _break_in_handler(x, stream):
    y = x + 1
    try:
        print("value", file=stream)
        y = y - 100
    except OSError:
        y = y * 10
        print("handled", y)
        y = y - 1
    return y


def test_break_inside_except_handler(cnt, capsys):
    """A second break inside the handler (while the exception is being handled): results, prints
    and the handler's own semantics equal eager's.

    Graphs: [add] before the first break, [mul] in the handler before `print`, [sub] after it
    (the resume prologue enters the handled exception again). torch.compile: 0 (frame skipped).
    """
    fn = stenograph.compile(_break_in_handler, backend=cnt)
    inputs = [torch.randn(4) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", stenograph.StenographWarning)
        assert_matches_eager(_break_in_handler, fn, lambda i: (inputs[i], _FailingStream()), capsys, calls=3)
    assert cnt.frame_count == 3


def _break_in_finally(x, log):
    y = x * 2
    try:
        y = y + 1
        log.append("try")
    finally:
        print("cleanup", y)
        log.append("finally")
    return y - 1


def test_break_inside_finally(cnt, capsys):
    """A print in finally (normal path): finally runs once, then the rest; [mul, add] | [sub] = 2 (torch: 2)."""
    inputs = [torch.randn(4) for _ in range(3)]
    peer = torch_graph_count(_break_in_finally, (inputs[0], []))
    capsys.readouterr()
    fn = stenograph.compile(_break_in_finally, backend=cnt)
    logs_e: list = []
    logs_c: list = []

    def make_args(i, logs):
        logs.append([])
        return inputs[i], logs[-1]

    capsys.readouterr()
    for i in range(3):
        expected = _break_in_finally(*make_args(i, logs_e))
        eager_text = capsys.readouterr().out
        actual = fn(*make_args(i, logs_c))
        assert capsys.readouterr().out == eager_text
        assert_same(actual, expected)
    assert logs_c == logs_e == [["try", "finally"]] * 3
    assert cnt.frame_count == 2 == peer
