"""F.interpolate and F.pad over the C++ upsample_* / pad kernels: every mode against PyTorch
(values and gradients), scale_factor handed to the kernels vs recomputed sizes, bicubic,
non-contiguous and float32 inputs, and the argument errors."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from nn_helpers import assert_close, to_ember, to_torch

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _run(fn, lib, x, g):
    t = (to_ember if lib is ember else to_torch)(x, requires_grad=True)
    y = fn(t)
    y.backward((to_ember if lib is ember else to_torch)(g.astype(x.dtype)))
    return y, t.grad


def _check(fe, ft, x, tol=1e-10):
    ye = fe(to_ember(x))
    g = np.random.default_rng(1).standard_normal(tuple(ye.shape))
    ye, ge = _run(fe, ember, x, g)
    yt, gt = _run(ft, torch, x, g)
    assert tuple(ye.shape) == tuple(yt.shape)
    assert_close(ye, yt, rtol=tol, atol=tol)
    assert_close(ge, gt, rtol=tol, atol=tol)


MODES = [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 1),
         ("nearest-exact", 2), ("nearest-exact", 3), ("linear", 1), ("bilinear", 2),
         ("bicubic", 2), ("trilinear", 3)]
SHAPES = {1: (2, 3, 7), 2: (2, 3, 5, 6), 3: (1, 2, 3, 4, 5)}


@pytest.mark.parametrize("mode,k", MODES)
@pytest.mark.parametrize("kw", [{"scale_factor": 2}, {"scale_factor": 1.7},
                                {"scale_factor": 0.6}, {"scale_factor": 2.3,
                                                        "recompute_scale_factor": True},
                                {"size": 5}, {"size": 2}])
def test_interpolate_modes_match_torch(mode, k, kw):
    x = np.random.default_rng(0).standard_normal(SHAPES[k])
    acs = [None] if mode.startswith("nearest") else [False, True]
    for ac in acs:
        _check(lambda t, lib=F, ac=ac: lib.interpolate(t, mode=mode, align_corners=ac, **kw),
               lambda t, ac=ac: TF.interpolate(t, mode=mode, align_corners=ac, **kw), x)


def test_interpolate_float32_noncontiguous():
    x = np.random.default_rng(2).standard_normal((2, 6, 5, 3)).astype(np.float32)
    ye = F.interpolate(to_ember(x).permute(0, 3, 1, 2), scale_factor=(1.5, 2.5), mode="bicubic")
    yt = TF.interpolate(to_torch(x).permute(0, 3, 1, 2), scale_factor=(1.5, 2.5), mode="bicubic")
    assert ye.dtype == ember.float32
    assert_close(ye, yt, rtol=1e-5, atol=1e-5)


def test_interpolate_argument_errors():
    x = ember.ones(1, 1, 4, 4)
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=8, recompute_scale_factor=True)
    with pytest.raises(NotImplementedError, match="expects 4-D input"):  # torch's class
        F.interpolate(ember.ones(1, 1, 4), size=8, mode="bicubic")
    with pytest.raises(NotImplementedError, match="1-3 spatial dims"):
        F.interpolate(ember.ones(1, 1, 2, 2, 2, 2), size=3)
    with pytest.raises(ValueError, match="anti-alias option is restricted"):
        F.interpolate(x, size=8, mode="nearest", antialias=True)  # bilinear/bicubic only


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes_match_torch(mode):
    for shape, pad in (((2, 3, 7), (2, 3)), ((2, 3, 5, 6), (1, 2, -1, 3)),
                       ((1, 2, 3, 4, 5), (1, 0, 2, 1, 1, 2))):
        x = np.random.default_rng(3).standard_normal(shape)
        _check(lambda t: F.pad(t, pad, mode=mode), lambda t: TF.pad(t, pad, mode=mode), x)
    x = np.random.default_rng(4).standard_normal((2, 3, 5))
    _check(lambda t: F.pad(t, (2, -1, 1, 1), value=2.5), lambda t: TF.pad(t, (2, -1, 1, 1),
                                                                          value=2.5), x)
