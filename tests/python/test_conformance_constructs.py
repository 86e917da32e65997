"""Python constructs TorchDynamo's own test suite exercises (issue 27), each compared with eager and
with torch.compile's graph count: dicts keyed by tensors and objects, `next()` on iterators,
`functools.lru_cache`, builtin `max`/`min` over tensors, `nonlocal` chains, exceptions leaving
the frame, function attributes set while tracing."""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import operator
import types
import typing

import helpers
import pytest
import torch

import stenograph

from ._support import check, t


class _Key:
    """Hashed and compared by identity, as a dict key."""


_K1, _K2 = _Key(), _Key()


# -- dicts keyed by tensors and objects ------------------------------------------------------------


def test_dict_with_tensor_keys(cnt):
    def fn(x, y):
        d = {x: 1, y: 2}
        d[x] = d[x] + 10
        return x + d[x] + d.get(y, 0) + (x in d) + d.get(x + 1, 5) + ((x * 2) in d)

    check(fn, lambda i: (t(3, seed=i), t(3, seed=i + 9)), cnt)


def test_dict_with_tensor_keys_setdefault_pop(cnt):
    def fn(x, y):
        d = {}
        d.setdefault(x, []).append(1)
        d.setdefault(x, []).append(2)
        d[y] = [3]
        popped = d.pop(x)
        return x + len(popped) + len(d) + d.pop(x, [0])[0] + d.popitem()[0]

    check(fn, lambda i: (t(3, seed=i), t(3, seed=i + 9)), cnt)


def test_dict_with_tensor_keys_returned_and_iterated(cnt):
    def fn(x, y):
        d = {x: x + 1, y: 2}
        total = 0
        for k in d:
            total = total + k * 2
        for k, v in d.items():
            total = total + k + v
        return d, total, list(d.keys())[0] is x

    x, y = t(3), t(3, seed=1)
    d, total, first = stenograph.compile(fn, backend=cnt)(x, y)
    d_e, total_e, first_e = fn(x, y)
    assert [(k is x, k is y) for k in d] == [(True, False), (False, True)]
    assert torch.equal(d[x], d_e[x]) and d[y] == d_e[y] == 2
    assert torch.equal(total, total_e) and first is first_e is True
    assert cnt.frame_count == 1


def test_dict_comprehension_over_parameters(cnt):
    lin = torch.nn.Linear(3, 3)

    def fn(x):
        order = {p: i for i, p in enumerate(lin.parameters())}
        return x + order[lin.weight] + order[lin.bias]

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_aliased_tensor_keys_are_one_key(cnt):
    def fn(x, y):
        return x + len({x: 1, y: 2})

    same = torch.ones(3)
    assert stenograph.compile(fn, backend=cnt)(same, same).tolist() == fn(same, same).tolist() == [2.0] * 3
    assert stenograph.compile(fn, backend=cnt)(same, torch.ones(3)).tolist() == [3.0] * 3


def test_missing_tensor_key_raises_key_error_with_the_key():
    def fn(x, y):
        d = {x: 1}
        try:
            return d[y]
        except KeyError as e:
            return e.args[0] is y

    x, y = t(3), t(3, seed=1)
    assert stenograph.compile(fn, backend="eager")(x, y) is True


def test_dict_with_object_keys(cnt):
    def fn(x):
        a, b = _Key(), _Key()
        d = {_K1: x, _K2: x + 1, a: 3}
        d[_K1] = d[_K1] * 2
        del d[a]
        return d[_K1] + d[_K2] + (_K2 in d) + (a in d) + (b in d) + len(d)

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_dict_passed_in_with_object_keys(cnt):
    def fn(x, d):
        d[_K2] = x + 1
        return d[_K1] + d.get(_K2, 0) + x

    check(fn, lambda i: (t(3, seed=i), {_K1: 1, _K2: 2}), cnt)


def test_object_key_from_a_global_is_guarded(cnt, monkeypatch):
    def fn(x, d):
        return x + d.get(_K1, 0)

    compiled = stenograph.compile(fn, backend=cnt)
    x, d = t(3), {_K1: 1}
    assert compiled(x, d).tolist() == (x + 1).tolist()
    assert compiled(x, d).tolist() == (x + 1).tolist()
    assert cnt.frame_count == 1
    monkeypatch.setitem(globals(), "_K1", _Key())
    assert compiled(x, d).tolist() == x.tolist()  # another object: not in the dict
    assert cnt.frame_count == 2


def test_key_with_its_own_hash_runs_eagerly(cnt):
    class Hashed:
        def __hash__(self):
            return 1

        def __eq__(self, other):
            return True

    def fn(x):
        return {Hashed(): x}[Hashed()] + 1

    with pytest.warns(stenograph.StenographWarning, match="dict key .*Hashed object"):
        assert torch.equal(stenograph.compile(fn, backend=cnt)(t(3)), fn(t(3)))
    assert cnt.frame_count == 0


def test_lookup_in_a_dict_made_in_the_frame_recompiles_when_inputs_alias(cnt):
    """Whether `y` is found among keys made of `x` depends on the two being one object: a
    call passing one tensor for both compiles again."""

    def fn(x, y):
        d = {x: 1}
        return y + (5 if y in d else 7) + d.get(y, 0)

    compiled = stenograph.compile(fn, backend=cnt)
    a, b = torch.zeros(2), torch.zeros(2)
    assert compiled(a, b).tolist() == fn(a, b).tolist() == [7.0, 7.0]
    assert compiled(a, a).tolist() == fn(a, a).tolist() == [6.0, 6.0]
    assert compiled(b, a).tolist() == [7.0, 7.0]
    assert cnt.frame_count == 2


def test_dict_passed_in_with_tensor_keys(cnt):
    def fn(d, x):
        total = x * d[x]
        for k, v in d.items():
            total = total + (k * v if isinstance(k, torch.Tensor) else v)
        return total, len(d), {k: v + 1 for k, v in d.items()}

    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(2):  # new tensors each call: one graph
        k1, k2 = t(3, seed=i), t(3, seed=i + 5)
        d = {k1: 2.0, "scale": 3.0, k2: 4.0}
        total, n, plus_one = compiled(d, k1)
        total_e, n_e, plus_one_e = fn(d, k1)
        assert torch.equal(total, total_e) and n == n_e == 3
        assert list(plus_one) == list(plus_one_e) and list(plus_one.values()) == list(plus_one_e.values())
    assert cnt.frame_count == 1


def test_dict_passed_in_with_tensor_keys_is_guarded(cnt):
    """The keys' count, order of kinds, the tensors' shapes and the constant keys are guarded;
    the tensors are read by position, so new tensors of the same kind reuse the graph."""

    def fn(d, x):
        return sum(k * v for k, v in d.items()) + x

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2)
    cases = [
        {torch.ones(2): 1.0, torch.ones(2) * 2: 2.0},
        {torch.ones(2) * 3: 1.0, torch.ones(2): 2.0},  # new tensors: no new graph
        {torch.ones(1): 1.0, torch.ones(2): 2.0},  # a shape changed
        {torch.ones(2): 1.0},  # a key fewer
        {torch.ones(2): 1.0, torch.ones(2) * 2: 5.0},  # a value changed (a constant)
    ]
    for d in cases:
        assert torch.equal(compiled(d, x), fn(d, x))
    assert cnt.frame_count == 4


def test_dict_passed_in_with_tensor_keys_changed_in_the_frame(cnt):
    def fn(d, x, gone):
        d[x] = d.get(x, 0) + 1
        del d[gone]
        return x + len(d)

    def make(_):
        a, b = torch.ones(2), torch.ones(2) * 2
        return {a: 1, b: 2}, a, b

    for i in range(2):
        (d_c, x_c, g_c), (d_e, x_e, g_e) = make(i), make(i)
        assert torch.equal(stenograph.compile(fn, backend=cnt)(d_c, x_c, g_c), fn(d_e, x_e, g_e))
        assert [(k is x_c, v) for k, v in d_c.items()] == [(k is x_e, v) for k, v in d_e.items()] == [(True, 2)]
    d, x, gone = make(0)
    other = torch.ones(2)
    assert torch.equal(stenograph.compile(fn, backend=cnt)(d, other, gone), torch.full((2,), 3.0))
    assert len(d) == 2 and d[other] == 1


def test_sets_of_tensors_made_in_the_frame(cnt):
    """Found by identity; an in-place op's result is its input; a call aliasing the inputs
    compiles again."""

    def fn(p, q):
        y = p.add_(1)
        z = torch.Tensor.add_(y, 1)
        s = set([q])
        s.add(y)
        return y in s and z in s, len(s), len(frozenset({p, z})), q in {p}

    compiled = stenograph.compile(fn, backend=cnt)
    p, q = torch.zeros(5), torch.zeros(5, 10)
    assert compiled(p, q) == fn(torch.zeros(5), torch.zeros(5, 10)) == (True, 2, 1, False)
    assert cnt.frame_count == 1
    assert compiled(p, p) == fn(p, p) == (True, 1, 1, True)
    assert cnt.frame_count == 2


def test_iterating_a_set_of_several_tensors_made_in_the_frame_breaks_the_graph(cnt):
    def fn(x, y):
        total = x * 0
        for k in {x, y}:
            total = total + k
        return total

    x, y = t(3), t(3, seed=1)
    with pytest.raises(stenograph.Unsupported, match="order follows their addresses"):
        stenograph.compile(fn, backend=cnt, fullgraph=True)(x, y)
    with pytest.warns(stenograph.StenographWarning, match="order follows their addresses"):
        assert torch.equal(stenograph.compile(fn, backend=cnt)(x, y), fn(x, y))


def test_set_passed_in_with_tensors(cnt):
    def fn(s, x):
        total = x.clone()
        for k in s:
            total = total + k
        return total, x in s, len(s)

    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(2):  # new tensors each call: one graph
        a, b = t(3, seed=i), t(3, seed=i + 3)
        total, found, n = compiled({a, b}, a)
        total_e, found_e, n_e = fn({a, b}, a)
        assert torch.allclose(total, total_e) and found is found_e is True and n == n_e == 2
    assert cnt.frame_count == 1
    x = torch.ones(3)
    assert compiled({x, torch.zeros(3), torch.ones(3)}, x)[2] == 3  # a member more
    assert compiled({torch.ones(3), torch.zeros(3)}, x)[1] is False  # not found
    assert cnt.frame_count == 3


# -- functools.lru_cache / functools.cache -------------------------------------------------------


@functools.lru_cache(None)
def _doubled(n):
    return n * 2


@functools.cache
def _added(n, m=1):
    return n + m


@functools.lru_cache(maxsize=4)
def _scaled(t):
    return t * 2


def test_lru_cache_with_constant_arguments_is_inlined(cnt):
    def fn(x):
        return x + _doubled(3) + _added(4, m=2) + _added(1)

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_lru_cache_with_constant_arguments_is_guarded(cnt, monkeypatch):
    def fn(x):
        return x + _doubled(3)

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    assert torch.equal(compiled(x), x + 6)
    monkeypatch.setitem(globals(), "_doubled", functools.lru_cache(None)(lambda n: n * 10))
    assert torch.equal(compiled(x), x + 30)
    assert cnt.frame_count == 2


def test_lru_cache_with_a_tensor_argument_is_a_graph_break(cnt):
    def fn(x):
        y = x.sin()
        return _scaled(y) + 1

    explained = stenograph.explain(fn)(t(3))
    assert any("lru_cache-wrapped" in b.reason for b in explained.break_reasons)
    x = t(3)
    before = _scaled.cache_info().misses
    assert torch.equal(stenograph.compile(fn, backend=cnt)(x), fn(x))
    assert _scaled.cache_info().misses == before + 2  # the real wrapper ran, as eagerly


# -- builtin max() / min() over tensors --------------------------------------------------------------


def test_max_min_of_one_element_tensors(cnt):
    def fn(a, b):
        return max(a, b), min(a, b), max(a, b, a * 0.5), min([b, a])

    check(fn, lambda i: (t(1, seed=i, grad=True), t(1, seed=i + 5, grad=True)), cnt, grads=True)


def test_max_min_iterating_a_tensor(cnt):
    def fn(x):
        return max(x), min(x), max(x[0], x[1])

    check(fn, lambda i: (t(5, seed=i, grad=True),), cnt, grads=True)


def test_max_keeps_the_first_on_ties_and_nan(cnt):
    def fn(a, b):
        return max(a, b), min(a, b), max(b, a)

    nan = torch.tensor(float("nan"))
    for a, b in [(torch.tensor(2.0), torch.tensor(2.0)), (torch.tensor(3.0), nan), (nan, torch.tensor(1.0))]:
        compiled = stenograph.compile(fn, backend=cnt)(a, b)
        for got, want in zip(compiled, fn(a, b)):
            torch.testing.assert_close(got, want, equal_nan=True)


def test_max_of_tensors_of_several_elements_raises_as_eager(cnt):
    def fn(a, b):
        try:
            return max(a, b)
        except RuntimeError as e:
            return a.sum() + len(str(e))

    check(fn, lambda i: (t(3, seed=i), t(3, seed=i + 1)), cnt, peer=False)  # torch.compile: torch.maximum


def test_max_of_a_tensor_and_a_number_is_a_graph_break(cnt):
    def fn(x):
        return max(x.sum(), 0.5) * 2

    explained = stenograph.explain(fn)(t(3))
    assert explained.graph_break_count == 1
    for x in (t(3), torch.full((3,), -1.0)):
        got, want = stenograph.compile(fn, backend=cnt)(x), fn(x)
        assert type(got) is type(want) and float(got) == float(want)


# -- next() on iterators -------------------------------------------------------------------------------


def test_next_with_and_without_default(cnt):
    def fn(x):
        it = iter([x, x + 1, x + 2])
        a, b, c = next(it), next(it), next(it, None)
        return a + b + c + next(it, x * 0) + len(list(it))

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_next_in_loops_over_tuple_dict_and_range_iterators(cnt):
    def fn(x):
        it = iter((1, 2, 3))
        while (v := next(it, None)) is not None:
            x = x + v
        keys = iter({"a": 1, "b": 2})
        numbers = iter(range(5))
        next(numbers)
        for n in numbers:
            x = x * n + next(numbers, 0)
        return x, next(keys), list(keys)

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_in_consumes_an_iterator_only_up_to_the_item(cnt):
    def fn(x):
        it = iter([1, 2, 3, 4])
        found = 2 in it
        names = iter(["my_weight", "not_my_weight"])
        next(names)
        return x + found + next(it), "my_weight" in names, 9 in it, list(it)

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_iterator_dunders_called_directly(cnt):
    def fn(x):
        items = [x, x * 2, x * 3]
        it = items.__iter__()
        first = it.__next__()
        hint = it.__length_hint__()
        same = it.__iter__() is it
        return first + next(it) + hint + same + (1,).__iter__().__next__()

    check(fn, lambda i: (t(3, seed=i),), cnt, torch_graphs=2)


def test_dunder_next_of_an_exhausted_iterator_raises_stop_iteration(cnt):
    def fn(x):
        it = iter((x,))
        it.__next__()
        try:
            it.__next__()
        except StopIteration:
            return x + 1
        return x

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_length_hint_is_absent_where_python_has_none(cnt):
    def fn(x):
        return hasattr(map(abs, [1]), "__length_hint__"), hasattr(iter([1]), "__length_hint__"), x + 1

    check(fn, lambda i: (t(3, seed=i),), cnt)


# -- truth value of functions -------------------------------------------------------------------------


def test_truth_value_of_torch_functions(cnt):
    def fn(x):
        if torch.add:
            x = x + 1
        if torch.nn.functional.relu and torch.Tensor.add:
            x = x * 2
        if not torch.sin:
            x = x - 10
        return x, bool(torch.cos)

    check(fn, lambda i: (t(3, seed=i),), cnt)


# -- closures sharing cells made in the frame ---------------------------------------------------------


def test_returned_closures_share_their_cells(cnt):
    def fn(x):
        count = 0
        acc = x + 1

        def inc(t):
            nonlocal count, acc
            count += 1
            acc = acc + t
            return count

        def get():
            return count, acc

        inc(x)
        return inc, get

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    results = []
    for f in (fn, compiled):
        inc, get = f(x)
        results.append([get(), inc(x), get(), inc(x * 2), get()])
    helpers.assert_same(results[1], results[0])
    assert cnt.frame_count == 1
    assert helpers.count_torch_graphs(fn, lambda c: c(x)) == 1


def test_nonlocal_chain_over_three_levels(cnt):
    def fn(x):
        acc = x
        n = 1

        def l1():
            nonlocal n

            def l2():
                def l3():
                    nonlocal acc, n
                    acc = acc * 2
                    n += 10

                l3()
                nonlocal acc
                acc = acc + n

            n += 1
            l2()

        l1()
        l1()
        return acc, n

    check(fn, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True)


# -- classes with their own __new__ -----------------------------------------------------------------


class _Doubled:
    def __new__(cls, v):
        obj = super().__new__(cls)
        obj.doubled = v * 2
        return obj

    def __init__(self, v):
        self.v = v


class _DoubledChild(_Doubled):
    def __new__(cls, v):
        return super().__new__(cls, v + 1)


class _Plain:
    def __new__(cls, *args):
        return object.__new__(cls)


class _Other:
    def __new__(cls, v):
        return v * 3  # not an instance: no __init__ runs

    def __init__(self, v):
        raise AssertionError("not called")


def test_class_with_own_new(cnt):
    def fn(x):
        a, b = _Doubled(x), _DoubledChild(x)
        return a.doubled + a.v, b.doubled + b.v, isinstance(_Plain(1, 2), _Plain), _Other(x), type(b).__name__

    check(fn, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True)


def test_new_returned_object_is_rebuilt(cnt):
    def fn(x):
        obj = _Doubled(x)
        return obj

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_singleton_new_keeps_its_instance_on_the_class(cnt):
    def run(compiled):
        class Single:
            instance = None

            def __new__(cls):
                if cls.instance is None:
                    cls.instance = super().__new__(cls)
                return cls.instance

        def fn(x):
            a, b = Single(), Single()
            return x + (a is b), a

        f = compiled(fn)
        out, a = f(t(3))
        assert Single.instance is a and type(a) is Single
        out2, a2 = f(t(3))
        return out, out2, a2 is a

    want = run(lambda f: f)
    got = run(lambda f: stenograph.compile(f, backend=cnt))
    helpers.assert_same(got, want)


# -- super() inside classmethods ---------------------------------------------------------------------


class _Base:
    scale = 2

    def __init__(self, v):
        self.v = v

    @classmethod
    def build(cls, v):
        return cls(v * cls.scale)

    @classmethod
    def label(cls):
        return cls.__name__

    @staticmethod
    def bump(v):
        return v + 1


class _Derived(_Base):
    scale = 3

    @classmethod
    def build(cls, v):
        obj = super().build(v)
        obj.label = super().label()
        return obj

    @classmethod
    def both(cls, v):
        return super(_Derived, cls).bump(v) + super().bump(v)  # noqa: UP008 - the two-argument form is tested


_DERIVED = _Derived(1)


def test_super_in_classmethods_called_through_class_and_instance(cnt):
    def fn(x):
        a, b = _Derived.build(x), _DERIVED.build(x)
        return (
            a.v,
            a.label,
            b.v,
            type(b).__name__,
            _Derived.both(x),
            _DERIVED.both(x),
            super(_Derived, _Derived).build(x).v,
        )

    check(fn, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True)


def test_endless_itertools_iterators(cnt):
    def fn(x):
        counter = itertools.count(3, 2)
        colours = itertools.cycle(iter([1, 2]))
        ones = itertools.repeat(x)
        picked = list(itertools.islice(itertools.count(), 2, 5))
        pairs = list(zip(itertools.count(10), [x, x * 2]))
        for _ in range(3):
            x = x + next(counter) * next(colours) + next(ones)
        return x, picked, pairs, next(colours)

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_count_of_floats_adds_as_cpython_adds(cnt):
    def fn(x):
        return x + 1, list(itertools.islice(itertools.count(0.1, 0.1), 12))  # 0.30000000000000004, ...

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_count_from_numbers_a_recompile_made_symbolic(cnt):
    def fn(x, bounds):
        counter = itertools.count(*bounds)
        for _ in range(4):
            x = x + next(counter)
        return x

    starts = [(1,), (10,), (5, -1)]
    check(fn, lambda i: (t(2, seed=i), starts[i]), cnt, calls=3, graphs=3)


def test_tee_gives_independent_iterators(cnt):
    def fn(x):
        a, b = itertools.tee([x, x * 2, x * 3])
        first = next(a)
        return first + sum(b), list(a)

    check(fn, lambda i: (t(3, seed=i),), cnt)


def test_endless_iterator_live_at_a_graph_break_runs_eagerly(cnt):
    def fn(x):
        counter = itertools.count(5)
        y = x + next(counter)
        print("break")
        return y + next(counter)

    with pytest.warns(stenograph.StenographWarning, match="itertools.count object is live at a graph break"):
        assert torch.equal(stenograph.compile(fn, backend=cnt)(t(3)), fn(t(3)))


# -- isinstance() with typing aliases ------------------------------------------------------------


def test_isinstance_with_typing_aliases(cnt):
    import typing

    def fn(x, m):
        r = x
        if isinstance(m, typing.Mapping):
            r = r + 1
        if isinstance(m, typing.Sequence):
            r = r + 10
        if isinstance(m, typing.Optional[dict]):  # noqa: UP045 (the alias itself is tested)
            r = r + 100
        if isinstance(m, typing.Union[int, list]):  # noqa: UP007
            r = r + 1000
        if isinstance(m, int | str):
            r = r + 10000
        return r

    values = [{"a": 1}, [1], 3, "s", None]
    check(fn, lambda i: (t(2, seed=i), values[i]), cnt, graphs=len(values), calls=len(values))


def test_isinstance_with_an_alias_eager_refuses_raises_as_eager(cnt):
    import typing

    def fn(x, m):
        messages = []
        for alias in (typing.Any, list[int]):
            try:
                isinstance(m, alias)
            except TypeError as e:
                messages.append(str(e))
        return x + len(messages), messages

    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    got, want = compiled(t(2), [1]), fn(t(2), [1])
    assert torch.equal(got[0], want[0]) and got[1] == want[1] and len(want[1]) == 2


# -- attributes a functools.partial read from outside lacks --------------------------------------


def _sin_plus(x, y):
    return torch.sin(x) + y


_PARTIAL = functools.partial(_sin_plus, y=4)


def test_hasattr_of_a_partial_passed_in_is_guarded(cnt):
    def fn(x):
        return _PARTIAL(x) + 1 if hasattr(_PARTIAL, "__name__") else _PARTIAL(x) - 1

    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    x = t(3)
    assert torch.equal(compiled(x), fn(x))
    _PARTIAL.__name__ = "named"  # set on the partial's own __dict__: recompiled
    try:
        assert torch.equal(compiled(x), fn(x)) and torch.equal(fn(x), _PARTIAL(x) + 1)
    finally:
        del _PARTIAL.__name__
    assert cnt.frame_count == 2


def test_type_of_iterators_over_containers_made_in_the_frame(cnt):
    def fn(x):
        its = [iter([x]), reversed([x]), iter({"a": x}), iter({"a": x}.values()), iter({"a": x}.items()), iter({1})]
        names = [type(it).__name__ for it in its]
        return x + len(names), names, isinstance(its[0], list), type(its[0]) is type(iter([]))

    check(fn, lambda i: (t(2, seed=i),), cnt)


# -- frozen dataclasses as dict keys ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Point:
    x: float
    y: int


@dataclasses.dataclass(frozen=True)
class _Segment:
    start: _Point
    label: str


@dataclasses.dataclass(frozen=True)
class _OwnEquality:
    x: int

    def __eq__(self, other):
        return isinstance(other, _OwnEquality)

    def __hash__(self):
        return 0


def test_frozen_dataclasses_made_in_the_frame_are_keys_by_their_fields(cnt):
    def fn(x):
        d = {_Point(1.5, 2): x, _Segment(_Point(0.0, 1), "a"): x * 2}
        d[_Point(1.5, 2)] = d[_Point(1.5, 2)] + 1  # an equal new object finds the same entry
        members = {_Point(1.5, 2), _Point(1.5, 2), _Point(1.5, 3)}
        return d[_Segment(_Point(0.0, 1), "a")] + d[_Point(1.5, 2)], len(d), len(members), _Point(9.0, 9) in d

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_a_dataclass_key_with_its_own_equality_runs_eagerly(cnt):
    def fn(x):
        d = {_OwnEquality(1): x}
        return d[_OwnEquality(2)] + 1  # the class says all are equal

    x = t(2)
    with pytest.warns(stenograph.StenographWarning, match="_OwnEquality object created while tracing"):
        assert torch.equal(stenograph.compile(fn, backend=cnt)(x), fn(x))


def test_groupby_groups_share_one_iterator(cnt):
    def fn(x, letters):
        pairs = [(k, x * len(list(g))) for k, g in itertools.groupby(letters)]
        stale = list(itertools.groupby(letters))  # moving on empties the groups before
        keyed = [(k, sum(g)) for k, g in itertools.groupby([x, x * 2, x[:2], x[:2] * 3], key=len)]
        return pairs, [(k, list(g)) for k, g in stale], keyed, isinstance(stale, list)

    check(fn, lambda i: (t(3, seed=i), "aabccc"[i:]), cnt, calls=2, graphs=2)


def test_groupby_calls_the_key_once_per_item_in_order(cnt):
    def fn(x, values, log):
        def key(v):
            log.append(("key", v))
            return v // 2

        out = []
        for k, g in itertools.groupby(values, key):
            log.append(("group", k))
            out.append(x * k + len(list(g)))
        return out

    # torch.compile (2.13) runs this frame eagerly (0 graphs): no peer count to compare
    check(fn, lambda i: (t(2, seed=i), [1, 2, 3, 5, 4], []), cnt, peer=False)


def test_takewhile_and_dropwhile_stop_calling_the_predicate_as_eager_does(cnt):
    def fn(x, values, log):
        def small(v):
            log.append(v)
            return v < 3

        taken = itertools.takewhile(small, values)
        first = next(taken)
        rest = list(taken)
        dropped = list(itertools.dropwhile(small, values))
        return x + first + sum(rest) + sum(dropped), isinstance(taken, itertools.takewhile)

    check(fn, lambda i: (t(2, seed=i), [1, 2, 5, 1, 7], []), cnt)


def test_groupby_live_at_a_graph_break_runs_eagerly(cnt):
    def fn(x):
        groups = itertools.groupby([1, 1, 2])
        k, g = next(groups)
        print("break")
        return x + k + len(list(g)) + len(list(groups))

    with pytest.warns(stenograph.StenographWarning, match="itertools.groupby object is live at a graph break"):
        assert torch.equal(stenograph.compile(fn, backend=cnt)(t(3)), fn(t(3)))


def test_names_of_builtins_and_their_bound_methods(cnt):
    def fn(x, items):
        names = [next.__name__, len.__qualname__, items.append.__name__, items.append.__qualname__]
        names += [{1}.union.__name__, "ab".upper.__name__, items.append.__self__ is items]
        return x + len(names), names

    check(fn, lambda i: (t(2, seed=i), [1, 2]), cnt)


def test_wrong_arity_of_list_methods_raises_type_error_in_the_program(cnt):
    def fn(x, items):
        caught = []
        for call in (lambda: items.append(), lambda: items.insert(1), lambda: items.pop(0, 1), lambda: items.count()):
            try:
                call()
            except TypeError as e:
                caught.append(str(e))
        return x + len(caught), caught

    check(fn, lambda i: (t(2, seed=i), [1, 2]), cnt)


_Pair = collections.namedtuple("_Pair", "a b")


def test_wrong_arity_of_a_named_tuple_method_raises_type_error_in_the_program(cnt):
    def fn(x, pair):
        try:
            pair.count()
        except TypeError as e:
            return x + 1, str(e)
        return x, None

    check(fn, lambda i: (t(2, seed=i), _Pair(1, 2)), cnt)


def test_explicit_operator_methods_of_lists_and_tuples(cnt):
    def fn(x, letters):
        p, q = list(letters), list(letters[:2])
        pt, qt = tuple(p), tuple(q)
        out = [p.__eq__(q), p.__lt__(q), p.__ge__(q), p.__eq__(pt), pt.__lt__(qt), pt.__ne__(p), p.__contains__("a")]
        p.__setitem__(0, "z")
        p.__delitem__(slice(1, 2))
        p.__iadd__(q)
        q.__imul__(2)
        out += [p.__add__(q), qt.__mul__(2), q.__rmul__(1)]
        try:
            p.__delitem__(slice(1, 1, 0))
        except ValueError as e:
            out.append(str(e))
        try:
            q * 2.0
        except TypeError as e:
            out.append(str(e))
        return x + len(out), out, p, q

    check(fn, lambda i: (t(2, seed=i), "abc"[i:] + "d"), cnt, calls=2, graphs=2)


class _TextSet(set):
    pass


class _TextFrozenSet(frozenset):
    pass


class _ReprOnly:
    def __repr__(self):
        return "ReprOnly!"


class _OwnFormat:
    def __format__(self, spec):
        return "formatted"


def test_fstrings_and_str_of_set_subclasses_and_objects_made_in_the_frame(cnt):
    def fn(x):
        texts = [f"{_TextSet('a')}", str(_TextFrozenSet()), f"{_TextSet()!r}", repr(_TextFrozenSet("b"))]
        texts += [f"{_ReprOnly()}", str(_ReprOnly()), f"{_ReprOnly()!s}"]
        return x + len(texts), texts

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_fstring_of_an_object_with_its_own_format_breaks_the_graph(cnt):
    def fn(x):
        y = x + 1
        return y * 2, f"{_OwnFormat()}"

    with pytest.raises(stenograph.Unsupported, match="f-string formatting"):
        stenograph.compile(fn, backend="eager", fullgraph=True)(t(2))


class _AlwaysEqual:
    def __eq__(self, other):
        return True


class _NeverEqual:
    def __eq__(self, other):
        return False


def test_list_search_asks_the_elements_eq_as_cpython_does(cnt):
    def fn(x):
        items = [_AlwaysEqual(), 1]
        items.remove(_NeverEqual())  # the element's __eq__ is asked first: removed
        found = [_NeverEqual()].index(_AlwaysEqual()) if _AlwaysEqual() in [_NeverEqual()] else -1
        return x + len(items), found

    check(fn, lambda i: (t(2, seed=i),), cnt)


class _Declining:
    def __le__(self, other):
        return NotImplemented


def test_an_ordering_both_sides_decline_raises_type_error(cnt):
    def fn(x):
        caught = []
        for compare in (lambda: _Declining() <= 1, lambda: "a" > _Declining(), lambda: _Declining() < 2.0):
            try:
                compare()
            except TypeError as e:
                caught.append(str(e))
        return x + len(caught), caught

    check(fn, lambda i: (t(2, seed=i),), cnt)


def _no_defaults(v):
    return v


def test_set_of_functions_passed_in_is_guarded_by_its_members(cnt):
    def fn(x, members):
        return (x.sin() if _no_defaults in members else x.cos()), torch.sin in members

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    for members in ({_no_defaults, "a", torch.sin}, {_no_defaults, "a", torch.sin}, {torch.sin}, {"a"}):
        helpers.assert_same(compiled(x, members), fn(x, members))
    assert cnt.frame_count == 3


def _with_default(v, scale=2):
    return v * scale


def test_set_of_functions_with_defaults_and_pybind_functions(cnt):
    """Python functions with defaults (`torch.amp._exit_autocast`) and pybind11 builtins
    (`torch._C._set_autograd_fallback_mode`) in a set passed in: members by identity, the set
    guarded by its members; a member called reads its defaults, guarded through the function."""

    def fn(x, members):
        out = x.sin() if torch.amp._exit_autocast in members else x.cos()
        for member in members:
            if member is _with_default:
                out = member(out)
        return out

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    members = {torch._C._set_grad_enabled, torch.amp._exit_autocast, _with_default}
    for _ in range(2):
        helpers.assert_same(compiled(x, members), fn(x, members))
    assert cnt.frame_count == 1
    members.discard(torch.amp._exit_autocast)
    members.add(torch._C._set_autograd_fallback_mode)
    helpers.assert_same(compiled(x, members), fn(x, members))
    assert cnt.frame_count == 2
    _with_default.__defaults__ = (3,)
    try:
        helpers.assert_same(compiled(x, members), fn(x, members))
        assert cnt.frame_count == 3
    finally:
        _with_default.__defaults__ = (2,)


def test_dict_methods_called_on_an_ordered_dict(cnt):
    def fn(x):
        od = collections.OrderedDict(b=1, a=2)
        other = collections.OrderedDict(a=2, b=1)
        out = [list(dict.keys(od)), list(dict.items(od)), dict.get(od, "a"), dict.copy(od), type(dict.copy(od))]
        out += [dict.__eq__(od, other), od == other, dict.__ne__(od, other), dict.__or__(od, {"c": 3})]
        return x + len(out), out, od

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_methods_read_off_the_ordered_dict_class(cnt):
    """`OrderedDict.get(od, k)` (dict's, inherited), `OrderedDict.move_to_end(od, k)` (its own),
    `deque.append(q, v)`: the instance's own method runs, changes replayed on objects passed in."""

    def fn(x, od, q):
        collections.OrderedDict.move_to_end(od, "a")
        out = [collections.OrderedDict.get(od, "a"), list(collections.OrderedDict.items(od))]
        out += [collections.OrderedDict.copy(od), collections.OrderedDict.__eq__(od, {"a": 1, "b": 2})]
        out += [collections.OrderedDict.__or__(od, {"c": 3}), collections.OrderedDict.__contains__(od, "b")]
        collections.deque.append(q, 5)
        return x + len(out) + collections.deque.__len__(q), out

    check(fn, lambda i: (t(2, seed=i), collections.OrderedDict(a=1, b=2), collections.deque([1])), cnt)


class _Loud:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        print("eq", self.v, getattr(other, "v", other))
        return isinstance(other, _Loud) and self.v == other.v


class _PlainDict(dict):
    pass


def test_dicts_with_object_values_compared(cnt, capsys):
    """`==` of dicts holding objects: the values' own `__eq__` asked in the left's order until
    one differs (it printed nothing and recursed before); OrderedDicts compare their order too;
    `sd.__eq__(sd2)`/`__ne__`/`__or__` called by name on dict subclass instances."""
    marker = object()

    def fn(x):
        a, b = {"k": _Loud(1), "m": marker}, {"m": marker, "k": _Loud(1)}
        c = {"k": _Loud(2), "m": marker}
        ordered = collections.OrderedDict(a), collections.OrderedDict(b)
        out = [a == b, a != c, c == a, ordered[0] == ordered[1], ordered[0] == b, {"k": a} == {"k": b}]
        sd, sd2 = _PlainDict(a=1), _PlainDict(a=1, b=marker)
        out += [sd.__eq__(sd2), sd.__ne__(sd2), sd.__eq__(3), sd.__or__(sd2), type(sd.__or__(sd2))]
        return x + len(out), out

    check(fn, lambda i: (t(2, seed=i),), cnt, capsys)


class _OrderedWithNew(collections.OrderedDict):
    def __new__(cls, *args, **kwargs):
        return super().__new__(cls, *args, **kwargs)


def test_dict_new_called_directly(cnt):
    """`dict.__new__(dict)` (an empty dict), `dict.__new__(OrderedDict)`, and an OrderedDict
    subclass whose `__new__` calls `super().__new__(cls)` (dict's: OrderedDict has none)."""

    def fn(x):
        d = dict.__new__(dict)
        d["x"] = x * 2
        od = dict.__new__(collections.OrderedDict)
        od["b"], od["a"] = 1, 2
        c = _OrderedWithNew()
        c["key"] = x
        c.move_to_end("key", last=False)
        return d["x"] + c["key"], d, od, type(od), c, type(c)

    check(fn, lambda i: (t(2, seed=i),), cnt)


def _add(x, y):
    return x + y


class _Keyed(typing.NamedTuple):
    fn: typing.Callable
    const: int


def test_partials_made_in_the_frame_as_dict_keys(cnt):
    """A `functools.partial` made in the frame hashes and compares by identity, alone or inside a
    (named) tuple key, which equals a plain tuple of the same parts; a returned dict keeps the
    partial it was keyed by (one object)."""

    def fn(x):
        p, q = functools.partial(_add, y=1), functools.partial(_add, y=1)
        d = {p: 5, _Keyed(p, 4): 6, (x, 2): 7}
        found = [d[p], q in d, d[_Keyed(p, 4)], d[(p, 4)], _Keyed(q, 4) in d, d[(x, 2)]]
        return x * d[p] + p(x), found, list(d.values())

    check(fn, lambda i: (t(2, seed=i),), cnt)

    def escaping(x):
        p = functools.partial(_add, y=1)
        return x + 1, {p: 1, _Keyed(p, 4): 2}, p

    _, d, p = stenograph.compile(escaping, backend="eager", fullgraph=True)(t(2))
    assert list(d)[0] is p and list(d)[1].fn is p and p(1) == 2


_LIST_ADD, _LIST_MUL = list.__add__, list.__mul__


def test_slot_wrappers_as_dict_keys(cnt):
    """`list.__add__` (a C slot wrapper the trace knows by identity) as a dict key and in
    `isinstance` checks."""

    def fn(x):
        d = {_LIST_ADD: x * 2, _LIST_MUL: x * 3}
        return d[_LIST_ADD] + d[_LIST_MUL], isinstance(_LIST_ADD, types.WrapperDescriptorType)

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_dict_or_with_a_non_mapping_raises_type_error(cnt):
    """`d | 1`: dict's `|` and int's reflected one decline, and CPython's TypeError is raised in
    the program (caught there), for a dict and an instance of a dict subclass keeping dict's `|`."""

    def fn(x):
        caught = []
        for d in ({"a": 1}, _PlainDict(a=1)):
            try:
                d | 1
            except TypeError as e:
                caught.append(str(e))
        return x + len(caught), caught

    check(fn, lambda i: (t(2, seed=i),), cnt)


def test_torch_size_of_tensor_elements_breaks_the_graph(cnt):
    """`torch.Size([t[0], 64])` reads the tensor's value through `__index__`: a graph break (a
    dict keyed by sizes then finds the right entry); constants as `torch.Size` takes them."""
    table = {torch.Size([4, 64]): 1.0, torch.Size([8, 64]): 2.0}

    def fn(x):
        dims = torch.tensor(x.shape)
        key = torch.Size([dims[0], 64])
        try:
            torch.Size([1.5])
        except TypeError as e:
            message = str(e)
        return x * table.get(key, -1.0), torch.Size([True, 2]), message

    # torch.compile 2.13 fails on `torch.Size([1.5])` with an internal error instead of the TypeError
    check(fn, lambda i: (t(4 + 4 * i, 3, seed=i),), cnt, graphs=4, peer=False)


class _Declines:
    def __sub__(self, other):
        return NotImplemented


class _Bare:
    pass


def test_arithmetic_both_sides_decline_raises_type_error(cnt):
    """`obj - 1`, `1 ^ obj`, `None ** obj`, `obj -= 1` where neither side's method takes the
    other (torch's `OrderedSet`, a Python `__sub__` answering NotImplemented, a class without
    one): CPython's TypeError in the program, caught there."""
    from torch.utils._ordered_set import OrderedSet

    def fn(x):
        caught = []
        for a, b in ((OrderedSet([1]), 1), (1, OrderedSet([1])), (_Declines(), 2.5), (None, _Bare())):
            for op in (operator.sub, operator.xor, operator.pow):
                try:
                    op(a, b)
                except TypeError as e:
                    caught.append(str(e))
        bare = _Bare()
        try:
            bare -= 1
        except TypeError as e:
            caught.append(str(e))
        return x + len(caught), caught

    # torch.compile 2.13 runs this frame eagerly (0 graphs)
    check(fn, lambda i: (t(2, seed=i),), cnt, peer=False)


def test_dict_writes_through_an_ordered_dict_break_the_graph():
    def fn(x):
        od = collections.OrderedDict(a=1)
        dict.clear(od)
        return x + 1, od

    with pytest.raises(stenograph.Unsupported, match="order table"):
        stenograph.compile(fn, backend="eager", fullgraph=True)(t(2))


def _sets_a_dispatch_key(x):
    torch._C._dispatch_tls_set_dispatch_key_included(torch._C.DispatchKey.Python, False)
    return torch.sin(x)


def test_a_constant_the_graph_cannot_spell_breaks_the_graph(cnt):
    """A pybind11 enum (`DispatchKey.Python`) passed to an op the trace would record: FX would
    write its repr into the graph's code (a SyntaxError); the call runs eagerly instead."""
    x = torch.randn(3)
    torch.testing.assert_close(stenograph.compile(_sets_a_dispatch_key, backend=cnt)(x), x.sin())
    assert cnt.frame_count == 1  # torch.sin after the break
    stenograph.reset()
    with pytest.raises(stenograph.errors.Unsupported, match="cannot spell"):
        stenograph.compile(_sets_a_dispatch_key, backend="eager", fullgraph=True)(x)


def _is_buffer(x):
    return isinstance(x, torch.nn.Buffer), x + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_isinstance_of_buffer_runs_its_metaclass_check(backend):
    """`Buffer`'s metaclass answers True for tensors flagged `_is_buffer`, else defers to type's
    own test through `super().__instancecheck__`."""
    compiled = stenograph.compile(_is_buffer, backend=backend, fullgraph=True)
    for x in (torch.nn.Buffer(torch.ones(5)), torch.ones(5), torch.nn.Parameter(torch.ones(5))):
        flag, out = compiled(x)
        assert flag is _is_buffer(x)[0]
        torch.testing.assert_close(out, x + 1)


# -- torch.compile's own C helpers -------------------------------------------------------------------


def test_torch_compiles_unsupported_helper_is_a_graph_break(cnt):
    """`torch._C._dynamo.eval_frame.unsupported(a, b)` (returns `b`) is the helper torch's tests
    use for a graph break; it was recorded in the graph as a torch function."""
    from torch._C._dynamo.eval_frame import unsupported

    def fn(x):
        y = x * 2
        return unsupported(x, y + 1) * 3

    check(fn, lambda i: (t(4, seed=i),), cnt, graphs=2)
    assert stenograph.explain(fn)(t(4)).graph_break_count == 1


def test_a_pybind11_property_is_read_and_guarded(cnt):
    """`obj.result` of a pybind11 class (a C++ getter): read for real and guarded, so a changed
    value recompiles (torch's test_pybind_object). It was a graph break."""

    def fn(x, info):
        if info.result:
            return torch.cos(x)
        return torch.sin(x)

    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    infos = [torch._C._dynamo.guards.GuardDebugInfo(flag, ["a==1"], 0) for flag in (True, False, True)]
    for info in infos:
        x = t(4)
        helpers.assert_same(compiled(x, info), fn(x, info))
    assert cnt.frame_count == 2
