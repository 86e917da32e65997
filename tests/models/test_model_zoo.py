"""HuggingFace models (tests/models/zoo.py) under stenograph: outputs and gradients equal eager's,
and no more graphs than torch.compile hands its backend for the same step.

Inference under `no_grad` and one training step with the model's own loss, each from a tiny
config with random weights (offline). With transformers 5.23 every model is one graph for both
compilers, which is asserted too, so a regression fails even where torch.compile would break as
well (other versions differ in model code: there only the comparison is checked). Needs the
`models` extra (`transformers`); skipped without it.
"""

from __future__ import annotations

import pytest

from .zoo import MODELS, measure

transformers = pytest.importorskip("transformers")

_PINNED = transformers.__version__.startswith("5.23.")


@pytest.mark.slow
@pytest.mark.parametrize("step", ["infer", "train"])
@pytest.mark.parametrize("name", list(MODELS))
def test_matches_eager_in_no_more_graphs_than_torch_compile(name, step):
    ours = measure(name, step == "train", "stenograph")
    assert ours.mismatches == [], f"differs from eager: {ours.mismatches}"
    if _PINNED:
        assert ours.graphs == 1, ours.reasons
    theirs = measure(name, step == "train", "torch.compile")
    assert ours.graphs <= theirs.graphs, ours.reasons
