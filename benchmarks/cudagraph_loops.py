"""How Inductor's CUDA-graph trees serve three calling loops, under stenograph and torch.compile.

`mode="reduce-overhead"` replays a CUDA graph only when Inductor's CUDA-graph trees
(torch._inductor.cudagraph_trees) can tell that the previous call's graph memory may be reused;
otherwise a call records a new graph, runs a warm-up, or bypasses CUDA graphs. What they decide
depends on the calling loop, so this script runs the seed's transformer block (benchmarks/
transformer_block.py) in three loops:

* seed:  training mode, grad on, forward only, output dropped (seed 001 section 10.3)
* keep:  torch.no_grad(), `out = model(x)`: the previous output is alive during the next call
* train: forward, `out.sum().backward()`, gradients cleared (set to None)

Each (loop, compiler) runs in a process of its own: the trees and the generation counter they read
are per process, so in one process each compiler's calls would change what the other's trees do.
Compilers: eager; stenograph; stenograph-no-marks (stenograph with `stenograph.config.cudagraph_call_marks`
switched off, to show what the marks are worth); torch.compile. All compile in `--mode`
(reduce-overhead or max-autotune). Inductor's on-disk caches stay on, so in max-autotune a later
process may reuse an earlier one's autotuning: first-call times there are no fair comparison.
Printed per run: median ms per call, first-call seconds, peak GPU memory, and how the timed calls
went through the trees (replayed / recorded / warm-up; "calls" counts entries into the trees'
run method, which re-enters itself once when it ends a finished execution).
`--host-profile` adds the top functions of a cProfile over the timed calls.

    python benchmarks/cudagraph_loops.py --device cuda
    python benchmarks/cudagraph_loops.py --device cuda --loops seed --host-profile
    python benchmarks/cudagraph_loops.py --device cuda --mode max-autotune --loops seed,keep
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformer_block import TransformerBlock  # noqa: E402

LOOPS = ["seed", "keep", "train"]
COMPILERS = ["eager", "stenograph", "stenograph-no-marks", "torch.compile"]


def build(compiler: str, model: torch.nn.Module, mode: str) -> Callable:
    if compiler == "eager":
        return model
    if compiler == "torch.compile":
        return torch.compile(model, mode=mode)
    import stenograph

    if compiler == "stenograph-no-marks":
        stenograph.config.cudagraph_call_marks = False
    return stenograph.compile(model, mode=mode)


def count_tree_paths(who: Callable[[], str | None] = lambda: None) -> Counter:
    """Count, per call into the trees, which path it took (patches the tree manager's methods).

    With `who`, each count is keyed "<who()>: <path>", to tell compilers apart in one process.
    """
    from torch._inductor import cudagraph_trees as trees

    counts: Counter = Counter()
    manager = trees.CUDAGraphTreeManager
    paths = {"_run": "calls", "execute_node": "replayed", "record_function": "recorded", "run_eager": "warm-up"}
    for method, label in paths.items():
        original = getattr(manager, method)

        def counted(self, *args, _original=original, _label=label, **kwargs):
            name = who()
            counts[_label if name is None else f"{name}: {_label}"] += 1
            return _original(self, *args, **kwargs)

        setattr(manager, method, counted)
    return counts


def step_fn(loop: str, fn: Callable, model: torch.nn.Module) -> Callable[[torch.Tensor], object]:
    if loop == "seed":
        return lambda x: fn(x)
    if loop == "keep":
        held: list = [None]

        def keep(x):
            held[0] = fn(x)  # the previous output stays alive while fn runs

        return keep

    def train(x):
        fn(x).sum().backward()
        for p in model.parameters():
            p.grad = None

    return train


def child(loop: str, compiler: str, mode: str, calls: int, warmup: int, host_profile: bool) -> dict:
    torch.manual_seed(0)
    model = TransformerBlock().cuda()
    x = torch.randn(16, 128, 512, device="cuda")
    if loop == "keep":
        torch.set_grad_enabled(False)
    fn = build(compiler, model, mode)
    step = step_fn(loop, fn, model)
    start = time.perf_counter()
    step(x)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - start
    for _ in range(warmup):
        step(x)
    torch.cuda.synchronize()
    counts = count_tree_paths() if compiler != "eager" else Counter()
    per_round = 10
    samples = []
    profiler = cProfile.Profile() if host_profile else None
    if profiler:
        profiler.enable()
    for _ in range(max(1, calls // per_round)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(per_round):
            step(x)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / per_round * 1e3)
    result = {
        "loop": loop,
        "compiler": compiler,
        "mode": mode,
        "ms": statistics.median(samples),
        "first_call_s": first_s,
        "timed_calls": len(samples) * per_round,
        "paths": dict(counts),
        "gpu_mem_mb": torch.cuda.max_memory_allocated() / 2**20,
    }
    if profiler:
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(12)
        result["host_profile"] = text.getvalue()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda"])
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--compilers", default=",".join(COMPILERS))
    parser.add_argument("--mode", default="reduce-overhead", choices=["reduce-overhead", "max-autotune"])
    parser.add_argument("--calls", type=int, default=200, help="timed calls (rounds of 10)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--host-profile", action="store_true")
    parser.add_argument("--json", default=None, help="append one JSON line per run to this file")
    parser.add_argument("--child", nargs=2, metavar=("LOOP", "COMPILER"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs CUDA: CUDA graphs exist only there")
    if opts.child:
        print(json.dumps(child(*opts.child, opts.mode, opts.calls, opts.warmup, opts.host_profile)))
        return
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    print("command: python " + " ".join(sys.argv), flush=True)
    header = f"{'loop':6} {'compiler':27} {'ms/call':>8} {'first s':>8} {'GPU MB':>7}  paths of the timed calls"
    rows = []
    for loop in opts.loops.split(","):
        for compiler in opts.compilers.split(","):
            cmd = [sys.executable, __file__, "--child", loop, compiler, "--mode", opts.mode]
            cmd += ["--calls", str(opts.calls), "--warmup", str(opts.warmup)]
            if opts.host_profile and compiler != "eager":
                cmd.append("--host-profile")
            done = subprocess.run(cmd, capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                rows.append(f"{loop:6} {compiler:27} failed: {done.stderr.strip().splitlines()[-1:]}")
                print(rows[-1], flush=True)
                continue
            r = json.loads(lines[-1])
            paths = ", ".join(f"{k} {v}" for k, v in sorted(r["paths"].items())) or "-"
            figures = f"{r['ms']:8.3f} {r['first_call_s']:8.2f} {r['gpu_mem_mb']:7.0f}"
            rows.append(f"{loop:6} {compiler:27} {figures}  {paths}")
            print(rows[-1], flush=True)
            if "host_profile" in r:
                print(r["host_profile"], flush=True)
            if opts.json:
                with open(opts.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
    print()
    print(header)
    print("-" * len(header))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
