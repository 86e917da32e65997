"""Models and expectations the DDP tests share (in-process with a stand-in DDP, and on 2 processes).

`TinyTransformer` registers its parameter-holding modules in the order its forward uses them, each
used by one op, so the pieces a bucket cap gives follow from the modules' sizes alone
(`expected_pieces`), as DDP buckets them: the last layers first.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Block(nn.Module):
    """A pre-norm Transformer block: causal self-attention and an MLP, each with a residual."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class _Stack(nn.Module):
    """Blocks between an input and an output projection."""

    def __init__(self, d_in: int, d: int, d_out: int, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.embed = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(d, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class TinyTransformer(_Stack):
    def __init__(self, d_in: int = 8, d: int = 16, heads: int = 2, layers: int = 2, d_out: int = 4) -> None:
        super().__init__(d_in, d, d_out, [Block(d, heads) for _ in range(layers)])


class EncoderStack(_Stack):
    """A few `nn.TransformerEncoderLayer`s."""

    def __init__(self, d_in: int = 8, d: int = 16, layers: int = 3, d_out: int = 4) -> None:
        layer = nn.TransformerEncoderLayer
        blocks = [layer(d, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True) for _ in range(layers)]
        super().__init__(d_in, d, d_out, blocks)


def module_bytes(model: nn.Module, counted: set[int] | None = None) -> list[int]:
    """Bytes of the gradient-needing parameters of each parameter-holding module, in order."""
    sizes = []
    for module in model.modules():
        own = [p for p in module.parameters(recurse=False) if p.requires_grad and (counted is None or id(p) in counted)]
        if own:
            sizes.append(sum(p.numel() * p.element_size() for p in own))
    return sizes


def expected_pieces(sizes: list[int], cap: int, first_cap: int | None = None) -> int:
    """Buckets DDP makes of these sizes (forward order): walked from the end, a bucket closes once
    it holds `cap` bytes (the first one `first_cap`)."""
    first_cap = cap if first_cap is None else first_cap
    count, held = 1, 0
    for size in reversed(sizes):
        if held >= (first_cap if count == 1 else cap):
            count, held = count + 1, 0
        held += size
    return count


def stand_in_ddp(
    module: nn.Module, cap: int, first_cap: int | None = None, ignore: tuple[str, ...] = ()
) -> types.SimpleNamespace:
    """What the split reads of a DistributedDataParallel, for tests in one process."""
    ddp = types.SimpleNamespace(module=module, bucket_bytes_cap=cap, parameters_to_ignore=set(ignore))
    if first_cap is not None:
        ddp._bucket_config = types.SimpleNamespace(first_bucket_bytes_cap=first_cap)
    return ddp


@contextlib.contextmanager
def inside_ddp(ddp: object) -> Iterator[None]:
    """Run as DDP runs its module: with `ddp` marked as the active DDP module."""
    with DistributedDataParallel._inside_ddp_forward(ddp):
        yield


def compiled_function_nodes(loss: torch.Tensor) -> int:
    """How many compiled autograd functions (one per piece compiled by AOTAutograd) the backward
    of `loss` runs."""
    seen, todo, count = set(), [loss.grad_fn], 0
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        count += "CompiledFunction" in fn.name()
        todo.extend(next_fn for next_fn, _ in fn.next_functions)
    return count
