"""Rewriting a guard function's checks into calls of the native checks (`native_checks.cpp`).

Three rewrites, each answering exactly as the Python checks it replaces:

- a tensor check (`GuardSet.tensor_match`) of a `torch.Tensor` or `nn.Parameter` becomes one call
  of a `TensorCheck` (exact type, dtype, device, sizes and strides but those left to the shape
  guards, requires_grad). Tensors of other types stay Python: a subclass may answer `.dtype` or
  `.shape` in Python code of its own.
- for an nn.Module reached by a source whose type is checked: that type check and the checks on
  values reached from the module by attribute and item reads (`not m._forward_hooks`,
  `'forward' not in m.__dict__`, `m.training is False`, `type(m.stride) is tuple`, `m.stride ==
  (1, 1)`, `m._parameters['bias'] is None`, a parameter's tensor check, `m.config.__dict__['x']
  == 3`), with the checks that the module has no attribute of a name, become one call of a
  `ModuleCheck`, in the type check's place. A submodule's checks are made by its parent's
  ModuleCheck (the nearest checked module above a value owns its checks), so a module tree is
  one call at its root.
- checks on values reached from a globals dict, a class the trace looked into or another object
  the guard holds fixed (`g['torch'] is ref()`, `g['f'].__code__ is code`, `C.forward is ref()`,
  a method's closure cell) become one call of a `RootCheck` per such object, in the first one's
  place.

Only checks that exist are fused; none is added. This module finds the replacements and makes the
native objects; `GuardSet.build` puts them in place (templates are written by the guard set only).

Guard functions answer True or False as a whole (a check that raises counts as failed), and
these checks have no side effects, so fusing checks of different depths into one place keeps the
answer; within a native check they run shallow before deep, as in Python. Runs once per guard
function, when it is built; the explainer (`GuardSet.build_explainer`) keeps the Python checks,
whose texts it reports.
"""

from __future__ import annotations

import types
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .sources import (
    AttrSource,
    ClassSource,
    FixedObjectSource,
    GlobalSource,
    InstanceDictSource,
    ItemSource,
    ModuleMemberSource,
    Source,
)

if TYPE_CHECKING:
    from .guard_set import Check

# tensor types whose metadata Python reads from C++ (no Python getters of their own)
PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)

# the kinds of check a ModuleCheck or RootCheck makes on a value it reaches, and the op of each
_MEMBER_OPS = {
    "type": "type",
    "is": "is",
    "is not": "is not",
    "is ref": "is ref",
    "code": "code",
    "equal": "==",
    "zero": "zero",
    "empty": "empty",
    "absent": "not in",
    "keys": "keys",
    "tensor": "tensor",
}

# how a value is reached from its owner: steps (attribute name or key, how), `how` one of
ATTRIBUTE, ITEM, INSTANCE_DICT = 0, 1, 2  # `.name`, `[key]`, object.__getattribute__(v, '__dict__')
Steps = tuple[tuple[Any, int], ...]


@dataclass
class Replacement:
    """A native check (`native`, bound in the guard function as `___<hint><n>`), called with the
    checked value or, `takes_value` False, with nothing; `text` describes what it checks."""

    native: Any
    hint: str
    text: str
    takes_value: bool = True


@dataclass(frozen=True, eq=False)
class _Root:
    """A globals dict, a class or another object the guard holds fixed: what a RootCheck reads."""

    obj: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Root) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def replacements(
    checks: list[Check], extension: types.ModuleType, bindings: dict[str, Any]
) -> tuple[dict[int, Replacement], set[int]]:
    """(id(check) -> the native replacement put in its place, ids of the checks a native check
    placed elsewhere makes). `bindings` are the names the checks' templates use (a tensor
    check's Python form, kept for what only Python can answer, reads them)."""
    namespace = dict(bindings)  # the Python forms' globals (eval adds __builtins__ to it)
    placed, absorbed = _Fusion(checks, extension, namespace).run()
    for check in checks:
        if _plain_tensor_check(check) and id(check) not in absorbed:
            placed[id(check)] = Replacement(_tensor_check(check, extension, namespace), "tensor", check.text)
    return placed, absorbed


def _plain_tensor_check(check: Check) -> bool:
    return check.kind == "tensor" and check.detail.cls in PLAIN_TENSOR_TYPES


def _tensor_check(check: Check, extension: types.ModuleType, namespace: dict[str, Any]) -> Any:
    facts = check.detail
    python_form = eval(f"lambda ___value: {check.template.replace('{v}', '___value')}", namespace)  # noqa: S307
    return extension.TensorCheck(
        facts.cls, facts.dtype, facts.device, facts.requires_grad, facts.sizes, facts.strides, python_form
    )


def _module_type_check(check: Check) -> bool:
    return check.kind == "type" and issubclass(check.detail, torch.nn.Module)


def _fusable(check: Check) -> bool:
    return (
        check.other is None
        and check.refs is None
        and check.kind in _MEMBER_OPS
        and (check.kind != "tensor" or _plain_tensor_check(check))
    )


def _owner_and_steps(source: Source, modules: dict[Source, Check]) -> tuple[Source | _Root, Steps] | None:
    """The nearest type-checked module above `source` (its source), or else the globals dict,
    class or fixed object its path starts from, with the steps from there down to `source`; None
    when the path passes through anything else (a local, the frame's closure, a weak reference's
    target, ...)."""
    steps: list[tuple[Any, int]] = []
    current = source
    while True:
        if steps and current in modules:
            return current, tuple(reversed(steps))
        if isinstance(current, AttrSource):
            steps.append((current.attr, ATTRIBUTE))
        elif isinstance(current, InstanceDictSource):
            steps.append(("__dict__", INSTANCE_DICT))
        elif isinstance(current, ItemSource):
            steps.append((current.key, ITEM))
        elif isinstance(current, ModuleMemberSource):
            steps += [(current.key, ITEM), (current.table, ATTRIBUTE)]
        elif isinstance(current, GlobalSource):
            steps.append((current.global_name, ITEM))
            return _Root(current.globals_dict), tuple(reversed(steps))
        elif isinstance(current, ClassSource) and steps:
            return _Root(current.cls), tuple(reversed(steps))
        elif isinstance(current, FixedObjectSource) and steps:
            return _Root(current.obj), tuple(reversed(steps))
        else:
            return None
        current = current.base()


class _Fusion:
    """Groups the fusable checks by owner, then builds the ModuleChecks deepest first (a parent's
    members include its submodules' checks) and the RootChecks last."""

    def __init__(self, checks: list[Check], extension: types.ModuleType, namespace: dict[str, Any]) -> None:
        self.extension = extension
        self.namespace = namespace
        self.modules = {check.source: check for check in checks if _module_type_check(check)}
        self.parts: dict[Source | _Root, list[tuple[Steps, Check]]] = defaultdict(list)
        self.lacking: dict[Source, list[Check]] = defaultdict(list)
        self.nested: set[int] = set()  # module type checks made by an owner's native check
        for check in checks:
            if check.kind == "lacks":
                typed = self.modules.get(check.source)
                if typed is not None and check.detail[1] is typed.detail:  # made for this class
                    self.lacking[check.source].append(check)
            elif _fusable(check):
                found = _owner_and_steps(check.source, self.modules)
                if found is not None:
                    self.parts[found[0]].append((found[1], check))
                    if _module_type_check(check):
                        self.nested.add(id(check))
        self.built: dict[int, Replacement] = {}  # module type check -> its ModuleCheck

    def run(self) -> tuple[dict[int, Replacement], set[int]]:
        absorbed: set[int] = set()
        placed: dict[int, Replacement] = {}
        for source, check in sorted(self.modules.items(), key=lambda item: -item[0].depth()):
            parts, lacking = self.parts.get(source, []), self.lacking.get(source, [])
            if not parts and not lacking:
                continue
            members = self._members(parts)
            missing = tuple((c.detail[0], c.detail[2]) for c in lacking)
            native = self.extension.ModuleCheck(check.detail, members, missing)
            self.built[id(check)] = Replacement(native, "module", self._text(check, parts, lacking))
            absorbed.update(id(c) for _, c in parts)
            absorbed.update(id(c) for c in lacking)
            if id(check) not in self.nested:
                placed[id(check)] = self.built[id(check)]
        for owner, parts in self.parts.items():
            if isinstance(owner, _Root):
                native = self.extension.RootCheck(owner.obj, self._members(parts))
                text = self._text(None, parts, [])
                placed[id(parts[0][1])] = Replacement(native, "root", text, takes_value=False)
                absorbed.update(id(c) for _, c in parts)
        return placed, absorbed

    def _members(self, parts: list[tuple[Steps, Check]]) -> tuple:
        """The `members` entries for `parts`: per value reached, its type check rides with the
        first other check on it (or stands alone), so a typed comparison reads the value once;
        a submodule with a ModuleCheck of its own is checked by that."""
        by_value: dict[Steps, list[Check]] = defaultdict(list)
        for steps, check in parts:
            by_value[steps].append(check)
        entries = []
        for steps, on_value in by_value.items():
            entries += [(steps, None, "module", self.built[id(c)].native) for c in on_value if id(c) in self.built]
            types_ = [c.detail for c in on_value if c.kind == "type" and id(c) not in self.built]
            others = [c for c in on_value if c.kind != "type"]
            exact = types_[0] if types_ else None
            if exact is not None and not others:
                entries.append((steps, exact, "type", None))
            for index, other in enumerate(others):
                if other.kind == "tensor":
                    expected = _tensor_check(other, self.extension, self.namespace)
                else:
                    expected = other.detail
                entries.append((steps, exact if index == 0 else None, _MEMBER_OPS[other.kind], expected))
        return tuple(entries)

    def _text(self, check: Check | None, parts: list[tuple[Steps, Check]], lacking: list[Check]) -> str:
        """A line for the owner's own checks, then the lines of each submodule's ModuleCheck."""
        own = [c for c in (check, *(c for _, c in parts), *lacking) if c is not None and id(c) not in self.built]
        nested = [self.built[id(c)].text for _, c in parts if id(c) in self.built]
        return "\n".join(["; ".join(c.text for c in own), *nested])
