"""The launcher the distributed tests share: results by rank, errors and hangs reported."""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from .launch import WorkerFailed, run_workers


def _sum_of_ranks(rank: int, world_size: int) -> float:
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    return t.item()


def _raises_on_rank_one(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("boom on rank 1")


def _waits_forever_on_rank_zero(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.recv(torch.zeros(1), src=1)  # rank 1 never sends
    else:
        time.sleep(300)


def test_results_come_back_by_rank() -> None:
    assert run_workers(_sum_of_ranks) == [3.0, 3.0]


def test_an_exception_in_a_worker_fails_with_its_traceback() -> None:
    with pytest.raises(WorkerFailed, match="boom on rank 1"):
        run_workers(_raises_on_rank_one)


def test_a_hang_fails_within_the_timeout() -> None:
    with pytest.raises(WorkerFailed, match="did not finish"):
        run_workers(_waits_forever_on_rank_zero, timeout=15)
