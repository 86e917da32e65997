"""`Sequential` and `ModuleList` slicing and negative indexing: a slice is a new container of the
same members (one graph); calling a `Sequential` slice runs its members; a slice that escapes is
built for real as eager builds it."""

from __future__ import annotations

import torch
from torch import nn

import stenograph

from ._support import check, t


def _seq():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3), nn.Tanh())


def _mlist():
    torch.manual_seed(1)
    return nn.ModuleList([nn.Linear(3, 3) for _ in range(4)])


def test_sequential_slices_and_negative_indices(cnt):
    def fn(seq, x):
        head = seq[:2]
        return head(x) + seq[-1](x) + seq[1:][-2](x) + seq[::2][1](x), len(seq[1:3])

    check(fn, lambda i: (_seq(), t(2, 3, seed=i)), cnt, grads=True)


def test_modulelist_slices_and_negative_indices(cnt):
    def fn(layers, x):
        y = layers[-1](x)
        for m in layers[::-1]:
            y = m(y)
        for m in layers[1:3]:
            y = y + m(x)
        return y + layers[-2:][0](x) + layers[-3:][-1](x), len(layers[:-1])

    check(fn, lambda i: (_mlist(), t(2, 3, seed=i)), cnt, grads=True)


def test_a_returned_slice_is_a_real_container_of_the_same_members(cnt):
    def fn(seq, layers, x):
        return seq[1:3], layers[1:], seq[0](x)

    compiled = stenograph.compile(fn, backend=cnt)
    seq, layers = _seq(), _mlist()
    for _ in range(2):
        part, rest, _ = compiled(seq, layers, t(3))
        expected_part, expected_rest, _ = fn(seq, layers, t(3))
        assert type(part) is nn.Sequential and list(part._modules.items()) == list(expected_part._modules.items())
        assert type(rest) is nn.ModuleList and list(rest._modules.items()) == list(expected_rest._modules.items())
    assert cnt.frame_count == 1


def test_a_new_member_recompiles(cnt):
    def fn(seq, x):
        return seq[1:](x)

    compiled = stenograph.compile(fn, backend=cnt)
    seq = _seq()
    x = t(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(seq, x), fn(seq, x))
    assert cnt.frame_count == 1
    seq.append(nn.Sigmoid())
    torch.testing.assert_close(compiled(seq, x), fn(seq, x))
    assert cnt.frame_count == 2


def test_index_out_of_range_is_the_programs_error(cnt):
    def fn(seq, x):
        try:
            return seq[7](x)
        except IndexError as e:
            return x + 1, str(e)

    check(fn, lambda i: (_seq(), t(3, seed=i)), cnt)
