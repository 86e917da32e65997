"""The one check every Python-coverage test makes: compiled vs eager, and graphs vs torch.compile.

`check` runs a function eagerly and under stenograph on identical fresh arguments, and compares
what a user could observe: the return value (containers, user objects, dataclasses, namedtuples
compared by type and contents), printed output, the arguments' state afterwards (mutations),
the RNG stream and, when asked, gradients. Then it asserts the number of graphs and that
torch.compile, run as a peer with a counting backend, hands over the same number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import helpers
import torch

import stenograph


def assert_same(actual: Any, expected: Any, path: str = "out") -> None:
    """Structural equality: same types, equal constants, close tensors, equal object state."""
    helpers.assert_same(actual, expected, path, by_state=True)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "__dict__") and not isinstance(value, torch.nn.Module):
        value = list(vars(value).values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _backward(out: Any) -> None:
    loss = sum((t.float() * (i + 1)).sum() for i, t in enumerate(_tensors(out)) if t.requires_grad)
    if isinstance(loss, torch.Tensor):
        loss.backward()


def torch_graph_count(fn: Callable, make_args: Callable[[int], Sequence[Any]], calls: int) -> int:
    """Graphs torch.compile hands to a counting backend for the same calls (torch is the peer)."""

    def run(compiled: Callable) -> None:
        for i in range(calls):
            torch.manual_seed(i)
            compiled(*make_args(i))

    try:
        return helpers.count_torch_graphs(fn, run)
    except Exception:
        if torch.__version__.startswith("2.13"):
            raise
        return 0  # an older torch.compile fails on the code (torch 2.11: internal errors): no peer


def check(
    fn: Callable,
    make_args: Callable[[int], Sequence[Any]],
    cnt: Any,
    capsys: Any = None,
    *,
    graphs: int = 1,
    calls: int = 2,
    grads: bool = False,
    torch_graphs: int | None = None,
    peer: bool = True,
) -> list[Any]:
    """Compiled `fn` vs eager on `calls` fresh argument sets; returns the compiled results.

    `graphs` is stenograph's graph count over all calls; torch.compile must give `torch_graphs`
    (default: the same number). `peer=False` skips torch.compile, for code it fails on or runs
    eagerly (0 graphs), where a graph count cannot be compared.
    """
    compiled = stenograph.compile(fn, backend=cnt)
    results = []
    if capsys is not None:
        capsys.readouterr()
    for i in range(calls):
        args_e, args_c = make_args(i), make_args(i)
        torch.manual_seed(i)
        expected = fn(*args_e)
        rng_e = torch.randn(2)
        printed_e = capsys.readouterr().out if capsys is not None else ""
        torch.manual_seed(i)
        actual = compiled(*args_c)
        rng_c = torch.randn(2)
        printed_c = capsys.readouterr().out if capsys is not None else ""
        assert printed_c == printed_e, f"call {i}: printed {printed_c!r}, eager printed {printed_e!r}"
        assert_same(actual, expected, f"call {i}: result")
        assert_same(list(args_c), list(args_e), f"call {i}: arguments after the call")
        torch.testing.assert_close(rng_c, rng_e, msg=lambda m, i=i: f"call {i}: RNG stream differs: {m}")
        if grads:
            _backward(expected)
            _backward(actual)
            for j, (a, e) in enumerate(zip(_tensors(list(args_c)), _tensors(list(args_e)))):
                assert_same(a.grad, e.grad, f"call {i}: grad of tensor argument {j}")
        results.append(actual)
    assert cnt.frame_count == graphs, f"stenograph gave {cnt.frame_count} graphs, expected {graphs}"
    if not peer:
        return results
    peer_graphs = torch_graph_count(fn, make_args, calls)
    want = graphs if torch_graphs is None else torch_graphs
    # `want` is torch.compile's count measured with torch 2.13; other torch versions may break
    # more (2.11 gives 2 on a few of these, or runs the frame eagerly: 0). stenograph must never
    # need more graphs than a torch.compile that captures the code at all.
    assert peer_graphs == 0 or cnt.frame_count <= peer_graphs, (
        f"stenograph gave {cnt.frame_count} graphs, torch.compile {peer_graphs}"
    )
    if torch.__version__.startswith("2.13"):
        assert peer_graphs == want, f"torch.compile gave {peer_graphs} graphs, expected {want}"
    return results


def t(*shape: int, seed: int = 0, grad: bool = False) -> torch.Tensor:
    """A deterministic random tensor."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)
