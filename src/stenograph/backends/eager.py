"""The `eager` backend: run the captured graph as it is.

Why it exists: it isolates capture from compilation. If a program misbehaves under `eager`, the
bug is in graph capture (guards, graph breaks, side effects), not in a compiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch.fx

__all__ = ["eager"]


def eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Return the graph's own `forward`; nothing is compiled."""
    return gm.forward
