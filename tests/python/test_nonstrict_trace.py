"""`nonstrict_trace`: a marked function is one graph node; its body is not traced (graph breaks
inside are fine), its arguments are flattened (pytree classes, dicts, modules) and its result
rebuilt. Compared with eager for results, gradients and the objects passed in."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch._dynamo
import torch.utils._pytree as pytree
from helpers import assert_same

import stenograph
from stenograph.testing import CompileCounterWithBackend as CompileCounter

BACKENDS = ["eager", "aot_eager"]


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


@pytest.fixture
def registered_point():
    pytree.register_pytree_node(
        Point, lambda p: ((p.x, p.y), None), lambda xy, _: Point(xy[0], xy[1]), serialized_type_name="tests.Point"
    )
    yield Point
    pytree._deregister_pytree_node(Point)


@stenograph.nonstrict_trace
def scaled_sum(x, y, scale):
    stenograph.graph_break()  # not traced: no break happens
    total = x * 0
    for t in (x, y):  # plain Python over the real (or fake) values
        total = total + t * scale
    return total


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_arguments_one_node_and_results_and_gradients_as_eager(backend):
    def fn(x, y):
        t0 = x + 1
        return t0 * scaled_sum(t0, y, 2) + y

    counter = CompileCounter(backend)
    compiled = stenograph.compile(fn, backend=counter, fullgraph=True)
    x, y = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    ex, ey = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
    out, expected = compiled(x, y), fn(ex, ey)
    assert_same(out, expected)
    out.sum().backward()
    expected.sum().backward()
    assert_same((x.grad, y.grad), (ex.grad, ey.grad))
    assert counter.frame_count == 1
    targets = [n.target for n in counter.graphs[0].graph.nodes if n.op == "call_function"]
    assert sum(type(t).__name__ == "NonstrictCall" for t in targets) == 1


def test_torch_dynamo_mark_is_honoured_and_leaves_the_function_itself_alone():
    def body(x):
        stenograph.graph_break()
        return x + 42

    marked = torch._dynamo.nonstrict_trace(body)
    counter = CompileCounter("eager")
    x = torch.randn(3)
    assert_same(stenograph.compile(lambda t: marked(t) * 2, backend=counter, fullgraph=True)(x), (x + 42) * 2)
    assert counter.frame_count == 1
    # the function it wraps keeps its break (no action at a distance)
    plain = CompileCounter("eager")
    assert_same(stenograph.compile(lambda t: body(t) * 2, backend=plain)(x), (x + 42) * 2)
    assert plain.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_pytree_class_sees_writes_made_in_the_frame(registered_point, backend):
    @stenograph.nonstrict_trace
    def product(p):
        return p.x * p.y

    def fn(p):
        p.x = p.x + 1
        return product(p), p.x

    p_eager, p_compiled = Point(torch.ones(3), torch.full((3,), 2.0)), Point(torch.ones(3), torch.full((3,), 2.0))
    expected = fn(p_eager)
    assert_same(stenograph.compile(fn, backend=backend, fullgraph=True)(p_compiled), expected)
    assert_same((p_compiled.x, p_compiled.y), (p_eager.x, p_eager.y))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dicts_lists_and_dataclasses_in_and_out(backend):
    @dataclasses.dataclass
    class Pair:
        a: torch.Tensor
        b: torch.Tensor

    pytree.register_dataclass(Pair)
    try:

        @stenograph.nonstrict_trace
        def mix(d, items):
            return {"sum": d["x"] + items[0], "pair": Pair(d["x"], items[1] * d["k"]), "n": len(items)}

        def fn(x, y):
            out = mix({"x": x, "k": 3}, [y, y + 1])
            return out["sum"] + out["pair"].b * out["n"], out["pair"].a

        x, y = torch.randn(2), torch.randn(2)
        assert_same(stenograph.compile(fn, backend=backend, fullgraph=True)(x, y), fn(x, y))
    finally:
        pytree._deregister_pytree_node(Pair)


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_argument_parameters_get_gradients(backend):
    @stenograph.nonstrict_trace
    def apply(modules, x):
        stenograph.graph_break()
        return modules["a"](x) + modules["b"](x)

    torch.manual_seed(0)
    modules = {"a": torch.nn.Linear(4, 4), "b": torch.nn.Linear(4, 4)}

    def fn(x):
        return apply(modules, x).relu().sum()

    x = torch.randn(2, 4)
    expected = fn(x)
    expected.backward()
    grads = [p.grad.clone() for m in modules.values() for p in m.parameters()]
    for m in modules.values():
        m.zero_grad()
    out = stenograph.compile(fn, backend=backend, fullgraph=True)(x)
    out.backward()
    assert_same(out, expected)
    assert_same([p.grad for m in modules.values() for p in m.parameters()], grads)


def test_another_module_recompiles():
    @stenograph.nonstrict_trace
    def apply(m, x):
        return m(x)

    counter = CompileCounter("eager")
    compiled = stenograph.compile(lambda m, x: apply(m, x), backend=counter)
    x = torch.randn(2, 3)
    first, second = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    assert_same(compiled(first, x), first(x))
    assert_same(compiled(second, x), second(x))
    assert counter.frame_count == 2


def test_constant_arguments_are_guarded():
    counter = CompileCounter("eager")
    compiled = stenograph.compile(lambda x, k: scaled_sum(x, x, k), backend=counter)
    x = torch.randn(3)
    assert_same(compiled(x, 2), scaled_sum(x, x, 2))
    assert_same(compiled(x, 2), scaled_sum(x, x, 2))
    assert counter.frame_count == 1
    assert_same(compiled(x, 5), scaled_sum(x, x, 5))
    assert counter.frame_count == 2


def test_numbers_out_and_symbolic_sizes():
    @stenograph.nonstrict_trace
    def stats(x):
        return x + 1, x.size(0), 0.5

    def fn(x):
        t, n, half = stats(x)
        return t * n + half

    compiled = stenograph.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
    for size in (4, 7):
        x = torch.randn(size)
        assert_same(compiled(x), fn(x))


def test_captured_global_tensor_is_a_constant():
    shift = torch.ones(1)

    @stenograph.nonstrict_trace
    def add_shift(x):
        return x + shift

    x = torch.randn(3)
    assert_same(stenograph.compile(lambda t: add_shift(t) * 2, backend="aot_eager", fullgraph=True)(x), (x + 1) * 2)


def test_marking_inside_the_compiled_function():
    def body(x):
        stenograph.graph_break()
        return x - 1

    def fn(x):
        return torch._dynamo.nonstrict_trace(body)(x) * 3

    x = torch.randn(3)
    assert_same(stenograph.compile(fn, backend="eager", fullgraph=True)(x), fn(x))


class _Unregistered:
    """A class pytree does not know: refused as a nonstrict_trace argument or result."""

    def __init__(self, t):
        self.t = t


@stenograph.nonstrict_trace
def _read_unregistered(obj):
    return obj.t * 2


def test_refusals_name_what_is_wrong():
    Unregistered, read = _Unregistered, _read_unregistered

    @stenograph.nonstrict_trace
    def make(x):
        return Unregistered(x)

    with pytest.raises(stenograph.Unsupported, match="Invalid input type for nonstrict_trace-ed function"):
        stenograph.compile(lambda o: read(o), backend="eager", fullgraph=True)(Unregistered(torch.ones(2)))
    with pytest.raises(stenograph.Unsupported, match="Unsupported output type for nonstrict_trace-ed function"):
        stenograph.compile(lambda x: make(x).t, backend="eager", fullgraph=True)(torch.ones(2))

    def defines_its_own(x):
        def inner(t):
            return t + 1

        return torch._dynamo.nonstrict_trace(inner)(x)

    with pytest.raises(stenograph.Unsupported, match="requires the function to be defined outside"):
        stenograph.compile(defines_its_own, backend="eager", fullgraph=True)(torch.ones(2))


def test_without_fullgraph_a_refused_call_runs_eagerly_with_eager_results():
    def fn(x):
        return _read_unregistered(_Unregistered(x + 1)) + 1

    x = torch.randn(3)
    explained = stenograph.explain(fn)(x)
    assert any("Invalid input type" in r.reason for r in explained.break_reasons)
    counter = CompileCounter("eager")
    assert_same(stenograph.compile(fn, backend=counter)(x), fn(x))
    # the graphs before and after the call, and the marked function run from eager code is
    # compiled as any function called there
    assert counter.frame_count == 3


def test_a_result_structure_other_than_the_traced_one_raises():
    calls = []

    @stenograph.nonstrict_trace
    def changing(x):
        calls.append(1)
        return (x * 2,) if len(calls) == 1 else {"a": x * 2}

    compiled = stenograph.compile(lambda x: changing(x), backend="eager")
    with pytest.raises(AssertionError, match="output structure mismatch"):
        compiled(torch.ones(2))


leaf_function = getattr(torch._dynamo.decorators, "leaf_function", None)
needs_leaf_function = pytest.mark.skipif(leaf_function is None, reason="torch._dynamo.leaf_function is torch 2.13's")


@needs_leaf_function
@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_leaf_functions_run_their_real_body_and_take_modules(backend, capsys):
    @leaf_function
    def logged(mod, x):
        print("real body")
        out = mod(x)
        return out, out.sum().item()

    @logged.register_fake
    def logged_fake(mod, x):
        out = mod(x)
        return out, out.sum().item()

    torch.manual_seed(0)
    linear = torch.nn.Linear(3, 3)

    def fn(x):
        out, total = logged(linear, x)
        return out.relu().sum() + total

    x = torch.randn(2, 3)
    expected = fn(x)
    expected.backward()
    grads = [p.grad.clone() for p in linear.parameters()]
    linear.zero_grad()
    capsys.readouterr()
    got = stenograph.compile(fn, backend=backend, fullgraph=True)(x)
    got.backward()
    assert capsys.readouterr().out == "real body\n"  # the fake ran while tracing, the body once
    assert_same(got, expected)
    assert_same([p.grad for p in linear.parameters()], grads)


@needs_leaf_function
def test_torch_leaf_function_whose_fake_disagrees_on_structure():
    @leaf_function
    def mismatched(x):
        return {"a": x, "b": x * 2}

    @mismatched.register_fake
    def mismatched_fake(x):
        return (x, x * 2)

    with pytest.raises(AssertionError, match="output structure mismatch"):
        stenograph.compile(lambda x: mismatched(x), backend="eager")(torch.ones(2))


@dataclasses.dataclass(frozen=True)
class _Pair:
    a: torch.Tensor
    b: torch.Tensor
    scale: float = 2.0
    tags: list = dataclasses.field(default_factory=list)


@stenograph.allow_in_graph
def _combine(pair):
    return pair.a * pair.scale + pair.b + len(pair.tags)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_allow_in_graph_function_taking_a_frozen_dataclass_made_in_the_frame(backend):
    """One node taking the dataclass's fields and rebuilding it, as torch.compile builds it in
    the graph for such a call; results and gradients as eager's."""

    def fn(x, y):
        return _combine(_Pair(x.sin(), y, tags=[1, 2])) + 1

    cnt = CompileCounter(backend)
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    for i in range(2):
        x, y = (torch.randn(3, generator=torch.Generator().manual_seed(i + k), requires_grad=True) for k in (0, 7))
        got, want = compiled(x, y), fn(x, y)
        assert_same(got, want)
        assert_same(torch.autograd.grad(got.sum(), (x, y)), torch.autograd.grad(want.sum(), (x, y)))
    assert cnt.frame_count == 1
