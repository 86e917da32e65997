"""Builtins and library modules on constants and trackers: len, isinstance, getattr, min/max,
sorted, map/filter/zip, math, operator, itertools, string formatting."""

from __future__ import annotations

import functools
import itertools
import math
import operator
import typing

import torch

import stenograph

from ._support import check, t


class _Obj:
    def __init__(self):
        self.a = 1


def _introspection(x, obj):
    has = (hasattr(obj, "a"), hasattr(obj, "missing"), hasattr(x, "shape"))
    got = (getattr(obj, "a"), getattr(obj, "missing", 7), getattr(x, "ndim"))  # noqa: B009
    setattr(obj, "b", 5)  # noqa: B010
    sub = (issubclass(bool, int), issubclass(_Obj, object), isinstance(x, torch.Tensor), isinstance(3, (str, int)))
    return x * len([1, 2]) * len(x), has, got, sub, len({"a": 1}), len("abc")


def test_len_isinstance_issubclass_hasattr_getattr_setattr(cnt):
    check(_introspection, lambda i: (t(4, seed=i), _Obj()), cnt)


def _reductions(x, xs):
    vals = [3, -1, 4]
    return (
        min(vals),
        max(vals),
        max(2, 7, 5),
        min(vals, key=abs),
        max(["aa", "b"], key=len),
        sum(vals),
        sum(vals, 10),
        abs(-3),
        abs(x),
        all([True, 1]),
        any([0, False]),
        sorted(vals),
        sorted(vals, reverse=True),
        sorted(["bb", "a", "ccc"], key=len),
        sum(xs),
        sorted(xs, key=lambda v: v.shape[0])[0],
        max(xs, key=lambda v: v.numel()),
    )


def test_min_max_sum_abs_all_any_sorted(cnt):
    check(_reductions, lambda i: (t(3, seed=i), [t(2, 3, seed=i), t(1, 3, seed=i)]), cnt)


@functools.total_ordering
class _Ranked:
    """Ordered by its own `__lt__`, as the match records of a dispatch table are."""

    def __init__(self, rank, name):
        self.rank, self.name = rank, name

    def __lt__(self, other):
        return self.rank < other.rank

    def __eq__(self, other):
        return self.rank == other.rank


class _Unordered:
    pass


def _extremes_of_objects(x):
    items = [_Ranked(3, "a"), _Ranked(1, "b"), _Ranked(1, "c"), _Ranked(2, "d")]
    low, high = min(items), max(items)
    by_key = max(_Ranked(3, "e"), _Ranked(5, "f"), key=lambda r: -r.rank)
    try:
        min(_Unordered(), _Unordered())
        message = "no error"
    except TypeError as e:
        message = str(e)
    return x * low.rank + high.rank, low.name, high.name, by_key.name, message


def test_min_max_over_objects_ordered_by_their_own_comparisons(cnt):
    # ties keep the first item, `key=` orders by what it returns, objects without `<` raise
    # eager's TypeError inside the program. torch.compile 2.13 runs the frame eagerly (its max()
    # refuses `key=` over objects): no peer
    check(_extremes_of_objects, lambda i: (t(3, seed=i),), cnt, peer=False)


def _iteration(x, xs):
    out = x * 0
    for i, v in enumerate(xs, start=1):
        out = out + v * i
    for a, b in zip(xs, reversed(xs)):
        out = out + a * b
    doubled = list(map(lambda v: v * 2, xs))
    pos = list(filter(lambda n: n > 0, [-1, 2, 3]))
    summed = list(map(operator.add, [1, 2], [10, 20]))
    evens = list(range(0, 10, 2))
    return out, doubled, pos, summed, evens, list(reversed(range(3))), list(zip("ab", [1, 2]))


def test_enumerate_zip_reversed_map_filter_range(cnt):
    check(_iteration, lambda i: (t(3, seed=i), [t(3, seed=i + 1), t(3, seed=i + 2)]), cnt)


def _conversions(x):
    n = int("12") + int(3.7) + int(True)
    f = float("1.5") + float(2)
    b = (bool(0), bool([1]), bool(""))
    s = str(3) + str(1.5) + str(None) + repr("q")
    return x * n * f, b, s, round(2.567, 2), divmod(7, 2), int(x.shape[0] * 1.5)


def test_int_float_bool_str_on_constants(cnt):
    check(_conversions, lambda i: (t(3, seed=i),), cnt)


def _text_of(x, name):
    shown = ascii(name)  # guarded on the string's value, folded while tracing
    return x + len(shown), shown, ascii([1.5, "é"])


def test_ascii_on_constants(cnt):
    check(_text_of, lambda i: (t(3, seed=i), "naïve"), cnt)


def _math(x, dim):
    scale = 1.0 / math.sqrt(dim)
    return (
        x * scale * math.pi,
        math.ceil(2.1),
        math.floor(2.9),
        math.log(math.e),
        math.prod([2, 3]),
        math.isclose(0.1 + 0.2, 0.3),
        math.gcd(12, 18),
        math.inf > 1,
        math.isfinite(scale),
        math.exp(0.0) + math.cos(0.0) + math.tanh(0.0) + math.pow(2, 3) + math.log2(8),
    )


def test_math_functions(cnt):
    check(_math, lambda i: (t(3, seed=i), 16), cnt)


def _operators(x, y, items):
    get_second = operator.itemgetter(1)
    get_shape = operator.attrgetter("shape")
    return (
        operator.add(x, y),
        operator.mul(x, 2),
        operator.getitem(items, 0),
        get_second(items),
        get_shape(x),
        operator.neg(x),
        operator.truediv(6, 4),
        operator.eq(1, 1),
        operator.not_(False),
        operator.matmul(x.view(1, 3), y.view(3, 1)),
    )


def test_operator_module(cnt):
    check(_operators, lambda i: (t(3, seed=i), t(3, seed=i + 1), [t(2, seed=i), t(2, seed=i + 1)]), cnt)


def _itertools(x, xs):
    chained = list(itertools.chain(xs, [x]))
    out = x * 0
    for a, b in itertools.product(range(2), [1, 2]):
        out = out + a * b
    for p, q in itertools.pairwise(xs + [x]):
        out = out + p * q
    return (
        sum(chained),
        out,
        list(itertools.islice(range(10), 2, 6, 2)),
        list(itertools.accumulate([1, 2, 3])),
        list(itertools.zip_longest([1, 2, 3], "ab", fillvalue=0)),
        list(itertools.repeat("z", 3)),
        list(itertools.combinations([1, 2, 3], 2)),
        list(itertools.permutations("ab")),
        list(itertools.chain.from_iterable([[1], [2, 3]])),
        list(itertools.starmap(operator.mul, [(2, 3), (4, 5)])),
    )


def test_itertools_basics(cnt):
    check(_itertools, lambda i: (t(3, seed=i), [t(3, seed=i + 1), t(3, seed=i + 2)]), cnt)


def _strings(x, name):
    n = x.shape[0]
    label = f"{name}-{n:03d}-{2.5:.1f}-{name!r}"
    old = "%s has %d items (%.2f)" % (name, n, 1.5)  # noqa: UP031
    fmt = "{}/{name}".format(n, name=name)  # noqa: UP032
    parts = "a,b,c".split(",")
    up = name.upper().startswith("LAY") and name.endswith("er")
    return x * len(label), label, old, fmt, parts, up, "-".join(parts), name.replace("a", "o")


def test_fstrings_percent_and_format_on_constants(cnt):
    check(_strings, lambda i: (t(5, seed=i), "layer"), cnt)


def _cast_to_generic_alias(xs):
    ys = typing.cast(list[torch.Tensor], xs)
    pairs = typing.cast(dict[str, tuple[int, ...]], {"n": (len(ys),)})
    return [y * 2 for y in ys], pairs


def test_builtin_classes_subscripted_as_annotations(cnt):
    """`list[Tensor]` in `typing.cast` (torch.optim's foreach code): a constant alias."""
    check(_cast_to_generic_alias, lambda i: ([t(2, seed=i), t(3, seed=i)],), cnt)


# typing's own aliases (not `str | None`): huggingface_hub's annotations are these
_FIELD_TYPES = {
    "problem_type": typing.Optional[str],  # noqa: UP045
    "labels": typing.Union[int, list[int]],  # noqa: UP007
    "fn": typing.Callable,
}


def _validate_fields(x, value):
    # what huggingface_hub's strict dataclasses do on each config write (transformers 5.17)
    kinds = []
    for name, annotation in _FIELD_TYPES.items():
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        kinds.append((name, origin is typing.Union, str in args, len(args)))
        if origin is typing.Union and type(value) in args:
            x = x + 1
    return x, kinds


def test_typing_introspection_of_annotations(cnt):
    """get_origin/get_args read special forms (`alias.__origin__ is Union`): values, one graph."""
    check(_validate_fields, lambda i: (t(3, seed=i), "single"), cnt)


def _helper_named_in_text():
    pass


def _text_of_a_function(x, fn):
    return x + 1, "_helper_named_in_text" in str(fn), repr(fn)


def test_str_and_repr_of_a_function_read_from_the_frame(cnt):
    """`str(f)` / `repr(f)` of a function argument: its real text, in one graph; a function under
    another qualified name (or another function) compiles again."""
    fn = stenograph.compile(_text_of_a_function, backend=cnt, fullgraph=True)
    x = t(2)
    for callee, graphs in ((_helper_named_in_text, 1), (_helper_named_in_text, 1), (_validate_fields, 2)):
        assert fn(x, callee)[1:] == _text_of_a_function(x, callee)[1:]
        assert cnt.frame_count == graphs
    renamed = functools.wraps(_helper_named_in_text)(lambda: None)
    renamed.__qualname__ = "another_name"
    assert fn(x, renamed)[1:] == _text_of_a_function(x, renamed)[1:] == (False, repr(renamed))


def _length_hints(x, items):
    it = iter(items)
    next(it)
    gen = (i for i in items)
    ranges = tuple(map(operator.length_hint, [tuple(range(-10, i)) for i in range(3)]))
    hints = (operator.length_hint(it), operator.length_hint(gen, 7), operator.length_hint({"a": 1}))
    return x + 1, ranges, hints, operator.length_hint(items)


def test_operator_length_hint(cnt):
    # torch.compile's own test (test_unary_fold_op_seq): containers give their length, an
    # iterator its __length_hint__, one without it (a generator) the default
    check(_length_hints, lambda i: (t(2, seed=i), [1, 2, 3]), cnt, torch_graphs=0)  # torch 2.13 runs it eagerly
