"""Sparse tensors stay out of graphs, as torch.compile keeps them out: an operation making one is a
graph break (the code holding it runs eagerly), a frame reading one (an argument, a global, a
buffer) runs eagerly. Inductor's code assumes strided tensors and failed on them at run time."""

from __future__ import annotations

import pytest
import torch

import stenograph
from stenograph.errors import Unsupported
from stenograph.testing import CompileCounterWithBackend

from ._support import check, t


def _to_sparse_in_the_middle(x):
    y = x * 2
    s = y.to_sparse()
    return (s * 3).to_dense().sin() + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_making_a_sparse_tensor_breaks_the_graph(backend):
    """One graph, [x * 2]; the code after the break holds the sparse tensor and runs eagerly."""
    cnt = CompileCounterWithBackend(backend)
    check(_to_sparse_in_the_middle, lambda i: (t(4, 4, seed=i),), cnt)
    assert cnt.op_count == 1


@pytest.mark.slow
def test_making_a_sparse_tensor_breaks_the_graph_under_inductor():
    check(_to_sparse_in_the_middle, lambda i: (t(4, 4, seed=i),), CompileCounterWithBackend("inductor"))


def _sparse_result(x):
    return x.to_sparse() * 2


def test_a_sparse_result_under_inductor_runs_eagerly():
    """The graph was handed to Inductor, whose code failed (assert_size_stride); now no graph is
    left to compile, as with torch.compile."""
    check(_sparse_result, lambda i: (t(10, 10, seed=i),), CompileCounterWithBackend("inductor"), graphs=0)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize(
    "convert",
    [
        pytest.param(lambda y: y.to_sparse_csr(), id="csr"),
        pytest.param(lambda y: y.to_sparse_csc(), id="csc"),
        pytest.param(lambda y: y.to_sparse_bsr((2, 2)), id="bsr"),
        pytest.param(lambda y: y.to_sparse_bsc((2, 2)), id="bsc"),
    ],
)
def test_every_sparse_layout_breaks_the_graph(cnt, convert):
    def fn(x):
        y = x.cos()
        return convert(y).to_dense() + 1

    check(fn, lambda i: (t(4, 4, seed=i),), cnt)
    assert cnt.op_count == 1  # the cosine


def _sparse_argument(s, x):
    a = x.sin()
    return a.cos() + (s * 2).to_dense()


def test_a_sparse_argument_runs_the_frame_eagerly(cnt):
    check(_sparse_argument, lambda i: (t(3, seed=i).to_sparse(), t(3, seed=i + 5)), cnt, graphs=0)


_SPARSE_GLOBAL = torch.tensor([0.0, 2.0, 0.0]).to_sparse()


def test_a_sparse_global_runs_the_frame_eagerly(cnt):
    def fn(x):
        return x.sin() + _SPARSE_GLOBAL.to_dense()

    check(fn, lambda i: (t(3, seed=i),), cnt, graphs=0)


def test_a_sparse_argument_after_a_dense_one_runs_eagerly_without_recompiling(cnt, compiles):
    """The dense call's guards reject the sparse tensor; the sparse call runs eagerly, and neither
    kind of call compiles again."""

    def fn(x):
        return (x * 2).sin()

    compiled = stenograph.compile(fn, backend=cnt)
    for x in [t(3), t(3).to_sparse(), t(3, seed=1), t(3, seed=2).to_sparse()]:
        torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 1
    assert len(compiles) == 2


def test_fullgraph_refuses_sparse_tensors(cnt):
    with pytest.raises(Unsupported, match="sparse tensor"):
        stenograph.compile(_sparse_argument, backend=cnt, fullgraph=True)(t(3).to_sparse(), t(3))
    with pytest.raises(Unsupported, match=r"to_sparse\(\) makes a sparse tensor"):
        stenograph.compile(_sparse_result, backend=cnt, fullgraph=True)(t(3))
    assert cnt.frame_count == 0


def test_export_refuses_a_sparse_argument():
    """Export traced it, and its graph returned the sparse product for `to_dense()`."""

    def fn(s):
        return (s * 2).to_dense()

    with pytest.raises(Unsupported, match="sparse tensor"):
        stenograph.export(fn)(t(3).to_sparse())
