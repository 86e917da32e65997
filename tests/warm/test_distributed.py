"""Warm start on 2 gloo processes (issue 28): a job whose ranks compile a DDP model cold stores
its entries (the graph split at DDP's buckets included: one artifact per piece); a second job's
ranks install them, compile nothing, and train with eager DDP's losses and gradients.

Both jobs are fresh spawns (`distributed.launch.run_workers`) sharing one cache folder, which
the ranks of the first job write at the same time."""

from __future__ import annotations

import pathlib

import torch
import torch.nn.functional as F
from distributed.ddp_models import TinyTransformer, compiled_function_nodes, expected_pieces, module_bytes
from distributed.launch import run_workers
from torch.nn.parallel import DistributedDataParallel as DDP

import stenograph
from stenograph import events

STEPS = 3
CAP = 4096
WRAPS = ("outer", "inner")


def _steps(net: torch.nn.Module, model: torch.nn.Module, rank: int) -> dict:
    """STEPS SGD steps on this rank's data: losses, compiled autograd nodes, first gradients."""
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    run: dict = {"losses": [], "nodes": [], "grads": None}
    for _ in range(STEPS):
        x, target = torch.randn(2, 5, 8, generator=data), torch.randn(2, 5, 4, generator=data)
        loss = F.mse_loss(net(x), target)
        run["nodes"].append(compiled_function_nodes(loss))
        loss.backward()
        if run["grads"] is None:
            run["grads"] = [p.grad.clone() for p in model.parameters()]
        opt.step()
        opt.zero_grad()
        run["losses"].append(loss.item())
    return run


def _train(rank: int, world_size: int, cache_dir: str) -> dict:
    """Eager DDP, then each wrap order compiled with aot_eager and the graph split at the
    buckets, with the persisted cache in `cache_dir`; what the compiler did for each."""
    stenograph.config.cache_dir = cache_dir
    stenograph.config.suppress_errors = False
    results = {}
    for wrap in ("eager", *WRAPS):
        stenograph.reset()
        seen: list = []
        events.subscribe(seen.append)
        torch.manual_seed(0)
        model = TinyTransformer()
        with stenograph.config.patch(optimize_ddp=True):
            if wrap == "eager":
                net = DDP(model, bucket_cap_mb=CAP / 2**20)
            elif wrap == "outer":
                net = stenograph.compile(DDP(model, bucket_cap_mb=CAP / 2**20), backend="aot_eager")
            else:
                net = DDP(stenograph.compile(model, backend="aot_eager"), bucket_cap_mb=CAP / 2**20)
            run = _steps(net, model, rank)
        events.unsubscribe(seen.append)
        lookups = [e for e in seen if isinstance(e, events.CacheLookup)]
        run["compiled"] = sum(isinstance(e, events.FrameCompiled) for e in seen)
        for outcome in events.CacheOutcome:
            run[outcome.name.lower()] = sum(e.outcome is outcome for e in lookups)
        run["details"] = [f"{e.outcome.value}: {e.detail}" for e in lookups]
        results[wrap] = run
    return results


def _check_as_eager(results: dict) -> None:
    eager = results.pop("eager")
    pieces = expected_pieces(module_bytes(TinyTransformer()), CAP)
    for wrap, run in results.items():
        for step, (got, want) in enumerate(zip(run["losses"], eager["losses"], strict=True)):
            assert abs(got - want) <= 1e-5, f"{wrap} step {step}: loss {got} != {want}"
        for got, want in zip(run["grads"], eager["grads"], strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5, msg=wrap)
        assert run["nodes"] == [pieces] * STEPS, (wrap, run)  # split at the buckets, warm or cold


def test_ddp_ranks_start_warm_and_train_as_eager(tmp_path: pathlib.Path):
    cache = str(tmp_path / "cache")
    cold = run_workers(_train, cache, timeout=400)
    for rank_results in cold:
        for wrap in WRAPS:
            run = rank_results[wrap]
            assert run["compiled"] >= 1 and run["not_stored"] == 0, (wrap, run)
            assert run["stored"] == run["compiled"], (wrap, run)
        _check_as_eager(rank_results)
    warm = run_workers(_train, cache, timeout=400)
    for rank_results in warm:
        for wrap in WRAPS:
            run = rank_results[wrap]
            assert run["compiled"] == 0 and run["installed"] >= 1 and run["rejected"] == 0, (wrap, run)
        _check_as_eager(rank_results)
