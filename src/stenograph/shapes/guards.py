"""Shape guards: the ShapeEnv's recorded decisions turned into checks on the inputs.

`ShapeEnv.produce_guards` gives Python expressions over the inputs' sizes (relations between
sizes, ranges, specialisations); each reference to an input is rendered as a token
`___S<k>___` that the guard function replaces by the input's source expression.

An unbacked input size (`unbacked_sources`, torch's `mark_unbacked`, automatic dynamic marking
as unbacked) has no value the trace may read: what the trace relied on about it is a fact the
ShapeEnv took for granted (two sizes broadcast together are equal, a size is even for a
`view(-1, 2)`), which torch checks when the graph runs. Here those facts are guards over the
inputs, so a call breaking one compiles again; and a trace whose facts the call being compiled
breaks already (`broken_unbacked_facts`) is traced again with backed sizes.
"""

from __future__ import annotations

import re
from typing import Any

import sympy
import torch
from torch._guards import ShapeGuard, SLoc
from torch.fx.experimental.symbolic_shapes import (
    ConstraintViolationError,
    DimDynamic,
    RelaxedUnspecConstraint,
    ShapeEnv,
    StatelessSymbolicContext,
    StrictMinMaxConstraint,
    SubclassSymbolicContext,
    SymbolicContext,
)
from torch.utils._python_dispatch import is_traceable_wrapper_subclass
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from ..errors import ConstraintViolation, Unsupported
from ..guards.sources import Source
from .fake import ShapeSource, input_symbols

_PROPERTY_SUFFIX = {"SIZE": ".size()", "STRIDE": ".stride()", "STORAGE_OFFSET": ".storage_offset()"}


def shape_guards(
    shape_env: ShapeEnv, inputs: list[tuple[Any, Source]], marks: list[dict[int, tuple[int | None, int | None]]]
) -> list[tuple[str, list[tuple[Source, str]]]]:
    """[(expression with tokens, [(source, suffix) for each token])] for `inputs` (fake, source):
    the inputs that were made symbolic (also those the trace specialised again since).

    `marks` holds each input's `mark_dynamic` dimensions and their (min, max): a dimension the
    trace specialised, or narrowed below its declared range, raises `ConstraintViolation`, as
    torch.compile raises its ConstraintViolationError (`maybe_mark_dynamic` allows it)."""
    if not inputs:
        return []
    refs: list[tuple[Source, str]] = []

    def source_ref(src: Any) -> str:
        refs.append(_resolve(src))
        return f"___R{len(refs) - 1}___"

    fakes = [fake for fake, _ in inputs]
    # ignore_static=False: a size the trace specialised (`int(x.shape[0])`) is checked too
    try:
        expressions = shape_env.produce_guards(
            fakes,
            [ShapeSource(source) for _, source in inputs],
            source_ref=source_ref,
            guards=[*shape_env.guards, *_unbacked_facts(shape_env, set().union(*map(input_symbols, fakes)))],
            ignore_static=False,
            input_contexts=[_constraints(fake, marked) for (fake, _), marked in zip(inputs, marks)],
        )
    except ConstraintViolationError as e:
        raise ConstraintViolation(
            f"{e}\n(a dimension passed to mark_dynamic must stay dynamic in the code; maybe_mark_dynamic allows "
            "the code to specialise it)"
        ) from None
    # one pass over each expression's text (many inputs give many refs: a scan per ref was quadratic)
    return [_renumbered(expression, refs) for expression in expressions]


def _unbacked_facts(shape_env: ShapeEnv, symbols: set) -> list[ShapeGuard]:
    """The facts the ShapeEnv took for granted about the inputs' `symbols` (torch's deferred
    runtime asserts), as guards; those naming a value made inside the graph (`.item()`) cannot be
    checked before it runs, and are left out."""
    return [
        ShapeGuard(fact.expr, SLoc("a fact taken for granted of an unbacked input size", None), False)
        for asserts in shape_env.deferred_runtime_asserts.values()
        for fact in asserts
        if shape_env.simplify(fact.expr).free_symbols <= symbols
    ]


def broken_unbacked_facts(shape_env: ShapeEnv, inputs: list[tuple[Any, Any]]) -> list[str]:
    """The facts about unbacked input sizes (their ranges, equalities, the ShapeEnv's deferred
    asserts) that the inputs being compiled, (fake, real value) pairs, break: the trace took for
    granted something this very call contradicts (a size of 1 broadcast against an unbacked
    size, taken as equal to it)."""
    if not shape_env.unbacked_inputs:
        return []
    unbacked = _unbacked_values(shape_env, inputs)
    values = {**shape_env.backed_var_to_val, **unbacked}  # the backed symbols' values are this call's
    broken = []
    for symbol, value in unbacked.items():
        taken = shape_env.simplify(symbol)
        if value not in shape_env.var_to_range[symbol]:
            broken.append(f"{symbol} = {value}, outside {shape_env.var_to_range[symbol]}")
        elif _false(sympy.Eq(taken, value), values):
            broken.append(f"{symbol} = {value}, taken as {taken}")
    facts = _unbacked_facts(shape_env, set(values))
    return broken + [str(f.expr) for f in facts if _false(f.expr, values)]


def _unbacked_values(shape_env: ShapeEnv, inputs: list[tuple[Any, Any]]) -> dict:
    """{unbacked input symbol: its value in this call}, read from the inputs' sizes as they were
    made (a size's `expr` answers what the symbol was since replaced by)."""
    values = {}
    for fake, real in inputs:
        pairs = zip(fake.shape, real.shape) if isinstance(fake, torch.Tensor) else [(fake, real)]
        for size, value in pairs:
            made = size.node._expr if isinstance(size, torch.SymInt) else None
            if made in shape_env.unbacked_inputs:
                values[made] = sympy.Integer(value)
    return values


def _false(fact: Any, values: dict) -> bool:
    """Whether `fact` is false for the symbols' `values` (not when it stays undecided)."""
    return fact.xreplace(values) is sympy.false


def _renumbered(expression: str, refs: list[tuple[Source, str]]) -> tuple[str, list[tuple[Source, str]]]:
    """`expression` with its `___R<k>___` tokens renumbered `___S<i>___` in order of first
    appearance, and the refs those stand for."""
    used: list[tuple[Source, str]] = []
    numbered: dict[int, str] = {}

    def renumber(match: re.Match) -> str:
        k = int(match.group(1))
        if k not in numbered:
            numbered[k] = f"___S{len(used)}___"
            used.append(refs[k])
        return numbered[k]

    return _REF_TOKEN.sub(renumber, expression), used


_REF_TOKEN = re.compile(r"___R(\d+)___")


def _constraints(fake: Any, marked: dict[int, tuple[int | None, int | None]]) -> SymbolicContext | None:
    """The symbolic context of an input whose dimensions `marked` must stay dynamic (None for
    one without any: `produce_guards` then puts no constraint on it). A traceable wrapper
    subclass always has one: `produce_guards` walks its inner tensors by the contexts it names."""
    if not isinstance(fake, torch.Tensor):
        return None
    if is_traceable_wrapper_subclass(fake):
        inner = {name: _no_constraints(getattr(fake, name)) for name in fake.__tensor_flatten__()[0]}
        return SubclassSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC] * fake.dim(),
            dynamic_strides=[DimDynamic.INFER_STRIDE] * fake.dim(),
            constraint_sizes=_constraint_sizes(fake, marked),
            constraint_strides=[None] * fake.dim(),
            tensor_source=None,
            shape_env_to_source_to_symbol_cache={},
            inner_contexts=inner,
        )
    if not marked:
        return None
    return StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC] * fake.dim(),
        dynamic_strides=[DimDynamic.INFER_STRIDE] * fake.dim(),
        constraint_sizes=_constraint_sizes(fake, marked),
        constraint_strides=[None] * fake.dim(),
    )


def _no_constraints(fake: torch.Tensor) -> SymbolicContext:
    context = _constraints(fake, {})
    if context is not None:
        return context
    return StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC] * fake.dim(),
        constraint_sizes=[None] * fake.dim(),
        constraint_strides=[None] * fake.dim(),
    )


def _constraint_sizes(fake: torch.Tensor, marked: dict[int, tuple[int | None, int | None]]) -> list[Any]:
    sizes: list[Any] = [None] * fake.dim()
    for dim, (low, high) in marked.items():
        if 0 <= dim < fake.dim() and isinstance(fake.shape[dim], torch.SymInt):
            if low is None and high is None:
                sizes[dim] = RelaxedUnspecConstraint(warn_only=False)
            else:
                bound = ValueRanges(lower=low if low is not None else 0, upper=high if high is not None else int_oo)
                sizes[dim] = StrictMinMaxConstraint(warn_only=False, vr=bound)
    return sizes


def _resolve(src: Any) -> tuple[Source, str]:
    """(our source, the text after it): an input, a size/stride/offset of it, or of its `_base` (a
    view input's base is fakeified with symbols of its own, which AOTAutograd may guard on)."""
    if isinstance(src, ShapeSource):
        return src.source, ""
    base = getattr(src, "base", None)
    prop = getattr(src, "prop", None)
    if base is not None and prop is not None:
        source, prefix = _resolve(base)
        index = getattr(src, "idx", None)
        return source, prefix + _PROPERTY_SUFFIX[prop.name] + (f"[{index}]" if index is not None else "")
    member = getattr(src, "member", None)
    if base is not None and member is not None:  # a view's `_base`, a wrapper subclass's inner tensor
        source, prefix = _resolve(base)
        return source, f"{prefix}.{member}"
    # torch names a size of a tensor subclass's view by an ephemeral source, meant to be replaced
    # by a real one before guards are made; where it is not, the frame runs eagerly
    raise Unsupported(
        f"a size guard on a value stenograph cannot read back ({src!r}: a symbolic size of a view of a "
        "tensor subclass)",
        hint="pass the base tensor and take the view inside the compiled function, or compile with dynamic=False",
    )
