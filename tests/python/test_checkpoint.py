"""Activation checkpointing: `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential`.

The region is inlined and its nodes tagged for AOTAutograd's partitioners, which keep only the
region's inputs for backward and recompute the rest there: the tensors saved between forward and
backward shrink to those inputs (counted with saved-tensor hooks, and in the partitioned graphs),
with eager's values and gradients, dropout included. Calls whose meaning a region cannot hold run
eagerly at a graph break, with eager's warnings.
"""

import copy
import functools
import warnings

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
)

import stenograph
from stenograph.testing import CompileCounter, CompileCounterWithBackend

from ._support import check, t

BACKENDS = ["eager", "aot_eager"]


class Block(nn.Module):
    def __init__(self, reentrant: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.reentrant = reentrant

    def forward(self, x):
        return checkpoint(self._inner, x, 0.5, use_reentrant=self.reentrant).sum()

    def _inner(self, x, scale):
        return torch.relu(self.lin(x)) * scale + x.sin()


def _parameter_grads(block: nn.Module, fn, x: torch.Tensor) -> list[torch.Tensor]:
    block.zero_grad()
    fn(x).backward()
    return [p.grad.clone() for p in block.parameters()]


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_values_and_gradients_equal_eager(backend, reentrant):
    """Both variants: one graph, the arguments' and the parameters' gradients as eager's."""
    torch.manual_seed(0)
    block = Block(reentrant)
    cnt = CompileCounterWithBackend(backend)
    check(block, lambda i: (t(2, 4, seed=i, grad=True),), cnt, grads=True)
    compiled = stenograph.compile(block, backend=cnt)
    got = _parameter_grads(block, compiled, t(2, 4, grad=True))
    for a, e in zip(got, _parameter_grads(block, block, t(2, 4, grad=True))):
        torch.testing.assert_close(a, e)


def _block(x, w):
    return ((x @ w).relu() @ w.t()).tanh()


def _plain(x, w):
    return _block(x, w).sum()


def _checkpointed(x, w):
    return checkpoint(_block, x, w, use_reentrant=False).sum()


def _saved_storages(fn, *args) -> list[int]:
    """The storages of the tensors autograd saves between fn's forward and its backward (the
    compiled function's own saves, when fn is compiled), after checking the gradients."""
    saved = []

    def pack(tensor):
        saved.append(tensor.untyped_storage().data_ptr())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = fn(*args)
    out.backward()
    return saved


def _recomputes(backend):
    x, w = t(4, 8, grad=True), t(8, 8, seed=1, grad=True)
    inputs = {x.untyped_storage().data_ptr(), w.untyped_storage().data_ptr()}
    for fn in (_plain, _checkpointed):
        stenograph.compile(fn, backend=backend)(x, w)  # compiled once, before the hooks
    plain = _saved_storages(stenograph.compile(_plain, backend=backend), x, w)
    grads = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    checkpointed = _saved_storages(stenograph.compile(_checkpointed, backend=backend), x, w)
    torch.testing.assert_close((x.grad, w.grad), grads)
    x.grad = w.grad = None
    _plain(x, w).backward()
    torch.testing.assert_close((x.grad, w.grad), grads)  # as eager
    return plain, checkpointed, inputs


def test_recompute_saves_only_the_regions_inputs():
    """aot_eager (AOTAutograd's default partitioner): without checkpoint the activations are
    saved; with it only the region's inputs (x, w), and the backward recomputes the rest."""
    plain, checkpointed, inputs = _recomputes("aot_eager")
    assert not set(plain) <= inputs
    assert set(checkpointed) <= inputs
    assert len(checkpointed) < len(plain)


@pytest.mark.slow
def test_inductor_recomputes_the_region_after_the_same_graph_without_it():
    """Inductor (min-cut partitioner), the plain graph compiled first: AOTAutograd's cache, whose
    key does not read the tags, must not serve it for the checkpointed one."""
    plain, checkpointed, inputs = _recomputes("inductor")
    assert not set(plain) <= inputs
    assert set(checkpointed) <= inputs


def _partitioned(fn, *args):
    """The forward and backward graphs AOTAutograd's min-cut partitioner makes of fn's graph."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_compiler
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    graphs = {}

    def keep(name):
        def compiler(gm, example_inputs):
            graphs[name] = gm
            return gm.forward

        return make_boxed_compiler(compiler)

    def backend(gm, example_inputs):
        return aot_module_simplified(
            gm,
            example_inputs,
            fw_compiler=keep("forward"),
            bw_compiler=keep("backward"),
            partition_fn=min_cut_rematerialization_partition,
        )

    stenograph.compile(fn, backend=backend)(*args).backward()
    return graphs["forward"], graphs["backward"]


def _targets(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_min_cut_partition_moves_the_region_into_backward():
    """The forward returns fewer tensors for backward, and the backward computes the region's
    matrix products again (min-cut never recomputes them unless told to)."""
    x, w = t(4, 8, grad=True), t(8, 8, seed=1, grad=True)
    plain_fw, plain_bw = _partitioned(_plain, x, w)
    fw, bw = _partitioned(_checkpointed, x, w)
    outputs = len(fw.graph.output_node().args[0])
    assert outputs < len(plain_fw.graph.output_node().args[0])
    assert outputs == 3  # the result, x and w
    assert _targets(bw).count("aten.mm.default") == _targets(plain_bw).count("aten.mm.default") + 2


def _two_regions(x, w):
    y = checkpoint(_block, x, w, use_reentrant=False)
    z = checkpoint(_block, y, w, use_reentrant=False)
    return (z * 2).sum()


def test_region_nodes_are_tagged_as_torch_compiles_are(cnt):
    """Every operation of a region: PREFER_RECOMPUTE and one id per region, increasing (of two
    regions in a row, the partitioner then saves the boundary tensor); nothing else."""
    stenograph.compile(_two_regions, backend=cnt)(t(4, 8, grad=True), t(8, 8, grad=True))
    tags = [
        (n.meta.get("recompute"), n.meta.get("ac_graph_id"))
        for n in cnt.graphs[0].graph.nodes
        if n.op in ("call_function", "call_method")
    ]
    region = (CheckpointPolicy.PREFER_RECOMPUTE,)
    assert tags == [region + (1,)] * 5 + [region + (2,)] * 5 + [(None, None)] * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_regions_in_a_row(backend):
    make = lambda i: (t(4, 8, seed=i, grad=True), t(8, 8, seed=i + 10, grad=True))  # noqa: E731
    check(_two_regions, make, CompileCounterWithBackend(backend), grads=True)


def _dropout_block(x):
    return nn.functional.dropout(x.sin(), 0.5, training=True) * 3


def _dropout(x):
    return checkpoint(_dropout_block, x, use_reentrant=False).cos()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_recomputed_with_the_forwards_random_numbers(backend):
    """preserve_rng_state (the default): the recompute in backward draws the forward's mask, so
    the gradients are eager's for the same seed; the RNG stream afterwards is eager's too."""
    check(_dropout, lambda i: (t(4, 8, seed=i, grad=True),), CompileCounterWithBackend(backend), grads=True)


def _dropout_fresh_rng(x):
    return checkpoint(_dropout_block, x.sin(), use_reentrant=False, preserve_rng_state=False).cos()


def test_preserve_rng_state_false_runs_eagerly_at_a_break(cnt):
    """Eager's recompute then draws a new mask from the RNG as backward finds it; the compiled
    recompute would replay the forward's, so the checkpoint runs eagerly, giving eager's
    gradients for the same seeds. torch.compile ignores the setting (one graph, the forward's
    mask)."""
    compiled = stenograph.compile(_dropout_fresh_rng, backend=cnt)
    for i in range(2):
        grads = []
        for fn in (_dropout_fresh_rng, compiled):
            x = t(4, 8, seed=i, grad=True)
            torch.manual_seed(i)
            out = fn(x)
            torch.manual_seed(100 + i)
            out.sum().backward()
            grads.append((out, x.grad))
        torch.testing.assert_close(grads[1], grads[0])
    assert cnt.frame_count == 2


def _sequential(seq):
    def fn(x):
        return checkpoint_sequential(seq, 2, x, use_reentrant=False).sum()

    return fn


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_sequential(backend):
    """Its segments but the last are checkpoints: one graph, eager's gradients."""
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh())
    check(_sequential(seq), lambda i: (t(4, 8, seed=i, grad=True),), CompileCounterWithBackend(backend), grads=True)


def _no_grad_input(lin):
    def fn(x):
        return checkpoint(lin, x.sin(), use_reentrant=True).cos()

    return fn


def test_reentrant_without_an_input_requiring_grad_breaks_with_eagers_warning():
    """Eager warns and returns a result without gradient: the checkpoint runs eagerly."""
    cnt = CompileCounter()
    fn = _no_grad_input(nn.Linear(4, 4))
    compiled = stenograph.compile(fn, backend=cnt)
    for _ in range(2):
        x = t(2, 4)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            expected = fn(x)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            actual = compiled(x)
        torch.testing.assert_close(actual, expected)
        assert not actual.requires_grad
    assert cnt.frame_count == 2


def _two_outputs(lin):
    def inner(x):
        return lin(x), torch.ones(3)

    def fn(x):
        a, b = checkpoint(inner, x.sin(), use_reentrant=True)
        return a.cos(), b

    return fn


def test_reentrant_output_eager_marks_as_requiring_grad_breaks(cnt):
    """The apply eager runs marks every floating output as requiring grad (`torch.ones` here):
    the inlined region would not, so it runs eagerly."""
    results = check(_two_outputs(nn.Linear(4, 4)), lambda i: (t(2, 4, seed=i, grad=True),), cnt, graphs=2, peer=False)
    assert results[0][1].requires_grad


def _unset(lin):
    def fn(x):
        return checkpoint(lin, x.sin()).cos()

    return fn


def test_use_reentrant_not_given_breaks_with_eagers_warning(cnt):
    fn = _unset(nn.Linear(4, 4))
    x = t(2, 4, grad=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        expected = fn(x)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        actual = stenograph.compile(fn, backend=cnt)(x)
    torch.testing.assert_close(actual, expected)
    assert cnt.frame_count == 2


def _save_matmuls(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE


def _selective(x, w):
    context = functools.partial(create_selective_checkpoint_contexts, _save_matmuls)
    return checkpoint(_block, x.sin(), w, use_reentrant=False, context_fn=context).sum()


def test_context_fn_runs_eagerly_at_a_break(cnt):
    """Selective checkpointing decides per ATen op, which the captured graph does not have: the
    graphs before and after the checkpoint (torch.compile traces the policy into its graph)."""
    make = lambda i: (t(4, 8, seed=i, grad=True), t(8, 8, seed=i + 10, grad=True))  # noqa: E731
    check(_selective, make, cnt, graphs=2, grads=True, peer=False)


def test_checkpointed_function_that_prints_runs_eagerly(cnt, capsys):
    def inner(x):
        print("inner")
        return x * x  # its backward needs x: recomputed

    def fn(x):
        return checkpoint(inner, x.sin(), use_reentrant=False).sum()

    x_e, x_c = t(3, grad=True), t(3, grad=True)
    fn(x_e).backward()
    eager = capsys.readouterr().out
    stenograph.compile(fn, backend=cnt)(x_c).backward()
    assert capsys.readouterr().out == eager == "inner\ninner\n"  # again in backward, as eager
    torch.testing.assert_close(x_c.grad, x_e.grad)


def test_a_new_shape_recompiles(cnt):
    compiled = stenograph.compile(_checkpointed, backend=cnt)
    for n in (4, 4, 6):
        x, w = t(n, 8, grad=True), t(8, 8, grad=True)
        torch.testing.assert_close(compiled(x, w), _checkpointed(x, w))
    assert cnt.frame_count == 2


@pytest.mark.slow
@pytest.mark.parametrize("reentrant", [False, True])
def test_huggingface_gradient_checkpointing(reentrant):
    """A tiny Llama training step with `gradient_checkpointing_enable`: eager's gradients, and
    fewer tensors saved for backward than the same model compiled without it. One graph, as
    torch.compile's: the hook transformers adds (`requires_grad_(True)` on the embeddings'
    output, which already requires grad) changes nothing and breaks nothing."""
    pytest.importorskip("transformers")
    from models.zoo import MODELS  # the model zoo's tiny Llama (tests/models/zoo.py)

    torch.manual_seed(0)
    case = MODELS["llama"]()
    model = case.model.train()
    model.config.use_cache = False
    batch = case.train

    def saved(fn):
        count = []
        with torch.autograd.graph.saved_tensors_hooks(lambda x: count.append(x.numel()) or x, lambda x: x):
            loss = fn(**batch).loss
        loss.backward()
        return sum(count)

    without = stenograph.compile(copy.deepcopy(model), backend="aot_eager")
    without(**batch)  # compiled before counting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the method's new name, in transformers 5
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    twin = copy.deepcopy(model)
    cnt = CompileCounterWithBackend("aot_eager")
    compiled = stenograph.compile(twin, backend=cnt)
    compiled(**batch)
    twin.zero_grad()
    assert saved(compiled) < saved(without)
    saved(model)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)
    assert cnt.frame_count == 1


def test_a_checkpointed_function_changing_a_list_made_in_the_frame_runs_eagerly():
    """Eagerly the function runs again in backward, appending a second time: a graph recomputing
    it would not (the change to a list made in the frame was not seen as a change), so the
    checkpoint runs eagerly at a graph break and the list ends as eager's."""

    def fn(x):
        seen = []

        def body(y):
            seen.append(1)
            return y.sin() * 2

        return checkpoint(body, x, use_reentrant=False).sum(), seen

    results = []
    for run in (fn, stenograph.compile(fn, backend="aot_eager")):
        x = t(3, grad=True)
        loss, seen = run(x)
        loss.backward()
        results.append((loss.detach(), len(seen), x.grad))
    (eager_loss, eager_seen, eager_grad), (loss, seen, grad) = results
    torch.testing.assert_close(loss, eager_loss)
    torch.testing.assert_close(grad, eager_grad)
    assert seen == eager_seen == 2
