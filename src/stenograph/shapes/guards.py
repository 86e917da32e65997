"""Shape guards: the ShapeEnv's recorded decisions turned into checks on the inputs.

`ShapeEnv.produce_guards` gives Python expressions over the inputs' sizes (relations between
sizes, ranges, specialisations); each reference to an input is rendered as a token
`___S<k>___` that the guard function replaces by the input's source expression.
"""

from __future__ import annotations

from typing import Any

from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ..guards.sources import Source
from .fake import ShapeSource

_PROPERTY_SUFFIX = {"SIZE": ".size()", "STRIDE": ".stride()", "STORAGE_OFFSET": ".storage_offset()"}


def shape_guards(shape_env: ShapeEnv, inputs: list[tuple[Any, Source]]) -> list[tuple[str, list[tuple[Source, str]]]]:
    """[(expression with tokens, [(source, suffix) for each token])] for `inputs` (fake, source):
    the inputs that were made symbolic (also those the trace specialised again since)."""
    if not inputs:
        return []
    refs: list[tuple[Source, str]] = []

    def source_ref(src: Any) -> str:
        refs.append(_resolve(src))
        return f"___R{len(refs) - 1}___"

    # ignore_static=False: a size the trace specialised (`int(x.shape[0])`) is checked too
    expressions = shape_env.produce_guards(
        [fake for fake, _ in inputs],
        [ShapeSource(source) for _, source in inputs],
        source_ref=source_ref,
        ignore_static=False,
    )
    result = []
    for expression in expressions:
        used: list[tuple[Source, str]] = []
        for k, ref in enumerate(refs):
            token = f"___R{k}___"
            if token in expression:
                expression = expression.replace(token, f"___S{len(used)}___")
                used.append(ref)
        result.append((expression, used))
    return result


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
    if base is not None and member == "_base":
        source, prefix = _resolve(base)
        return source, f"{prefix}._base"
    raise NotImplementedError(f"shape guard on an unknown source {src!r}")
