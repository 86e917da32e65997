"""Guard cost per call: Python guard functions vs native checks, and what a whole call adds.

For each model the same compiled program is built twice, with `config.native_guards` False and
True (the extension is built on first need). Prints per call, in microseconds:

- guard: the guard functions one call runs, called directly with the arguments the call passed,
  in a warm loop and cold (`cold`: the median call after a 64 MiB buffer was written, which evicts
  the CPU's caches as a GPU loop's own host work between two calls partly does);
- call: eager, stenograph (Python guards), stenograph (native checks), torch.compile, and the
  overhead each compiler adds to eager. Both compilers get a backend returning `gm.forward`
  (as benchmarks/overhead.py), so they run the same kernels.

The models are small (BERT: 4 layers of width 64; the ResNet: ResNet-18's shape at widths 8-64
on 16x16 images; resnet50: ResNet-50's 150 modules at widths 8-64 on 32x32 images; the MLP of
overhead.py) so that kernels do not drown the per-call overhead; the guards depend on
the number of modules and tensors, not on their sizes. Inference under `torch.no_grad()`,
batch 1. Minimum over `--repeat` rounds, the variants timed in alternation (the machine may be
shared).

    python benchmarks/guard_cost.py [--repeat 7] [--calls 300] [--threads 1]
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from overhead import MLP, forward_backend
from torch import nn

import stenograph
from stenograph import entry as entries
from stenograph.guards import native


class BasicBlock(nn.Module):
    def __init__(self, channels_in: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(channels_in, channels, 1, stride, bias=False), nn.BatchNorm2d(channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    """ResNet-18's shape (4 stages of 2 basic blocks) at widths 8-64, for 16x16 images."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        blocks, channels_in = [], 8
        for channels, stride in ((8, 1), (16, 2), (32, 2), (64, 2)):
            blocks += [BasicBlock(channels_in, channels, stride), BasicBlock(channels, channels, 1)]
            channels_in = channels
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Bottleneck(nn.Module):
    def __init__(self, channels_in: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv3 = nn.Conv2d(channels, channels * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or channels_in != channels * 4:
            self.downsample = nn.Sequential(
                nn.Conv2d(channels_in, channels * 4, 1, stride, bias=False), nn.BatchNorm2d(channels * 4)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet50Shape(nn.Module):
    """torchvision's ResNet-50 layout (3, 4, 6, 3 bottlenecks; 150 modules, 320 parameters and
    buffers) at widths 8-64, for 32x32 images."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, channels_in = [], 8
        for stage, (blocks, channels) in enumerate(((3, 8), (4, 16), (6, 32), (3, 64))):
            layer = []
            for block in range(blocks):
                layer.append(Bottleneck(channels_in, channels, 2 if block == 0 and stage > 0 else 1))
                channels_in = channels * 4
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(channels_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def bert() -> tuple[nn.Module, tuple]:
    from transformers import BertConfig, BertModel  # optional (the `models` extra)

    config = BertConfig(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128)
    return BertModel(config).eval(), (torch.randint(0, config.vocab_size, (1, 16)),)


def resnet() -> tuple[nn.Module, tuple]:
    return SmallResNet().eval(), (torch.randn(1, 3, 16, 16),)


def resnet50() -> tuple[nn.Module, tuple]:
    return ResNet50Shape().eval(), (torch.randn(1, 3, 32, 32),)


def mlp() -> tuple[nn.Module, tuple]:
    return MLP().eval(), (torch.randn(1, 64),)


def min_us(fns: dict[str, Callable[[], Any]], calls: int, repeat: int) -> dict[str, float]:
    """Best microseconds per call of each function, timed in alternation: a busy spell on a
    shared machine slows every variant's round, not one variant's."""
    for fn in fns.values():
        for _ in range(10):
            fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls * 1e6)
    return best


def cold_us(fn: Callable[[], Any], calls: int) -> float:
    """Median microseconds of a call of `fn` made right after a buffer larger than the CPU's
    caches was written."""
    buffer = torch.zeros(64 << 20, dtype=torch.uint8)
    times = []
    for _ in range(calls):
        buffer.add_(1)
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def guard_calls(compiled: Callable, args: tuple) -> list[tuple[Callable, tuple, dict]]:
    """The guard functions one call of `compiled` runs, with their arguments."""
    seen: list[tuple[Callable, tuple, dict]] = []
    spied = []
    for cache in entries.all_caches():
        for entry in cache.entries:
            guard = entry.guard

            def spy(*a: Any, _guard: Callable = guard, **k: Any) -> Any:
                seen.append((_guard, a, k))
                return _guard(*a, **k)

            spied.append((entry, guard))
            entry.guard = spy
    compiled(*args)
    for entry, guard in spied:
        entry.guard = guard
    return seen


def run_guards(calls: list[tuple[Callable, tuple, dict]]) -> None:
    for guard, a, k in calls:
        guard(*a, **k)


def compiled_with(model: nn.Module, args: tuple, native_guards: bool) -> tuple[Callable, list]:
    """`model` compiled with Python guards or native checks, and the guard calls a call makes.
    Each gets a backend of its own, hence caches of its own (caches are per backend)."""

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return forward_backend(gm, example_inputs)

    with stenograph.config.patch(native_guards=native_guards):
        compiled = stenograph.compile(model, backend=backend)
        torch.testing.assert_close(compiled(*args), model(*args))
    return compiled, guard_calls(compiled, args)


def measure(name: str, make: Callable[[], tuple[nn.Module, tuple]], opts: argparse.Namespace) -> None:
    torch.manual_seed(0)
    model, args = make()
    stenograph.reset()
    python_compiled, python_guards = compiled_with(model, args, False)
    native_compiled, native_guards = compiled_with(model, args, True)
    torch._dynamo.reset()
    peer = torch.compile(model, backend=forward_backend)
    torch.testing.assert_close(peer(*args), model(*args))
    gc.collect()  # what the compiles left behind, collected before anything is timed
    guard = min_us(
        {"python": lambda: run_guards(python_guards), "native": lambda: run_guards(native_guards)},
        opts.calls * 3,
        opts.repeat,
    )
    cold = {
        name: cold_us(lambda c=c: run_guards(c), opts.calls // 2)
        for name, c in (("python", python_guards), ("native", native_guards))
    }
    call = min_us(
        {
            "eager": lambda: model(*args),
            "python": lambda: python_compiled(*args),
            "native": lambda: native_compiled(*args),
            "torch.compile": lambda: peer(*args),
        },
        opts.calls,
        opts.repeat,
    )
    lines = [sum(len(g.__stenograph_source__.splitlines()) for g, _, _ in c) for c in (python_guards, native_guards)]
    eager = call["eager"]
    print(
        f"{name:7} {guard['python']:9.1f} {guard['native']:9.1f} {cold['python']:8.1f} {cold['native']:8.1f} "
        f"{lines[0]:6}/{lines[1]:<5} {eager:9.1f} "
        f"{call['python']:9.1f} {call['native']:9.1f} {call['torch.compile']:9.1f} {call['python'] - eager:8.1f} "
        f"{call['native'] - eager:8.1f} {call['torch.compile'] - eager:8.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: kernels vary least)")
    parser.add_argument("--models", default="bert,resnet,resnet50,mlp")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    start = time.perf_counter()
    native.load()
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, {platform.machine()}, "
        f"{opts.threads} thread(s); min of {opts.repeat} x {opts.calls} calls; native checks ready in "
        f"{time.perf_counter() - start:.1f} s"
    )
    header = (
        f"{'model':7} {'guard py':>9} {'guard nat':>9} {'py cold':>8} {'nat cold':>8} {'lines':>12} "
        f"{'eager':>9} {'steno py':>9} "
        f"{'steno nat':>9} {'torch.c':>9} {'+py':>8} {'+nat':>8} {'+torch.c':>8}"
    )
    print(header)
    print("-" * len(header))
    makers = {"bert": bert, "resnet": resnet, "resnet50": resnet50, "mlp": mlp}
    with torch.no_grad():
        for name in opts.models.split(","):
            measure(name, makers[name], opts)
    print("microseconds per call; lines: guard function lines (python/native); +X: X minus eager")


if __name__ == "__main__":
    main()
