"""A dynamic size turned into a Python value (`int()`, `float()`, `range()`) specialises the
entry on that size: a later size must recompile, not reuse the old value."""

from __future__ import annotations

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
