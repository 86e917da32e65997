"""`torch.func.functional_call` traced: the module's parameters and buffers replaced by the
tensors given, for that call only (variables/functional_call.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import stenograph

from ._support import check, t


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


MLP = _mlp()


def _params(seed, scale=2.0, requires_grad=True):
    torch.manual_seed(seed)
    return {k: (v.detach() * scale + 0.1).requires_grad_(requires_grad) for k, v in MLP.named_parameters()}


def _call_with(x, params):
    return torch.func.functional_call(MLP, params, (x,))


def test_every_parameter_replaced_is_one_graph_with_gradients(cnt):
    check(_call_with, lambda i: (t(5, 3, seed=i), _params(i)), cnt, grads=True)


def test_some_replaced_the_rest_are_the_modules_own(cnt):
    def f(x, weight):
        return torch.func.functional_call(MLP, {"2.weight": weight}, x)  # one argument, not a tuple

    check(f, lambda i: (t(5, 3, seed=i), t(2, 4, seed=i + 7, grad=True)), cnt, grads=True)
    torch.testing.assert_close(MLP(torch.ones(1, 3)), _mlp()(torch.ones(1, 3)))  # the module is untouched


def test_a_tuple_of_dicts_and_keyword_arguments(cnt):
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("shift", torch.ones(3))

        def forward(self, x, *, scale=1.0):
            return self.lin(x) * scale + self.shift

    torch.manual_seed(0)
    model = Scaled()

    def f(x, weight, shift):
        return torch.func.functional_call(model, ({"lin.weight": weight}, {"shift": shift}), (x,), {"scale": 3.0})

    check(f, lambda i: (t(2, 3, seed=i), t(3, 3, seed=i + 1), t(3, seed=i + 2)), cnt)


def test_reads_through_parameters_and_a_tied_alias_see_the_replacement(cnt):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(3, 3, bias=False)
            self.dec = nn.Linear(3, 3, bias=False)
            self.dec.weight = self.enc.weight  # tied

        def forward(self, x):
            norm = sum(p.sum() for p in self.parameters())
            return self.dec(self.enc(x)) + norm

    torch.manual_seed(0)
    model = Tied()

    def f(x, w):
        return torch.func.functional_call(model, {"enc.weight": w}, (x,))

    check(f, lambda i: (t(2, 3, seed=i), t(3, 3, seed=i + 5, grad=True)), cnt, grads=True)


def test_a_buffer_changed_in_place_is_the_tensor_given():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3)
    stats = {"running_mean": torch.zeros(3), "running_var": torch.ones(3)}
    eager_stats = {k: v.clone() for k, v in stats.items()}
    x = t(4, 3)

    def f(x, stats):
        return torch.func.functional_call(bn, stats, (x,))

    expected = f(x, eager_stats)
    actual = stenograph.compile(f, backend="eager", fullgraph=True)(x, stats)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(stats, eager_stats)
    assert bn.running_mean.abs().sum() == 0  # the module's own buffer is not touched
    assert bn.num_batches_tracked == 2  # not replaced: the module's own, counted once per call


def test_other_names_recompile_and_the_module_after_is_its_own(cnt):
    compiled = stenograph.compile(lambda x, p: torch.func.functional_call(MLP, p, (x,)), backend=cnt)
    x = t(5, 3)
    full, partial = _params(0, requires_grad=False), {"0.bias": torch.zeros(4)}
    for params in (full, partial, full, {}):
        torch.testing.assert_close(compiled(x, params), torch.func.functional_call(MLP, params, (x,)))
    assert cnt.frame_count == 3  # all, one, none: each set of names is a graph of its own
    torch.testing.assert_close(compiled(x, {}), MLP(x))


@pytest.mark.parametrize(
    "params, options",
    [
        ({"0.nope": torch.zeros(4)}, {}),  # not a parameter or buffer: torch adds it; eagerly
        ({"0.bias": torch.zeros(4)}, {"strict": True}),  # strict with names missing: torch raises
    ],
)
def test_what_is_not_traced_runs_eagerly_with_eagers_result_or_error(params, options):
    def make():  # a new code object each time: compiled entries are kept per code object
        return lambda x, p: torch.func.functional_call(MLP, p, (x,), **options)

    x = t(5, 3)
    try:
        expected = make()(x, params)
    except Exception as e:  # noqa: BLE001 - the compiled call must raise the same
        with pytest.raises(type(e)):
            stenograph.compile(make(), backend="eager")(x, params)
    else:
        torch.testing.assert_close(stenograph.compile(make(), backend="eager")(x, params), expected)
    with pytest.raises(stenograph.Unsupported, match="functional_call"):
        stenograph.compile(make(), backend="eager", fullgraph=True)(x, params)


def test_tied_weights_untied_or_given_twice_run_eagerly():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False)
            self.b = nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    model, x, w = Tied(), t(1, 2), t(2, 2)

    def untied():  # a new code object each time: compiled entries are kept per code object
        return lambda x, w: torch.func.functional_call(model, {"a.weight": w}, (x,), tie_weights=False)

    def twice(x, w):
        return torch.func.functional_call(model, {"a.weight": w, "b.weight": w * 2}, (x,))

    torch.testing.assert_close(stenograph.compile(untied(), backend="eager")(x, w), untied()(x, w))
    with pytest.raises(stenograph.Unsupported, match="tie_weights=False"):
        stenograph.compile(untied(), backend="eager", fullgraph=True)(x, w)
    with pytest.raises(ValueError):
        twice(x, w)
    with pytest.raises(ValueError):
        stenograph.compile(twice, backend="eager")(x, w)


def test_a_graph_break_inside_the_module_runs_the_call_eagerly(cnt, capsys):
    class Printing(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            print("inside")
            return self.lin(x)

    torch.manual_seed(0)
    model = Printing()

    def f(x, w):
        y = x * 2
        return torch.func.functional_call(model, {"lin.weight": w}, (y,)) + 1

    check(f, lambda i: (t(1, 2, seed=i), t(2, 2, seed=i + 3)), cnt, capsys, graphs=2, peer=False)
