"""HuggingFace `generate()` with a compiled forward (issue 30), as users write it:
`model.forward = stenograph.compile(model.forward)`, then `model.generate(...)`.

Tiny decoders from configs (float32, random weights, offline). For each cache (the default
dynamic `DynamicCache`, whose KV length grows, and the static cache), greedy decoding and
top-k/top-p sampling, batch 1 and a left-padded batch of 2: the tokens equal eager's, prefill and
decode are separate graphs and decoding more tokens compiles nothing more (no recompile per
token), a second `generate()` on a new prompt of the same length compiles nothing, and no more
graphs are made than torch.compile makes (its counts with transformers 5.x: 3 with the dynamic
cache, prefill, first decode step, then one dynamic decode graph; 2 with the static cache). The
comparison with torch.compile running beside it is the slow variant.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter

transformers = pytest.importorskip("transformers")

# graphs torch.compile hands its backend for the same generate() (transformers 5.x)
TORCH_COMPILE_GRAPHS = {"dynamic": 3, "static": 2}
_VOCAB = 96


def _model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    shape = dict(
        vocab_size=_VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
    )
    config_cls, model_cls = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    }[family]
    return model_cls(config_cls(**shape)).eval()


def _prompt(batch: int, seed: int) -> dict[str, torch.Tensor]:
    """`batch` prompts of 6 tokens; in a batch of 2 the second is left-padded by 2 tokens."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, _VOCAB, (batch, 6), generator=generator)
    mask = torch.ones_like(ids)
    if batch > 1:
        ids[1, :2] = 0
        mask[1, :2] = 0
    return dict(input_ids=ids, attention_mask=mask)


def _generate(model, prompt, cache: str, sample: bool, new_tokens: int) -> torch.Tensor:
    options = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=0, do_sample=sample)
    if sample:
        options.update(top_k=8, top_p=0.9)
    if cache == "static":
        options["cache_implementation"] = "static"
    torch.manual_seed(1)  # sampling draws the same numbers in every run
    with torch.no_grad():
        return model.generate(**prompt, **options)


def _compiled_run(model, compile_forward, cache: str, sample: bool, batch: int):
    """Eager tokens, compiled tokens for 6 then 12 new tokens and a new prompt, and the graphs
    counted after each of the three compiled runs."""
    prompt, other = _prompt(batch, 0), _prompt(batch, 1)
    expected = [_generate(model, p, cache, sample, n) for p, n in ((prompt, 6), (prompt, 12), (other, 12))]
    eager_forward = model.forward
    counter = compile_forward(eager_forward)
    try:
        got, graphs = [], []
        for p, n in ((prompt, 6), (prompt, 12), (other, 12)):
            got.append(_generate(model, p, cache, sample, n))
            graphs.append(counter.frame_count)
    finally:
        model.forward = eager_forward
    return expected, got, graphs


def _with_stenograph(model):
    def compile_forward(forward):
        counter = CompileCounter()
        model.forward = stenograph.compile(forward, backend=counter)
        return counter

    return compile_forward


def _check(model, cache: str, sample: bool, batch: int) -> list[int]:
    expected, got, graphs = _compiled_run(model, _with_stenograph(model), cache, sample, batch)
    for e, g in zip(expected, got):
        assert torch.equal(e, g), (e, g)
    assert graphs[0] >= 2, "prefill and decode are separate graphs"
    assert graphs[1] == graphs[0], "more tokens compiled more graphs: a recompile per token"
    assert graphs[2] == graphs[1], "a new prompt of the same length compiled again"
    return graphs


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sample"])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_tokens_equal_eager_without_recompiles(cache, sample, batch):
    graphs = _check(_model("llama"), cache, sample, batch)
    assert graphs[-1] <= TORCH_COMPILE_GRAPHS[cache]


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_second_decoder_family(cache):
    """Qwen2 (biases on q/k/v, its own rotary set-up) decodes as Llama does."""
    graphs = _check(_model("qwen2"), cache, sample=False, batch=2)
    assert graphs[-1] <= TORCH_COMPILE_GRAPHS[cache]


def test_generate_changed_dtype_recompiles_and_matches():
    """The compiled forward is guarded on the weights' dtype: the model moved to float64 between
    two generate() calls compiles again and still gives eager's tokens."""
    model = _model("llama")
    prompt = _prompt(1, 0)
    counter = CompileCounter()
    eager_forward = model.forward
    model.forward = stenograph.compile(eager_forward, backend=counter)
    try:
        _generate(model, prompt, "static", False, 4)
        before = counter.frame_count
        model.double()
        got = _generate(model, prompt, "static", False, 4)
    finally:
        model.forward = eager_forward
    assert counter.frame_count > before
    assert torch.equal(got, _generate(model, prompt, "static", False, 4))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sample"])
@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_no_more_graphs_than_torch_compile(family, cache, sample):
    """Beside torch.compile on the same generate() calls (its own counting backend)."""
    from torch._dynamo.testing import CompileCounter as TorchCounter

    model = _model(family)
    ours = _check(model, cache, sample, batch=2)

    def with_torch_compile(forward):
        torch._dynamo.reset()
        counter = TorchCounter()
        model.forward = torch.compile(forward, backend=counter)
        return counter

    expected, got, theirs = _compiled_run(model, with_torch_compile, cache, sample, batch=2)
    torch._dynamo.reset()
    assert all(torch.equal(e, g) for e, g in zip(expected, got))
    assert ours[-1] <= theirs[-1], (ours, theirs)


def test_benchmark_dry_run():
    """benchmarks/generate.py's CPU dry run: eager, stenograph and torch.compile side by side (in
    that order), the table printed, stenograph's tokens equal eager's (the script fails otherwise)."""
    root = pathlib.Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "generate.py"), "--dry-run", "--families", "llama"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [line for line in run.stdout.splitlines() if line.startswith("| llama | default |")]
    assert [row.split("|")[3].strip() for row in rows] == ["eager", "stenograph", "torch.compile"]
    assert rows[1].split("|")[-2].strip() == "True"


def test_generate_compiling_the_model_itself_traces_the_original_forward():
    """generate() with a static cache compiles the model's __call__ with torch.compile (on the
    GPU by default; `_compile_all_devices` here): torch.compile then traces a forward compiled by
    stenograph, and runs the original function (it traced stenograph's lookup before: a bare
    AssertionError, 'Guard failed on the same frame it was created')."""
    model = _model("llama")
    prompt = _prompt(1, 0)
    config = transformers.CompileConfig(backend="eager", fullgraph=False)
    config._compile_all_devices = True

    def generate():
        with torch.no_grad():
            return model.generate(
                **prompt,
                max_new_tokens=4,
                min_new_tokens=4,
                pad_token_id=0,
                do_sample=False,
                cache_implementation="static",
                compile_config=config,
            )

    expected = generate()
    eager_forward = model.forward
    model.forward = stenograph.compile(eager_forward, backend="eager")
    try:
        got = generate()
    finally:
        model.forward = eager_forward
        torch._dynamo.reset()
    assert torch.equal(got, expected)
