"""Breaks around closure cells and torch runtime libraries (optimizers)."""

import copy
import functools
import gc
import sys
import weakref

import pytest
import torch
from helpers import assert_same
from torch import nn

import stenograph


def _cell_live_at_break(x, scale):
    def scaled(t):
        return t * scale  # `scale` is a cell variable of this frame

    y = scaled(x)
    print("between")  # the break: `scale` must reach the resume function
    return scaled(y) + scale


def test_cell_variable_is_live_after_a_break(cnt, capsys):
    compiled = stenograph.compile(_cell_live_at_break, backend=cnt)
    for scale in (2.0, 2.0):
        x = torch.randn(3)
        assert_same(compiled(x, scale), _cell_live_at_break(x, scale))
    assert capsys.readouterr().out == "between\n" * 4
    assert cnt.frame_count == 2


def _make_closure(weight):
    def add_weight(x):
        y = x * 2
        print("break")
        return y + weight  # read after the break, from this closure's cell

    return add_weight


def test_closures_of_one_code_resume_with_their_own_cells(cnt, capsys):
    """Two closures share code, cache and resume functions, but each call resumes with its own
    cells (tensor cells are not guarded by value, so a wrong cell would go unnoticed)."""
    light, heavy = _make_closure(torch.ones(2)), _make_closure(torch.full((2,), 5.0))
    compiled_light = stenograph.compile(light, backend=cnt)
    compiled_heavy = stenograph.compile(heavy, backend=cnt)
    x = torch.arange(2.0)
    for _ in range(2):
        assert_same(compiled_light(x), light(x))
        assert_same(compiled_heavy(x), heavy(x))
    assert cnt.frame_count == 2  # one graph before the break, one after: shared by both closures


def test_resume_functions_keep_no_closure_alive(capsys):
    weight = torch.ones(2)
    alive = weakref.ref(weight)
    fn = _make_closure(weight)
    stenograph.compile(fn, backend="eager")(torch.ones(2))
    del fn, weight
    gc.collect()
    assert alive() is None


def _train_step(model, optimizer, x):
    optimizer.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss


def test_optimizer_calls_break_and_train_like_eager(cnt):
    """zero_grad and backward run eagerly at breaks; the forward and loss are one graph, the
    optimizer's step another (as with torch.compile); 3 steps give eager's losses and parameters."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    reference = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(reference.parameters(), lr=0.1)
    step = stenograph.compile(_train_step, backend=cnt)
    for _ in range(3):
        x = torch.randn(5, 4)
        torch.testing.assert_close(step(model, opt, x), _train_step(reference, opt_ref, x))
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)
    assert cnt.frame_count == 2


def _fstring_of_tensor(x):
    label = f"total={x.sum():.3f} first={x[0]!r}"
    return x * len(label), label


def test_fstring_of_a_tensor_breaks_and_formats_like_eager(cnt):
    """Formatting a tensor needs its value: a graph break at FORMAT_VALUE, same string as eager."""
    compiled = stenograph.compile(_fstring_of_tensor, backend=cnt)
    x = torch.tensor([1.0, 2.0, 3.0])
    out, label = compiled(x)
    expected, expected_label = _fstring_of_tensor(x)
    assert label == expected_label
    torch.testing.assert_close(out, expected)
    assert cnt.frame_count == 3


def _nonlocal_counter(x):
    count = 0

    def bump():
        nonlocal count
        count += 1

    bump()
    print("count", count)
    bump()
    return x + count, count


def _late_binding(x):
    k = 2
    scaled = lambda t: t * k  # noqa: E731
    print("made")
    k = 5
    return scaled(x)


def _late_binding_of_a_parameter(x, k=2):
    scaled = lambda t: t * k  # noqa: E731
    print("made")
    k = 5  # one store, but the call bound the parameter first
    return scaled(x)


def _walrus_in_a_comprehension(x):
    total = 0
    partial = [(total := total + i) for i in range(4) if print("i", i) is None]
    return x + total, partial


def _assigned_once(x):
    scale = 2
    return [print(i) or x * scale + i for i in range(2)]


def test_cells_assigned_again_are_shared_with_the_resume_function(cnt, capsys, recwarn):
    """A function made in the frame shares cells with it; where the variable is assigned again
    (nonlocal writes, a later assignment, a walrus), a copy of the cell would diverge, so the
    resume function receives the cells themselves (as free variables): the code after the break
    compiles, one graph as torch.compile, with eager's results and prints."""
    # 3.12 inlines comprehensions (PEP 709): the walrus's loop, with its break, is the frame's
    # own, which is then skipped (no graph), as torch.compile skips it
    inlined = sys.version_info >= (3, 12)
    for fn in (_nonlocal_counter, _late_binding, _late_binding_of_a_parameter, _walrus_in_a_comprehension):
        graphs = 0 if fn is _walrus_in_a_comprehension and inlined else 1
        cnt.clear()
        compiled = stenograph.compile(fn, backend=cnt)
        for i in range(2):
            expected = fn(torch.full((2,), float(i)))
            eager_out = capsys.readouterr().out
            actual = compiled(torch.full((2,), float(i)))
            assert capsys.readouterr().out == eager_out
            assert_same(actual, expected)
        assert cnt.frame_count == graphs, fn.__name__
    assert not [w for w in recwarn if "stenograph" in str(w.message)]


def _cell_assigned_after_a_break(x):
    x = x.clone()

    def store():
        x[0] = backup

    if x[0] >= -1e5:  # data-dependent: the break, before `backup` is bound
        pass
    backup = 1
    store()
    return x


def _cells_across_two_breaks(x):
    total = 0

    def add(v):
        nonlocal total
        total = total + v

    add(x.sum())
    print("first")
    add(x * 2)
    total = total * 10
    print("second")
    add(1)
    return total, add


def test_a_closure_sees_what_the_code_after_the_break_assigns(cnt):
    """test_misc's test_closure_with_mutation_and_graph_break: two graphs, as torch.compile."""
    compiled = stenograph.compile(_cell_assigned_after_a_break, backend=cnt)
    for _ in range(2):
        assert_same(compiled(torch.zeros(1)), _cell_assigned_after_a_break(torch.zeros(1)))
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_shared_cells_across_two_breaks_and_after_the_call(backend, capsys):
    """A resume function sharing the cells breaks again (its resume function shares them too),
    and the closure returned keeps the cell the frame ended with."""
    cnt = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_cells_across_two_breaks, backend=cnt)
    for i in range(2):
        x = torch.full((2,), float(i + 1))
        expected, expected_add = _cells_across_two_breaks(x)
        eager_out = capsys.readouterr().out
        actual, actual_add = compiled(x)
        assert capsys.readouterr().out == eager_out
        assert_same(actual, expected)
        expected_add(5)
        actual_add(5)
        assert_same(actual_add.__closure__[0].cell_contents, expected_add.__closure__[0].cell_contents)
    assert cnt.frame_count == 3  # the frame and its two resume functions, compiled once


def _shared_cell_in_a_try(x, fail):
    hits = []
    step = 1

    def record(v):
        hits.append(v * step)

    try:
        record(x.sum())
        print("inside")
        step = 3
        if fail:
            raise ValueError("boom")
        record(x.sum())
    except ValueError:
        step = 7
        record(x.sum())
    return len(hits), hits[-1]


def test_shared_cells_reach_an_exception_handler(cnt, capsys):
    compiled = stenograph.compile(_shared_cell_in_a_try, backend=cnt)
    for fail in (False, True, False):
        expected = _shared_cell_in_a_try(torch.ones(2), fail)
        eager_out = capsys.readouterr().out
        assert_same(compiled(torch.ones(2), fail), expected)
        assert capsys.readouterr().out == eager_out


def test_cells_assigned_once_are_copied_at_a_break(cnt, capsys, recwarn):
    compiled = stenograph.compile(_assigned_once, backend=cnt)
    for i in range(2):
        assert_same(compiled(torch.ones(2) * i), _assigned_once(torch.ones(2) * i))
    # the comprehension's loop has the break: its frame (3.11) or the whole frame (3.12+, where
    # comprehensions are inlined) is skipped, as torch.compile skips it
    assert cnt.frame_count == 0
    assert not [w for w in recwarn if "stenograph" in str(w.message)]


def _breaking_decorator(fn):
    @functools.wraps(fn)
    def wrapper():
        stenograph.graph_break()
        return fn()

    return wrapper


def _through_a_decorator(x):
    return _breaking_decorator(lambda: x * 3)()


def _through_no_grad(x):
    return torch.no_grad()(lambda: x * 3)()


def test_closures_called_at_a_break_are_this_calls(cnt):
    """A closure made anew each call and called at a break (a decorator's wrapper) runs with
    the cells of this call, not those of the call the code was compiled for."""
    for fn in (_through_a_decorator, _through_no_grad):
        compiled = stenograph.compile(fn, backend=cnt)
        for v in (1.0, 2.0, 5.0):
            x = torch.full((2,), v)
            assert_same(compiled(x), fn(x))


def _function_transforms(x):
    return torch.func.grad(lambda t: (t * t).sum())(x) + torch.vmap(lambda t: t * 2)(x)


def test_function_transforms_run_eagerly_at_breaks(recwarn):
    """torch.func.grad / torch.vmap are not traced: their calls break and run as in eager,
    without warnings from inside torch._functorch."""
    compiled = stenograph.compile(_function_transforms, backend="eager")
    x = torch.ones(3)
    assert_same(compiled(x), _function_transforms(x))
    assert not [w for w in recwarn if "stenograph" in str(w.message)]


def _recursive_inner(x):
    def inner(t, n):
        if n == 0:
            print("bottom")
            return t
        return inner(t * 2, n - 1)

    return inner(x, 2)


def test_function_calling_itself_through_its_cell(cnt, capsys, recwarn):
    compiled = stenograph.compile(_recursive_inner, backend=cnt)
    for v in (1.0, 3.0):
        assert_same(compiled(torch.full((1,), v)), _recursive_inner(torch.full((1,), v)))
    assert not [w for w in recwarn if "stenograph" in str(w.message)]


def _loop_over_a_local_iterator(x):
    seen = []
    it = iter(range(5))
    for i in it:
        if i == 1:
            print("skip")
            next(it)
        seen.append(i)
    return x + len(seen), seen


def test_iterator_reachable_twice_keeps_eager_semantics(capsys, recwarn):
    expected = _loop_over_a_local_iterator(torch.zeros(1))
    # the break inside the loop skips the frame: the iterator is the eager one
    actual = stenograph.compile(_loop_over_a_local_iterator, backend="eager")(torch.zeros(1))
    assert_same(actual, expected)
    assert not [w for w in recwarn if "stenograph" in str(w.message)]


_TRUSTED_MODULE_CODE = """
def log_then_double(x, rebuilt):
    if rebuilt:
        logger.info("buckets rebuilt")
    return x * 2
"""


class _RecordingLogger:
    """Another kind of logger object: the trusted module's global rebound to it."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def info(self, message: str) -> None:
        self.messages.append(message)


def test_an_object_global_of_a_torch_module_is_tracked_through_the_global(cnt, caplog):
    """torch's modules are trusted: their functions and classes are read unguarded. An object
    global of one (DDP's `logger`, used first thing in a resume function) is tracked and guarded
    through its global instead of making the frame give up and run eagerly."""
    import logging

    namespace = {"__name__": "torch._stenograph_test_trusted", "logger": logging.getLogger("stenograph.test.ddp")}
    exec(_TRUSTED_MODULE_CODE, namespace)
    fn = namespace["log_then_double"]
    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.arange(3.0)
    with caplog.at_level(logging.INFO, logger="stenograph.test.ddp"):
        for _ in range(2):
            assert_same(compiled(x, True), x * 2)
    assert [r.getMessage() for r in caplog.records] == ["buckets rebuilt"] * 2
    assert cnt.frame_count == 1  # the multiplication after the logging call's break

    namespace["logger"] = _RecordingLogger()  # the global's type is guarded
    assert_same(compiled(x, True), x * 2)
    assert namespace["logger"].messages == ["buckets rebuilt"]
    assert cnt.frame_count == 2  # recompiled: the logging call is now traced, the rest as before


def _log_through_a_torch_module(x, module):
    y = x + 1
    module.logger.info("through the module")
    return y * 2


def test_an_object_attribute_of_a_torch_module_is_tracked_through_the_module(cnt, caplog):
    """The same for an attribute of a torch module read through the module (`distributed.logger`):
    the one break is the logging call, not the attribute read."""
    import logging
    import types

    module = types.ModuleType("torch._stenograph_test_trusted_attribute")
    module.logger = logging.getLogger("stenograph.test.module")
    explanation = stenograph.explain(_log_through_a_torch_module)(torch.ones(2), module)
    assert [reason.reason for reason in explanation.break_reasons] == [
        "call to logging.Logger.info (logging is not traced)"
    ]
    compiled = stenograph.compile(_log_through_a_torch_module, backend=cnt)
    with caplog.at_level(logging.INFO, logger="stenograph.test.module"):
        for _ in range(2):
            assert_same(compiled(torch.ones(2), module), (torch.ones(2) + 1) * 2)
    assert [r.getMessage() for r in caplog.records] == ["through the module"] * 2
    assert cnt.frame_count == 2


def _shared_from_the_second_break(x):
    k = 2
    print("first")  # nothing closes over `k` yet: its value crosses as a value
    scaled = lambda t: t * k  # noqa: E731
    print("second")  # in a resume function: `k` is assigned again below, so the cell is shared
    k = 5
    return scaled(x) + k


def test_cells_shared_from_a_later_break(cnt, capsys):
    compiled = stenograph.compile(_shared_from_the_second_break, backend=cnt)
    for i in range(2):
        x = torch.full((2,), float(i))
        expected = _shared_from_the_second_break(x)
        eager_out = capsys.readouterr().out
        assert_same(compiled(x), expected)
        assert capsys.readouterr().out == eager_out
    assert cnt.frame_count == 1  # the last part's graph; the parts before it have no op


def _rest_as_python_with_a_shared_cell(x, k):
    g = lambda: k  # noqa: E731 (a closure over a cell the frame assigns again)
    y = x + 1
    torch._dynamo.step_unsupported()  # the rest of the frame runs as plain Python
    k = k + 1
    h = lambda: k * 10  # noqa: E731 (a closure made after the break shares the cell too)
    return y * g() + h()


def test_shared_cells_in_resume_code_run_as_plain_python(cnt):
    """The resume code itself runs, not a trace of it: every instruction naming the cell (3.14+
    names a dereference of an argument's cell as a plain local) must reach the shared cell
    (on 3.15 it read a local slot holding no cell: a crash)."""
    compiled = stenograph.compile(_rest_as_python_with_a_shared_cell, backend=cnt)
    for i in range(2):
        x = torch.full((2,), float(i))
        assert_same(compiled(x, 3), _rest_as_python_with_a_shared_cell(x, 3))
    assert cnt.frame_count == 1
