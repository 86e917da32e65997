"""Generating the transformed function: fetch graph inputs, call the compiled graph, rebuild
the return value.

The transformed function is Python source with the original signature (DESIGN decision 9), e.g.

    def ___transformed(self, x):
        ___v0 = self._modules['fc1']
        ___out = ___graph(x, ___v0._parameters['weight'], ___v0._parameters['bias'])
        return (___out[0], 3)

Inputs are re-read through their sources on every call, so parameters updated by an optimizer or
replaced by assignment are always the ones used.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from ..errors import Unsupported
from ..guards.guard_set import _repr_roundtrips
from ..guards.sources import GlobalsNamer, SourceRenderer
from ..variables.base import ConstantVariable, Variable
from ..variables.containers import DictVariable, ListVariable, SizeVariable, TupleVariable
from ..variables.tensor import TensorVariable
from .pyfunc import make_function, parameter_list


class ReturnBuilder:
    """Renders a returned tracker as an expression, collecting the graph outputs it needs."""

    def __init__(self, renderer: SourceRenderer, lines: list[str]) -> None:
        self.renderer = renderer
        self.lines = lines
        self.outputs: list[torch.fx.Node] = []
        self._index: dict[torch.fx.Node, int] = {}
        self.constants: dict[str, Any] = {}

    def expr(self, var: Variable) -> str:
        if var.source is not None:
            return self.renderer.render(var.source, self.lines)
        if isinstance(var, TensorVariable):
            index = self._index.get(var.node)
            if index is None:
                index = self._index[var.node] = len(self.outputs)
                self.outputs.append(var.node)
            return f"___out[{index}]"
        if isinstance(var, ConstantVariable):
            return self._constant(var.value)
        if isinstance(var, SizeVariable):
            return f"___Size(({''.join(self.expr(i) + ', ' for i in var.items)}))"
        if isinstance(var, TupleVariable):
            return f"({''.join(self.expr(i) + ', ' for i in var.items)})"
        if isinstance(var, ListVariable):
            return f"[{', '.join(self.expr(i) for i in var.items)}]"
        if isinstance(var, DictVariable):
            return "{" + ", ".join(f"{self._constant(k)}: {self.expr(v)}" for k, v in var.items.items()) + "}"
        raise Unsupported(f"returning {var.describe()} from a compiled function")

    def _constant(self, value: Any) -> str:
        if isinstance(value, (int, float, str, bytes, bool, type(None))) and _repr_roundtrips(value):
            return repr(value)
        name = f"___const{len(self.constants)}"
        self.constants[name] = value
        return name


def build_transformed(
    code: types.CodeType,
    like: types.FunctionType | None,
    input_sources: list,
    result: Variable,
    compile_graph: Any,
    label: str,
) -> tuple[types.FunctionType, list[torch.fx.Node]]:
    """The transformed function; `compile_graph(outputs)` is called with the graph's outputs
    (once they are known) and returns the compiled callable or None when there is no graph."""
    namer = GlobalsNamer()
    renderer = SourceRenderer(namer)
    lines: list[str] = []
    returns = ReturnBuilder(renderer, lines)
    return_expr = returns.expr(result)
    compiled = compile_graph(returns.outputs)
    namespace: dict[str, Any] = {"___Size": torch.Size, **returns.constants}
    if compiled is not None:
        args = [renderer.render(s, lines) for s in input_sources]
        namespace["___graph"] = compiled
        lines.append(f"___out = ___graph({', '.join(args)})")
    lines.append(f"return {return_expr}")
    namespace.update(namer.bindings())
    fn = make_function("___transformed", parameter_list(code), lines, namespace, like=like,
                       label=f"transformed {label}")
    return fn, returns.outputs
