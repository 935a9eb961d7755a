"""The fused multi-tensor SGD / Adam / AdamW steps equal the per-parameter reference path and
PyTorch's trajectories."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn, optim
from nn_helpers import to_np
from test_optim import _ember_loss, _ember_params, _problem

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.2, betas=(0.6, 0.9))),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


def _run(name, kwargs, p, steps=15, **mode):
    params = _ember_params(p)
    opt = getattr(optim, name)(params, **kwargs, **mode)
    for _ in range(steps):
        opt.zero_grad()
        _ember_loss(params, p).backward()
        opt.step()
    return params, opt


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_fused_equals_per_parameter(name, kwargs, dtype, monkeypatch):
    p = _problem(dtype)
    calls = []
    kernel = "_fused_sgd_" if name == "SGD" else "_fused_adam_"
    real = getattr(ember._C, kernel)
    monkeypatch.setattr(ember._C, kernel, lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    fused, opt_f = _run(name, kwargs, p, fused=True)
    assert calls, "fused=True did not reach the fused kernel"
    default, _ = _run(name, kwargs, p)
    ref, opt_r = _run(name, kwargs, p, foreach=False, fused=False)
    tol = dict(rtol=1e-13, atol=1e-14) if dtype == "float64" else dict(rtol=1e-5, atol=1e-6)
    for a, b, c in zip(fused, default, ref):
        np.testing.assert_allclose(to_np(a), to_np(c), **tol)
        np.testing.assert_allclose(to_np(b), to_np(c), **tol)
    # the state the two paths leave behind agrees too (resume works across paths)
    for pa, pb in zip(fused, ref):
        for k, v in opt_r.state[pb].items():
            np.testing.assert_allclose(to_np(opt_f.state[pa][k]), to_np(v), **tol)


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_fused_matches_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    p = _problem("float64")
    params, _ = _run(name, kwargs, p, fused=True)
    tp = [torch.from_numpy(p["w"].copy()).requires_grad_(), torch.from_numpy(p["b"].copy()).requires_grad_()]
    topt = getattr(torch.optim, name)(tp, **kwargs)
    x, y = torch.from_numpy(p["x"]), torch.from_numpy(p["y"])
    for _ in range(15):
        topt.zero_grad()
        ((x @ tp[0].t() + tp[1] - y) ** 2).mean().backward()
        topt.step()
    for a, b in zip(params, tp):
        np.testing.assert_allclose(to_np(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_fused_sgd_one_step():
    w = nn.Parameter(ember.zeros(3, dtype=ember.float64))
    opt = optim.SGD([w], lr=0.1, fused=True)
    w.grad = ember.ones(3, dtype=ember.float64)
    opt.step()
    assert w.tolist() == [-0.1, -0.1, -0.1]


@pytest.mark.parametrize("name,kwargs", [CASES[1], CASES[4]], ids=["SGD", "Adam"])
def test_fused_mixed_dtypes_in_one_group(name, kwargs):
    rng = np.random.default_rng(3)
    data = [rng.standard_normal(6).astype("float32"), rng.standard_normal(4)]

    def run(**mode):
        ps = [nn.Parameter(ember.from_numpy(d.copy())) for d in data]
        opt = getattr(optim, name)(ps, **kwargs, **mode)
        for k in range(4):
            for p in ps:
                p.grad = (p * p).sub(0.1 * k)
            opt.step()
        return ps

    fused, ref = run(fused=True), run(foreach=False, fused=False)
    for a, b in zip(fused, ref):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-6, atol=1e-7)
