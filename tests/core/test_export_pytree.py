"""`stenograph.export`'s graph module is torch._dynamo.export's (issue 27): its placeholders are
the call's arguments flattened by pytree, `(args, kwargs)` with `gm._in_spec`, its output the
flattened result with `gm._out_spec`, and `forward` takes the function's argument names, so the
graph is called either with the arguments or, through `torch.fx.Interpreter`, flat."""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from helpers import assert_same

import stenograph


def _fn(x, ys, d, k=2):
    return x + ys[0] * ys[1] + d["a"] * k, {"b": d["b"], "n": [x.sum()]}


def _args():
    return (torch.ones(2), [torch.ones(2) * 2, torch.ones(2) * 3], {"a": torch.ones(2) * 4, "b": torch.ones(2)})


def _both(fn, args, kwargs):
    ours = stenograph.export(fn)(*args, **kwargs).graph_module
    theirs = torch._dynamo.export(fn)(*args, **kwargs).graph_module
    torch._dynamo.reset()
    return ours, theirs


def test_graph_takes_flat_inputs_as_torch():
    args, kwargs = _args(), {"k": 3}
    ours, theirs = _both(_fn, args, kwargs)
    placeholders = [n.name for n in ours.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == len([n for n in theirs.graph.nodes if n.op == "placeholder"]) == 6
    flat, spec = pytree.tree_flatten((args, kwargs))
    assert ours._in_spec == theirs._in_spec == spec
    assert ours._out_spec == theirs._out_spec
    expected = _fn(*args, **kwargs)
    assert_same(ours(*args, **kwargs), expected)
    assert_same(torch.fx.Interpreter(ours).run(*flat), torch.fx.Interpreter(theirs).run(*flat))
    other = (torch.randn(2), [torch.randn(2), torch.randn(2)], {"a": torch.randn(2), "b": torch.randn(2)})
    assert_same(ours(*other, k=3), _fn(*other, k=3))
    assert_same(ours(*other, k=3), theirs(*other, k=3))


def test_positional_and_default_arguments():
    x, ys, d = _args()
    ours, theirs = _both(_fn, (x, ys), {"d": d})
    assert ours._in_spec == theirs._in_spec
    assert_same(ours(x, ys, d=d), _fn(x, ys, d))  # k keeps its default, a constant of the graph


def test_object_arguments_are_leaves():
    """An object argument is one leaf; the graph reads its attributes."""

    class Box:
        def __init__(self, t):
            self.t = t

    def fn(box, x):
        return box.t * x

    box, x = Box(torch.full((2,), 5.0)), torch.ones(2)
    # torch's export refuses an argument pytree cannot flatten; here it is a leaf, read in the graph
    ours = stenograph.export(fn)(box, x).graph_module
    assert ours._in_spec == pytree.tree_flatten(((box, x), {}))[1]
    assert_same(torch.fx.Interpreter(ours).run(box, x), fn(box, x))
    assert_same(ours(Box(torch.ones(2)), x * 2), fn(Box(torch.ones(2)), x * 2))


def test_module_forward():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    ours, theirs = _both(model, (x,), {})
    assert ours._in_spec == theirs._in_spec
    assert_same(ours(x), model(x))
    assert_same(torch.fx.Interpreter(ours).run(x), theirs(x))
