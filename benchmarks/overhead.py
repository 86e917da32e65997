"""Per-call overhead: eager vs stenograph vs torch.compile, same backend, one process.

Both compilers get a backend that returns `gm.forward`, so the difference to eager is the cost of
the compiler's own per-call machinery (guards, cache lookup, argument plumbing), not of a
different kernel. Prints microseconds per call and the added overhead (compiled minus eager).

    python benchmarks/overhead.py [--repeat 7] [--calls 2000]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

import stenograph


def forward_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward


def add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def twenty_args(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19):  # noqa: PLR0913
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15 + a16 + a17 + a18 + a19


def per_call_us(fn: Callable, args: tuple, calls: int, repeat: int) -> float:
    for _ in range(50):
        fn(*args)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    opts = parser.parse_args()
    torch.manual_seed(0)
    mlp = MLP()
    cases = [
        ("x + 1, 10 elements", add_one, (torch.randn(10),)),
        ("3-layer MLP, batch 1", mlp, (torch.randn(1, 64),)),
        ("20 tensor arguments", twenty_args, tuple(torch.randn(4) for _ in range(20))),
    ]
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, {platform.machine()}, "
        f"{torch.get_num_threads()} threads; median of {opts.repeat} x {opts.calls} calls"
    )
    header = (
        f"{'case':24} {'eager us':>9} {'steno us':>9} {'torch.compile us':>17} "
        f"{'steno added':>12} {'tc added':>9} {'added ratio':>12}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, args in cases:
        steno = stenograph.compile(fn, backend=forward_backend)
        torch._dynamo.reset()
        tc = torch.compile(fn, backend=forward_backend)
        for compiled in (steno, tc):
            torch.testing.assert_close(compiled(*args), fn(*args))
        eager_us = per_call_us(fn, args, opts.calls, opts.repeat)
        steno_us = per_call_us(steno, args, opts.calls, opts.repeat)
        tc_us = per_call_us(tc, args, opts.calls, opts.repeat)
        steno_added, tc_added = steno_us - eager_us, tc_us - eager_us
        ratio = steno_added / tc_added if tc_added > 0 else float("nan")
        print(
            f"{name:24} {eager_us:9.2f} {steno_us:9.2f} {tc_us:17.2f} {steno_added:12.2f} {tc_added:9.2f} {ratio:12.2f}"
        )
    print("added = compiled minus eager per call; added ratio = stenograph added / torch.compile added (< 1 is better)")


if __name__ == "__main__":
    main()
