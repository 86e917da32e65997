"""Symbols of aliasing tensor inputs passed to the backend as SymInt inputs of their own.

A tensor input that shares its storage with another input (`x` and `x[1:]`, or a view that a
resume function receives with its base) is fakeified as a view of the other's fake, and its
dynamic sizes, strides and storage offset get symbols of their own (`s33` for `x[1:].size(0)`).
When the graph changes one of them in place, AOTAutograd replaces the aliasing inputs by one
"synthetic base" and regenerates each of them from it by replaying the fake's view function, which
closes over those symbols. The view is then no longer an input of the trace, so nothing in it
carries the symbols, and the trace fails with `s33 ... is not tracked with proxy`.

torch.compile passes every free symbol of its tensor inputs' sizes to the backend as an input of
its own. stenograph does the same here, for the inputs that alias another input only (there alone
can the backend need a symbol that no input tensor carries): the backend gets a copy of the graph
with one SymInt placeholder in front per symbol, and the compiled callable is wrapped so that each
call reads the symbols' values from the tensors the graph is called with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.fx

__all__ = ["lift_aliased_input_symbols", "lift_input_symbols"]

# where a symbol's value is read from at call time: (input position, "size" | "stride" | "offset", dim)
_Getter = tuple[int, str, int]


def _storage_key(tensor: Any) -> int | None:
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided:
        return None
    try:
        return tensor.untyped_storage()._cdata
    except (NotImplementedError, RuntimeError):  # tensors without a plain storage
        return None


def _aliasing_positions(examples: list[Any]) -> list[int]:
    """Positions of the tensor inputs whose storage another input shares."""
    by_storage: dict[int, list[int]] = {}
    for pos, example in enumerate(examples):
        key = _storage_key(example)
        if key is not None:
            by_storage.setdefault(key, []).append(pos)
    return sorted(pos for group in by_storage.values() if len(group) > 1 for pos in group)


def _symbols_to_lift(fakes: list[Any], positions: Iterable[int]) -> list[tuple[torch.SymInt, _Getter]]:
    # symbols the graph already receives as symbolic int arguments
    known = {f.node.expr for f in fakes if isinstance(f, torch.SymInt) and f.node.expr.is_Symbol}
    lifted: list[tuple[torch.SymInt, _Getter]] = []
    for pos in positions:
        fake = fakes[pos]
        if not isinstance(fake, torch.Tensor):
            continue
        places: list[tuple[Any, str, int]] = [(s, "size", d) for d, s in enumerate(fake.size())]
        places += [(s, "stride", d) for d, s in enumerate(fake.stride())]
        places.append((fake.storage_offset(), "offset", 0))
        for value, kind, dim in places:
            if isinstance(value, torch.SymInt) and value.node.expr.is_Symbol and value.node.expr not in known:
                known.add(value.node.expr)
                lifted.append((value, (pos, kind, dim)))
    return lifted


def _read(tensor: torch.Tensor, kind: str, dim: int) -> int:
    if kind == "size":
        return tensor.size(dim)
    if kind == "stride":
        return tensor.stride(dim)
    return tensor.storage_offset()


def lift_aliased_input_symbols(
    gm: torch.fx.GraphModule, examples: list[Any], fakes: list[Any]
) -> tuple[torch.fx.GraphModule, list[Any], Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """(graph for the backend, its example inputs, wrapper giving the compiled graph `gm`'s own
    calling convention). `gm` and `examples` come back as they are when no input aliases another
    or those that do have static sizes."""
    return lift_input_symbols(gm, examples, fakes, _aliasing_positions(examples))


def lift_input_symbols(
    gm: torch.fx.GraphModule, examples: list[Any], fakes: list[Any], positions: Iterable[int]
) -> tuple[torch.fx.GraphModule, list[Any], Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """As `lift_aliased_input_symbols`, for the symbols of the tensor inputs at `positions` (the
    DDP split lifts every input's: a piece needs the symbols of the tensors it is handed)."""
    lifted = _symbols_to_lift(fakes, positions)
    if not lifted:
        return gm, examples, lambda compiled: compiled

    graph = torch.fx.Graph()
    val_map: dict[torch.fx.Node, torch.fx.Node] = {}
    for sym, _ in lifted:
        node = graph.placeholder(f"sym_{sym.node.expr}")
        node.meta["example_value"] = sym
    out = graph.graph_copy(gm.graph, val_map)
    graph.output(out)
    lifted_gm = torch.fx.GraphModule(gm, graph, class_name=type(gm).__name__)
    lifted_gm.meta.update(gm.meta)
    getters = [getter for _, getter in lifted]

    def wrap(compiled: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            return compiled(*[_read(args[pos], kind, dim) for pos, kind, dim in getters], *args)

        return call

    return lifted_gm, [sym for sym, _ in lifted] + list(examples), wrap
