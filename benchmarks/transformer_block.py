"""Seed 001 section 10.3: a Transformer block, eager vs stenograph vs torch.compile, per mode.

The model, input and calling pattern are the seed's (nn.MultiheadAttention + LayerNorm + a GELU
feed-forward, d_model 512, 8 heads, batch 16, sequence 128; the module in its default training
mode, forward only, grad mode on). Everything runs in one process on the same model and input:

* first call: wall time of the first call of a freshly compiled model (capture + compile + run,
  CUDA synchronised). Inductor's on-disk caches are disabled for the whole run
  (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1), so neither compiler reuses the other's compiled graphs;
  the order of the two compilers alternates from mode to mode, and a throw-away compile of a tiny
  function by each compiler happens first so neither pays Inductor's imports and CUDA set-up.
* latency: `--rounds` rounds; in each round eager, stenograph and torch.compile each run `--iters`
  calls back to back (order rotating per round) with a synchronise at the end; the per-call time
  of a round is the round's time / iters, and the table gives the median over rounds.
* speedup = eager median / compiled median (eager measured in the same rounds);
  ratio = stenograph speedup / torch.compile speedup = torch.compile ms / stenograph ms.

    python benchmarks/transformer_block.py --device cuda --modes default,reduce-overhead
    python benchmarks/transformer_block.py --device cuda --modes max-autotune-no-cudagraphs
    python benchmarks/transformer_block.py --device cpu --modes default --iters 5 --rounds 7

With cold caches one max-autotune compile of this block took 200-225 s on an H200, so each
max-autotune mode needs a command of its own to stay under 10 minutes (docs/benchmarks-history.md).
`--no-grad` runs the block under torch.no_grad() (not the seed's setting), so that no forward
leaves a backward pending, which holds back Inductor's CUDA-graph trees.

`--profile` adds, per compiled model, the CUDA kernels / memcpys launched per call and their GPU
time (torch.profiler), which is where graph differences between the two compilers show.
`--no-static-hint MODES` also measures stenograph without telling Inductor which inputs are
parameters (see src/stenograph/backends/_static_inputs.py), to show what that hint is worth.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import stenograph  # noqa: E402

ALL_MODES = ["default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"]


class TransformerBlock(nn.Module):
    """Seed 001 section 10.3, unchanged."""

    def __init__(self, d_model: int = 512, nhead: int = 8) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, nhead, batch_first=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, 2048),
            nn.GELU(),
            nn.Linear(2048, d_model),
        )

    def forward(self, x):
        attn_out, _ = self.attn(x, x, x)
        x = self.norm1(x + attn_out)
        x = self.norm2(x + self.ffn(x))
        return x


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def first_call_s(fn: Callable, x: torch.Tensor, device: str) -> float:
    sync(device)
    start = time.perf_counter()
    fn(x)
    sync(device)
    return time.perf_counter() - start


def reset_all() -> None:
    stenograph.reset()
    torch._dynamo.reset()


def warm_up_compilers(device: str) -> None:
    """Pay Inductor's imports and the device's set-up once, before anything is timed."""

    def tiny(t):
        return torch.relu(t) * 2 + 1

    t = torch.randn(64, device=device)
    stenograph.compile(tiny)(t)
    torch.compile(tiny)(t)
    reset_all()


def record_graphs(model: nn.Module, x: torch.Tensor) -> str:
    """Both compilers' FX graphs for the model, captured with a recording backend."""
    steno_graphs: list[str] = []
    torch_graphs: list[str] = []

    def rec(into):
        def backend(gm, example_inputs):
            into.append(gm.code)
            return gm.forward

        return backend

    stenograph.compile(model, backend=rec(steno_graphs))(x)
    torch.compile(model, backend=rec(torch_graphs))(x)
    reset_all()
    parts = [f"# stenograph: {len(steno_graphs)} graph(s)", *steno_graphs]
    parts += [f"# torch.compile: {len(torch_graphs)} graph(s)", *torch_graphs]
    return "\n".join(parts)


def profile_per_call(fn: Callable, x: torch.Tensor, calls: int = 20) -> dict:
    """CUDA kernels, memcpys and GPU microseconds per call (averaged over `calls`)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(x)
        torch.cuda.synchronize()
    kernels = memcpy = 0
    gpu_us = 0.0
    names: dict[str, int] = {}
    for evt in prof.events():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        gpu_us += evt.time_range.elapsed_us()
        if "memcpy" in evt.name.lower() or "memset" in evt.name.lower():
            memcpy += 1
        else:
            kernels += 1
            names[evt.name] = names.get(evt.name, 0) + 1
    top = sorted(names.items(), key=lambda kv: -kv[1])[:40]
    return {
        "kernels_per_call": kernels / calls,
        "memcpy_per_call": memcpy / calls,
        "gpu_us_per_call": gpu_us / calls,
        "kernel_names": [f"{n // calls if n >= calls else n / calls} x {name[:90]}" for name, n in top],
    }


def safe_profile(fn: Callable, x: torch.Tensor) -> dict:
    try:
        return profile_per_call(fn, x)
    except Exception as exc:  # a diagnostic must not lose the measurements
        error = f"{type(exc).__name__}: {exc}"
        return {"error": error, "kernels_per_call": 0, "memcpy_per_call": 0, "gpu_us_per_call": 0}


def measure(
    fns: dict[str, Callable],
    x: torch.Tensor,
    device: str,
    iters: int,
    rounds: int,
    warmup: int,
    paths: dict | None = None,
) -> dict:
    """Median per-call ms of each function, rounds interleaved and rotated.

    With `paths` (a dict), it receives how each compiler's timed calls went through Inductor's
    CUDA-graph trees (benchmarks/cudagraph_loops.py's counter, keyed by compiler name).
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn(x)
    sync(device)
    running = [None]
    if paths is not None:
        from cudagraph_loops import count_tree_paths

        paths["counts"] = count_tree_paths(lambda: running[0])
    samples: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            fn = fns[name]
            running[0] = name
            sync(device)
            start = time.perf_counter()
            for _ in range(iters):
                fn(x)
            sync(device)
            samples[name].append((time.perf_counter() - start) / iters * 1e3)
    return {name: statistics.median(s) for name, s in samples.items()}


def max_diff(fn: Callable, x: torch.Tensor, expected: torch.Tensor) -> float:
    with torch.no_grad():
        return float((fn(x).detach() - expected).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--modes", default=None, help=f"comma-separated, from {ALL_MODES}; cpu default: default")
    parser.add_argument("--iters", type=int, default=None, help="calls per round (cuda 50, cpu 5)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (cuda 20, cpu 7)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls per model (cuda 10, cpu 3)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument(
        "--no-grad",
        action="store_true",
        help="run under torch.no_grad() (not the seed's setting; the module stays in training mode, dropout is 0)",
    )
    parser.add_argument("--profile", action="store_true", help="kernels/memcpys per call (cuda only)")
    parser.add_argument(
        "--no-static-hint",
        default="",
        help="comma-separated modes in which stenograph is also timed without the static-input hint",
    )
    parser.add_argument(
        "--count-tree-paths",
        action="store_true",
        help="count per compiler how timed calls went through the CUDA-graph trees (replayed/recorded)",
    )
    parser.add_argument("--json", default=None, help="append one JSON line per mode to this file")
    parser.add_argument("--dump-graphs", default=None, help="write both compilers' FX graphs to this file")
    opts = parser.parse_args()

    cuda = opts.device == "cuda"
    modes = opts.modes.split(",") if opts.modes else (ALL_MODES if cuda else ["default"])
    for mode in modes:
        if mode not in ALL_MODES:
            parser.error(f"unknown mode {mode!r}; valid: {', '.join(ALL_MODES)}")
    iters = opts.iters or (50 if cuda else 5)
    rounds = opts.rounds or (20 if cuda else 7)
    warmup = opts.warmup if opts.warmup is not None else (10 if cuda else 3)

    torch.manual_seed(0)
    model = TransformerBlock(opts.d_model).to(opts.device)
    x = torch.randn(opts.batch, opts.seq, opts.d_model, device=opts.device)
    if opts.no_grad:
        torch.set_grad_enabled(False)
    with torch.no_grad():
        expected = model(x)

    device_name = torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine()
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, device {opts.device} ({device_name}), "
        f"{torch.get_num_threads()} CPU threads; batch {opts.batch}, seq {opts.seq}, d_model {opts.d_model}, "
        f"train mode, {'no_grad' if opts.no_grad else 'grad enabled (as the seed)'}; "
        f"median of {rounds} rounds x {iters} calls",
        flush=True,
    )
    print("command: python " + " ".join(sys.argv), flush=True)

    if opts.dump_graphs:
        with open(opts.dump_graphs, "w") as f:
            f.write(record_graphs(model, x))
    warm_up_compilers(opts.device)

    header = (
        f"{'mode':28} {'compiler':26} {'median ms':>10} {'speedup':>8} {'first call s':>13} "
        f"{'steno/tc':>9} {'max |diff|':>11}"
    )
    rows: list[str] = []
    # With Inductor's caches on (TORCHINDUCTOR_FORCE_DISABLE_CACHES=0, e.g. to fit max-autotune's
    # minutes of autotuning into one run), the second compiler of a mode reuses the first one's
    # autotuning and kernels: its first-call time is then marked with '*' and is not comparable.
    caches_disabled = os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES") == "1"
    warm_cache: set[tuple[str, str]] = set()
    eager_all: list[float] = []
    for index, mode in enumerate(modes):
        reset_all()
        stenograph.config.mark_static_inputs = True
        compiled: dict[str, Callable] = {}
        first: dict[str, float] = {}
        makers = {
            "stenograph": lambda mode=mode: stenograph.compile(model, mode=mode),
            "torch.compile": lambda mode=mode: torch.compile(model, mode=mode),
        }
        order = list(makers) if index % 2 == 0 else list(reversed(makers))
        for position, name in enumerate(order):
            fn = makers[name]()
            first[name] = first_call_s(fn, x, opts.device)
            compiled[name] = fn
            warm = position > 0 and not caches_disabled
            if warm:
                warm_cache.add((mode, name))
            print(f"  [{mode}] {name}: first call {first[name]:.2f} s{' (warm caches)' if warm else ''}", flush=True)
        if mode in opts.no_static_hint.split(","):
            stenograph.config.mark_static_inputs = False
            # a separate function object, so it gets its own cache entry and its own compile
            base = stenograph.compile(model.forward.__func__, mode=mode)
            fn = lambda t, base=base: base(model, t)  # noqa: E731
            first["stenograph, no static hint"] = first_call_s(fn, x, opts.device)
            compiled["stenograph, no static hint"] = fn
            stenograph.config.mark_static_inputs = True
        fns = {"eager": model, **compiled}
        paths: dict | None = {} if opts.count_tree_paths and cuda else None
        medians = measure(fns, x, opts.device, iters, rounds, warmup, paths)
        if paths:
            counted = ", ".join(f"{k} {v}" for k, v in sorted(paths["counts"].items()))
            print(f"  [{mode}] CUDA-graph trees in the timed rounds: {counted or 'not used'}", flush=True)
        eager_all.append(medians["eager"])
        result = {"mode": mode, "eager_ms": medians["eager"], "caches_disabled": caches_disabled, "compilers": {}}
        if paths:
            result["tree_paths"] = dict(paths["counts"])
        for name in compiled:
            ms = medians[name]
            result["compilers"][name] = {
                "ms": ms,
                "speedup": medians["eager"] / ms,
                "first_call_s": first[name],
                "first_call_warm_caches": (mode, name) in warm_cache,
                "ratio_vs_torch_compile": medians["torch.compile"] / ms,
                "max_abs_diff": max_diff(compiled[name], x, expected),
            }
            if opts.profile and cuda:
                result["compilers"][name]["profile"] = safe_profile(compiled[name], x)
        if opts.profile and cuda:
            result["eager_profile"] = safe_profile(model, x)
        for name, r in result["compilers"].items():
            star = "*" if (mode, name) in warm_cache else " "
            rows.append(
                f"{mode:28} {name:26} {r['ms']:10.3f} {r['speedup']:7.2f}x {r['first_call_s']:12.2f}{star} "
                f"{r['ratio_vs_torch_compile']:9.3f} {r['max_abs_diff']:11.2e}"
            )
            print(rows[-1], flush=True)
            if "profile" in r:
                p = r["profile"]
                print(
                    f"      profile: {p['kernels_per_call']:.1f} kernels, {p['memcpy_per_call']:.1f} memcpy/memset, "
                    f"{p['gpu_us_per_call']:.1f} GPU us per call",
                    flush=True,
                )
        if opts.json:
            with open(opts.json, "a") as f:
                f.write(json.dumps(result) + "\n")
        del compiled, fns
        reset_all()

    print()
    print(header)
    print("-" * len(header))
    print(f"{'(eager)':28} {'eager':26} {statistics.median(eager_all):10.3f} {1.0:7.2f}x {'-':>13} {'-':>9} {'-':>11}")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
