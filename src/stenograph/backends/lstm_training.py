"""Compiling an LSTM for training: keep AOTAutograd off the inference-only oneDNN path.

torch's decomposition of `aten.lstm` (used when AOTAutograd or Inductor retrace a graph) picks
`mkldnn_rnn_layer` on CPU whenever the *input* does not require grad, and calls it with
`train=False`. When the weights (or the initial state) do require grad, as in any training step
on data that needs no gradient, autograd then saves the layer's workspace, which the inference
kernel never fills: the saved value is None and the compiled forward fails
("expected all tensors_saved_with_vc_check to be Tensors"). With oneDNN disabled while the backend
compiles, the decomposition takes its plain ATen path instead, whose backward is exact. The
compiled graph holds those ATen ops, so the setting is not needed when it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx

__all__ = ["lstm_training_decomposition"]


def _has_lstm(gm: torch.fx.GraphModule) -> bool:
    return any(node.op == "call_function" and getattr(node.target, "__name__", "") == "lstm" for node in gm.graph.nodes)


def _needs_grad(example_inputs: list[Any]) -> bool:
    # grad mode is not consulted: the graph itself may switch it on around the LSTM
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


@contextlib.contextmanager
def lstm_training_decomposition(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Iterator[None]:
    """Around a backend call: oneDNN off while compiling a graph with an LSTM that needs grad."""
    if not (_has_lstm(gm) and _needs_grad(example_inputs)):
        yield
        return
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)
