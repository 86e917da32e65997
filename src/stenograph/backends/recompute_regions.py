"""Compiling a graph with activation-checkpoint regions: keep AOTAutograd's cache out of it.

A checkpoint region is marked only in its nodes' metadata (`"recompute"`, `"ac_graph_id"`, see
variables/checkpoint.py), which the partitioners read. AOTAutograd's cache keys a graph by its
code and leaves node metadata out, so the same graph without checkpoint, compiled before (in this
process or an earlier one: the cache is on disk), would be served for it, keeping every
activation. torch.compile's graphs differ in code there (a `tag_activation_checkpoint` node). So
such a graph is compiled with that cache off (neither read nor written); Inductor's own cache,
keyed by the partitioned forward and backward graphs, still serves it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch.fx

__all__ = ["uncached_recompute_regions"]


def _has_recompute_region(gm: torch.fx.GraphModule) -> bool:
    return any("recompute" in node.meta for node in gm.graph.nodes)


@contextlib.contextmanager
def uncached_recompute_regions(gm: torch.fx.GraphModule) -> Iterator[None]:
    """Around a backend call: AOTAutograd's cache off for a graph with checkpoint regions."""
    if not _has_recompute_region(gm):
        yield
        return
    # AOTAutograd's settings, loaded only for such graphs (as AOTAutograd is, by the backends using it)
    import torch._functorch.config as functorch_config

    with functorch_config.patch(enable_autograd_cache=False):
        yield
