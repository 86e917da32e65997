"""Real HuggingFace models compile once: repeated training steps with identical inputs (and then
with new values of the same shapes) compile no new graph, and give eager's losses, outputs and
gradients.

Tiny configs (hidden 32, 2 layers, vocab 100), random weights, offline. Each model computes its
own loss from `labels`, in train mode (dropout on, same seed for eager and compiled). Classifier
configs name their `problem_type`: left unset, the first call writes it into the config, and the
second call then takes another path (for stenograph and torch.compile alike).

Needs the `models` extra (`transformers`); skipped without it.
"""

from __future__ import annotations

import copy

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounterWithBackend

transformers = pytest.importorskip("transformers")

_SIZES = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    vocab_size=100,
    max_position_embeddings=64,
)


def _ids(seed: int, offset: int = 0) -> torch.Tensor:
    return torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(seed)) + offset


def _bert(seed: int):
    config = transformers.BertConfig(**_SIZES, num_labels=3, problem_type="single_label_classification")
    labels = torch.randint(0, 3, (2,), generator=torch.Generator().manual_seed(seed))
    return transformers.BertForSequenceClassification(config), dict(input_ids=_ids(seed), labels=labels)


def _roberta(seed: int):
    config = transformers.RobertaConfig(**_SIZES, pad_token_id=1)
    return transformers.RobertaForMaskedLM(config), dict(input_ids=_ids(seed, 2), labels=_ids(seed + 1))


def _albert(seed: int):
    config = transformers.AlbertConfig(**_SIZES, embedding_size=16)
    return transformers.AlbertForMaskedLM(config), dict(input_ids=_ids(seed), labels=_ids(seed + 1))


def _distilbert(seed: int):
    config = transformers.DistilBertConfig(
        vocab_size=100,
        dim=32,
        n_layers=2,
        n_heads=2,
        hidden_dim=64,
        max_position_embeddings=64,
        num_labels=3,
        problem_type="single_label_classification",
    )
    labels = torch.randint(0, 3, (2,), generator=torch.Generator().manual_seed(seed))
    return transformers.DistilBertForSequenceClassification(config), dict(input_ids=_ids(seed), labels=labels)


def _whisper(seed: int):
    config = transformers.WhisperConfig(
        vocab_size=100,
        num_mel_bins=8,
        encoder_layers=2,
        decoder_layers=2,
        d_model=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_source_positions=16,
        max_target_positions=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    features = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(seed))
    labels = _ids(seed)[:, :10] + 3
    return transformers.WhisperForConditionalGeneration(config), dict(input_features=features, labels=labels)


MODELS = {"bert": _bert, "roberta": _roberta, "albert": _albert, "distilbert": _distilbert, "whisper": _whisper}
# graphs of the first call with transformers 5.23 (the README's set-up): one each (the loss and
# activation modules made inside forward are traced; Whisper's `copy.deepcopy` of its config is
# modelled); other versions differ in model code, so elsewhere only "nothing new" is checked
FIRST_CALL_GRAPHS = {"bert": 1, "roberta": 1, "albert": 1, "distilbert": 1, "whisper": 1}
_PINNED = transformers.__version__.startswith("5.23.")


def _step(model: torch.nn.Module, inputs: dict, seed: int) -> tuple[torch.Tensor, torch.Tensor, list]:
    torch.manual_seed(seed)
    out = model(**inputs)
    out.loss.backward()
    grads = [p.grad.clone() if p.grad is not None else None for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return out.loss.detach(), out.logits.detach(), grads


def _assert_same_step(actual: tuple, expected: tuple) -> None:
    loss, logits, grads = actual
    expected_loss, expected_logits, expected_grads = expected
    torch.testing.assert_close(loss, expected_loss)
    torch.testing.assert_close(logits, expected_logits)
    assert len(grads) == len(expected_grads)
    for i, (g, e) in enumerate(zip(grads, expected_grads)):
        assert (g is None) == (e is None), f"gradient {i}"
        if g is not None:
            torch.testing.assert_close(g, e, msg=lambda m, i=i: f"gradient {i}: {m}")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(MODELS))
def test_repeated_training_steps_compile_nothing_new(name, backend):
    torch.manual_seed(0)
    model, inputs = MODELS[name](0)
    model.train()
    reference = copy.deepcopy(model)
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(model, backend=cnt)
    counts = []
    for call in range(4):
        actual = _step(compiled, inputs, call)
        _assert_same_step(actual, _step(reference, inputs, call))
        counts.append(cnt.frame_count)
    assert counts == [FIRST_CALL_GRAPHS[name] if _PINNED else counts[0]] * 4
    # new values of the same shapes: still nothing new
    for seed in (1, 2):
        _, new_inputs = MODELS[name](seed)
        _assert_same_step(_step(compiled, new_inputs, seed), _step(reference, new_inputs, seed))
    assert cnt.frame_count == FIRST_CALL_GRAPHS[name]
