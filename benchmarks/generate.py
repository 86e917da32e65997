"""LLM decoding: HF `generate()` with a compiled forward, eager vs torch.compile vs stenograph (issue 30).

The recipe users follow (HF docs, gpt-fast): a static KV cache (or the default dynamic one) and
`model.forward = compile(model.forward, mode=...)`. Decoders from configs with random weights (no
download): HF Llama (8 layers, width 1024, GQA 16/4 heads) and Qwen2 of the same shape; `--small`
shrinks them to a toy size. Per (family, mode), one process holds the model and runs, in turn,
eager, stenograph and torch.compile, each compiler with empty Inductor caches (stenograph first:
what one process still shares can only favour torch.compile). The first `generate()` is timed
(capture and compile included), then `--rounds` more, whose median gives tokens/s (new tokens x
batch / seconds). The table also gives the graphs each compiler compiled (a graph per token would
show here), and whether the tokens equal eager's (greedy; in float32 they must be identical).
`disable_compile=True` keeps transformers from wrapping the model in torch.compile itself (it does
so on CUDA with a static cache), so eager is eager and each compiler runs alone.

`--dry-run` is the CPU check CI can afford: tiny models, 4 new tokens, one round, and the
`aot_eager` backend standing in for Inductor in both compilers (no C++ compile); it still runs the
whole path (static and dynamic caches, prefill and decode graphs, token comparison).

    python benchmarks/generate.py --device cuda --dtype bf16 --families llama,qwen2 \
        --modes default,reduce-overhead,max-autotune --cache static
    python benchmarks/generate.py --dry-run
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

import stenograph
from stenograph import events

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def build(family: str, small: bool, device: str, dtype: torch.dtype) -> torch.nn.Module:
    import transformers

    if small:
        shape = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
        shape.update(num_key_value_heads=2, vocab_size=96)
    else:
        shape = dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16)
        shape.update(num_key_value_heads=4, vocab_size=32000)
    config_cls, model_cls = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    }[family]
    torch.manual_seed(0)
    config = config_cls(max_position_embeddings=1024, pad_token_id=0, **shape)
    return model_cls(config).to(device=device, dtype=dtype).eval()


@dataclass
class Result:
    compiler: str
    first_s: float
    tokens_per_s: float
    graphs: int | str
    same_tokens: bool | str


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _generate(model, prompt: torch.Tensor, args) -> torch.Tensor:
    # disable_compile: on CUDA with a static cache, transformers would otherwise wrap the model's
    # __call__ in torch.compile itself, in every column, eager's included
    options = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0)
    options["disable_compile"] = True
    if args.cache == "static":
        options["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(prompt, **options)


def _time_generates(model, prompt, args) -> tuple[float, float, torch.Tensor]:
    """Seconds of the first generate(), tokens/s of the median later one, and the tokens."""
    _sync(args.device)
    start = time.perf_counter()
    tokens = _generate(model, prompt, args)
    _sync(args.device)
    first = time.perf_counter() - start
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        _generate(model, prompt, args)
        _sync(args.device)
        times.append(time.perf_counter() - start)
    return first, args.new_tokens * prompt.shape[0] / statistics.median(times), tokens


# stenograph's compiles so far (CompileStarted events)
_compiles: list = []
events.subscribe(lambda e: _compiles.append(e) if isinstance(e, events.CompileStarted) else None)


def _stenograph_forward(forward: Callable, backend: str, mode: str | None) -> tuple[Callable, Callable[[], int]]:
    stenograph.reset()
    before = len(_compiles)
    return stenograph.compile(forward, backend=backend, mode=mode), lambda: len(_compiles) - before


def _torch_forward(forward: Callable, backend: str, mode: str | None) -> tuple[Callable, Callable[[], int]]:
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    return torch.compile(forward, backend=backend, mode=mode), lambda: torch._dynamo.utils.counters["stats"][
        "unique_graphs"
    ]


def run_mode(family: str, mode: str, args) -> list[Result]:
    model = build(family, args.small, args.device, DTYPES[args.dtype])
    prompt = torch.randint(3, model.config.vocab_size, (args.batch, args.prompt), device=args.device)
    backend = "aot_eager" if args.dry_run else "inductor"
    inductor_mode = None if args.dry_run or mode == "default" else mode
    first, rate, expected = _time_generates(model, prompt, args)
    results = [Result("eager", first, rate, "-", "-")]
    eager_forward = model.forward
    for name, wrap in (("stenograph", _stenograph_forward), ("torch.compile", _torch_forward)):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"generate-{name}-")
        try:
            model.forward, graphs = wrap(eager_forward, backend, inductor_mode)
            first, rate, tokens = _time_generates(model, prompt, args)
            results.append(Result(name, first, rate, graphs(), bool(torch.equal(tokens, expected))))
        except Exception as error:  # a compiler failing is a result of the benchmark, not its end
            traceback.print_exc()
            message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:60]
            results.append(Result(name, float("nan"), float("nan"), "error", message))
        finally:
            model.forward = eager_forward
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    parser.add_argument("--families", default="llama,qwen2")
    parser.add_argument("--modes", default="default,reduce-overhead,max-autotune")
    parser.add_argument("--cache", default="static", choices=["static", "dynamic"])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="toy-sized models")
    parser.add_argument("--dry-run", action="store_true", help="CPU check: tiny, aot_eager, 4 tokens")
    args = parser.parse_args()
    if args.dry_run:
        args.device, args.dtype, args.small, args.new_tokens, args.rounds = "cpu", "fp32", True, 4, 1
        args.modes, args.prompt = "default", 6
    import transformers

    print(
        f"# Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__},"
        f" {args.device} ({torch.cuda.get_device_name() if args.device == 'cuda' else platform.processor() or 'cpu'}),"
        f" {args.dtype}, {args.cache} cache, batch {args.batch}, prompt {args.prompt}, {args.new_tokens} new tokens"
    )
    print("| family | mode | compiler | first generate s | tokens/s | x eager | graphs | tokens = eager |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    for family in args.families.split(","):
        for mode in args.modes.split(","):
            results = run_mode(family, mode, args)
            eager_rate = results[0].tokens_per_s
            for r in results:
                print(
                    f"| {family} | {mode} | {r.compiler} | {r.first_s:.2f} | {r.tokens_per_s:.1f} |"
                    f" {r.tokens_per_s / eager_rate:.2f} | {r.graphs} | {r.same_tokens} |"
                )
                failed |= r.compiler == "stenograph" and r.same_tokens is not True and args.dtype == "fp32"
            sys.stdout.flush()
    if failed:
        sys.exit("stenograph's tokens differ from eager's in float32")


if __name__ == "__main__":
    main()
