"""Modules on the meta device: built without memory, then made real with to_empty + load_state_dict
(the way large models are instantiated), and forward/backward on meta give the shapes."""

from __future__ import annotations

import ember
import pytest
from ember import nn


class TinyGPT(nn.Module):
    def __init__(self, vocab=11, d=8, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(
            [nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, batch_first=True) for _ in range(layers)]
        )
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        h = self.wte(idx)
        for b in self.blocks:
            h = b(h)
        return self.head(self.ln(h))


def test_build_on_meta_then_to_empty_and_load():
    ember.manual_seed(0)
    real = TinyGPT()
    with ember.device("meta"):
        m = TinyGPT()
    assert all(p.device.type == "meta" for p in m.parameters())
    assert all(b.device.type == "meta" for b in m.buffers())
    m.to_empty(device="cpu")
    assert all(p.device.type == "cpu" for p in m.parameters())
    m.load_state_dict(real.state_dict())
    idx = ember.randint(0, 11, (2, 5))
    assert ember.equal(m(idx), real(idx))


def test_forward_backward_shapes_on_meta():
    with ember.device("meta"):
        m = TinyGPT()
        idx = ember.zeros(2, 5, dtype=ember.int64)
    out = m(idx)
    assert out.device.type == "meta" and out.shape == (2, 5, 11)
    out.sum().backward()
    for p in m.parameters():
        assert p.grad is not None and p.grad.shape == p.shape and p.grad.device.type == "meta"


def test_meta_module_to_cpu_is_a_clear_error():
    m = nn.Linear(2, 3).to("meta")
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        m.to("cpu")


def test_to_empty_without_recursion():
    with ember.device("meta"):
        m = nn.Sequential(nn.Linear(2, 3))
    m.to_empty(device="cpu", recurse=False)  # Sequential has no tensors of its own
    assert m[0].weight.device.type == "meta"
    m.to_empty(device="cpu")
    assert m[0].weight.device.type == "cpu"
