"""`stenograph demo`: compiles the seed examples and a small Transformer block on the CPU and
shows what stenograph captured — graphs, guards, transformed code, recompiles and timings."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from . import api
from .testing import CompileCounter


def _section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 72 - len(title)))


def _entries(compiled: Any) -> list:
    fn = getattr(compiled, "__func__", compiled)
    fn = getattr(fn, "_compiled_forward", fn)
    return list(fn.__stenograph_cache__.entries)


def _median_ms(fn: Callable, *args: Any, calls: int = 20) -> float:
    fn(*args)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def squared_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = (x - y) ** 2
    return z.sum()


def scaled(x: torch.Tensor, n: int) -> torch.Tensor:
    y = x * 2
    if n >= 0:
        return (n + 1) * y
    return y / n


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


def main() -> None:
    torch.manual_seed(0)
    _section("1. A straight-line function becomes one graph")
    counter = CompileCounter()
    f = api.compile(squared_distance, backend=counter)
    x, y = torch.randn(10), torch.randn(10)
    print("result:", f(x, y).item(), " eager:", squared_distance(x, y).item())
    print(f"graphs: {counter.frame_count}, ops: {counter.op_count}")
    entry = _entries(f)[0]
    print("graph code:" + entry.graph.code)
    print("guards:\n" + entry.guard_source)
    print("transformed code:\n" + entry.transformed_source)

    _section("2. Python ints are specialised and guarded")
    counter = CompileCounter()
    g = api.compile(scaled, backend=counter)
    for n in (2, 2, 3, -2):
        out = g(x, n)
        same = torch.allclose(out, scaled(x, n))
        print(f"g(x, {n:2}) -> matches eager: {same}; graphs compiled so far: {counter.frame_count}")
    for e in _entries(g):
        print(f"  entry guarded on: {[c.text for c in e.guard_set.ordered() if 'n' in c.text.split()[0]]}")

    _section("3. A Transformer block, eager vs compiled (CPU)")
    block = TransformerBlock().eval()
    inp = torch.randn(4, 64, 256)
    counter = CompileCounter()
    compiled = api.compile(block, backend=counter)
    start = time.perf_counter()
    with torch.no_grad():
        out = compiled(inp)
    first_call = time.perf_counter() - start
    with torch.no_grad():
        torch.testing.assert_close(out, block(inp))
        eager_ms = _median_ms(block, inp)
        compiled_ms = _median_ms(compiled, inp)
    print(f"graphs: {counter.frame_count}, ops: {counter.op_count}, first call (capture): {first_call * 1e3:.1f} ms")
    print(f"eager {eager_ms:.2f} ms/call, stenograph(backend=eager) {compiled_ms:.2f} ms/call")
    print(f"capture time {_entries(compiled)[0].capture_seconds * 1e3:.1f} ms")
    print("\nDone. See docs/user-guide.md for more.")


if __name__ == "__main__":
    main()
