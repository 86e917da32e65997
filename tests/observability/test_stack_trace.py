"""FX nodes carry `meta["stack_trace"]` with the user's stack, in torch.compile's format, so
`print_readable()`, AOTAutograd's graphs and Inductor point back at the user's source."""

from __future__ import annotations

import re

import pytest
import torch
from functorch.compile import make_boxed_func
from helpers import assert_same, line_of
from torch._functorch.aot_autograd import aot_module_simplified

import stenograph

_ENTRY = re.compile(r'  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)\n    (?P<code>.+)\n')


def frames(stack_trace: str) -> list[tuple[str, int, str]]:
    """(file, line, function) of each entry, outermost first; the text must be nothing but entries
    (each with its source line, and column markers where Python gives them)."""
    entries = [(m.group("file"), int(m.group("line")), m.group("name")) for m in _ENTRY.finditer(stack_trace)]
    without_markers = re.sub(r"\n +[~^]+(?=\n)", "", stack_trace)
    assert "".join(m.group(0) for m in _ENTRY.finditer(without_markers)) == without_markers, stack_trace
    return entries


def _scale(y):
    return y.sin() * 3


def _model(x):
    a = x + 1
    b = _scale(a)
    return b.sum(dim=0)


def _call_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def test_every_op_names_the_user_line_and_the_inlined_call_stack(cnt):
    x = torch.randn(4, 3)
    assert_same(stenograph.compile(_model, backend=cnt)(x), _model(x))
    (gm,) = cnt.graphs
    here = __file__
    stacks = {n.name: frames(n.meta["stack_trace"]) for n in _call_nodes(gm)}
    outer = (here, line_of(_model, "_scale(a)"), "_model")
    assert stacks["add"] == [(here, line_of(_model, "x + 1"), "_model")]
    assert stacks["sin"] == [outer, (here, line_of(_scale, "y.sin()"), "_scale")]
    assert stacks["mul"] == [outer, (here, line_of(_scale, "y.sin()"), "_scale")]
    assert stacks["sum_1"] == [(here, line_of(_model, "b.sum"), "_model")]
    assert "return y.sin() * 3" in gm.graph.find_nodes(op="call_method", target="sin")[0].meta["stack_trace"]


def test_stacks_match_torch_compile_node_for_node(cnt):
    """The same (file, line, function) stacks torch.compile records, op by op."""
    x = torch.randn(4, 3)
    stenograph.compile(_model, backend=cnt)(x)
    peer: list[torch.fx.GraphModule] = []

    def record(gm, example_inputs):
        peer.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(_model, backend=record)(x)
    ours = [frames(n.meta["stack_trace"]) for n in _call_nodes(cnt.graphs[0])]
    theirs = [frames(n.meta["stack_trace"]) for n in _call_nodes(peer[0])]
    assert ours == theirs


def test_print_readable_shows_user_source(cnt):
    stenograph.compile(_model, backend=cnt)(torch.randn(2, 3))
    text = cnt.graphs[0].print_readable(print_output=False)
    assert "No stacktrace found" not in text
    assert f"# File: {__file__}:{line_of(_scale, 'y.sin()')} in _scale, code: return y.sin() * 3" in text


def _breaks(x):
    y = x * 2
    print("break")
    return y.cos()


def test_code_after_a_graph_break_points_at_its_own_lines(cnt, capsys):
    x = torch.randn(3)
    assert_same(stenograph.compile(_breaks, backend=cnt)(x), _breaks(x))
    first, second = cnt.graphs
    assert frames(_call_nodes(first)[0].meta["stack_trace"]) == [(__file__, line_of(_breaks, "x * 2"), "_breaks")]
    assert frames(_call_nodes(second)[0].meta["stack_trace"]) == [(__file__, line_of(_breaks, "y.cos()"), "_breaks")]


def test_exported_graphs_keep_stacks():
    gm, _ = stenograph.export(_model)(torch.randn(2, 3))
    for node in _call_nodes(gm):
        assert frames(node.meta["stack_trace"])[-1][0] == __file__
    assert "No stacktrace found" not in gm.print_readable(print_output=False)


def test_aot_autograd_graphs_keep_the_user_stack():
    """AOTAutograd carries the stack of each captured op onto its ATen nodes (forward and backward)."""
    captured: list[torch.fx.GraphModule] = []

    def keep(gm, example_inputs):
        captured.append(gm)
        return make_boxed_func(gm.forward)

    def backend(gm, example_inputs):
        return aot_module_simplified(gm, example_inputs, fw_compiler=keep, bw_compiler=keep)

    x = torch.randn(4, 3, requires_grad=True)
    out = stenograph.compile(_model, backend=backend)(x)
    out.sum().backward()
    assert len(captured) == 2  # forward and backward
    for gm in captured:
        traced = [n for n in gm.graph.nodes if n.op == "call_function" and n.meta.get("stack_trace")]
        assert traced, gm.print_readable(print_output=False)
        assert any((__file__, line_of(_scale, "y.sin()"), "_scale") in frames(n.meta["stack_trace"]) for n in traced)


@pytest.mark.slow
def test_inductor_sees_the_user_stack():
    """Inductor's post-grad graph, from which it generates code, still names the user's lines."""
    from torch._inductor import config as inductor_config
    from torch._inductor.custom_graph_pass import CustomGraphPass

    seen: list[str] = []

    class Record(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            seen.extend(n.meta.get("stack_trace", "") for n in graph.nodes if n.op == "call_function")

        def uuid(self) -> str:
            return "stenograph-stack-trace-test"

    x = torch.randn(4, 3)
    with inductor_config.patch(post_grad_custom_post_pass=Record(), fx_graph_cache=False):
        assert_same(
            stenograph.compile(_model, backend="inductor")(x),
            _model(x),
        )
    assert any(f'File "{__file__}", line {line_of(_scale, "y.sin()")}, in _scale' in s for s in seen), seen
