"""Give AOTAutograd the flat tuple output it insists on, whatever the captured graph returns.

AOTAutograd refuses a graph whose output is a single tensor, a dict or a nested structure ("Graph
output must be a tuple"), and it hands back a list even for a tuple. Captured graphs can return
any of those, so backends built on it compile a copy of the graph that returns the flattened
leaves and rebuild the structure that the graph's own `forward` would return around each call.
The caller's GraphModule is left untouched (other backends and test recorders hold it).

Every random draw is an output of the copy too (dropped by the wrapper): AOTAutograd would remove
one whose value the result does not use as dead code, and the global generator would then not
advance as it does in eager. The draw is returned detached: as a differentiable output it would
get a gradient of zeros in every backward pass (six zero tensors and six additions of activation
size a step for a Transformer encoder's dropouts).

The wrapper that restores the structure pickles (`artifacts.py` stores it with the compiled
graph): the structure holds types and constants, no closures.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx

__all__ = ["RestoreOutputs", "with_flat_tuple_output"]

# torch functions and tensor methods that draw from the global generator
_RANDOM_DRAWS = frozenset(
    "rand randn randint rand_like randn_like randint_like randperm bernoulli multinomial normal poisson "
    "uniform_ normal_ bernoulli_ random_ exponential_ geometric_ cauchy_ log_normal_ "
    "dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout rrelu".split()
)


def _random_draws(graph: torch.fx.Graph, outputs: list[Any]) -> list[torch.fx.Node]:
    """Random draws that are not outputs already. Each one becomes an output even when the result
    depends on it: it may depend on its size alone (`torch.randn(n).shape`), which AOTAutograd
    reads from metadata before removing the draw."""
    found = []
    for node in graph.nodes:
        if node in outputs or node.op not in ("call_function", "call_method"):
            continue
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        if name in _RANDOM_DRAWS:
            found.append(node)
    return found


# A spec is ("leaf",), ("const", value), ("seq", kind, children) or ("dict", keys, children).
_Spec = tuple[Any, ...]


def _flatten(obj: Any, leaves: list[Any]) -> _Spec:
    if isinstance(obj, (tuple, list)):
        children = [_flatten(x, leaves) for x in obj]
        if hasattr(obj, "_fields"):  # a namedtuple literal in the output
            kind: type = type(obj)
        else:
            # fx stores literals as immutable_list / tuple; forward() returns list / tuple
            kind = list if isinstance(obj, list) else tuple
        return ("seq", kind, children)
    if isinstance(obj, dict):
        return ("dict", list(obj), [_flatten(v, leaves) for v in obj.values()])
    if isinstance(obj, torch.fx.Node):
        leaves.append(obj)
        return ("leaf",)
    return ("const", obj)  # a constant in the output stays out of the compiled graph


def _unflatten(spec: _Spec, leaves: Any) -> Any:
    kind = spec[0]
    if kind == "leaf":
        return next(leaves)
    if kind == "const":
        return spec[1]
    if kind == "seq":
        items = [_unflatten(child, leaves) for child in spec[2]]
        return spec[1](*items) if hasattr(spec[1], "_fields") else spec[1](items)
    return {key: _unflatten(child, leaves) for key, child in zip(spec[1], spec[2])}


class RestoreOutputs:
    """Wraps a callable returning the flat tuple so that it returns what the graph's `forward`
    would: `spec` None means the graph returns that flat tuple itself (only a list from
    AOTAutograd is turned back into a tuple); otherwise the first `kept` values are the leaves of
    `spec`, and the rest are random draws, dropped."""

    def __init__(self, spec: _Spec | None, kept: int) -> None:
        self.spec = spec
        self.kept = kept

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        spec, kept = self.spec, self.kept
        if spec is None:

            def call_tuple(*args: Any) -> Any:
                return tuple(fn(*args))

            return call_tuple

        def call(*args: Any) -> Any:
            return _unflatten(spec, iter(fn(*args)[:kept]))

        return call


def with_flat_tuple_output(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, RestoreOutputs]:
    """Return (graph that returns a flat tuple, wrapper restoring the original output structure).

    When `gm` already returns a flat tuple it is used as is, and the wrapper only turns the list
    that AOTAutograd returns back into a tuple.
    """
    out = gm.graph.output_node().args[0]
    leaves: list[Any] = []
    spec = _flatten(out, leaves)
    draws = _random_draws(gm.graph, leaves)
    if not draws and spec[0] == "seq" and spec[1] is tuple and all(c[0] == "leaf" for c in spec[2]):
        return gm, RestoreOutputs(None, len(leaves))

    graph = torch.fx.Graph()
    val_map: dict[torch.fx.Node, torch.fx.Node] = {}
    graph.graph_copy(gm.graph, val_map)
    detached = [graph.call_method("detach", (val_map[node],)) for node in draws]
    graph.output(tuple(val_map[node] for node in leaves) + tuple(detached))
    return torch.fx.GraphModule(gm, graph), RestoreOutputs(spec, len(leaves))
