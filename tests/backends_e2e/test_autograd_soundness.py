"""Autograd under compilation: results and gradients equal eager's on `eager` and `aot_eager`.

Each test runs a function eagerly and compiled on separate copies of the same inputs and compares
outputs, the inputs' own state (requires_grad, shape, storage) and gradients; it asserts how many
graphs the backend received, that an identical second call compiles nothing and that a changed
input compiles again. What a graph cannot hold (autograd calls, metadata-changing in-place
methods, data-dependent output sizes by default) runs eagerly between graphs.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from helpers import assert_same
from torch import nn

import stenograph
from stenograph.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


def _compile(fn, backend):
    cnt = CompileCounterWithBackend(backend)
    return cnt, stenograph.compile(fn, backend=cnt)


def _twins(*tensors):
    """Independent copies for the eager and the compiled run (same values, same requires_grad)."""
    eager = [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]
    compiled = [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]
    return eager, compiled


def _same(actual, expected, what="result"):
    """Values, shape, strides and requires_grad of every tensor in (nested) results."""
    assert_same(actual, expected, what, strides=True)


# -- 1. metadata-changing in-place methods on inputs ----------------------------------------------


def _set_requires_grad(x, w):
    x.requires_grad_(True)
    return (x * w).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_on_an_input_gives_it_a_gradient(backend):
    cnt, fn = _compile(_set_requires_grad, backend)
    w = torch.randn(5)
    for _ in range(2):
        (x_e,), (x_c,) = _twins(torch.randn(5))
        out_e, out_c = _set_requires_grad(x_e, w), fn(x_c, w)
        _same(out_c, out_e)
        assert x_c.requires_grad
        out_e.backward()
        out_c.backward()
        torch.testing.assert_close(x_c.grad, x_e.grad)
        # nothing before the break is a graph; the product after it is the one graph
        assert cnt.frame_count == 1
    fn(torch.randn(5, dtype=torch.float64), w.double())
    assert cnt.frame_count == 2  # another dtype: compiled again


def _mark_output(x, w):
    h = x * w
    h.requires_grad_(True)  # as a forward hook of HF's gradient checkpointing does
    return (h * 2).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_requires_grad_that_changes_nothing_is_no_break(backend):
    """`requires_grad_(True)` on a value that already requires grad (here: made from a weight
    that does) changes nothing: one graph, eager's gradients. With a weight that needs no grad it
    does change the value: a break that runs it eagerly, after a recompile (the guard on the
    weight's requires_grad)."""
    cnt, fn = _compile(_mark_output, backend)
    x = torch.randn(5)
    base = torch.randn(5)
    w_e, w_c = base.clone().requires_grad_(), base.clone().requires_grad_()
    out_e, out_c = _mark_output(x, w_e), fn(x, w_c)
    _same(out_c, out_e)
    out_e.backward()
    out_c.backward()
    torch.testing.assert_close(w_c.grad, w_e.grad)
    assert cnt.frame_count == 1
    plain = base.clone()
    _same(fn(x, plain), _mark_output(x, plain))
    assert fn(x, plain).requires_grad
    assert cnt.frame_count == 3  # recompiled for the weight's flag: the graph before the break and the one after


def _detach_in_place(x, other):
    y = x + 1
    x.detach_()
    return x * 2, y


def _resize(x, other):
    y = x + 1
    x.resize_(2, 3)
    return x * 2, y


def _resize_as(x, other):
    y = x + 1
    x.resize_as_(other)
    return x * 2, y


def _set_storage(x, other):
    y = x + 1
    x.set_(other)
    return x * 2, y


def _as_strided(x, other):
    y = x + 1
    x.as_strided_((2, 2), (1, 2))
    return x * 2, y


def _retain_grad_on_input(x, other):
    y = x + 1
    x.retain_grad()
    return x * 2, y


IN_PLACE_EFFECTS = [
    pytest.param(_detach_in_place, True, id="detach_"),
    pytest.param(_resize, False, id="resize_"),
    pytest.param(_resize_as, False, id="resize_as_"),
    pytest.param(_set_storage, False, id="set_"),
    pytest.param(_as_strided, False, id="as_strided_"),
    pytest.param(_retain_grad_on_input, True, id="retain_grad"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("fn", "needs_grad"), IN_PLACE_EFFECTS)
def test_metadata_changing_method_on_an_input_runs_between_graphs(backend, fn, needs_grad):
    """The input ends up as eager leaves it (shape, strides, storage, requires_grad) and the
    outputs match; `x + 1` is one graph and `x * 2` after the eager method another."""
    cnt, compiled = _compile(fn, backend)
    for call in range(2):
        (x_e, o_e), (x_c, o_c) = _twins(torch.randn(3, 4, requires_grad=needs_grad), torch.randn(2, 2))
        out_e, out_c = fn(x_e, o_e), compiled(x_c, o_c)
        _same(out_c, out_e, f"call {call}")
        _same(x_c, x_e, f"input after call {call}")
        same_storage_e = x_e.untyped_storage().data_ptr() == o_e.untyped_storage().data_ptr()
        same_storage_c = x_c.untyped_storage().data_ptr() == o_c.untyped_storage().data_ptr()
        assert same_storage_c == same_storage_e
        assert cnt.frame_count == 2
    compiled(torch.randn(3, 4, dtype=torch.float64, requires_grad=needs_grad), torch.randn(2, 2, dtype=torch.float64))
    assert cnt.frame_count == 4  # both graphs compiled again for float64


# -- 2. retain_grad and .grad of an intermediate ---------------------------------------------------


def _retain_then_return(x):
    h = x.sin()
    h.retain_grad()
    return h, (h * h).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_grad_of_an_intermediate_fills_its_grad(backend):
    cnt, fn = _compile(_retain_then_return, backend)
    for _ in range(2):
        (x_e,), (x_c,) = _twins(torch.randn(4, requires_grad=True))
        (h_e, y_e), (h_c, y_c) = _retain_then_return(x_e), fn(x_c)
        _same((h_c, y_c), (h_e, y_e))
        y_e.backward()
        y_c.backward()
        assert h_c.grad is not None
        torch.testing.assert_close(h_c.grad, h_e.grad)
        torch.testing.assert_close(x_c.grad, x_e.grad)
        assert cnt.frame_count == 2  # sin | retain_grad | square and sum
    fn(torch.randn(4, 2, requires_grad=True))
    assert cnt.frame_count == 4


def _backward_inside_then_read_grads(x):
    h = x.sin()
    h.retain_grad()
    (h * h).sum().backward()
    return h.grad * 1, x.grad * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_and_grad_reads_inside_the_function(backend):
    cnt, fn = _compile(_backward_inside_then_read_grads, backend)
    for _ in range(2):
        (x_e,), (x_c,) = _twins(torch.randn(4, requires_grad=True))
        _same(fn(x_c), _backward_inside_then_read_grads(x_e))
        # sin | retain_grad | square, sum | backward | both `.grad` (graph inputs, read after the
        # backward ran) `* 1`
        assert cnt.frame_count == 3


# -- 3. autograd's entry points run in Python ------------------------------------------------------


class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def _cube_sum(t):
    return (t**3).sum()


def _autograd_grad(x):
    y = (x * x.cos()).sum()
    (g,) = torch.autograd.grad(y, x)
    return g * 2


def _autograd_backward(x):
    y = (x * x.cos()).sum()
    torch.autograd.backward(y)
    return x * 3


def _tensor_backward(x):
    y = (x * x.cos()).sum()
    y.backward()
    return x * 3


def _function_apply(x):
    return _Square.apply(x * 1.5) + 1


def _jacobian(x):
    return torch.autograd.functional.jacobian(_cube_sum, x) * 2


def _vjp(x):
    out, grad = torch.autograd.functional.vjp(lambda t: t.sin() * 2, x, torch.ones_like(x))
    return out + grad


def _double_backward(x):
    y = (x**3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    return g.sum() * 1


# (function, graphs per compile, needs a gradient of the result afterwards)
AUTOGRAD_CALLS = [
    pytest.param(_autograd_grad, 2, False, id="autograd.grad"),
    pytest.param(_autograd_backward, 2, False, id="autograd.backward"),
    pytest.param(_tensor_backward, 2, False, id="Tensor.backward"),
    # not between graphs any more: one node of the graph (tests/python/test_autograd_function.py)
    pytest.param(_function_apply, 1, True, id="Function.apply"),
    # the function handed to torch's untraced helper is compiled when the helper calls it, as
    # torch.compile compiles it (its counts on torch 2.13: 2 and 3)
    pytest.param(_jacobian, 2, False, id="functional.jacobian"),  # _cube_sum | * 2
    pytest.param(_vjp, 3, False, id="functional.vjp"),  # ones_like | the lambda | add
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("fn", "graphs", "backward_after"), AUTOGRAD_CALLS)
def test_autograd_calls_run_in_python_between_graphs(backend, fn, graphs, backward_after):
    cnt, compiled = _compile(fn, backend)
    for call in range(2):
        (x_e,), (x_c,) = _twins(torch.randn(5, requires_grad=True))
        out_e, out_c = fn(x_e), compiled(x_c)
        _same(out_c, out_e, f"call {call}")
        if backward_after:
            out_e.sum().backward()
            out_c.sum().backward()
        if x_e.grad is None:
            assert x_c.grad is None
        else:
            torch.testing.assert_close(x_c.grad, x_e.grad)
        assert cnt.frame_count == graphs
    compiled(torch.randn(5, 2, requires_grad=True))
    assert cnt.frame_count == 2 * graphs


def _backward_create_graph(x):
    y = (x.sin() * x).sum()
    y.backward(create_graph=True)
    return x.grad * 1


class _GradientPenalty(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(3, 3)

    def forward(self, x):
        out = self.layer(x).tanh()
        (grad,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        return out.sum() + grad.pow(2).sum()


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")  # torch's, eager too
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_double_backward, _backward_create_graph], ids=["grad", "Tensor.backward"])
def test_create_graph_inside_the_function_differentiates_twice(backend, fn):
    """The graph before a create_graph=True call runs as captured (AOTAutograd's backward cannot
    be differentiated again), so only the graph after it reaches the backend."""
    cnt, compiled = _compile(fn, backend)
    for _ in range(2):
        (x_e,), (x_c,) = _twins(torch.randn(5, requires_grad=True))
        out_e, out_c = fn(x_e), compiled(x_c)
        _same(out_c, out_e)
        x_e.grad, x_c.grad = None, None
        out_e.sum().backward()
        out_c.sum().backward()
        torch.testing.assert_close(x_c.grad, x_e.grad)
        assert cnt.frame_count == 1
    compiled(torch.randn(5, 2, requires_grad=True))
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_penalty_in_a_module(backend):
    model = _GradientPenalty()
    eager_model = copy.deepcopy(model)
    cnt, compiled = _compile(model, backend)
    for _ in range(2):
        (x_e,), (x_c,) = _twins(torch.randn(4, 3, requires_grad=True))
        model.zero_grad()
        eager_model.zero_grad()
        out_e, out_c = eager_model(x_e), compiled(x_c)
        _same(out_c, out_e)
        out_e.backward()
        out_c.backward()
        torch.testing.assert_close(model.layer.weight.grad, eager_model.layer.weight.grad)
        torch.testing.assert_close(x_c.grad, x_e.grad)
        assert cnt.frame_count == 1  # the linear and tanh run as captured; the penalty's sum compiles


def test_double_backward_through_a_graph_of_an_earlier_frame_raises():
    """A graph compiled by AOTAutograd in another frame cannot be helped: differentiating its
    backward raises AOTAutograd's own error (as in torch.compile), never a wrong gradient."""
    _, compiled = _compile(_cube_sum, "aot_eager")
    x = torch.randn(5, requires_grad=True)
    (grad,) = torch.autograd.grad(compiled(x), x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        grad.sum().backward()


# -- 4. recurrent layers ---------------------------------------------------------------------------


RNNS = [
    pytest.param(lambda: nn.LSTM(4, 8, batch_first=True), id="lstm"),
    pytest.param(lambda: nn.LSTM(4, 8, num_layers=2, bidirectional=True), id="lstm-2-layers-bidirectional"),
    pytest.param(lambda: nn.GRU(4, 8, batch_first=True), id="gru"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", RNNS)
@pytest.mark.parametrize("input_grad", [False, True], ids=["data", "input-grad"])
def test_recurrent_layer_gradients_match_eager(backend, make, input_grad):
    """oneDNN's LSTM kernel has no training mode in torch's decomposition: the weights' gradients
    must still be eager's whether or not the input needs one."""
    model = make()
    eager_model = copy.deepcopy(model)
    cnt, compiled = _compile(lambda x: model(x)[0].tanh().sum(), backend)
    for _ in range(2):
        (x_e,), (x_c,) = _twins(torch.randn(3, 5, 4, requires_grad=input_grad))
        out_e, out_c = eager_model(x_e)[0].tanh().sum(), compiled(x_c)
        torch.testing.assert_close(out_c, out_e)
        model.zero_grad()
        eager_model.zero_grad()
        out_e.backward()
        out_c.backward()
        for (name, p), (_, p_e) in zip(model.named_parameters(), eager_model.named_parameters()):
            torch.testing.assert_close(p.grad, p_e.grad, msg=lambda m, name=name: f"{name}: {m}")
        if input_grad:
            torch.testing.assert_close(x_c.grad, x_e.grad)
        assert cnt.frame_count == 1
    with torch.no_grad():
        x = torch.randn(3, 5, 4)
        torch.testing.assert_close(compiled(x), eager_model(x)[0].tanh().sum())
    assert cnt.frame_count == 2  # grad mode is guarded


def _lstm_under_enable_grad(x, model):
    with torch.enable_grad():
        return model(x)[0].sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_lstm_trained_inside_enable_grad_called_under_no_grad(backend):
    model = nn.LSTM(4, 8)
    eager_model = copy.deepcopy(model)
    cnt, compiled = _compile(_lstm_under_enable_grad, backend)
    for _ in range(2):
        model.zero_grad()
        eager_model.zero_grad()
        x = torch.randn(3, 2, 4)
        with torch.no_grad():
            out_c, out_e = compiled(x, model), _lstm_under_enable_grad(x, eager_model)
        _same(out_c, out_e)
        out_c.backward()
        out_e.backward()
        for (name, p), (_, p_e) in zip(model.named_parameters(), eager_model.named_parameters()):
            torch.testing.assert_close(p.grad, p_e.grad, msg=lambda m, name=name: f"{name}: {m}")
        assert cnt.frame_count == 1


# -- 5. float arguments that change ----------------------------------------------------------------


def _power(x, p):
    return x**p


def _power_again(x, p):
    return x**p + 1


# the graphs after each call with p = 2.0, 1.5, 1.5, 3.0, nan, inf, nan (not 0.5, 1 or 2 as the
# symbolic value: torch 2.11's pow specialises those exponents, a guard `p == 0.5`). eager: the second value
# makes p a symbol (one graph for every finite float); NaN and infinities are constants.
# aot_eager: AOTAutograd asks for p as a constant on the second value (the attempt counts), then
# each new value is its own graph.
FLOAT_GRAPHS = {
    "eager": [1, 2, 2, 2, 3, 4, 4],
    "aot_eager": [1, 3, 3, 4, 5, 6, 6],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_power, _power_again])
def test_float_argument_that_changes(backend, fn):
    """Run twice with two functions whose float has the same name: what one compile learns
    (a restart request) does not change how the next compiles."""
    cnt, compiled = _compile(fn, backend)
    x = torch.rand(5) + 0.1
    for p, graphs in zip([2.0, 1.5, 1.5, 3.0, math.nan, math.inf, math.nan], FLOAT_GRAPHS[backend]):
        torch.testing.assert_close(compiled(x, p), fn(x, p), equal_nan=True)
        assert cnt.frame_count == graphs, p


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_argument_gradients(backend):
    cnt, compiled = _compile(_power, backend)
    for p in [2.0, 0.5, 0.5]:
        (x_e,), (x_c,) = _twins(torch.rand(5) + 0.1)
        x_e.requires_grad_(True)
        x_c.requires_grad_(True)
        out_e, out_c = _power(x_e, p), compiled(x_c, p)
        _same(out_c, out_e)
        out_e.sum().backward()
        out_c.sum().backward()
        torch.testing.assert_close(x_c.grad, x_e.grad)
    assert cnt.frame_count == FLOAT_GRAPHS[backend][2]


# -- 6. data-dependent output sizes ----------------------------------------------------------------


def _mask_select(x):
    return x[x > 0] * 2


def _nonzero(x):
    return torch.nonzero(x > 0) + 1


def _unique(x):
    return torch.unique(x.detach().round()) * 2  # unique has no derivative


def _masked_select(x):
    return torch.masked_select(x, x > 0) * 2


DYNAMIC_OUTPUT_OPS = [
    pytest.param(_mask_select, id="x[x > 0]"),
    pytest.param(_nonzero, id="nonzero"),
    pytest.param(_unique, id="unique"),
    pytest.param(_masked_select, id="masked_select"),
]


# three positives, the same again, five (and five distinct rounded values), then a longer input
DATA = [
    [0.5, -1.0, 2.25, -0.5, 1.5, -2.0],
    [0.5, -1.0, 2.25, -0.5, 1.5, -2.0],
    [0.5, 1.0, -2.25, 0.75, 1.5, 3.0],
    [0.5, -1.0, 2.25, -0.5, 1.5, -2.0, 3.0, -3.0, 1.25],
]


def _check_dynamic_output(backend, fn, graphs):
    cnt, compiled = _compile(fn, backend)
    for call, (values, expected_graphs) in enumerate(zip(DATA, graphs)):
        (x_e,), (x_c,) = _twins(torch.tensor(values, requires_grad=True))
        out_e, out_c = fn(x_e), compiled(x_c)
        _same(out_c, out_e, f"call {call}")
        if out_e.requires_grad:
            out_e.sum().backward()
            out_c.sum().backward()
            torch.testing.assert_close(x_c.grad, x_e.grad)
        assert cnt.frame_count == expected_graphs, call


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", DYNAMIC_OUTPUT_OPS)
def test_data_dependent_output_size_breaks_the_graph_by_default(backend, fn):
    """Graphs: the mask (or round) and the rest after the eager op; a result of another size
    compiles the rest again with that size symbolic; a longer input the first graph."""
    _check_dynamic_output(backend, fn, [2, 2, 3, 4])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", DYNAMIC_OUTPUT_OPS)
def test_data_dependent_output_size_captured_when_configured(backend, fn):
    """One graph whose result size is an unbacked symbol: only the longer input compiles again."""
    with stenograph.config.patch(capture_dynamic_output_shape_ops=True):
        _check_dynamic_output(backend, fn, [1, 1, 1, 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_item_reaches_aot_autograd(backend):
    """`item()` captured (config.capture_scalar_outputs) binds its symbol to its node, too."""

    def scale(x):
        return x * x.sum().item()

    with stenograph.config.patch(capture_scalar_outputs=True):
        cnt, compiled = _compile(scale, backend)
        for _ in range(2):
            x = torch.randn(5)
            _same(compiled(x), scale(x))
        assert cnt.frame_count == 1


# -- 7. grad_fn ------------------------------------------------------------------------------------


def _grad_fn_is_none(x):
    y = x * 2
    return y, y.grad_fn is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_reading_grad_fn_breaks_cleanly(backend):
    """grad_fn is read eagerly at a break; the resumed code compares it without a warning."""
    cnt, compiled = _compile(_grad_fn_is_none, backend)
    for requires_grad, graphs in [(True, 1), (True, 1), (False, 2)]:
        (x_e,), (x_c,) = _twins(torch.randn(3, requires_grad=requires_grad))
        _same(compiled(x_c), _grad_fn_is_none(x_e))
        assert cnt.frame_count == graphs
