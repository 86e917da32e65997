"""Tensors that are globals of another module (a library the user file imports), reached
directly, through the library's functions, through its globals dict (`lib.__dict__`,
`vars(lib)`) and through objects without a source of their own (a `functools.partial`'s
arguments, a closure made in the library, a module-level dict of tensors): each is a graph
input read through the module's globals on every call (issue 27)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

import stenograph

from ._support import assert_same, check

_LIB_SOURCE = """
import functools, torch
W = torch.full((2,), 3.0)
TABLE = {"a": torch.full((2,), 5.0), "b": torch.full((2,), 7.0)}
PARTIAL = functools.partial(torch.add, other=torch.full((2,), 2.0))

def scale(x):
    return x * W

def from_table(x, k):
    return x + TABLE[k]

def make_closure():
    t = torch.full((2,), 11.0)
    return lambda x: x + t

CLOSURE = make_closure()
"""


@pytest.fixture
def lib():
    module = types.ModuleType("stenograph_test_tensor_lib")
    exec(compile(_LIB_SOURCE, "stenograph_test_tensor_lib.py", "exec"), module.__dict__)
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def _x(i):
    return (torch.full((2,), float(i + 1)),)


@pytest.mark.parametrize(
    "use",
    [
        lambda lib, x: lib.scale(x),
        lambda lib, x: x + lib.W,
        lambda lib, x: lib.from_table(x, "a") + lib.TABLE["b"],
        lambda lib, x: x + sum(lib.TABLE.values()),
        lambda lib, x: lib.PARTIAL(x),
        lambda lib, x: lib.CLOSURE(x),
        lambda lib, x: lib.make_closure()(x),
        lambda lib, x: x + lib.__dict__["W"],
        lambda lib, x: x + vars(lib)["W"],
        lambda lib, x: x + lib.__dict__.get("W") + lib.__dict__.get("missing", 1),
        lambda lib, x: x + sys.modules["stenograph_test_tensor_lib"].W,
    ],
    ids=[
        "function",
        "global",
        "dict",
        "dict_values",
        "partial",
        "closure",
        "new_closure",
        "dunder_dict",
        "vars",
        "dict_get",
        "sys_modules",
    ],
)
def test_library_tensor_is_a_graph_input(cnt, lib, use):
    def fn(x):
        return use(lib, x)

    check(fn, _x, cnt, graphs=1)


def test_library_tensor_replaced_is_seen(cnt, lib):
    """The library's tensor is read on every call (not baked in): a new tensor of the same
    metadata serves the same graph, one of another shape compiles again."""

    def fn(x):
        return lib.scale(x) + lib.TABLE["a"]

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    lib.W = torch.full((2,), -1.0)
    lib.TABLE["a"] = torch.full((2,), 0.5)
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1
    lib.W = torch.full((1,), 2.0)
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2


def test_library_global_presence_is_guarded(cnt, lib):
    """`name in lib.__dict__` and `.get(name, default)` answer from the dict at trace time and
    are guarded: a global added later compiles again."""

    def fn(x):
        if "EXTRA" in vars(lib):
            return x + lib.EXTRA
        return x + lib.__dict__.get("EXTRA", 0.5)

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1
    lib.EXTRA = torch.full((2,), 4.0)
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2
    del lib.EXTRA
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2  # the first entry serves again


def test_library_tensor_exported_as_constant(lib):
    def fn(x):
        return lib.scale(x) + lib.PARTIAL(x) + lib.CLOSURE(x)

    x = torch.ones(2)
    gm = stenograph.export(fn)(x).graph_module
    assert_same(gm(x), fn(x))
