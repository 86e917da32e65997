"""A dynamic size turned into a Python value (`int()`, `float()`, `range()`) specialises the
entry on that size: a later size must recompile, not reuse the old value."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_same

import stenograph


def as_python_values(x):
    return x / float(x.shape[0]), [i for i in range(x.shape[0])], int(x.shape[0])


def test_python_values_of_a_dynamic_size_are_guarded(cnt) -> None:
    compiled = stenograph.compile(as_python_values, backend=cnt)
    for n in (2, 3, 4, 5, 3):
        x = torch.ones(n)
        assert_same(compiled(x), as_python_values(x))
    assert cnt.frame_count == 4  # 2 static, then 3, 4, 5 each specialised; 3 again reuses its entry


def set_item_at(x, n):
    x[n] = 7.0
    return x


def test_symbolic_int_arguments_reach_aot_autograd_as_symbols(cnt) -> None:
    """AOTAutograd gets the trace's SymInt, not the int: its decisions guard the same symbol."""
    compiled = stenograph.compile(set_item_at, backend="aot_eager")
    for n in (0, 1, 2, 3):
        assert_same(compiled(torch.zeros(4), n), set_item_at(torch.zeros(4), n))


def test_size_outside_a_marked_range_is_a_clear_error(cnt) -> None:
    compiled = stenograph.compile(set_item_at, backend=cnt)
    for n in (4, 8):
        x = torch.zeros(n)
        stenograph.mark_dynamic(x, 0, min=2, max=10)
        assert_same(compiled(x, 1), set_item_at(torch.zeros(n), 1))
    x = torch.zeros(200)
    stenograph.mark_dynamic(x, 0, min=2, max=10)
    with pytest.raises(stenograph.ConstraintViolation, match=r"size 200 in dimension 0, outside the range"):
        compiled(x, 1)
