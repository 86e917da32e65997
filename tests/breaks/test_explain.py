"""`stenograph.explain(fn)(*args)` across graph breaks (BEHAVIOUR cases 6 and 7).

explain counts the graphs of the function and of every resume function and callee compiled on
the way, and lists every break with its reason and user stack (innermost frame first, each a
(filename, lineno, funcname, source_line) tuple).
"""

from __future__ import annotations

import os
import re

import torch
from helpers import assert_same, line_of

import stenograph

from ._support import three_prints as _three_prints
from ._support import torch_graph_count


def _torch_explain(fn, *args):
    """torch._dynamo.explain as a peer (caches reset before and after)."""
    import torch._dynamo

    torch._dynamo.reset()
    try:
        return torch._dynamo.explain(fn)(*args)
    finally:
        torch._dynamo.reset()


def _case5(x):
    x = x * 2
    print("Debug:", x)
    x = torch.relu(x)
    return x


def _item_branch(x):
    y = x * 2
    if y.sum().item() > 0:
        return y + 1
    return y - 1


def _clean(x, w):
    return torch.nn.functional.gelu(x @ w).sum()


def _inner(x):
    x = x * 3
    print("inner")
    return x + 1


def _outer(x):
    x = x.sin()
    x = _inner(x)
    return x.cos()


def _manual(x):
    a = x.sin()
    stenograph.graph_break()
    return a.cos()


def _frame_ok(frame, fn, needle):
    """user_stack entry `frame` names fn's file, the line containing needle, fn and that line."""
    filename, lineno, funcname, source = frame
    assert os.path.abspath(filename) == os.path.abspath(__file__), frame
    assert lineno == line_of(fn, needle), (frame, line_of(fn, needle))
    assert funcname == fn.__name__, frame
    assert needle in source, frame


# ---------------------------------------------------------------------------------------------
# case 6: the fields


def test_case6_explain_fields_for_one_print(capsys):
    """Case 6: 2 graphs, 1 break (print) with its user stack, 2 ops, guards and compile times."""
    x = torch.randn(4)
    peer = _torch_explain(_case5, x)
    report = stenograph.explain(_case5)(x)

    assert report.graph_count == 2 == peer.graph_count
    assert report.graph_break_count == 1 == peer.graph_break_count
    assert len(report.graphs) == 2
    assert all(isinstance(gm, torch.fx.GraphModule) for gm in report.graphs)
    assert len(report.break_reasons) == 1
    assert report.op_count == 2
    assert [len(ops) for ops in report.ops_per_graph] == [1, 1]

    (reason,) = report.break_reasons
    assert "print" in reason.reason
    assert isinstance(reason.user_stack, list) and reason.user_stack
    assert all(isinstance(frame, tuple) and len(frame) == 4 for frame in reason.user_stack)
    assert len(reason.user_stack) == 1, reason.user_stack
    _frame_ok(reason.user_stack[0], _case5, 'print("Debug:"')

    assert isinstance(report.out_guards, list) and report.out_guards
    assert report.compile_times


def test_case6_explain_str_lists_counts_reasons_and_stacks(capsys):
    """Case 6: str() shows Graph Count, Graph Break Count, Op Count and each reason with file:line."""
    report = stenograph.explain(_case5)(torch.randn(4))
    text = str(report)
    assert re.search(r"Graph Count:\s*2\b", text), text
    assert re.search(r"Graph Break Count:\s*1\b", text), text
    assert re.search(r"Op Count:\s*2\b", text), text
    assert "print" in text
    assert os.path.basename(__file__) in text
    assert re.search(rf"\b{line_of(_case5, 'print(')}\b", text), text
    assert 'print("Debug:", x)' in text


def test_case6_explain_runs_the_function_once_with_its_output(capsys):
    """explain runs the function once: its print appears exactly once."""
    capsys.readouterr()
    stenograph.explain(_case5)(torch.ones(2))
    assert capsys.readouterr().out.count("Debug:") == 1


def test_case6_explain_counts_graphs_of_every_resume_function(capsys):
    """Three prints: 4 graphs (torch: 4), 3 breaks, reasons in source order, each with its line."""
    x = torch.randn(5)
    peer = _torch_explain(_three_prints, x)
    report = stenograph.explain(_three_prints)(x)
    assert report.graph_count == 4 == peer.graph_count
    assert report.graph_break_count == 3 == peer.graph_break_count
    assert len(report.break_reasons) == 3
    assert report.op_count == 5
    assert [len(ops) for ops in report.ops_per_graph] == [2, 1, 1, 1]
    for occurrence, reason in enumerate(report.break_reasons, 1):
        assert "print" in reason.reason
        filename, lineno, funcname, source = reason.user_stack[0]
        assert os.path.abspath(filename) == os.path.abspath(_three_prints.__code__.co_filename)
        assert lineno == line_of(_three_prints, "print(", occurrence), reason.user_stack
        # the 2nd and 3rd breaks happen in resume functions; their name may say so (torch's do)
        assert "three_prints" in funcname, reason.user_stack
        assert "print(" in source


def test_case6_explain_clean_function_has_no_breaks():
    """A function without breaks: 1 graph, 0 breaks, empty break_reasons."""
    report = stenograph.explain(_clean)(torch.randn(2, 3), torch.randn(3, 4))
    assert report.graph_count == 1
    assert report.graph_break_count == 0
    assert report.break_reasons == []
    assert report.op_count == 3
    text = str(report)
    assert re.search(r"Graph Count:\s*1\b", text)
    assert re.search(r"Graph Break Count:\s*0\b", text)


def test_case6_explain_break_inside_inlined_call_has_two_frame_stack(capsys):
    """A print inside an inlined callee: the first break's stack is [callee line, caller line].

    Graphs: outer before the call, the callee compiled as its own frame (2 graphs around its
    print), outer after the call = 4 (torch: 4). Breaks: the one at the call site in the outer
    frame, then the callee's own break. torch's explain reports graph_break_count as
    graph_count - 1 (= 3) with those same 2 reasons; stenograph counts the reasons it lists.
    """
    x = torch.randn(4)
    peer = _torch_explain(_outer, x)
    report = stenograph.explain(_outer)(x)
    assert report.graph_count == 4 == peer.graph_count
    assert len(report.break_reasons) == len(peer.break_reasons) == 2
    assert report.graph_break_count == len(report.break_reasons)

    first, second = report.break_reasons
    assert "print" in first.reason and "print" in second.reason
    assert len(first.user_stack) == 2, first.user_stack
    _frame_ok(first.user_stack[0], _inner, "print(")
    _frame_ok(first.user_stack[1], _outer, "_inner(x)")
    assert len(second.user_stack) == 1, second.user_stack
    _frame_ok(second.user_stack[0], _inner, "print(")

    text = str(report)
    assert str(line_of(_inner, "print(")) in text and str(line_of(_outer, "_inner(x)")) in text


def test_case6_explain_manual_graph_break_reason(capsys):
    """graph_break() is reported as a break whose reason names graph_break."""
    report = stenograph.explain(_manual)(torch.randn(3))
    assert report.graph_count == 2
    assert report.graph_break_count == 1
    assert "graph_break" in report.break_reasons[0].reason
    _frame_ok(report.break_reasons[0].user_stack[0], _manual, "stenograph.graph_break()")


# ---------------------------------------------------------------------------------------------
# case 7: data-dependent control flow


def test_case7_item_condition_break_reason_names_item():
    """Case 7: `if y.sum().item() > 0` breaks; the reason names item; 2 graphs (torch: 2)."""
    x = torch.ones(3)
    peer_count = torch_graph_count(_item_branch, (x,))
    report = stenograph.explain(_item_branch)(x)
    assert report.graph_count == 2 == peer_count
    assert report.graph_break_count == 1
    (reason,) = report.break_reasons
    assert "item" in reason.reason, reason.reason
    _frame_ok(reason.user_stack[0], _item_branch, ".item()")


def test_case7_both_branches_give_eager_results(cnt):
    """Case 7: positive and negative sums take their own branch; results equal eager every time.

    torch 2.13 compiles 3 graphs for the first three calls, since the float from .item() is
    specialised in the resume function, and 6 after all of them. stenograph passes the float to the
    resume function as a symbolic input and guards only the side of the branch: 2, then 3, and 5
    once a tensor of another size has come (both graphs again, with a dynamic size).
    """
    fn = stenograph.compile(_item_branch, backend=cnt)
    positive, negative = torch.ones(3), -torch.ones(3)
    first = [positive, positive * 2, positive]
    more = [negative, negative * 3, positive, negative, torch.tensor([1.0, -5.0])]
    peer_first = torch_graph_count(_item_branch, *[(x,) for x in first])
    peer_all = torch_graph_count(_item_branch, *[(x,) for x in first + more])

    for x in first:
        assert_same(fn(x), _item_branch(x))
    assert cnt.frame_count == 2 and peer_first == 3
    for x in more:
        assert_same(fn(x), _item_branch(x))
    assert cnt.frame_count == 5 and peer_all == 6
