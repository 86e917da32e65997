"""Tensor methods whose effect lies outside the graph: they run eagerly at a graph break.

A graph describes values. These methods change what a tensor *is* to autograd or to its storage
(`requires_grad_`, `retain_grad`, `detach_`, `resize_`, `set_`, hooks): AOTAutograd functionalises
them away or refuses them, so the effect would be lost on the user's real tensor (a leaf that never
gets a gradient, an `h.grad` that stays None). Running them between graphs keeps eager semantics.
In-place view ops (`t_`, `transpose_`, `unsqueeze_`: torch tags them `inplace_view`) break the
graph when the tensor was read from the frame, as torch.compile's do: the input's sizes change
under the trace, and the guards on its shape would describe the changed tensor. On a tensor made
in the frame they stay in the graph. A call that leaves the tensor as it is (`requires_grad_(True)`
on one that already requires grad) is no effect and breaks nothing.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..errors import BreakKind, Unsupported
from .base import Variable
from .constants import ConstantVariable

__all__ = ["EFFECT_METHODS", "changes_nothing", "changes_input_metadata", "refuse_effect"]

#: method name -> why it cannot be recorded in a graph
EFFECT_METHODS: dict[str, str] = {
    "requires_grad_": "changes whether autograd records the tensor",
    "retain_grad": "asks autograd to keep a non-leaf's .grad",
    "detach_": "cuts the tensor out of the autograd graph in place",
    "register_hook": "installs a Python autograd hook",
    "register_post_accumulate_grad_hook": "installs a Python autograd hook",
    "backward": "runs autograd",
    "resize_": "changes the tensor's storage in place",
    "resize_as_": "changes the tensor's storage in place",
    "set_": "swaps the tensor's storage",
    "as_strided_": "rewrites the tensor's sizes and strides in place",
    "share_memory_": "moves the storage to shared memory",
    "sparse_resize_": "changes the tensor's storage in place",
    "sparse_resize_and_clear_": "changes the tensor's storage in place",
}


@functools.cache
def changes_input_metadata(name: str) -> bool:
    """Whether `Tensor.name()` changes the tensor's sizes or strides in place (`unsqueeze_`):
    torch tags its operator `inplace_view`."""
    packet = getattr(torch.ops.aten, name, None) if name.endswith("_") else None
    overloads = packet.overloads() if packet is not None and hasattr(packet, "overloads") else []
    return bool(overloads) and torch.Tag.inplace_view in getattr(packet, overloads[0]).tags


def changes_nothing(name: str, fake: Any, args: list[Variable], kwargs: dict[str, Variable]) -> bool:
    """Whether the method call leaves the tensor (`fake` as traced) as it is: `requires_grad_(flag)`
    with a constant `flag` (True by default) equal to its `requires_grad`, which the trace's guards
    (the inputs' flags, grad mode) fix. HuggingFace's gradient checkpointing marks an output that
    already requires grad this way, from a forward hook."""
    if name != "requires_grad_" or len(args) + len(kwargs) > 1 or set(kwargs) - {"requires_grad"}:
        return False
    given = [*args, *kwargs.values()]
    if not given:
        flag = True
    elif isinstance(given[0], ConstantVariable):
        flag = given[0].value
    else:
        return False
    return isinstance(flag, bool) and flag == fake.requires_grad


def refuse_effect(name: str, describe: str, twice_differentiable: bool = False) -> None:
    """Raise the graph break for `describe` (e.g. "Tensor.retain_grad()") when `name` is listed;
    `twice_differentiable`: it is a backward with create_graph=True (see double_backward.py)."""
    why = EFFECT_METHODS.get(name)
    if why is not None:
        reason = Unsupported(
            f"{describe} {why}; it runs eagerly between graphs",
            hint="move it out of the compiled function to keep one graph",
            kind=BreakKind.TWICE_DIFFERENTIABLE if twice_differentiable else BreakKind.UNSUPPORTED,
        )
        raise reason
