"""Python floats a graph computes from Python numbers alone are recomputed as Python computes them.

A symbolic float (a SymFloat input, or one made from a symbolic int) is a sympy expression while a
backend re-traces the graph, and sympy simplifies: `s * 0.0` becomes `0`, so AOTAutograd and
Inductor return `0.0` where Python gives `-0.0` for a negative `s` (and `-(a - a)` loses its sign
the same way). A tensor result is unaffected in what users compare, but a float the function
returns is a Python value whose sign shows in `repr`, `math.copysign` and division.

So when a graph returns floats that depend on no tensor, the compiled call also runs those few
scalar nodes of the captured graph as plain Python on the call's arguments, and their values
replace the backend's. Graphs without such outputs are handed over and called as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

__all__ = ["exact_python_floats"]

_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)


def _scalar_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes whose value is a Python number computed from Python-number inputs alone."""
    found: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if not isinstance(node.meta.get("example_value"), _SCALARS):
            continue
        if node.op == "placeholder" or (
            node.op in ("call_function", "call_method") and all(n in found for n in node.all_input_nodes)
        ):
            found.add(node)
    return found


def exact_python_floats(gm: torch.fx.GraphModule) -> Callable[[Callable[..., Any]], Callable[..., Any]] | None:
    """A wrapper for the compiled `gm` that recomputes its tensor-free float outputs in Python, or
    None when `gm` returns none (it returns a flat tuple, as every captured graph does)."""
    outputs = gm.graph.output_node().args[0]
    scalar = _scalar_nodes(gm.graph)
    picked = [
        i
        for i, node in enumerate(outputs)
        if node in scalar and node.op != "placeholder" and isinstance(node.meta["example_value"], torch.SymFloat)
    ]
    if not picked:
        return None
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":  # every input, so it takes the call's arguments as they are
            env[node] = graph.placeholder(node.name)
        elif node in scalar:
            env[node] = graph.node_copy(node, env.__getitem__)
    graph.output(tuple(env[outputs[i]] for i in picked))
    graph.eliminate_dead_code()
    python_part = torch.fx.GraphModule(torch.nn.Module(), graph, class_name="PythonFloats")

    def wrap(compiled: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            exact = python_part(*args)
            result = list(compiled(*args))
            for i, value in zip(picked, exact):
                result[i] = value
            return tuple(result)

        return call

    return wrap
