"""inspect's data model under tracing: `inspect.signature` of a function known while tracing
(guarded on what it reads), binding arguments to it (`bind`, `bind_partial`: a new
`BoundArguments` whose `arguments` the program may change), signatures and parameters passed
in; and the C field descriptors' bound `__get__` (`type.__dict__["__dict__"].__get__`), with a
class's `__dict__` read through it guarded."""

from __future__ import annotations

import functools
import inspect

import pytest
import torch

import stenograph

from ._support import check, t

# -- binding arguments ------------------------------------------------------------------------------


def _target(a, b, *rest, c=10, d=11, **extra):
    return a


def _bind_and_change(x, fill):
    sig = inspect.signature(_target)
    bound = sig.bind(x, 2, 3, d=x * 2, e=15)
    bound.arguments["d"] = 13
    if fill:
        bound.apply_defaults()
    return bound.arguments, bound.args, bound.kwargs, bound.signature == sig, x + 1


@pytest.mark.parametrize("fill", [True, False])
def test_bind_with_tensors_changed_and_filled(cnt, fill):
    check(lambda x: _bind_and_change(x, fill), lambda i: (t(3, seed=i),), cnt)


def _bind_constants(x):
    bound = inspect.signature(_target).bind(1, 2, 3, d=12, e=15)
    bound.arguments["d"] = 13
    bound.apply_defaults()
    return bound, x + 1


def test_bound_arguments_returned_are_new_each_call(cnt):
    """The BoundArguments of constant arguments is made anew on each call, as eager's is: a
    caller changing the one it got does not change the next."""
    compiled = stenograph.compile(_bind_constants, backend=cnt, fullgraph=True)
    first, _ = compiled(t(2))
    assert first == _bind_constants(t(2))[0]
    first.arguments["a"] = 100
    second, _ = compiled(t(2))
    assert second is not first and second.arguments["a"] == 1
    assert cnt.frame_count == 1


def _bind_failing(x):
    y = x * 2  # before and after: a break in between would make two graphs
    sig = inspect.signature(_target)
    try:
        sig.bind(x)
    except TypeError as e:
        message = str(e)
    partial = sig.bind_partial(x, c=3)
    return y + 1, message, partial.arguments


def test_bind_errors_are_the_programs(cnt):
    check(_bind_failing, lambda i: (t(3, seed=i),), cnt)


class _Model:
    def step(self, x, y, z=2):
        return x


_MODEL = _Model()


def _method_signature(x):
    sig = inspect.signature(_MODEL.step)
    bound = sig.bind(x, x * 3)
    bound.apply_defaults()
    return len(sig.parameters), bound.args[1] + bound.arguments["z"]


def test_bound_method_signature(cnt):
    check(_method_signature, lambda i: (t(3, seed=i),), cnt)


# -- signatures and parameters passed in -------------------------------------------------------------


def _read_signature(x, sig, bound):
    param = sig.parameters["b"]
    bound.arguments["a"] = x
    return x + param.default + len(param.name) + param.kind, bound.args


def test_signature_and_bound_arguments_passed_in(cnt):
    """Their properties and methods are traced (inspect's other functions are not): the
    parameter read and the change to the caller's BoundArguments match eager."""
    sig = inspect.signature(lambda a, b=3: a)
    bounds = [sig.bind(1), sig.bind(1)]
    compiled = stenograph.compile(_read_signature, backend=cnt, fullgraph=True)
    expected, actual = _read_signature(t(2), sig, bounds[0]), compiled(t(2), sig, bounds[1])
    torch.testing.assert_close(actual[0], expected[0])
    assert bounds[1].arguments["a"] is actual[1][0]
    assert cnt.frame_count == 1


# -- what inspect.signature read is guarded ------------------------------------------------------


def _defaults_of(a, b=3, *, c=4):
    return a


def _read_defaults(x):
    params = inspect.signature(_defaults_of).parameters
    return x + params["b"].default + params["c"].default + len(params)


def test_signature_recompiles_when_the_function_changes(cnt):
    compiled = stenograph.compile(_read_defaults, backend=cnt, fullgraph=True)
    saved = _defaults_of.__defaults__, _defaults_of.__kwdefaults__
    try:
        torch.testing.assert_close(compiled(t(2)), _read_defaults(t(2)))
        torch.testing.assert_close(compiled(t(2)), _read_defaults(t(2)))
        assert cnt.frame_count == 1  # an identical call is served by the first entry
        _defaults_of.__defaults__ = (10,)
        torch.testing.assert_close(compiled(t(2)), _read_defaults(t(2)))
        _defaults_of.__kwdefaults__["c"] = 20  # changed in place
        torch.testing.assert_close(compiled(t(2)), _read_defaults(t(2)))
        assert cnt.frame_count == 3
        _defaults_of.__signature__ = inspect.Signature(
            [
                inspect.Parameter("b", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=100),
                inspect.Parameter("c", inspect.Parameter.KEYWORD_ONLY, default=1000),
            ]
        )
        torch.testing.assert_close(compiled(t(2)), _read_defaults(t(2)))
        assert cnt.frame_count == 4
    finally:
        _defaults_of.__defaults__, _defaults_of.__kwdefaults__ = saved
        del _defaults_of.__signature__


def _inner(p, q):
    return p


@functools.wraps(_inner)
def _wrapper(*args, **kwargs):
    return _inner(*args, **kwargs)


def _count_wrapped(x):
    return x + len(inspect.signature(_wrapper).parameters)


def test_signature_follows_wrapped_and_guards_it(cnt):
    compiled = stenograph.compile(_count_wrapped, backend=cnt, fullgraph=True)
    torch.testing.assert_close(compiled(t(2)), _count_wrapped(t(2)))
    saved = _wrapper.__wrapped__
    try:
        _wrapper.__wrapped__ = lambda p, q, r: p
        torch.testing.assert_close(compiled(t(2)), _count_wrapped(t(2)))
        assert cnt.frame_count == 2
    finally:
        _wrapper.__wrapped__ = saved


# -- C field descriptors' __get__ and a class's __dict__ ----------------------------------------


_get_dunder_dict = type.__dict__["__dict__"].__get__


class _Config:
    scale = 2
    param = inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=42)


def _class_namespace(x):
    held = _get_dunder_dict(_Config)
    made = type.__dict__["__dict__"].__get__(_Config)
    return x * held["scale"] + len(made) + held["param"].default + len(_Config.__dict__) + vars(_Config)["scale"]


def test_class_dict_through_the_descriptor(cnt):
    check(_class_namespace, lambda i: (t(3, seed=i),), cnt)


def test_class_dict_is_guarded(cnt):
    """The namespace is read from the class: a changed value, or a new attribute, recompiles."""
    compiled = stenograph.compile(_class_namespace, backend=cnt, fullgraph=True)
    try:
        torch.testing.assert_close(compiled(t(2)), _class_namespace(t(2)))
        _Config.scale = 5
        torch.testing.assert_close(compiled(t(2)), _class_namespace(t(2)))
        _Config.extra = 1
        torch.testing.assert_close(compiled(t(2)), _class_namespace(t(2)))
        assert cnt.frame_count == 3
    finally:
        _Config.scale = 2
        del _Config.extra


class _OwnDict(type):
    @property
    def __dict__(cls):
        return {"z": 1}


class _Odd(metaclass=_OwnDict):
    pass


def test_descriptor_get_where_lookup_finds_another_breaks():
    """`__get__` of `type`'s `__dict__` on a class whose metaclass defines its own `__dict__`:
    the descriptor's read differs from the attribute's, a graph break with the reason."""

    def fn(x):
        return x + len(_get_dunder_dict(_Odd))

    compiled = stenograph.compile(fn, backend="eager", fullgraph=True)
    with pytest.raises(stenograph.errors.Unsupported, match="is not read through it"):
        compiled(t(2))


def _nowrap_member(x):
    funcs = torch.overrides.get_default_nowrap_functions()
    d = {frozenset(funcs): x * 2}
    if torch.Tensor.grad.__get__ in funcs:
        return d[frozenset(funcs)] + x
    return x


def test_field_descriptor_get_as_a_set_member(cnt):
    check(_nowrap_member, lambda i: (t(4, seed=i),), cnt)
