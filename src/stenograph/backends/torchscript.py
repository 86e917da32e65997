"""The TorchScript backends `ts` and `aot_ts`, as torch.compile has them (torch's behaviour is
the contract).

TorchScript is deprecated in torch (in 2.13 `torch.jit.script` warns with a
`DeprecationWarning`), but torch 2.13 still registers and runs both backends, so stenograph does
the same rather than refuse names a port's tests use: `ts` scripts the captured graph, `aot_ts` scripts the
forward and backward graphs AOTAutograd makes of it. Both warn as `torch.jit.script` does; use
`inductor` (or `aot_eager` to debug) for new code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from .aot_eager import compile_with_aot

__all__ = ["aot_ts", "ts"]


def ts(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """The captured graph scripted by `torch.jit.script`."""
    return torch.jit.script(gm)


def aot_ts(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """AOTAutograd (default partitioner) with graphs compiled by functorch's `ts_compile` (a boxed
    compiler)."""
    # Imported here: AOTAutograd's compilers are slow to import (see aot_eager.compile_with_aot).
    from torch._functorch.compilers import ts_compile

    return compile_with_aot(gm, example_inputs, ts_compile)
