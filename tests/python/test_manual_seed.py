"""`torch.manual_seed` inside a compiled function: it runs eagerly at a graph break, so the
random ops after it draw what eager draws (torch.compile also breaks there: same graph count).
The other seed and state functions (`torch.seed`, `get_rng_state`, `set_rng_state`,
`initial_seed`, `torch.random.fork_rng`) are one break each too, called as they are: their
bodies, which read the generators through C calls, are neither traced nor compiled."""

import sys

import torch

import stenograph

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


def reseeded_and_restored(x):
    s = int(torch.seed() % sys.maxsize)
    torch.manual_seed(s)
    a = torch.randn(3)
    torch.manual_seed(s)
    b = torch.randn(3)
    state = torch.get_rng_state()
    c = torch.rand(2)
    torch.set_rng_state(state)
    return x + a - b, c - torch.rand(2), torch.initial_seed() == s


def forked(x):
    with torch.random.fork_rng():
        torch.manual_seed(1)
        y = x + torch.randn(3)
    return y * 2, torch.rand(1)


def test_seed_and_state_functions_are_one_break_each(cnt):
    compiled = stenograph.compile(reseeded_and_restored, backend=cnt)
    counts = []
    for i in range(3):  # a fresh seed each call: the outputs do not depend on it
        x = t(3, seed=i)
        got, want = compiled(x), reseeded_and_restored(x)
        torch.testing.assert_close(got[:2], want[:2])
        assert got[2] is want[2] is True
        counts.append(cnt.frame_count)
    # 4 graphs; the second seed makes the 2 resume functions reading it recompile with it symbolic
    assert counts == [4, 6, 6]
    explained = stenograph.explain(reseeded_and_restored)(t(3))
    reasons = [b.reason for b in explained.break_reasons]
    assert len(reasons) == 6 and all("torch.random is not traced" in r for r in reasons)
    # no frame of torch.random's own was compiled: only the function and its resume functions
    compiled = [part.split(":")[0] for part in explained.compile_times.split(", ")]
    assert compiled[0] == "reseeded_and_restored" and all(n.startswith("__resume_at_") for n in compiled[1:])


def test_fork_rng_block_is_captured_around_its_breaks(cnt):
    check(forked, lambda i: (t(3, seed=i),), cnt, graphs=2, calls=2, peer=False)


def _print_options_then_back(x):
    y = x + 1
    torch.set_printoptions(precision=2)
    z = y * 2 + torch._tensor_str.PRINT_OPTS.precision
    torch.set_printoptions(precision=4)
    return z


def test_process_state_setters_are_one_break_each(cnt):
    """torch's Python setters of process state run as they are at a break, their bodies
    neither traced nor compiled; the code after each sees the state they set."""
    check(_print_options_then_back, lambda i: (t(3, seed=i),), cnt, graphs=2, calls=2, peer=False)
    assert torch._tensor_str.PRINT_OPTS.precision == 4
    explained = stenograph.explain(_print_options_then_back)(t(3))
    reasons = [b.reason for b in explained.break_reasons]
    assert reasons == ["call to torch._tensor_str.set_printoptions (torch's process-state setter is not traced)"] * 2
