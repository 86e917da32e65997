"""Models with graph breaks for the benchmarks: what a warm start must restore beyond one graph
(the frames' resume functions and their entries)."""

from __future__ import annotations

import torch
from torch import nn


class BlocksWithBreaks(nn.Module):
    """Blocks with a data-dependent branch after every second one but the last: three graphs
    and two resume functions, under either compiler."""

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i % 2 == 1 and i < len(self.blocks) - 1 and x.abs().amax() > 1e6:  # a graph break
                x = x / 2
        return x
