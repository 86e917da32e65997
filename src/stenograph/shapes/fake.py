"""Fake tensors and the shape environment (DESIGN decision 6).

One `FakeTensorMode` with a `ShapeEnv` per traced frame. An input dimension chosen to be dynamic
gets a symbol (`s0`) instead of its size; ops on fakes then compute symbolic sizes, and every
decision taken on a symbol (`if x.shape[0] > 1`, broadcasting two sizes together) is recorded by
the ShapeEnv as a guard. Static dimensions stay plain ints and are checked by the tensor guards.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    GuardOnDataDependentSymNode,
    ShapeEnv,
    StatelessSymbolicContext,
)

from .. import config
from ..guards.sources import Source

DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode)


@dataclasses.dataclass(frozen=True)
class ShapeSource(TorchSource):
    """Adapts one of our sources to the `torch._guards.Source` interface the ShapeEnv uses to
    name symbols and to report which input a guard is about."""

    source: Source

    @property
    def _name_template(self) -> str:
        return self.source.name()

    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    def reconstruct(self, codegen: Any) -> None:
        raise NotImplementedError("stenograph sources are rendered by stenograph")


def new_fake_mode() -> FakeTensorMode:
    # ops whose output size depends on tensor data (nonzero, x[mask]) raise
    # DynamicOutputShapeException unless config.capture_dynamic_output_shape_ops: a graph break
    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops)
    return FakeTensorMode(allow_non_fake_inputs=False, shape_env=shape_env)


def fakeify(
    mode: FakeTensorMode,
    tensor: torch.Tensor,
    source: Source,
    dynamic_dims: list[bool] | None = None,
) -> torch.Tensor:
    """The fake twin of a real input tensor; `dynamic_dims[i]` makes dimension i symbolic."""
    if not dynamic_dims or not any(dynamic_dims):
        return mode.from_tensor(tensor, static_shapes=True)
    context = StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC if d else DimDynamic.STATIC for d in dynamic_dims],
    )
    return mode.from_tensor(tensor, source=ShapeSource(source), symbolic_context=context)


def symbolic_number(mode: FakeTensorMode, value: int | float, source: Source) -> torch.SymInt | torch.SymFloat:
    """A symbolic Python int or float input (an argument that changed between calls)."""
    shape_env = mode.shape_env
    assert shape_env is not None
    wrapped = ShapeSource(source)
    if type(value) is int:
        return shape_env.create_unspecified_symint_and_symbol(value, wrapped, DimDynamic.DYNAMIC)
    symbol = shape_env.create_unspecified_symbol(value, wrapped, DimDynamic.DYNAMIC)
    return shape_env.create_symfloatnode(symbol, hint=value, source=wrapped)


def is_symbolic(value: Any) -> bool:
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def has_symbols(tensor: torch.Tensor) -> bool:
    return any(is_symbolic(s) for s in tensor.shape) or any(is_symbolic(s) for s in tensor.stride())
