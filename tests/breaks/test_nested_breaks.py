"""Nested graph breaks (`config.nested_graph_breaks=True`, torch.compile's option of that name).

A break inside an inlined call no longer splits the compiled frame at its call: the graph before
the break takes the callers' code up to the call as well, and the code after it, in the callee
and then in each caller after its call, is one more frame (a chain of resume functions). Where
a caller's call lies in a loop, a `try` or `with` block, or code with closure cells, the break
goes where it would without the option, as far down as it can. Results, printed output,
gradients and guards must be eager's either way.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from helpers import CompileCounter, assert_same, count_torch_graphs
from torch import nn

import stenograph
from stenograph import config
from stenograph.graph import resume
from stenograph.testing import CompileCounterWithBackend

from ._support import assert_matches_eager


@pytest.fixture(autouse=True)
def nested() -> None:
    with config.patch(nested_graph_breaks=True):
        yield


def torch_nested_graph_count(fn, *calls) -> int:
    """Graphs torch.compile makes with its `nested_graph_breaks` on, over `calls`."""
    import torch._dynamo

    def run(compiled):
        with torch._dynamo.config.patch(nested_graph_breaks=True):
            for args in calls:
                compiled(*args)

    return count_torch_graphs(fn, run)


def fresh(*shape: int, requires_grad: bool = False):
    """Call i's arguments: the same values for eager and compiled, new ones per call."""

    def make(i: int) -> tuple:
        x = torch.arange(float(torch.Size(shape).numel())).reshape(shape) / 7 + i
        return (x.requires_grad_(requires_grad),)

    return make


def inner(x):
    x = x + 1
    print("inner", x.sum().item())
    return x * 2


def middle(x):
    return inner(x + 4) - 8


def outer(x):
    y = x.sin()
    return middle(y + 16) + y


def test_break_two_calls_deep_makes_two_graphs(cnt, capsys):
    """The print inside `inner` splits the trace once: everything before it in all three
    frames is one graph, everything after it one more (torch.compile's nested count)."""
    compiled = stenograph.compile(outer, backend=cnt)
    assert_matches_eager(outer, compiled, fresh(3), capsys, calls=3)
    assert cnt.frame_count == 2
    assert cnt.frame_count == torch_nested_graph_count(outer, (torch.randn(3),))


def test_without_the_option_the_callers_split(cnt, capsys):
    with config.patch(nested_graph_breaks=False):
        compiled = stenograph.compile(outer, backend=cnt)
        assert_matches_eager(outer, compiled, fresh(3), capsys, calls=2)
    assert cnt.frame_count > 2


def test_second_call_compiles_nothing_and_new_shape_recompiles(compiles, capsys):
    compiled = stenograph.compile(outer, backend="eager")
    compiled(torch.randn(3))
    first = len(compiles)
    compiled(torch.randn(3))
    assert len(compiles) == first
    x = torch.randn(5, 2)
    assert_same(compiled(x), outer(x))
    assert len(compiles) > first
    capsys.readouterr()


def twice(x):
    a = inner(x + 1)
    b = inner(x + 2) * 3
    return a + b


def test_two_breaking_calls_in_one_caller(cnt, capsys):
    compiled = stenograph.compile(twice, backend=cnt)
    assert_matches_eager(twice, compiled, fresh(4), capsys)
    assert cnt.frame_count == 3 == torch_nested_graph_count(twice, (torch.randn(4),))


def breaks_before_and_inside(x):
    x = x + 1
    print("first")
    return middle(x * 2) + 1


def test_a_break_in_the_frame_then_one_nested(cnt, capsys):
    compiled = stenograph.compile(breaks_before_and_inside, backend=cnt)
    assert_matches_eager(breaks_before_and_inside, compiled, fresh(2), capsys)
    assert cnt.frame_count == 3 == torch_nested_graph_count(breaks_before_and_inside, (torch.randn(2),))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        print("block", tuple(h.shape))
        return torch.relu(h) + x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = Block()
        self.second = Block()

    def forward(self, x):
        x = self.first(x)
        x = self.second(x * 2)
        return x.sum()


def test_break_in_submodule_forwards_with_gradients(capsys):
    """Two submodules whose forward prints: three graphs (two without the option's nesting
    would be five), and the parameters' gradients are eager's."""
    torch.manual_seed(0)
    model = Net()
    reference = Net()
    reference.load_state_dict(model.state_dict())
    cnt = CompileCounter()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(2, 4)
    capsys.readouterr()
    expected = reference(x)
    expected.backward()
    eager_out = capsys.readouterr().out
    actual = compiled(x)
    actual.backward()
    assert capsys.readouterr().out == eager_out
    assert_same(actual, expected)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_same(p.grad, q.grad, name)
    assert cnt.frame_count == 3 == torch_nested_graph_count(Net(), (x,))


def test_hooked_submodule_is_not_resumed_past(capsys):
    """A forward hook runs after the forward returns: the caller is then not resumed around
    it (the break goes to the module's call), and the hook's effect is eager's."""
    model = Net()
    model.first.register_forward_hook(lambda m, args, out: out * 10)
    compiled = stenograph.compile(model, backend="eager")
    assert_matches_eager(model, compiled, fresh(2, 4), capsys)


def scalar_inner(x):
    n = x.sum().item()
    print("n")
    return x * n


def scalar_outer(x):
    return scalar_inner(x + 1) + 1


def test_data_dependent_number_crosses_the_chain(cnt, capsys):
    """A number read from tensor data before the break is an input of the resumed graph: new
    values do not recompile it."""
    compiled = stenograph.compile(scalar_outer, backend=cnt)
    assert_matches_eager(scalar_outer, compiled, fresh(3), capsys, calls=4)
    assert cnt.frame_count == 2


store: list = []


def record_inner(x):
    store.append(x.sum())
    print("stored")
    return x + len(store)


def record_outer(x):
    store.append(0)
    return record_inner(x * 2) * 3


def test_side_effects_before_the_break_are_replayed_once(capsys):
    compiled = stenograph.compile(record_outer, backend="eager")
    for i in range(3):
        store.clear()
        expected = record_outer(torch.ones(2) * i)
        expected_store = list(store)
        store.clear()
        actual = compiled(torch.ones(2) * i)
        assert_same(actual, expected)
        assert len(store) == len(expected_store)
        assert_same(store[1], expected_store[1])
    capsys.readouterr()


def in_loop(x):
    for i in range(3):
        x = middle(x) * i
    return x


def in_try(x):
    try:
        x = middle(x) + 1
    finally:
        x = x * 2
    return x


def in_except(x):
    try:
        raise ValueError
    except ValueError:
        return middle(x)


def in_autocast(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = middle(x)
    return y + x


@pytest.mark.parametrize("fn", [in_loop, in_try, in_except, in_autocast])
def test_callers_that_cannot_be_resumed_give_eager_results(fn, capsys):
    """A caller whose call is in a loop, a `try` or `except` block or an autocast block: the
    break is not nested through it, and every result is eager's."""
    compiled = stenograph.compile(fn, backend="aot_eager")
    assert_matches_eager(fn, compiled, fresh(3, requires_grad=True), capsys)


def raising_inner(x):
    print("about to raise")
    raise KeyError("inner")


def raising_outer(x):
    return raising_inner(x + 1) + 1


def test_exception_from_the_eager_part_propagates():
    compiled = stenograph.compile(raising_outer, backend="eager")
    with pytest.raises(KeyError, match="inner"):
        compiled(torch.ones(2))


def grad_mode_inner(x):
    torch.set_grad_enabled(False)
    print("off")
    y = x * 2
    torch.set_grad_enabled(True)
    return y


def grad_mode_outer(x):
    return grad_mode_inner(x + 1).requires_grad


def test_grad_mode_switched_around_the_break(capsys):
    compiled = stenograph.compile(grad_mode_outer, backend="eager")
    assert_matches_eager(grad_mode_outer, compiled, fresh(2, requires_grad=True), capsys)
    assert torch.is_grad_enabled()


def cells_outer(x):
    acc = x + 1

    def bump(t):
        nonlocal acc
        acc = acc + t
        print("bump")
        acc = acc * 2
        return acc + 1

    r = bump(x)
    return r + acc


def closure_caller(x):
    scale = x.sum()

    def apply(t):
        return middle(t) * scale

    return apply(x + 1)


@pytest.mark.parametrize("fn", [cells_outer, closure_caller])
def test_frames_with_closure_cells_are_resumed_sharing_them(fn, cnt, capsys):
    """A break inside a nested function writing a cell of its caller (`nonlocal`), and inside a
    closure: each frame's resume function gets the cells themselves, so the writes before and
    after the break meet as in eager."""
    compiled = stenograph.compile(fn, backend=cnt)
    assert_matches_eager(fn, compiled, fresh(3), capsys)
    assert cnt.frame_count == 2 == torch_nested_graph_count(fn, (torch.ones(3),))


def in_with_inner(x):
    print("grad", torch.is_grad_enabled())
    return x * 2


def in_with(x):
    with torch.no_grad():
        y = in_with_inner(x + 1)
    return y + x, torch.is_grad_enabled(), y.requires_grad


def test_grad_mode_with_block_of_a_caller_is_kept(cnt, capsys):
    """The `with torch.no_grad()` around the call is entered again around the eager part and
    left where the resumed caller leaves it."""
    compiled = stenograph.compile(in_with, backend=cnt)
    assert_matches_eager(in_with, compiled, fresh(3, requires_grad=True), capsys)
    assert torch.is_grad_enabled()
    assert cnt.frame_count == 2 == torch_nested_graph_count(in_with, (torch.ones(3, requires_grad=True),))


def raise_at_break(x):
    print("raising")
    raise ValueError("at the break")


def raise_after_break(x):
    print("then")
    raise ValueError("after the break")


def with_raising(x, inner):
    with torch.no_grad():
        y = inner(x) + 1
    return y


@pytest.mark.parametrize("inner", [raise_at_break, raise_after_break])
def test_exception_inside_a_callers_with_block_restores_grad_mode(inner, capsys):
    """An exception from the eager part, or from the resumed callee, leaves the caller's
    grad-mode block as eager's `with` does."""
    compiled = stenograph.compile(with_raising, backend="eager")
    for _ in range(2):
        with pytest.raises(ValueError, match="the break"):
            compiled(torch.ones(2), inner)
        assert torch.is_grad_enabled()
    capsys.readouterr()


def step_inner(x):
    x = x + 2
    torch._dynamo.step_unsupported()
    return middle(x) + 4


def step_outer(x):
    return step_inner(x + 8) + 16


def test_step_unsupported_in_a_callee(cnt, capsys):
    """`step_unsupported()` inside a callee: the rest of the callee runs as plain Python (the
    functions it calls compiled), the callers' rest is compiled."""
    compiled = stenograph.compile(step_outer, backend=cnt)
    assert_matches_eager(step_outer, compiled, fresh(3), capsys)
    assert cnt.frame_count == 4


@stenograph.disable
def maybe_fail(x, fail):
    if fail:
        raise ValueError("failed")
    return x + 1


def handled_inner(x, fail):
    try:
        y = maybe_fail(x, fail)
    except ValueError:
        y = x - 100
    return y * 2


def handled_outer(x, fail):
    return handled_inner(x + 1, fail) + 3


def test_break_in_a_try_block_of_the_deepest_frame(cnt, capsys):
    """The breaking call lies in a `try` block of the callee: what it raises goes to the
    callee's handler, and the callers resume after it either way."""
    compiled = stenograph.compile(handled_outer, backend=cnt)
    for fail in (False, True, False, True):
        x = torch.ones(2)
        assert_same(compiled(x, fail), handled_outer(x, fail))
    assert cnt.frame_count == 2 + 1  # the handler runs as plain Python; the callers' rest compiles


def sized_inner(x, n):
    y = x * n
    print("sized")
    return y + n


def sized_outer(x):
    n = x.shape[0]
    return sized_inner(x + 1, n) * n


def test_symbolic_sizes_cross_the_chain(capsys):
    """Under `dynamic=True` a size passed down the callers stays symbolic after the break: new
    sizes reuse both graphs; a static first compile recompiles once, dynamic, as without nesting."""
    for dynamic, graphs in ((True, 2), (None, 4)):
        cnt = CompileCounter()
        compiled = stenograph.compile(sized_outer, backend=cnt, dynamic=dynamic)
        for size in (3, 5, 7, 9):
            x = torch.arange(float(size))
            assert_same(compiled(x), sized_outer(x))
        assert cnt.frame_count == graphs
    capsys.readouterr()


_DYNAMIC_SOURCE = """
import torch

def inner(x):
    print("|", end="")
    return x * 2

def outer(x):
    acc = x + 1

    def add(t):
        return inner(t) + acc

    return add(x) - 1
"""


def test_a_dropped_function_frees_its_chain(cnt, capsys):
    """Nothing of a nested break outlives the function: its code, the callees' code, the resume
    code of each link and the chain function are freed once the user drops it."""
    namespace: dict = {}
    exec(compile(_DYNAMIC_SOURCE, "<nested dynamic module>", "exec"), namespace)
    fn = namespace["outer"]
    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2
    codes = [c for c in list(resume._names) if resume.origin_of(c) in (fn.__code__, namespace["inner"].__code__)]
    assert len(codes) >= 2
    refs = [weakref.ref(o) for o in (fn, fn.__code__, namespace["inner"].__code__, *codes)]
    cnt.clear()
    del fn, compiled, namespace, codes
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    capsys.readouterr()


def branch_inner(x):
    if x == 0:
        return x + 1
    else:
        return x + 2


def branch_outer(x):
    return branch_inner(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_data_dependent_branch_in_a_callee_takes_each_way(backend, capsys):
    """Each way out of a branch on tensor data inside a callee resumes its own chain. The two
    chains are written alike (equal code objects); one used to run the other's compiled entry,
    so the second way returned the first way's result (torch's test_inline_func_jump_on_tensor_condition)."""
    counter = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(branch_outer, backend=counter)
    values = [1.0, 0.0, 1.0, 0.0]
    assert_matches_eager(branch_outer, compiled, lambda i: (torch.tensor([values[i]]),), capsys, calls=4)
    assert counter.frame_count == 3  # the graph before the branch, then one for each way
    assert counter.frame_count == torch_nested_graph_count(branch_outer, *[(torch.tensor([v]),) for v in values])


class Logged:
    """An object whose own hooks print (a graph break) before storing."""

    def __setattr__(self, name, value):
        print("set", name)
        super().__setattr__(name, value.cos())

    def __setitem__(self, key, value):
        print("item", key)
        super().__setattr__(key, value.tan())


def store_attr_then_more(obj, x):
    obj.a = x + 2
    return x + 4 + obj.a


def store_item_then_more(obj, x):
    obj["b"] = x * 3
    return x - obj.b


def store_in_a_helper(obj, x):
    y = store_attr_then_more(obj, x.sin())
    return y * 2


@pytest.mark.parametrize("fn", [store_attr_then_more, store_item_then_more, store_in_a_helper])
def test_a_break_in_a_store_hook_resumes_after_the_store(fn, cnt, capsys):
    """A break inside a user `__setattr__`/`__setitem__` that a STORE_ATTR/STORE_SUBSCR ran: the
    hook's rest and the caller after the store are one graph (torch's
    test_nested_store_attr_graph_break); the hook's return value is not pushed."""

    def run(obj, x):
        result = fn(obj, x)
        return result, dict(vars(obj))

    compiled = stenograph.compile(run, backend=cnt)
    assert_matches_eager(run, compiled, lambda i: (Logged(), fresh(3)(i)[0]), capsys)
    assert cnt.frame_count == 2
    hook_op = "cos" if fn is not store_item_then_more else "tan"
    assert hook_op in cnt.graphs[1].code  # the hook's rest is compiled with the caller's
    calls = [(Logged(), fresh(3)(i)[0]) for i in range(3)]
    assert cnt.frame_count == torch_nested_graph_count(run, *calls)
