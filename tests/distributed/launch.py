"""Run a test body in several processes joined by a process group: `gloo` on the CPU, or `nccl`
with one GPU a process (`device="cuda"`: rank r uses GPU r).

Each worker is a fresh interpreter (`spawn`), so the function must live at module level of an
importable test module. A worker's return value comes back pickled; an exception in any worker
fails the test with that worker's traceback, and a run that outlasts `timeout` seconds (a
collective that never completes) is killed and fails instead of blocking the suite.

A worker leaves through `os._exit` once its result is written, skipping interpreter shutdown:
with torch 2.13 a gloo thread may still drop a finished work item whose saved thread state holds
a Python object (the context each backward pass stashes) while the interpreter finalizes, and the
process aborts ("terminate called without an active exception"; about one run in 5-40 of the
FSDP2 test, after its result was written).
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class WorkerFailed(AssertionError):
    """A worker raised, exited without a result, or the group ran out of time."""


def run_workers(
    fn: Callable[..., Any], *args: Any, world_size: int = 2, timeout: float = 180.0, device: str = "cpu"
) -> list[Any]:
    """`fn(rank, world_size, *args)` in `world_size` processes; their results, by rank."""
    with tempfile.TemporaryDirectory(prefix="stenograph-dist-") as tmp:
        folder = Path(tmp)
        context = mp.start_processes(
            _worker,
            args=(fn, world_size, str(folder), args, device),
            nprocs=world_size,
            join=False,
            start_method="spawn",
        )
        try:
            _join(context, timeout)
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
                    process.join()
        outcomes = {}
        for rank in range(world_size):
            path = folder / f"rank{rank}.pkl"
            if path.exists():
                outcomes[rank] = pickle.loads(path.read_bytes())
        # a worker's own exception first: the others may have died of it (a peer gone mid-collective)
        for rank, (ok, value) in outcomes.items():
            if not ok:
                raise WorkerFailed(f"rank {rank} raised:\n{value}")
        missing = [rank for rank in range(world_size) if rank not in outcomes]
        if missing:
            raise WorkerFailed(f"rank {missing[0]} exited without a result")
        return [outcomes[rank][1] for rank in range(world_size)]


def _join(context: Any, timeout: float) -> None:
    """Wait for every worker, failing when `timeout` runs out or a worker dies."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if context.join(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
                return
        except mp.ProcessRaisedException:
            return  # the worker wrote its traceback to its result file
        except mp.ProcessExitedException as e:
            raise WorkerFailed(f"a worker died: {e}") from None
        if time.monotonic() >= deadline:
            raise WorkerFailed(f"the workers did not finish within {timeout:.0f} s (a hang in a collective?)")


def _worker(rank: int, fn: Callable[..., Any], world_size: int, folder: str, args: tuple, device: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if device == "cuda":
        torch.cuda.set_device(rank)
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world_size)
    try:
        outcome = (True, fn(rank, world_size, *args))
    except BaseException:
        outcome = (False, traceback.format_exc())
    finally:
        dist.destroy_process_group()
    (Path(folder) / f"rank{rank}.pkl").write_bytes(pickle.dumps(outcome))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
