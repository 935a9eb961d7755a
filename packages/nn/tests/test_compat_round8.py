"""Compatibility fixes found by the eighth set of compat programs (nn side): complex-valued
convolutions, as complex-valued networks build them (F.conv1d/2d/3d, F.conv_transpose*d and
nn.Conv*d(dtype=torch.cfloat)), with their gradients; and the LRScheduler flag
``_get_lr_called_within_step`` that custom schedulers copied from PyTorch's read. NumPy
references always; torch's results too where torch is installed."""

from __future__ import annotations

import math
import warnings

import ember
import ember.nn as nn
import ember.nn.functional as F
import numpy as np
import pytest

rng = np.random.default_rng(0)


def _complex(*shape: int) -> np.ndarray:
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)


def _conv1d_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int,
                padding: int) -> np.ndarray:
    """A direct complex cross-correlation (N, C, L) * (O, C, K) -> (N, O, L')."""
    n, c, length = x.shape
    o, _, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    out_len = (length + 2 * padding - k) // stride + 1
    out = np.zeros((n, o, out_len), dtype=np.complex128)
    for i in range(out_len):
        win = xp[:, :, i * stride:i * stride + k]
        out[:, :, i] = np.einsum("nck,ock->no", win, w)
    return out if b is None else out + b[None, :, None]


def test_complex_conv1d_matches_a_direct_correlation():
    x, w, b = _complex(2, 3, 9), _complex(4, 3, 3), _complex(4)
    got = F.conv1d(ember.tensor(x), ember.tensor(w), ember.tensor(b), stride=2, padding=1)
    assert got.dtype == ember.complex64 and tuple(got.shape) == (2, 4, 5)
    np.testing.assert_allclose(got.numpy(), _conv1d_ref(x, w, b, 2, 1), rtol=1e-5, atol=1e-5)
    no_bias = F.conv1d(ember.tensor(x), ember.tensor(w))
    np.testing.assert_allclose(no_bias.numpy(), _conv1d_ref(x, w, None, 1, 0), rtol=1e-5,
                               atol=1e-5)


def test_complex_conv_gradients_are_the_conjugate_wirtinger_ones():
    # for L = sum |y|^2 with y = conv(x, w): dL/dx* = conv_transpose(y, w*) -- checked against
    # the same loss written with the real and imaginary parts as separate real convolutions
    x, w = _complex(1, 2, 7), _complex(3, 2, 3)
    xt = ember.tensor(x, requires_grad=True)
    wt = ember.tensor(w, requires_grad=True)
    (F.conv1d(xt, wt, padding=1).abs() ** 2).sum().backward()
    parts = [ember.tensor(a.astype(np.float32), requires_grad=True)
             for a in (x.real, x.imag, w.real, w.imag)]
    xr, xi, wr, wi = parts
    re = F.conv1d(xr, wr, padding=1) - F.conv1d(xi, wi, padding=1)
    im = F.conv1d(xr, wi, padding=1) + F.conv1d(xi, wr, padding=1)
    (re ** 2 + im ** 2).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy() + 1j * xi.grad.numpy(),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wt.grad.numpy(), wr.grad.numpy() + 1j * wi.grad.numpy(),
                               rtol=1e-5, atol=1e-5)


def test_complex_conv_modules_and_transposed_convs():
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular", dtype=ember.cfloat)
    assert conv.weight.dtype == ember.complex64 and conv.bias.dtype == ember.complex64
    assert bool((conv.weight.imag != 0).any())  # the init filled both parts
    y = conv(ember.tensor(_complex(1, 2, 5, 5)))
    assert y.dtype == ember.complex64 and tuple(y.shape) == (1, 3, 5, 5)
    x, w = _complex(1, 2, 4, 4), _complex(2, 3, 3, 3)
    t = F.conv_transpose2d(ember.tensor(x), ember.tensor(w), stride=2)
    parts = [F.conv_transpose2d(ember.tensor(a.astype(np.float32)),
                                ember.tensor(c.astype(np.float32)), stride=2).numpy()
             for a, c in ((x.real, w.real), (x.imag, w.imag), (x.real, w.imag),
                          (x.imag, w.real))]
    np.testing.assert_allclose(t.numpy(), (parts[0] - parts[1]) + 1j * (parts[2] + parts[3]),
                               rtol=1e-5, atol=1e-5)
    lin = nn.Conv1d(1, 2, 3, dtype=ember.cdouble)
    assert lin(ember.tensor(_complex(1, 1, 6).astype(np.complex128))).dtype == ember.complex128


def test_complex_conv_refuses_mixed_dtypes():
    x = ember.tensor(_complex(1, 2, 5))
    with pytest.raises(RuntimeError, match="same dtype"):
        F.conv1d(x, ember.tensor(rng.normal(size=(1, 2, 3)).astype(np.float32)))
    with pytest.raises(RuntimeError, match="same dtype"):
        F.conv1d(x, ember.tensor(_complex(1, 2, 3)), ember.zeros(1))
    # real convolutions are untouched
    real = F.conv1d(ember.ones(1, 1, 4), ember.ones(1, 1, 2))
    assert real.dtype == ember.float32 and real.tolist() == [[[2.0, 2.0, 2.0]]]


def test_complex_conv_matches_torch():
    torch = pytest.importorskip("torch")
    x, w, b = _complex(2, 3, 6, 6), _complex(4, 3, 3, 3), _complex(4)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, stride=(2, 1), padding=1, dilation=(1, 2))
    ey = F.conv2d(ex, ew, eb, stride=(2, 1), padding=1, dilation=(1, 2))
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    (ty.abs() ** 2).sum().backward()
    (ey.abs() ** 2).sum().backward()
    for e, t in ((ex, tx), (ew, tw), (eb, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-3)


# ---- LRScheduler._get_lr_called_within_step ----------------------------------------------------
class _WarmupCosine(ember.optim.lr_scheduler._LRScheduler):
    """A custom scheduler in the style repositories copy from PyTorch's own: get_lr() warns
    when it is called from outside step()."""

    def __init__(self, optimizer, warmup: int, total: int, last_epoch: int = -1) -> None:
        self.warmup, self.total = warmup, total
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning)
        e = self.last_epoch
        if e < self.warmup:
            return [b * (e + 1) / self.warmup for b in self.base_lrs]
        p = (e - self.warmup) / max(1, self.total - self.warmup)
        return [b * 0.5 * (1 + math.cos(math.pi * p)) for b in self.base_lrs]


def test_custom_scheduler_reads_get_lr_called_within_step():
    opt = ember.optim.SGD([nn.Parameter(ember.zeros(1))], lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sched = _WarmupCosine(opt, 3, 10)
        lrs = []
        for _ in range(5):
            opt.step()
            sched.step()
            lrs.append(round(sched.get_last_lr()[0], 6))
        assert not caught  # every get_lr() so far came from step()
        sched.get_lr()
        assert len(caught) == 1 and "get_last_lr()" in str(caught[0].message)
    assert lrs == [0.066667, 0.1, 0.1, 0.095048, 0.081174]
    assert sched._get_lr_called_within_step is False
    assert "_get_lr_called_within_step" in sched.state_dict()
    # a fresh scheduler reads the class default; the closed form (step(epoch)) sets it too
    sched2 = ember.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched2.step(1.5)
    assert sched2._get_lr_called_within_step is False


def test_scheduler_state_dict_keys_match_torch():
    torch = pytest.importorskip("torch")
    keys = []
    for lib in (torch, ember):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=0.1)
        sched = lib.optim.lr_scheduler.StepLR(opt, 2)
        opt.step()
        sched.step()
        keys.append(sorted(sched.state_dict()))
    assert keys[0] == keys[1]
