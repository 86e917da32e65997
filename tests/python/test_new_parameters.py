"""`torch.nn.Parameter(x, requires_grad)` called in the compiled function on a tensor it reads:
made before the graph on each call (as eager makes it: a new leaf sharing x's storage) and
handed to the graph as an input, as torch.compile does; one of a tensor the function computed
breaks the graph, as torch.compile's does."""

import pytest
import torch

import stenograph
from stenograph.errors import Unsupported

from ._support import check, t


def _frozen_parameter(x):
    p = torch.nn.Parameter(x, requires_grad=False)
    return x * p


def test_under_inference_mode_in_one_graph(cnt):
    # torch's test_inference_mode_param
    compiled = stenograph.compile(_frozen_parameter, backend=cnt, fullgraph=True)
    with torch.inference_mode():
        x = torch.rand(4)
        torch.testing.assert_close(compiled(x), _frozen_parameter(x))
        compiled(x)
    assert cnt.frame_count == 1


def _breaks(fn, *args):
    return stenograph.explain(fn)(*args).graph_break_count


def test_a_frozen_parameter(cnt):
    check(_frozen_parameter, lambda i: (t(4, seed=i),), cnt)
    assert _breaks(_frozen_parameter, t(4)) == 0


def _returned_parameter(x):
    p = torch.nn.Parameter(x)
    return x * p, p


def _gradients(fn, x):
    out, p = fn(x)
    out.sum().backward()
    return out, p, p.grad, x.grad


@pytest.mark.parametrize("x_grad", [False, True])
def test_a_returned_parameter_is_a_leaf_getting_eagers_gradient(cnt, x_grad):
    compiled = stenograph.compile(_returned_parameter, backend=cnt, fullgraph=True)
    for i in range(2):
        x_e, x_c = t(4, seed=i, grad=x_grad), t(4, seed=i, grad=x_grad)
        expected, actual = _gradients(_returned_parameter, x_e), _gradients(compiled, x_c)
        out, p, p_grad, x_gradient = actual
        assert type(p) is torch.nn.Parameter and p.is_leaf and p.requires_grad
        assert p.untyped_storage().data_ptr() == x_c.untyped_storage().data_ptr()  # x's storage, as eager's
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e)
    assert cnt.frame_count == 1


def test_a_returned_parameter_with_aot_autograd():
    compiled = stenograph.compile(_returned_parameter, backend="aot_eager", fullgraph=True)
    x_e, x_c = t(4, grad=True), t(4, grad=True)
    for a, e in zip(_gradients(compiled, x_c), _gradients(_returned_parameter, x_e)):
        torch.testing.assert_close(a, e)


def _two_parameters(x):
    p = torch.nn.Parameter(x)
    q = torch.nn.Parameter(x)
    return p is q, p, q, p * q


def test_each_call_makes_another_parameter(cnt):
    out = check(_two_parameters, lambda i: (t(4, seed=i),), cnt)
    assert _breaks(_two_parameters, t(4)) == 0
    assert out[0][1] is not out[0][2]
    assert out[0][1] is not out[1][1]  # a new one each call, as in eager


def _parameter_of_a_computed_tensor(x):
    y = x * 2
    p = torch.nn.Parameter(y)
    return p * 3, p


def test_a_parameter_of_a_computed_tensor_is_a_graph_break(cnt):
    check(_parameter_of_a_computed_tensor, lambda i: (t(4, seed=i),), cnt, graphs=2, grads=True)
    explained = stenograph.explain(_parameter_of_a_computed_tensor)(t(4))
    assert any("tensor the compiled function computed" in r.reason for r in explained.break_reasons)


def _parameter_across_a_break(x):
    p = torch.nn.Parameter(x)
    y = p * 2
    print("break")
    return y + p, p


def test_a_parameter_live_at_a_break_is_the_same_object(cnt, capsys):
    out = check(_parameter_across_a_break, lambda i: (t(4, seed=i),), cnt, capsys, graphs=2)
    y, p = out[0]
    assert type(p) is torch.nn.Parameter and y.grad_fn is not None
    assert _breaks(_parameter_across_a_break, t(4)) == 1  # the print alone


def _parameter_flag(x, flag):
    p = torch.nn.Parameter(x, requires_grad=flag)
    return p * 2, p.requires_grad


def test_guards_recompile_on_a_changed_flag_and_size(cnt):
    compiled = stenograph.compile(_parameter_flag, backend=cnt)
    for x, flag, frames in [(t(4), True, 1), (t(4), True, 1), (t(4), False, 2), (t(5), False, 3), (t(6), False, 3)]:
        out, wants = compiled(x, flag)
        expected, eager_wants = _parameter_flag(x, flag)
        torch.testing.assert_close(out, expected)
        assert wants is eager_wants is flag and out.requires_grad is flag
        assert cnt.frame_count == frames  # sizes go dynamic at the second size, as for other inputs


def _integer_parameter(x):
    return torch.nn.Parameter(x) * 2


def test_a_parameter_eager_refuses_raises_as_eager():
    compiled = stenograph.compile(_integer_parameter, backend="eager")
    x = torch.arange(4)
    with pytest.raises(RuntimeError, match="floating point"):
        _integer_parameter(x)
    with pytest.raises(RuntimeError, match="floating point"):
        compiled(x)


def test_under_fullgraph_a_computed_tensors_parameter_raises():
    compiled = stenograph.compile(_parameter_of_a_computed_tensor, backend="eager", fullgraph=True)
    with pytest.raises(Unsupported, match="computed"):
        compiled(t(4))
