"""Graph breaks on `print` (BEHAVIOUR case 5) and `stenograph.graph_break()` (case 8).

A break compiles the graph so far, runs the unsupported call eagerly and resumes capture right
after it. Every test compares with eager on several calls (results, stdout/stderr, in order) and
asserts the number of graphs the counting backend saw, next to torch.compile's count.
"""

from __future__ import annotations

import sys

import torch
from helpers import assert_same, ops_of

import stenograph

from ._support import assert_matches_eager, torch_graph_count
from ._support import three_prints as _three_prints

# ---------------------------------------------------------------------------------------------
# case 5: one print between tensor ops


def _case5(x):
    x = x * 2
    print("Debug:", x)
    x = torch.relu(x)
    return x


def test_case5_print_splits_into_two_graphs(cnt, capsys):
    """Case 5: mul | print | relu gives exactly 2 graphs (torch: 2), printing once per call."""
    inputs = [torch.randn(6) for _ in range(3)]
    torch_count = torch_graph_count(_case5, (inputs[0].clone(),))
    fn = stenograph.compile(_case5, backend=cnt)

    assert_matches_eager(_case5, fn, lambda i: (inputs[i].clone(),), capsys, calls=3)
    assert torch_count == 2
    assert cnt.frame_count == torch_count
    assert [ops_of(gm) for gm in cnt.graphs] == [["mul"], ["relu"]]
    assert cnt.op_count == 2


def test_case5_prints_exactly_once_per_call(cnt, capsys):
    """Case 5: each call prints one "Debug:" line, with that call's values, and adds no graph."""
    fn = stenograph.compile(_case5, backend=cnt)
    for value in (1.0, -3.0, 2.5):
        x = torch.full((3,), value)
        capsys.readouterr()
        out = fn(x)
        text = capsys.readouterr().out
        assert text.count("Debug:") == 1, text
        assert text == f"Debug: {x * 2}\n"
        torch.testing.assert_close(out, torch.relu(x * 2))
    assert cnt.frame_count == 2


# ---------------------------------------------------------------------------------------------
# three prints


def test_three_prints_give_four_graphs_printing_in_order(cnt, capsys):
    """Three prints with tensor work around each: 4 graphs (torch: 4), output in order, every call."""
    inputs = [torch.randn(5) for _ in range(3)]
    torch_count = torch_graph_count(_three_prints, (inputs[0].clone(),))
    fn = stenograph.compile(_three_prints, backend=cnt)

    capsys.readouterr()
    assert_matches_eager(_three_prints, fn, lambda i: (inputs[i].clone(),), capsys, calls=3)
    assert torch_count == 4
    assert cnt.frame_count == torch_count
    assert [ops_of(gm) for gm in cnt.graphs] == [["add", "sum"], ["mul"], ["sub"], ["relu"]]


def test_three_prints_output_order_interleaves_with_values(cnt, capsys):
    """The printed lines come in source order and show the values computed by the graphs."""
    fn = stenograph.compile(_three_prints, backend=cnt)
    x = torch.tensor([1.0, 2.0])
    capsys.readouterr()
    fn(x)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["one " + str(torch.tensor(5.0)), "two", "three " + str(torch.tensor([1.0, 3.0]))]


def _prints_at_both_ends(x):
    print("start")
    y = x * 3
    print("end", y.shape)
    return y


def test_prints_at_start_and_end_give_no_empty_graphs(cnt, capsys):
    """Segments without tensor work are not handed to the backend: 1 graph (torch: 1)."""
    x = torch.randn(4)
    torch_count = torch_graph_count(_prints_at_both_ends, (x,))
    fn = stenograph.compile(_prints_at_both_ends, backend=cnt)
    assert_matches_eager(_prints_at_both_ends, fn, lambda i: (x,), capsys, calls=3)
    assert torch_count == 1
    assert cnt.frame_count == torch_count
    assert [ops_of(gm) for gm in cnt.graphs] == [["mul"]]


def _print_with_keywords(x):
    y = x.exp()
    print("a", tuple(y.shape), sep="|", end="!\n")
    print("to stderr", y.dim(), file=sys.stderr)
    return y.log()


def test_print_with_sep_end_and_file_keywords(cnt, capsys):
    """Keyword arguments (sep, end, file=sys.stderr) reach the eager print unchanged."""
    x = torch.rand(2, 3) + 0.5
    torch_count = torch_graph_count(_print_with_keywords, (x,))
    fn = stenograph.compile(_print_with_keywords, backend=cnt)
    capsys.readouterr()
    assert_matches_eager(_print_with_keywords, fn, lambda i: (x,), capsys, calls=3)
    fn(x)
    io = capsys.readouterr()
    assert io.out == "a|(2, 3)!\n"
    assert io.err == "to stderr 2\n"
    assert torch_count == 2
    assert cnt.frame_count == torch_count
    assert [ops_of(gm) for gm in cnt.graphs] == [["exp"], ["log"]]


def _print_in_training_step(x, w):
    h = torch.tanh(x @ w)
    print("hidden norm", h.detach().norm())
    return (h * h).sum()


def test_backward_through_graphs_split_by_print(cnt, capsys):
    """Gradients flow back through both graphs of a print-split function, equal to eager."""
    x0, w0 = torch.randn(4, 3), torch.randn(3, 5)
    fn = stenograph.compile(_print_in_training_step, backend=cnt)
    for _ in range(2):
        x_e, w_e = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        x_c, w_c = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        capsys.readouterr()
        loss_e = _print_in_training_step(x_e, w_e)
        eager_text = capsys.readouterr().out
        loss_c = fn(x_c, w_c)
        assert capsys.readouterr().out == eager_text
        assert_same(loss_c, loss_e)
        loss_e.backward()
        loss_c.backward()
        torch.testing.assert_close(x_c.grad, x_e.grad)
        torch.testing.assert_close(w_c.grad, w_e.grad)
    assert cnt.frame_count == 2


# ---------------------------------------------------------------------------------------------
# case 8: stenograph.graph_break()


def _no_break(x):
    a = x.sin()
    b = a.cos()
    return b * 2


def _one_break(x):
    a = x.sin()
    stenograph.graph_break()
    b = a.cos()
    return b * 2


def _one_break_torch(x):
    a = x.sin()
    torch._dynamo.graph_break()
    b = a.cos()
    return b * 2


def _two_breaks(x):
    a = x.sin()
    stenograph.graph_break()
    b = a.cos()
    stenograph.graph_break()
    return b * 2


def test_case8_without_graph_break_one_graph(cnt):
    """Case 8 baseline: sin -> cos -> mul is one graph of 3 ops."""
    x = torch.randn(8)
    out = stenograph.compile(_no_break, backend=cnt)(x)
    assert_same(out, _no_break(x))
    assert cnt.frame_count == 1
    assert cnt.op_count == 3


def test_case8_graph_break_splits_one_graph_into_two(cnt, capsys):
    """Case 8: graph_break() splits the same work into 2 graphs (torch's graph_break: 2)."""
    inputs = [torch.randn(8) for _ in range(3)]
    torch_count = torch_graph_count(_one_break_torch, (inputs[0],))
    fn = stenograph.compile(_one_break, backend=cnt)
    assert_matches_eager(_one_break, fn, lambda i: (inputs[i],), capsys, calls=3)
    assert torch_count == 2
    assert cnt.frame_count == torch_count
    assert [ops_of(gm) for gm in cnt.graphs] == [["sin"], ["cos", "mul"]]
    assert cnt.op_count == 3


def test_case8_two_graph_breaks_give_three_graphs(cnt, capsys):
    """Two graph_break() calls give 3 graphs, and no more on later calls."""
    inputs = [torch.randn(8) for _ in range(3)]
    fn = stenograph.compile(_two_breaks, backend=cnt)
    assert_matches_eager(_two_breaks, fn, lambda i: (inputs[i],), capsys, calls=3)
    assert cnt.frame_count == 3
    assert [ops_of(gm) for gm in cnt.graphs] == [["sin"], ["cos"], ["mul"]]


def test_graph_break_in_eager_code_is_a_no_op():
    """Called outside compiled code, graph_break() does nothing and returns None."""
    assert stenograph.graph_break() is None
    x = torch.randn(3)
    torch.testing.assert_close(_one_break(x), _no_break(x))


def _function_made_before_a_break(x):
    def make():
        return lambda: "the lambda"

    unused = make()  # noqa: F841 - rebuilt at the break next to the break's own call target
    r = stenograph.graph_break()
    return x + 1, r


def test_functions_rebuilt_at_a_break_do_not_shadow_its_call(cnt, capsys):
    compiled = stenograph.compile(_function_made_before_a_break, backend=cnt)
    assert_matches_eager(_function_made_before_a_break, compiled, lambda i: (torch.ones(2) * i,), capsys)


def _asserts_around_a_break(x):
    # in a test module pytest rewrites the asserts, keeping locals named `@py_assert1` and so on
    y = x.sin()
    assert y.shape == (3,), "shape"
    stenograph.graph_break()
    assert y.dim() == 1
    return y + 1


def test_a_break_among_pytests_rewritten_asserts(cnt):
    """Locals whose names are not identifiers live across the break: the resume function's
    parameters are renamed (its signature would be unreadable otherwise)."""
    assert any(not name.isidentifier() for name in _asserts_around_a_break.__code__.co_varnames)
    compiled = stenograph.compile(_asserts_around_a_break, backend=cnt)
    for i in range(2):
        x = torch.full((3,), float(i))
        assert_same(compiled(x), _asserts_around_a_break(x))
    assert cnt.frame_count == 2
