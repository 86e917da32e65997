"""DDP and FSDP2 on 2 GPUs with NCCL, one process a GPU, compiled by Inductor: losses equal
eager's step by step, in float32 (within 1e-5, TF32 off) and in bfloat16 (within bfloat16's
tolerance), and nothing compiles after the first step. Each run is bounded in time, so a
collective that never completes fails the test instead of hanging.

These run only where 2 GPUs are (`torch.cuda.device_count() >= 2`); docs/testing.md says how to
run them on the GPU machine. The same scenarios run on 2 gloo processes on the CPU in
test_ddp.py and test_fsdp.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import stenograph
from stenograph.testing import CompileCounterWithBackend

from .ddp_models import TinyTransformer, compiled_function_nodes, expected_pieces, module_bytes
from .launch import run_workers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs"),
]

STEPS = 5
CAP = 64 * 1024  # bytes: the 4-block model below is split into several pieces
TOLERANCE = {"float32": {"rel": 0.0, "abs": 1e-5}, "bfloat16": {"rel": 1.6e-2, "abs": 1e-2}}


def _model(device: str, dtype: torch.dtype) -> TinyTransformer:
    torch.manual_seed(0)
    return TinyTransformer(d_in=32, d=64, heads=4, layers=4, d_out=16).to(device=device, dtype=dtype)


def _train(net: torch.nn.Module, params: torch.nn.Module, rank: int, dtype: torch.dtype, counter: Any) -> dict:
    device = next(params.parameters()).device.type
    """STEPS SGD steps on this rank's data: the losses, the graphs compiled by each step's end,
    and the compiled autograd nodes each backward runs."""
    opt = torch.optim.SGD(params.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator(device=device).manual_seed(100 + rank)
    run: dict = {"losses": [], "graphs": [], "nodes": []}
    for _ in range(STEPS):
        x = torch.randn(4, 32, 32, generator=data, device=device, dtype=dtype)
        target = torch.randn(4, 32, 16, generator=data, device=device, dtype=dtype)
        loss = F.mse_loss(net(x), target)
        run["nodes"].append(compiled_function_nodes(loss))
        loss.backward()
        opt.step()
        opt.zero_grad()
        run["losses"].append(loss.item())
        run["graphs"].append(counter.frame_count if counter else 0)
    return run


def _ddp_and_fsdp2(rank: int, world_size: int, dtype_name: str, device: str, backend: str) -> dict[str, dict]:
    """Every scenario in turn (`device` and `backend` are "cuda" and "inductor" in the test; on the
    CPU with "aot_eager" the same function checks itself on a machine without GPUs)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = getattr(torch, dtype_name)
    cap_mb = CAP / 2**20
    ids = [rank] if device == "cuda" else None
    results = {}
    with stenograph.config.patch(suppress_errors=False):
        for wrap, split in (("eager", False), ("outer", True), ("inner", True), ("inner", False)):
            stenograph.reset()
            model = _model(device, dtype)
            counter = CompileCounterWithBackend(backend) if wrap != "eager" else None
            with stenograph.config.patch(optimize_ddp=split):
                if wrap == "eager":
                    net = DDP(model, bucket_cap_mb=cap_mb, device_ids=ids)
                elif wrap == "outer":
                    net = stenograph.compile(DDP(model, bucket_cap_mb=cap_mb, device_ids=ids), backend=counter)
                else:
                    net = DDP(stenograph.compile(model, backend=counter), bucket_cap_mb=cap_mb, device_ids=ids)
                results[f"ddp-{wrap}-{'split' if split else 'whole'}"] = _train(net, net, rank, dtype, counter)

        # FSDP2: each block compiled, then the blocks and the root sharded; and the sharded root compiled
        for way in ("eager", "blocks", "root"):
            stenograph.reset()
            model = _model(device, dtype)
            counter = CompileCounterWithBackend(backend) if way != "eager" else None
            if way == "blocks":
                for i, block in enumerate(model.blocks):
                    model.blocks[i] = stenograph.compile(block, backend=counter)
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
            net = stenograph.compile(model, backend=counter) if way == "root" else model
            results[f"fsdp2-{way}"] = _train(net, model, rank, dtype, counter)
    return results


def _check(results: dict[str, dict], dtype_name: str) -> None:
    pieces = expected_pieces(module_bytes(_model("cpu", getattr(torch, dtype_name))), CAP)
    assert pieces > 2
    for family in ("ddp", "fsdp2"):
        eager = results[f"{family}-eager" if family == "fsdp2" else "ddp-eager-whole"]
        for name, run in results.items():
            if not name.startswith(family) or run is eager:
                continue
            assert run["losses"] == pytest.approx(eager["losses"], **TOLERANCE[dtype_name]), (name, run, eager)
            assert run["graphs"][0] > 0 and len(set(run["graphs"])) == 1, (name, run["graphs"])
            if family == "ddp":  # one compiled autograd node per bucket's piece, or one in all
                assert run["nodes"] == [pieces if name.endswith("split") else 1] * STEPS, (name, run["nodes"])


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_ddp_and_fsdp2_on_two_gpus_train_as_eager(dtype_name: str) -> None:
    results = run_workers(_ddp_and_fsdp2, dtype_name, "cuda", "inductor", device="cuda", timeout=900)
    for rank_results in results:
        _check(rank_results, dtype_name)
    assert results[0]["ddp-eager-whole"]["losses"] != results[1]["ddp-eager-whole"]["losses"]
