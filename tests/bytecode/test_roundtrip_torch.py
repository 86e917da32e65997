"""torch.nn modules whose every method is replaced by its disassembled-and-reassembled twin
must construct and compute exactly what the originals do."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roundtrip_support import CodeRecorder, patch_module  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.modules import activation, batchnorm, conv, linear  # noqa: E402

from stenograph.testing import same  # noqa: E402

MODULES = [linear, conv, batchnorm, activation]


def _scenario() -> list:
    """Build layers (rebuilt __init__/reset_parameters run here too) and run them."""
    torch.manual_seed(0)
    x2 = torch.randn(5, 8)
    x4 = torch.randn(2, 3, 9, 9)
    seq = torch.randn(4, 2, 8)
    out = []
    layers = [
        (nn.Linear(8, 4), x2),
        (nn.Linear(8, 3, bias=False), x2),
        (nn.Identity(), x2),
        (nn.Conv2d(3, 6, 3, stride=2, padding=1), x4),
        (nn.Conv2d(3, 6, 3, padding="same", padding_mode="reflect", groups=3), x4),
        (nn.ConvTranspose2d(3, 2, 3, stride=2), x4),
        (nn.Conv1d(8, 4, 2), seq.transpose(1, 2).transpose(0, 2).contiguous()),
        (nn.ReLU(), x2),
        (nn.GELU(approximate="tanh"), x2),
        (nn.SiLU(), x2),
        (nn.LeakyReLU(0.2), x2),
        (nn.Softmax(dim=1), x2),
        (nn.LogSoftmax(dim=0), x2),
        (nn.Hardtanh(-0.5, 0.5), x2),
        (nn.PReLU(), x2),
        (nn.Threshold(0.1, 20.0), x2),
    ]
    for layer, inp in layers:
        out.append(layer(inp))
        out.append(repr(layer))
    bilinear = nn.Bilinear(8, 8, 2)
    out.append(bilinear(x2, x2))
    mha = nn.MultiheadAttention(8, 2)
    attn, weights = mha(seq, seq, seq, need_weights=True)
    out += [attn, weights]
    for bn, inp in ((nn.BatchNorm2d(3), x4), (nn.BatchNorm1d(8, momentum=None), x2)):
        bn.train()
        out.append(bn(inp))
        out.append(bn(inp * 2))
        out += [bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.clone()]
        bn.eval()
        out.append(bn(inp))
    return out


def test_torch_layers_with_rebuilt_methods(monkeypatch):
    expected = _scenario()
    rebuilt = set()
    for module in MODULES:
        rebuilt |= patch_module(monkeypatch, module)
    assert nn.Linear.forward.__code__ in rebuilt
    with CodeRecorder() as rec:
        actual = _scenario()
    assert len(actual) == len(expected)
    mismatches = [i for i, (a, b) in enumerate(zip(actual, expected)) if not same(a, b, tol=0)]
    assert not mismatches
    ran = {c.co_qualname for c in rec.codes & rebuilt}
    for name in (
        "Linear.__init__",
        "Linear.forward",
        "Linear.reset_parameters",
        "_ConvNd.__init__",
        "Conv2d._conv_forward",
        "ConvTranspose2d.forward",
        "_BatchNorm.forward",
        "MultiheadAttention.forward",
        "GELU.forward",
        "Bilinear.forward",
    ):
        assert name in ran, name
