"""Facts a trace relies on that only a guard can keep true: identity (`is`), absent attributes,
class attributes and methods, class attribute writes, signed zeros and nan, and the defaults of
functions sharing one code object.

Each test runs the function eagerly and compiled on both the `eager` and `aot_eager` backends,
compares results (and mutated state), and counts graphs exactly: an identical second call
compiles nothing, a changed fact compiles anew (or reuses an entry that is right for it).
"""

from __future__ import annotations

import math
import types

import pytest
import torch
from helpers import assert_same
from torch import nn

import stenograph
from stenograph.testing import CompileCounterWithBackend


@pytest.fixture(params=["eager", "aot_eager"])
def counter(request) -> CompileCounterWithBackend:
    return CompileCounterWithBackend(request.param)


def _check(compiled, eager, *args):
    """One call of each; the results must match."""
    assert_same(compiled(*args), eager(*args))


X = torch.arange(4.0)

# -- 1. identity ---------------------------------------------------------------------------------

_missing = object()


def _with_sentinel(x, opt=_missing):
    if opt is _missing:
        return x + 1
    if opt is None:
        return x + 2
    return x * opt


def test_sentinel_default_then_none(counter):
    fn = stenograph.compile(_with_sentinel, backend=counter)
    _check(fn, _with_sentinel, X)
    _check(fn, _with_sentinel, X)
    assert counter.frame_count == 1
    _check(fn, _with_sentinel, X, None)
    assert counter.frame_count == 2
    _check(fn, _with_sentinel, X, None)
    _check(fn, _with_sentinel, X)
    assert counter.frame_count == 2


def _same_or_not(x, a, b):
    if a is b:
        return x + 1
    return x - 1


class _Thing:
    pass


def test_is_between_two_arguments(counter):
    one, two = _Thing(), _Thing()
    fn = stenograph.compile(_same_or_not, backend=counter)
    _check(fn, _same_or_not, X, one, one)
    _check(fn, _same_or_not, X, two, two)
    assert counter.frame_count == 1
    _check(fn, _same_or_not, X, one, two)
    assert counter.frame_count == 2
    _check(fn, _same_or_not, X, two, one)
    _check(fn, _same_or_not, X, one, one)
    assert counter.frame_count == 2


def _is_not_none(x, cfg):
    if cfg is not None:
        return x + 3
    return x - 3


def test_object_argument_then_none(counter):
    fn = stenograph.compile(_is_not_none, backend=counter)
    _check(fn, _is_not_none, X, _Thing())
    _check(fn, _is_not_none, X, _Thing())
    assert counter.frame_count == 1
    _check(fn, _is_not_none, X, None)
    assert counter.frame_count == 2


def _equal_objects(x, a, b):
    # no __eq__ on the class: == compares identity
    return x + 1 if a == b else x - 1


def test_equality_by_identity_is_guarded(counter):
    one, two = _Thing(), _Thing()
    fn = stenograph.compile(_equal_objects, backend=counter)
    _check(fn, _equal_objects, X, one, two)
    _check(fn, _equal_objects, X, one, two)
    assert counter.frame_count == 1
    _check(fn, _equal_objects, X, one, one)
    assert counter.frame_count == 2


def _in_sentinels(x, opt):
    return x + 1 if opt in [_missing] else x - 1


def test_membership_by_identity_is_guarded(counter):
    fn = stenograph.compile(_in_sentinels, backend=counter)
    _check(fn, _in_sentinels, X, _missing)
    _check(fn, _in_sentinels, X, _missing)
    assert counter.frame_count == 1
    _check(fn, _in_sentinels, X, _Thing())
    assert counter.frame_count == 2


def _optional_int(x, n=None):
    if n is None:
        return x - 1
    return x * 2


def test_is_none_on_an_int_does_not_specialise_its_value(counter):
    fn = stenograph.compile(_optional_int, backend=counter)
    for n in (1, 2, 3):
        _check(fn, _optional_int, X, n)
    assert counter.frame_count == 1
    _check(fn, _optional_int, X, None)
    _check(fn, _optional_int, X)
    assert counter.frame_count == 2


def _is_callable(x, o):
    return x + 1 if callable(o) else x - 1


class _CallMe:
    def __call__(self):
        return 1


def test_callable_is_guarded(counter):
    fn = stenograph.compile(_is_callable, backend=counter)
    _check(fn, _is_callable, X, _Thing())
    _check(fn, _is_callable, X, _Thing())
    assert counter.frame_count == 1
    _check(fn, _is_callable, X, _CallMe())
    assert counter.frame_count == 2


def _position(x, opt, options):
    return x * options.index(opt)


def test_list_index_by_identity_is_guarded(counter):
    a, b = _Thing(), _Thing()
    options = [a, b]
    fn = stenograph.compile(_position, backend=counter)
    _check(fn, _position, X, b, options)
    _check(fn, _position, X, b, options)
    assert counter.frame_count == 1
    _check(fn, _position, X, a, options)
    assert counter.frame_count == 2


# -- 2. absence ----------------------------------------------------------------------------------


def _has_k(x, o):
    if hasattr(o, "k"):
        return x + o.k
    return x - 1


def _k_or_default(x, o):
    return x + getattr(o, "k", 3)


@pytest.mark.parametrize("fn", [_has_k, _k_or_default])
def test_attribute_added_to_instance_later(counter, fn):
    o = _Thing()
    compiled = stenograph.compile(fn, backend=counter)
    _check(compiled, fn, X, o)
    _check(compiled, fn, X, o)
    assert counter.frame_count == 1
    o.k = 5
    _check(compiled, fn, X, o)
    assert counter.frame_count == 2
    _check(compiled, fn, X, o)
    assert counter.frame_count == 2


@pytest.mark.parametrize("fn", [_has_k, _k_or_default])
def test_attribute_added_to_class_later(counter, fn):
    class Fresh:
        pass

    o = Fresh()
    compiled = stenograph.compile(fn, backend=counter)
    _check(compiled, fn, X, o)
    assert counter.frame_count == 1
    Fresh.k = 9
    _check(compiled, fn, X, o)
    assert counter.frame_count == 2


def _module_has_extra(x, m):
    if hasattr(m, "extra"):
        return m(x) + 1
    return m(x) - 1


@pytest.mark.parametrize("how", ["buffer", "submodule", "plain", "class"])
def test_attribute_added_to_module_later(counter, how):
    m = nn.Linear(4, 4)

    class Sub(nn.Linear):
        pass

    if how == "class":
        m = Sub(4, 4)
    fn = stenograph.compile(_module_has_extra, backend=counter)
    _check(fn, _module_has_extra, X, m)
    _check(fn, _module_has_extra, X, m)
    assert counter.frame_count == 1
    if how == "buffer":
        m.register_buffer("extra", torch.ones(1))
    elif how == "submodule":
        m.extra = nn.Identity()
    elif how == "plain":
        m.extra = 1
    else:
        Sub.extra = 1
    _check(fn, _module_has_extra, X, m)
    assert counter.frame_count == 2


def _class_has_k(x, cls):
    return x + 1 if hasattr(cls, "k") else x - 1


def test_attribute_added_to_class_argument_later(counter):
    class Fresh:
        pass

    fn = stenograph.compile(_class_has_k, backend=counter)
    _check(fn, _class_has_k, X, Fresh)
    _check(fn, _class_has_k, X, Fresh)
    assert counter.frame_count == 1
    Fresh.k = 1
    _check(fn, _class_has_k, X, Fresh)
    assert counter.frame_count == 2


class _Slots:
    __slots__ = ("a", "b")


def test_unset_slot_set_later(counter):
    s = _Slots()
    s.a = 1
    fn = stenograph.compile(_has_k_slot, backend=counter)
    _check(fn, _has_k_slot, X, s)
    _check(fn, _has_k_slot, X, s)
    assert counter.frame_count == 1
    s.b = 2
    _check(fn, _has_k_slot, X, s)
    assert counter.frame_count == 2


def _has_k_slot(x, s):
    return x + s.b if hasattr(s, "b") else x - 1


# -- 3. class attributes -------------------------------------------------------------------------


class Cfg:
    k = 2


class DerivedCfg(Cfg):
    pass


def _via_instance(x, c):
    return x * c.k


def _via_class(x):
    return x * Cfg.k


def _via_type(x, c):
    return x * type(c).k


@pytest.mark.parametrize("fn", [_via_instance, _via_class, _via_type])
def test_class_attribute_changed_outside(counter, fn, monkeypatch):
    compiled = stenograph.compile(fn, backend=counter)
    args = (X,) if fn is _via_class else (X, Cfg())
    _check(compiled, fn, *args)
    _check(compiled, fn, *args)
    assert counter.frame_count == 1
    monkeypatch.setattr(Cfg, "k", 5)
    _check(compiled, fn, *args)
    assert counter.frame_count == 2
    _check(compiled, fn, *args)
    assert counter.frame_count == 2


def test_inherited_class_attribute(counter, monkeypatch):
    fn = stenograph.compile(_via_instance, backend=counter)
    c = DerivedCfg()
    _check(fn, _via_instance, X, c)
    monkeypatch.setattr(Cfg, "k", 7)  # on the base
    _check(fn, _via_instance, X, c)
    assert counter.frame_count == 2
    # a class attribute int that changed is a graph input from then on (automatic dynamic)
    monkeypatch.setattr(DerivedCfg, "k", 11, raising=False)  # the subclass shadows it
    _check(fn, _via_instance, X, c)
    assert counter.frame_count == 2
    c.k = 13  # the instance shadows it
    _check(fn, _via_instance, X, c)
    assert counter.frame_count == 3
    _check(fn, _via_instance, X, DerivedCfg())
    assert counter.frame_count == 3


def _made_inside(x):
    return x * Cfg().k


def test_class_attribute_of_object_made_inside(counter, monkeypatch):
    fn = stenograph.compile(_made_inside, backend=counter)
    _check(fn, _made_inside, X)
    _check(fn, _made_inside, X)
    assert counter.frame_count == 1
    monkeypatch.setattr(Cfg, "k", 3)
    _check(fn, _made_inside, X)
    assert counter.frame_count == 2


# -- 4. methods replaced -------------------------------------------------------------------------


class Op:
    scale = 1.0

    def go(self, x):
        return x + 1

    @staticmethod
    def helper(x):
        return x * 2

    @classmethod
    def make(cls, x):
        return x * 3

    @property
    def offset(self):
        return 4


def _call_go(x, op):
    return op.go(x)


def _call_all(x, op):
    return op.helper(x) + op.make(x) + op.offset


def test_method_replaced_on_instance(counter):
    op = Op()
    fn = stenograph.compile(_call_go, backend=counter)
    _check(fn, _call_go, X, op)
    _check(fn, _call_go, X, op)
    assert counter.frame_count == 1
    op.go = lambda x: x + 10
    _check(fn, _call_go, X, op)
    assert counter.frame_count == 2
    _check(fn, _call_go, X, Op())  # a fresh instance takes the first entry again
    assert counter.frame_count == 2


def test_method_replaced_on_class(counter):
    class Local(Op):
        pass

    op = Local()
    fn = stenograph.compile(_call_go, backend=counter)
    _check(fn, _call_go, X, op)
    assert counter.frame_count == 1
    Local.go = lambda self, x: x + 10
    _check(fn, _call_go, X, op)
    assert counter.frame_count == 2
    _check(fn, _call_go, X, op)
    assert counter.frame_count == 2


@pytest.mark.parametrize("what", ["helper", "make", "offset"])
def test_static_class_method_and_property_replaced(counter, what):
    class Local(Op):
        pass

    op = Local()
    fn = stenograph.compile(_call_all, backend=counter)
    _check(fn, _call_all, X, op)
    _check(fn, _call_all, X, op)
    assert counter.frame_count == 1
    replacement = {
        "helper": staticmethod(lambda x: x * 20),
        "make": classmethod(lambda cls, x: x * 30),
        "offset": property(lambda self: 40),
    }[what]
    setattr(Local, what, replacement)
    _check(fn, _call_all, X, op)
    assert counter.frame_count == 2


class _Block(nn.Module):
    def forward(self, x):
        return x + 1


def test_module_forward_replaced_on_class(counter):
    class Local(_Block):
        pass

    m = Local()
    fn = stenograph.compile(lambda x, m: m(x) * 2, backend=counter)
    assert_same(fn(X, m), (X + 1) * 2)
    assert_same(fn(X, m), (X + 1) * 2)
    assert counter.frame_count == 1
    Local.forward = lambda self, x: x - 1
    assert_same(fn(X, m), (X - 1) * 2)
    assert counter.frame_count == 2


def _dunders(x, a, b):
    return x * (a + b) + len(a)


def _equal_or_not(x, a, b):
    return x + 1 if a == b else x - 1


@pytest.mark.parametrize("what", ["__add__", "__len__", "__init__"])
def test_dunder_replaced_on_class(counter, what):
    class Num:
        def __init__(self, v=1):
            self.v = v

        def __add__(self, other):
            return self.v + other.v

        def __len__(self):
            return 2

    def made_inside(x):
        return _dunders(x, Num(), Num())

    fn = stenograph.compile(made_inside, backend=counter)
    _check(fn, made_inside, X)
    _check(fn, made_inside, X)
    assert counter.frame_count == 1
    replacement = {
        "__add__": lambda self, other: self.v - other.v + 5,
        "__len__": lambda self: 7,
        "__init__": lambda self, v=3: setattr(self, "v", v),
    }[what]
    setattr(Num, what, replacement)
    _check(fn, made_inside, X)
    assert counter.frame_count == 2


def test_eq_added_to_class_later(counter):
    class Plain:
        pass

    one, two = Plain(), Plain()
    fn = stenograph.compile(_equal_or_not, backend=counter)
    _check(fn, _equal_or_not, X, one, two)
    _check(fn, _equal_or_not, X, one, two)
    assert counter.frame_count == 1
    Plain.__eq__ = lambda self, other: True
    _check(fn, _equal_or_not, X, one, two)
    assert counter.frame_count == 2


class _Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList()

    def forward(self, x):
        if self.layers:
            return x + 1
        return x - 1


def test_empty_module_list_is_false(counter):
    m = _Stack()
    fn = stenograph.compile(m, backend=counter)
    assert_same(fn(X), X - 1)
    assert_same(fn(X), X - 1)
    assert counter.frame_count == 1
    m.layers.append(nn.Identity())
    assert_same(fn(X), X + 1)
    assert counter.frame_count == 2


def _truthy(x, o):
    return x + 1 if o else x - 1


def test_len_added_to_class_later(counter):
    class Plain:
        pass

    o = Plain()
    fn = stenograph.compile(_truthy, backend=counter)
    _check(fn, _truthy, X, o)
    _check(fn, _truthy, X, o)
    assert counter.frame_count == 1
    Plain.__len__ = lambda self: 0
    _check(fn, _truthy, X, o)
    assert counter.frame_count == 2


# -- 5. class attribute writes -------------------------------------------------------------------


class Registry:
    count = 0


def _count_calls(x):
    Registry.count += 1
    return x + Registry.count


class Counted:
    made = 0

    def bump(self, x):
        type(self).made += 1
        return x * self.made


def _bump(x, c):
    return c.bump(x)


def test_class_attribute_written_every_call(counter, monkeypatch):
    monkeypatch.setattr(Registry, "count", 0)
    fn = stenograph.compile(_count_calls, backend=counter)
    results = [fn(X) for _ in range(5)]
    assert Registry.count == 5 and type(Registry.count) is int
    for i, result in enumerate(results):
        assert_same(result, X + i + 1)
    # the first value is specialised; once it changed, the count is a graph input
    assert counter.frame_count == 2


def test_class_attribute_written_through_instance_type(counter, monkeypatch):
    monkeypatch.setattr(Counted, "made", 0)
    fn = stenograph.compile(_bump, backend=counter)
    c = Counted()
    results = [fn(X, c) for _ in range(4)]
    assert Counted.made == 4 and "made" not in c.__dict__
    for i, result in enumerate(results):
        assert_same(result, X * (i + 1))
    assert counter.frame_count == 2


def _write_then_read_via_instance(x, c):
    Counted.made = 7
    return x * c.made


def test_class_attribute_write_seen_by_instance_read(counter, monkeypatch):
    monkeypatch.setattr(Counted, "made", 0)
    fn = stenograph.compile(_write_then_read_via_instance, backend=counter)
    assert_same(fn(X, Counted()), X * 7)
    assert Counted.made == 7
    Counted.made = 0
    assert_same(fn(X, Counted()), X * 7)
    assert Counted.made == 7
    assert counter.frame_count == 1


def _assign_method(x, op):
    Op.go = lambda self, x: x + 5
    return op.go(x)


def test_method_assigned_to_class_inside(counter, monkeypatch):
    """A function written to a class in the frame binds as a method when read through an
    instance (the read breaks the graph rather than calling it unbound)."""
    monkeypatch.setattr(Op, "go", Op.go)
    fn = stenograph.compile(_assign_method, backend=counter)
    assert_same(fn(X, Op()), X + 5)
    monkeypatch.setattr(Op, "go", lambda self, x: x + 1)
    assert_same(fn(X, Op()), X + 5)
    assert counter.frame_count == 1  # one graph, after the break at the read


# -- 6. signed zeros and nan ---------------------------------------------------------------------


def _sign_of(x, f):
    return x * math.copysign(1.0, f)


def _is_nan(x, f):
    return x * 2 if f != f else x * 3


@pytest.mark.parametrize("first, second", [(0.0, -0.0), (-0.0, 0.0)])
def test_signed_zero_recompiles(counter, first, second):
    fn = stenograph.compile(_sign_of, backend=counter)
    _check(fn, _sign_of, X, first)
    _check(fn, _sign_of, X, first)
    assert counter.frame_count == 1
    _check(fn, _sign_of, X, second)
    assert counter.frame_count == 2


@pytest.mark.parametrize("first, second", [(1.0, math.nan), (math.nan, 1.0)])
def test_nan_recompiles(counter, first, second):
    fn = stenograph.compile(_is_nan, backend=counter)
    _check(fn, _is_nan, X, first)
    _check(fn, _is_nan, X, first)
    assert counter.frame_count == 1
    _check(fn, _is_nan, X, second)
    assert counter.frame_count == 2
    _check(fn, _is_nan, X, second)
    assert counter.frame_count == 2


def _scale_and_nan(x, f):
    return x * f, f == f


def test_symbolic_float_keeps_nan_and_zero_apart(counter):
    """After a float became a graph input, nan, inf and zeros still get entries of their own
    (symbolic arithmetic would call nan equal to itself and -0.0 equal to 0.0)."""
    fn = stenograph.compile(_scale_and_nan, backend=counter)
    _check(fn, _scale_and_nan, X, 2.0)
    _check(fn, _scale_and_nan, X, 3.0)
    assert counter.frame_count == 2
    _check(fn, _scale_and_nan, X, 4.0)
    assert counter.frame_count == 2
    for value in (math.nan, math.inf, -0.0):
        out, same = fn(X, value)
        expected_out, expected_same = _scale_and_nan(X, value)
        torch.testing.assert_close(out, expected_out, equal_nan=True)
        assert same is expected_same
    assert counter.frame_count == 5


def test_signed_zero_inside_a_tuple(counter):
    def fn(x, t):
        return x * math.copysign(1.0, t[0])

    compiled = stenograph.compile(fn, backend=counter)
    _check(compiled, fn, X, (0.0, 1))
    _check(compiled, fn, X, (-0.0, 1))
    assert counter.frame_count == 2


# -- 7. one code object, several default sets ----------------------------------------------------


def _make(k):
    def g(x, a=k):
        return x + a

    return g


def _make_kwonly(k):
    def g(x, *, a=k):
        return x + a

    return g


def _make_closure(k, d):
    def g(x, a=d):
        return x * k + a

    return g


@pytest.mark.parametrize("factory", [_make, _make_kwonly])
def test_functions_sharing_code_with_other_defaults(counter, factory):
    g1, g2 = factory(1), factory(2)
    c1, c2 = stenograph.compile(g1, backend=counter), stenograph.compile(g2, backend=counter)
    _check(c1, g1, X)
    _check(c2, g2, X)
    assert counter.frame_count == 2
    _check(c1, g1, X)
    _check(c2, g2, X)
    assert counter.frame_count == 2
    g3 = factory(1)  # equal defaults: the first entry serves it
    _check(stenograph.compile(g3, backend=counter), g3, X)
    assert counter.frame_count == 2


def test_closures_sharing_code_with_other_defaults(counter):
    g1, g2 = _make_closure(2, 1), _make_closure(2, 5)
    c1, c2 = stenograph.compile(g1, backend=counter), stenograph.compile(g2, backend=counter)
    _check(c1, g1, X)
    _check(c2, g2, X)
    _check(c1, g1, X)
    assert counter.frame_count == 2


def _make_sign(k):
    def g(x, a=k):
        return x * math.copysign(1.0, a)

    return g


def test_signed_zero_default(counter):
    g1, g2 = _make_sign(0.0), _make_sign(-0.0)
    c1, c2 = stenograph.compile(g1, backend=counter), stenograph.compile(g2, backend=counter)
    _check(c1, g1, X)
    _check(c2, g2, X)
    _check(c1, g1, X)
    assert counter.frame_count == 2


def test_defaults_reassigned_after_compiling(counter):
    g = _make(1)
    compiled = stenograph.compile(g, backend=counter)
    _check(compiled, g, X)
    g.__defaults__ = (4,)
    _check(compiled, g, X)
    assert counter.frame_count == 2


class _Scaled:
    """Constructed inside the trace: its `__init__` is found on the class, with no source."""

    def __init__(self, value, scale=2.0, *, shift=0.0):
        self.value = value * scale + shift


def _construct(x):
    return _Scaled(x).value


@pytest.mark.parametrize("attribute,new", [("__defaults__", (3.0,)), ("__kwdefaults__", {"shift": 1.0})])
def test_literal_defaults_of_a_method_found_on_a_class_reassigned(counter, attribute, new):
    """A literal default of a method reached without a source is guarded (it was baked in)."""
    compiled = stenograph.compile(_construct, backend=counter)
    _check(compiled, _construct, X)
    old = getattr(_Scaled.__init__, attribute)
    setattr(_Scaled.__init__, attribute, new)
    try:
        _check(compiled, _construct, X)
        _check(compiled, _construct, X)
    finally:
        setattr(_Scaled.__init__, attribute, old)
    _check(compiled, _construct, X)
    assert counter.frame_count == 2


def _scale(x, a):
    return x * a


def _scale_closure(k):
    def g(x, a):
        return x * a + k

    return g


@pytest.mark.parametrize("factory", [lambda: _scale, lambda: _scale_closure(3)], ids=["plain", "closure"])
def test_defaults_given_after_compiling_a_function_without_any(counter, factory):
    """A function compiled without defaults that gets some later: calls leaning on them compile
    anew instead of feeding too few arguments to the old entry; removing them again reuses it."""
    g = factory()
    compiled = stenograph.compile(g, backend=counter)
    _check(compiled, g, X, 2)
    g.__defaults__ = (5,)
    try:
        _check(compiled, g, X)
        _check(compiled, g, X, 2)
        assert counter.frame_count == 2
    finally:
        g.__defaults__ = None
    _check(compiled, g, X, 2)
    assert counter.frame_count == 2
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        compiled(X)


def _breaking_closure(k):
    def inner(x, a):
        print("inner")  # breaks: the caller's graph break runs `inner` through the closure caller
        return x * k + a

    return inner


def _calls_with_one_argument(x, fn):
    return fn(x) + 1


def test_closure_called_at_a_break_with_and_without_defaults(counter, capsys):
    """A closure a break calls, compiled with a default, then a closure of the same code with no
    defaults: the call is missing an argument, as in eager, not served by the first entry."""
    compiled = stenograph.compile(_calls_with_one_argument, backend=counter)
    with_default = _breaking_closure(2)
    with_default.__defaults__ = (5,)
    _check(compiled, _calls_with_one_argument, X, with_default)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        compiled(X, _breaking_closure(2))
    _check(compiled, _calls_with_one_argument, X, with_default)
    assert capsys.readouterr().out == "inner\n" * 4


def test_one_code_with_and_without_defaults(counter):
    """Two functions of one code object, one with a default: each call binds its own."""
    plain = _make(1)
    other = type(plain)(plain.__code__, plain.__globals__, "other", None, plain.__closure__)
    c_plain, c_other = stenograph.compile(plain, backend=counter), stenograph.compile(other, backend=counter)
    _check(c_plain, plain, X)
    _check(c_other, other, X, 3)
    _check(c_plain, plain, X)
    with pytest.raises(TypeError):
        c_other(X)


def _sum_helpers(x):
    return HELPER_ONE(x) + HELPER_TWO(x)


HELPER_ONE = _make(1)
HELPER_TWO = _make(2)


def test_inlined_functions_sharing_code_with_other_defaults(counter):
    fn = stenograph.compile(_sum_helpers, backend=counter)
    _check(fn, _sum_helpers, X)
    _check(fn, _sum_helpers, X)
    assert counter.frame_count == 1
    HELPER_TWO.__defaults__ = (7,)
    try:
        _check(fn, _sum_helpers, X)
        assert counter.frame_count == 2
    finally:
        HELPER_TWO.__defaults__ = (2,)


def test_method_defaults_reassigned(counter):
    class Local:
        def run(self, x, a=1):
            return x + a

    fn = stenograph.compile(lambda x, o: o.run(x), backend=counter)
    o = Local()
    assert_same(fn(X, o), X + 1)
    assert_same(fn(X, o), X + 1)
    assert counter.frame_count == 1
    Local.run.__defaults__ = (5,)
    assert_same(fn(X, o), X + 5)
    assert counter.frame_count == 2


# -- 8. equal code objects, other globals ---------------------------------------------------------

_SOURCE = """
def scaled(x):
    y = x * K
    if RAISE:
        stenograph.graph_break()
    return y + OFFSET
"""


def _from_file(filename: str, k: float, offset: float, with_break: bool) -> object:
    """`scaled` made from `_SOURCE` as if written in `filename`: the code objects made in two
    files are equal (CPython's code equality leaves the file out), their globals are not."""
    namespace = {"K": k, "OFFSET": offset, "RAISE": with_break, "stenograph": stenograph}
    exec(compile(_SOURCE, filename, "exec"), namespace)
    return namespace["scaled"]


@pytest.mark.parametrize("with_break", [False, True])
def test_equal_code_objects_of_two_files_keep_their_own_entries(counter, with_break):
    """Two copies of one source (a vendored module, `exec`'d text, generated methods) make equal
    code objects over other globals. Each compiles for its own globals; with a graph break, each
    resumes over its own. The second used to run the first's entry (its globals' values)."""
    first, second = _from_file("a.py", 2.0, 1.0, with_break), _from_file("b.py", 3.0, 5.0, with_break)
    assert first.__code__ == second.__code__ and first.__code__ is not second.__code__
    for fn in (first, second, first, second):
        _check(stenograph.compile(fn, backend=counter), fn, X)
    assert counter.frame_count == (4 if with_break else 2)


@pytest.mark.parametrize("with_break", [False, True])
def test_one_code_object_over_other_globals_keeps_its_own_entries(counter, with_break):
    """A function made from another's code object over other globals (`types.FunctionType(code,
    globals)`, as cloning and unpickling do) reads its own globals, before and after a break."""
    first = _from_file("a.py", 2.0, 1.0, with_break)
    namespace = {"K": 3.0, "OFFSET": 5.0, "RAISE": with_break, "stenograph": stenograph, "__builtins__": __builtins__}
    second = types.FunctionType(first.__code__, namespace)
    for fn in (first, second, first, second):
        _check(stenograph.compile(fn, backend=counter), fn, X)
    assert counter.frame_count == (4 if with_break else 2)


# -- aliasing of tensor inputs a graph changes in place ------------------------------------------


def _bump_and_read(x, y):
    x.add_(1)
    return y * 2


def test_one_tensor_for_two_inputs_of_a_mutating_graph(counter):
    """Compiled for distinct x and y; then x is y, then y a view of x: each aliasing compiles
    its own entry (the functional graph read y's value from before x changed)."""
    compiled = stenograph.compile(_bump_and_read, backend=counter)
    calls = [
        lambda: (torch.zeros(2), torch.zeros(2)),
        lambda: (lambda a: (a, a))(torch.zeros(2)),
        lambda: (lambda a: (a, a.view(2)))(torch.zeros(2)),
        lambda: (lambda a: (a, a.view(2)))(torch.zeros(2)),
        lambda: (torch.zeros(2), torch.zeros(2)),
    ]
    for make in calls:
        mine, theirs = make(), make()
        assert_same(compiled(*mine), _bump_and_read(*theirs))
        assert_same(mine, theirs)
    assert counter.frame_count == 3


def test_aliasing_of_a_graph_without_mutation_is_not_guarded(counter):
    compiled = stenograph.compile(lambda x, y: x + y, backend=counter)
    a = torch.ones(2)
    assert_same(compiled(a, torch.ones(2)), a + 1)
    assert_same(compiled(a, a), a + a)
    assert counter.frame_count == 1


def test_a_class_made_by_exec_without_a_module_name_is_a_users_class(counter):
    """`exec` with globals lacking `__name__` gives classes `__module__ == "builtins"`; they are
    still a program's classes (heap types): their attributes are guarded, and calling a function
    stored on one is traced, not broken on as a builtin's method."""
    namespace: dict = {}
    program = (
        "class Base:\n    shift = 1.0\n"
        "class Op(Base):\n    def apply(x):\n        return x - 1\n"
        "def f(x):\n    return Op.apply(x * 2) + Op.shift\n"
    )
    exec(compile(program, "<program>", "exec"), namespace)  # noqa: S102 - the case itself
    f, base = namespace["f"], namespace["Base"]
    assert namespace["Op"].__module__ == "builtins"
    compiled = stenograph.compile(f, backend=counter)
    x = torch.randn(3)
    _check(compiled, f, x)
    _check(compiled, f, x)
    assert counter.frame_count == 1
    base.shift = 2.0
    _check(compiled, f, x)
    assert counter.frame_count == 2


class _AliasingConfig:
    """A configuration with a lookup of its own, as HuggingFace's: `width` reads `hidden`."""

    attribute_map: dict = {}

    def __init__(self) -> None:
        self.hidden = 4

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


@stenograph.disable
def _untraced(key):
    return key


class _OpaqueConfig(_AliasingConfig):
    """Its lookup calls what the trace does not follow."""

    def __getattribute__(self, key):
        return super().__getattribute__(_untraced(key))


def _extra_or_width(x, cfg):
    extra = getattr(cfg, "extra", None)
    return x * cfg.width if extra is None else x * extra


@pytest.mark.parametrize("opaque", [False, True], ids=["traced lookup", "opaque lookup"])
def test_an_attribute_a_configs_own_lookup_does_not_find(counter, opaque):
    """`getattr(cfg, "extra", None)` on an object whose class has its own `__getattribute__`:
    the lookup is followed in the trace, so the absence is guarded by what it reads (the
    instance dict, the classes, `attribute_map`) rather than by running it on every call; a
    lookup the trace cannot follow is guarded by `hasattr`. Setting the attribute on the object
    or its class, or aliasing it, recompiles."""

    class Config(_OpaqueConfig if opaque else _AliasingConfig):
        attribute_map = {"width": "hidden"}

    cfg, x = Config(), torch.randn(3)
    compiled = stenograph.compile(_extra_or_width, backend=counter)
    _check(compiled, _extra_or_width, x, cfg)
    _check(compiled, _extra_or_width, x, cfg)
    assert counter.frame_count == 1
    guard_source = stenograph.inspect(compiled).entries[0].guard_source
    assert ("hasattr(" in guard_source) == opaque

    def alias_extra() -> None:
        del Config.extra
        Config.attribute_map["extra"] = "hidden"

    changes = [lambda: setattr(cfg, "extra", 3.0), lambda: (delattr(cfg, "extra"), setattr(Config, "extra", 5.0))]
    if not opaque:  # the opaque lookup does not alias
        changes.append(alias_extra)
    for count, change in enumerate(changes, start=2):
        change()
        _check(compiled, _extra_or_width, x, cfg)
        _check(compiled, _extra_or_width, x, cfg)
        assert counter.frame_count == count
