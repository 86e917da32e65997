"""`config.only_allow_pt2_compliant_ops`: a `torch.ops` operator without the `pt2_compliant_tag`
is a graph break, as in torch.compile.

The tag is the operator author's promise that the op works with fake tensors, functionalization
and AOTAutograd; with the setting on, a trace records only operators that make it. An operator
packet (`torch.ops.mylib.bar`) is judged by the overload its arguments select, which is resolved
from their fake values as the call would resolve it.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import config
from ..errors import Unsupported

_HINT = (
    "with config.only_allow_pt2_compliant_ops every operator without the 'pt2_compliant_tag' runs "
    "eagerly; see https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html to mark one"
)


def check_compliant(target: Any, fake_args: list[Any], fake_kwargs: dict[str, Any]) -> None:
    """Raise `Unsupported` (a graph break) for a call of a `torch.ops` operator that is not PT2
    compliant while the setting is on; nothing for other targets."""
    if not config.only_allow_pt2_compliant_ops:
        return
    if isinstance(target, torch._ops.OpOverload):
        if torch.Tag.pt2_compliant_tag not in target.tags:
            raise Unsupported(f"the operator torch.ops.{target} is not PT2 compliant", hint=_HINT)
        return
    if not isinstance(target, torch._ops.OpOverloadPacket):
        return
    overloads = target.overloads()
    if len(overloads) == 1:
        name = overloads[0]
    else:
        try:
            name = torch._C._jit_resolve_packet(target._qualified_op_name, *fake_args, **fake_kwargs)
        except RuntimeError as e:
            raise Unsupported(f"torch.ops.{target} failed to resolve an overload for its arguments: {e}") from e
    if torch.Tag.pt2_compliant_tag not in getattr(target, name).tags:
        raise Unsupported(
            f"the operator torch.ops.{target} resolves to the overload {name!r}, which is not PT2 compliant",
            hint=_HINT,
        )
