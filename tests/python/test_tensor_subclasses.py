"""Tensor subclasses (issue 27): inputs of a user subclass (with or without `__torch_function__`,
listed in `config.traceable_tensor_subclasses` or not) are traced as plain graph operations run
on the real instances, so their `__torch_function__` runs as eagerly; `isinstance`/`type()` of
such an input is its class (guarded), of a tensor computed from one a graph break (its class is
decided when the operation runs). Under the AOTAutograd backends such graphs run as captured."""

from __future__ import annotations

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounterWithBackend

from ._support import assert_same


class _Plain(torch.Tensor):
    pass


class _Passing(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class _AddIsSub(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__):
            func = torch.sub
        return super().__torch_function__(func, types, args, kwargs or {})


def _ops(x):
    return (x.sin() + 1).sum()


def _add(x):
    return torch.add(x, 1) * 2


def _checks_type(x):
    return x + (1 if isinstance(x, _Passing) else 2)


def _makes_one(x):
    return x.as_subclass(_Passing).cos() + 1


_CASES = [
    (_ops, _Plain),
    (_ops, _Passing),
    (_add, _AddIsSub),
    (_checks_type, _Passing),
    (_checks_type, _Plain),
    (_makes_one, None),
]


def _assert_same_typed(actual, expected):
    assert type(actual) is type(expected)
    assert_same(actual.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))


@pytest.mark.parametrize("traceable", [False, True])
@pytest.mark.parametrize("backend", ["counter", "aot_eager"])
@pytest.mark.parametrize(("fn", "cls"), _CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_subclass_results_as_eager(cnt, fn, cls, backend, traceable):
    counter = cnt if backend == "counter" else CompileCounterWithBackend(backend)
    subclasses = {_Plain, _Passing, _AddIsSub} if traceable else set()

    def make():
        x = torch.linspace(-1, 1, 3)
        return x if cls is None else x.as_subclass(cls)

    with stenograph.config.patch(traceable_tensor_subclasses=subclasses):
        compiled = stenograph.compile(fn, backend=counter)
        for _ in range(2):
            _assert_same_typed(compiled(make()), fn(make()))
    assert counter.frame_count == 1


def test_subclass_type_is_guarded(cnt):
    compiled = stenograph.compile(_checks_type, backend=cnt)
    for cls in (_Passing, _Plain, _Passing):
        x = torch.ones(3).as_subclass(cls)
        _assert_same_typed(compiled(x), _checks_type(x))
    assert cnt.frame_count == 2  # one entry per class; the first serves again
    _assert_same_typed(compiled(torch.ones(3)), _checks_type(torch.ones(3)))
    assert cnt.frame_count == 3


def test_type_of_a_result_breaks_the_graph(cnt):
    def fn(x):
        y = x + 1
        return y * 2 if isinstance(y, _Passing) else y * 3

    x = torch.ones(2).as_subclass(_Passing)
    _assert_same_typed(stenograph.compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 2
    reasons = stenograph.explain(fn)(x).break_reasons
    assert "computed from a tensor subclass instance" in reasons[0].reason


class _Overriding(torch.Tensor):
    """A subclass defining tensor members itself: eager reads these, not the tensor's."""

    ndim = 10

    def to(self, *args, **kwargs):
        return super().to(*args, **kwargs) * 7

    def numel(self):
        return super().numel() + 40

    def __len__(self):
        return 42

    @property
    def shape(self):
        return (99, *super().shape)


def _reads_overrides(x):
    return x.to(torch.float64), x.numel(), len(x), x.ndim, x.shape, x.size(), x.sin() + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_members_a_subclass_defines_are_read_as_eager(backend):
    """`to`, `numel`, `__len__`, a class attribute `ndim` and a `shape` property of the subclass
    are what the compiled function reads (they were the tensor's: silently other values), their
    `super()` calls the tensor's own; a class attribute changed later is seen."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_reads_overrides, backend=cnt, fullgraph=True)
    x = torch.ones(2).as_subclass(_Overriding)
    assert_same(compiled(x), _reads_overrides(x))
    assert type(compiled(x)[0]) is _Overriding and cnt.frame_count == 1
    scaled = stenograph.compile(lambda x: x * x.ndim, backend=cnt)
    assert_same(scaled(x), x * 10)
    _Overriding.ndim = 3
    try:
        assert compiled(x)[3] == 3
        assert_same(scaled(x), x * 3)
    finally:
        _Overriding.ndim = 10
