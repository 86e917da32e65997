"""config.verify_correctness: the first call of each new graph also runs it eagerly and compares."""

from __future__ import annotations

import copy

import pytest
import torch
from core._support import MLP, SmallCNN

import stenograph
from stenograph import config
from stenograph.errors import StenographError
from stenograph.testing import CompileCounter
from stenograph.verify import VerificationFailed


def add_one_backend(gm, example_inputs):
    """A deliberately wrong backend: every output is off by one."""

    def run(*args):
        out = gm.forward(*args)
        return tuple(o + 1 for o in out)

    return run


def f(x, y):
    return torch.relu(x) @ y, x.sum()


def test_wrong_backend_is_caught_on_first_call():
    fn = stenograph.compile(f, backend=add_one_backend)
    x, y = torch.randn(3, 4), torch.randn(4, 2)
    with config.patch(verify_correctness=True):
        with pytest.raises(VerificationFailed) as info:
            fn(x, y)
    message = str(info.value)
    assert "add_one_backend" in message and "output 0" in message
    assert isinstance(info.value, StenographError)


def rewriting_backend(gm, example_inputs):
    """A deliberately wrong backend that edits the graph module it is handed: relu becomes neg."""
    for node in gm.graph.nodes:
        if node.target is torch.relu:
            node.target = torch.neg
    gm.recompile()
    return gm.forward


def test_a_backend_rewriting_its_graph_is_compared_with_the_graph_captured():
    """The reference is the captured graph, not the graph module the backend edited in place
    (torch's test_incorrect_verify_true rewrites its graph so)."""
    fn = stenograph.compile(f, backend=rewriting_backend)
    x, y = torch.randn(3, 4), torch.randn(4, 2)
    with config.patch(verify_correctness=True), pytest.raises(VerificationFailed, match="rewriting_backend"):
        fn(x, y)


def test_wrong_backend_goes_unnoticed_without_verification():
    fn = stenograph.compile(f, backend=add_one_backend)
    x, y = torch.randn(3, 4), torch.randn(4, 2)
    out, _ = fn(x, y)
    torch.testing.assert_close(out, torch.relu(x) @ y + 1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_correct_backends_pass_and_return_the_compiled_result(backend):
    fn = stenograph.compile(f, backend=backend)
    x, y = torch.randn(3, 4), torch.randn(4, 2)
    with config.patch(verify_correctness=True):
        out, total = fn(x, y)
        out2, _ = fn(x * 2, y)
    torch.testing.assert_close(out, torch.relu(x) @ y)
    torch.testing.assert_close(total, x.sum())
    torch.testing.assert_close(out2, torch.relu(x * 2) @ y)


def test_verification_keeps_gradients_flowing():
    model = MLP()
    eager_model = copy.deepcopy(model)
    x = torch.randn(2, 16)
    with config.patch(verify_correctness=True):
        compiled = stenograph.compile(model, backend="aot_eager")
        compiled(x).sum().backward()
    eager_model(x).sum().backward()
    for (name, p), (_, p_e) in zip(model.named_parameters(), eager_model.named_parameters()):
        torch.testing.assert_close(p.grad, p_e.grad, msg=lambda m, name=name: f"{name}: {m}")


def test_verification_does_not_apply_buffer_updates_twice():
    """The eager reference runs on clones: BatchNorm's running stats move once per call."""
    model = SmallCNN().train()
    eager_model = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8)
    with config.patch(verify_correctness=True):
        stenograph.compile(model, backend="aot_eager")(x)
    eager_model(x)
    assert int(model.bn1.num_batches_tracked) == 1
    torch.testing.assert_close(model.bn1.running_mean, eager_model.bn1.running_mean)
    torch.testing.assert_close(model.bn2.running_var, eager_model.bn2.running_var)


def test_only_the_first_call_is_checked():
    """Verification is a one-off per graph: later calls pay nothing (and are not checked)."""
    calls = {"n": 0}

    def wrong_after_first(gm, example_inputs):
        def run(*args):
            calls["n"] += 1
            out = gm.forward(*args)
            return out if calls["n"] == 1 else tuple(o + 1 for o in out)

        return run

    fn = stenograph.compile(f, backend=wrong_after_first)
    x, y = torch.randn(3, 4), torch.randn(4, 2)
    with config.patch(verify_correctness=True):
        fn(x, y)
        out, _ = fn(x, y)
    torch.testing.assert_close(out, torch.relu(x) @ y + 1)


def test_each_new_graph_is_verified():
    """A recompile (new shape) makes a new graph, which is verified on its own first call."""
    cnt = CompileCounter()
    state = {"graphs": 0}

    def wrong_from_second_graph(gm, example_inputs):
        state["graphs"] += 1
        cnt(gm, example_inputs)
        return gm.forward if state["graphs"] == 1 else add_one_backend(gm, example_inputs)

    fn = stenograph.compile(f, backend=wrong_from_second_graph)
    with config.patch(verify_correctness=True):
        fn(torch.randn(3, 4), torch.randn(4, 2))
        with pytest.raises(VerificationFailed):
            fn(torch.randn(5, 4), torch.randn(4, 2))
    assert cnt.frame_count == 2
