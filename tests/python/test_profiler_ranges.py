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


# -- profilers opened in the compiled function: traced away, as torch.compile does ---------------


def _profiled_block(x):
    y = x**2
    with torch.profiler.profile():
        y = y + 2
        with torch.profiler.record_function("my_function"):
            z = y**3
            z.tolist()  # graph break
            z = z + 1
    return z


def _autograd_profiled_block(x):
    y = x**2
    with torch.autograd.profiler.profile():
        y = y + 2
        with torch.autograd.profiler.record_function("my_function"):
            z = y**3
            z.tolist()  # graph break
            z = z + 1
    return z


def test_a_profile_block_is_traced_away(cnt):
    # torch's test_torch_profiler / test_autograd_profiler: one graph on each side of the break
    check(_profiled_block, lambda i: (t(2, 2, seed=i, grad=True),), cnt, graphs=2, grads=True)


def test_an_autograd_profile_block_is_traced_away(cnt):
    check(_autograd_profiled_block, lambda i: (t(2, 2, seed=i, grad=True),), cnt, graphs=2, grads=True)


def _asks_inside_and_after(x):
    with torch.profiler.profile():
        inside = torch.autograd._profiler_enabled()
        y = x + 1
        print("break")
        after_break = torch.autograd._profiler_enabled()
        y = y * 2
    return y, inside, after_break, torch.autograd._profiler_enabled()


def test_profiler_enabled_answers_as_eager_inside_the_block(cnt, capsys):
    # True inside the block, in the resume function after a break in it too (it gets the
    # block's `resumed_profile_exit`); False after it (a break, as torch.compile's). torch.compile
    # answers False inside: its own breaks at the query run it with no profiler
    check(_asks_inside_and_after, lambda i: (t(3, seed=i),), cnt, capsys, graphs=2)


def _profile_used_after(x):
    with torch.profiler.profile() as p:
        y = x + 1
    return y, len(p.events()) > 0


def test_the_profile_used_after_the_block_runs_the_frame_eagerly(cnt):
    # torch's test_torch_profiler_use_after_with_block: what it recorded must exist
    check(_profile_used_after, lambda i: (t(3, seed=i),), cnt, graphs=0)


def _profile_live_at_a_break(x):
    with torch.profiler.profile() as p:
        y = x + 1
        print("break")
        y = y * 2
    return y, type(p).__name__, len(p.events()) > 0


def test_a_profile_live_at_a_break_is_made_for_real(cnt, capsys):
    # the object is needed after the break: the call making it runs eagerly (a real profiler,
    # entered at a break) and the block's graphs record into it. torch.compile runs the frame
    # eagerly
    check(_profile_live_at_a_break, lambda i: (t(3, seed=i),), cnt, capsys, graphs=2, torch_graphs=0)


def _profile_with_a_callback(x):
    with torch.profiler.profile(on_trace_ready=lambda prof: print("trace ready")):
        y = x + 1
    return y


def test_a_profile_with_a_callback_is_entered_for_real(cnt, capsys):
    # the callback prints when the block ends, as in eager (torch.compile drops it)
    check(_profile_with_a_callback, lambda i: (t(3, seed=i),), cnt, capsys, graphs=1, peer=False)


def _disabled_profile(x):
    with torch.autograd.profiler.profile(enabled=False) as p:
        y = x + 1
    return y, p


def _profile_with_recording_options(x):
    cpu = torch.profiler.ProfilerActivity.CPU
    with torch.profiler.profile(activities=[cpu], record_shapes=True, with_stack=True) as p:
        y = x.sin()
    return y, isinstance(p, torch.profiler.profile)


def test_a_disabled_profile_enters_as_none(cnt):
    # torch.compile returns its stand-in for `p` there, which it cannot rebuild: the frame runs eagerly
    check(_disabled_profile, lambda i: (t(3, seed=i),), cnt, graphs=1, torch_graphs=0)
    assert stenograph.explain(_disabled_profile)(t(3)).graph_break_count == 0


def test_recording_options_are_traced_away(cnt):
    check(_profile_with_recording_options, lambda i: (t(3, seed=i),), cnt, graphs=1)


def _nested_profiles(x):
    with torch.profiler.profile():
        with torch.profiler.profile():
            y = x + 1
        on = torch.autograd._profiler_enabled()  # eager: False, the inner exit stopped it
    return y, on


def test_nested_profiles_run_the_frame_eagerly(cnt):
    check(_nested_profiles, lambda i: (t(3, seed=i),), cnt, graphs=0, torch_graphs=1)


def _simple_profile(x):
    with torch.profiler.profile():
        y = x.sin() + 1
    return y


def test_a_recording_profiler_recompiles_and_sees_the_graph(cnt):
    compiled = stenograph.compile(_simple_profile, backend=cnt)
    x = t(3)
    compiled(x)
    compiled(x)
    assert cnt.frame_count == 1  # identical calls: no recompile
    out, ops = _aten_ops_profiled(compiled, x)
    expected, eager_ops = _aten_ops_profiled(_simple_profile, x)
    torch.testing.assert_close(out, expected)
    assert ops == eager_ops  # the inner profiler, made for real, takes the session over as in eager
    assert cnt.frame_count == 2  # the profiler's state is guarded: the inner profile is made for real
    compiled(x)
    assert cnt.frame_count == 2  # no profiler again: the first entry fits


def _aten_ops_profiled(fn, x):
    with torch.profiler.profile() as outer:
        result = fn(x)
    return result, {e.name for e in outer.events() if e.name.startswith("aten::")}


def _no_profile(x):
    return x.sin() + 1


def test_a_profiler_outside_sees_the_compiled_graph():
    compiled = stenograph.compile(_no_profile, backend="aot_eager")
    x = t(3)
    compiled(x)
    with torch.profiler.profile() as outer:
        compiled(x)
    assert {"aten::sin", "aten::add"} <= {e.name for e in outer.events()}
