"""torch.nn layers whose forward is ordinary Python with library internals (fast-path checks
walking `self.modules()`, `multi_head_attention_forward` returning `(output, None)`, RNNs keeping
weak references to their weights): each is captured as one graph with eager's results."""

import copy

import pytest
import torch
from torch import nn

import stenograph

LAYERS = {
    "encoder_layer_train": lambda: (
        nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0),
        (torch.randn(2, 5, 32),),
    ),
    "encoder_layer_eval": lambda: (
        nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval(),
        (torch.randn(2, 5, 32),),
    ),
    "decoder_layer": lambda: (
        nn.TransformerDecoderLayer(32, 4, 64, batch_first=True, dropout=0.0),
        (torch.randn(2, 5, 32), torch.randn(2, 6, 32)),
    ),
    "multihead_attention": lambda: (nn.MultiheadAttention(32, 4, batch_first=True), (torch.randn(2, 5, 32),) * 3),
    "lstm": lambda: (nn.LSTM(8, 16, batch_first=True), (torch.randn(2, 5, 8),)),
    "gru": lambda: (nn.GRU(8, 16), (torch.randn(5, 2, 8),)),
    "embedding_layernorm": lambda: (
        nn.Sequential(nn.Embedding(100, 16), nn.LayerNorm(16)),
        (torch.randint(0, 100, (2, 7)),),
    ),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_is_one_graph_with_eager_results_and_grads(cnt, name):
    model, args = LAYERS[name]()
    reference = copy.deepcopy(model)
    compiled = stenograph.compile(model, backend=cnt)
    for _ in range(2):
        out, expected = compiled(*args), reference(*args)
        torch.testing.assert_close(out, expected)
    first = out[0] if isinstance(out, tuple) else out
    first_expected = expected[0] if isinstance(expected, tuple) else expected
    if first.is_floating_point():
        first.sum().backward()
        first_expected.sum().backward()
        for (pname, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
            if q.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, msg=lambda m, pname=pname: f"{pname}: {m}")
    assert cnt.frame_count == 1


def test_module_tree_walks_are_traced(cnt):
    """modules()/named_parameters()/buffers() inside forward: one graph, guarded by the tree."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))

        def forward(self, x):
            n = sum(1 for _ in self.modules())
            total = sum(p.sum() for _, p in self.named_parameters())
            bufs = len(list(self.buffers()))
            return self.b(self.a(x)) * n + total + bufs

    net = Net()
    reference = copy.deepcopy(net)
    x = torch.randn(3, 4)
    torch.testing.assert_close(stenograph.compile(net, backend=cnt)(x), reference(x))
    assert cnt.frame_count == 1
