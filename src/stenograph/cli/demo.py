"""`stenograph demo`: compiles the seed examples and a Transformer block on the CPU and shows what
stenograph captured — explain summaries, graphs, guards, transformed code, recompiles, eager vs
compiled timings — then writes the HTML report of everything it compiled."""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .. import api
from ..observability import progress
from ..observability.explain import explain
from ..observability.inspection import inspect
from ..report import html, recorder
from ..testing import CompileCounter


def _section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 72 - len(title)))


def _median_ms(fns: list[Callable], *args: Any, calls: int = 30) -> list[float]:
    """Median ms per call of each of `fns`, calls interleaved so machine noise hits all alike."""
    samples: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn(*args)
    for _ in range(calls):
        for fn, times in zip(fns, samples):
            start = time.perf_counter()
            fn(*args)
            times.append((time.perf_counter() - start) * 1e3)
    return [statistics.median(times) for times in samples]


def squared_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = (x - y) ** 2
    return z.sum()


def scaled(x: torch.Tensor, n: int) -> torch.Tensor:
    y = x * 2
    if n >= 0:
        return (n + 1) * y
    return y / n


def debug_print(x: torch.Tensor) -> torch.Tensor:
    x = x * 2
    print("  (debug_print runs its print between the graphs)")
    return torch.relu(x)


def data_dependent(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if y.sum().item() > 0:
        return x + y
    return x - y


class TransformerBlock(nn.Module):
    """Seed 001 section 10.3's block: self-attention and a feed-forward layer, each residual."""

    def __init__(self, d_model: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff(self.norm2(x))


def cpu_backend() -> str:
    """Inductor when a C++ compiler is on PATH (it generates C++ for the CPU), else eager."""
    compilers = [os.environ.get("CXX", ""), "g++", "c++", "clang++"]
    return "inductor" if any(c and shutil.which(c) for c in compilers) else "eager"


def _entries(compiled: Any) -> list:
    fn = getattr(compiled, "_compiled_forward", compiled)
    return list(fn.__stenograph_cache__.entries)


def main(backend: str = "auto", report_path: str = "stenograph-report.html") -> None:
    """Run the demo; `backend` is "auto" (inductor if possible), "inductor" or "eager"."""
    torch.manual_seed(0)
    chosen = cpu_backend() if backend == "auto" else backend
    already_recording = recorder.active() is not None
    rec = recorder.start(time_calls=True)
    rec.session.title = "stenograph demo"
    rec.session.command = f"stenograph demo --backend {backend}"
    status = progress.start_on_terminal()
    try:
        _run(chosen)
    finally:
        if status is not None:
            status.stop()
        if not already_recording:
            recorder.stop()
    _section("Report")
    written = html.write(rec.session, report_path)
    print(_relative(f"HTML report of every compilation above: {written}"))


def _run(backend: str) -> None:
    _section("1. A straight-line function becomes one graph")
    counter = CompileCounter()
    f = api.compile(squared_distance, backend=counter)
    x, y = torch.randn(10), torch.randn(10)
    print("result:", round(f(x, y).item(), 4), " eager:", round(squared_distance(x, y).item(), 4))
    print(f"graphs: {counter.frame_count}, ops: {counter.op_count}")
    entry = inspect(f).entries[0]
    print("graph code:\n" + _relative(entry.graph_code or ""))
    print("guards:\n" + entry.guard_source.rstrip())
    print("transformed code:\n" + entry.transformed_source.rstrip())

    _section("2. Python ints are specialised and guarded; a new value recompiles")
    counter = CompileCounter()
    g = api.compile(scaled, backend=counter)
    for n in (2, 2, 3, -2):
        same = torch.allclose(g(x, n), scaled(x, n))
        print(f"g(x, {n:2}) -> matches eager: {same}; graphs compiled so far: {counter.frame_count}")
    for reason in inspect(g).recompile_reasons.values():
        print("recompiled because:\n" + "\n".join(f"  - {r}" for r in reason))

    _section("3. Graph breaks, explained")
    print("explain(debug_print):")
    print(_indent(_relative(str(explain(debug_print)(x)))))
    print("explain(data_dependent):")
    print(_indent(_relative(str(explain(data_dependent)(x, y)))))

    _section(f"4. A Transformer block on the CPU: eager vs stenograph (backend={backend!r})")
    block = TransformerBlock().eval()
    inp = torch.randn(4, 64, 256)
    with torch.no_grad():
        summary = explain(block)(inp)
    print(
        f"Graph Count: {summary.graph_count}, Graph Break Count: {summary.graph_break_count}, "
        f"Op Count: {summary.op_count}, guards: {len(summary.out_guards)}"
    )
    compiled = api.compile(block, backend=backend)
    start = time.perf_counter()
    with torch.no_grad():
        out = compiled(inp)
    first_call = time.perf_counter() - start
    with torch.no_grad():
        torch.testing.assert_close(out, block(inp), rtol=1e-4, atol=1e-4)
        eager_ms, compiled_ms = _median_ms([block, compiled], inp)
    entry = _entries(compiled)[0]
    print(
        f"first call: {first_call:.2f} s (capture {entry.capture_seconds:.2f} s, "
        f"{backend} compile {entry.backend_seconds:.2f} s)"
    )
    print(
        f"eager {eager_ms:.2f} ms/call, stenograph({backend}) {compiled_ms:.2f} ms/call, "
        f"speedup {eager_ms / compiled_ms:.2f}x"
    )


def _relative(text: str) -> str:
    """`text` with the paths under the current directory relative to it: run from a checkout, the
    demo's sources read `src/stenograph/cli/demo.py` and its report `stenograph-report.html`.
    Paths elsewhere (an installed package, a report written outside) stay absolute."""
    cwd = os.getcwd()
    if cwd == os.sep:
        return text
    return text.replace(cwd.rstrip(os.sep) + os.sep, "")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


if __name__ == "__main__":
    main()
