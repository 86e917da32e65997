"""Splitting a graph at DistributedDataParallel's gradient buckets (torch.compile's "DDP optimizer").

DDP all-reduces gradients bucket by bucket, starting a bucket's all-reduce from autograd hooks as
soon as every gradient in it is ready, so communication overlaps the rest of the backward pass. A
graph compiled by an AOTAutograd backend is one autograd node: all its parameters' gradients
appear together when its whole backward has run, and no all-reduce can start earlier. So when a
frame is compiled inside a DDP forward (`DistributedDataParallel._get_active_ddp_module()`), and
`config.optimize_ddp` is on, its graph is cut into pieces whose parameters fill about one bucket
each; every piece is compiled by the user's backend on its own (one autograd node each), and a
stitched graph module calls them in order.

Buckets are formed as DDP forms them: parameters in the order their gradients become ready (the
graph walked backwards), a bucket closed once it holds `bucket_bytes_cap` bytes, the first one
(the last layers) at DDP's smaller first-bucket cap. A parameter counts where its gradient is
complete, at its first use in the forward; parameters DDP ignores (`parameters_to_ignore`, the
`_ddp_ignored` mark) or that need no gradient count nothing, nor do buffers. A piece only ends
where it hands a value to the next (an op with external output) and never between a tuple and its
`getitem`s; leading ops without parameters join the first piece.
"""

from __future__ import annotations

import functools
import operator
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed
import torch.fx
from torch.fx.passes.split_module import split_module
from torch.nn.parallel import DistributedDataParallel

from ..shapes.lifted import lift_input_symbols
from ._graph_pickle import dumps_graph, loads_graph
from .artifacts import NotPersistable, compile_with_artifact, composite_artifact, declined
from .artifacts import load_artifact as load_backend_artifact

__all__ = ["DdpPiece", "DdpSplit", "active_ddp_module", "compile_split", "load_artifact"]


@dataclass
class DdpPiece:
    """One piece of a split graph: the parameters it brings into its bucket and their bytes."""

    params: list[str] = field(default_factory=list)  # their sources, in the order gradients are ready
    nbytes: int = 0
    op_count: int = 0
    code: str = ""  # the piece's graph as Python (print_readable)


@dataclass
class DdpSplit:
    """How one graph was split; plain data, so reports and traces can carry it."""

    bucket_cap: int  # bytes
    first_bucket_cap: int
    pieces: list[DdpPiece] = field(default_factory=list)  # in forward order

    def summary(self) -> str:
        return (
            f"graph split into {len(self.pieces)} pieces for DDP buckets "
            f"(bucket cap {_size(self.bucket_cap)}, first bucket {_size(self.first_bucket_cap)})"
        )

    def table(self) -> str:
        """One line per piece: its bytes of parameters, ops and parameters."""
        lines = [self.summary()]
        for i, piece in enumerate(self.pieces):
            names = ", ".join(piece.params) or "no parameters"
            size = f"{_size(piece.nbytes)} in {len(piece.params)} params"
            lines.append(f"  piece {i}: {size}, {piece.op_count} ops: {names}")
        return "\n".join(lines)


def _size(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def active_ddp_module() -> DistributedDataParallel | None:
    """The DDP module whose forward is running (DDP marks it around its wrapped module's call)."""
    if not torch.distributed.is_available():
        return None
    return DistributedDataParallel._get_active_ddp_module()


def bucket_caps(ddp: DistributedDataParallel) -> tuple[int, int]:
    """(bucket cap, first bucket cap) in bytes, as DDP's reducer uses them."""
    cap = ddp.bucket_bytes_cap
    settings = getattr(ddp, "_bucket_config", None)  # torch >= 2.10 keeps both caps there
    first = settings.first_bucket_bytes_cap if settings is not None else torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
    return cap, min(first, cap)


def reduced_parameters(ddp: DistributedDataParallel) -> set[int]:
    """Ids of the parameters whose gradients DDP all-reduces."""
    ignored = ddp.parameters_to_ignore
    return {
        id(p)
        for name, p in ddp.module.named_parameters()
        if p.requires_grad and name not in ignored and not getattr(p, "_ddp_ignored", False)
    }


def compile_split(
    gm: torch.fx.GraphModule,
    example_inputs: list[Any],
    backend: Callable[..., Any],
    ddp: DistributedDataParallel,
    persist: bool = False,
) -> tuple[Callable[..., Any], DdpSplit | None, bytes | None]:
    """`gm` compiled in pieces along DDP's buckets, how it was split (None: one piece, so `gm`
    went to the backend whole) and, with `persist`, its artifact (`load_artifact` rebuilds the
    stitched callable from the pieces' artifacts; None when some piece cannot be stored)."""
    compile_piece = _compiler(backend, persist)
    cap, first_cap = bucket_caps(ddp)
    reduced = reduced_parameters(ddp)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    params = {
        node: example
        for node, example in zip(placeholders, example_inputs)
        if isinstance(example, torch.Tensor) and id(example) in reduced
    }
    pieces = _plan(gm, params, cap, first_cap)
    if len(pieces) == 1:
        compiled, artifact = compile_piece(gm, example_inputs)
        return compiled, None, artifact
    piece_of = {node: i for i, (nodes, _) in enumerate(pieces) for node in nodes}
    # a piece taking a tensor with symbolic sizes takes the symbols too; `split_module` passes them
    # from where the graph takes them as inputs, as torch.compile's graphs do (shapes/lifted.py)
    fakes = [n.meta.get("example_value") for n in placeholders]
    lifted, example_inputs, unlift = lift_input_symbols(gm, example_inputs, fakes, range(len(fakes)))
    split = split_module(lifted, lifted, _piece_of(lifted, gm, piece_of), keep_original_order=True)
    inputs = dict(zip((n for n in split.graph.nodes if n.op == "placeholder"), example_inputs))
    calls = [node for node in split.graph.nodes if node.op == "call_module"]
    artifacts: dict[str, bytes | None] = {}
    for call, (_, piece) in zip(calls, pieces, strict=True):
        piece.code, artifacts[str(call.target)] = _compile_piece(split, call, inputs, compile_piece, gm.meta)
    split.recompile()
    stored = None
    if persist and lifted is gm and all(a is not None for a in artifacts.values()):
        stored = _split_artifact(split, artifacts, backend, example_inputs)
    elif persist:
        declined("a graph split at DDP's buckets", "a piece or its size symbols cannot be stored")
    return unlift(split.forward), DdpSplit(cap, first_cap, [piece for _, piece in pieces]), stored


Compile = Callable[[torch.fx.GraphModule, list[Any]], tuple[Callable[..., Any], "bytes | None"]]


def _compiler(backend: Callable[..., Any], persist: bool) -> Compile:
    """How each piece is compiled: by the backend, and with its artifact when `persist`."""
    if persist:
        return functools.partial(compile_with_artifact, backend)
    return lambda gm, example_inputs: (backend(gm, example_inputs), None)


def _split_artifact(
    split: torch.fx.GraphModule, artifacts: dict[str, Any], backend: Any, example_inputs: list[Any]
) -> bytes | None:
    """The stitched graph (its pieces left empty) and each piece's artifact, as one artifact of
    the backend."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(split.graph, {}))
    root = {name: torch.nn.Module() for name in artifacts}
    for node in split.graph.nodes:
        if node.op == "get_attr":
            root[node.target] = functools.reduce(getattr, str(node.target).split("."), split)
    try:
        shell = dumps_graph(torch.fx.GraphModule(root, graph, "DdpSplitGraph"))
        payload = pickle.dumps((shell, artifacts), protocol=pickle.HIGHEST_PROTOCOL)
        return composite_artifact(backend, "stenograph.backends.ddp_split:load_artifact", payload, example_inputs)
    except NotPersistable as reason:
        declined("a graph split at DDP's buckets", reason)
        return None


def load_artifact(payload: bytes) -> Callable[..., Any]:
    """The stitched graph's `forward`, each piece loaded from its own artifact."""
    shell, artifacts = pickle.loads(payload)
    stitched = loads_graph(shell)
    for name, artifact in artifacts.items():
        stitched.add_submodule(name, _Piece(load_backend_artifact(artifact)))
    return stitched.forward


def _piece_of(
    lifted: torch.fx.GraphModule, gm: torch.fx.GraphModule, piece_of: dict[torch.fx.Node, int]
) -> Callable[[torch.fx.Node], int]:
    """The piece of each op of `lifted`, a copy of `gm` (the same ops, in the same order)."""
    if lifted is gm:
        return piece_of.__getitem__
    ops = [n for n in gm.graph.nodes if n in piece_of]
    copies = [n for n in lifted.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    by_copy = {copy: piece_of[op] for op, copy in zip(ops, copies, strict=True)}
    return by_copy.__getitem__


def _plan(
    gm: torch.fx.GraphModule, params: dict[torch.fx.Node, torch.Tensor], cap: int, first_cap: int
) -> list[tuple[list[torch.fx.Node], DdpPiece]]:
    """The graph's ops in pieces, forward order, each with the parameters of its bucket."""
    order = {node: i for i, node in enumerate(gm.graph.nodes)}
    completes: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for param in params:
        if param.users:
            completes.setdefault(min(param.users, key=order.__getitem__), []).append(param)
    ops = [n for n in gm.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    buckets: list[tuple[list[torch.fx.Node], DdpPiece]] = [([], DdpPiece())]
    for node in reversed(ops):
        nodes, piece = buckets[-1]
        limit = first_cap if len(buckets) == 1 else cap
        if piece.nbytes >= limit and _can_end(nodes):
            buckets.append(([], DdpPiece()))
            nodes, piece = buckets[-1]
        nodes.append(node)
        for param in completes.get(node, ()):
            tensor = params[param]
            piece.params.append(param.meta.get("source", param.name))
            piece.nbytes += tensor.numel() * tensor.element_size()
    if len(buckets) > 1 and buckets[-1][1].nbytes == 0:
        leading, _ = buckets.pop()  # ops before the first parameter: they join the next piece
        buckets[-1][0].extend(leading)
    for nodes, piece in buckets:
        nodes.reverse()
        piece.op_count = len(nodes)
    return list(reversed(buckets))


def _can_end(nodes: list[torch.fx.Node]) -> bool:
    """Whether a piece holding `nodes` (the later part of the graph) may start here: some op in
    it gives a value to a later piece or the output, and it reads no tuple from before."""
    inside = set(nodes)
    gives = any(user not in inside for node in nodes for user in node.users)
    reads_tuple = any(
        isinstance(arg.meta.get("example_value"), (tuple, list))
        for node in nodes
        for arg in node.all_input_nodes
        if arg not in inside
    )
    return gives and not reads_tuple


class _Piece(torch.nn.Module):
    """A compiled piece in the stitched graph (call_module targets must be modules)."""

    def __init__(self, compiled: Callable[..., Any]) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *args: Any) -> Any:
        return self.compiled(*args)


def _compile_piece(
    split: torch.fx.GraphModule,
    call: torch.fx.Node,
    inputs: dict[torch.fx.Node, Any],
    compile_piece: Compile,
    meta: dict[str, Any],
) -> tuple[str, bytes | None]:
    """Compile the piece `call` runs with its own example inputs, and call the result instead.

    The stitched graph's inputs keep the examples the whole graph got; a value made by an earlier
    piece is the fake tensor (or symbolic number) the trace gave it, which the piece's placeholder
    carries in `meta["example_value"]`. The piece always returns a tuple, as captured graphs do.
    Returns the piece's code and its artifact (None: not stored)."""
    piece = split.get_submodule(str(call.target))
    own = [n for n in piece.graph.nodes if n.op == "placeholder"]
    examples = [inputs[arg] if arg in inputs else p.meta["example_value"] for arg, p in zip(call.args, own)]
    output = next(n for n in piece.graph.nodes if n.op == "output")
    if not isinstance(output.args[0], tuple):
        output.args = ((output.args[0],),)
        with split.graph.inserting_after(call):
            first = split.graph.call_function(operator.getitem, (call, 0))
        call.replace_all_uses_with(first, delete_user_cb=lambda user: user is not first)
    piece.recompile()
    piece.meta.update(meta)  # the frame's label, for backends and logs that read it
    code = piece.print_readable(print_output=False)
    compiled, artifact = compile_piece(piece, examples)
    split.add_submodule(str(call.target), _Piece(compiled))
    return code, artifact
