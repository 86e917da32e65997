"""The long fuzz run: `python -m tests.fuzz --programs 5000 --seed 0` from the repository root.

Prints each mismatch with its program's source, then programs/s and the mismatch count; exits 1
when anything differed. `--seed N --programs 1` reruns one program.
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import time

import torch

import stenograph

from .generator import ALL_FEATURES, Program, default_features, generate
from .numpy_programs import generate_numpy
from .object_model import generate_objects
from .runner import BACKENDS, check_program


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program")
    parser.add_argument("--backend", action="append", choices=BACKENDS, help="default: all")
    parser.add_argument("--all-features", action="store_true", help="also the features disabled by findings")
    parser.add_argument("--features", help="comma-separated feature list (overrides the defaults)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per program before it counts as a hang")
    parser.add_argument("--quiet", action="store_true", help="print only the first line of each mismatch")
    parser.add_argument("--show", action="store_true", help="print each program's source")
    parser.add_argument(
        "--generator",
        choices=("programs", "objects", "numpy"),
        default="programs",
        help="objects: object_model.py's programs; numpy: numpy_programs.py's",
    )
    parser.add_argument("--file", help="run this program (a generated or hand-shrunk source) instead")
    parser.add_argument(
        "--nested-graph-breaks", action="store_true", help="compile with config.nested_graph_breaks=True"
    )
    args = parser.parse_args(argv)
    if args.nested_graph_breaks:
        stenograph.config.nested_graph_breaks = True
    backends = tuple(args.backend or BACKENDS)
    make = {"objects": generate_objects, "numpy": generate_numpy}.get(args.generator, generate)
    # the features each backend's programs use; backends with the same set share their programs
    plan: dict[frozenset[str], list[str]] = {}
    for backend in backends:
        features = ALL_FEATURES if args.all_features else default_features(backend)
        if args.features:
            features = frozenset(args.features.split(","))
            if features - ALL_FEATURES:
                parser.error(f"unknown features {sorted(features - ALL_FEATURES)}; known: {sorted(ALL_FEATURES)}")
        plan.setdefault(features, []).append(backend)
    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    kinds: collections.Counter[str] = collections.Counter()
    warned: collections.Counter[str] = collections.Counter()
    bad_programs = 0
    start = time.perf_counter()
    done = 0
    try:
        for seed in range(args.seed, args.seed + args.programs):
            signal.alarm(args.timeout)
            mismatches, warnings = [], []
            try:
                for features, group in plan.items():
                    program = make(seed, features)
                    if args.file:
                        with open(args.file) as handle:
                            program = Program(seed=seed, source=handle.read(), features=features, stable=False)
                    if args.show:
                        print(program.source)
                    found, warned_here = check_program(program, tuple(group))
                    mismatches += found
                    warnings += warned_here
            except _Timeout:
                print(f"HANG: seed {seed} ran over {args.timeout} s\n{program.source}", flush=True)
                kinds["hang"] += 1
                bad_programs += 1
            finally:
                signal.alarm(0)
            done += 1
            for w in warnings:
                warned[w[:100]] += 1
            if mismatches:
                bad_programs += 1
            for m in mismatches:
                kinds[f"{m.backend}: {m.signature()}"] += 1
                print(m.report().splitlines()[0] if args.quiet else m.report(), flush=True)
            if done % 50 == 0:
                rate = done / (time.perf_counter() - start)
                print(f"... {done} programs, {rate:.2f}/s, {bad_programs} with mismatches", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    elapsed = time.perf_counter() - start
    print(
        f"\n{done} programs in {elapsed:.0f} s ({done / max(elapsed, 1e-9):.2f} programs/s), "
        f"{bad_programs} with mismatches, {sum(kinds.values())} mismatches"
    )
    for kind, count in kinds.most_common():
        print(f"  {count:5d}  {kind}")
    if warned:
        print("eager fallbacks (StenographWarning), most common:")
        for text, count in warned.most_common(10):
            print(f"  {count:5d}  {text}")
    return 1 if bad_programs else 0


if __name__ == "__main__":
    sys.exit(main())
