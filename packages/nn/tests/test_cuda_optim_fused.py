"""fused=True / foreach=True: the argument rules (on the CPU), and SGD / Adam / AdamW on CUDA
parameters going to the CUDA fused kernels, matching the CPU fused path (skipped without a CUDA
device)."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn, optim

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")

CASES = [
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, weight_decay=0.2, betas=(0.6, 0.9))),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
def test_fused_and_foreach_together_is_refused(name):
    p = [nn.Parameter(ember.ones(2))]
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        getattr(optim, name)(p, lr=0.1, fused=True, foreach=True)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_fused_needs_float32_or_float64(name):
    p = nn.Parameter(ember.ones(2, dtype=ember.bfloat16))
    p.grad = ember.ones(2, dtype=ember.bfloat16)
    opt = getattr(optim, name)([p], lr=0.1, fused=True)
    with pytest.raises(RuntimeError, match="float32/float64 parameters on the CPU or a CUDA"):
        opt.step()
    # without fused=True the same parameter takes the per-parameter path
    getattr(optim, name)([p], lr=0.1).step()


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_foreach_true_takes_the_fused_kernels_on_cpu(name, kwargs, monkeypatch):
    kernel = "_fused_sgd_" if name == "SGD" else "_fused_adam_"
    calls = []
    real = getattr(ember._C, kernel)
    monkeypatch.setattr(ember._C, kernel, lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    p = nn.Parameter(ember.ones(3))
    p.grad = ember.full((3,), 0.5)
    getattr(optim, name)([p], **kwargs, foreach=True).step()
    assert calls


def _params(dev, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(5, 3), (40000,), (3, 4)]
    out = []
    for i, s in enumerate(shapes):
        t = ember.tensor(rng.standard_normal(s).astype(np.float32))
        if dev != "cpu":
            t = t.to(dev)
        out.append(nn.Parameter(t))
    return out


def _train(name, kwargs, dev, steps=4, **mode):
    ps = _params(dev)
    opt = getattr(optim, name)(ps, **kwargs, **mode)
    for k in range(steps):
        for i, p in enumerate(ps):
            p.grad = (p.detach() * (0.5 + i) - 0.1 * k).contiguous()
        opt.step()
    return ps, opt


@needs_cuda
@pytest.mark.parametrize("mode", [dict(fused=True), dict(foreach=True), {}])
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_cuda_params_take_the_cuda_fused_kernels(name, kwargs, mode, monkeypatch):
    kernel = "_fused_sgd_" if name == "SGD" else "_fused_adam_"
    devices = []
    real = getattr(ember._C, kernel)
    monkeypatch.setattr(ember._C, kernel, lambda *a, **k: (devices.append(a[0][0].device.type),
                                                           real(*a, **k))[1])
    g, gopt = _train(name, kwargs, "cuda", **mode)
    assert devices and set(devices) == {"cuda"}
    c, copt = _train(name, kwargs, "cpu", fused=True)
    for a, b in zip(g, c):
        assert a.device.type == "cuda"
        np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    for pa, pb in zip(g, c):
        for k, v in copt.state[pb].items():
            np.testing.assert_allclose(np.asarray(gopt.state[pa][k].detach().cpu().numpy()),
                                       np.asarray(v.detach().numpy()), rtol=1e-5, atol=1e-6)


@needs_cuda
def test_one_group_on_two_devices_steps_each_on_its_own():
    cpu = nn.Parameter(ember.ones(3))
    gpu = nn.Parameter(ember.ones(3, device="cuda"))
    opt = optim.Adam([cpu, gpu], lr=0.1)
    cpu.grad = ember.full((3,), 0.5)
    gpu.grad = ember.full((3,), 0.5, device="cuda")
    opt.step()
    np.testing.assert_allclose(gpu.detach().cpu().numpy(), cpu.detach().numpy(), rtol=1e-6)


@needs_cuda
@pytest.mark.parametrize("name,kwargs", [CASES[0], CASES[2]], ids=["SGD", "Adam"])
def test_checkpoint_loaded_on_the_cpu_resumes_on_the_gpu(name, kwargs):
    """ember.save of a CUDA run, ember.load(map_location="cpu"), then load_state_dict into a
    CUDA model and optimizer: the state moves to the parameters' device and the run continues
    exactly as the uninterrupted one."""
    import io

    ps, opt = _train(name, kwargs, "cuda", steps=3)
    buf = io.BytesIO()
    ember.save({"params": [p.detach() for p in ps], "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ck = ember.load(buf, map_location="cpu")
    assert all(t.device.type == "cpu" for t in ck["params"])
    qs = [nn.Parameter(t.to("cuda")) for t in ck["params"]]
    opt2 = getattr(optim, name)(qs, **kwargs)
    opt2.load_state_dict(ck["opt"])
    for q in qs:
        for k, v in opt2.state[q].items():
            if k != "step":
                assert v.device.type == "cuda", k
    for k in range(3, 6):
        for i, (p, q) in enumerate(zip(ps, qs)):
            p.grad = (p.detach() * (0.5 + i) - 0.1 * k).contiguous()
            q.grad = (q.detach() * (0.5 + i) - 0.1 * k).contiguous()
        opt.step()
        opt2.step()
    for p, q in zip(ps, qs):
        np.testing.assert_array_equal(p.detach().cpu().numpy(), q.detach().cpu().numpy())
