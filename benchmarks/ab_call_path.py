"""A/B of stenograph's cached-call path: two source trees in one process, calls interleaved.

What a change to the entry wrapper costs is a few nanoseconds, below what `overhead.py` can see
on a shared machine (its eager baseline and kernels vary by microseconds). This times only
stenograph's machinery: the backend returns a function that does no work, and the two trees'
compiled functions are called in alternating rounds, so load hits both alike. The minimum and
10th percentile over the rounds are the figures to compare.

    python benchmarks/ab_call_path.py BEFORE/src AFTER/src [--rounds 400] [--calls 300]

BEFORE's package is imported under another name (a copy in a temporary directory; its own
imports are relative), AFTER's as `stenograph`.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import torch
from overhead import MLP, add_one, twenty_args


def no_work_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A compiled graph that returns its first input as every output: no kernel runs."""
    outputs = len(list(gm.graph.nodes)[-1].args[0])
    return lambda *args: (args[0],) * outputs


def per_call_us(fn: Callable, args: tuple, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=pathlib.Path, help="src folder of the first tree")
    parser.add_argument("after", type=pathlib.Path, help="src folder of the second tree")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--calls", type=int, default=300)
    opts = parser.parse_args()
    copy = pathlib.Path(tempfile.mkdtemp())
    shutil.copytree(opts.before / "stenograph", copy / "stenograph_before")
    sys.path[:0] = [str(copy), str(opts.after)]
    trees = {"before": importlib.import_module("stenograph_before"), "after": importlib.import_module("stenograph")}
    torch.manual_seed(0)
    cases = [
        ("x + 1", add_one, (torch.randn(10),)),
        ("3-layer MLP", MLP(), (torch.randn(1, 64),)),
        ("20 tensor arguments", twenty_args, tuple(torch.randn(4) for _ in range(20))),
    ]
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}; {opts.rounds} rounds of {opts.calls} calls")
    for name, fn, args in cases:
        compiled = {tree: package.compile(fn, backend=no_work_backend) for tree, package in trees.items()}
        samples: dict[str, list[float]] = {tree: [] for tree in trees}
        for f in compiled.values():
            for _ in range(200):
                f(*args)
        for _ in range(opts.rounds):
            for tree, f in compiled.items():
                samples[tree].append(per_call_us(f, args, opts.calls))
        shown = []
        for tree, times in samples.items():
            times.sort()
            shown.append(f"{tree}: min {times[0]:.3f} p10 {times[len(times) // 10]:.3f}")
        print(f"{name:20} " + " | ".join(shown) + " us/call")
    shutil.rmtree(copy)


if __name__ == "__main__":
    main()
