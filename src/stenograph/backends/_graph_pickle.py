"""A GraphModule as bytes that another process turns back into the same GraphModule.

Why not `pickle.dumps(gm)`: a GraphModule pickles as its generated Python code, and unpickling
traces that code again with torch.fx's symbolic tracer, which cannot run every graph a capturer
produces (a Python function applied to a size, a higher-order op's branches). ATen operators
(`OpOverload`) and higher-order operators do not pickle at all.

What is stored instead is the graph itself: per node its opcode, name, target, arguments (nodes
referred to by name) and keyword arguments, in graph order; the graph's code generator (which
decides the calling convention of `forward`); and the attributes that `get_attr` and
`call_module` nodes read (tensors, parameters, submodules; graph submodules are stored the same
way, recursively). Loading creates the nodes again and generates `forward` from them: nothing is
traced. Node metadata (fake values, stack traces, sources) is left out: running a graph never
reads it, and fake tensors belong to the process that made them.

Operators are stored by name (`aten::add.Tensor`) and looked up in `torch.ops` on load, so an
operator of a custom library must be registered in the loading process before the bytes are
loaded. Functions are stored by reference (module and qualified name), as pickle does; a lambda
or a function local to another function cannot be stored, and `dumps_graph` raises
`NotPersistable` for it.
"""

from __future__ import annotations

import functools
import io
import pickle
from typing import Any

import torch
import torch.fx
from torch.fx.node import map_aggregate, map_arg

from .artifacts import NotPersistable

__all__ = ["dumps_graph", "loads_graph"]


class _NodeRef:
    """Stands for the node of this name in stored arguments."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _NodeRef, (self.name,)


def _attribute(gm: torch.nn.Module, qualified: str) -> Any:
    return functools.reduce(getattr, qualified.split("."), gm)


def _graph_module_state(gm: torch.fx.GraphModule) -> tuple[Any, ...]:
    nodes = []
    attributes: dict[str, Any] = {}
    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            attributes[node.target] = _attribute(gm, node.target)
        args = map_arg(node.args, lambda n: _NodeRef(n.name))
        kwargs = map_arg(node.kwargs, lambda n: _NodeRef(n.name))
        nodes.append((node.op, node.name, node.target, args, kwargs))
    return type(gm).__name__, gm.graph._codegen, nodes, attributes


def _rebuild_graph_module(class_name: str, codegen: Any, nodes: list[tuple], attributes: dict) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    graph.set_codegen(codegen)
    made: dict[str, torch.fx.Node] = {}

    def resolve(arg: Any) -> Any:
        return made[arg.name] if isinstance(arg, _NodeRef) else arg

    for op, name, target, args, kwargs in nodes:
        made[name] = graph.create_node(op, target, map_aggregate(args, resolve), map_aggregate(kwargs, resolve), name)
    # a dict root: each get_attr/call_module target is looked up under its qualified name
    return torch.fx.GraphModule(attributes, graph, class_name)


def _operator(namespace: str, name: str, overload: str | None) -> Any:
    packet = getattr(getattr(torch.ops, namespace), name)
    return packet if overload is None else getattr(packet, overload)


def _higher_order(name: str) -> Any:
    return getattr(torch.ops.higher_order, name)


class _Pickler(pickle.Pickler):
    """pickle, with graph modules and operators stored as described in the module docstring."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.fx.GraphModule):
            return _rebuild_graph_module, _graph_module_state(obj)
        if isinstance(obj, torch._ops.OpOverload):
            namespace, name = obj._schema.name.split("::")
            return _operator, (namespace, name, obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            namespace, name = obj._qualified_op_name.split("::")
            return _operator, (namespace, name, None)
        if isinstance(obj, torch._ops.HigherOrderOperator):
            if getattr(torch.ops.higher_order, obj.__name__, None) is not obj:
                raise NotPersistable(f"higher-order operator {obj.__name__!r} is not in torch.ops.higher_order")
            return _higher_order, (obj.__name__,)
        if isinstance(obj, (torch._subclasses.FakeTensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise NotPersistable(f"the graph holds a {type(obj).__name__}, which lives only in this process")
        return NotImplemented


def dumps_graph(obj: Any) -> bytes:
    """Pickle `obj` (a GraphModule, or anything holding some) as the module docstring says."""
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except NotPersistable:
        raise
    except Exception as exc:  # pickle raises PicklingError, TypeError or AttributeError
        raise NotPersistable(f"{type(exc).__name__}: {exc}") from exc
    return buffer.getvalue()


def loads_graph(data: bytes) -> Any:
    """The object `dumps_graph` stored."""
    return pickle.loads(data)
