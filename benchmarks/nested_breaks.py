"""Nested graph breaks: graphs, first-call (capture) time and steady per-call time with
`nested_graph_breaks` off and on, stenograph beside torch.compile, on models whose graph break
lies inside a submodule or a helper function.

    python benchmarks/nested_breaks.py [--backend eager|aot_eager] [--calls 200]

Each row: graphs handed to the backend, the first call's seconds (tracing and compiling), and the
median of `--calls` later calls in microseconds; eager's per-call time for comparison.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch._dynamo
from torch import nn

import stenograph
from stenograph.testing import CompileCounter


class Attention(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        torch._dynamo.graph_break()  # e.g. a logging call the tracer cannot capture
        return self.out(weights @ v)


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Stack(nn.Module):
    """Blocks called one by one (no loop in the forward: a break in a loop skips the frame)."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.b0, self.b1, self.b2, self.b3 = (Block(width) for _ in range(4))

    def forward(self, x):
        return self.b3(self.b2(self.b1(self.b0(x))))


def scale(x):
    x = x * 1.5
    torch._dynamo.graph_break()
    return x.tanh()


def normalise(x):
    return scale(x - x.mean()) / (x.std() + 1e-5)


def pipeline(x):
    y = normalise(x.sin())
    z = normalise(y.cos() + x)
    return (y * z).sum()


def counting_backend(counter: CompileCounter, backend: str):
    """`counter` itself (the `eager` backend), or torch's AOTAutograd compiling each forward graph
    with it (`aot_eager`): one backend for both compilers, counting the graphs each hands over."""
    if backend == "eager":
        return counter
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=lambda gm, example_inputs: counter(gm, example_inputs))


def measure(compile_fn, fn, args, calls: int) -> tuple[int, float, float]:
    counter = CompileCounter()
    compiled = compile_fn(fn, counter)
    start = time.perf_counter()
    compiled(*args)
    first = time.perf_counter() - start
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        compiled(*args)
        times.append(time.perf_counter() - start)
    return counter.frame_count, first, statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="eager", choices=["eager", "aot_eager"])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    cases = {
        "4 blocks, break in attention": (Stack().eval(), (torch.randn(8, 16, 64),)),
        "helpers": (pipeline, (torch.randn(256),)),
    }

    def steno(nested):
        def make(fn, counter):
            stenograph.reset()
            with stenograph.config.patch(nested_graph_breaks=nested):
                compiled = stenograph.compile(fn, backend=counting_backend(counter, args.backend))

            def run(*a):
                with stenograph.config.patch(nested_graph_breaks=nested):
                    return compiled(*a)

            return run

        return make

    def peer(nested):
        def make(fn, counter):
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend=counting_backend(counter, args.backend))

            def run(*a):
                with torch._dynamo.config.patch(nested_graph_breaks=nested):
                    return compiled(*a)

            return run

        return make

    print(f"backend {args.backend}, torch {torch.__version__}, median of {args.calls} calls after the first")
    print(f"{'case':32} {'compiler':26} {'graphs':>6} {'first s':>8} {'per call us':>12}")
    with torch.no_grad():
        for name, (fn, inputs) in cases.items():
            expected = fn(*inputs)
            eager_times = []
            for _ in range(args.calls):
                start = time.perf_counter()
                fn(*inputs)
                eager_times.append(time.perf_counter() - start)
            print(f"{name:32} {'eager':26} {'':>6} {'':>8} {statistics.median(eager_times) * 1e6:12.1f}")
            for label, make in [
                ("stenograph", steno(False)),
                ("stenograph nested", steno(True)),
                ("torch.compile", peer(False)),
                ("torch.compile nested", peer(True)),
            ]:
                graphs, first, per_call = measure(make, fn, inputs, args.calls)
                torch.testing.assert_close(make(fn, CompileCounter())(*inputs), expected)
                print(f"{name:32} {label:26} {graphs:6d} {first:8.3f} {per_call:12.1f}")


if __name__ == "__main__":
    main()
