"""Cache entries hold no strong references to user modules or tensors (DESIGN decision 3)."""

from __future__ import annotations

import gc
import weakref

import torch
from helpers import assert_same

import stenograph

from ._support import MLP


def test_deleted_compiled_module_is_freed(cnt):
    """A compiled module and its wrapper are freed once the user drops them."""
    m = MLP()
    cm = stenograph.compile(m, backend=cnt)
    cm(torch.randn(2, 16))
    assert cnt.frame_count == 1
    r = weakref.ref(m)
    del m, cm
    gc.collect()
    assert r() is None


def test_deleted_compiled_module_is_freed_after_recompiles(cnt):
    """Several cache entries (shape recompiles) still do not keep the module alive."""
    m = MLP()
    cm = stenograph.compile(m, backend=cnt)
    for batch in (2, 3, 5):
        cm(torch.randn(batch, 16))
    assert cnt.frame_count == 2
    r = weakref.ref(m)
    del m, cm
    gc.collect()
    assert r() is None


def test_compiled_function_cache_does_not_keep_input_alive(cnt):
    """A compiled function's cache drops the input tensor once the caller does."""

    def fn(x):
        return x * 2 + 1

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(4)
    expected = fn(x)
    out = compiled(x)
    assert_same(out, expected)
    r = weakref.ref(x)
    del x
    gc.collect()
    assert r() is None
    # the compiled function still works for a new tensor, without recompiling
    y = torch.randn(4)
    assert_same(compiled(y), fn(y))
    assert cnt.frame_count == 1


def test_compiled_module_cache_does_not_keep_input_alive(cnt):
    """A compiled module's cache drops the input tensor once the caller does."""
    m = MLP()
    cm = stenograph.compile(m, backend=cnt)
    x = torch.randn(2, 16)
    with torch.no_grad():
        cm(x)
    assert cnt.frame_count == 1
    r = weakref.ref(x)
    del x
    gc.collect()
    assert r() is None
