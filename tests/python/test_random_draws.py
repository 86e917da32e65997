"""Python's `random` module in compiled code: each number drawn is a graph input drawn anew on
every call, in the frame's order, so seeded programs give eager's numbers (variables/random_draws.py)."""

from __future__ import annotations

import random

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter

BACKENDS = ["eager", "aot_eager"]


def _seeded(fn, *args, seed=1):
    random.seed(seed)
    result = fn(*args)
    return result, random.random()  # and where the generator stands afterwards


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.allclose(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _counted(fn, backend):
    cnt = CompileCounter()
    inner = stenograph.compile(fn, backend=backend)
    return cnt, stenograph.compile(fn, backend=cnt) if backend == "counter" else inner


@pytest.mark.parametrize("backend", BACKENDS)
def test_draws_are_eagers_numbers_in_one_graph(backend):
    def fn(x):
        r1 = random.random()
        y = x + random.uniform(10, 20)
        r2 = random.randint(2, 18)
        return y + r1, r2, random.gauss(0.0, 1.0) * x

    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    cnt = CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt if backend == "eager" else backend)
    for seed in (1, 2, 1):
        assert _same(_seeded(compiled, x, seed=seed), _seeded(fn, x, seed=seed))
    if backend == "eager":
        assert cnt.frame_count == 1  # one graph, never recompiled for the new values


def test_each_call_draws_anew_under_fullgraph():
    @stenograph.compile(backend="eager", fullgraph=True)
    def fn(x):
        return (x + 1) * random.uniform(0, 1)

    results = [fn(torch.ones(2)) for _ in range(5)]
    assert all(not torch.equal(a, b) for a, b in zip(results, results[1:]))


def test_draw_feeding_a_factory_only():
    def fn(shape):
        torch.manual_seed(123)
        return torch.randn(shape) * random.randint(30, 100)

    compiled = stenograph.compile(fn, backend="eager")
    assert _same(_seeded(compiled, [2, 3]), _seeded(fn, [2, 3]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_draws_around_graph_breaks(backend):
    def fn(x):
        r1 = random.random()
        y = x + random.uniform(10, 20)
        print("between", y.sum().item() > 0)
        r2 = random.randint(2, 18)
        print("again")
        return y + r1, r2

    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    compiled = stenograph.compile(fn, backend=backend)
    for seed in (1, 7):
        assert _same(_seeded(compiled, x, seed=seed), _seeded(fn, x, seed=seed))


def test_a_decision_on_a_drawn_number_breaks_the_graph_there():
    def fn(x):
        dim1 = random.randrange(start=0, stop=3)
        dim2 = dim1
        while dim1 == dim2:
            dim2 = random.randrange(start=0, stop=3)
        return x * 2 + dim2, dim1

    x = torch.randn(4)
    compiled = stenograph.compile(fn, backend="eager")
    for seed in (1, 10, 3, 1):
        assert _same(_seeded(compiled, x, seed=seed), _seeded(fn, x, seed=seed))


def test_draws_used_as_sizes_and_branches():
    def fn(x):
        d1 = random.randrange(start=1, stop=5)
        d2 = random.randrange(start=1, stop=5)
        y = torch.ones(d1, d2)
        if random.random() > 0.5:
            return x + 2, y
        return x - 2, y

    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    compiled = stenograph.compile(fn, backend="eager")
    for seed in range(6):
        assert _same(_seeded(compiled, x, seed=seed), _seeded(fn, x, seed=seed))


def test_reseeding_inside_the_frame_keeps_the_order():
    def fn(x):
        a = random.random()
        random.seed(5)
        return x + a + random.random()

    x = torch.zeros(3)
    compiled = stenograph.compile(fn, backend="eager")
    assert _same(_seeded(compiled, x, seed=3), _seeded(fn, x, seed=3))


def test_draws_in_an_inlined_function_and_a_loop():
    def noise(x):
        return x + random.uniform(-1, 1)

    def fn(x):
        for _ in range(3):
            x = noise(x) * random.choice([1, 2]) if False else noise(x)
        return x, random.getrandbits(40)

    x = torch.zeros(2)
    cnt = CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt)
    assert _same(_seeded(compiled, x, seed=4), _seeded(fn, x, seed=4))
    assert _same(_seeded(compiled, x, seed=9), _seeded(fn, x, seed=9))
    assert cnt.frame_count == 1


def test_what_stays_a_graph_break():
    """Other generators, draws with arguments that are not constants, `choice`, numbers wider than
    an int64: eager's numbers."""

    def fn(x, rng, n):
        wide = random.getrandbits(64) + random.randint(0, 2**70)
        return x + rng.random() + random.randint(0, n) + random.choice([1, 2, 3]), wide

    x = torch.zeros(2)
    compiled = stenograph.compile(fn, backend="eager")
    for seed in (2, 3):
        got = _seeded(compiled, x, random.Random(0), 4, seed=seed)
        assert _same(got, _seeded(fn, x, random.Random(0), 4, seed=seed))


def test_a_draw_in_an_autograd_function_forward_runs_once():
    class Noisy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * random.random()

        @staticmethod
        def backward(ctx, g):
            return g

    def fn(x):
        return Noisy.apply(x) + random.random()

    x = torch.ones(2, requires_grad=True)
    compiled = stenograph.compile(fn, backend="eager")
    assert _same(_seeded(compiled, x, seed=8), _seeded(fn, x, seed=8))


def test_invalid_arguments_raise_eagers_error():
    def fn(x):
        return x + random.randint(5, 2)

    with pytest.raises(ValueError, match="empty range"):
        stenograph.compile(fn, backend="eager")(torch.zeros(1))


def test_no_guard_reads_a_drawn_number():
    def fn(x):
        return x * random.random()

    compiled = stenograph.compile(fn, backend="eager")
    compiled(torch.ones(2))
    (entry,) = stenograph.inspect(compiled).entries
    assert "random_draws" in entry.graph_code  # the drawn number's placeholder
    assert "___v0[0]" not in entry.guard_source and "random_draws[" not in entry.guard_source
    # the guard and the compiled code together draw once per call, as eager
    assert _same(_seeded(compiled, torch.ones(2), seed=6), _seeded(fn, torch.ones(2), seed=6))
