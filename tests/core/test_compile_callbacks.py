"""`stenograph.on_compile_start` / `on_compile_end`: the user's functions around each compile."""

from __future__ import annotations

import pytest
import torch

import stenograph
from stenograph import CallbackArgs, CallbackTrigger


@pytest.fixture(autouse=True)
def _fresh():
    stenograph.reset()
    yield
    stenograph.reset()


def _recording():
    seen = []
    stenograph.on_compile_start(lambda args: seen.append(("start", args)))
    stenograph.on_compile_end(lambda args: seen.append(("end", args)))
    return seen


def test_one_compile_runs_start_then_end_once():
    seen = _recording()

    @stenograph.compile(backend="eager", fullgraph=True)
    def f(x):
        return x.sin() + 1

    x = torch.randn(3)
    torch.testing.assert_close(f(x), x.sin() + 1)
    f(x)  # a hit compiles nothing
    assert [kind for kind, _ in seen] == ["start", "end"]
    start, end = seen[0][1], seen[1][1]
    assert isinstance(start, CallbackArgs) and start.callback_trigger is CallbackTrigger.FRAME
    assert start.compile_id == end.compile_id and start.compile_id.endswith("/0")


def test_a_graph_break_compiles_twice_and_a_recompile_once_more():
    seen = _recording()

    @stenograph.compile(backend="eager")
    def f(x):
        x = x + 1
        stenograph.graph_break()
        return torch.sin(x)

    f(torch.randn(2))  # the frame, then the code after the break on its first call
    assert [kind for kind, _ in seen] == ["start", "end", "start", "end"]
    f(torch.randn(2, 2))  # new shape: each compiles again
    ids = [args.compile_id for kind, args in seen if kind == "start"]
    assert len(ids) == len(set(ids)) >= 3
    assert ids[2].split("/")[1] == "1"  # the frame's second compile


def test_end_runs_when_the_compile_fails_and_the_error_reaches_the_caller():
    seen = _recording()

    @stenograph.compile(backend="eager", fullgraph=True)
    def f(x):
        stenograph.graph_break()
        return x

    with pytest.raises(stenograph.Unsupported):
        f(torch.randn(2))
    assert [kind for kind, _ in seen] == ["start", "end"]


def test_a_raising_callback_reaches_the_caller():
    @stenograph.on_compile_start
    def refuse(args):
        raise RuntimeError("no compiles now")

    f = stenograph.compile(lambda x: x * 2, backend="eager")
    with pytest.raises(RuntimeError, match="no compiles now"):
        f(torch.randn(2))


def test_printed_output_matches_torchs_example(capsys):
    stenograph.on_compile_start(lambda _: print("Compilation started."))
    stenograph.on_compile_end(lambda _: print("Compilation ended."))
    module = stenograph.compile(torch.nn.Linear(3, 3), backend="eager", fullgraph=True)
    module(torch.randn(2, 3))
    assert capsys.readouterr().out == "Compilation started.\nCompilation ended.\n"


def test_reset_forgets_them_and_bad_input_is_refused():
    seen = _recording()
    stenograph.reset()
    stenograph.compile(lambda x: x + 1, backend="eager")(torch.randn(2))
    assert seen == []
    with pytest.raises(TypeError, match="on_compile_start\\(\\) takes a callable"):
        stenograph.on_compile_start("not a function")
