"""Real models from HuggingFace `transformers`, torchvision and timm, built from tiny configs or
small inputs with random weights (offline), and the one measurement the slow tests and
`benchmarks/model_zoo.py` share.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

import stenograph
from stenograph import events
from stenograph.testing import CompileCounter

from .torchvision_ops import load as _load_torchvision

try:
    import transformers
except ImportError:  # the `models` extra is not installed: no HF models
    transformers = None
torchvision = _load_torchvision()  # first: timm imports it
try:
    import timm
except ImportError:  # the `models` extra is not installed: no timm models
    timm = None

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


def _own_loss(out: Any) -> torch.Tensor:
    return out.loss


@dataclass
class Case:
    """A model, the keyword arguments of its inference and training calls, and the training
    loss computed (eagerly) from the training call's output."""

    model: torch.nn.Module
    infer: dict[str, Any]
    train: dict[str, Any]
    loss: Callable[[Any], torch.Tensor] = _own_loss


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


def _distilbert_classifier() -> Case:
    """The issue-27 case: the forward writes `config.problem_type` on the first call with labels
    and reads it back in the same call."""
    config = transformers.DistilBertConfig(
        vocab_size=_VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64, num_labels=2
    )
    ids = _ids(0)
    return Case(
        transformers.DistilBertForSequenceClassification(config),
        dict(input_ids=ids),
        dict(input_ids=ids, labels=torch.tensor([0, 1])),
    )


def _hf_image_classifier(config_cls: str, model_cls: str, **extra: Any) -> Callable[[], Case]:
    def build() -> Case:
        config = getattr(transformers, config_cls)(image_size=32, num_labels=2, **extra)
        images = _images(size=32)
        model = getattr(transformers, model_cls)(config)
        return Case(model, dict(pixel_values=images), dict(pixel_values=images, labels=torch.tensor([0, 1])))

    return build


def _images(batch: int = 2, size: int = 64) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0))


def _classifier(build: Callable[[], torch.nn.Module], size: int = 64) -> Callable[[], Case]:
    """An image classifier on a small batch, trained with cross-entropy against fixed labels."""

    def case() -> Case:
        images = _images(size=size)
        labels = torch.tensor([1, 3])
        model = build()
        return Case(
            model, dict(x=images), dict(x=images), lambda logits: torch.nn.functional.cross_entropy(logits, labels)
        )

    return case


def _faster_rcnn() -> Case:
    """Faster R-CNN (MobileNetV3 backbone, no pretrained weights) on two small images; every box
    is kept (score threshold 0) so that random weights still return detections."""
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=5, box_score_thresh=0.0, min_size=128, max_size=160
    )
    generator = torch.Generator().manual_seed(0)
    images = [torch.rand(3, 128, 160, generator=generator), torch.rand(3, 120, 144, generator=generator)]
    boxes = torch.tensor([[10.0, 20.0, 60.0, 90.0], [30.0, 5.0, 120.0, 70.0]])
    targets = [dict(boxes=boxes, labels=torch.tensor([1, 2])), dict(boxes=boxes[:1], labels=torch.tensor([3]))]
    return Case(model, dict(images=images), dict(images=images, targets=targets), lambda losses: sum(losses.values()))


def _vision_models() -> dict[str, Callable[[], Case]]:
    found: dict[str, Callable[[], Case]] = {}
    if torchvision is not None:
        tv = torchvision.models
        found["resnet18"] = _classifier(lambda: tv.resnet18(num_classes=10))
        found["resnet50"] = _classifier(lambda: tv.resnet50(num_classes=10))
        found["swin_t"] = _classifier(lambda: tv.swin_t(num_classes=10))
        found["vit_b_16"] = _classifier(lambda: tv.vit_b_16(num_classes=10, image_size=64))
        found["fasterrcnn"] = _faster_rcnn
    if timm is not None:
        found["timm-vit_tiny"] = _classifier(
            lambda: timm.create_model("vit_tiny_patch16_224", num_classes=10, img_size=64)
        )
        found["timm-resnet18"] = _classifier(lambda: timm.create_model("resnet18", num_classes=10))
    return found


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
    "distilbert-classifier": _distilbert_classifier,
    "hf-vit": _hf_image_classifier(
        "ViTConfig",
        "ViTForImageClassification",
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        patch_size=8,
    ),
    "hf-swin": _hf_image_classifier(
        "SwinConfig",
        "SwinForImageClassification",
        patch_size=4,
        embed_dim=16,
        depths=[1, 1],
        num_heads=[2, 2],
        window_size=4,
    ),
}
if transformers is None:
    MODELS = {}
MODELS.update(_vision_models())


@dataclass
class Measurement:
    graphs: int
    capture_seconds: float
    mismatches: list[str]  # outputs or gradients that differ from eager
    reasons: list[str] = field(default_factory=list)  # stenograph's break and eager-fallback reasons


def _tensors(out: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """The tensors of an output (a tensor, a mapping such as ModelOutput, or a list of them)."""
    if isinstance(out, torch.Tensor):
        return {prefix.rstrip(".") or "output": out.detach()}
    if isinstance(out, Mapping):
        items = out.items()
    elif isinstance(out, (list, tuple)):
        items = enumerate(out)
    else:
        return {}
    found = {}
    for key, value in items:
        found.update(_tensors(value, f"{prefix}{key}."))
    return found


def _step(case: Case, model: torch.nn.Module, training: bool) -> tuple[dict[str, torch.Tensor], list]:
    """One call: the output's tensors (and, training, the loss's gradients), detached."""
    torch.manual_seed(123)
    with torch.set_grad_enabled(training):
        out = model(**(case.train if training else case.infer))
    if training:
        case.loss(out).backward()
    tensors = _tensors(out)
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
    _step(case, reference, training)  # warm the eager path (kernels, allocator)
    eager_times = []
    for _ in range(3):  # the median of three warm runs: one run is noisy on a shared machine
        start = time.perf_counter()
        expected = _step(case, reference, training)
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
            actual = _step(case, compiled, training)
            capture = time.perf_counter() - start - eager_seconds
    finally:
        events.unsubscribe(listen)
        torch._dynamo.reset()
        stenograph.reset()
    return Measurement(counter.frame_count, capture, _differences(actual, expected), reasons)
