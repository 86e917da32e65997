"""`with torch.profiler.record_function(name):` in compiled code: traced away while no profiler
records (that is guarded), entered eagerly at a graph break while one does, so the range shows
in the profiler's trace as in eager."""

import torch

import stenograph

from ._support import check, t


def _ranged(x):
    with torch.profiler.record_function("scaled") as scope:
        y = x * 2
    return y + 1, type(scope).__name__


def test_range_is_traced_away_without_a_profiler(cnt):
    check(_ranged, lambda i: (t(3, seed=i),), cnt, torch_graphs=1)


def _ranged_with_break(x):
    with torch.profiler.record_function("scaled"):
        y = x * 2
        print("inside")
        z = y + 1
    return z


def test_a_break_inside_the_range(cnt, capsys):
    check(_ranged_with_break, lambda i: (t(3, seed=i),), cnt, capsys, graphs=2)


def _profiled_names(fn, x):
    with torch.profiler.profile() as prof:
        result = fn(x)
    return result, [e.name for e in prof.events() if e.name == "scaled"]


def test_a_recording_profiler_sees_the_range_and_recompiles(cnt):
    compiled = stenograph.compile(_ranged, backend=cnt)
    x = t(3)
    compiled(x)
    assert cnt.frame_count == 1
    (out, kind), names = _profiled_names(compiled, x)
    (expected, expected_kind), eager_names = _profiled_names(_ranged, x)
    torch.testing.assert_close(out, expected)
    assert kind == expected_kind == "record_function"
    assert names == eager_names == ["scaled"]
    assert cnt.frame_count == 3  # the profiler's state is guarded: the block compiled around a break
    compiled(x)
    assert cnt.frame_count == 3  # no profiler again: the first entry fits
