"""Tensor subclasses (issue 27): inputs of a user subclass (with or without `__torch_function__`,
listed in `config.traceable_tensor_subclasses` or not) are traced as plain graph operations run
on the real instances, so their `__torch_function__` runs as eagerly; `isinstance`/`type()` of
such an input is its class (guarded), of a tensor computed from one a graph break (its class is
decided when the operation runs). Under the AOTAutograd backends such graphs run as captured."""

from __future__ import annotations

import warnings

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


def _makes_one_of_an_intermediate(x):
    return torch.add(x, 1.0).as_subclass(_Passing) * 2


def _constructs_one(x):
    return _AddIsSub(torch.add(x, 1.0)) + 2


_CASES = [
    (_ops, _Plain),
    (_ops, _Passing),
    (_add, _AddIsSub),
    (_checks_type, _Passing),
    (_checks_type, _Plain),
    (_makes_one, None),
    (_makes_one_of_an_intermediate, None),
    (_constructs_one, None),
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


class _Wrapper(torch.Tensor):
    """A wrapper tensor as large as its first inner tensor (the subclasses below)."""

    @staticmethod
    def __new__(cls, inner, *rest):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)


class _Shifted(_Wrapper):
    """A traceable wrapper subclass whose flatten context (`shift`) changes its results."""

    def __init__(self, inner, shift):
        self.inner, self.shift = inner, shift

    def __repr__(self):  # torch's would run operations (AOTAutograd's debug log prints it)
        return f"_Shifted({self.inner!r}, {self.shift})"

    def __tensor_flatten__(self):
        return ["inner"], (self.shift,)

    @staticmethod
    def __tensor_unflatten__(inner, context, size, stride):
        return _Shifted(inner["inner"], context[0])

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        shift = args[0].shift
        out = func(*[a.inner if isinstance(a, _Shifted) else a for a in args], **(kwargs or {}))
        return _Shifted(out + shift, shift)


class _Scaled(_Wrapper):
    """A traceable wrapper subclass with an optional inner tensor (`scale`)."""

    def __init__(self, data, scale):
        self.data_, self.scale = data, scale

    def __repr__(self):
        return f"_Scaled({self.data_!r}, {self.scale!r})"

    def __tensor_flatten__(self):
        return (["data_", "scale"] if self.scale is not None else ["data_"]), None

    @staticmethod
    def __tensor_unflatten__(inner, context, size, stride):
        return _Scaled(inner["data_"], inner.get("scale"))

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        this = args[0]
        out = func(this.data_, *args[1:], **(kwargs or {}))
        return _Scaled(out if this.scale is None else out * this.scale, this.scale)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_wrapper_subclass_flattening_otherwise_recompiles(backend):
    """The graph AOTAutograd traced through a wrapper subclass holds for its flatten context and
    inner tensors: another context, or another set of inner tensors, recompiles (the graph of
    the first was reused: silently other results)."""
    cnt = CompileCounterWithBackend(backend)
    shifted = stenograph.compile(lambda x: x * 1, backend=cnt)
    for shift in (3, 4, 3):
        x = _Shifted(torch.ones(2), shift)
        assert_same(shifted(x).inner, (x * 1).inner)
    assert cnt.frame_count == 2
    scaled = stenograph.compile(lambda x: x + 1, backend=cnt)
    for scale in (None, torch.full((2,), 10.0), None, torch.full((2,), 5.0)):
        x = _Scaled(torch.ones(2), scale)
        assert_same(scaled(x).data_, (x + 1).data_)
    assert cnt.frame_count == 4


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_wrapper_subclass_inside_another_is_guarded(backend):
    """A `_Shifted` as an inner tensor of a `_Scaled`: its own context (the shift its dispatch
    adds) is baked into the traced graph too; another shift recompiles (the first graph was
    reused: the old shift, silently)."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(lambda x: x * 1, backend=cnt, fullgraph=True)
    for shift in (2, 3, 2):
        x = _Scaled(_Shifted(torch.ones(2), shift), None)
        assert_same(compiled(x).data_.inner, (x * 1).data_.inner)
    assert cnt.frame_count == 2


class _BadGuardArity(_Shifted):
    @classmethod
    def __metadata_guard__(cls, context):
        return True


class _GuardNotClassmethod(_Shifted):
    def __metadata_guard__(self, before, now):
        return True


@pytest.mark.parametrize("cls", [_BadGuardArity, _GuardNotClassmethod])
def test_a_malformed_metadata_guard_is_named(cls):
    """`__metadata_guard__` must be a classmethod of two contexts: anything else is the user's
    error, named, not a guard that fails on every call."""
    compiled = stenograph.compile(lambda x: x * 1, backend="eager", fullgraph=True)
    with pytest.raises(stenograph.errors.UserError, match=f"{cls.__qualname__}.__metadata_guard__ must"):
        compiled(cls(torch.ones(2), 1))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_wrapper_subclass_with_dynamic_sizes(backend):
    """`dynamic=True` on a traceable wrapper subclass input: its sizes and its inner tensor's are
    symbolic, one graph serves every size (torch's subclass symbolic context; it was an internal
    error)."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(lambda x: x * x.shape[0], backend=cnt, dynamic=True, fullgraph=True)
    for rows in (2, 3, 5):
        x = _Shifted(torch.randn(rows, 4), 1)
        assert_same(compiled(x).inner, (x * rows).inner)
    assert cnt.frame_count == 1


class _TenDims(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func == torch.Tensor.ndim.__get__:
            return 10
        return super().__torch_function__(func, types, args, kwargs or {})


class _SummedAsMine(torch.Tensor):
    def sum(self, dim=None, keepdim=False):
        return super().sum(dim=dim, keepdim=keepdim).as_subclass(_SummedAsMine)


def test_metadata_a_torch_function_answers_itself_and_a_method_named_self(cnt):
    """`ndim` answered by the class's `__torch_function__` is eager's answer (a break; the trace
    used the tensor's own 2: silently another result); an override whose `self` is a graph
    input (its placeholder was named `self`, which the graph module's forward already takes)."""
    x = torch.ones(2, 2).as_subclass(_TenDims)
    assert_same(stenograph.compile(lambda w: w.ndim + torch.ones(2), backend=cnt)(x), torch.ones(2) + 10)

    def summed(x):
        return x.as_subclass(_SummedAsMine).sum(dim=1)

    y = torch.randn(4, 10)
    got = stenograph.compile(summed, backend=cnt)(y)
    assert type(got) is _SummedAsMine
    assert_same(got.as_subclass(torch.Tensor), summed(y).as_subclass(torch.Tensor))


class _Boxed:
    """Not a tensor: an object torch functions accept through its class's `__torch_function__`,
    which unwraps it (and scales the result, so the handler's path shows in the values)."""

    def __init__(self, tensor):
        self.tensor = tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        args = [a.tensor if isinstance(a, _Boxed) else a for a in args]
        return func(*args, **kwargs) * 10


_HANDLED = {}


class _Counted:
    """The registry form: a dict keyed by torch functions, NotImplemented for the others."""

    def __init__(self, n):
        self.n = n

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func not in _HANDLED:
            return NotImplemented
        return _HANDLED[func](*args, **(kwargs or {}))


_HANDLED[torch.stack] = lambda items, dim=0: _Counted(sum(item.n for item in items))


def _through_handlers(x, boxed, a, b):
    added = torch.add(boxed, 1.0, alpha=2.0)
    made = torch.mul(_Boxed(x), x)  # an object made in the frame
    counted = torch.stack([a, b])
    return added + made, counted.n


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_objects_overriding_torch_functions_are_dispatched_to_their_handler(backend):
    # one graph, as torch.compile makes; eager's values
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_through_handlers, backend=cnt, fullgraph=True)
    for _ in range(2):
        x = torch.randn(3)
        boxed = _Boxed(torch.randn(3))
        expected = _through_handlers(x, boxed, _Counted(1), _Counted(2))
        assert_same(compiled(x, boxed, _Counted(1), _Counted(2)), expected)
    assert cnt.frame_count == 1


def test_handlers_all_answering_not_implemented_raise_eagers_error(cnt):
    compiled = stenograph.compile(lambda c, x: torch.add(c, x), backend=cnt)
    with pytest.raises(TypeError) as eager:
        torch.add(_Counted(1), torch.ones(2))
    with pytest.raises(TypeError) as compiled_error:
        compiled(_Counted(1), torch.ones(2))
    assert str(compiled_error.value) == str(eager.value)


class _WithScale(torch.Tensor):
    @property
    def scale(self):
        return self.__dict__.get("_scale", 1) * 10

    @scale.setter
    def scale(self, value):
        self.__dict__["_scale"] = value


def test_setting_a_subclass_property_runs_its_setter(cnt):
    # a property of the tensor's class is not a plain attribute: the write breaks and runs the
    # setter eagerly, and the read after it goes through the getter
    def fn(x):
        x.scale = 3
        return x + 1, x.scale

    x, x_eager = torch.ones(2).as_subclass(_WithScale), torch.ones(2).as_subclass(_WithScale)
    assert_same(stenograph.compile(fn, backend=cnt)(x), fn(x_eager))
    assert x.scale == x_eager.scale == 30


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_subclass_made_in_the_frame_keeps_autograd_history(backend):
    """`Cls(t)` and `t.as_subclass(Cls)` of an intermediate (they broke the graph): an alias of
    class `Cls` whose gradients flow back as eagerly."""

    def fn(x):
        return (_Passing(x * 3).sin() + torch.add(x, 1.0).as_subclass(_Passing)).sum()

    x, x_ref = torch.linspace(-1, 1, 4, requires_grad=True), torch.linspace(-1, 1, 4, requires_grad=True)
    got = stenograph.compile(fn, backend=backend, fullgraph=True)(x)
    expected = fn(x_ref)
    _assert_same_typed(got, expected)
    got.backward()
    expected.backward()
    assert_same(x.grad, x_ref.grad)


class _MadeByNew(torch.Tensor):
    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_subclass(cls, data)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_make_subclass_directly_and_in_the_users_new(backend):
    """`torch.Tensor._make_subclass(cls, data)`: an instance of `cls` sharing `data`'s storage,
    detached; called directly or by the class's own `__new__`: one graph, eager's class and values."""

    def direct(x):
        y = torch.Tensor._make_subclass(_Passing, x * 2)
        return y.sin(), y.requires_grad

    def through_new(x):
        return _MadeByNew(x * 2) + 1

    def aliases(x):  # all three share x's storage, as eagerly
        y = torch.Tensor._make_subclass(_Plain, x)
        z = torch.Tensor._make_subclass(torch.Tensor, x)
        x += 1
        y += 2
        z += 3
        return x * y + z

    x = torch.randn(2, 2)
    x_eager = x.clone()
    _assert_same_typed(stenograph.compile(aliases, backend=backend, fullgraph=True)(x), aliases(x_eager))
    assert_same(x, x_eager)

    for fn in (direct, through_new):
        cnt = CompileCounterWithBackend(backend)
        x = torch.randn(3, requires_grad=True)
        got, want = stenograph.compile(fn, backend=cnt, fullgraph=True)(x), fn(x)
        if isinstance(want, tuple):
            (got, got_flag), (want, want_flag) = got, want
            assert got_flag is want_flag is False
        _assert_same_typed(got, want)
        assert cnt.frame_count == 1

    for refused in (
        lambda x: torch.Tensor._make_subclass(_Passing, x, True),
        lambda x: torch.Tensor._make_subclass(_Passing, x, dispatch_sizes_strides_policy="sizes"),
    ):
        with pytest.raises(stenograph.Unsupported, match="_make_subclass"):
            stenograph.compile(refused, backend="eager", fullgraph=True)(torch.randn(2))


class _KeepsElem(torch.Tensor):
    @staticmethod
    def __new__(cls, elem):
        made = torch.Tensor._make_subclass(cls, torch.ones(0))
        made.elem = elem
        return made


class _CustomSetattr(torch.Tensor):
    def __setattr__(self, name, value):
        super().__setattr__(name, value * 10)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_attributes_written_on_a_subclass_instance_made_in_the_frame(backend):
    """`y.tag = ...` on an instance of a user subclass the frame made (`as_subclass`, `Cls(t)`,
    its own `__new__`): one graph, later reads see the value, and the returned instance has it."""

    def tagged(x):
        y = (x * 2).as_subclass(_Plain)
        y.tag = 42
        z = _Passing(x + 1)
        z.scale = 3
        return y, z * z.scale + y.tag

    def rewrapped(t):
        return _KeepsElem(t.elem.clone() + 1)

    x = torch.randn(3)
    cnt = CompileCounterWithBackend(backend)
    got, want = stenograph.compile(tagged, backend=cnt, fullgraph=True)(x), tagged(x)
    assert_same(got, want)
    assert (type(got[0]), got[0].tag) == (type(want[0]), want[0].tag) == (_Plain, 42)
    assert cnt.frame_count == 1
    t = _KeepsElem(torch.randn(2))
    got, want = stenograph.compile(rewrapped, backend=backend, fullgraph=True)(t), rewrapped(t)
    assert type(got) is type(want) is _KeepsElem
    assert_same(got.elem, want.elem)


def test_a_subclass_with_its_own_setattr_or_property_is_not_written_in_the_graph(cnt):
    def fn(x):
        y = x.as_subclass(_CustomSetattr)
        y.tag = 2
        return y.tag

    x = torch.ones(2)
    assert fn(x) == stenograph.compile(fn, backend=cnt)(x) == 20
    explained = stenograph.explain(fn)(x)
    assert [r.reason for r in explained.break_reasons] == ["setting tensor attribute 'tag'"]


def test_a_view_of_a_wrapper_subclass_whose_sizes_cannot_be_guarded_runs_eagerly():
    """`TwoTensor(...).split(5, -1)[2]` passed with dynamic=True: torch names one of its
    symbolic sizes by an ephemeral source that no guard can read (torch.compile fails on
    `t[2:3, 5:9]` the same way). It used to escape as NotImplementedError; the frame now runs
    eagerly, and fullgraph=True raises Unsupported."""
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        return x * 2

    t = TwoTensor(torch.randn(4, 15), torch.randn(4, 15))
    for view in (t.split(5, -1)[2], t[2:3, 5:9]):
        stenograph.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stenograph.StenographWarning)
            got = stenograph.compile(f, backend="aot_eager", dynamic=True)(view)
        assert_same(got, f(view))
        stenograph.reset()
        with pytest.raises(stenograph.Unsupported, match="size guard on a value stenograph cannot read back"):
            stenograph.compile(f, backend="aot_eager", dynamic=True, fullgraph=True)(view)


class _Untraceable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("one shall not pass")


def test_nontraceable_tensor_subclasses_are_plain_objects():
    """`config.nontraceable_tensor_subclasses` (torch's setting): instances are objects whose
    Python attributes the trace reads (guarded), never tensors it would inspect (which would run
    the class's `__torch_function__`, here raising)."""

    def f(t):
        return t.foo + torch.ones(3)

    t = _Untraceable(torch.ones(2))
    t.foo = 42
    with stenograph.config.patch(nontraceable_tensor_subclasses={_Untraceable}):
        compiled = stenograph.compile(f, backend="eager", fullgraph=True)
        assert_same(compiled(t), f(t))
        t.foo = 43  # the attribute is guarded
        assert_same(compiled(t), torch.full((3,), 44.0))


class _ScaledWithConstant(torch.Tensor):
    """A traceable wrapper subclass: data, a scale tensor, and a constant in its context."""

    @staticmethod
    def __new__(cls, data, scale, constant=0):
        return torch.Tensor._make_wrapper_subclass(
            cls, data.size(), strides=data.stride(), dtype=data.dtype, device=data.device
        )

    def __init__(self, data, scale, constant=0):
        self.data_ = data
        self.scale = scale
        self.constant = constant

    def __tensor_flatten__(self):
        return ["data_", "scale"], {"constant": self.constant}

    @staticmethod
    def __tensor_unflatten__(inner, context, outer_size, outer_stride):
        return _ScaledWithConstant(inner["data_"], inner["scale"], context["constant"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        first = next(a for a in args if isinstance(a, _ScaledWithConstant))
        out = func(*[a.data_ if isinstance(a, _ScaledWithConstant) else a for a in args], **(kwargs or {}))
        return _ScaledWithConstant(out, first.scale * 2, first.constant + 1) if isinstance(out, torch.Tensor) else out


def test_members_of_a_wrapper_subclass_made_in_the_frame():
    """Inner tensors and context constants (those `__tensor_flatten__` names) of a traceable
    wrapper subclass an operation returned are read in the trace: they were a graph break."""

    def f(x):
        made = torch.add(x, 1)
        return made.scale * made.constant + made.data_

    x = _ScaledWithConstant(torch.randn(2, 3), torch.randn(3), constant=2)
    compiled = stenograph.compile(f, backend="eager", fullgraph=True)
    assert_same(compiled(x), f(x))
    y = _ScaledWithConstant(torch.randn(2, 3), torch.randn(3), constant=5)  # another context: guarded
    assert_same(compiled(y), f(y))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_inner_tensors_of_a_two_tensor_made_in_the_frame(backend):
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        made = x * 2
        return made.a + made.b.sin()

    x = TwoTensor(torch.randn(3), torch.randn(3))
    assert_same(stenograph.compile(f, backend=backend, fullgraph=True)(x), f(x))


class _Deferred(torch.Tensor):
    """A wrapper subclass whose attributes its `__init__` sets (after `__new__`)."""

    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(cls, data.size(), dtype=data.dtype, device=data.device)

    def __init__(self, data, scale):
        self._data = data
        self._scale = scale

    def __tensor_flatten__(self):
        return ["_data"], {"scale": self._scale}

    @staticmethod
    def __tensor_unflatten__(inner, context, outer_size, outer_stride):
        return _Deferred(inner["_data"], context["scale"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        return func(*[a._data if isinstance(a, _Deferred) else a for a in args], **(kwargs or {}))


def test_compiling_the_init_of_a_wrapper_subclass_runs_it_eagerly():
    """`compile(Cls.__init__)(shell, ...)` on an instance `__new__` made: its
    `__tensor_flatten__` cannot run yet (AttributeError escaped); the frame runs eagerly."""
    init = stenograph.compile(_Deferred.__init__, backend="eager")
    data = torch.randn(4, 4)
    shell = _Deferred.__new__(_Deferred, data, 2.0)
    with pytest.warns(stenograph.StenographWarning, match="__tensor_flatten__ failed"):
        init(shell, data, 2.0)
    assert shell._data is data and shell._scale == 2.0


class _CountsFunctions(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_disable_torch_function_subclass_block(backend):
    """`with torch._C.DisableTorchFunctionSubclass():` in compiled code: entered and left in the
    graph, so operations inside it on a subclass instance give plain tensors, as eagerly."""

    def fn(x):
        with torch._C.DisableTorchFunctionSubclass():
            y = torch.add(x, 1.0)
        return y * 2

    plain = torch.ones(2, 2)
    cnt = CompileCounterWithBackend(backend)
    assert_same(stenograph.compile(fn, backend=cnt, fullgraph=True)(plain), fn(plain))
    assert cnt.frame_count == 1
    sub = torch.ones(3).as_subclass(_CountsFunctions)
    got, expected = stenograph.compile(fn, backend="eager", fullgraph=True)(sub), fn(sub)
    assert type(got) is type(expected) is torch.Tensor
    assert_same(got, expected)


class _Counting(torch.Tensor):
    seen: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _Counting.seen.append(getattr(func, "__name__", repr(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_guards_do_not_run_a_subclass_torch_function():
    """A cached call runs the input's `__torch_function__` as often as eager does: the guard's
    dtype, device, size and requires_grad reads used to run it five more times; a changed
    shape or dtype still recompiles."""

    def fn(x):
        return torch.add(x, 1.0)

    cnt = CompileCounterWithBackend("eager")
    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2).as_subclass(_Counting)
    compiled(x)
    for _ in range(2):
        _Counting.seen = []
        fn(x)
        eager_calls = list(_Counting.seen)
        _Counting.seen = []
        compiled(x)
        assert _Counting.seen == eager_calls == ["add"]
    for other in (torch.ones(3).as_subclass(_Counting), torch.ones(2, dtype=torch.float64).as_subclass(_Counting)):
        assert_same(compiled(other).as_subclass(torch.Tensor), fn(other).as_subclass(torch.Tensor))
    assert cnt.frame_count == 3
