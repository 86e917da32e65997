"""`fullgraph=True` (BEHAVIOUR case 9) with every kind of break: `Unsupported` at the first call.

The message names the reason, the user's file (full path), the line number, the source line text
and a hint. Nothing of the function runs (no output, no graph handed to the backend), and a
later call raises again instead of silently running eagerly.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from helpers import assert_same, line_of

import stenograph
from stenograph.errors import StenographError, Unsupported


def _print_mid(x):
    x = x * 2
    print("fullgraph print", x)
    return torch.relu(x)


def _manual_break(x):
    a = x.sin()
    stenograph.graph_break()
    return a.cos()


def _item_cond(x):
    y = x * 2
    if y.sum().item() > 0:
        return y + 1
    return y - 1


def _tensor_cond(x):
    s = x.sum()
    if s:
        return x + 1
    return x - 1


def _leaf(x):
    x = x * 3
    print("leaf print")
    return x - 1


def _calls_leaf(x):
    x = x.cos()
    return _leaf(x).sin()


def _print_in_try(x):
    try:
        y = x + 1
        print("in try")
        return y
    except Exception:
        return x - 1


def _clean_with_blocks(x, w):
    with torch.no_grad():
        scale = w.abs().mean()
    for _ in range(3):
        x = F.gelu(F.linear(x, w))
    return x.sum() * scale


def _assert_unsupported_message(message: str, fn, needle: str, reason_pattern: str) -> None:
    assert re.search(reason_pattern, message, re.IGNORECASE), message
    assert __file__ in message, message
    lineno = line_of(fn, needle)
    assert re.search(rf"\b{lineno}\b", message), (lineno, message)
    source_line = next(text.strip() for text in _source_lines(fn) if needle in text)
    assert source_line in message, (source_line, message)
    assert "hint" in message.lower(), message


def _source_lines(fn):
    import inspect

    return inspect.getsourcelines(fn)[0]


CASES = [
    pytest.param(_print_mid, (torch.randn(4),), _print_mid, "print(", r"print", id="print"),
    pytest.param(_manual_break, (torch.randn(4),), _manual_break, "graph_break()", r"graph_break", id="graph_break"),
    pytest.param(_item_cond, (torch.ones(3),), _item_cond, ".item()", r"item", id="item"),
    pytest.param(
        _tensor_cond,
        (torch.ones(3),),
        _tensor_cond,
        "if s:",
        r"data.dependent|bool|branch|condition|jump",
        id="if-tensor",
    ),
    pytest.param(_calls_leaf, (torch.randn(4),), _leaf, "print(", r"print", id="print-in-inlined-callee"),
    pytest.param(_print_in_try, (torch.randn(4),), _print_in_try, "print(", r"print", id="print-in-try"),
]


@pytest.mark.parametrize(("fn", "args", "where", "needle", "reason"), CASES)
def test_fullgraph_raises_unsupported_naming_reason_file_line_source_hint(cnt, capsys, fn, args, where, needle, reason):
    """Every break kind raises Unsupported at the first call, before any of the function runs."""
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    capsys.readouterr()
    with pytest.raises(Unsupported) as excinfo:
        compiled(*args)
    assert isinstance(excinfo.value, StenographError)
    _assert_unsupported_message(str(excinfo.value), where, needle, reason)
    io = capsys.readouterr()
    assert io.out == "" and io.err == "", io
    assert cnt.frame_count == 0

    # the second call raises again: no silent eager fallback, no graph compiled
    with pytest.raises(Unsupported):
        compiled(*args)
    assert capsys.readouterr().out == ""
    assert cnt.frame_count == 0


def test_fullgraph_break_in_try_is_not_swallowed_by_the_users_except(cnt, capsys):
    """Unsupported is raised by the compiler, so the function's own `except Exception` never sees it."""
    compiled = stenograph.compile(_print_in_try, backend=cnt, fullgraph=True)
    x = torch.randn(4)
    with pytest.raises(Unsupported):
        compiled(x)
    assert "in try" not in capsys.readouterr().out


def test_fullgraph_inlined_callee_names_the_callee_line(cnt):
    """A break two frames deep names the callee's file and line (where the print is)."""
    compiled = stenograph.compile(_calls_leaf, backend=cnt, fullgraph=True)
    with pytest.raises(Unsupported) as excinfo:
        compiled(torch.randn(4))
    assert str(line_of(_leaf, "print(")) in str(excinfo.value)


def test_fullgraph_clean_function_with_blocks_is_one_graph(cnt):
    """no_grad block and a for loop need no break: fullgraph=True compiles exactly 1 graph."""
    x, w = torch.randn(2, 5), torch.randn(5, 5)
    compiled = stenograph.compile(_clean_with_blocks, backend=cnt, fullgraph=True)
    for _ in range(2):
        assert_same(compiled(x, w), _clean_with_blocks(x, w))
    assert cnt.frame_count == 1


def test_without_fullgraph_the_same_functions_run(cnt, capsys):
    """The same functions without fullgraph break instead of raising, and give eager results."""
    for fn, args in [
        (_print_mid, (torch.randn(4),)),
        (_manual_break, (torch.randn(4),)),
        (_calls_leaf, (torch.randn(4),)),
    ]:
        compiled = stenograph.compile(fn, backend=cnt)
        capsys.readouterr()
        expected = fn(*args)
        eager_text = capsys.readouterr().out
        assert_same(compiled(*args), expected)
        assert capsys.readouterr().out == eager_text
    assert cnt.frame_count == 2 + 2 + 4


def test_a_fullgraph_function_called_from_compiled_code_keeps_its_promise(cnt, capsys):
    """An inner function compiled with fullgraph=True, called from an outer one compiled
    without: a break inside the inner one raises (it broke the outer graph silently), as
    torch.compile does; an inner one without fullgraph still just breaks."""
    inner = stenograph.compile(_print_mid, backend=cnt, fullgraph=True)
    relaxed = stenograph.compile(_manual_break, backend=cnt)

    def outer(x):
        return inner(x) + 1

    def outer_relaxed(x):
        return relaxed(x) + 1

    with pytest.raises(Unsupported, match="inside _print_mid, compiled with fullgraph=True") as info:
        stenograph.compile(outer, backend=cnt)(torch.ones(2))
    assert f"{__file__}:{line_of(_print_mid, 'print(')}" in str(info.value)
    assert "fullgraph print" not in capsys.readouterr().out
    x = torch.ones(2)
    assert_same(stenograph.compile(outer_relaxed, backend=cnt)(x), outer_relaxed(x))
