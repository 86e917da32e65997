"""Warm start: the first compiled call of a fresh process, cold and warm, torch.compile beside
stenograph (issue 28).

Every measurement is a process of its own. For each (model, backend, mode) and each compiler, a
new cache folder is made; a first process compiles with empty caches (cold) and a second one
with what the first left there (warm). Each child builds the model from a seed, times its first
compiled call (capture, compile or load, and one run; CUDA synchronised; garbage collected
first), checks the result
against eager's, and prints one JSON line. Both compilers get Inductor's on-disk caches in that
folder (`TORCHINDUCTOR_CACHE_DIR`), torch.compile's warm start being what those caches give it;
stenograph's warm start reads its own cache (`STENOGRAPH_CACHE_DIR`) as well.

    python benchmarks/warm_start.py --device cpu --models stack6,breaks6 --backends eager,aot_eager,inductor
    python benchmarks/warm_start.py --device cuda --models llama,resnet50,t5,vit --backends inductor \\
        --modes default,max-autotune-no-cudagraphs --dtype bfloat16

The table gives, per row, the median first-call seconds over `--repeats` cold runs, each followed
by `--warm-runs` warm ones (each a fresh process reading the caches the cold one left), the
warm/cold ratio of each compiler, that ratio of the first call's overhead ("ovh": the first call
minus the median of three later ones, that is the capture, compile or load without the run),
stenograph warm / torch.compile warm, and whether every run's result equalled eager's (float32:
within 1e-4 of the output's scale; bfloat16: 2e-2). Under each row, the median seconds of the
`compile()` call itself (torch.compile imports torch._dynamo there; stenograph with a cache folder
imports what loading its backend's artifacts needs). `--threads 1` gives each child one torch
thread, which steadies the run time on a shared machine.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["stack6", "breaks6", "llama", "resnet50", "t5", "vit", "bert"]


def build(name: str, device: str, dtype: Any) -> tuple[Any, tuple]:
    """The model `name` (random weights from a fixed seed, eval mode) and its input."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    if name == "stack6":
        layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
        model: nn.Module = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
        inputs: tuple = (torch.randn(8, 64, 256, device=device),)
    elif name == "breaks6":
        layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
        sys.path.insert(0, HERE)
        from break_models import BlocksWithBreaks

        model = BlocksWithBreaks([copy.deepcopy(layer) for _ in range(6)])
        inputs = (torch.randn(8, 64, 256, device=device),)
    elif name == "t5":
        from transformers import T5Config, T5Model

        sys.path.insert(0, HERE)
        from gpu_models import T5EncoderDecoder

        cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128)
        model = T5EncoderDecoder(T5Model(cfg))
        ids = torch.randint(0, cfg.vocab_size, (4, 128), device=device)
        inputs = (ids, ids[:, :32])
    else:
        sys.path.insert(0, HERE)
        import gpu_models

        case = gpu_models.build(name, small=device == "cpu", device=device)
        model, inputs = case.model, case.inputs
    model = model.to(device).eval()
    if dtype is not None and dtype != torch.float32:
        model = model.to(dtype)
        inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    return model, inputs


def _first_tensor(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


def child(opts: argparse.Namespace) -> None:
    """One process: build, compile, time the first call, compare with eager; print JSON."""
    t_import = time.perf_counter()
    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)

    import stenograph

    imports = time.perf_counter() - t_import
    dtype = getattr(torch, opts.dtype)
    model, inputs = build(opts.model, opts.device, dtype)

    def sync() -> None:
        if opts.device == "cuda":
            torch.cuda.synchronize()

    with torch.no_grad():
        expected = _first_tensor(model(*inputs)).float()
        sync()
        kwargs: dict[str, Any] = {"backend": opts.backend}
        if opts.backend == "inductor" and opts.mode != "default":
            kwargs["mode"] = opts.mode
        compile_fn = torch.compile if opts.compiler == "torch" else stenograph.compile
        # a full collection owed to the imports and the model's construction would otherwise fall
        # in whichever first call allocates next (0.4-0.6 s here)
        gc.collect()
        decorate_start = time.perf_counter()
        compiled = compile_fn(model, **kwargs)
        decorate = time.perf_counter() - decorate_start
        start = time.perf_counter()
        out = _first_tensor(compiled(*inputs)).float()
        sync()
        first = time.perf_counter() - start
        steady = []
        for _ in range(3):
            start = time.perf_counter()
            compiled(*inputs)
            sync()
            steady.append(time.perf_counter() - start)
    scale = max(expected.abs().max().item(), 1.0)
    tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-4
    diff = (out - expected).abs().max().item() / scale
    print(
        json.dumps(
            {
                "first_s": first,
                "steady_s": statistics.median(steady),
                "decorate_s": decorate,
                "imports_s": imports,
                "rel_diff": diff,
                "equal": bool(diff <= tolerance),
            }
        )
    )


def _run_child(opts: argparse.Namespace, compiler: str, model: str, backend: str, mode: str, folder: str) -> dict:
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "inductor")
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    if compiler == "stenograph":
        env["STENOGRAPH_CACHE_DIR"] = os.path.join(folder, "stenograph")
    else:
        env.pop("STENOGRAPH_CACHE_DIR", None)
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "--compiler",
        compiler,
        "--model",
        model,
        "--backend",
        backend,
        "--mode",
        mode,
        "--device",
        opts.device,
        "--dtype",
        opts.dtype,
        "--threads",
        str(opts.threads),
    ]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=opts.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {opts.timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit {done.returncode}"}
    return json.loads(lines[-1])


def measure(opts: argparse.Namespace, model: str, backend: str, mode: str) -> dict[str, Any]:
    """Cold and warm first calls, `opts.repeats` times per compiler (compilers alternating); each
    cold process followed by `opts.warm_runs` warm ones."""
    runs: dict[str, dict[str, list]] = {
        c: {
            **{f"{phase}{part}": [] for phase in ("cold", "warm") for part in ("", "_overhead", "_decorate")},
            "equal": [],
            "errors": [],
        }
        for c in COMPILERS
    }
    chosen = [c for c in COMPILERS if c in opts.compilers.split(",")]
    for repeat in range(opts.repeats):
        order = chosen if repeat % 2 == 0 else chosen[::-1]
        for compiler in order:
            with tempfile.TemporaryDirectory(prefix="warm-start-") as folder:
                for phase in ("cold", *["warm"] * opts.warm_runs):
                    result = _run_child(opts, compiler, model, backend, mode, folder)
                    if "error" in result:
                        runs[compiler]["errors"].append(f"{phase}: {result['error']}")
                        break
                    runs[compiler][phase].append(result["first_s"])
                    print(f"    {model} {mode} {compiler} {phase}: {result['first_s']:.2f} s", flush=True)
                    runs[compiler][f"{phase}_overhead"].append(result["first_s"] - result["steady_s"])
                    runs[compiler][f"{phase}_decorate"].append(result["decorate_s"])
                    runs[compiler]["equal"].append(result["equal"])
    return runs


COMPILERS = ("torch", "stenograph")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _overhead_ratio(runs: dict[str, list]) -> float | None:
    """Warm over cold, of the first call minus a steady call (the compile or load alone)."""
    return _ratio(_median(runs["warm_overhead"]), _median(runs["cold_overhead"]))


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--models", default="stack6")
    parser.add_argument("--backends", default="eager,aot_eager,inductor")
    parser.add_argument("--modes", default="default", help="Inductor modes (other backends ignore them)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--warm-runs", type=int, default=1, help="warm processes after each cold one (each a fresh process)"
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads per child (0: torch's default)")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per child process")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument(
        "--compilers", default=",".join(COMPILERS), help="which to measure (one alone fits a slow mode in less time)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compiler", choices=COMPILERS, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="default", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(opts)
        return 0
    rows = []
    header = (
        f"{'model':9} {'backend':9} {'mode':27} | {'tc cold':>8} {'tc warm':>8} {'w/c':>5} {'ovh w/c':>7} | "
        f"{'st cold':>8} {'st warm':>8} {'w/c':>5} {'ovh w/c':>7} | {'st/tc warm':>10} | equal"
    )
    print(
        f"device {opts.device}, dtype {opts.dtype}, {opts.repeats} cold runs per compiler, each followed by "
        f"{opts.warm_runs} warm; medians, seconds"
    )
    print(header)
    print("-" * len(header))
    for model in opts.models.split(","):
        for backend in opts.backends.split(","):
            modes = opts.modes.split(",") if backend == "inductor" else ["default"]
            for mode in modes:
                runs = measure(opts, model, backend, mode)
                tc, st = runs["torch"], runs["stenograph"]
                tc_cold, tc_warm = _median(tc["cold"]), _median(tc["warm"])
                st_cold, st_warm = _median(st["cold"]), _median(st["warm"])
                ratio = st_warm / tc_warm if st_warm and tc_warm else None
                equal = all(tc["equal"] + st["equal"]) and not (tc["errors"] or st["errors"])
                print(
                    f"{model:9} {backend:9} {mode:27} | {_fmt(tc_cold):>8} {_fmt(tc_warm):>8} "
                    f"{_fmt(_ratio(tc_warm, tc_cold)):>5} {_fmt(_overhead_ratio(tc), 3):>7} | {_fmt(st_cold):>8} "
                    f"{_fmt(st_warm):>8} {_fmt(_ratio(st_warm, st_cold)):>5} {_fmt(_overhead_ratio(st), 3):>7} | "
                    f"{_fmt(ratio):>10} | {'yes' if equal else 'NO'}",
                    flush=True,
                )
                decorate = [_fmt(_median(runs[c][f"{p}_decorate"])) for c in COMPILERS for p in ("cold", "warm")]
                print("    compile() call s (tc cold, tc warm, st cold, st warm): " + ", ".join(decorate))
                for compiler in COMPILERS:
                    for error in runs[compiler]["errors"]:
                        print(f"    {compiler}: {error}")
                rows.append({"model": model, "backend": backend, "mode": mode, **runs})
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"device": opts.device, "dtype": opts.dtype, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
