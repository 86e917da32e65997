"""Real models from HuggingFace `transformers`, built from tiny configs with random weights
(offline), and the one measurement the slow tests and `benchmarks/model_zoo.py` share.

`measure(name, training, compiler)` runs a model's step (inference under `no_grad`, or one
training step with the model's own loss) eagerly and under a compiler with a counting backend,
and returns the graphs handed over, stenograph's break reasons, the capture time (first compiled
call minus the median of three warm eager calls) and every output or gradient that differs from eager.
"""

from __future__ import annotations

import copy
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import stenograph
from stenograph import events
from stenograph.testing import CompileCounter

try:
    import transformers
except ImportError:  # the `models` extra is not installed: the zoo is empty
    transformers = None

_VOCAB = 100
_DECODER = dict(
    vocab_size=_VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
)
_ENCODER = dict(
    vocab_size=_VOCAB,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)
_SEQ2SEQ = dict(vocab_size=_VOCAB, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _ids(seed: int, length: int = 12, low: int = 3) -> torch.Tensor:
    return torch.randint(low, _VOCAB, (2, length), generator=torch.Generator().manual_seed(seed))


@dataclass
class Case:
    """A model and the keyword arguments of its inference and training calls."""

    model: torch.nn.Module
    infer: dict[str, Any]
    train: dict[str, Any]


def _causal(config_cls: str, model_cls: str, **extra: Any) -> Callable[[], Case]:
    def build() -> Case:
        config = getattr(transformers, config_cls)(**{**_DECODER, **extra})
        ids = _ids(0)
        return Case(getattr(transformers, model_cls)(config), dict(input_ids=ids), dict(input_ids=ids, labels=ids))

    return build


def _masked_lm(config_cls: str, model_cls: str, **extra: Any) -> Callable[[], Case]:
    def build() -> Case:
        config = getattr(transformers, config_cls)(**{**_ENCODER, **extra})
        ids = _ids(0)
        return Case(getattr(transformers, model_cls)(config), dict(input_ids=ids), dict(input_ids=ids, labels=_ids(1)))

    return build


def _t5() -> Case:
    config = transformers.T5Config(
        vocab_size=_VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0
    )
    ids = _ids(0)
    return Case(
        transformers.T5ForConditionalGeneration(config),
        dict(input_ids=ids, decoder_input_ids=_ids(1, 8)),
        dict(input_ids=ids, labels=_ids(1, 8)),
    )


def _bart() -> Case:
    config = transformers.BartConfig(
        **_SEQ2SEQ,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        decoder_start_token_id=2,
    )
    ids = _ids(0)
    return Case(
        transformers.BartForConditionalGeneration(config), dict(input_ids=ids), dict(input_ids=ids, labels=_ids(1, 8))
    )


def _whisper() -> Case:
    config = transformers.WhisperConfig(
        vocab_size=_VOCAB,
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
    features = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(0))
    decoder_ids = _ids(1, 8)
    return Case(
        transformers.WhisperForConditionalGeneration(config),
        dict(input_features=features, decoder_input_ids=decoder_ids),
        dict(input_features=features, labels=decoder_ids),
    )


def _distilbert() -> Case:
    config = transformers.DistilBertConfig(
        vocab_size=_VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64
    )
    ids = _ids(0)
    return Case(transformers.DistilBertForMaskedLM(config), dict(input_ids=ids), dict(input_ids=ids, labels=_ids(1)))


MODELS: dict[str, Callable[[], Case]] = {
    "llama": _causal("LlamaConfig", "LlamaForCausalLM"),
    "mistral": _causal("MistralConfig", "MistralForCausalLM", sliding_window=None),
    "qwen2": _causal("Qwen2Config", "Qwen2ForCausalLM"),
    "phi": _causal("PhiConfig", "PhiForCausalLM"),
    "mixtral": _causal("MixtralConfig", "MixtralForCausalLM", num_local_experts=4, num_experts_per_tok=2),
    "t5": _t5,
    "bart": _bart,
    "whisper": _whisper,
    "deberta-v2": _masked_lm("DebertaV2Config", "DebertaV2ForMaskedLM"),
    "bert": _masked_lm("BertConfig", "BertForMaskedLM"),
    "roberta": _masked_lm("RobertaConfig", "RobertaForMaskedLM", pad_token_id=1),
    "albert": _masked_lm("AlbertConfig", "AlbertForMaskedLM", embedding_size=16),
    "distilbert": _distilbert,
}
if transformers is None:
    MODELS = {}


@dataclass
class Measurement:
    graphs: int
    capture_seconds: float
    mismatches: list[str]  # outputs or gradients that differ from eager
    reasons: list[str] = field(default_factory=list)  # stenograph's break and eager-fallback reasons


def _step(model: torch.nn.Module, inputs: dict[str, Any], training: bool) -> tuple[dict[str, torch.Tensor], list]:
    """One call: the output's tensors (and, training, the loss's gradients), detached."""
    torch.manual_seed(123)
    with torch.set_grad_enabled(training):
        out = model(**inputs)
    if training:
        out.loss.backward()
    tensors = {k: v.detach() for k, v in out.items() if isinstance(v, torch.Tensor)}
    grads = [p.grad.clone() if p.grad is not None else None for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return tensors, grads


def _differences(actual: tuple, expected: tuple) -> list[str]:
    found = []
    (outs, grads), (expected_outs, expected_grads) = actual, expected
    if list(outs) != list(expected_outs):
        return [f"output keys {list(outs)} != {list(expected_outs)}"]
    for key, value in expected_outs.items():
        if not torch.allclose(outs[key], value, atol=1e-5, rtol=1e-4):
            found.append(f"output {key}")
    for i, (g, e) in enumerate(zip(grads, expected_grads, strict=True)):
        if (g is None) != (e is None) or (g is not None and not torch.allclose(g, e, atol=1e-5, rtol=1e-4)):
            found.append(f"gradient {i}")
    return found


def measure(name: str, training: bool, compiler: str) -> Measurement:
    """Graphs, capture time and mismatches of one model's step under `compiler` ("stenograph"
    or "torch.compile", both with a counting backend that runs the graphs as they are)."""
    import torch._dynamo  # the peer compiler, reset so that each measurement starts cold

    torch._dynamo.reset()
    stenograph.reset()
    torch.manual_seed(0)
    case = MODELS[name]()
    model = case.model.train(training)
    reference = copy.deepcopy(model)
    inputs = case.train if training else case.infer
    _step(reference, inputs, training)  # warm the eager path (kernels, allocator)
    eager_times = []
    for _ in range(3):  # the median of three warm runs: one run is noisy on a shared machine
        start = time.perf_counter()
        expected = _step(reference, inputs, training)
        eager_times.append(time.perf_counter() - start)
    eager_seconds = statistics.median(eager_times)

    counter = CompileCounter()
    reasons: list[str] = []

    def listen(event: events.CompileEvent) -> None:
        if isinstance(event, (events.GraphBreak, events.RunsEagerly)):
            reasons.append(event.reason.splitlines()[0])

    if compiler == "stenograph":
        compiled = stenograph.compile(model, backend=counter)
    else:
        compiled = torch.compile(model, backend=counter)
    events.subscribe(listen)
    try:
        with warnings.catch_warnings():  # frames run eagerly are listed in `reasons`
            warnings.simplefilter("ignore", stenograph.StenographWarning)
            start = time.perf_counter()
            actual = _step(compiled, inputs, training)
            capture = time.perf_counter() - start - eager_seconds
    finally:
        events.unsubscribe(listen)
        torch._dynamo.reset()
        stenograph.reset()
    return Measurement(counter.frame_count, capture, _differences(actual, expected), reasons)
