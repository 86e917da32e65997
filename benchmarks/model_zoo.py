"""HuggingFace, torchvision and timm models in as few graphs as torch.compile: graphs, capture
time and correctness of stenograph and torch.compile side by side, inference (`no_grad`) and one
training step each.

Both compilers use a counting backend that runs the graphs as they are, so capture time is the
first compiled call minus the median of three warm eager calls. Models come from tiny configs or
small inputs with random weights (`tests/models/zoo.py`, shared with the slow tests). Needs the
`models` extra.

    python benchmarks/model_zoo.py [--reasons] [--repeat N] [model ...]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import warnings
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]  # the tests' zoo, and their `helpers`

import stenograph  # noqa: E402
from tests.models.zoo import MODELS, Measurement, measure  # noqa: E402

COMPILERS = ("stenograph", "torch.compile")


def _median_run(name: str, training: bool, compiler: str, repeat: int) -> Measurement:
    """The first run's graphs, reasons and mismatches, with the median capture time of `repeat` runs."""
    runs = [measure(name, training, compiler) for _ in range(repeat)]
    first = runs[0]
    first.capture_seconds = statistics.median(run.capture_seconds for run in runs)
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODELS), help="models to measure (default: all)")
    parser.add_argument("--reasons", action="store_true", help="list stenograph's break reasons per step")
    parser.add_argument("--repeat", type=int, default=1, help="capture time: median of this many cold runs")
    args = parser.parse_args()
    warnings.simplefilter("ignore", stenograph.StenographWarning)
    columns = ["graphs: stenograph", "graphs: torch.compile", "capture s: stenograph", "capture s: torch.compile"]
    print("| model | step | " + " | ".join(columns) + " | matches eager |")
    print("|---|---|---|---|---|---|---|")
    totals: collections.Counter[str] = collections.Counter()
    details = []
    for name in args.models:
        for training in (False, True):
            ours, theirs = (_median_run(name, training, compiler, args.repeat) for compiler in COMPILERS)
            step = "train" if training else "infer"
            match = "yes" if not ours.mismatches else "NO: " + ", ".join(ours.mismatches)
            print(
                f"| {name} | {step} | {ours.graphs} | {theirs.graphs} "
                f"| {ours.capture_seconds:.2f} | {theirs.capture_seconds:.2f} | {match} |",
                flush=True,
            )
            totals.update(ours.reasons)
            details.append((name, step, ours.reasons))
    if args.reasons:
        for name, step, reasons in details:
            for reason, count in collections.Counter(reasons).most_common():
                print(f"{name} {step}: {count}x {reason}")
    print("\nstenograph's break reasons across models, most frequent first:")
    for reason, count in totals.most_common():
        print(f"  {count:3d}x {reason}")


if __name__ == "__main__":
    main()
