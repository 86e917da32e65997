"""Each backend on the MLP, the CNN (training mode: BatchNorm buffers) and the attention block,
through stenograph.compile: eager's outputs, buffers and gradients, one graph, no recompiles."""

from __future__ import annotations

import pytest

from ._support import MODELS, compare_forward_backward, make_model


@pytest.mark.parametrize("model_name", list(MODELS))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backend_matches_eager(backend, model_name):
    model, x = make_model(model_name)
    cnt = compare_forward_backward(backend, model, x, calls=2)
    assert cnt.frame_count == 1  # the second call and the backward reuse the first graph


# Inductor is slow-marked: even `relu(x * w).sum()` forward + backward takes 27 s with a cold
# Inductor cache on the 2-core CI machine (the MLP 31 s), over the 15 s budget for a CI test.
@pytest.mark.slow
@pytest.mark.parametrize("model_name", list(MODELS))
def test_inductor_matches_eager(model_name):
    model, x = make_model(model_name)
    cnt = compare_forward_backward("inductor", model, x, calls=2)
    assert cnt.frame_count == 1


def test_bn_running_stats_counted_once_per_call():
    """aot_eager functionalises BatchNorm's in-place buffer updates and copies them back: the
    buffers must move exactly as eager's, once per call (num_batches_tracked counts calls)."""
    model, x = make_model("cnn_train")
    compare_forward_backward("aot_eager", model, x, calls=3)
    assert int(model.bn1.num_batches_tracked) == 3
    assert int(model.bn2.num_batches_tracked) == 3
