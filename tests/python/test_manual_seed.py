"""`torch.manual_seed` inside a compiled function: it runs eagerly at a graph break, so the
random ops after it draw what eager draws (torch.compile also breaks there: same graph count)."""

import torch

from ._support import check, t


def seeded(x):
    y = x.sin()
    torch.manual_seed(3)
    return y + torch.randn(3), torch.rand(2)


def seeded_per_call(x, seed):
    torch.manual_seed(seed)
    return x * torch.randn_like(x)


def test_manual_seed_then_random_ops_match_eager(cnt, capsys):
    check(seeded, lambda i: (t(3, seed=i),), cnt, capsys, graphs=2, calls=3)


def test_seed_from_an_argument(cnt):
    results = check(seeded_per_call, lambda i: (t(4, seed=i), 5 + i), cnt, graphs=1, calls=3)
    torch.manual_seed(6)
    torch.testing.assert_close(results[1], t(4, seed=1) * torch.randn(4))
