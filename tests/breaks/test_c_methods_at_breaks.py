"""A C method loaded before a graph break (`log.append(print(x) or x)`: `log.append` sits on the
stack while `print` runs eagerly; likewise a tensor's `x.add` or a string's `",".join`) reaches
the resume function as a new bound-method object every call. It is guarded as its owner's method
by name, so identical calls reuse the compiled code instead of compiling again each time (a guard
on the method object's identity died with it after every call)."""

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter


def _append_after_print(x, log):
    y = x + 1
    log.append(print("logging") or y * 2)
    return y.sin(), log


def _dict_update_after_print(x, table):
    table.update(print("updating") or {"k": x.cos()})
    return x + 1, table


def _set_add_after_print(x, seen):
    seen.add(print("adding") or 3)
    return x * 2, seen


def _tensor_method_after_print(x, unused):
    return x.add(print("adding") or 1), unused


def _str_join_after_print(x, sep):
    return x * 2, sep.join(["a", str(print("joining"))])


@pytest.mark.parametrize(
    "fn, make_container",
    [
        (_append_after_print, list),
        (_dict_update_after_print, dict),
        (_set_add_after_print, set),
        (_tensor_method_after_print, tuple),
        (_str_join_after_print, lambda: ","),
    ],
)
def test_identical_calls_compile_once(fn, make_container, capsys, compiles):
    cnt = CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(4):
        x = torch.full((3,), float(i))
        expected = fn(x, make_container())
        eager_printed = capsys.readouterr().out
        got = compiled(x, make_container())
        assert capsys.readouterr().out == eager_printed
        torch.testing.assert_close(got[0], expected[0])
        if isinstance(expected[1], (set, str)):
            assert got[1] == expected[1]
        else:
            torch.testing.assert_close(got[1], expected[1])
        if i == 0:
            after_first = cnt.frame_count, len(compiles)
    assert (cnt.frame_count, len(compiles)) == after_first


def test_a_different_container_type_recompiles(capsys):
    """The method's owner is guarded too: a list then a deque (whose append is another method)."""
    import collections

    cnt = CompileCounter()
    compiled = stenograph.compile(_append_after_print, backend=cnt)
    x = torch.ones(3)
    compiled(x, [])
    first = cnt.frame_count
    out, log = compiled(x, collections.deque())
    assert isinstance(log, collections.deque) and len(log) == 1
    torch.testing.assert_close(log[0], (x + 1) * 2)
    assert cnt.frame_count > first
