"""`export(fn, dynamic_shapes=...)`: a torch.export-style spec, read into dimensions declared
dynamic, and checked against what the trace made of them.

The spec (torch.export's): a dict from parameter names to each argument's spec, or a tuple of
them in parameter order. A tensor's spec is a dict `{dim: Dim}` or a tuple with one entry per
dimension; a list, tuple or dict of tensors has a spec of the same shape; None is static.
Per dimension: a named `torch.export.Dim("batch", min=, max=)` or `Dim.DYNAMIC` must stay
dynamic over its whole range, `Dim.AUTO` may be specialised by the code, `Dim.STATIC`, None or
the example's own size keep it static. A dimension that must stay dynamic but that the trace
specialised, tied to another or narrowed raises `ConstraintViolation` saying what the code
requires; derived dims (`2 * batch`) are not supported.

The declarations go to the trace's `DynamicPolicy` by source name, so the caller's tensors are
never marked.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch.utils._sympy.numbers import int_oo

from .errors import ConstraintViolation
from .guards.sources import ItemSource, LocalSource, Source

_HINT = type(torch.export.Dim.AUTO)


@dataclass(frozen=True)
class DeclaredDim:
    """One dimension the spec makes dynamic."""

    source: str  # the tensor's source name, `L['x']`
    dim: int
    name: str  # the Dim's name, or the hint's (`Dim.AUTO`)
    low: int | None
    high: int | None
    strict: bool  # must stay dynamic over [low, high] (named Dims, Dim.DYNAMIC); AUTO need not

    def where(self) -> str:
        return f"{self.source}.size()[{self.dim}]"


def read_spec(parameters: list[inspect.Parameter], arguments: dict[str, Any], spec: Any) -> list[DeclaredDim]:
    """The dynamic dimensions `spec` declares for these bound arguments (by parameter name)."""
    names = [p.name for p in parameters]
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in names]
        if unknown:
            raise ValueError(
                f"dynamic_shapes names {', '.join(map(repr, unknown))}, which the function does not take "
                f"(its parameters: {', '.join(names)})"
            )
        pairs = list(spec.items())
    elif isinstance(spec, (tuple, list)):
        if len(spec) != len(names):
            raise ValueError(
                f"dynamic_shapes has {len(spec)} entries but the function takes {len(names)} parameters "
                f"({', '.join(names)}); give one spec per parameter, or a dict by name"
            )
        pairs = list(zip(names, spec))
    else:
        raise TypeError(f"dynamic_shapes takes a dict by parameter name or a tuple, got {type(spec).__qualname__}")
    declared: list[DeclaredDim] = []
    for name, item in pairs:
        _walk(arguments[name], item, LocalSource(name), declared)
    return declared


def _walk(value: Any, spec: Any, source: Source, out: list[DeclaredDim]) -> None:
    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        _tensor_dims(value, spec, source, out)
    elif isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)) and len(spec) == len(value):
        for i, (v, s) in enumerate(zip(value, spec)):
            _walk(v, s, ItemSource(source, i), out)
    elif isinstance(value, dict) and isinstance(spec, dict) and spec.keys() <= value.keys():
        for key, s in spec.items():
            _walk(value[key], s, ItemSource(source, key), out)
    else:
        raise ValueError(
            f"dynamic_shapes gives {spec!r} for {source.name()}, a {type(value).__qualname__}: a spec must "
            "follow the argument (tensor: a dict or tuple by dimension; list, tuple, dict: the same shape; else None)"
        )


def _tensor_dims(t: torch.Tensor, spec: Any, source: Source, out: list[DeclaredDim]) -> None:
    if isinstance(spec, dict):
        items = list(spec.items())
    elif isinstance(spec, (tuple, list)):
        if len(spec) != t.dim():
            raise ValueError(
                f"dynamic_shapes gives {len(spec)} dimension specs for {source.name()}, which has {t.dim()} dimensions"
            )
        items = list(enumerate(spec))
    else:
        raise ValueError(
            f"dynamic_shapes gives {spec!r} for tensor {source.name()}; "
            "give a dict {dim: Dim} or a tuple with one entry per dimension"
        )
    for dim, entry in items:
        if not isinstance(dim, int) or not 0 <= dim < t.dim():
            raise ValueError(
                f"dynamic_shapes names dimension {dim!r} of {source.name()}, which has {t.dim()} dimensions"
            )
        found = _declared(t, dim, entry, source)
        if found is not None:
            out.append(found)


def _declared(t: torch.Tensor, dim: int, entry: Any, source: Source) -> DeclaredDim | None:
    where = f"{source.name()}.size()[{dim}]"
    size = t.shape[dim]
    if entry is None:
        return None
    if isinstance(entry, int) and not isinstance(entry, bool):
        if entry != size:
            raise ValueError(f"dynamic_shapes says {where} is {entry}, but the example's size is {size}")
        return None
    if isinstance(entry, _HINT):
        kind = entry.type.name
        if kind == "STATIC":
            return None
        declared = DeclaredDim(source.name(), dim, f"Dim.{kind}", entry.min, entry.max, strict=kind == "DYNAMIC")
    elif isinstance(entry, torch.export.Dim):
        if hasattr(entry, "root"):
            raise NotImplementedError(
                f"dynamic_shapes: {where} is the derived dim {entry.__name__}; stenograph supports named Dims "
                "and Dim.DYNAMIC / Dim.AUTO / Dim.STATIC, not dims derived from others"
            )
        high = _finite(entry.max)
        declared = DeclaredDim(source.name(), dim, entry.__name__, entry.min, high, strict=True)
    else:
        raise TypeError(
            f"dynamic_shapes gives {entry!r} for {where}; use torch.export.Dim(...), Dim.DYNAMIC, Dim.AUTO, "
            "Dim.STATIC, an int or None"
        )
    if (declared.low is not None and size < declared.low) or (declared.high is not None and size > declared.high):
        raise ConstraintViolation(
            f"{where} is {size} in the example, outside the range [{declared.low}, {declared.high}] "
            f"dynamic_shapes declares for {declared.name}"
        )
    return declared


def declared_bounds(dims: list[DeclaredDim]) -> dict[str, dict[int, tuple[int | None, int | None]]]:
    """The declarations as `DynamicPolicy` takes them."""
    by_source: dict[str, dict[int, tuple[int | None, int | None]]] = {}
    for d in dims:
        low = None if d.low is not None and d.low <= 2 else d.low  # sizes below 2 are never symbolic
        by_source.setdefault(d.source, {})[d.dim] = (low, d.high)
    return by_source


def _finite(value: Any) -> int | None:
    """A bound of a symbol's range as an int; None for infinity (sympy's or torch's)."""
    return None if value in (sympy.oo, int_oo) else int(value)


def check_dims(dims: list[DeclaredDim], inputs: list[Any], shape_env: Any) -> list[str]:
    """What the trace made of each declared dimension, as text (`L['x'].size()[0]: batch in
    [2, 1024]`); raises `ConstraintViolation` naming every one the code specialised, tied to a
    dimension declared otherwise, or narrowed, where the spec says it must stay dynamic."""
    fakes = {i.source.name(): i.fake for i in inputs if isinstance(i.fake, torch.Tensor)}
    symbols: dict[Any, DeclaredDim] = {}
    found: list[str] = []
    problems: list[str] = []
    for d in dims:
        fake = fakes.get(d.source)
        if fake is None:
            continue  # the graph does not read this tensor
        size = fake.shape[d.dim]
        expr = shape_env.replace(size.node.expr) if isinstance(size, torch.SymInt) else None
        if expr is None or expr.is_number:
            value = int(expr) if expr is not None else int(size)
            found.append(f"{d.where()}: {d.name} specialised to {value}")
            if d.strict and value in (0, 1):
                problems.append(
                    f"{d.where()} ({d.name}) is {value} in the example, and sizes 0 and 1 are always "
                    "specialised (export with an example of size 2 or more)"
                )
            elif d.strict:
                problems.append(
                    f"{d.where()} ({d.name}) must stay dynamic, but the code specialised it to {value} "
                    "(declare it static: None, or Dim.AUTO)"
                )
            continue
        other = symbols.setdefault(expr, d)
        if other is not d and other.name != d.name and (d.strict or other.strict):
            problems.append(
                f"{d.where()} ({d.name}) must equal {other.where()} ({other.name}) for this code "
                "(declare both with one Dim)"
            )
        bound = shape_env.bound_sympy(expr)
        low, high = int(bound.lower), _finite(bound.upper)
        found.append(f"{d.where()}: {d.name} in [{low}, {'inf' if high is None else high}]")
        wanted_low = max(d.low or 0, 2)
        if d.strict and (low > wanted_low or (high is not None and (d.high is None or high < d.high))):
            problems.append(
                f"{d.where()} ({d.name}) is declared in [{wanted_low}, {d.high or 'inf'}], but the code only "
                f"handles [{low}, {'inf' if high is None else high}] (declare {d.name} with min={low}"
                + ("" if high is None else f", max={high}")
                + ")"
            )
    problems.extend(_guarded_beyond_range(symbols, shape_env))
    if problems:
        raise ConstraintViolation(
            "the code does not keep the declared dynamic_shapes:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return found


_MOST_SIZES = 4096  # a declared range this small is checked size by size


def _always_true(expr: Any, shape_env: Any) -> bool:
    """Whether a guard holds for every size the symbols' ranges allow: proved from the ranges
    alone (not from the guards, which already assume it), or, for one symbol of a small finite
    range, checked at every size. Otherwise it is taken as not holding (conservative)."""
    if bool(shape_env._maybe_evaluate_static(expr, axioms=())):
        return True
    if len(expr.free_symbols) != 1:
        return False
    (symbol,) = expr.free_symbols
    bound = shape_env.var_to_range.get(symbol)
    high = None if bound is None else _finite(bound.upper)
    if high is None or high - int(bound.lower) > _MOST_SIZES:
        return False
    try:
        return all(bool(expr.xreplace({symbol: sympy.Integer(n)})) for n in range(int(bound.lower), high + 1))
    except (ZeroDivisionError, TypeError):  # a size at which the code's arithmetic fails
        return False


def _guarded_beyond_range(symbols: dict[Any, DeclaredDim], shape_env: Any) -> list[str]:
    """The guards the code put on a dimension that must stay dynamic and that some size of its
    declared range fails (`(2 * n + 3) % (n - 3) == 0` decided a branch): the exported graph,
    which checks no guard, would take that branch for every size."""
    strict = {
        next(iter(expr.free_symbols)): d for expr, d in symbols.items() if d.strict and len(expr.free_symbols) == 1
    }
    problems = []
    for guard in shape_env.guards:
        involved = [strict[s] for s in guard.expr.free_symbols if s in strict]
        if not involved or _always_true(guard.expr, shape_env):
            continue
        names = ", ".join(sorted({d.name for d in involved}))
        problems.append(
            f"not every value of {names} in its declared range satisfies the code's guard {guard.expr} "
            "(the graph would take one branch for all of them)"
        )
    return problems
