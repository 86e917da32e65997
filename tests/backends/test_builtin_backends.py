"""Each built-in backend on a GraphModule traced with torch.fx: results and grads equal eager."""

from __future__ import annotations

import time

import pytest
import torch

import stenograph
from stenograph.backends import inductor_backend, lookup_backend
from stenograph.errors import InvalidBackend, StenographError
from stenograph.testing import same

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _check_forward_and_backward(backend, mlp, device: str = "cpu") -> None:
    ref, model, gm = mlp
    ref.to(device)
    model.to(device)
    # AOTAutograd specialises on which inputs require grad, as capture's guards do
    x = torch.randn(5, 8, device=device, requires_grad=True)
    compiled = lookup_backend(backend)(gm, [x]) if isinstance(backend, str) else backend(gm, [x])
    for _ in range(3):  # repeated calls: warm-up, capture and replay paths of cudagraphs
        x = torch.randn(5, 8, device=device)
        x_ref = x.clone().requires_grad_()
        x_new = x.clone().requires_grad_()
        expected = ref(x_ref)
        out = compiled(x_new)
        assert same(out, expected)
        expected.pow(2).sum().backward()
        out.pow(2).sum().backward()
        assert same(x_new.grad, x_ref.grad)
        for (name, p_ref), (_, p_new) in zip(ref.named_parameters(), model.named_parameters()):
            assert same(p_new.grad, p_ref.grad), name
            p_ref.grad = p_new.grad = None


def test_eager_returns_the_graph_forward(mlp) -> None:
    _, _, gm = mlp
    assert lookup_backend("eager")(gm, [torch.randn(2, 8)]) == gm.forward


def test_eager_forward_and_backward(mlp) -> None:
    _check_forward_and_backward("eager", mlp)


def test_aot_eager_forward_and_backward(mlp) -> None:
    _check_forward_and_backward("aot_eager", mlp)


@pytest.mark.parametrize(
    "backend",
    [
        "eager_noexcept",
        "eager_debug",
        "pre_dispatch_eager",
        "aot_eager_default_partitioner",
        "aot_eager_decomp_partition",
        "aot_ts",
    ],
)
def test_torchs_other_backend_names_forward_and_backward(backend, mlp) -> None:
    """torch.compile's backends of these names, under the same names: eager's results and grads."""
    _check_forward_and_backward(backend, mlp)


def test_ts_scripts_a_captured_graph() -> None:
    """`ts` as torch 2.13 runs it: torch.jit.script of the captured graph (TorchScript cannot
    read the type annotations torch.fx.symbolic_trace copies from a typed forward, so this
    compiles through stenograph, whose graphs carry none)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    seen = []

    def scripted(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        seen.append(lookup_backend("ts")(gm, example_inputs))
        return seen[-1]

    x = torch.randn(5, 8, requires_grad=True)
    out = stenograph.compile(model, backend=scripted, fullgraph=True)(x)
    assert isinstance(seen[0], torch.jit.ScriptModule)
    x_ref = x.detach().clone().requires_grad_()
    expected = model(x_ref)
    assert same(out, expected)
    out.sum().backward()
    expected.sum().backward()
    assert same(x.grad, x_ref.grad)


def test_eager_noexcept_names_an_exception_of_the_graph() -> None:
    gm = torch.fx.symbolic_trace(lambda x, y: x @ y)
    x = torch.randn(2, 3)
    run = lookup_backend("eager_noexcept")(gm, [x, x])
    with pytest.raises(StenographError, match="running the captured graph") as info:
        run(x, x)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert same(run(x, x.t()), x @ x.t())


def test_aot_eager_decomp_partition_gives_aot_decomposed_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor's decompositions apply: the graph AOTAutograd runs has no aten.silu left (torch's
    Inductor table decomposes it), where aot_eager's keeps it."""
    from stenograph.backends import aot_eager

    seen: list[torch.fx.GraphModule] = []

    def recording(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        seen.append(gm)
        return gm.forward

    monkeypatch.setattr(aot_eager, "_nop_compiler", recording)
    gm = torch.fx.symbolic_trace(lambda x: torch.nn.functional.silu(x))
    x = torch.randn(4)
    with torch.no_grad():
        for backend in ("aot_eager", "aot_eager_decomp_partition"):
            assert same(lookup_backend(backend)(gm, [x])(x), torch.nn.functional.silu(x))
    targets = [{n.target for n in g.graph.nodes} for g in seen]
    assert torch.ops.aten.silu.default in targets[0]
    assert torch.ops.aten.silu.default not in targets[1]


def test_aot_eager_inference(mlp) -> None:
    ref, _, gm = mlp
    x = torch.randn(4, 8)
    with torch.no_grad():
        compiled = lookup_backend("aot_eager")(gm, [x])
        assert same(compiled(x), ref(x))


class _Structured(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor):
        return {"sum": x + y, "pair": (x * 2, [y.relu(), None, 3])}


def test_aot_eager_keeps_structured_outputs() -> None:
    """AOTAutograd wants flat tuple outputs; the backend restores the captured structure."""
    gm = torch.fx.symbolic_trace(_Structured())
    x, y = torch.randn(3), torch.randn(3)
    before = gm.graph.output_node().args[0]
    compiled = lookup_backend("aot_eager")(gm, [x, y])
    out = compiled(x, y)
    assert same(out, _Structured()(x, y))
    assert type(out) is dict and type(out["pair"][1]) is list  # what gm.forward returns
    assert gm.graph.output_node().args[0] is before  # the caller's graph is left untouched


def test_aot_eager_single_tensor_output() -> None:
    gm = torch.fx.symbolic_trace(lambda x: x.sin() + 1)
    x = torch.randn(4)
    out = lookup_backend("aot_eager")(gm, [x])(x)
    assert isinstance(out, torch.Tensor) and same(out, x.sin() + 1)


def test_aot_eager_flat_tuple_output_unchanged() -> None:
    gm = torch.fx.symbolic_trace(lambda x: (x.sin(), x.cos()))
    x = torch.randn(4)
    out = lookup_backend("aot_eager")(gm, [x])(x)
    assert isinstance(out, tuple) and same(out, (x.sin(), x.cos()))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on machines without CUDA")
def test_cudagraphs_without_cuda_is_a_clear_error(mlp) -> None:
    _, _, gm = mlp
    with pytest.raises(InvalidBackend, match="'cudagraphs' backend requires CUDA"):
        lookup_backend("cudagraphs")(gm, [torch.randn(2, 8)])


@needs_cuda
def test_cudagraphs_forward_and_backward(mlp) -> None:
    _check_forward_and_backward("cudagraphs", mlp, device="cuda")


@needs_cuda
def test_cudagraphs_inference_and_new_shapes(mlp) -> None:
    ref, _, gm = mlp
    ref.cuda()
    gm.cuda()
    with torch.no_grad():
        compiled = lookup_backend("cudagraphs")(gm, [torch.randn(4, 8, device="cuda")])
        outs = []
        for n in (4, 4, 4, 6, 6, 6, 4):
            x = torch.randn(n, 8, device="cuda")
            out = compiled(x)
            outs.append(out)
            assert same(out, ref(x))
        # outputs are not overwritten by later replays
        assert not any(a.data_ptr() == b.data_ptr() for a, b in zip(outs, outs[1:]))


@needs_cuda
def test_cudagraphs_sees_in_place_parameter_updates(mlp) -> None:
    ref, _, gm = mlp
    ref.cuda()
    gm.cuda()
    with torch.no_grad():
        compiled = lookup_backend("cudagraphs")(gm, [torch.randn(4, 8, device="cuda")])
        for _ in range(4):
            x = torch.randn(4, 8, device="cuda")
            assert same(compiled(x), ref(x))
            for p in [*ref.parameters(), *gm.parameters()]:
                p.mul_(0.5)


@pytest.mark.slow
def test_inductor_forward_and_backward(mlp) -> None:
    start = time.perf_counter()
    _check_forward_and_backward("inductor", mlp)
    print(f"inductor compile+run: {time.perf_counter() - start:.1f}s")


@pytest.mark.slow
def test_inductor_with_a_mode(mlp) -> None:
    """reduce-overhead asks for CUDA graphs; Inductor skips them for CPU graphs."""
    ref, _, gm = mlp
    x = torch.randn(4, 8)
    with torch.no_grad():
        compiled = inductor_backend(mode="reduce-overhead")(gm, [x])
        assert same(compiled(x), ref(x))


@needs_cuda
def test_cudagraphs_runs_cpu_graphs_eagerly_with_a_warning(mlp) -> None:
    ref, _, gm = mlp
    x = torch.randn(4, 8)
    with torch.no_grad():
        compiled = lookup_backend("cudagraphs")(gm, [x])
        with pytest.warns(UserWarning, match="not on a CUDA device"):
            assert same(compiled(x), ref(x))


@needs_cuda
@pytest.mark.slow
def test_inductor_reduce_overhead_on_cuda(mlp) -> None:
    ref, model, gm = mlp
    ref.cuda()
    model.cuda()
    x = torch.randn(4, 8, device="cuda")
    with torch.no_grad():
        compiled = inductor_backend(mode="reduce-overhead")(gm, [x])
        for _ in range(4):
            x = torch.randn(4, 8, device="cuda")
            assert same(compiled(x).clone(), ref(x))


def test_eager_debug_raises_where_an_operator_breaks_its_schema() -> None:
    """torch's `eager_debug`: a custom operator mutating an argument its schema says it does not."""
    lib = torch.library.Library("stenograph_test_schema", "FRAGMENT")  # noqa: TOR901
    lib.define("bad_add_(Tensor x) -> Tensor")

    def bad_add_(x):
        x.add_(1)
        return x.clone()

    lib.impl("bad_add_", bad_add_, "CompositeExplicitAutograd")
    op = torch.ops.stenograph_test_schema.bad_add_
    x = torch.zeros(3)
    assert same(stenograph.compile(lambda t: op(t) * 2, backend="eager")(x.clone()), torch.full((3,), 2.0))
    with pytest.raises(RuntimeError, match="not defined as mutable but was mutated"):
        stenograph.compile(lambda t: op(t) * 2, backend="eager_debug")(x.clone())
