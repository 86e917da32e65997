"""Cache entries hold no strong references to user modules or tensors (DESIGN decision 3)."""

from __future__ import annotations

import contextlib
import gc
import linecache
import logging
import weakref

import pytest
import torch
from helpers import assert_same

import stenograph
from stenograph import deferred_release, process_state

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


def test_a_given_up_trace_frees_the_tensors_it_read_without_a_collection(cnt):
    """An optimizer step (traced once whole, given up at a break, traced again): a gradient or
    optimizer state the user drops is freed at once, not at the next garbage collection (the
    given-up trace, alive in its exception's traceback, held them)."""
    model = torch.nn.Linear(4, 4, bias=False)
    opt = torch.optim.Adadelta(model.parameters(), lr=0.01)
    step = stenograph.compile(lambda: opt.step(), backend=cnt)
    model(torch.ones(4)).sum().backward()
    gc.collect()
    gc.disable()
    try:
        step()
        grad = weakref.ref(model.weight.grad)
        state = weakref.ref(opt.state[model.weight]["square_avg"])
        opt.zero_grad(True)
        assert grad() is None
        opt = None
        assert state() is None
    finally:
        gc.enable()


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


def _new_function(i: int):
    """A function with its own code object, as a user's generated or re-defined code makes."""
    namespace: dict = {}
    source = f"def f(x):\n    y = x * {i} + 1\n    print('between', {i})\n    return y.sin()\n"
    exec(compile(source, f"<user function {i}>", "exec"), namespace)
    return namespace["f"]


def _process_footprint() -> tuple[int, int, int]:
    """gc-tracked objects, linecache entries, FakeTensorMode's dispatch cache entries."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    gc.collect()
    return len(gc.get_objects()), len(linecache.cache), len(FakeTensorMode.cache)


@contextlib.contextmanager
def _pytest_log_capture_detached():
    """pytest's log capture keeps each record until the test ends (torch's AOTAutograd logs 16
    debug records a function to torch.__trace): its handlers, on the root logger and on those
    that do not propagate, are out of the way while the functions run."""
    loggers = [
        logging.getLogger(),
        *(log for log in logging.Logger.manager.loggerDict.values() if isinstance(log, logging.Logger)),
    ]
    detached = [(log, h) for log in loggers for h in log.handlers if type(h).__module__.startswith("_pytest")]
    for log, handler in detached:
        log.removeHandler(handler)
    try:
        yield
    finally:
        for log, handler in detached:
            log.addHandler(handler)


def _compile_call_drop(first: int, count: int, backend: str, capsys) -> None:
    x = torch.randn(3)
    with _pytest_log_capture_detached():
        for i in range(first, first + count):
            fn = _new_function(i)
            compiled = stenograph.compile(fn, backend=backend)
            assert_same(compiled(x), fn(x))
            compiled(x)
            del fn, compiled
    capsys.readouterr()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_functions_compiled_and_dropped_leave_nothing_behind(backend, capsys):
    """Each function (two graphs around a print: generated guards, resume code, torch.fx sources,
    fake dispatch entries) is freed with all it made: the process does not grow with their number."""
    count = 150 if backend == "eager" else 40
    _compile_call_drop(0, count, backend, capsys)  # torch's own one-time set-up happens here
    # the bounded memos (decoded instructions, shared small constants) hold what the process met
    # last, not what the dropped functions own
    stenograph.reset()
    process_state.clear_all(memos=True)
    objects, sources, dispatch = _process_footprint()
    _compile_call_drop(10_000, count, backend, capsys)
    stenograph.reset()
    process_state.clear_all(memos=True)
    objects_after, sources_after, dispatch_after = _process_footprint()
    assert sources_after <= sources and dispatch_after <= dispatch
    assert objects_after - objects < count // 4, objects_after - objects


def test_reset_frees_what_the_compiled_functions_made(capsys):
    """Kept functions keep their entries; `reset()` drops the entries and what they made, though
    the functions live on (and compile again on their next call)."""
    x = torch.randn(3)
    # the process's first compile reads torch's and stenograph's own source files into linecache
    stenograph.compile(_new_function(19_999), backend="aot_eager")(x)
    stenograph.reset()
    _, sources, dispatch = _process_footprint()
    kept = [stenograph.compile(_new_function(i), backend="aot_eager") for i in range(20_000, 20_010)]
    for fn in kept:
        fn(x)
    assert _process_footprint()[1] > sources
    stenograph.reset()
    assert _process_footprint()[1:] == (sources, dispatch)
    assert_same(kept[0](x), _new_function(20_000)(x))
    capsys.readouterr()


def test_a_freed_entrys_cleanup_waits_for_a_safe_point():
    """A finalizer runs wherever the collector does, possibly inside a loop over linecache (3.11's
    `linecache.checkcache`): the cleanup it queues changes nothing until the next compile."""
    name = "<stenograph test: deferred cleanup>"
    linecache.cache[name] = (1, None, ["x\n"], name)

    class Owner:
        pass

    owner = Owner()
    deferred_release.when_freed(owner, linecache.cache.pop, name, None)
    del owner
    gc.collect()
    assert name in linecache.cache
    stenograph.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    assert name not in linecache.cache


def _with_closures():
    """A function of its own code that makes a closure (and, before 3.12, a comprehension's
    function) anew on every call."""
    namespace: dict = {}
    source = "def f(x):\n    def scale(t):\n        return t * 2 + 1\n    return sum([scale(x) for _ in range(2)])\n"
    exec(compile(source, "<user function with closures>", "exec"), namespace)
    return namespace["f"]


def _compiled_caller(fn, backend):
    """A compiled function calling `fn`, which runs eagerly with its own calls compiled."""
    outer = stenograph.disable(fn, recursive=False)
    return stenograph.compile(lambda x: outer(x), backend=backend)


def test_closures_of_a_frame_run_eagerly_keep_their_entries_across_collections(cnt):
    """A frame run eagerly with its callees compiled makes its closures anew on each call: their
    entries belong to its code (as torch.compile's belong to the code object), so an identical
    call after a garbage collection compiles nothing, and dropping the function frees them."""
    fn = _with_closures()
    compiled = _compiled_caller(fn, cnt)
    x = torch.randn(3)
    assert_same(compiled(x), fn(x))
    compiled_frames = cnt.frame_count
    assert compiled_frames >= 1
    gc.collect()
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == compiled_frames
    assert_same(compiled(x + 1), fn(x + 1))
    assert cnt.frame_count == compiled_frames

    nested = [c for c in stenograph.entry.all_caches() if c.code in fn.__code__.co_consts]
    assert nested and all(c.entries for c in nested)
    ref = weakref.ref(nested[0])
    del nested, compiled, fn
    gc.collect()
    assert ref() is None
