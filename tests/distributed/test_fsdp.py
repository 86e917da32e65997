"""FSDP2 (`fully_shard`) with compiled modules, on 2 gloo processes: losses equal eager FSDP2's
over 5 steps, and only the first step compiles.

Three ways a user combines them: compiling each block before sharding it (the OptimizedModule
is what `fully_shard` converts), compiling the sharded root, and sharding the compiled root.
FSDP's hooks (all-gather before a block's forward, reshard after) run eagerly around the
compiled forwards in all three.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule, fully_shard

import stenograph
from stenograph.testing import CompileCounter, CompileCounterWithBackend

from .launch import run_workers
from .recording import CompileRecord

STEPS = 5


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.b(torch.relu(self.a(x)))


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(Block(), Block(), nn.Linear(16, 4))


def _shard(model: nn.Sequential) -> nn.Sequential:
    for block in list(model)[:2]:
        fully_shard(block)
    fully_shard(model)
    return model


def _losses(model: nn.Module, params: nn.Module, rank: int, world_size: int, record: CompileRecord | None = None):
    """Losses of STEPS SGD steps (different data on each rank), and the compiles of each step."""
    optimizer = torch.optim.SGD(params.parameters(), lr=0.1)
    losses, compiles = [], []
    for step in range(STEPS):
        before = record.compiles if record else 0
        torch.manual_seed(step * world_size + rank)
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        compiles.append((record.compiles if record else 0) - before)
    return losses, compiles


def _fsdp2_three_ways(rank: int, world_size: int, backend: str | None) -> dict[str, Any]:
    eager = _shard(_model())
    results: dict[str, Any] = {"eager": _losses(eager, eager, rank, world_size)[0]}
    with stenograph.config.patch(suppress_errors=False):
        # compile each block, then shard the compiled blocks and the root
        counter = CompileCounterWithBackend(backend) if backend else CompileCounter()
        model = _model()
        for i in range(2):
            model[i] = stenograph.compile(model[i], backend=counter)
        reference = _model()
        results["fqns"] = [n for n, _ in model.named_parameters()] == [n for n, _ in reference.named_parameters()]
        _shard(model)
        _shard(reference)
        results["state_dict_keys"] = list(model.state_dict()) == list(reference.state_dict())
        results["wrapped"] = [isinstance(model[i], (FSDPModule, stenograph.OptimizedModule)) for i in range(2)]
        with CompileRecord() as record:
            results["blocks"] = _losses(model, model, rank, world_size, record)
        results["blocks_roots"] = [fully_shard.state(m)._is_root for m in (model[0], model[1], model)]
        results["blocks_graphs"] = counter.frame_count
        results["blocks_breaks"] = record.breaks

        # compile the sharded root: each block's call is a graph break inside the root's loop
        # (FSDP's hooks are torch.distributed code), its forward compiled as a frame of its own
        counter = CompileCounterWithBackend(backend) if backend else CompileCounter()
        model = _shard(_model())
        compiled = stenograph.compile(model, backend=counter)
        with CompileRecord() as record:
            results["root"] = _losses(compiled, model, rank, world_size, record)
        results["root_graphs"] = counter.frame_count
        results["root_breaks"] = sorted(set(record.breaks))

        # shard the blocks, compile the root, then shard the compiled root
        counter = CompileCounterWithBackend(backend) if backend else CompileCounter()
        model = _model()
        for block in list(model)[:2]:
            fully_shard(block)
        compiled = fully_shard(stenograph.compile(model, backend=counter))
        with CompileRecord() as record:
            results["compiled_root"] = _losses(compiled, compiled, rank, world_size, record)
        results["compiled_root_graphs"] = counter.frame_count
    return results


def _check(results: list[dict[str, Any]]) -> None:
    for rank, r in enumerate(results):
        for mode in ("blocks", "root", "compiled_root"):
            losses, compiles = r[mode]
            assert losses == pytest.approx(r["eager"], abs=1e-5), (rank, mode, losses, r["eager"])
            assert compiles[0] > 0 and compiles[1:] == [0] * (STEPS - 1), (rank, mode, compiles)
        assert r["fqns"] and r["state_dict_keys"], rank
        assert r["wrapped"] == [True, True]
        assert r["blocks_roots"] == [False, False, True], "the root's lazy init must find the blocks' state"
        # one graph per distinct Block.forward input (the second block's input requires grad)
        assert r["blocks_graphs"] == 2 and r["blocks_breaks"] == []
        # Block.forward (two entries as above): the root Sequential's loop breaks at each block
        # (FSDP's hooks), so its frame runs eagerly with the blocks compiled, as torch.compile
        # skips it; the last Linear is torch's own and runs as it is
        assert r["root_graphs"] == r["compiled_root_graphs"] == 2, r
        assert all("torch.distributed is not traced" in reason for reason in r["root_breaks"]), r["root_breaks"]
    assert results[0]["eager"] != results[1]["eager"]  # each rank has its own data


def test_fsdp2_with_compiled_blocks_or_a_compiled_root_trains_as_eager() -> None:
    _check(run_workers(_fsdp2_three_ways, None, timeout=300))


@pytest.mark.slow
def test_fsdp2_with_aot_autograd_graphs_trains_as_eager() -> None:
    """The same with AOTAutograd's joint graphs: the backward graph's gradients of the gathered
    parameters reach FSDP's reduce-scatter."""
    _check(run_workers(_fsdp2_three_ways, "aot_eager", timeout=600))
