"""Fake tensors: shapes, dtypes, devices and strides without running kernels (DESIGN decision 6).

One `FakeTensorMode` per traced frame. Inputs are converted with static shapes for now; symbolic
sizes come with the ShapeEnv (dynamic shapes).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)

DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException)


def new_fake_mode() -> FakeTensorMode:
    return FakeTensorMode(allow_non_fake_inputs=False)


def fakeify(mode: FakeTensorMode, tensor: torch.Tensor) -> torch.Tensor:
    """The fake twin of a real input tensor (Parameters stay Parameters)."""
    return mode.from_tensor(tensor, static_shapes=True)


def is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(value, FakeTensor)
