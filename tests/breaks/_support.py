"""Helpers of the graph-break acceptance tests (the shared ones are in tests/helpers.py).

`torch_graph_count` runs torch.compile as a *peer* (never from inside stenograph) to learn how
many graphs torch hands to a counting backend for the same function, so that tests can assert
that stenograph's graph count matches torch's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from helpers import assert_same, count_torch_graphs


def assert_matches_eager(
    eager_fn: Callable,
    compiled_fn: Callable,
    make_args: Callable[[int], Sequence[Any]],
    capsys,
    *,
    calls: int = 3,
) -> list[Any]:
    """Call eager and compiled `calls` times with fresh arguments; compare results and output.

    `make_args(i)` builds the arguments of call i (fresh objects each time, so in-place changes
    made by one run cannot leak into the other). Every call must return the eager result and
    write exactly eager's stdout and stderr (same text, same order). Returns the compiled results.
    """
    results = []
    capsys.readouterr()
    for i in range(calls):
        expected = eager_fn(*make_args(i))
        eager_io = capsys.readouterr()
        actual = compiled_fn(*make_args(i))
        compiled_io = capsys.readouterr()
        assert compiled_io.out == eager_io.out, f"call {i + 1}: stdout {compiled_io.out!r} != eager {eager_io.out!r}"
        assert compiled_io.err == eager_io.err, f"call {i + 1}: stderr {compiled_io.err!r} != eager {eager_io.err!r}"
        assert_same(actual, expected, f"call {i + 1}")
        results.append(actual)
    return results


def torch_graph_count(fn: Callable, *calls: Sequence[Any]) -> int:
    """Graphs that torch.compile(fn, backend=<counter>) hands over across `calls` (argument tuples)."""

    def run(compiled: Callable) -> None:
        for args in calls:
            compiled(*args)

    return count_torch_graphs(fn, run)


def three_prints(x):
    """Tensor work around three prints: 4 graphs, for torch.compile too."""
    x = x + 1
    print("one", x.sum())
    x = x * 2
    print("two")
    x = x - 3
    print("three", x)
    return torch.relu(x)
