"""Rewriting a guard function's checks into calls of the native checks (`native_checks.cpp`).

Two rewrites, each answering exactly as the Python checks it replaces:

- a tensor check (`GuardSet.tensor_match`) of a `torch.Tensor` or `nn.Parameter` becomes one call
  of a `TensorCheck` (exact type, dtype, device, sizes and strides but those left to the shape
  guards, requires_grad). Tensors of other types stay Python: a subclass may answer `.dtype` or
  `.shape` in Python code of its own.
- for an nn.Module reached by a source whose type is checked: that type check, and the checks on
  the module's own attributes saying that an attribute is empty (`not m._forward_hooks`), that a
  key is not in its `__dict__` (`'forward' not in m.__dict__`), or that an attribute is a given
  object (`m.training is True`), become one call of a `ModuleCheck`, in the type check's place.
  Only checks that exist are fused; none is added.

This module finds the replacements and makes the native objects; `GuardSet.build` puts them in
place (templates are written by the guard set only).

Guard functions answer True or False as a whole (a check that raises counts as failed), and
these checks have no side effects, so fusing checks of different depths into the type check's
place keeps the answer. Runs once per guard function, when it is built; the explainer
(`GuardSet.build_explainer`) keeps the Python checks, whose texts it reports.
"""

from __future__ import annotations

import types
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .sources import AttrSource, Source

if TYPE_CHECKING:
    from .guard_set import Check

# tensor types whose metadata Python reads from C++ (no Python getters of their own)
PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)

# the kinds of module-attribute check a ModuleCheck makes
_FUSED_KINDS = ("empty", "absent", "is")


@dataclass
class Replacement:
    """A native check (`native`, bound in the guard function as `___<hint><n>`) taking the place
    of one check and making `absorbed` checks redundant; `text` describes all of them."""

    native: Any
    hint: str
    text: str
    absorbed: list[Check] = field(default_factory=list)


def replacements(checks: list[Check], extension: types.ModuleType, bindings: dict[str, Any]) -> dict[int, Replacement]:
    """id(check) -> its native replacement, for the checks of `checks` that have one.
    `bindings` are the names the checks' templates use (a tensor check's Python form, kept for
    what only Python can answer, reads them)."""
    found = _fused_module_checks(checks, extension)
    namespace = dict(bindings)  # the Python forms' globals (eval adds __builtins__ to it)
    for check in checks:
        if check.kind == "tensor" and check.detail.cls in PLAIN_TENSOR_TYPES:
            found[id(check)] = Replacement(_tensor_check(check, extension, namespace), "tensor", check.text)
    return found


def _tensor_check(check: Check, extension: types.ModuleType, namespace: dict[str, Any]) -> Any:
    facts = check.detail
    python_form = eval(f"lambda ___value: {check.template.replace('{v}', '___value')}", namespace)  # noqa: S307
    return extension.TensorCheck(
        facts.cls, facts.dtype, facts.device, facts.requires_grad, facts.sizes, facts.strides, python_form
    )


def _fused_module_checks(checks: list[Check], extension: types.ModuleType) -> dict[int, Replacement]:
    """A replacement for each module type check with attribute checks to fuse."""
    on_attributes: dict[Source, list[Check]] = defaultdict(list)
    for check in checks:
        if check.kind in _FUSED_KINDS and isinstance(check.source, AttrSource) and check.other is None:
            on_dict = check.source.attr == "__dict__"
            if on_dict == (check.kind == "absent"):
                on_attributes[check.source.parent].append(check)
    fused: dict[int, Replacement] = {}
    for check in checks:
        if check.kind != "type" or not issubclass(check.detail, torch.nn.Module):
            continue
        parts = on_attributes.get(check.source)
        if not parts:
            continue
        native = extension.ModuleCheck(
            check.detail,
            tuple(c.source.attr for c in parts if c.kind == "empty"),
            tuple(c.detail for c in parts if c.kind == "absent"),
            tuple((c.source.attr, c.detail) for c in parts if c.kind == "is"),
        )
        fused[id(check)] = Replacement(native, "module", "; ".join(c.text for c in (check, *parts)), parts)
    return fused
