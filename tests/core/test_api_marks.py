"""API beside compile(): assume_constant_result, disallow_in_graph, run, skip and the
`stenograph.compiler` namespace (torch.compiler's names)."""

from __future__ import annotations

import functools
import gc

import pytest
import torch
from helpers import assert_same

import stenograph
from stenograph import marks
from stenograph.testing import CompileCounter


@pytest.fixture
def restore_marks():
    """allow/disallow marks survive reset() by design: put them back after the test."""
    allowed, disallowed = set(marks._allowed_in_graph), set(marks._disallowed_in_graph)
    yield
    marks._allowed_in_graph.clear()
    marks._allowed_in_graph.update(allowed)
    marks._disallowed_in_graph.clear()
    marks._disallowed_in_graph.update(disallowed)


# ---------------------------------------------------------------------------------------------
# the torch.compiler-style namespace


def test_compiler_namespace_mirrors_torch_compiler_names():
    names = set(stenograph.compiler.__all__)
    # torch.compiler has the default-backend pair from torch 2.13 on (2.11 lacks it)
    newer_than_torch = {"set_default_backend", "get_default_backend"} - set(torch.compiler.__all__)
    assert names - newer_than_torch <= set(torch.compiler.__all__), names - set(torch.compiler.__all__)
    for name in names - {"is_dynamo_compiling"}:
        assert getattr(stenograph.compiler, name) is getattr(stenograph, name), name
    assert stenograph.compiler.config is stenograph.config
    assert stenograph.compiler.list_backends() == stenograph.list_backends()


@pytest.fixture
def restore_default_backend():
    """The default backend is a setting (reset() keeps it): put it back after the test."""
    yield
    stenograph.set_default_backend(None)


def test_default_backend_is_what_compile_uses_without_one(restore_default_backend, cnt):
    assert stenograph.compiler.get_default_backend() == "inductor"
    stenograph.compiler.set_default_backend(cnt)
    assert stenograph.get_default_backend() is cnt
    compiled = stenograph.compile(lambda x: x * 3)
    x = torch.randn(2)
    assert_same(compiled(x), x * 3)
    assert cnt.frame_count == 1
    other = CompileCounter()
    stenograph.compile(lambda x: x - 1, backend=other)(x)  # an explicit backend still wins
    assert (cnt.frame_count, other.frame_count) == (1, 1)
    stenograph.set_default_backend("eager")
    assert stenograph.get_default_backend() == "eager"
    stenograph.set_default_backend(None)
    assert stenograph.get_default_backend() == "inductor"


def test_default_backend_refuses_what_is_no_backend(restore_default_backend):
    with pytest.raises(stenograph.errors.InvalidBackend, match="unknown backend 'eagr'. Did you mean 'eager'"):
        stenograph.set_default_backend("eagr")
    with pytest.raises(stenograph.errors.InvalidBackend, match="takes a backend name"):
        stenograph.set_default_backend(3)
    assert stenograph.get_default_backend() == "inductor"


def test_cudagraph_mark_step_begin_marks_a_step_for_inductors_cudagraph_trees():
    from torch._inductor.cudagraph_trees import MarkStepBox

    before = MarkStepBox.mark_step_counter
    stenograph.compiler.cudagraph_mark_step_begin()
    assert MarkStepBox.mark_step_counter == before - 1  # what torch.compiler's does


def test_is_exporting_is_true_only_while_export_traces(cnt):
    def f(x):
        if stenograph.compiler.is_exporting() and torch.compiler.is_exporting():
            return x * 2
        return x - 1

    x = torch.randn(3)
    graph_module, _ = stenograph.export(f)(x)
    assert_same(graph_module(x), x * 2)  # folded while exporting: the graph has the exporting branch
    assert_same(stenograph.compile(f, backend=cnt)(x), x - 1)  # compiles fold False
    assert_same(f(x), x - 1)
    assert not stenograph.is_exporting()


def test_compiler_is_compiling_folds_inside_compiled_code(cnt):
    def f(x):
        if stenograph.compiler.is_compiling() and stenograph.compiler.is_dynamo_compiling():
            return x + 1
        return x - 1

    x = torch.randn(3)
    assert_same(stenograph.compile(f, backend=cnt, fullgraph=True)(x), x + 1)
    assert_same(f(x), x - 1)
    assert cnt.frame_count == 1


def test_compiler_reset_forgets_compiled_entries(cnt):
    compiled = stenograph.compiler.compile(lambda x: x * 2, backend=cnt)
    x = torch.randn(2)
    compiled(x)
    stenograph.compiler.reset()
    compiled(x)
    assert cnt.frame_count == 2


def test_skip_is_disable(cnt):
    assert stenograph.skip is stenograph.disable

    @stenograph.skip
    def eager_only(x):
        return x.sum().item()

    def f(x):
        y = x + 1
        return y * eager_only(y)

    x = torch.randn(3)
    assert_same(stenograph.compile(f, backend=cnt)(x), f(x))
    assert cnt.frame_count == 2  # the skipped call is a graph break


def test_disable_reason_is_quoted_in_the_break(cnt):
    @stenograph.compiler.disable(reason="talks to the database")
    def lookup(x):
        return x

    def f(x):
        return lookup(x + 1) * 2

    with pytest.raises(stenograph.Unsupported, match="marked stenograph.disable: talks to the database"):
        stenograph.compile(f, backend=cnt, fullgraph=True)(torch.randn(2))
    x = torch.randn(2)
    assert_same(stenograph.compile(f, backend=cnt)(x), f(x))


def test_a_wrapper_made_with_functools_wraps_of_a_disabled_function_is_compiled(cnt):
    """`functools.wraps` copies the disabled function's `__dict__`, mark included: the wrapper
    is still compiled (its call of the disabled one breaks), as torch.compile does."""

    @stenograph.disable
    def inner(x):
        return x + 1

    @functools.wraps(inner)
    def outer(x):
        return inner(x) * 2

    x = torch.ones(3)
    assert_same(stenograph.compile(outer, backend=cnt)(x), outer(x))
    assert cnt.frame_count == 1  # the product, after the break
    with pytest.raises(stenograph.Unsupported, match="marked stenograph.disable"):
        stenograph.compile(outer, backend="eager", fullgraph=True)(x)


def test_a_disabled_forward_runs_eagerly_at_the_break(cnt):
    """A module whose `forward` is disabled (stenograph's, or torch's `recursive=False` mark):
    the call is a graph break and forward runs as it is, not compiled as a frame of its own."""

    for mark in (stenograph.disable, stenograph.disable(recursive=False), torch._dynamo.disable(recursive=False)):

        class Eager(torch.nn.Module):
            @mark
            def forward(self, x):
                return x.sin() + 1

        stenograph.reset()  # the lambda's code, and its resume function's, compile again
        cnt.clear()
        model = Eager()
        x = torch.randn(3)
        assert_same(stenograph.compile(lambda x, m=model: m(x) * 2, backend=cnt)(x), model(x) * 2)
        assert (cnt.frame_count, cnt.op_count) == (1, 1), mark  # `* 2` alone, as torch.compile's


# ---------------------------------------------------------------------------------------------
# assume_constant_result

CALLS: list[int] = []
SETTINGS = {"scale": 3}


@stenograph.assume_constant_result
def current_scale() -> int:
    CALLS.append(1)
    return SETTINGS["scale"]


def test_assume_constant_result_is_called_once_while_tracing(cnt):
    CALLS.clear()

    def f(x):
        return x * current_scale()

    compiled = stenograph.compile(f, backend=cnt, fullgraph=True)
    x = torch.randn(4)
    assert_same(compiled(x), x * 3)
    assert CALLS == [1]
    assert_same(compiled(x), x * 3)
    assert CALLS == [1]  # not called again: the graph holds the constant
    assert cnt.frame_count == 1
    # the graph has no call of it, and a multiplication by the constant 3
    nodes = [n for n in cnt.graphs[0].graph.nodes if n.op == "call_function"]
    assert len(nodes) == 1 and 3 in nodes[0].args


def test_assume_constant_result_is_not_guarded(cnt):
    """As with torch: a changed result is not seen until something else recompiles (documented)."""
    CALLS.clear()
    compiled = stenograph.compile(lambda x: x + current_scale(), backend=cnt)
    x = torch.randn(2)
    assert_same(compiled(x), x + 3)
    SETTINGS["scale"] = 5
    try:
        assert_same(compiled(x), x + 3)  # the value seen while tracing
        assert_same(compiled(torch.randn(2, 2)).shape, torch.Size([2, 2]))
        assert cnt.frame_count == 2
        stenograph.reset()
        assert_same(compiled(x), x + 5)
    finally:
        SETTINGS["scale"] = 3


class Table:
    def __init__(self, size: int) -> None:
        self.size = size

    @stenograph.assume_constant_result
    def rows(self, extra: int) -> int:
        return self.size + extra


def test_assume_constant_result_method_guards_its_object_by_identity(cnt):
    def f(x, table):
        return x.new_full((table.rows(1),), 1.0) + x.sum()

    compiled = stenograph.compile(f, backend=cnt)
    x = torch.randn(3)
    small, big = Table(2), Table(4)
    assert_same(compiled(x, small), f(x, small))
    assert_same(compiled(x, small), f(x, small))
    assert cnt.frame_count == 1
    assert_same(compiled(x, big), f(x, big))  # another object: compiles again
    assert cnt.frame_count == 2


def test_assume_constant_result_needs_constant_arguments_and_result(cnt):
    @stenograph.assume_constant_result
    def needs_list(xs):
        return len(xs)

    def takes_list(x):
        return x + needs_list([x, x])

    with pytest.raises(stenograph.Unsupported, match="is not a constant"):
        stenograph.compile(takes_list, backend=cnt, fullgraph=True)(torch.randn(2))
    # a tensor argument is called with its real value (tests/python/test_assume_constant_tensors.py)

    class Opaque:
        scale = 1

    @stenograph.assume_constant_result
    def makes_object():
        return Opaque()

    def gets_object(x):
        return x + makes_object().scale

    with pytest.raises(stenograph.Unsupported, match=r"returned .*Opaque, which cannot be a constant"):
        stenograph.compile(gets_object, backend=cnt, fullgraph=True)(torch.randn(2))
    x = torch.randn(2)
    assert_same(stenograph.compile(gets_object, backend=cnt)(x), x + 1)  # a graph break otherwise


def test_assume_constant_result_tensor_is_held_by_the_compiled_code(cnt):
    made = []

    @stenograph.assume_constant_result
    def table():
        made.append(torch.arange(3.0))
        return made[-1]

    def f(x):
        return x * table()

    compiled = stenograph.compile(f, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    assert_same(compiled(x), x * torch.arange(3.0))
    made.clear()  # the compiled code keeps the tensor alive itself
    gc.collect()
    assert_same(compiled(x), x * torch.arange(3.0))
    assert_same(compiled(x + 1), (x + 1) * torch.arange(3.0))
    assert cnt.frame_count == 1 and made == []


def test_assume_constant_result_bad_input():
    with pytest.raises(TypeError, match="needs a function"):
        stenograph.assume_constant_result(3)
    with pytest.raises(TypeError, match="needs a function"):
        stenograph.assume_constant_result(Table)


# ---------------------------------------------------------------------------------------------
# disallow_in_graph


def _add_sub_add(x):
    x = torch.add(x, 1)
    x = torch.sub(x, 1)
    return torch.add(x, 1)


@pytest.mark.usefixtures("restore_marks")
def test_disallow_in_graph_breaks_at_each_call(cnt):
    stenograph.disallow_in_graph(torch.sub)
    x = torch.randn(3)
    assert_same(stenograph.compile(_add_sub_add, backend=cnt)(x), _add_sub_add(x))
    assert cnt.frame_count == 2
    assert [len(g.graph.find_nodes(op="call_function", target=torch.add)) for g in cnt.graphs] == [1, 1]
    explanation = stenograph.explain(_add_sub_add)(x)
    assert "disallow_in_graph" in explanation.break_reasons[0].reason
    with pytest.raises(stenograph.Unsupported, match="sub, which is marked disallow_in_graph"):
        stenograph.compile(_add_sub_add, backend=CompileCounter(), fullgraph=True)(x)


@pytest.mark.usefixtures("restore_marks")
def test_disallow_in_graph_survives_reset_and_allow_in_graph_undoes_it():
    stenograph.disallow_in_graph([torch.sub])
    stenograph.reset()
    counter = CompileCounter()
    x = torch.randn(3)
    stenograph.compile(_add_sub_add, backend=counter)(x)
    assert counter.frame_count == 2
    stenograph.allow_in_graph(torch.sub)
    stenograph.reset()
    counter = CompileCounter()
    assert_same(stenograph.compile(_add_sub_add, backend=counter)(x), _add_sub_add(x))
    assert counter.frame_count == 1


@pytest.mark.usefixtures("restore_marks")
def test_disallow_in_graph_bad_input():
    with pytest.raises(TypeError, match="needs a callable"):
        stenograph.disallow_in_graph(42)
    # torch's RuntimeError and wording (its message is what torch's tests match), then the remedy
    with pytest.raises(RuntimeError, match="disallow_in_graph is expected to be used on an already allowed.*disable"):
        stenograph.disallow_in_graph(_add_sub_add)
    with pytest.raises(RuntimeError, match="use stenograph.disable"):
        stenograph.disallow_in_graph(torch.Tensor.add)  # x.add() is a method call, not a call of it


# ---------------------------------------------------------------------------------------------
# run


def test_run_uses_cached_code_and_never_compiles(cnt):
    def f(x):
        return torch.sin(x) * 2

    calls = []

    def counting_backend(gm, example_inputs):
        compiled_graph = cnt(gm, example_inputs)

        def run_graph(*args):
            calls.append(1)
            return compiled_graph(*args)

        return run_graph

    compiled = stenograph.compile(f, backend=counting_backend, dynamic=False)
    x = torch.randn(3)
    compiled(x)
    assert cnt.frame_count == 1
    calls.clear()
    only_cached = stenograph.run(compiled)
    assert_same(only_cached(x), f(x))
    assert calls == [1]  # the cached graph ran
    y = torch.randn(5)
    assert_same(only_cached(y), f(y))  # a miss runs eagerly
    assert cnt.frame_count == 1 and calls == [1]
    assert_same(compiled(y), f(y))  # outside run(), the miss compiles as usual
    assert cnt.frame_count == 2


def test_run_as_context_manager_covers_resume_functions(cnt, capsys):
    def f(x):
        x = x + 1
        print("between")
        return x * 2

    compiled = stenograph.compile(f, backend=cnt)
    x = torch.randn(2)
    with stenograph.run():
        assert_same(compiled(x), f(x))
    assert cnt.frame_count == 0
    assert capsys.readouterr().out == "between\n" * 2
    compiled(x)
    assert cnt.frame_count == 2
    capsys.readouterr()
    y = torch.randn(4)
    with stenograph.run():
        assert_same(compiled(x), x * 0 + (x + 1) * 2)
        assert_same(compiled(y), (y + 1) * 2)  # new shape: eager, resume function included
    assert capsys.readouterr().out == "between\n" * 2
    assert cnt.frame_count == 2


def test_run_decorator_and_modules(cnt):
    model = torch.nn.Linear(3, 2)
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(4, 3)

    @stenograph.run()
    def step(inp):
        return compiled(inp)

    assert_same(step(x), model(x))
    assert cnt.frame_count == 0
    assert_same(compiled(x), model(x))
    assert_same(stenograph.run(compiled)(x), model(x))
    assert cnt.frame_count == 1
    with pytest.raises(TypeError, match="needs a callable"):
        stenograph.run(3)


@stenograph.run()
def _sin_times_ten(x):
    return torch.sin(x) * 10


def test_run_wrappers_called_by_compiled_code_are_inlined(cnt, capsys):
    """A `run()`-decorated function (stenograph's, or torch._dynamo's) called from compiled code
    is traced into the caller's graph, as torch.compile inlines it. Where it breaks the graph,
    the call runs through the wrapper, so compiled code called inside it compiles nothing."""
    torch_run_only = torch._dynamo.run()(lambda x: torch.cos(x) + 1)

    def caller(x):
        return torch.relu(_sin_times_ten(x) + torch_run_only(x))

    x = torch.randn(4)
    assert_same(stenograph.compile(caller, backend=cnt, fullgraph=True)(x), caller(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 6)

    inner_counter = CompileCounter()
    inner = stenograph.compile(lambda x: x.exp(), backend=inner_counter)

    @stenograph.run()
    def breaks_inside(x):
        print("inside run")
        return inner(x)

    compiled = stenograph.compile(lambda x: breaks_inside(x + 1) * 2, backend=cnt)
    assert_same(compiled(x), (x + 1).exp() * 2)
    assert inner_counter.frame_count == 0  # run-only inside: `inner` was not compiled
    assert capsys.readouterr().out == "inside run\n"


def _double(x):
    return x * 2


@pytest.mark.usefixtures("restore_marks")
def test_disallow_in_graph_takes_back_allow_in_graph(cnt):
    """A function marked allow_in_graph is a graph op, so disallow_in_graph accepts it; both take lists."""

    def f(x):
        return _double(x + 1) - 1

    assert stenograph.allow_in_graph([_double]) == [_double]
    x = torch.randn(3)
    assert_same(stenograph.compile(f, backend=cnt, fullgraph=True)(x), f(x))
    assert cnt.graphs[0].graph.find_nodes(op="call_function", target=_double)
    stenograph.disallow_in_graph(_double)
    stenograph.reset()
    counter = CompileCounter()
    assert_same(stenograph.compile(f, backend=counter)(x), f(x))
    assert counter.frame_count == 2
    with pytest.raises(RuntimeError, match="use stenograph.disable"):
        stenograph.disallow_in_graph(_double)  # no longer a graph op


def test_torchs_allow_in_graph_mark_is_honoured(cnt):
    """`torch._dynamo.allow_in_graph(fn)` (torch's registry of ids, which compiled autograd uses
    for its operations): one opaque node, as stenograph's own mark gives."""

    def triple(x):
        return x * 3

    def f(x):
        return triple(x + 1) - 1

    torch._dynamo.allow_in_graph(triple)
    x = torch.randn(3)
    assert_same(stenograph.compile(f, backend=cnt, fullgraph=True)(x), f(x))
    assert cnt.graphs[0].graph.find_nodes(op="call_function", target=triple)


def _forbidden_helper(x):
    return x * 2


def test_forbid_in_graph_makes_tracing_a_call_an_error_and_leaves_eager_calls_alone():
    marked = stenograph.forbid_in_graph(_forbidden_helper)
    assert marked is _forbidden_helper

    def f(x):
        return _forbidden_helper(x) + 1

    cnt = CompileCounter()
    x = torch.ones(3)
    with pytest.raises(AssertionError, match="Attempt to trace forbidden callable .*_forbidden_helper"):
        stenograph.compile(f, backend=cnt)(x)
    assert cnt.frame_count == 0
    assert_same(_forbidden_helper(x), x * 2)  # eager calls are not affected
    assert_same(f(x), x * 2 + 1)

    # called from code stenograph runs at a graph break: eager, allowed
    def g(x):
        return stenograph.disable(f)(x) - 1

    assert_same(stenograph.compile(g, backend=cnt)(x), x * 2)


def test_torchs_forbid_in_graph_mark_is_honoured_and_lists_are_marked():
    def one(x):
        return x + 1

    def two(x):
        return x + 2

    torch._dynamo.forbid_in_graph(one)
    assert stenograph.forbid_in_graph([two]) == [two]
    for fn in (one, two):

        def f(x, fn=fn):
            return fn(x)

        with pytest.raises(AssertionError, match="Attempt to trace forbidden callable"):
            stenograph.compile(f, backend="eager")(torch.ones(2))


def test_forbid_in_graph_needs_a_callable():
    with pytest.raises(TypeError, match=r"forbid_in_graph\(\) needs a callable, got int"):
        stenograph.forbid_in_graph(3)


def test_torchs_disallow_in_graph_mark_is_honoured():
    """`torch._dynamo.disallow_in_graph(torch.sub)` (ids kept by torch): each call breaks the
    graph under stenograph too, until torch's `allow_in_graph` undoes it."""

    def fn(a):
        x = torch.add(a, 1)
        x = torch.sub(x, 1)
        return torch.add(x, 1)

    cnt = CompileCounter()
    a = torch.randn(4)
    torch._dynamo.disallow_in_graph(torch.sub)
    try:
        assert_same(stenograph.compile(fn, backend=cnt)(a), fn(a))
        assert (cnt.frame_count, cnt.op_count) == (2, 2)
    finally:
        torch._dynamo.allow_in_graph(torch.sub)
    stenograph.reset()
    cnt = CompileCounter()
    assert_same(stenograph.compile(fn, backend=cnt)(a), fn(a))
    assert (cnt.frame_count, cnt.op_count) == (1, 3)


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.layer(torch.sigmoid(x))


def test_a_module_class_torch_disabled_runs_eagerly_with_its_hooks(cnt):
    """`torch._dynamo.disable` on a module class (torch wraps its `__call__` and `_call_impl`):
    calls of its instances break and run eagerly, hooks and forward, nothing of them compiled
    (its forward was compiled as a frame of its own); torch.compile: 2 graphs, sin / linear."""
    disabled = torch._dynamo.disable(type("_TorchDisabled", (_Inner,), {}))

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = disabled()
            self.head = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.head(self.inner(torch.sin(x)))

    model = Outer()
    model.inner.register_forward_pre_hook(lambda module, args: (args[0].sigmoid(),))
    x = torch.randn(4)
    assert_same(stenograph.compile(model, backend=cnt)(x), model(x))
    assert cnt.frame_count == 2
    assert [[n.target for n in g.graph.nodes if n.op == "call_function"] for g in cnt.graphs] == [
        [torch.sin],
        [torch._C._nn.linear],
    ]
