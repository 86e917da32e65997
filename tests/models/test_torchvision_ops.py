"""The Python nms the zoo supplies where torchvision's C++ operators cannot load: it keeps the
highest-scoring box of each overlapping group, as torchvision's kernel does."""

import torch

from .torchvision_ops import _nms


def test_nms_keeps_the_best_box_of_each_overlapping_group():
    boxes = torch.tensor(
        [
            [0.0, 0.0, 10.0, 10.0],
            [1.0, 1.0, 11.0, 11.0],  # overlaps the first (IoU 0.68)
            [20.0, 20.0, 30.0, 30.0],
            [0.0, 0.0, 10.0, 5.0],  # overlaps the second (IoU 0.32)
        ]
    )
    scores = torch.tensor([0.5, 0.9, 0.3, 0.4])
    assert _nms(boxes, scores, 0.6).tolist() == [1, 3, 2]
    assert _nms(boxes, scores, 0.3).tolist() == [1, 2]
    assert _nms(boxes[:0], scores[:0], 0.5).tolist() == []
