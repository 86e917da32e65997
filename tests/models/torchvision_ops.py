"""Import torchvision where its C++ operators cannot load (a CUDA wheel beside a CPU-only torch,
as on this project's machines): `torchvision::nms` is defined here with a Python kernel, so that
the import and the detection models work; elsewhere torchvision is imported as it is.

Without its operators torchvision's own `_meta_registrations` fails on import (it registers a
fake kernel for `nms`, which does not exist), `nms` refuses to run, and `roi_align` already falls
back to its Python implementation.
"""

from __future__ import annotations

import sys
from types import ModuleType

import torch


def _nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression: indices of the kept boxes, highest score first."""
    order = scores.argsort(descending=True)
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    keep = []
    while order.numel():
        best, rest = order[0], order[1:]
        keep.append(best)
        top_left = torch.maximum(boxes[best, :2], boxes[rest, :2])
        bottom_right = torch.minimum(boxes[best, 2:], boxes[rest, 2:])
        inter = (bottom_right - top_left).clamp(min=0).prod(dim=1)
        iou = inter / (areas[best] + areas[rest] - inter)
        order = rest[iou <= iou_threshold]
    return torch.stack(keep) if keep else boxes.new_zeros(0, dtype=torch.long)


def _define_nms() -> None:
    for name in ("nms", "qnms"):
        torch.library.define(f"torchvision::{name}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        torch.library.impl(f"torchvision::{name}", "CPU")(_nms)


def load() -> ModuleType | None:
    """torchvision, its missing operators supplied; None where it is not installed."""
    try:
        import torchvision
    except ImportError:
        return None
    except RuntimeError:  # its C++ operators did not load: start again with nms defined
        for module in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[module]
        _define_nms()
        import torchvision
    if not torchvision.extension._has_ops():
        # nms and its check were imported by name into torchvision.ops.boxes
        torchvision.ops.boxes._assert_has_ops = lambda: None
    return torchvision
