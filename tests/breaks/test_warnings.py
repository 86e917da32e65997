"""`warnings.warn` in compiled code: traced, and issued by the transformed code after the graph
with eager's text, category, file and line, shown once per location as eager shows it (torch.compile
breaks the graph there: one graph more). Where the filters could make it an error, inside a traced
`catch_warnings` block, or with a `stacklevel` passing a frame eager's stack holds differently, it
is a graph break, as before."""

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


def test_warn_is_traced_and_reported_at_the_users_line(cnt):
    compiled = stenograph.compile(_warns, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    expected, eager_warnings = _records(_warns, x, 2, calls=2)
    actual, compiled_warnings = _records(compiled, x, 2, calls=2)
    torch.testing.assert_close(actual, expected)
    assert compiled_warnings == eager_warnings and len(eager_warnings) == 2  # once per call ("always")
    assert eager_warnings[0][2] == __file__
    assert cnt.frame_count == 1
    assert torch_graph_count(_warns, (x, 2)) == 2  # torch.compile breaks at warnings.warn


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


def _scaled_in_place(x):
    warnings.warn("scaling in place", stacklevel=1)
    x.mul_(2)
    return x.sum()


def test_warn_and_an_input_mutation_in_one_graph(cnt):
    compiled = stenograph.compile(_scaled_in_place, backend=cnt, fullgraph=True)
    x, x_eager = torch.ones(3), torch.ones(3)
    expected, eager_warnings = _records(_scaled_in_place, x_eager)
    actual, compiled_warnings = _records(compiled, x)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x, x_eager)
    assert compiled_warnings == eager_warnings


def test_filters_that_make_the_warning_an_error_break_and_raise(cnt):
    """The warning would raise before the graph's in-place write: refused, it runs eagerly; the
    filters are guarded, so a call under other filters recompiles."""
    compiled = stenograph.compile(_scaled_in_place, backend=cnt)
    _records(compiled, torch.ones(3))
    assert cnt.frame_count == 1
    x = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(UserWarning, match="scaling in place"):
            compiled(x)
    torch.testing.assert_close(x, torch.ones(3))  # not scaled, as eager leaves it
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        with pytest.raises(stenograph.Unsupported, match="a UserWarning the warning filters may make an error"):
            stenograph.compile(_scaled_in_place, backend="eager", fullgraph=True)(torch.ones(3))


def test_guard_size_oblivious_warns_as_eager_in_one_graph(cnt):
    """torch's deprecated `guard_size_oblivious` warns through `typing_extensions.deprecated`
    (stacklevel 2: the caller's line) on each call."""
    from torch.fx.experimental.symbolic_shapes import guard_size_oblivious

    def fn(x):
        if guard_size_oblivious(x.size(0) == 0):
            return x + 1
        return x - 1

    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    x = torch.randn(2)
    for action, calls in (("always", 2), ("default", 3)):
        expected, eager_warnings = _records(fn, x, action=action, calls=calls)
        actual, compiled_warnings = _records(compiled, x, action=action, calls=calls)
        torch.testing.assert_close(actual, expected)
        assert compiled_warnings == eager_warnings and eager_warnings[0][1] is FutureWarning
        assert eager_warnings[0][2] == __file__
    assert cnt.frame_count == 2  # one per set of warning filters (they are guarded)


class _Warning(torch.nn.Module):
    def forward(self, x):
        warnings.warn("in forward", stacklevel=2)  # eagerly: nn.Module's call machinery
        return x + 1


def test_stacklevel_passing_a_frame_entered_another_way_breaks():
    module = _Warning()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explained = stenograph.explain(lambda x: module(x) * 2)(torch.ones(2))
    assert [b.reason for b in explained.break_reasons] == [
        "warnings.warn(stacklevel=2) passes _Warning.forward, which eager's stack may hold differently"
    ]


# CPython 3.14+ (`_py_warnings`): `catch_warnings.__enter__` takes the warnings module's lock, a
# C-backed `_Lock` the trace does not follow, so a frame with a traced block runs eagerly there
_CATCH_WARNINGS_LOCKS = hasattr(warnings, "_Lock")


def test_warn_inside_a_traced_catch_warnings_block_breaks():
    def fn(x):
        with warnings.catch_warnings(record=True) as caught:
            warnings.warn("recorded", stacklevel=1)
        return x + 1, [str(w.message) for w in caught]

    compiled = stenograph.compile(fn, backend="eager")
    if _CATCH_WARNINGS_LOCKS:
        with pytest.warns(stenograph.StenographWarning, match="runs eagerly"):
            assert compiled(torch.ones(1))[1] == fn(torch.ones(1))[1] == ["recorded"]
        return
    assert compiled(torch.ones(1))[1] == fn(torch.ones(1))[1] == ["recorded"]
    explained = stenograph.explain(fn)(torch.ones(1))
    assert "warnings.warn() inside a traced warnings.catch_warnings() block" in explained.break_reasons[0].reason


def test_a_catch_warnings_not_entered_is_returned_as_a_new_block(cnt):
    # torch.compile's own test: one graph; each call gives a block of its own, made with the
    # same arguments (returned twice, it is one object); it works when the caller enters it
    @stenograph.compile(backend=cnt, fullgraph=True)
    def fn(x):
        block = warnings.catch_warnings(record=True)
        return x.sin(), block, block

    x = torch.randn(8)
    _, a, same = fn(x)
    _, b, _ = fn(x)
    assert cnt.frame_count == 1
    assert isinstance(a, warnings.catch_warnings) and a is same and a is not b
    with a as caught:
        warnings.warn("seen", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["seen"]


def test_a_catch_warnings_entered_and_live_at_a_break_is_refused():
    def fn(x):
        block = warnings.catch_warnings()
        block.__enter__()
        y = x.sin()
        block.__exit__(None, None, None)
        return y, block

    with pytest.raises(stenograph.Unsupported, match="cannot be left and entered again"):
        stenograph.compile(fn, backend="eager", fullgraph=True)(torch.randn(2))
