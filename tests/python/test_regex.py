"""Regular expressions on strings the trace knows: compiled patterns and their matches are
constants (guarded by identity where they are read from the frame), `re`'s functions and the
patterns' methods run while tracing, and what depends on a string the trace does not know
breaks the graph. Model code does this parsing versions (`packaging.version`) and module names."""

from __future__ import annotations

import re

import pytest
import torch
from packaging import version

import stenograph

from ._support import check, t

_RELEASE = re.compile(r"(\d+)\.(\d+)")


def _pattern_global(x):
    m = _RELEASE.fullmatch("2.13")
    return x * int(m.group(1)) + int(m[2]) if m else x


def _module_functions(x):
    m = re.match(r"(?P<n>\d+)", "42abc")
    words = re.split(r"[,;]", "a,b;c")
    total = int(m.group("n")) + len(words) + len(re.findall("a", "banana"))
    total += len(re.sub("a", "bb", "aaa")) + re.subn("a", "", "aa")[1] + len(re.escape("a.b"))
    return x + total + sum(int(d.group()) for d in re.finditer(r"\d", "1a2b3"))


def _compiled_in_frame(x):
    pattern = re.compile(r"layer\.(\d+)\.weight")
    return [x * int(pattern.search(name).group(1)) for name in ("layer.2.weight", "layer.3.weight")]


def _no_match_is_falsy(x):
    return x + 1 if re.search("z", "abc") is None else x - 1


def _version_comparison(x):
    if version.parse(torch.__version__) >= version.parse("2.0.0"):
        return x + 1
    return x - 1


@pytest.mark.parametrize("fn", [_pattern_global, _module_functions, _compiled_in_frame, _no_match_is_falsy])
def test_regular_expressions_are_evaluated_while_tracing(cnt, fn):
    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_packaging_version_comparison_is_one_graph(cnt):
    check(_version_comparison, lambda i: (t(3, seed=i),), cnt)
    assert len(stenograph.compile(_version_comparison, backend="eager", fullgraph=True)(t(2))) == 2


def _bad_pattern(x):
    try:
        re.compile("(")
    except re.error as e:
        return x + len(str(e))
    return x


def test_a_bad_pattern_raises_in_the_traced_program(cnt):
    # torch.compile (2.13) fails here with an internal error: no peer to compare graphs with
    check(_bad_pattern, lambda i: (t(3, seed=i),), cnt, peer=False)


def _replace_with_function(x, text):
    return x + len(re.sub("a", lambda m: "xy", text))


def test_a_replacement_function_breaks_the_graph(cnt):
    with pytest.raises(stenograph.Unsupported, match="re.sub"):
        stenograph.compile(_replace_with_function, backend="eager", fullgraph=True)(t(2), "aa")
    check(_replace_with_function, lambda i: (t(3, seed=i), "banana"), cnt, graphs=1)


def test_a_rebound_pattern_recompiles(cnt):
    global _RELEASE
    fn = stenograph.compile(_pattern_global, backend=cnt)
    x = t(3)
    torch.testing.assert_close(fn(x), x * 2 + 13)
    torch.testing.assert_close(fn(x), x * 2 + 13)
    assert cnt.frame_count == 1
    saved, _RELEASE = _RELEASE, re.compile(r"(\d+)\.(\d)\d")
    try:
        torch.testing.assert_close(fn(x), x * 2 + 1)
        assert cnt.frame_count == 2
    finally:
        _RELEASE = saved
