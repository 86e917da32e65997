"""Helpers shared by every test folder: structural comparison, graph inspection, source lines, and
torch.compile run as a peer.

Importable as `helpers` from any test module: pytest puts `tests/` on sys.path (`pythonpath` in
pyproject.toml). Folder-specific helpers stay in each folder's `_support.py`.
"""

from __future__ import annotations

import collections
import enum
import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch

from stenograph.testing import CompileCounter

# ---------------------------------------------------------------------------------------------
# comparison

_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)
# compared with == even when comparing objects by state
_BY_VALUE = (set, frozenset, enum.Enum, type, *_FUNCTIONS)


def assert_same(
    actual: Any, expected: Any, path: str = "out", *, by_state: bool = False, strides: bool = False
) -> None:
    """Structural equality: same container types and keys, equal constants, close tensors.

    Tensors must also agree on requires_grad (assert_close checks dtype, device and layout), and
    on their strides when `strides`. Anything else must be `==`, unless `by_state`: then modules
    compare by state_dict and public attributes, and other objects with a `__dict__` (dict
    subclasses too) by their attributes.
    """
    assert type(actual) is type(expected), f"{path}: {type(actual)!r} != {type(expected)!r}"
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
        if strides:
            assert actual.stride() == expected.stride(), f"{path}: strides {actual.stride()} != {expected.stride()}"
    elif isinstance(expected, (tuple, list, collections.deque)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        if isinstance(expected, collections.deque):
            assert actual.maxlen == expected.maxlen, f"{path}: maxlen {actual.maxlen} != {expected.maxlen}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]", by_state=by_state, strides=strides)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        if isinstance(expected, collections.defaultdict):
            assert actual.default_factory is expected.default_factory, f"{path}: default_factory differs"
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}[{key!r}]", by_state=by_state, strides=strides)
        if by_state and hasattr(expected, "__dict__"):
            assert_same(vars(actual), vars(expected), f"{path}.__dict__", by_state=by_state)
    elif by_state and isinstance(expected, torch.nn.Module):
        assert_same(dict(actual.state_dict()), dict(expected.state_dict()), f"{path}.state_dict()", by_state=True)
        plain = {k: v for k, v in vars(expected).items() if not k.startswith("_")}
        assert_same({k: v for k, v in vars(actual).items() if not k.startswith("_")}, plain, path, by_state=True)
    elif by_state and hasattr(expected, "__dict__") and not isinstance(expected, _BY_VALUE):
        assert_same(vars(actual), vars(expected), f"{path}.__dict__", by_state=True)
    elif expected is None:
        assert actual is None, f"{path}: {actual!r} is not None"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


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


def placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


# ---------------------------------------------------------------------------------------------
# source lines


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


def torch_peer(run: Callable[[], Any]) -> Any:
    """`run()`, which uses torch.compile, between resets of torch's caches, so nothing of torch's
    leaks into stenograph's runs."""
    import torch._dynamo

    torch._dynamo.reset()
    try:
        return run()
    finally:
        torch._dynamo.reset()


def count_torch_graphs(fn: Callable, run: Callable[[Callable], object]) -> int:
    """Graphs that torch.compile(fn, backend=<counter>) hands over while `run(compiled)` calls it."""
    counter = CompileCounter()  # the same counting backend serves torch.compile
    torch_peer(lambda: run(torch.compile(fn, backend=counter)))
    return counter.frame_count
