"""`options={"guard_filter_fn": fn}`: the user drops guards of an entry before it is built.

torch.compile hands such a function one `GuardFilterEntry` per guard and keeps the guards it
answers True for; the ready-made filters in `torch.compiler` (`skip_guard_on_globals_unsafe`,
`keep_tensor_guards_unsafe`, `skip_guard_on_all_nn_modules_unsafe`, ...) read the entries' fields
and their `orig_guard.source`. stenograph builds entries with the same fields from its checks
(the kind of a check named as torch names it, the checked value fetched from the real call) so
those filters, and the user's own, work unchanged. Dropping a guard is the user's promise that
what it checked does not change: an entry built so is never persisted (`warm/`).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .guard_set import RANK_GLOBAL_STATE, RANK_ID, RANK_SHAPE, RANK_TYPE, Check, GuardSet
from .pyfunc import make_function, parameter_list
from .sources import ClassSource, GlobalsNamer, GlobalSource, Source

_MISSING = object()  # the value of a source the call does not reach (a guard that it is absent)

# a check's `kind` as the name torch gives the guard that checks the same thing
_KIND_NAMES = {
    "type": "TYPE_MATCH",
    "tensor": "TENSOR_MATCH",
    "code": "CLOSURE_MATCH",
    "keys": "DICT_KEYS_MATCH",
    "absent": "DICT_CONTAINS",
    "lacks": "HASATTR",
    "empty": "EMPTY",
}


@dataclass(frozen=True)
class SourceView:
    """What the filters of `torch.compiler` ask of a guard's source."""

    source: Source | None
    through_modules: tuple[type, ...]  # classes of the nn.Modules on its path (its own value's included)

    def name(self) -> str:
        return "" if self.source is None else self.source.name()

    def is_unspecialized_nn_module(self) -> bool:
        return bool(self.through_modules)

    def is_unspecialized_builtin_nn_module(self) -> bool:
        return any(cls.__module__.startswith("torch.nn.") for cls in self.through_modules)


@dataclass(frozen=True)
class FilteredGuard:
    """`GuardFilterEntry.orig_guard`: the check itself and a view of its source."""

    source: SourceView
    text: str


@dataclass(frozen=True)
class GuardFilterEntry:
    """torch's `GuardFilterEntry`, field for field."""

    name: str
    has_value: bool
    value: object
    guard_type: str
    derived_guard_types: tuple[str, ...]
    is_global: bool
    orig_guard: FilteredGuard


def apply_guard_filter(
    guards: GuardSet, filter_fn: Callable[[list[GuardFilterEntry]], Sequence[bool]], fn: types.FunctionType,
    args: tuple, kwargs: dict,
) -> None:  # fmt: skip
    """Keep the checks of `guards` that `filter_fn` answers True for, given the call
    `fn(*args, **kwargs)` the entry is compiled from (the values its sources reach)."""
    checks = list(guards.checks)
    values = _values(checks, fn, args, kwargs)
    entries = [_entry(check, values) for check in checks]
    answer = filter_fn(entries)
    if not isinstance(answer, Sequence) or len(answer) != len(entries):
        raise TypeError(
            f"guard_filter_fn must return a list of one bool per guard entry ({len(entries)}), "
            f"not {type(answer).__name__}" + (f" of {len(answer)}" if isinstance(answer, Sequence) else "")
        )
    guards.checks[:] = [check for check, keep in zip(checks, answer) if keep]


def _paths(checks: list[Check]) -> list[Source]:
    """Every source the checks name, with the sources on their paths, each once."""
    seen: dict[Source, None] = {}
    for check in checks:
        source = check.source
        while source is not None:
            seen.setdefault(source, None)
            source = source.base()
    return list(seen)


def _values(checks: list[Check], fn: types.FunctionType, args: tuple, kwargs: dict) -> dict[Source, Any]:
    """The value each source of `checks` (and on their paths) has in the call: a function with
    the guard function's parameters fetches them."""
    sources = _paths(checks)
    namer = GlobalsNamer()
    body = ["___found = []"]
    for source in sources:
        body += ["try:", f"    ___found.append({source.expr(namer)})", "except Exception:"]
        body += ["    ___found.append(___missing)"]
    body.append("return ___found")
    namespace = {**namer.bindings(), "___missing": _MISSING}
    code = fn.__code__
    fetch = make_function("___values", parameter_list(code), body, namespace, like=fn, label="guard filter values")
    prefix = (fn.__closure__,) if code.co_freevars else ()
    return dict(zip(sources, fetch(*prefix, *args, **kwargs)))


def _entry(check: Check, values: dict[Source, Any]) -> GuardFilterEntry:
    source = check.source
    value = values.get(source, _MISSING) if source is not None else _MISSING
    modules: list[type] = []
    path = source
    while path is not None:
        found = values.get(path, _MISSING)
        if isinstance(found, torch.nn.Module):
            modules.append(type(found))
        path = path.base()
    root = source.root() if source is not None else None
    return GuardFilterEntry(
        name=_local_name(source.name()) if source is not None else "",
        has_value=value is not _MISSING,
        value=None if value is _MISSING else value,
        guard_type=_guard_type(check),
        derived_guard_types=(),
        is_global=isinstance(root, (GlobalSource, ClassSource)),
        orig_guard=FilteredGuard(SourceView(source, tuple(modules)), check.text),
    )


def _local_name(name: str) -> str:
    """`L['x'].w` as torch's filters see it: `x.w`."""
    if name.startswith("L[") and "]" in name:
        inside, rest = name[2:].split("]", 1)
        return inside.strip("'\"") + rest
    return name


def _guard_type(check: Check) -> str:
    if check.rank == RANK_GLOBAL_STATE:
        return "GLOBAL_STATE"
    if check.rank == RANK_SHAPE or check.refs is not None:
        return "SHAPE_ENV"
    named = _KIND_NAMES.get(check.kind)
    if named is not None:
        return named
    if check.rank == RANK_TYPE:
        return "TYPE_MATCH"
    if check.rank == RANK_ID:
        return "ID_MATCH"
    return "CONSTANT_MATCH"
