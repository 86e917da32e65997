"""Collectives in compiled code, on 2 gloo processes: recorded in the graph as functional
collectives (`all_reduce`, `all_gather_into_tensor`, `reduce_scatter_tensor`, `broadcast`, in
place or functional), or run eagerly at a graph break that names them (`async_op=True`,
`barrier`, tensors that require grad). Results equal eager on every rank; a second call with the
same inputs compiles nothing; a new shape or another process group compiles again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import stenograph
from stenograph.testing import CompileCounter

from .launch import run_workers
from .recording import CompileRecord


def in_place_reductions(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    dist.all_reduce(y)
    z = x + dist.get_rank()
    dist.all_reduce(z, op=dist.ReduceOp.MAX)
    return y + z


def gather_scatter_broadcast(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    world = dist.get_world_size()
    gathered = torch.empty(x.shape[0] * world, *x.shape[1:])
    dist.all_gather_into_tensor(gathered, x + 1)
    part = torch.empty(x.shape[0] // world, *x.shape[1:])
    dist.reduce_scatter_tensor(part, x * (dist.get_rank() + 1))
    sent = x.clone()
    dist.broadcast(sent, src=1)
    return gathered * 2, part, sent


def functional(x: torch.Tensor, group: Any) -> torch.Tensor:
    reduced = funcol.all_reduce(x, "sum", group)
    gathered = funcol.all_gather_tensor(x, 0, group)
    scattered = funcol.reduce_scatter_tensor(x, "max", 0, group)
    sent = funcol.wait_tensor(funcol.broadcast(x, 0, group))
    return reduced.sum() + gathered.sum() + scattered.sum() + sent


def reduce_argument(x: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(x)  # the caller's tensor changes
    return x * 2


def place_in_group(x: torch.Tensor) -> torch.Tensor:
    return x * dist.get_rank() + dist.get_world_size()


def asynchronous(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    dist.all_reduce(y, async_op=True).wait()
    return y * 3


def with_barrier(x: torch.Tensor) -> torch.Tensor:
    y = x + 1
    dist.barrier()
    return y * 2


def needs_grad(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    dist.all_reduce(y)  # eager keeps y's grad_fn (the collective is invisible to autograd)
    return y + 1


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return type(b) is not torch.Tensor or torch.equal(a, b.detach()) and a.requires_grad == b.requires_grad


def _run(fn: Callable, *calls: tuple) -> dict[str, Any]:
    """Each call's result compared with eager, the compiles each call made, graphs and breaks."""
    counter = CompileCounter()
    compiled = stenograph.compile(fn, backend=counter)
    same, compiles = [], []
    with CompileRecord() as record:
        for args in calls:
            before = record.compiles
            copies = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
            same.append(_same(compiled(*args), fn(*copies)) and _same(args, copies))
            compiles.append(record.compiles - before)
    return {"same": same, "compiles": compiles, "graphs": counter.frame_count, "breaks": record.breaks}


def _collectives(rank: int, world_size: int) -> dict[str, Any]:
    torch.manual_seed(rank)
    x, wide, other = torch.randn(4, 3), torch.randn(6, 3), torch.randn(4, 3)
    group = dist.new_group(list(range(world_size)))
    with stenograph.config.patch(suppress_errors=False):
        return {
            "in_place": _run(in_place_reductions, (x,), (other,), (wide,)),
            "gather_scatter_broadcast": _run(gather_scatter_broadcast, (x,), (other,)),
            "functional": _run(functional, (x, dist.group.WORLD), (other, dist.group.WORLD), (x, group)),
            "reduce_argument": _run(reduce_argument, (x.clone(),), (other.clone(),)),
            "place_in_group": _run(place_in_group, (x,), (other,)),
            "asynchronous": _run(asynchronous, (x,), (other,)),
            "with_barrier": _run(with_barrier, (x,), (other,)),
            "needs_grad": _run(needs_grad, (x.requires_grad_(),), (other.requires_grad_(),)),
        }


def test_collectives_are_graph_nodes_or_named_breaks_and_match_eager() -> None:
    for rank, results in enumerate(run_workers(_collectives, timeout=300)):
        for name, r in results.items():
            assert all(r["same"]), (rank, name, r)
        captured = {
            k: results[k]
            for k in ("in_place", "gather_scatter_broadcast", "functional", "reduce_argument", "place_in_group")
        }
        for name, r in captured.items():
            assert r["breaks"] == [], (rank, name, r["breaks"])
            assert r["compiles"][:2] == [1, 0], (rank, name, r["compiles"])  # the second call compiles nothing
        # a new shape, and another group object (guarded by identity), compile again
        assert results["in_place"]["compiles"][2] == 1 and results["functional"]["compiles"][2] == 1
        for name, words in (("with_barrier", "barrier"), ("needs_grad", "requires grad")):
            r = results[name]
            assert len(r["breaks"]) == 1 and words in r["breaks"][0], (rank, name, r["breaks"])
            assert r["graphs"] == 2 and r["compiles"][1] == 0, (rank, name, r)
        # the Work handle's wait() is a second break (a method of a C++ object)
        r = results["asynchronous"]
        assert "async_op=True" in r["breaks"][0] and "wait" in r["breaks"][1], (rank, r["breaks"])
        assert r["compiles"][1] == 0, (rank, r)


def initialized_only(x: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(x)
    return x + 1


def test_without_a_process_group_compiled_code_raises_as_eager(cnt) -> None:
    """In this (the test) process no group exists: `is_initialized()` is answered and guarded,
    and a collective or `get_rank()` breaks, so eager raises its own error."""
    assert not dist.is_initialized()
    x = torch.ones(2)
    assert torch.equal(stenograph.compile(initialized_only, backend=cnt)(x), x + 1)
    assert cnt.frame_count == 1
    for fn in (needs_grad, place_in_group):
        with pytest.raises(ValueError, match="has not been initialized"):
            stenograph.compile(fn, backend=cnt)(x)
