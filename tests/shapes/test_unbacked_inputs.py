"""Unbacked input sizes and ints: `torch.compiler.config.unbacked_sources`, torch's
`mark_unbacked`, and `automatic_dynamic_shapes_mark_as="unbacked"`.

An unbacked size is a symbol without a value the trace may read: nothing guards its value (0 and 1
are not specialised, so they reuse the graph), a Python decision on it is data-dependent (a graph
break, an error under fullgraph), and what the trace took for granted of it (two sizes broadcast
together are equal, a size is even for `view(-1, 2)`) is guarded, so a call breaking it compiles
again with backed sizes. Each case compares with eager and, where torch.compile gets it right,
counts its graphs for the same calls under the same settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import helpers
import pytest
import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

import stenograph
from stenograph.testing import CompileCounter, CompileCounterWithBackend


def _frames(
    fn: Callable,
    calls: Sequence[Sequence[Any]],
    *,
    torch_frames: int | None = None,
    mark_as: str = "dynamic",
    **sources: str,
) -> CompileCounter:
    """Compiled `fn` against eager on each argument tuple of `calls`, under `unbacked_sources`
    and the like (`sources`) and `automatic_dynamic_shapes_mark_as`; torch.compile's frame
    count for the same calls must be `torch_frames` (None: torch.compile not run)."""
    cnt = CompileCounter()
    with torch.compiler.config.patch(**sources), stenograph.config.patch(automatic_dynamic_shapes_mark_as=mark_as):
        compiled = stenograph.compile(fn, backend=cnt)
        for args in calls:
            helpers.assert_same(compiled(*args), fn(*args))
        if torch_frames is not None:
            peer = CompileCounter()

            def run() -> None:
                with torch._dynamo.config.patch(automatic_dynamic_shapes_mark_as=mark_as):
                    torch_compiled = torch.compile(fn, backend=peer)
                    for args in calls:
                        torch_compiled(*args)

            helpers.torch_peer(run)
            assert peer.frame_count == torch_frames
    return cnt


def _square(x):
    return x * x


def _unbacked_placeholders(gm: torch.fx.GraphModule) -> list[str]:
    return [p.name for p in helpers.placeholders(gm) if free_unbacked_symbols(p.meta["example_value"])]


def test_mark_as_unbacked_makes_a_changed_size_unbacked_so_zero_and_one_reuse_the_frame():
    """torch's test_automatic_dynamic_shapes_mark_as_unbacked: sizes 3, 2, 1, 0 compile twice
    (the second compile's size is unbacked), not four times; identical calls compile nothing."""
    calls = [(torch.randn(n),) for n in (3, 2, 1, 0, 1, 7)]
    cnt = _frames(_square, calls, torch_frames=2, mark_as="unbacked")
    assert cnt.frame_count == 2
    assert _unbacked_placeholders(cnt.graphs[0]) == [] and _unbacked_placeholders(cnt.graphs[1]) == ["x"]


def test_by_default_a_changed_size_is_backed_and_zero_and_one_specialise():
    cnt = _frames(_square, [(torch.randn(n),) for n in (3, 2, 1, 0)], torch_frames=4)
    assert cnt.frame_count == 4


def test_mark_as_unbacked_applies_to_a_changed_int_too():
    def add(x, n):
        return x.sum() + n

    calls = [(torch.ones(2), n) for n in (3, 4, 1, 0, 5)]
    cnt = _frames(add, calls, torch_frames=2, mark_as="unbacked")
    assert cnt.frame_count == 2 and _unbacked_placeholders(cnt.graphs[1]) == ["n"]


def test_an_unbacked_size_is_guarded_on_nothing_but_being_a_size():
    with stenograph.config.patch(automatic_dynamic_shapes_mark_as="unbacked", native_guards=False):
        compiled = stenograph.compile(_square, backend="eager")
        compiled(torch.ones(3, 2))
        compiled(torch.ones(2, 2))
    guard = stenograph.inspect(compiled).entries[1].guard_source
    assert "x.dim() == 2" in guard and "x.size(1) == 2" in guard
    assert [line.strip() for line in guard.splitlines() if "size()[0]" in line or "size(0)" in line] == [
        "if not (0 <= x.size()[0]): return False"
    ]


def test_unbacked_sources_makes_a_listed_tensors_sizes_unbacked_from_the_first_compile():
    """torch's test_unbacked_sources_tensor: sizes 0, 1, 2 share one frame."""
    calls = [(torch.randn(n),) for n in (0, 1, 2, 2)]
    cnt = _frames(_square, calls, torch_frames=1, unbacked_sources="L['x']")
    assert cnt.frame_count == 1 and _unbacked_placeholders(cnt.graphs[0]) == ["x"]


def test_unbacked_sources_makes_a_listed_int_unbacked_from_the_first_compile():
    """torch's test_unbacked_sources_scalar: ints 0, 1, 2 share one frame."""
    calls = [(n,) for n in (0, 1, 2, 2)]
    cnt = _frames(_square, calls, torch_frames=1, unbacked_sources="L['x']")
    assert cnt.frame_count == 1 and _unbacked_placeholders(cnt.graphs[0]) == ["x"]


def test_a_negative_listed_int_is_not_unbacked_and_compiles_again():
    """An unbacked int is a size (its guard: at least 0). torch.compile fails on a negative one
    (its new frame's guard rejects the very call: an internal AssertionError); here the negative
    value fails the guard and compiles as an ordinary int."""
    cnt = _frames(_square, [(n,) for n in (2, 0, -3, -4, 5)], unbacked_sources="L['x']")
    assert cnt.frame_count == 2


def test_an_entry_naming_one_dimension_makes_that_one_unbacked():
    def total(x):
        return x.sum(1)

    # (a (3, 0) tensor would recompile: its stride (1, 1) breaks the guard `x.stride()[0] == x.size()[1]`)
    calls = [(torch.randn(3, n),) for n in (4, 1, 6)] + [(torch.randn(5, 2),)]
    cnt = _frames(total, calls, torch_frames=2, unbacked_sources="L['x']:1")
    assert cnt.frame_count == 2  # dimension 0 is static: 5 recompiles


def test_an_entry_whose_dimension_the_tensor_lacks_leaves_it_static():
    cnt = _frames(_square, [(torch.ones(3),), (torch.ones(3),)], torch_frames=1, unbacked_sources="L['x']:1")
    assert cnt.frame_count == 1 and _unbacked_placeholders(cnt.graphs[0]) == []


def test_torchs_mark_unbacked_makes_the_dimension_unbacked():
    cnt = CompileCounter()
    compiled = stenograph.compile(_square, backend=cnt)
    for n in (3, 1, 0, 5):
        x = torch.randn(n, 2)
        torch._dynamo.decorators.mark_unbacked(x, 0)
        helpers.assert_same(compiled(x), _square(x))
    assert cnt.frame_count == 1 and _unbacked_placeholders(cnt.graphs[0]) == ["x"]


@pytest.mark.parametrize("change", ["rank", "dtype"])
def test_a_changed_rank_or_dtype_compiles_again(change):
    other = torch.ones(3, 3) if change == "rank" else torch.ones(3, dtype=torch.float64)
    calls = [(torch.ones(3),), (torch.ones(1),), (other,), (other,), (torch.ones(0),)]
    cnt = _frames(_square, calls, torch_frames=2, unbacked_sources="L['x']")
    assert cnt.frame_count == 2


def _branch(x):
    if x.shape[0] > 2:
        return x + 1
    return x - 1


def test_a_branch_on_an_unbacked_size_breaks_the_graph():
    """The comparison is data-dependent: the graph breaks there and each branch's resume
    function runs the rest, as torch.compile's (frames: the comparison, then each branch's)."""
    calls = [(torch.ones(n),) for n in (3, 1, 0, 5)]
    assert _frames(_branch, calls, torch_frames=3, unbacked_sources="L['x']").frame_count == 3


def test_under_fullgraph_a_branch_on_an_unbacked_size_raises():
    with torch.compiler.config.patch(unbacked_sources="L['x']"):
        with pytest.raises(stenograph.errors.Unsupported, match="depends on tensor data"):
            stenograph.compile(_branch, backend="eager", fullgraph=True)(torch.ones(3))


def test_a_size_of_one_broadcast_against_an_unbacked_size_compiles_again_with_backed_sizes():
    """The trace takes two unbacked sizes added together as equal (a guard); a call passing a
    size of 1 breaks that, so it is traced again with backed sizes (one more entry, kept: the
    same call again compiles nothing). torch.compile fails on that call (its new frame's guard
    rejects the very call: an internal AssertionError), so it is not the peer here."""

    def add(x, y):
        return x + y

    calls = [(torch.ones(3), torch.ones(3)), (torch.ones(3), torch.ones(1)), (torch.ones(3), torch.ones(1))]
    calls += [(torch.ones(5), torch.ones(5)), (torch.ones(0), torch.ones(0)), (torch.ones(6), torch.ones(1))]
    cnt = _frames(add, calls, unbacked_sources="L['x'],L['y']")
    assert cnt.frame_count == 2
    with torch.compiler.config.patch(unbacked_sources="L['x'],L['y']"):
        compiled = stenograph.compile(add, backend=cnt)
        with pytest.raises(RuntimeError, match="must match the size"):
            compiled(torch.ones(2), torch.ones(3))  # eager's error, in neither entry


def test_a_fact_an_op_took_for_granted_of_an_unbacked_size_is_guarded():
    """`view(-1, 2)` takes the unbacked size as even: guarded, so an odd size compiles again,
    with a backed size, where the op raises eager's error."""

    def pairs(x):
        return x.view(-1, 2)

    cnt = _frames(pairs, [(torch.ones(n),) for n in (4, 8, 0)], torch_frames=1, unbacked_sources="L['x']")
    with torch.compiler.config.patch(unbacked_sources="L['x']"):
        compiled = stenograph.compile(pairs, backend=cnt)
        with pytest.raises(RuntimeError, match="invalid for input of size 3"):
            compiled(torch.ones(3))
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_through_an_unbacked_batch_size_gives_eagers_gradients(backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    cnt = CompileCounterWithBackend(backend)
    with stenograph.config.patch(automatic_dynamic_shapes_mark_as="unbacked"):
        compiled = stenograph.compile(model, backend=cnt)
        for batch in (3, 5, 1, 0, 7):
            x = torch.randn(batch, 4)
            compiled(x).sum().backward()
            grads = [p.grad.clone() for p in model.parameters()]
            model.zero_grad()
            model(x).sum().backward()
            helpers.assert_same(grads, [p.grad for p in model.parameters()])
            model.zero_grad()
    assert cnt.frame_count == 2
