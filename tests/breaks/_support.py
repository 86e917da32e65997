"""Helpers shared by the graph-break acceptance tests.

`torch_graph_count` runs torch.compile as a *peer* (never from inside stenograph) to learn how
many graphs torch hands to a counting backend for the same function, so that tests can assert
that stenograph's graph count matches torch's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

# ---------------------------------------------------------------------------------------------
# comparison helpers


def assert_same(actual: Any, expected: Any, path: str = "out") -> None:
    """Structural equality: same container types and keys, equal constants, close tensors.

    Tensors must also agree on requires_grad (assert_close checks dtype, device and layout).
    """
    assert type(actual) is type(expected), f"{path}: {type(actual)!r} != {type(expected)!r}"
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}[{key!r}]")
    elif expected is None:
        assert actual is None, f"{path}: {actual!r} is not None"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


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


# ---------------------------------------------------------------------------------------------
# graph inspection


def op_name(node: torch.fx.Node) -> str:
    """Short name of what a call node does: operator.mul / torch.mul -> "mul", "sum" -> "sum"."""
    target = node.target
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", str(target))


def call_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def ops_of(gm: torch.fx.GraphModule) -> list[str]:
    """The short names of a graph's operations, in order."""
    return [op_name(n) for n in call_nodes(gm)]


def line_of(fn: Callable, needle: str, occurrence: int = 1) -> int:
    """Absolute line number (in fn's file) of the n-th source line of fn containing needle."""
    lines, start = inspect.getsourcelines(fn)
    seen = 0
    for offset, text in enumerate(lines):
        if needle in text:
            seen += 1
            if seen == occurrence:
                return start + offset
    raise AssertionError(f"{needle!r} (occurrence {occurrence}) not in the source of {fn.__name__}")


# ---------------------------------------------------------------------------------------------
# torch.compile as a peer


class TorchCounter:
    """A torch.compile backend that counts the graphs it is given and runs each as is."""

    def __init__(self) -> None:
        self.frame_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.frame_count += 1
        self.graphs.append(gm)
        return gm.forward


def torch_graph_count(fn: Callable, *calls: Sequence[Any]) -> int:
    """Graphs that torch.compile(fn, backend=<counter>) hands over across `calls` (argument tuples).

    torch's caches are reset before and after, so nothing of torch's leaks into stenograph's run.
    """
    import torch._dynamo

    torch._dynamo.reset()
    counter = TorchCounter()
    compiled = torch.compile(fn, backend=counter)
    try:
        for args in calls:
            compiled(*args)
    finally:
        torch._dynamo.reset()
    return counter.frame_count
