"""Real models on the GPU: eager vs torch.compile vs stenograph (Inductor), side by side (issue 17).

Models from configs with random weights (no download): HF BERT-base (8 x 256 tokens), HF Llama
small (4 layers, width 1024, 4 x 512 tokens), timm ViT-B/16 (batch 16) and torchvision ResNet-50
(batch 32); `--small` shrinks each to a toy size for a check on the CPU, and a small conv net
(`convnet`, no extra package) is always there. Models whose package is missing are skipped.

Settings: `bf16` and `fp32` inference (eval mode, under torch.no_grad()) and `train` (train mode,
fp32, forward + loss + backward, gradients set to None before each step). Modes: Inductor's
`default` and `max-autotune-no-cudagraphs`.

For each (model, setting, mode) one process holds the model once and builds both compilers on it;
the first call of each is timed (capture + compile + one run), then eager, torch.compile and
stenograph run in `--rounds` interleaved rounds (order rotating), each round `--iters` calls and
a synchronise; the table shows the median per-call ms over rounds and the ratio
torch.compile ms / stenograph ms (>= 1: stenograph as fast or faster). "graphs" counts the
graphs each compiler handed to Inductor. Inductor's caches stay on (a fresh cache directory per
process unless TORCHINDUCTOR_CACHE_DIR is set), so first-call times are only indicative: the
second compiler may reuse kernels of the first. `--profile` adds, per compiler, the CUDA kernels
per call, their GPU time per call, the host time per call (from the call until it returns, with
an idle GPU) and, for stenograph, the time of its guard function per call; `--no-guard-variant`
also times stenograph with its guard skipped, which shows how much of a gap the guards make;
`--overhead` times each compiler's own per-call host cost (guards, argument passing, output
rebuilding) with a backend that replays the first call's outputs, so that no kernel runs.

    python benchmarks/gpu_models.py --device cuda --models bert,llama,vit,resnet50 --settings bf16
    python benchmarks/gpu_models.py --device cpu --small --models convnet,bert,llama --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-gpu-models-")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import stenograph  # noqa: E402

MODELS = ["bert", "llama", "vit", "resnet50", "convnet"]
SETTINGS = ["bf16", "fp32", "train"]
MODES = ["default", "max-autotune-no-cudagraphs"]


class ConvNet(nn.Module):
    """Conv / BatchNorm / ReLU with a residual and a linear head: ResNet in miniature."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
        )
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = torch.relu(x + self.block(x))
        return self.head(x.mean((2, 3)))


class T5EncoderDecoder(nn.Module):
    """T5Model called with the decoder's ids by name (its second positional parameter is the
    attention mask). Defined at module level: a warm process finds the classes a guard names by
    module and qualified name, and a class local to a function is not stored."""

    def __init__(self, t5: nn.Module) -> None:
        super().__init__()
        self.t5 = t5

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> Any:
        return self.t5(input_ids=input_ids, decoder_input_ids=decoder_input_ids)


@dataclass
class Case:
    model: nn.Module
    inputs: tuple
    description: str


def build(name: str, small: bool, device: str) -> Case:
    """The model `name` with random weights, and its input; raises ImportError without its package."""
    torch.manual_seed(0)
    if name == "bert":
        from transformers import BertConfig, BertModel

        if small:
            cfg = BertConfig(
                num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=1000
            )
            batch, seq = 2, 16
        else:
            cfg, batch, seq = BertConfig(), 8, 256
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
        return Case(BertModel(cfg), (ids,), f"HF BERT {cfg.num_hidden_layers}x{cfg.hidden_size}, {batch}x{seq}")
    if name == "llama":
        from transformers import LlamaConfig, LlamaModel

        if small:
            cfg = LlamaConfig(
                num_hidden_layers=2,
                hidden_size=64,
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=4,
                vocab_size=1000,
            )
            batch, seq = 2, 16
        else:
            cfg = LlamaConfig(
                num_hidden_layers=4,
                hidden_size=1024,
                intermediate_size=2816,
                num_attention_heads=16,
                num_key_value_heads=16,
                vocab_size=32000,
            )
            batch, seq = 4, 512
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
        return Case(LlamaModel(cfg), (ids,), f"HF Llama {cfg.num_hidden_layers}x{cfg.hidden_size}, {batch}x{seq}")
    if name == "vit":
        import timm

        if small:
            model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, depth=2)
            batch, size = 2, 32
        else:
            model = timm.create_model("vit_base_patch16_224", pretrained=False)
            batch, size = 16, 224
        x = torch.randn(batch, 3, size, size, device=device)
        return Case(model, (x,), f"timm ViT {'tiny/2 layers' if small else 'B/16'}, batch {batch}, {size}px")
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet18() if small else torchvision.models.resnet50()
        batch, size = (2, 32) if small else (32, 224)
        x = torch.randn(batch, 3, size, size, device=device)
        return Case(model, (x,), f"torchvision {'ResNet-18' if small else 'ResNet-50'}, batch {batch}, {size}px")
    if name == "convnet":
        width, batch, size = (16, 2, 16) if small else (64, 32, 56)
        x = torch.randn(batch, 3, size, size, device=device)
        return Case(ConvNet(width), (x,), f"conv net width {width}, batch {batch}, {size}px")
    raise ValueError(f"unknown model {name!r}")


def first_tensor(out: Any) -> torch.Tensor:
    """The main output of a model: a tensor, or the first field of an HF ModelOutput / tuple."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


def make_step(fn: Callable, case: Case, setting: str) -> Callable[[], Any]:
    """One call of `fn` in `setting`: inference under no_grad, or a forward + backward."""
    inputs = case.inputs
    if setting != "train":

        def infer() -> Any:
            with torch.no_grad():
                return fn(*inputs)

        return infer
    params = [p for p in case.model.parameters() if p.requires_grad]

    def train_step() -> Any:
        for p in params:
            p.grad = None
        loss = first_tensor(fn(*inputs)).float().pow(2).mean()
        loss.backward()
        return loss

    return train_step


class GraphCounter:
    """Counts the graphs handed to Inductor (both compilers import compile_fx when they call it)."""

    def __init__(self) -> None:
        self.count = 0

    @contextlib.contextmanager
    def counting(self):
        import torch._inductor.compile_fx as module

        original = module.compile_fx

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(*args, **kwargs)

        module.compile_fx = counted
        try:
            yield self
        finally:
            module.compile_fx = original


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed_first_call(step: Callable[[], Any], device: str) -> tuple[float, int]:
    counter = GraphCounter()
    sync(device)
    start = time.perf_counter()
    with counter.counting():
        step()
    sync(device)
    return time.perf_counter() - start, counter.count


def rounds_median(steps: dict[str, Callable[[], Any]], device: str, rounds: int, iters: int) -> dict[str, float]:
    """Median over interleaved rounds (order rotating) of per-call ms."""
    samples: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            step = steps[name]
            sync(device)
            start = time.perf_counter()
            for _ in range(iters):
                step()
            sync(device)
            samples[name].append((time.perf_counter() - start) / iters * 1e3)
    return {name: statistics.median(s) for name, s in samples.items()}


def host_us(step: Callable[[], Any], device: str, calls: int = 20) -> float:
    """Median host time of one call, from call to return, starting with an idle device."""
    times = []
    for _ in range(calls):
        sync(device)
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e6)
    sync(device)
    return statistics.median(times)


def profile(step: Callable[[], Any], device: str, calls: int = 10) -> dict[str, Any]:
    """Kernels and GPU microseconds per call (torch.profiler), and host microseconds per call."""
    result: dict[str, Any] = {"host_us": host_us(step, device)}
    if device != "cuda":
        return result
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        sync(device)
    kernels, gpu_us, names = 0, 0.0, {}
    for evt in prof.events():
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        kernels += 1
        gpu_us += evt.time_range.elapsed_us()
        names[evt.name] = names.get(evt.name, 0.0) + evt.time_range.elapsed_us() / calls
    result.update(kernels=kernels / calls, gpu_us=gpu_us / calls)
    result["top"] = sorted(((round(us, 1), name[:80]) for name, us in names.items()), reverse=True)[:8]
    return result


def stenograph_guard_us(compiled: Any, step: Callable[[], Any], calls: int = 50) -> float | None:
    """Time stenograph's guard function takes per call (wraps the cache entry's guard: private API)."""
    from stenograph.observability.inspection import _cache_of

    try:
        entries = _cache_of(compiled).entries
    except Exception:
        return None
    if len(entries) != 1:
        return None
    entry, spent = entries[0], [0.0]
    guard = entry.guard

    def timed_guard(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return guard(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start

    entry.guard = timed_guard
    try:
        for _ in range(calls):
            step()
    finally:
        entry.guard = guard
    return spent[0] / calls * 1e6


def without_guard(compiled: Any, step: Callable[[], Any]) -> Callable[[], Any] | None:
    """`step` with stenograph's guard function replaced by `True` for the call (diagnostic only:
    what stenograph would cost if its guards were free)."""
    from stenograph.observability.inspection import _cache_of

    entries = _cache_of(compiled).entries
    if len(entries) != 1:
        return None
    entry = entries[0]
    guard = entry.guard

    def unguarded() -> Any:
        entry.guard = lambda *args, **kwargs: True
        try:
            return step()
        finally:
            entry.guard = guard

    return unguarded


def compiler_overhead_us(case: Case, setting: str, device: str, calls: int = 100, rounds: int = 7) -> dict[str, float]:
    """Per-call host time of each compiler's own machinery (guards, argument passing, output
    rebuilding): both compile the model with a backend whose compiled function returns the first
    call's outputs, so no kernel runs after the first call. Median of `rounds`."""

    def replay_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        outputs = gm(*example_inputs)
        return lambda *args: outputs

    stenograph.reset()
    torch._dynamo.reset()
    steps = {
        "stenograph": make_step(stenograph.compile(case.model, backend=replay_backend), case, setting),
        "torch.compile": make_step(torch.compile(case.model, backend=replay_backend), case, setting),
    }
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for step in steps.values():
        step()
        step()
    sync(device)
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(calls):
                step()
            samples[name].append((time.perf_counter() - start) / calls * 1e6)
    stenograph.reset()
    torch._dynamo.reset()
    return {name: statistics.median(s) for name, s in samples.items()}


def max_diff(a: Any, b: Any) -> float:
    return float((first_tensor(a).float() - first_tensor(b).float()).abs().max())


def run_case(name: str, setting: str, mode: str, opts: argparse.Namespace) -> dict[str, Any] | None:
    try:
        case = build(name, opts.small, opts.device)
    except ImportError as exc:
        print(f"skip {name}: {exc}", flush=True)
        return None
    dtype = torch.bfloat16 if setting == "bf16" else torch.float32
    case.model.to(device=opts.device, dtype=dtype).train(setting == "train")
    case.inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in case.inputs)
    stenograph.reset()
    torch._dynamo.reset()
    compiled = {
        "stenograph": stenograph.compile(case.model, mode=mode),
        "torch.compile": torch.compile(case.model, mode=mode),
    }
    order = list(compiled) if opts.case_index % 2 == 0 else list(reversed(compiled))
    opts.case_index += 1
    steps = {"eager": make_step(case.model, case, setting)}
    first: dict[str, tuple[float, int]] = {}
    for compiler in order:
        steps[compiler] = make_step(compiled[compiler], case, setting)
        first[compiler] = timed_first_call(steps[compiler], opts.device)
    # outputs against eager, one inference call each (train: before any optimiser, same weights)
    with torch.no_grad():
        reference = case.model(*case.inputs)
        diffs = {c: max_diff(compiled[c](*case.inputs), reference) for c in compiled} if setting != "train" else {}
    if opts.no_guard_variant:
        unguarded = without_guard(compiled["stenograph"], steps["stenograph"])
        if unguarded is not None:
            steps["stenograph, no guard"] = unguarded
    for step in steps.values():
        for _ in range(opts.warmup):
            step()
    medians = rounds_median(steps, opts.device, opts.rounds, opts.iters)
    row: dict[str, Any] = {
        "model": name,
        "description": case.description,
        "setting": setting,
        "mode": mode,
        "eager_ms": medians["eager"],
        "tc_ms": medians["torch.compile"],
        "steno_ms": medians["stenograph"],
        "ratio": medians["torch.compile"] / medians["stenograph"],
        "graphs_tc": first["torch.compile"][1],
        "graphs_steno": first["stenograph"][1],
        "first_s_tc": first["torch.compile"][0],
        "first_s_steno": first["stenograph"][0],
        "compiled_first": order[0],
        "max_diff": diffs,
    }
    if "stenograph, no guard" in medians:
        row["steno_noguard_ms"] = medians["stenograph, no guard"]
    if opts.profile:
        row["profile"] = {c: profile(s, opts.device) for c, s in steps.items()}
        row["profile"]["stenograph"]["guard_us"] = stenograph_guard_us(compiled["stenograph"], steps["stenograph"])
    if opts.overhead and setting != "train":
        row["overhead_us"] = compiler_overhead_us(case, setting, opts.device)
    return row


def print_row(r: dict[str, Any]) -> None:
    print(
        f"{r['model']:9} {r['setting']:6} {r['mode']:27} {r['graphs_steno']:>3}/{r['graphs_tc']:<3} "
        f"{r['eager_ms']:9.3f} {r['tc_ms']:9.3f} {r['steno_ms']:9.3f} {r['ratio']:7.3f} "
        f"{r['first_s_steno']:7.1f}/{r['first_s_tc']:<7.1f}",
        flush=True,
    )
    if "steno_noguard_ms" in r:
        print(
            f"{'':10}stenograph without its guard: {r['steno_noguard_ms']:.3f} ms, "
            f"tc/st {r['tc_ms'] / r['steno_noguard_ms']:.3f}",
            flush=True,
        )
    if "overhead_us" in r:
        o = r["overhead_us"]
        print(
            f"{'':10}compiler's own per-call host time (no kernels): stenograph {o['stenograph']:.0f} us, "
            f"torch.compile {o['torch.compile']:.0f} us",
            flush=True,
        )
    for compiler, p in r.get("profile", {}).items():
        parts = [f"host {p['host_us']:.0f} us"]
        if "gpu_us" in p:
            parts.append(f"{p['kernels']:.0f} kernels, GPU {p['gpu_us']:.0f} us")
        if p.get("guard_us") is not None:
            parts.append(f"guard {p['guard_us']:.0f} us")
        print(f"{'':10}profile {compiler:14} " + ", ".join(parts), flush=True)


HEADER = (
    f"{'model':9} {'set':6} {'mode':27} {'graphs':>7} {'eager ms':>9} {'tc ms':>9} {'steno ms':>9} "
    f"{'tc/st':>7} {'first s st/tc':>15}"
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--models", default="bert,llama,vit,resnet50", help=f"comma-separated, from {MODELS}")
    p.add_argument("--settings", default="bf16,fp32,train", help=f"comma-separated, from {SETTINGS}")
    p.add_argument("--modes", default="default", help=f"comma-separated, from {MODES}")
    p.add_argument("--small", action="store_true", help="toy sizes (a CPU check of the script)")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--profile", action="store_true", help="kernels, GPU and host time per call")
    p.add_argument(
        "--no-guard-variant",
        action="store_true",
        help="also time stenograph with its guard function skipped (diagnostic)",
    )
    p.add_argument(
        "--overhead",
        action="store_true",
        help="inference: also time each compiler's per-call machinery with a backend that runs nothing",
    )
    p.add_argument("--json", default=None, help="append one JSON line per case to this file")
    opts = p.parse_args()
    opts.case_index = 0
    for value, valid in ((opts.models, MODELS), (opts.settings, SETTINGS), (opts.modes, MODES)):
        for item in value.split(","):
            if item not in valid:
                p.error(f"unknown {item!r}; valid: {', '.join(valid)}")
    torch.set_float32_matmul_precision("high")
    device_name = torch.cuda.get_device_name() if opts.device == "cuda" else platform.machine()
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, {opts.device} ({device_name}); "
        f"median of {opts.rounds} rounds x {opts.iters} calls",
        flush=True,
    )
    print("command: python " + " ".join(sys.argv), flush=True)
    print(HEADER, flush=True)
    rows = []
    for mode in opts.modes.split(","):
        for setting in opts.settings.split(","):
            for name in opts.models.split(","):
                try:
                    row = run_case(name, setting, mode, opts)
                except Exception as exc:  # one failing case must not lose the others
                    print(f"{name} {setting} {mode}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                    continue
                if row is None:
                    continue
                rows.append(row)
                print_row(row)
                if opts.json:
                    with open(opts.json, "a") as f:
                        f.write(json.dumps(row) + "\n")
    print("\n" + HEADER)
    for row in rows:
        print_row({k: v for k, v in row.items() if k != "profile"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
