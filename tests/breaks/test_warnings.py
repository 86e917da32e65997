"""`warnings.warn` in compiled code: a graph break (as in torch.compile) where the warning is
issued with eager's text, category, file and line, and shown once per location as eager shows it."""

from __future__ import annotations

import warnings

import pytest
import torch

import stenograph

from ._support import torch_graph_count


def _warns(x, n):
    y = x + n
    warnings.warn(f"careful {n}", RuntimeWarning, stacklevel=1)
    return y * 2


def _records(fn, *args, action="always", calls=1):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        results = [fn(*args) for _ in range(calls)]
    return results, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


def test_warn_is_a_graph_break_reported_at_the_users_line(cnt):
    compiled = stenograph.compile(_warns, backend=cnt)
    x = torch.randn(3)
    expected, eager_warnings = _records(_warns, x, 2)
    actual, compiled_warnings = _records(compiled, x, 2)
    torch.testing.assert_close(actual, expected)
    assert compiled_warnings == eager_warnings
    assert eager_warnings[0][2] == __file__
    assert cnt.frame_count == 2 == torch_graph_count(_warns, (x, 2))


def test_warn_is_shown_once_per_location_under_the_default_filter(cnt):
    compiled = stenograph.compile(_warns, backend=cnt)
    x = torch.randn(3)
    _, shown = _records(compiled, x, 5, action="default", calls=3)
    assert [w[0] for w in shown] == ["careful 5"]
    # a new message text is a new registry key, as in eager
    _, shown = _records(compiled, x, 6, action="default", calls=2)
    assert [w[0] for w in shown] == ["careful 6"]


def test_warn_with_stacklevel_two_names_the_caller():
    def deprecated(x):
        warnings.warn("old api", DeprecationWarning, stacklevel=2)
        return x + 1

    compiled = stenograph.compile(deprecated, backend="eager")
    x = torch.randn(3)
    _, eager_warnings = _records(deprecated, x)
    _, compiled_warnings = _records(compiled, x)
    assert compiled_warnings[0][:3] == eager_warnings[0][:3]
    assert compiled_warnings[0][2] == __file__


def test_warn_with_a_warning_instance_and_in_an_inlined_helper(cnt):
    def helper(x):
        warnings.warn(UserWarning("from helper"), stacklevel=1)
        return x - 1

    def fn(x):
        return helper(x * 2) + 1

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(3)
    expected, eager_warnings = _records(fn, x)
    actual, compiled_warnings = _records(compiled, x)
    torch.testing.assert_close(actual, expected)
    assert compiled_warnings == eager_warnings


def test_warn_escalated_to_an_error_raises_in_compiled_code():
    compiled = stenograph.compile(_warns, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="careful 1"):
            compiled(torch.randn(3), 1)
