"""Real models: HuggingFace GPT-2 and BERT built from small configs with random weights
(offline), forward and one training step under stenograph vs eager, graphs vs torch.compile.

Needs the `models` extra (`transformers`); skipped without it.
"""

from __future__ import annotations

import copy

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter

from ._support import assert_same

transformers = pytest.importorskip("transformers")


def make_gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(config)


def make_bert() -> torch.nn.Module:
    config = transformers.BertConfig(
        num_hidden_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        vocab_size=1000,
        max_position_embeddings=128,
    )
    return transformers.BertModel(config)


MODELS = {"gpt2": make_gpt2, "bert": make_bert}
# GPT-2 computes its loss (labels=...) past `logger.warning_once`: a graph break for both
LOSS_GRAPHS = {"gpt2": 2, "bert": 1}


def _loss(name: str, model: torch.nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, object]:
    if name == "gpt2":
        out = model(ids, labels=ids)
        return out.loss, out
    out = model(ids)
    return (out.last_hidden_state.pow(2).mean() + out.pooler_output.sum()), out


def _inputs(seed: int) -> torch.Tensor:
    return torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(seed))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_forward_eval_matches_eager_in_one_graph(name, cnt):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    compiled = stenograph.compile(model, backend=cnt)
    for seed in range(2):
        ids = _inputs(seed)
        with torch.no_grad():
            expected = model(ids)
            actual = compiled(ids)
        assert type(actual) is type(expected)
        assert_same(actual.to_tuple()[0], expected.to_tuple()[0])
    assert cnt.frame_count == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_training_step_outputs_and_gradients_match_eager(name, cnt):
    """Train mode (dropout under the same seed): loss, outputs and every parameter's gradient
    equal eager to 1e-5. GPT-2's loss path calls `logger.warning_once`, a graph break for both
    stenograph and torch.compile (2 graphs each); BERT is one graph."""
    torch.manual_seed(0)
    model = MODELS[name]().train()
    reference = copy.deepcopy(model)
    compiled = stenograph.compile(model, backend=cnt)
    ids = _inputs(0)
    torch.manual_seed(123)
    loss_e, out_e = _loss(name, reference, ids)
    loss_e.backward()
    torch.manual_seed(123)
    loss_c, out_c = _loss(name, compiled, ids)
    loss_c.backward()
    torch.testing.assert_close(loss_c, loss_e, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out_c.to_tuple()[1], out_e.to_tuple()[1], atol=1e-5, rtol=1e-5)
    grads_e = {n: p.grad for n, p in reference.named_parameters()}
    for n, p in model.named_parameters():
        assert p.grad is not None, n
        torch.testing.assert_close(p.grad, grads_e[n], atol=1e-5, rtol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
    assert cnt.frame_count == LOSS_GRAPHS[name]


@pytest.mark.slow
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("name", list(MODELS))
def test_graph_count_no_higher_than_torch_compile(name, training):
    import torch._dynamo

    def step(compiled) -> None:
        loss, _ = _loss(name, compiled, _inputs(0))
        if training:
            loss.backward()

    counts = []
    for compile_fn in (stenograph.compile, torch.compile):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = MODELS[name]().train(training)
        counter = CompileCounter()
        try:
            with torch.set_grad_enabled(training):
                step(compile_fn(model, backend=counter))
        finally:
            torch._dynamo.reset()
        counts.append(counter.frame_count)
    ours, theirs = counts
    assert ours <= theirs
    assert ours == LOSS_GRAPHS[name]
