"""Sizes and ints made dynamic by name or by value through torch's public compiler settings.

`torch.compiler.config.dynamic_sources` (environment TORCH_COMPILE_DYNAMIC_SOURCES) lists sources
whose sizes and ints are symbolic from the first compile, whatever `dynamic=False`,
`force_parameter_static_shapes` or nn.Module attributes would keep static: model code and
launchers written for torch.compile set it, mostly for models whose graph breaks hide which
values vary. Each comma-separated entry is an exact source name or a regex (`re.match`, anchored
at the start only), written as torch names sources (`Source.torch_name()`), optionally ending in
`:N` to name one dimension of a tensor. `dynamic_values` lists sentinel ints: an int or a size
equal to one is symbolic (not on a tensor the force flags keep static). `unbacked_sources` lists
sources whose sizes (or int value) are unbacked symbols from the first compile: symbols without a
value the trace may read, so no guard is taken on them and sizes 0 and 1 reuse the graph
(`DynamicPolicy` decides, with the other ways a size becomes unbacked).
"""

from __future__ import annotations

import functools
import re

import torch.compiler.config

from ..errors import InvalidConfig
from ..guards.sources import Source

_DIM_SUFFIX = re.compile(r"(.+):(\d+)")
_SETTINGS = ("dynamic_sources", "dynamic_values", "unbacked_sources")


def settings() -> tuple[tuple[str, str], ...]:
    """The three settings now, for keys of what a trace produced under them."""
    return tuple((name, _setting(name)) for name in _SETTINGS)


def _setting(name: str) -> str:
    """One of the settings; empty where this torch lacks it (torch 2.11 has no `dynamic_values`)."""
    return getattr(torch.compiler.config, name, "")


@functools.lru_cache(maxsize=16)
def _entries(setting: str, text: str) -> tuple[tuple[str, re.Pattern, int | None], ...]:
    """The entries of a source list: (name, its regex, the one dimension named or None)."""
    entries = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        suffix = _DIM_SUFFIX.fullmatch(item)
        name, dim = (suffix[1], int(suffix[2])) if suffix else (item, None)
        try:
            pattern = re.compile(name)
        except re.error as e:
            raise InvalidConfig(f"torch.compiler.config.{setting}: {name!r} is not a regex ({e})") from None
        entries.append((name, pattern, dim))
    return tuple(entries)


def _listed(setting: str, source: Source, dim: int | None) -> bool:
    """Whether `source` (its dimension `dim`; None: any entry naming it) is in the list."""
    entries = _entries(setting, _setting(setting))
    if not entries:
        return False
    name = source.torch_name()
    return any(
        (text == name or pattern.match(name)) and (dim is None or only is None or only == dim)
        for text, pattern, only in entries
    )


def dynamic_source(source: Source, dim: int | None = None) -> bool:
    """Whether `dynamic_sources` lists the value at `source` (for a tensor, its dimension `dim`;
    None: any of them)."""
    return _listed("dynamic_sources", source, dim)


def dynamic_value(value: int) -> bool:
    """Whether `dynamic_values` lists `value` as a sentinel."""
    text = _setting("dynamic_values").replace(" ", "")
    return bool(text) and value in _values(text)


@functools.lru_cache(maxsize=16)
def _values(text: str) -> frozenset[int]:
    try:
        return frozenset(int(item) for item in text.split(",") if item)
    except ValueError:
        raise InvalidConfig(f"torch.compiler.config.dynamic_values: {text!r} is not a list of ints") from None


def unbacked_source(source: Source, dim: int | None = None) -> bool:
    """Whether `unbacked_sources` lists the value at `source` (for a tensor, its dimension `dim`;
    None: an int, which any entry naming the source lists)."""
    return _listed("unbacked_sources", source, dim)


def dynamic_int(source: Source, value: int) -> bool:
    """An int input symbolic whatever else holds (`dynamic=False`, `specialize_int`, an
    nn.Module attribute): listed by its source or its value, or listed unbacked and not negative
    (an unbacked int is taken as a size, as torch takes it)."""
    return dynamic_source(source) or dynamic_value(value) or (value >= 0 and unbacked_source(source))
