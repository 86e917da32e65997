"""TorchFunctionModes: graphs, first-call (capture) time and steady per-call time of models run
under a mode with its own `__torch_function__`, stenograph beside torch.compile and eager.

    python benchmarks/function_modes.py [--backend eager|aot_eager] [--calls 100]

Two modes: one counting every call it is given (the count read and written by the handler, so
each call is a guard check and a replayed write), and one rescaling `torch.nn.functional.linear`'s
output (a handler that computes). Each row: graphs handed to the backend, the first call's seconds,
the median of `--calls` later calls in microseconds, how many calls the counting mode saw on
the first call (eager's count is the one to match), and whether the result equals eager's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch._dynamo
from nested_breaks import counting_backend
from torch import nn
from torch.overrides import TorchFunctionMode

import stenograph
from stenograph.testing import CompileCounter


class Counting(TorchFunctionMode):
    def __init__(self) -> None:
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


class ScaledLinear(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 0.5 if func is torch.nn.functional.linear else out


class Mlp(nn.Module):
    def __init__(self, width: int = 64, depth: int = 4) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(self.layers(x) + x)


def _tiny_bert():
    try:
        import transformers
    except ImportError:
        return None
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=100
    )
    model = transformers.BertModel(config).eval()
    return lambda tokens: model(tokens).last_hidden_state


def _timed(fn, inputs, mode_class, calls: int) -> tuple[float, float, int]:
    """(first call's seconds, median later call's microseconds, calls the mode saw on one call)."""
    with mode_class() as mode:
        start = time.perf_counter()
        fn(*inputs)
        first = time.perf_counter() - start
    seen = getattr(mode, "calls", -1)
    times = []
    for _ in range(calls):
        with mode_class():
            start = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - start)
    return first, statistics.median(times) * 1e6, seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="eager", choices=["eager", "aot_eager"])
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    cases = {"MLP (4 layers)": (Mlp().eval(), (torch.randn(16, 64),))}
    bert = _tiny_bert()
    if bert is not None:
        cases["HF BERT (2 layers)"] = (bert, (torch.randint(0, 100, (2, 16)),))

    print(f"backend {args.backend}, torch {torch.__version__}, median of {args.calls} calls after the first")
    header = f"{'case':20} {'mode':13} {'compiler':14} {'graphs':>6} {'first s':>8} {'per call us':>12}"
    print(f"{header} {'mode calls':>10} result")
    with torch.no_grad():
        for name, (fn, inputs) in cases.items():
            for mode_class in (Counting, ScaledLinear):
                with mode_class():
                    expected = fn(*inputs)
                _, eager_us, eager_seen = _timed(fn, inputs, mode_class, args.calls)
                row = f"{name:20} {mode_class.__name__:13}"
                shown = eager_seen if eager_seen >= 0 else ""
                print(f"{row} {'eager':14} {'':>6} {'':>8} {eager_us:12.1f} {shown:>10}")
                for label, reset, compile_fn in [
                    ("stenograph", stenograph.reset, stenograph.compile),
                    ("torch.compile", torch._dynamo.reset, torch.compile),
                ]:
                    reset()
                    counter = CompileCounter()
                    compiled = compile_fn(fn, backend=counting_backend(counter, args.backend))
                    first, per_call, seen = _timed(compiled, inputs, mode_class, args.calls)
                    with mode_class():
                        same = torch.allclose(compiled(*inputs), expected, atol=1e-5)
                    shown = seen if seen >= 0 else ""
                    graphs = counter.frame_count
                    verdict = "same as eager" if same else "DIFFERS from eager"
                    print(f"{row} {label:14} {graphs:6d} {first:8.3f} {per_call:12.1f} {shown:>10} {verdict}")


if __name__ == "__main__":
    main()
