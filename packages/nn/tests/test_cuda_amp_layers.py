"""Recurrent layers and cells under autocast with PyTorch's CUDA lists: whole layers (GRU
included: cuDNN's RNN) and the LSTM/GRU/RNN cells run wholly in the autocast dtype. Driven on the
CPU by giving it the CUDA lists, and on CUDA tensors against the CPU (skipped without a GPU)."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn
from ember.amp import autocast_mode as am

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")

LAYERS = [("LSTM", (5, 3, 4)), ("GRU", (5, 3, 4)), ("RNN", (5, 3, 4)),
          ("LSTMCell", (3, 4)), ("GRUCell", (3, 4)), ("RNNCell", (3, 4))]


def _outputs(out):
    if not isinstance(out, tuple):
        return [out]
    first, rest = out
    if isinstance(first, ember.Tensor) and isinstance(rest, ember.Tensor) and first.ndim == 2 \
            and rest.ndim == 2:
        return [first, rest]  # LSTMCell: (h, c)
    return [first, *(list(rest) if isinstance(rest, tuple) else [rest])]


def _run(name, shape, dev, low):
    ember.manual_seed(0)
    m = getattr(nn, name)(4, 6)
    x = ember.randn(*shape)
    ref = _outputs(m(x))
    m = m.to(dev)
    xd = x.to(dev).requires_grad_()
    with ember.autocast(dev, dtype=low):
        got = _outputs(m(xd))
    return m, xd, ref, got


@pytest.mark.parametrize("name,shape", LAYERS, ids=[n for n, _ in LAYERS])
def test_cuda_lists_on_cpu_tensors(name, shape, monkeypatch):
    monkeypatch.setitem(am._POLICY, "cpu", am._CUDA_POLICY)
    m, x, ref, got = _run(name, shape, "cpu", ember.bfloat16)
    for r, g in zip(ref, got):
        assert g.dtype is ember.bfloat16, name
        np.testing.assert_allclose(g.detach().float().numpy(), r.detach().numpy(), atol=3e-2)
    got[0].float().sum().backward()
    assert x.grad.dtype is ember.float32
    assert all(p.grad is not None and p.grad.dtype is ember.float32 for p in m.parameters())


@pytest.mark.parametrize("name", ["GRU", "GRUCell", "LSTMCell"])
def test_cpu_lists_unchanged(name):
    """On the CPU, PyTorch keeps GRU and the LSTM/GRU cells' outputs in float32."""
    shape = dict(LAYERS)[name]
    _, _, _, got = _run(name, shape, "cpu", ember.bfloat16)
    assert all(g.dtype is ember.float32 for g in got)


@needs_cuda
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,shape", LAYERS, ids=[n for n, _ in LAYERS])
def test_cuda_layers_run_in_the_autocast_dtype(name, shape, dtype):
    low = getattr(ember, dtype)
    m, x, ref, got = _run(name, shape, "cuda", low)
    for r, g in zip(ref, got):
        assert g.dtype is low and g.device.type == "cuda", name
        np.testing.assert_allclose(g.detach().float().cpu().numpy(), r.detach().numpy(),
                                   atol=3e-2 if dtype == "float16" else 6e-2)
    got[0].float().sum().backward()
    assert x.grad.dtype is ember.float32
    assert all(p.grad is not None and p.grad.dtype is ember.float32 for p in m.parameters())
