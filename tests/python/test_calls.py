"""Calls: user functions, methods, lambdas, closures, defaults, *args/**kwargs, partial, super(),
properties, classmethods, staticmethods and __call__ are inlined into one graph."""

from __future__ import annotations

import collections
import functools

import pytest
import torch
from torch import nn

import stenograph

from ._support import assert_same, check, t, torch_graph_count


def _scale(x, factor=2.0, *, bias=0.0):
    return x * factor + bias


def _defaults_and_kwonly(x):
    return _scale(x) + _scale(x, 3.0) + _scale(x, bias=1.0) + _scale(x, factor=0.5, bias=-1.0)


def test_defaults_and_keyword_only_arguments(cnt):
    check(_defaults_and_kwonly, lambda i: (t(3, seed=i),), cnt)


def _varargs(*xs, **opts):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total * opts.get("scale", 1.0) + opts.get("shift", 0.0)


def _star_both_sides(x, y):
    args = (x, y, x)
    kwargs = {"scale": 2.0}
    return _varargs(*args, **kwargs) + _varargs(x, **{"shift": 1.0}) + _varargs(*[y], scale=3.0)


def test_star_args_and_star_kwargs_on_both_sides(cnt):
    check(_star_both_sides, lambda i: (t(3, seed=i), t(3, seed=i + 10)), cnt)


def _lambdas(x):
    square = lambda v: v * v  # noqa: E731
    shift = lambda v, by=1.0: v + by  # noqa: E731
    return shift(square(x)) + shift(x, by=2.0)


def test_lambdas(cnt):
    check(_lambdas, lambda i: (t(4, seed=i),), cnt)


def _closures(x, n):
    scale = n * 2

    def inner(v):
        return v * scale

    def outer(v):
        def deeper(w):
            return inner(w) + scale

        return deeper(v)

    return outer(x) + inner(x)


def test_closures_and_nested_functions_read_cells(cnt):
    check(_closures, lambda i: (t(4, seed=i), 3), cnt)


def _cell_writes(x):
    count = 0
    acc = x

    def bump(v):
        nonlocal count, acc
        count += 1
        acc = acc + v

    bump(x)
    bump(x * 2)
    return acc * count, count


def test_nested_function_writes_cells_with_nonlocal(cnt):
    check(_cell_writes, lambda i: (t(4, seed=i),), cnt)


def _make_counter():
    calls = 0

    def counted(v):
        nonlocal calls
        calls += 1
        return v + calls

    def reset():
        nonlocal calls
        calls = 0

    return counted, lambda: calls, reset


_counted, _calls_so_far, _reset_calls = _make_counter()


def _uses_outer_closure(x):
    return _counted(x) * _counted(x)


def test_inlined_function_writes_a_cell_of_an_outer_closure_once_per_call(cnt):
    """The cell write is replayed on the real cell; the cell's value is guarded, so each new
    value recompiles (torch.compile does the same)."""
    compiled = stenograph.compile(_uses_outer_closure, backend=cnt)
    for i in range(2):
        x = t(3, seed=i)
        _reset_calls()
        expected = [_uses_outer_closure(x), _uses_outer_closure(x)]
        _reset_calls()
        actual = [compiled(x), compiled(x)]
        assert_same(actual, expected)
        assert _calls_so_far() == 4
    assert cnt.frame_count == 2
    _reset_calls()
    assert torch_graph_count(_uses_outer_closure, lambda i: (t(3, seed=i),), 2) == 2


def _add(a, b, *, alpha=1.0):
    return a + alpha * b


def _partials(x, y):
    add_y = functools.partial(_add, b=y)
    twice = functools.partial(_add, alpha=2.0)
    return add_y(x) + twice(x, y) + add_y(a=y, alpha=0.5)


def test_functools_partial_made_in_the_frame(cnt):
    check(_partials, lambda i: (t(3, seed=i), t(3, seed=i + 5)), cnt)


_GLOBAL_PARTIAL = functools.partial(_add, alpha=3.0)


def _partial_from_global(x, fn):
    return _GLOBAL_PARTIAL(x, x) + fn(x)


def test_functools_partial_from_globals_and_arguments(cnt):
    fn = functools.partial(_scale, factor=4.0)
    check(_partial_from_global, lambda i: (t(3, seed=i), fn), cnt)


class _Base:
    def __init__(self, scale):
        self.scale = scale

    def apply(self, x):
        return x * self.scale


class _Child(_Base):
    def __init__(self, scale, shift):
        super().__init__(scale)
        self.shift = shift

    def apply(self, x):
        return super().apply(x) + self.shift


def _super_calls(x):
    return _Child(2.0, 1.0).apply(x)


def test_super_in_init_and_methods(cnt):
    check(_super_calls, lambda i: (t(3, seed=i),), cnt)


class _NoSelf:
    @staticmethod
    def make():
        return super().__init__()  # no argument to bind: CPython raises RuntimeError


def _super_without_arguments(x):
    try:
        _NoSelf.make()
    except RuntimeError as e:
        return x + 1, str(e)
    return x, ""


def test_super_without_arguments_raises_cpythons_error_in_the_program(cnt):
    # torch.compile 2.13 runs this frame eagerly: no peer
    check(_super_without_arguments, lambda i: (t(3, seed=i),), cnt, peer=False)


class _Scaled(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


def test_super_forward_of_an_nn_module_subclass(cnt):
    model = _Scaled(4, 3)
    check(lambda x: model(x), lambda i: (t(2, 4, seed=i, grad=True),), cnt, grads=True)


class _Shape:
    unit = 2.0

    def __init__(self, w, h):
        self.w = w
        self.h = h

    @property
    def area(self):
        return self.w * self.h

    @classmethod
    def square(cls, side):
        return cls(side, side)

    @staticmethod
    def double(v):
        return v * 2

    def __call__(self, x):
        return x * self.area + self.unit


def _descriptors(x, shape):
    sq = _Shape.square(3)
    return shape(x) + sq(x) + _Shape.double(x) + shape.double(x) + shape.area


def test_properties_classmethods_staticmethods_and_call(cnt):
    check(_descriptors, lambda i: (t(3, seed=i), _Shape(2, 5)), cnt)


def _methods_of_input(x, shape):
    return shape.__call__(x) + type(shape).double(x) + shape.unit


def test_methods_through_the_class_and_dunder_call(cnt):
    check(_methods_of_input, lambda i: (t(3, seed=i), _Shape(1, 2)), cnt)


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return wrapper


@_logged
def _decorated(x, y=1.0):
    return x * y


def _calls_decorated(x):
    return _decorated(x, y=3.0) + _decorated(x)


def test_decorated_functions_with_wraps(cnt):
    check(_calls_decorated, lambda i: (t(3, seed=i),), cnt)


def test_compiling_a_wrapper_with_star_args_directly(cnt):
    check(_decorated, lambda i: (t(3, seed=i), 2.0), cnt)


def _fact(n, x):
    if n <= 1:
        return x
    return n * _fact(n - 1, x)


def test_recursion_with_constant_depth(cnt):
    check(lambda x: _fact(4, x), lambda i: (t(3, seed=i),), cnt)


def _varargs_and_keyword_only(x, *args, scale=2, **kw):
    return x * scale + sum(args) + len(kw), len(args), sorted(kw)


def _varargs_and_keyword_only_with_break(x, *args, scale=2, **kw):
    print(len(args), sorted(kw))
    return x * scale + sum(args) + len(kw)


def test_compiled_function_with_varargs_and_keyword_only(cnt, capsys):
    """Arguments are bound by name: `*args` comes after keyword-only names in co_varnames."""
    check(_varargs_and_keyword_only, lambda i: (t(2, seed=i), 1, 2), cnt)
    compiled = stenograph.compile(_varargs_and_keyword_only_with_break, backend="eager")
    for extra in ((1, 2), (5,)):
        expected = _varargs_and_keyword_only_with_break(torch.ones(1), *extra, scale=3, z=1)
        assert_same(compiled(torch.ones(1), *extra, scale=3, z=1), expected)


class _Options(collections.abc.Mapping):
    """A mapping that is not a dict: `**` reads its keys() and looks each one up."""

    def __init__(self, **values):
        self._values = values

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)


def _scaled(x, scale=1, shift=0):
    return x * scale + shift


def test_star_star_of_a_mapping_that_is_not_a_dict(cnt):
    """`f(**m)` and `{**m}` of a user Mapping (an argument, a global, one made in the frame, a
    `UserDict`) in one graph; a value changed in the mapping recompiles."""
    options = _Options(scale=torch.full((3,), 2.0), shift=1)

    def fn(x, m):
        made = _Options(shift=x)
        merged = {**m, "extra": 3}
        user = collections.UserDict(scale=3)
        return _scaled(x, **m) + _scaled(x, **made) + merged["extra"] + _scaled(x, **user)

    x = torch.randn(3)
    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    assert_same(compiled(x, options), fn(x, options))
    assert cnt.frame_count == 1
    other = _Options(scale=torch.full((3,), 2.0), shift=5)
    assert_same(compiled(x, other), fn(x, other))
    assert cnt.frame_count == 2


def test_star_star_of_something_not_a_mapping_raises_as_eagerly():
    def fn(x):
        return _scaled(x, **[1, 2])

    # an exception the frame does not catch: the frame runs eagerly, which raises it
    with pytest.warns(stenograph.StenographWarning, match="must be a mapping"):
        with pytest.raises(TypeError, match="must be a mapping"):
            stenograph.compile(fn, backend="eager")(torch.randn(2))
