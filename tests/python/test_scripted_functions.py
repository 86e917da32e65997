"""Functions compiled by `torch.jit.script` (DeBERTa-v2's relative-position helpers in some
transformers versions) are traced through the Python function they were made from, as
torch.compile does, instead of breaking the graph at each call."""

from __future__ import annotations

import torch

import stenograph
from stenograph.testing import CompileCounter


@torch.jit.script
def scaled_bucket(relative: torch.Tensor, buckets: int) -> torch.Tensor:
    sign = torch.sign(relative)
    return sign * torch.clamp(relative.abs(), max=buckets) / buckets


def uses_script(x: torch.Tensor) -> torch.Tensor:
    return scaled_bucket(x, 4).sin() * 2


def test_scripted_function_inlined_in_one_graph() -> None:
    counter = CompileCounter()
    fn = stenograph.compile(uses_script, backend=counter)
    x = torch.randn(8, 8) * 10
    torch.testing.assert_close(fn(x), uses_script(x))
    fn(torch.randn(8, 8))
    assert counter.frame_count == 1
    assert counter.op_count >= 4  # sign, abs, clamp, div... all in the graph


def test_scripted_function_gradients_match_eager() -> None:
    fn = stenograph.compile(uses_script, backend="eager")
    x = (torch.randn(5) * 10).requires_grad_()
    fn(x).sum().backward()
    expected_x = x.detach().clone().requires_grad_()
    uses_script(expected_x).sum().backward()
    torch.testing.assert_close(x.grad, expected_x.grad)


@torch.jit.script
def _replacement(relative: torch.Tensor, buckets: int) -> torch.Tensor:
    return relative * buckets


def test_replacing_the_scripted_global_recompiles() -> None:
    global scaled_bucket
    counter = CompileCounter()
    fn = stenograph.compile(uses_script, backend=counter)
    x = torch.randn(4) * 10
    fn(x)
    saved = scaled_bucket
    scaled_bucket = _replacement
    try:
        torch.testing.assert_close(fn(x), uses_script(x))
        assert counter.frame_count == 2
    finally:
        scaled_bucket = saved
