"""Tensor methods whose effect lies outside the graph: they run eagerly at a graph break.

A graph describes values. These methods change what a tensor *is* to autograd or to its storage
(`requires_grad_`, `retain_grad`, `detach_`, `resize_`, `set_`, hooks): AOTAutograd functionalises
them away or refuses them, so the effect would be lost on the user's real tensor (a leaf that never
gets a gradient, an `h.grad` that stays None). Running them between graphs keeps eager semantics.
In-place view ops (`t_`, `transpose_`, `unsqueeze_`) are not listed: AOTAutograd replays their
metadata change on graph inputs.
"""

from __future__ import annotations

from ..errors import BreakKind, Unsupported

__all__ = ["EFFECT_METHODS", "refuse_effect"]

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
