"""User `nn.Module` subclasses instantiated inside the compiled function: `__init__` (with
`super().__init__()`, submodules, buffers, plain attributes) and `forward` are traced, what
`nn.Module` itself does (filing members, finding them, the call) is modelled, and a module that
escapes is rebuilt as a real one. A parameter created in the frame is a graph break, as with
torch.compile."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

import stenograph

from ._support import check, t


class _Shift(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.register_buffer("shift", torch.full((4,), float(k)), persistent=False)

    def forward(self, x):
        return x + self.shift * self.k


class _Block(nn.Module):
    def __init__(self, n, p=0.5):
        super().__init__()
        self.act = nn.ReLU()
        self.drop = nn.Dropout(p)
        self.register_buffer("scale", torch.ones(n) * 2)
        self.inner = _Shift(3)
        self.add_module("squash", nn.Tanh())
        self.n = n

    def forward(self, x):
        y = self.drop(self.act(x)) * self.scale + self.n
        self.scale = self.scale + 1  # a buffer's name: stays a buffer
        return self.squash(self.inner(y)), hasattr(self, "missing"), getattr(self, "nothing", 5), self.training


def _made_and_called(x):
    m = _Block(4)
    return m(x)


# torch.compile breaks in `hasattr(self, "missing")` (its sourceless builder meets the module's
# `__loader__`): 2 graphs up to Python 3.13; on 3.14+ it traces it (1 graph)
_PEER_GRAPHS = 2 if sys.version_info < (3, 14) else 1


def test_module_made_and_called_in_the_frame(cnt):
    # dropout draws from the RNG in the graph: the stream matches eager's
    check(_made_and_called, lambda i: (t(4, seed=i, grad=True),), cnt, grads=True, torch_graphs=_PEER_GRAPHS)


def _made_and_returned(x):
    m = _Block(4, p=0.0)
    return m(x)[0], m


def test_module_made_in_the_frame_escapes_as_a_real_module(cnt):
    (out, module), _ = check(_made_and_returned, lambda i: (t(4, seed=i),), cnt, torch_graphs=_PEER_GRAPHS)
    assert type(module) is _Block and list(module._modules) == ["act", "drop", "inner", "squash"]
    assert list(module.state_dict()) == ["scale"]  # the inner buffer is not persistent
    assert module.inner._non_persistent_buffers_set == {"shift"}
    torch.testing.assert_close(module.scale, torch.full((4,), 3.0))
    assert module.training and module.inner.training
    torch.testing.assert_close(module(t(4))[0], _Block(4, p=0.0)(t(4))[0] + 0 * module.scale)


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        head = _Shift(2)  # a layer made on every call, as some models do
        return head(self.lin(x)).sum()


def test_module_made_inside_a_compiled_modules_forward(cnt):
    torch.manual_seed(0)
    model = _Outer()
    check(lambda x: model(x), lambda i: (t(3, 4, seed=i, grad=True),), cnt, grads=True)


class _Registry(nn.Module):
    """add_module / register_module, a submodule cleared to None, a member deleted."""

    def __init__(self):
        super().__init__()
        self.register_module("first", nn.GELU())
        self.second = nn.Sigmoid()
        self.second = None
        self.register_buffer("tmp", torch.zeros(4))
        del self.tmp
        self.scale = 2.0

    def forward(self, x):
        return self.first(x) * self.scale, self.second, hasattr(self, "tmp")


def _registry(x):
    m = _Registry()
    out = m(x)
    return out, m


def test_module_registration_methods(cnt):
    check(_registry, lambda i: (t(4, seed=i),), cnt)


class _Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        y = self.act(x)
        print("inside", tuple(y.shape))
        return y * 2


def _with_a_print(x):
    m = _Noisy()
    return m(x + 1) - 1


def test_a_break_inside_the_new_modules_forward(cnt, capsys):
    # the module is rebuilt for the call that runs at the break; its forward is compiled as a
    # frame of its own (graphs: `x + 1`, `relu`, `y * 2`, `- 1`)
    check(_with_a_print, lambda i: (t(4, seed=i),), cnt, capsys, graphs=4)


class _WithParameter(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x * self.weight


def _makes_a_parameter(x):
    y = x.sin()
    m = _WithParameter(4)
    return m(y).cos()


def test_a_parameter_made_in_the_frame_is_a_graph_break(cnt):
    # the module is made eagerly at the break (its randn draws eager's numbers); the code after
    # it is traced with the real module, reused for every call (modules are guarded by class)
    check(_makes_a_parameter, lambda i: (t(4, seed=i),), cnt, graphs=2, calls=3)
    explained = stenograph.explain(_makes_a_parameter)(t(4))
    assert any("Parameter" in r.reason for r in explained.break_reasons)


class _WithLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


def test_a_submodule_with_parameters_is_a_graph_break(cnt):
    def fn(x):
        y = x.sin()
        return _WithLinear()(y).cos()

    check(fn, lambda i: (t(4, seed=i),), cnt, graphs=2)


def test_module_made_in_the_frame_guards(cnt):
    compiled = stenograph.compile(_made_and_returned, backend=cnt)
    for _ in range(2):
        compiled(t(4))
    assert cnt.frame_count == 1  # identical inputs: no recompile
    original = _Block.forward

    def doubled(self, x):
        return original(self, x)[0] * 2, None, None, None

    try:
        _Block.forward = doubled  # a replaced method recompiles
        out, _ = compiled(t(4))
        torch.testing.assert_close(out, _made_and_returned(t(4))[0])
        assert cnt.frame_count == 2
    finally:
        _Block.forward = original


def test_global_forward_hooks_run_for_a_module_made_in_the_frame(cnt):
    calls = []
    compiled = stenograph.compile(_made_and_returned, backend=cnt)
    compiled(t(4))
    assert cnt.frame_count == 1
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: calls.append(type(m).__name__))
    try:
        out, _ = compiled(t(4))  # the hook table is guarded: recompiles, and the hooks run
        eager_calls = list(calls)
        calls.clear()
        _made_and_returned(t(4))
        assert calls == eager_calls and "_Block" in calls
    finally:
        handle.remove()


def _assigned_to_the_caller(model, x):
    model.extra = _Shift(1)  # a submodule assignment on a module from outside: breaks (setattr)
    return model.extra(x)


def test_assigning_a_new_module_to_an_outside_module_breaks_naming_setattr(cnt):
    model = nn.Module()
    compiled = stenograph.compile(_assigned_to_the_caller, backend=cnt)
    torch.testing.assert_close(compiled(model, t(4)), t(4) + 1)
    assert isinstance(model._modules["extra"], _Shift)
    explained = stenograph.explain(_assigned_to_the_caller)(nn.Module(), t(4))
    assert any("setattr" in r.reason for r in explained.break_reasons)


class _Subclassed(nn.Linear):
    pass


@pytest.mark.parametrize("make", [lambda: _Subclassed(4, 4), lambda: nn.Sequential(nn.ReLU())])
def test_subclasses_of_torch_layers_break_at_their_creation(cnt, make):
    def fn(x):
        y = x.sin()
        return make()(y).cos()

    torch.manual_seed(0)
    expected = fn(t(4))
    torch.manual_seed(0)
    torch.testing.assert_close(stenograph.compile(fn, backend=cnt)(t(4)), expected)
    assert cnt.frame_count == 2


class _OldStyle(nn.Module):
    def __init__(self):
        nn.Module.__init__(self)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(x)


class _WithProperty(nn.Module):
    def __init__(self, k):
        super().__init__()
        self._k = k

    @property
    def k(self):
        return self._k * 2

    def forward(self, x, *, bias=0):
        return x * self.k + bias


class _OwnCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def __call__(self, x):
        return super().__call__(x) + 1

    def forward(self, x):
        return self.act(x)


def _old_style(x, log):
    return _OldStyle()(x)


def _property_and_keywords(x, log):
    return _WithProperty(3)(x, bias=1)


def _own_call(x, log):
    return _OwnCall()(x)


def _stored_outside(x, log):
    layers = [_WithProperty(i) for i in range(3)]
    log.append(layers[1])  # escapes into a list passed in
    return sum(layer(x) for layer in layers)


@pytest.mark.parametrize("fn", [_old_style, _property_and_keywords, _own_call, _stored_outside])
def test_module_class_shapes(cnt, fn):
    check(fn, lambda i: (t(3, seed=i), []), cnt)


def _evaluated(x):
    m = _Block(4)
    m.eval()  # the flag of the module and of its children, the torch layers among them
    return m(x)[0], m.drop.training, m


def test_train_and_eval_of_a_module_made_in_the_frame(cnt):
    (out, dropout_training, module), _ = check(_evaluated, lambda i: (t(4, seed=i),), cnt, torch_graphs=_PEER_GRAPHS)
    assert dropout_training is False and not module.drop.training and not module.inner.training


def _converted(x):
    y = x.sin()
    m = _WithProperty(2)
    m.to(torch.float64)
    return m(y).cos()


def test_other_module_methods_break_naming_them(cnt):
    # torch.compile traces nn.Module.to's Python (1 graph); here it runs eagerly at a break
    check(_converted, lambda i: (t(3, seed=i),), cnt, graphs=2, peer=False)
    explained = stenograph.explain(_converted)(t(3))
    reasons = [r.reason for r in explained.break_reasons]
    assert any("nn.Module.to of a module _WithProperty created while tracing" in r for r in reasons)


_FACTOR = 2.0


class _Global(nn.Module):
    def __init__(self):
        super().__init__()
        self.factor = _FACTOR  # read from the module's globals while tracing __init__

    def forward(self, x):
        return x * self.factor


def _reads_a_global(x):
    return _Global()(x)


def test_values_init_reads_are_guarded(cnt, monkeypatch):
    compiled = stenograph.compile(_reads_a_global, backend=cnt)
    for _ in range(2):
        torch.testing.assert_close(compiled(t(3)), t(3) * 2)
    assert cnt.frame_count == 1
    monkeypatch.setattr(sys.modules[__name__], "_FACTOR", 5.0)
    torch.testing.assert_close(compiled(t(3)), t(3) * 5)
    assert cnt.frame_count == 2
