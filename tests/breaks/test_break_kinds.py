"""BEHAVIOUR case 14: common graph-break causes each give a break with a precise reason.

For each kind: results (and output, log records, recorded calls) equal eager's on every call, the
counting backend sees the expected graphs (and no new ones on later calls), and explain() names
the cause and the user's line. Where torch.compile counts differently, both counts are recorded.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import logging
import pdb
import re
import sys

import numpy as np
import pytest
import torch
from helpers import assert_same, line_of, ops_of
from torch import nn

import stenograph

from ._support import assert_matches_eager, torch_graph_count


def _assert_reason(fn, args, pattern: str, where, needle: str, *, graphs: int, breaks: int = 1) -> None:
    """explain(fn)(*args): `graphs` graphs, `breaks` breaks; the first break matches pattern at the needle line."""
    report = stenograph.explain(fn)(*args)
    assert report.graph_count == graphs, str(report)
    assert report.graph_break_count == breaks, str(report)
    reason = report.break_reasons[0]
    assert re.search(pattern, reason.reason, re.IGNORECASE), reason.reason
    filename, lineno, funcname, source = reason.user_stack[0]
    assert lineno == line_of(where, needle), (reason.user_stack, line_of(where, needle))
    assert funcname == where.__name__, reason.user_stack
    assert needle in source, reason.user_stack


# ---------------------------------------------------------------------------------------------
# print


def _print_kind(x):
    y = x.tanh()
    print("tanh mean", y.mean())
    return y * y


def test_print_breaks_with_reason_print(cnt, capsys):
    """print: 2 graphs (torch: 2), eager output every call, reason names print."""
    inputs = [torch.randn(6) for _ in range(3)]
    peer = torch_graph_count(_print_kind, (inputs[0],))
    fn = stenograph.compile(_print_kind, backend=cnt)
    assert_matches_eager(_print_kind, fn, lambda i: (inputs[i],), capsys)
    assert cnt.frame_count == 2 == peer
    _assert_reason(_print_kind, (inputs[0],), r"\bprint\b", _print_kind, "print(", graphs=2)


# ---------------------------------------------------------------------------------------------
# logging


_LOG = logging.getLogger("stenograph.tests.breaks.kinds")


def _logging_kind(x):
    y = x * 2
    _LOG.info("shape %s", tuple(y.shape))
    _LOG.warning("dims %d", y.dim())
    return torch.relu(y)


def test_logging_calls_break_and_emit_records_in_order(cnt, caplog):
    """logger.info / logger.warning: records equal eager's, in order, every call; 2 graphs (torch: 2)."""
    caplog.set_level(logging.INFO, logger=_LOG.name)
    x = torch.randn(3, 2)
    peer = torch_graph_count(_logging_kind, (x,))
    fn = stenograph.compile(_logging_kind, backend=cnt)
    for _ in range(3):
        caplog.clear()
        expected = _logging_kind(x)
        eager_records = [(r.levelname, r.getMessage()) for r in caplog.records]
        caplog.clear()
        out = fn(x)
        compiled_records = [(r.levelname, r.getMessage()) for r in caplog.records]
        assert compiled_records == eager_records == [("INFO", "shape (3, 2)"), ("WARNING", "dims 2")]
        assert_same(out, expected)
    assert cnt.frame_count == 2 == peer
    assert [ops_of(gm) for gm in cnt.graphs] == [["mul"], ["relu"]]
    _assert_reason(_logging_kind, (x,), r"log|info|Logger", _logging_kind, "_LOG.info(", graphs=2, breaks=2)


def test_logging_record_points_at_the_users_line(cnt, caplog):
    """The record made at the break names the user's function and line, as in eager."""
    caplog.set_level(logging.INFO, logger=_LOG.name)
    fn = stenograph.compile(_logging_kind, backend=cnt)
    fn(torch.randn(2))
    info = caplog.records[0]
    assert info.funcName == "_logging_kind"
    assert info.lineno == line_of(_logging_kind, "_LOG.info(")


# ---------------------------------------------------------------------------------------------
# pdb.set_trace


class _RecordingPdb:
    """Stands in for pdb.Pdb: the real pdb.set_trace() builds one and calls its set_trace."""

    calls: list[str] = []
    _last_pdb_instance = None  # 3.14's set_trace reuses the last instance it made

    def __init__(self, **options):  # 3.14 passes mode, backend and colorize
        pass

    def set_trace(self, frame=None, **options):  # 3.14 passes commands
        _RecordingPdb.calls.append("set_trace")


def _stdlib_pdb_set_trace():
    """The standard library's own pdb.set_trace, from a fresh copy of the pdb module.

    pytest replaces `pdb.set_trace` with its own wrapper, so the module attribute is not the
    standard function while tests run. The copy's `Pdb` is the recorder, so nothing blocks.
    """
    spec = importlib.util.find_spec("pdb")
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    fresh.Pdb = _RecordingPdb
    return fresh.set_trace


def _pdb_kind(x):
    y = x * 2
    pdb.set_trace()
    return y + 1


def _breakpoint_kind(x):
    y = x * 2
    breakpoint()
    return y + 1


def test_pdb_set_trace_breaks_and_runs_once_per_call(cnt, monkeypatch):
    """pdb.set_trace() (the stdlib function, Pdb replaced by a recorder): 2 graphs (torch: 2)."""
    monkeypatch.setattr(pdb, "set_trace", _stdlib_pdb_set_trace())
    monkeypatch.setattr(_RecordingPdb, "calls", [])
    x = torch.randn(4)
    peer = torch_graph_count(_pdb_kind, (x,))
    _RecordingPdb.calls.clear()
    fn = stenograph.compile(_pdb_kind, backend=cnt)
    for n in range(1, 4):
        assert_same(fn(x), _pdb_kind(x))
        assert _RecordingPdb.calls == ["set_trace"] * (2 * n)
    assert cnt.frame_count == 2 == peer
    _assert_reason(_pdb_kind, (x,), r"pdb|set_trace", _pdb_kind, "pdb.set_trace()", graphs=2)


def test_breakpoint_builtin_breaks_and_calls_the_hook_once_per_call(cnt, monkeypatch):
    """breakpoint() (sys.breakpointhook replaced by a recorder): 2 graphs (torch: 2)."""
    hook_calls: list[int] = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *args, **kwargs: hook_calls.append(1))
    x = torch.randn(4)
    peer = torch_graph_count(_breakpoint_kind, (x,))
    hook_calls.clear()
    fn = stenograph.compile(_breakpoint_kind, backend=cnt)
    for n in range(1, 4):
        assert_same(fn(x), _breakpoint_kind(x))
        assert len(hook_calls) == 2 * n
    assert cnt.frame_count == 2 == peer
    _assert_reason(_breakpoint_kind, (x,), r"breakpoint", _breakpoint_kind, "breakpoint()", graphs=2)


# ---------------------------------------------------------------------------------------------
# input


def _input_kind(x):
    y = x * 2
    n = int(input("factor? "))
    return y * n


def test_input_breaks_reads_stdin_and_prompts(cnt, capsys, monkeypatch):
    """input(): prompt written and a line read per call, as eager; 2 graphs (torch: 2).

    stdin is replaced (not builtins.input), so the real builtin runs: a Python stand-in for input
    would be inlined by any tracer and would not break at all.
    """
    monkeypatch.setattr(sys, "stdin", io.StringIO("3\n" * 40))
    x = torch.randn(4)
    peer = torch_graph_count(_input_kind, (x,))
    fn = stenograph.compile(_input_kind, backend=cnt)
    assert_matches_eager(_input_kind, fn, lambda i: (x,), capsys)
    fn(x)
    assert capsys.readouterr().out == "factor? "
    assert cnt.frame_count == 2 == peer
    _assert_reason(_input_kind, (x,), r"\binput\b", _input_kind, "input(", graphs=2)


def test_input_new_value_reaches_the_resumed_part(cnt, capsys, monkeypatch):
    """A different line read on a later call is used by the resumed part (results follow stdin)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("2\n2\n5\n5\n"))
    x = torch.randn(4)
    fn = stenograph.compile(_input_kind, backend=cnt)
    assert_matches_eager(_input_kind, fn, lambda i: (x,), capsys, calls=2)
    assert cnt.frame_count == 3  # one graph before the break, one resume graph per line read


# ---------------------------------------------------------------------------------------------
# numpy


def _numpy_kind(x):
    y = torch.sin(x) + 1
    total = np.sum(y.detach().numpy()) * np.random.rand()
    z = torch.cos(y) * 2
    return z, total


def test_numpy_random_draw_breaks_and_matches_eager(cnt):
    """np.sum(t.numpy()) is traced; np.random.rand() is a break, so a seeded NumPy stream gives
    eager's number: 2 graphs (torch.compile draws it from torch's generator in its one graph)."""
    inputs = [torch.randn(5) for _ in range(3)]
    fn = stenograph.compile(_numpy_kind, backend=cnt)
    for i, x in enumerate(inputs):
        np.random.seed(i)
        z, total = fn(x)
        np.random.seed(i)
        z_e, total_e = _numpy_kind(x)
        assert_same(z, z_e)
        assert type(total) is type(total_e)
        assert np.isclose(total, total_e, rtol=1e-6)  # torch sums in another order than NumPy
    # the resume function takes the sum, a NumPy scalar, as a constant: one graph per new value
    assert cnt.frame_count == 1 + len(inputs)
    assert ops_of(cnt.graphs[-1])[-2:] == ["cos", "mul"]
    _assert_reason(_numpy_kind, (inputs[0],), r"numpy\.random", _numpy_kind, "np.random.rand(", graphs=2)


# ---------------------------------------------------------------------------------------------
# .item() and if tensor:


def _item_kind(x):
    y = x * 2
    if y.sum().item() > 0:
        return y + 1
    return y - 1


def test_item_breaks_with_reason_item(cnt):
    """.item(): results equal eager on both branches; graph counts equal torch's on the same calls.

    torch (2.13): 2 graphs for the first call, 3 after (pos, 2 * pos, pos) because the float from
    .item() is specialised in the resume function, 4 once the other branch has run too.
    stenograph passes the float to the resume function as a symbolic input: only the side of the
    branch is guarded, so 2 graphs for the first three calls and 3 once the other side has run.
    """
    pos, neg = torch.ones(3), -torch.ones(3)
    first_calls = [(pos,), (pos * 2,), (pos,)]
    more_calls = [(neg,), (pos,), (neg * 4,)]
    peer_first = torch_graph_count(_item_kind, first_calls[0])
    peer_three = torch_graph_count(_item_kind, *first_calls)
    peer_all = torch_graph_count(_item_kind, *first_calls, *more_calls)
    fn = stenograph.compile(_item_kind, backend=cnt)
    counts = []
    for (x,) in first_calls:
        assert_same(fn(x), _item_kind(x))
        counts.append(cnt.frame_count)
    assert counts == [2, 2, 2] and peer_first == 2 and peer_three == 3
    for (x,) in more_calls:
        assert_same(fn(x), _item_kind(x))
    assert cnt.frame_count == 3 and peer_all == 4
    _assert_reason(_item_kind, (pos,), r"\bitem\b", _item_kind, ".item()", graphs=2)


def _tolist_kind(x):
    y = x + 1
    vals = y.tolist()
    return y * len(vals)


def test_tolist_breaks_with_reason_tolist(cnt):
    """.tolist(): 2 graphs (torch: 2), also across calls with new values of the same shape."""
    inputs = [torch.randn(4) for _ in range(3)]
    peer = torch_graph_count(_tolist_kind, *[(x,) for x in inputs])
    fn = stenograph.compile(_tolist_kind, backend=cnt)
    for x in inputs:
        assert_same(fn(x), _tolist_kind(x))
    assert cnt.frame_count == 2 == peer
    _assert_reason(_tolist_kind, (inputs[0],), r"tolist", _tolist_kind, ".tolist()", graphs=2)


def _tolist_returned(x):
    y = x + 1
    vals = y.tolist()
    return y * 2, vals


def test_tolist_value_is_returned_as_eager(cnt):
    """The list made eagerly at the break is carried through the resumed part unchanged."""
    fn = stenograph.compile(_tolist_returned, backend=cnt)
    for x in (torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0])):
        assert_same(fn(x), _tolist_returned(x))


def _tensor_if_kind(x):
    s = x.sum()
    if s:
        return x + 1
    return x - 1


def test_if_tensor_breaks_and_takes_the_eager_branch(cnt):
    """`if tensor:` is data-dependent: graph before, then one graph per branch (torch: 2, then 3)."""
    ones, zeros = torch.ones(3), torch.zeros(3)
    peer_one = torch_graph_count(_tensor_if_kind, (ones,))
    peer_both = torch_graph_count(_tensor_if_kind, (ones,), (zeros,))
    fn = stenograph.compile(_tensor_if_kind, backend=cnt)
    for x in (ones, ones * 3):
        assert_same(fn(x), _tensor_if_kind(x))
    assert cnt.frame_count == 2 == peer_one
    for x in (zeros, ones, torch.tensor([1.0, -1.0, 0.0])):
        assert_same(fn(x), _tensor_if_kind(x))
    assert cnt.frame_count == 3 == peer_both
    _assert_reason(
        _tensor_if_kind, (ones,), r"data.dependent|bool|branch|condition|jump", _tensor_if_kind, "if s:", graphs=2
    )


# ---------------------------------------------------------------------------------------------
# dynamic attribute access and setattr on modules


class _DictAccess(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = 2.0
        self.shift = -1.0

    def forward(self, x, name):
        x = self.fc(x)
        s = self.__dict__[name]
        return torch.relu(x) * s


def test_module_dunder_dict_access_breaks_with_reason(cnt):
    """`self.__dict__[name]`: results equal eager for each name; reason names __dict__.

    torch.compile resolves __dict__ on modules (1 graph); stenograph breaks there, as
    BEHAVIOUR case 14 requires: linear | break | relu, mul = 2 graphs per name.
    """
    model = _DictAccess()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(2, 4)
    for _ in range(2):
        assert_same(compiled(x, "scale"), model(x, "scale"))
    assert cnt.frame_count == 2
    assert_same(compiled(x, "shift"), model(x, "shift"))
    assert cnt.frame_count == 3  # the graph before the break is reused; the resume one is not
    _assert_reason(model, (x, "scale"), r"__dict__", _DictAccess.forward, "self.__dict__[name]", graphs=2)


class _SetattrModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, name="last"):
        y = self.fc(x)
        setattr(self, name, y.detach())
        return torch.relu(y)


def test_setattr_on_module_is_captured_and_sets_the_attribute(cnt):
    """setattr(module, ...) of a tensor: the attribute holds eager's value after every call, and the
    write is replayed after the graph (1 graph, as torch.compile)."""
    model = _SetattrModule()
    reference = copy.deepcopy(model)
    compiled = stenograph.compile(model, backend=cnt)
    for _ in range(3):
        x = torch.randn(2, 4)
        assert_same(compiled(x), reference(x))
        torch.testing.assert_close(model.last, reference.last)
    assert cnt.frame_count == 1


class _SetattrSubmodule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, name="head"):
        y = self.fc(x)
        setattr(self, name, self.fc)
        return torch.relu(y)


def test_setattr_of_a_submodule_breaks_and_sets_the_attribute(cnt):
    """Registering a submodule inside forward breaks (case 14), with the reason naming setattr."""
    model = _SetattrSubmodule()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(2, 4)
    assert_same(compiled(x), model(x))
    assert model._modules["head"] is model.fc
    _assert_reason(_SetattrSubmodule(), (x,), r"setattr", _SetattrSubmodule.forward, "setattr(self", graphs=2)


# ---------------------------------------------------------------------------------------------
# unsupported builtins


_GLOBAL_FACTOR = 3


def _globals_kind(x):
    y = x * 2
    k = globals()["_GLOBAL_FACTOR"]
    return y + k


def _eval_kind(x):
    y = x * 2
    k = eval("1 + 2")
    return y + k


@pytest.mark.parametrize(
    ("fn", "needle", "pattern", "torch_graphs"),
    [
        # torch also breaks on globals(): 2 graphs
        pytest.param(_globals_kind, "globals()", r"globals", 2, id="globals"),
        # torch.compile folds eval("1 + 2") (1 graph); stenograph breaks on eval: 2
        pytest.param(_eval_kind, "eval(", r"\beval\b", 1, id="eval"),
    ],
)
def test_unsupported_builtin_breaks_with_its_name(cnt, fn, needle, pattern, torch_graphs):
    """An unsupported builtin: mul | builtin | add = 2 graphs, results equal eager every call."""
    inputs = [torch.randn(4) for _ in range(3)]
    peer = torch_graph_count(fn, (inputs[0],))
    if torch.__version__.startswith("2.13"):  # measured there; torch 2.11 also breaks on eval (2)
        assert peer == torch_graphs
    compiled = stenograph.compile(fn, backend=cnt)
    for x in inputs:
        assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2
    _assert_reason(fn, (inputs[0],), pattern, fn, needle, graphs=2)
