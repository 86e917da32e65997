"""Capture time of the demo's Transformer block: stenograph vs torch.compile, `eager` backend.

With the `eager` backend the first call of a freshly compiled model is capture (tracing, guards,
code generation) plus one run; the run is subtracted using a warm eager call. Each compiler
captures a fresh model `--repeat` times (caches reset in between); the median is printed. Every
capture starts with FakeTensorMode's process-wide dispatch cache empty, as for a model the process
has not seen: `stenograph.reset()` frees the entries its compiles added (a process that compiles
and drops many functions must not grow), while `torch._dynamo.reset()` keeps them, so without this
a repeat would compare stenograph's cold capture with torch.compile's warm one. Needs
only torch, so it runs on every supported Python (the real-model benchmarks need transformers).

    python benchmarks/capture.py [--repeat 5] [--layers 4]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import stenograph  # noqa: E402
from stenograph.cli.demo import TransformerBlock  # noqa: E402


def _model(layers: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[TransformerBlock() for _ in range(layers)]).eval()


def _first_call(compile_fn, reset, layers: int, x: torch.Tensor) -> float:
    """Seconds of the first compiled call minus a warm eager call of the same model."""
    reset()
    FakeTensorMode.cache.clear()
    model = _model(layers)
    with torch.no_grad():
        model(x)
        start = time.perf_counter()
        model(x)
        eager = time.perf_counter() - start
        compiled = compile_fn(model)
        start = time.perf_counter()
        compiled(x)
        first = time.perf_counter() - start
    return first - eager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    import torch._dynamo

    x = torch.randn(2, 16, 256)
    ours = [
        _first_call(lambda m: stenograph.compile(m, backend="eager"), stenograph.reset, args.layers, x)
        for _ in range(args.repeat)
    ]
    theirs = [
        _first_call(lambda m: torch.compile(m, backend="eager"), torch._dynamo.reset, args.layers, x)
        for _ in range(args.repeat)
    ]
    ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
    setting = f"python {platform.python_version()}, torch {torch.__version__}"
    print(f"{setting}; {args.layers} Transformer blocks, eager backend, median of {args.repeat}")
    print(f"capture s: stenograph {ours_s:.3f}, torch.compile {theirs_s:.3f}, ratio {ours_s / theirs_s:.2f}")


if __name__ == "__main__":
    main()
