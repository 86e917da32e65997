"""DistributedDataParallel and FSDP2 training steps per second: eager, torch.compile and
stenograph, each compiled DDP run with and without the graph split at DDP's gradient buckets.

torch.compile's split is `torch._dynamo.config.optimize_ddp`, stenograph's `config.optimize_ddp`.
The model is a stack of `nn.TransformerEncoderLayer`s between two projections, trained with SGD
on random data (MSE). Both compilers wrap it both ways, `compile(DDP(model))` ("outer") and
`DDP(compile(model))` ("inner"), or one way (`--wrap`). With `--fsdp`, FSDP2 too: each encoder
layer compiled (or not, for eager), then `fully_shard` on each layer and on the root, as
torchtitan compiles its blocks ("fsdp" in the wrap column). Every configuration trains its own copy
of the same initial model in the same processes: first `--warmup` steps (compilation included),
then `--rounds` rounds in which each configuration runs `--steps` steps back to back; steps/s is
`--steps` / the round's time, the median over rounds. In a round, each configuration's
torch.compile and stenograph runs go one right after the other (which one first alternates by
round) and the order of these pairs rotates from round to round. Rank 0
prints the table; `pieces` is the number of graphs each compiler handed its backend (counted by
a counting backend wrapping the compiler's own backend of that name; 0: nothing compiled);
`st/tc`, on stenograph's rows, is the median over rounds of its steps/s over torch.compile's in
the same configuration and round (a paired figure: the machine's speed drifts between rounds more
than the two compilers differ).

    python benchmarks/ddp.py                          # CPU, gloo, 2 processes
    python benchmarks/ddp.py --device cuda            # NCCL, world size 1, and N with N GPUs
    python benchmarks/ddp.py --device cuda --world-size 2 --wrap inner --fsdp --dtype bfloat16 \
        --layers 12 --d-model 2048 --heads 16 --d-in 2048 --batch 8 --seq 1024 --bucket-cap-mb 25

On the CPU each process runs one thread (OMP_NUM_THREADS=1 unless set); `--pin` keeps each rank,
its communication threads included, on one core (less variation between rounds; communication
then shares the core with the backward pass it overlaps).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch  # noqa: E402
import torch._dynamo.testing  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import stenograph  # noqa: E402
from stenograph.testing import CompileCounterWithBackend  # noqa: E402

COMPILED = [("torch.compile", "torch", True), ("torch.compile", "torch", False)]
COMPILED += [("stenograph", "stenograph", True), ("stenograph", "stenograph", False)]


def configs(wraps: list[str], splits: list[bool], fsdp: bool) -> list[tuple[str, str | None, bool, str]]:
    """(name, compiler, split, wrap order) of each run: eager DDP, then each compiled one; then
    eager FSDP2 and each compiler's FSDP2 (no DDP: nothing to split)."""
    compiled = [(*c, wrap) for wrap in wraps for c in COMPILED if c[2] in splits]
    runs = [("eager", None, False, "-"), *compiled]
    if fsdp:
        runs += [("eager", None, False, "fsdp"), ("torch.compile", "torch", False, "fsdp")]
        runs += [("stenograph", "stenograph", False, "fsdp")]
    return runs


def make_model(args: argparse.Namespace) -> nn.Module:
    layers = [
        nn.TransformerEncoderLayer(args.d_model, args.heads, 4 * args.d_model, dropout=0.0, batch_first=True)
        for _ in range(args.layers)
    ]
    return nn.Sequential(nn.Linear(args.d_in, args.d_model), *layers, nn.Linear(args.d_model, args.d_in))


class Run:
    """One configuration: its model, optimizer and data, and how to take a step."""

    def __init__(
        self, args: argparse.Namespace, device: torch.device, compiler: str | None, split: bool, wrap: str
    ) -> None:
        torch.manual_seed(0)
        dtype = getattr(torch, args.dtype)
        model = make_model(args).to(device=device, dtype=dtype)
        self.compiler, self.split = compiler, split
        # each compiler's own backend of that name, behind a counter of the graphs it gets
        counters = {"torch": torch._dynamo.testing.CompileCounterWithBackend, "stenograph": CompileCounterWithBackend}
        self.counter = counters[compiler](args.backend) if compiler else None
        cap = args.bucket_cap_mb
        ids = [device.index] if device.type == "cuda" else None
        with self.settings():
            if wrap == "fsdp":
                self.net = self.shard(model)
            elif compiler is None:
                self.net = DDP(model, bucket_cap_mb=cap, device_ids=ids)
            elif wrap == "outer":
                self.net = self.compile(DDP(model, bucket_cap_mb=cap, device_ids=ids))
            else:
                self.net = DDP(self.compile(model), bucket_cap_mb=cap, device_ids=ids)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=1e-3)
        generator = torch.Generator(device=device).manual_seed(dist.get_rank())
        shape = (args.batch, args.seq, args.d_in)
        self.x = torch.randn(shape, generator=generator, device=device, dtype=dtype)
        self.y = torch.randn(shape, generator=generator, device=device, dtype=dtype)

    def compile(self, model: nn.Module) -> Any:
        if self.compiler == "torch":
            return torch.compile(model, backend=self.counter)
        return stenograph.compile(model, backend=self.counter)

    def shard(self, model: nn.Sequential) -> nn.Module:
        """FSDP2: each encoder layer compiled (by this run's compiler, if any), then sharded, and
        the root sharded."""
        for i in range(1, len(model) - 1):
            if self.compiler:
                model[i] = self.compile(model[i])
            fully_shard(model[i])
        return fully_shard(model)

    def settings(self) -> Any:
        """The split setting of this run's compiler (both read it when they compile)."""
        if self.compiler == "torch":
            return torch._dynamo.config.patch(optimize_ddp=self.split)
        return stenograph.config.patch(optimize_ddp=self.split)

    def steps(self, n: int) -> None:
        with self.settings():
            for _ in range(n):
                loss = F.mse_loss(self.net(self.x), self.y)
                loss.backward()
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)


def _pairs(names: list[tuple[str, str | None, bool, str]]) -> list[list[int]]:
    """The runs' indices in the groups a round runs back to back: each configuration's
    torch.compile and stenograph runs together, so the ratio of their rates in a round compares
    them under the same conditions; eager runs alone."""
    groups: dict[tuple, list[int]] = {}
    for i, (_, compiler, split, wrap) in enumerate(names):
        groups.setdefault((split, wrap) if compiler else (i,), []).append(i)
    return list(groups.values())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def worker(rank: int, world_size: int, folder: str, args: argparse.Namespace) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if args.pin:  # before the process group starts its threads, which inherit the core
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    cuda = args.device == "cuda"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if cuda else "gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world_size
    )
    try:
        names = configs(args.wrap, args.split, args.fsdp)
        runs = [Run(args, device, compiler, split, wrap) for _, compiler, split, wrap in names]
        compile_s = []
        for (name, _, split, wrap), run in zip(names, runs):
            start = time.perf_counter()
            run.steps(args.warmup)
            _sync(device)
            compile_s.append(time.perf_counter() - start)
            if rank == 0:  # progress: compiling the larger models takes minutes
                print(f"warmed up {name} {wrap} split={split}: {compile_s[-1]:.1f} s", file=sys.stderr, flush=True)
        rates: list[list[float]] = [[] for _ in runs]
        groups = _pairs(names)
        for r in range(args.rounds):
            shift = r % len(groups)
            order = [i for group in groups[shift:] + groups[:shift] for i in (group[::-1] if r % 2 else group)]
            for i in order:
                dist.barrier()
                start = time.perf_counter()
                runs[i].steps(args.steps)
                _sync(device)
                rates[i].append(args.steps / (time.perf_counter() - start))
        if rank == 0:
            _print_table(args, world_size, names, runs, rates, compile_s)
    finally:
        dist.destroy_process_group()


def _print_table(
    args: argparse.Namespace,
    world_size: int,
    names: list[tuple[str, str | None, bool, str]],
    runs: list[Run],
    rates: list[list[float]],
    compile_s: list[float],
) -> None:
    backend = "nccl" if args.device == "cuda" else "gloo"
    print(
        f"\n{args.device}, {backend}, world size {world_size}, backend {args.backend}, "
        f"bucket_cap_mb {args.bucket_cap_mb}, {args.dtype}, torch {torch.__version__}"
        f"{', ranks pinned to cores' if args.pin else ''}"
    )
    header = f"{'compiler':<15}{'wrap':<7}{'split':<7}{'pieces':>7}{'steps/s':>10}{'min':>9}{'max':>9}"
    print(f"{header}{'warm-up s':>11}{'st/tc':>8}")
    rate_of = {(compiler, split, wrap): rate for (_, compiler, split, wrap), rate in zip(names, rates)}
    for (name, compiler, split, wrap), run, rate, warm in zip(names, runs, rates, compile_s):
        pieces = str(run.counter.frame_count) if run.counter else "-"
        split_column = ("on" if split else "off") if compiler and wrap != "fsdp" else "-"
        # stenograph's steps/s over torch.compile's in the same configuration, round by round
        # (the two ran back to back), the median of those ratios: rounds drift together
        peer = rate_of.get(("torch", split, wrap)) if compiler == "stenograph" else None
        paired = f"{statistics.median(s / t for s, t in zip(rate, peer)):>8.3f}" if peer else ""
        print(
            f"{name:<15}{wrap:<7}{split_column:<7}{pieces:>7}"
            f"{statistics.median(rate):>10.2f}{min(rate):>9.2f}{max(rate):>9.2f}{warm:>11.1f}{paired}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--world-size", type=int, default=None, help="default: 2 on the CPU, 1 and N GPUs on CUDA")
    parser.add_argument("--backend", choices=["inductor", "aot_eager"], default="inductor")
    parser.add_argument("--wrap", choices=["outer", "inner", "both"], default="both")
    parser.add_argument("--split", choices=["on", "off", "both"], default="both", help="the compiled DDP runs' split")
    parser.add_argument("--bucket-cap-mb", type=float, default=1.0)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-in", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--fsdp", action="store_true", help="FSDP2 runs too (each layer compiled, then sharded)")
    parser.add_argument(
        "--pin", action="store_true", help="each rank (and its communication threads) on one core of its own"
    )
    args = parser.parse_args()
    args.wrap = ["outer", "inner"] if args.wrap == "both" else [args.wrap]
    args.split = [True, False] if args.split == "both" else [args.split == "on"]
    if args.world_size is not None:
        sizes = [args.world_size]
    elif args.device == "cuda":
        sizes = sorted({1, torch.cuda.device_count()})
    else:
        sizes = [2]
    for world_size in sizes:
        with tempfile.TemporaryDirectory(prefix="stenograph-ddp-bench-") as folder:
            mp.start_processes(worker, args=(world_size, folder, args), nprocs=world_size, start_method="spawn")


if __name__ == "__main__":
    main()
