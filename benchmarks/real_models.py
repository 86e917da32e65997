"""Capture time and graph counts of HuggingFace GPT-2 and BERT: stenograph vs torch.compile.

Both use the `eager` backend, so the time of the first call is capture (tracing, guards, code
generation) plus one run; the run itself is subtracted using a warm eager call. Models are
built from small configs with random weights (offline). Needs the `models` extra.

    python benchmarks/real_models.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]  # the tests' models, and their `helpers`

import stenograph  # noqa: E402
from stenograph.testing import CompileCounter  # noqa: E402
from tests.python.test_real_models import MODELS, _inputs, _loss  # noqa: E402


def first_call(name: str, compile_fn, training: bool) -> tuple[float, int]:
    """(seconds of the first compiled call minus a warm eager call, graphs)."""
    import torch._dynamo

    torch._dynamo.reset()
    stenograph.reset()
    torch.manual_seed(0)
    model = MODELS[name]().train(training)
    ids = _inputs(0)

    def step(m: torch.nn.Module) -> None:
        loss, _ = _loss(name, m, ids)
        if training:
            loss.backward()

    step(model)  # warm the eager path (kernels, allocator)
    start = time.perf_counter()
    step(model)
    eager = time.perf_counter() - start
    counter = CompileCounter()
    compiled = compile_fn(model, backend=counter)
    start = time.perf_counter()
    step(compiled)
    return time.perf_counter() - start - eager, counter.frame_count


def main() -> None:
    header = ["model", "step", "graphs: stenograph", "graphs: torch.compile", "capture s: ours", "capture s: torch"]
    print("| " + " | ".join(header) + " |")
    print("|---|---|---|---|---|---|")
    for name in MODELS:
        for training in (False, True):
            rows = {}
            for label, fn in (("ours", stenograph.compile), ("torch", torch.compile)):
                runs = [first_call(name, fn, training) for _ in range(3)]
                rows[label] = (statistics.median(r[0] for r in runs), runs[0][1])
            step = "forward + loss + backward" if training else "forward + loss (eval)"
            print(
                f"| {name} | {step} | {rows['ours'][1]} | {rows['torch'][1]} "
                f"| {rows['ours'][0]:.3f} | {rows['torch'][0]:.3f} |"
            )


if __name__ == "__main__":
    main()
