"""`assume_constant_result` functions called with tensors (issue 27): as torch does, the function
runs while tracing on the tensors' real values in this call (an intermediate's value computed by
running the graph so far on copies of the inputs), and its result is a constant of the graph,
not guarded: a later call with other values reuses it, exactly as torch.compile's does."""

from __future__ import annotations

import pytest
import torch

import stenograph

from ._support import assert_same, check


@stenograph.assume_constant_result
def _positive(t):
    return bool(t.sum() > 0)


@stenograph.assume_constant_result
def _doubled(t):
    return t * 2


@stenograph.assume_constant_result
def _total(t):
    return t.sum().item()


@stenograph.assume_constant_result
def _same(t):
    return t


def _on_input(x):
    return x + 1 if _positive(x) else x - 1


def _on_intermediate(x):
    return x * 3 + 1 if _positive(x - 100) else x - 1


def _tensor_result(x):
    return x + _doubled(x)


def _number_result(x):
    return x * _total(x + 1)


def _input_given_back(x):
    # torch.compile's graph reads the input; torch's export stores its value as a constant
    return torch.tensor([0.5]) * _same(x)


_CASES = [_on_input, _on_intermediate, _tensor_result, _number_result, _input_given_back]


def _torch_twin(fn):
    """The same program with torch's decorator, compiled by torch.compile (the peer)."""
    marked = {
        name: torch._dynamo.assume_constant_result(getattr(f, "__wrapped__", f))
        for name, f in (("_positive", _positive), ("_doubled", _doubled), ("_total", _total), ("_same", _same))
    }
    twin = type(fn)(fn.__code__, {**fn.__globals__, **marked}, fn.__name__)
    return torch.compile(twin, backend="eager")


@pytest.mark.parametrize("fn", _CASES, ids=lambda f: f.__name__)
def test_first_call_as_eager_later_calls_as_torch(cnt, fn):
    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(3)
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1
    torch._dynamo.reset()
    peer = _torch_twin(fn)
    peer(x)
    other = -torch.ones(3) * 2
    # the result is assumed constant: not guarded, the graph of the first call serves (as torch's)
    assert_same(compiled(other), peer(other))
    assert cnt.frame_count == 1
    torch._dynamo.reset()


@pytest.mark.parametrize("fn", _CASES, ids=lambda f: f.__name__)
def test_export_folds_the_result(fn):
    x = torch.ones(3)
    ours = stenograph.export(fn)(x).graph_module
    theirs = torch._dynamo.export(_torch_twin(fn)._torchdynamo_orig_callable)(x).graph_module
    for arg in (x, -x):
        assert_same(ours(arg), theirs(arg))
    torch._dynamo.reset()


def test_value_computed_without_changing_the_call(cnt):
    """The graph so far runs on copies, with the RNG forked: the input is changed once and the
    random stream is eager's."""

    def fn(x):
        x.add_(1)
        noise = torch.rand(3)
        if _positive(x - 1.5):
            return x + noise
        return x - noise

    check(fn, lambda i: (torch.ones(3) * (i + 1),), cnt, graphs=1, calls=1)


def test_other_arguments_still_break(cnt):
    @stenograph.assume_constant_result
    def length(xs):
        return len(xs)

    def fn(x):
        return x * length([x, x])

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2)
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1  # the call of `length` breaks the graph; the code after it is one graph


@stenograph.assume_constant_result
def _nonzero_pair(t):
    return (torch.nonzero(t), torch.nonzero(t))


@stenograph.assume_constant_result
def _powers(t):
    return {"x": t, "x^2": t * t, "n": 2}


def test_container_results_are_constants(cnt):
    """Tuples, lists and dicts of tensors and numbers: each member a constant of the graph (they
    broke the graph); export stores the values of the first call, as torch's."""

    def from_tuple(x):
        return [torch.tensor([0.5]) * item for element in _nonzero_pair(x) for item in element]

    def from_dict(x):
        found = _powers(x)
        return x * found["x"] * found["x^2"] + found["n"]

    for fn in (from_tuple, from_dict):
        x = torch.tensor([2.0, 1.0])
        compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
        assert_same(compiled(x), fn(x))
        gm = stenograph.export(fn)(x).graph_module
        other = torch.tensor([3.0, 0.0])
        # the export's constants are the first call's: from_dict reads `x` and the constant x
        assert_same(gm(other), fn(x) if fn is from_tuple else other * x * (x * x) + 2)


_SHARED = {"scale": 2.0, "seen": []}


@stenograph.assume_constant_result
def _shared_table():
    return _SHARED


def test_a_list_or_dict_result_is_that_object_in_compiled_code(cnt):
    """A result the program holds elsewhere (a module's table): compiled code reads and changes
    that very object, as eagerly (a copy would lose the change)."""

    def fn(x):
        table = _shared_table()
        table["seen"].append(1)
        return x * table["scale"], table is _SHARED

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2)
    out, same_object = compiled(x)
    assert same_object and _SHARED["seen"] == [1]
    assert_same(out, x * 2.0)
    _SHARED["seen"].clear()


@stenograph.assume_constant_result
def _filled(n, value):
    return torch.full([n], value)


def test_a_tensor_result_keeps_static_sizes_under_dynamic_true(cnt):
    """The tensor a constant call gave is always that one object: its sizes stay static even
    with dynamic=True (they were symbolic, so `.tolist()` of values computed from it broke)."""

    def fn(x):
        filled = _filled(x.size(0), 13)
        return (filled * 2).tolist(), x * filled.size(0)

    with stenograph.config.patch(capture_scalar_outputs=True):
        compiled = stenograph.compile(fn, backend=cnt, fullgraph=True, dynamic=True)
        x = torch.arange(4)
        stenograph.mark_static(x, 0)
        assert_same(compiled(x), fn(x))
    placeholders = [n for n in cnt.graphs[0].graph.nodes if n.op == "placeholder"]
    assert all(not isinstance(s, torch.SymInt) for n in placeholders for s in n.meta["example_value"].shape)


class _HelperModule(torch.nn.Module):
    """A method marked with torch's own decorator (model code written for torch.compile)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    @torch._dynamo.assume_constant_result
    def rows_of_nonzero(self, x):
        return torch.nonzero(x)

    def forward(self, x):
        return self.rows_of_nonzero(self.linear(x))


def test_torchs_own_mark_is_honoured():
    torch.manual_seed(0)
    module = _HelperModule()
    x = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    explained = stenograph.explain(module)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    graph, _ = stenograph.export(module, x)
    assert_same(graph(torch.zeros(2, 2)), module(x), "the result seen while exporting, folded")
