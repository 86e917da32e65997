"""HF classification heads trained with `labels=` (issue 27): the forward sets
`config.problem_type` and then reads it, Swin clamps its window and shift sizes on the module
(`self.shift_size = 0`) from the input's size. Loss and gradients equal eager's, from the first
call, one graph a call as torch.compile makes (tiny configs, random weights, offline)."""

from __future__ import annotations

import copy

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter

transformers = pytest.importorskip("transformers")


def _distilbert():
    config = transformers.DistilBertConfig(
        vocab_size=100, dim=32, hidden_dim=64, n_layers=2, n_heads=4, max_position_embeddings=64, num_labels=3
    )
    inputs = dict(input_ids=torch.randint(0, 100, (2, 8)), labels=torch.tensor([0, 2]))
    return transformers.DistilBertForSequenceClassification(config), inputs


def _vit():
    config = transformers.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        num_labels=3,
    )
    return transformers.ViTForImageClassification(config), dict(
        pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([0, 2])
    )


def _swin():
    # the last stage's 4 x 4 resolution is not above the window: Swin clamps it in forward
    config = transformers.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 2], window_size=4, num_labels=3
    )
    return transformers.SwinForImageClassification(config), dict(
        pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([0, 2])
    )


@pytest.mark.parametrize("build", [_distilbert, _vit, _swin], ids=["distilbert", "vit", "swin"])
def test_training_step_with_labels_matches_eager_in_one_graph(build):
    torch.manual_seed(0)
    eager, inputs = build()
    eager.train()
    model = copy.deepcopy(eager)
    counter = CompileCounter()
    compiled = stenograph.compile(model, backend=counter)
    graphs = []
    for step in range(3):
        torch.manual_seed(step)  # dropout draws the same numbers in both
        expected = eager(**inputs).loss
        torch.manual_seed(step)
        got = compiled(**inputs).loss
        assert got is not None, "no loss: the write to config.problem_type was not seen by the read"
        torch.testing.assert_close(got, expected)
        expected.backward()
        got.backward()
        for (name, p), q in zip(eager.named_parameters(), model.parameters()):
            torch.testing.assert_close(q.grad, p.grad, msg=name)
        assert model.config.problem_type == eager.config.problem_type
        graphs.append(counter.frame_count)
    # the second call sees the problem type the first one set: one recompile (torch.compile too)
    assert graphs[0] == 1 and graphs[2] == graphs[1] <= 2, graphs
