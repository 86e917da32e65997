"""`nested_compile_region(fn)`: a function traced into a subgraph that its calls share.

A call of a marked function (stenograph's `nested_compile_region`, or torch's, which marks
the same way) is traced like a `torch.cond` branch into an FX graph of its own, whose inputs are
the call's tensor arguments and the tensors the body reads from elsewhere (`higher_order.trace_body`);
other arguments are constants of the body. The call becomes one node,
`invoke_region(subgraph, identifier, *tensors)`. A later call in the same frame whose body
traced to the same graph (the same operations on inputs of the same metadata) reads the
subgraph already there, so one subgraph serves every such call.

`invoke_region` runs the subgraph as plain calls when the graph runs, so autograd records its
operations as eager does (every backend gives eager's results and gradients). Under a tracer
that records ATen ops (AOTAutograd's `make_fx`, on its way to Inductor) it calls torch's
`invoke_subgraph` operator instead, which those compile once per subgraph; without that operator
(an older torch) they trace the subgraph inline, with the same results.

Inputs match when their sizes, strides, dtypes, devices and `requires_grad` do; symbolic sizes
match when they are the same expression (two tensors of the same symbolic size), so tensors whose
dimensions have symbols of their own get subgraphs of their own. A call inside another body (a
region within a region, a `torch.cond` branch) is inlined. A body that changes Python state or
returns something other than tensors breaks the graph at the call, which then runs eagerly.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch.fx.experimental.proxy_tensor import get_proxy_mode

from ..errors import Unsupported
from ..guards.sources import AttrSource
from ..marks import COMPILE_REGION_ATTR
from .containers import ListVariable, TupleVariable
from .higher_order import close_bodies, trace_body
from .tensor import TensorVariable

if TYPE_CHECKING:
    import types

    from ..guards.sources import Source
    from ..interpreter.frame import Frame
    from .base import Variable

try:
    from torch._higher_order_ops.invoke_subgraph import invoke_subgraph as _invoke_subgraph
except ImportError:  # a torch without the operator: tracers inline the subgraph
    _invoke_subgraph = None


def invoke_region(subgraph: torch.fx.GraphModule, identifier: str, *operands: Any) -> tuple:
    """What a region's node runs: the subgraph itself, or torch's `invoke_subgraph` operator
    under a tracer that records it (so AOTAutograd and Inductor compile the subgraph once)."""
    if _invoke_subgraph is not None and get_proxy_mode() is not None:
        return _invoke_subgraph(subgraph, identifier, *operands)
    return subgraph(*operands)


def is_region(fn: types.FunctionType) -> bool:
    return COMPILE_REGION_ATTR in fn.__dict__


def call_region(
    frame: Frame,
    fn: types.FunctionType,
    fn_source: Source | None,
    args: list[Variable],
    kwargs: dict[str, Variable],
) -> Variable:
    """A call of the marked wrapper `fn`: its body as a shared subgraph, or inlined."""
    body_source = AttrSource(fn_source, COMPILE_REGION_ATTR) if fn_source is not None else None
    body = frame.wrap(fn.__dict__[COMPILE_REGION_ATTR], body_source)
    output = frame.output
    tensors = _tensor_arguments([*args, *kwargs.values()])
    if output.graph is not output.root_graph:
        return body.call(frame, args, kwargs)
    what = f"the nested_compile_region body {body.describe()}"
    positions = {id(t): i for i, t in enumerate(tensors)}
    returned: list[Variable] = []

    def run_body(inner: list[Variable]) -> Variable:
        def swap(var: Variable) -> Variable:
            return inner[positions[id(var)]] if id(var) in positions else var

        result = body.call(frame, [swap(a) for a in args], {k: swap(v) for k, v in kwargs.items()})
        if type(result) not in (TensorVariable, TupleVariable, ListVariable):
            raise Unsupported(f"{what} returns {result.describe()}, not a tensor or a tuple or list of tensors")
        returned.append(result)
        return result

    traced = trace_body(frame, run_body, [t.fake for t in tensors], what)
    nested = [n for n in traced.graph.nodes if n.op == "get_attr"]
    if nested:
        raise Unsupported(f"{what} contains a higher-order op ({nested[0].target}), which a region cannot hold yet")
    (subgraph,), free = close_bodies([traced])
    attr = _subgraph_attr(output, fn.__dict__[COMPILE_REGION_ATTR], subgraph)
    operands = [*[t.node for t in tensors], *free]
    fakes = [*[t.fake for t in tensors], *[n.meta["example_value"] for n in free]]
    with output.fake_mode, enable_python_dispatcher():
        fake = invoke_region(output.submodules[attr.target], attr.target, *fakes)
    node = output.graph.create_node("call_function", invoke_region, (attr, attr.target, *operands), {})
    result = output.wrap_result(node, fake, what)
    if traced.single:
        return result.unpack(frame)[0]
    return ListVariable(result.unpack(frame)) if isinstance(returned[-1], ListVariable) else result


def _subgraph_attr(output: Any, region: Any, subgraph: torch.fx.GraphModule) -> torch.fx.Node:
    """A `get_attr` of the submodule holding `subgraph`: one this region already made in this
    frame when it is the same graph, else `subgraph` itself, added."""
    made = output.regions.setdefault(region, [])
    key = _structure(subgraph.graph)
    for name, known in made:
        if _same(known, key):
            return output.graph.get_attr(name)
    attr = output.add_submodule(subgraph, "subgraph")
    made.append((attr.target, key))
    return attr


def _structure(graph: torch.fx.Graph) -> list[tuple]:
    """A graph as comparable data: each node's kind, target and arguments (nodes by position),
    and the metadata of its inputs."""
    index: dict[torch.fx.Node, int] = {}
    rows = []
    for i, node in enumerate(graph.nodes):
        index[node] = i
        args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: _NodeRef(index[n]))
        meta = node.meta.get("example_value") if node.op == "placeholder" else None
        rows.append((node.op, node.target, args, _tensor_meta(meta)))
    return rows


class _NodeRef:
    """A node of a compared graph, by its position."""

    __slots__ = ("position",)

    def __init__(self, position: int) -> None:
        self.position = position


def _tensor_meta(value: Any) -> tuple | None:
    """What must agree between two calls' inputs; symbolic sizes by their expression (comparing
    them with == would add a guard)."""
    if not isinstance(value, torch.Tensor):
        return None
    sizes = tuple(str(s.node.expr) if isinstance(s, torch.SymInt) else s for s in (*value.shape, *value.stride()))
    return (sizes, value.dtype, value.device, value.requires_grad)


def _same(a: Any, b: Any) -> bool:
    """Equal as graph data: same types, nodes at the same positions, floats told apart by sign
    of zero and NaN; other objects equal or identical."""
    if type(a) is not type(b):
        return False
    if isinstance(a, _NodeRef):
        return a.position == b.position
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # objects without a plain equality (tensors): only the same one is equal
        return False


def _tensor_arguments(values: list[Variable]) -> list[TensorVariable]:
    """The distinct tensors among the call's arguments, in order (containers are not opened:
    tensors inside them are read by the body like any other tensor from outside)."""
    seen: dict[int, TensorVariable] = {}
    for value in values:
        if isinstance(value, TensorVariable):
            seen.setdefault(id(value), value)
    return list(seen.values())
