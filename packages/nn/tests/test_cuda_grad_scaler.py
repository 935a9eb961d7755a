"""ember.amp.GradScaler on its engine ops (the fused inf check + unscale, the scale update):
trajectories, skipped steps, growth and backoff, unscale_ / clipping, new_scale, state dicts and
pickling against torch.amp.GradScaler on the CPU; on a GPU, a CUDA scaler against a CPU one
(skipped without a CUDA device)."""

from __future__ import annotations

import copy
import math
import pickle

import ember
import numpy as np
import pytest
from ember import nn, optim

torch = pytest.importorskip("torch")
needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")


def _run(lib, mults, dev="cpu", scaler_dev="cpu", opt="SGD", **kw):
    """Two param groups (float32 and float64 parameters) driven through a GradScaler; mults[k]
    multiplies the loss's first term at step k (inf/nan force skipped steps). Returns the scales,
    the growth trackers, the parameters after each step and the final state dict."""
    w = lib.nn.Parameter(lib.tensor([1.0, -2.0, 0.5], device=dev))
    d = lib.nn.Parameter(lib.tensor([[0.25, 4.0]], dtype=lib.float64, device=dev))
    o = getattr(lib.optim, opt)([{"params": [w]}, {"params": [d], "lr": 0.01}], lr=0.1)
    scaler = lib.amp.GradScaler(scaler_dev, **kw)
    scales, trackers, params = [], [], []
    for m in mults:
        o.zero_grad()
        loss = (w * lib.tensor([m, 1.0, 2.0], device=dev)).sum() + (d * d).sum().float()
        scaler.scale(loss).backward()
        scaler.step(o)
        scaler.update()
        scales.append(scaler.get_scale())
        trackers.append(scaler.state_dict()["_growth_tracker"])
        params.append(w.detach().cpu().tolist() + d.detach().cpu().flatten().tolist())
    return scales, trackers, params, scaler.state_dict()


STEPS = [1.0, 2.0, math.inf, 0.5, math.nan, 1.0, 1.0, 3.0, -math.inf, 1.0, 1.0]


@pytest.mark.parametrize("kw", [{}, {"init_scale": 8.0, "growth_interval": 2},
                                {"init_scale": 2.0**127, "growth_interval": 1},
                                {"init_scale": 1000.0, "growth_factor": 3.0,
                                 "backoff_factor": 0.3, "growth_interval": 3}])
@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_trajectory_matches_torch(kw, opt):
    es, et, ep, esd = _run(ember, STEPS, opt=opt, **kw)
    ts, tt, tp, tsd = _run(torch, STEPS, opt=opt, **kw)
    assert es == ts and et == tt
    np.testing.assert_allclose(np.array(ep), np.array(tp), rtol=1e-6, atol=1e-7)
    assert esd == tsd


def test_skipped_step_leaves_params_and_backs_off():
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    opt = optim.SGD([p], lr=1.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=16.0, growth_interval=1)
    scaler.scale((p * ember.tensor([math.inf, 1.0])).sum()).backward()
    assert scaler.step(opt) is None
    assert p.tolist() == [1.0, 2.0]
    scaler.update()
    assert scaler.get_scale() == 8.0 and scaler.state_dict()["_growth_tracker"] == 0


def test_unscale_then_clip_then_step():
    p = nn.Parameter(ember.tensor([1.0, 2.0]))
    opt = optim.SGD([p], lr=1.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale((p * 3).sum()).backward()
    assert p.grad.tolist() == [12.0, 12.0]
    scaler.unscale_(opt)
    assert p.grad.tolist() == [3.0, 3.0]
    nn.utils.clip_grad_norm_([p], 1.0)
    scaler.step(opt)  # does not unscale again
    np.testing.assert_allclose(p.detach().numpy(), [1 - 0.5**0.5, 2 - 0.5**0.5], rtol=1e-5)
    scaler.update()
    assert scaler.get_scale() == 4.0


def test_two_optimizers_share_one_update():
    a, b = nn.Parameter(ember.ones(2)), nn.Parameter(ember.ones(2))
    oa, ob = optim.SGD([a], lr=1.0), optim.SGD([b], lr=1.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=2.0)
    loss = (a * ember.tensor([math.nan, 1.0])).sum() + b.sum()
    scaler.scale(loss).backward()
    scaler.step(oa)
    scaler.step(ob)
    assert a.tolist() == [1.0, 1.0] and b.tolist() == [0.0, 0.0]  # only oa saw the nan
    scaler.update()
    assert scaler.get_scale() == 1.0  # backed off once for the iteration


def test_scale_outputs_keeps_dtypes_and_structure():
    scaler = ember.amp.GradScaler("cpu", init_scale=8.0)
    h = ember.ones(2, dtype=ember.bfloat16)
    out = scaler.scale({"a": [h, ember.ones(1)], "b": (ember.full((1,), 2.0),)})
    assert out["a"][0].dtype is ember.bfloat16 and out["a"][0].tolist() == [8.0, 8.0]
    assert out["a"][1].tolist() == [8.0] and out["b"][0].tolist() == [16.0]
    with pytest.raises(ValueError, match="must be a Tensor"):
        scaler.scale(3.0)


def test_new_scale_and_errors():
    p = nn.Parameter(ember.ones(2))
    opt = optim.SGD([p], lr=0.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0)
    assert scaler.get_scale() == 4.0  # before the first scale(): init_scale
    with pytest.raises(RuntimeError, match="not initialized"):
        scaler.unscale_(opt)
    scaler.scale(p.sum()).backward()
    scaler.step(opt)
    scaler.update(64.0)
    assert scaler.get_scale() == 64.0
    scaler.update(ember.tensor([0.5]))
    assert scaler.get_scale() == 0.5
    with pytest.raises(ValueError, match="one-element float32"):
        scaler.update(ember.ones(2))
    with pytest.raises(ValueError, match="one-element float32"):
        scaler.update(ember.ones(1, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="no inf checks"):
        scaler.update()
    # an optimizer without gradients records no inf check
    empty = optim.SGD([nn.Parameter(ember.ones(1))], lr=0.1)
    with pytest.raises(RuntimeError, match="no inf checks"):
        scaler.step(empty)
    q = nn.Parameter(ember.ones(1, dtype=ember.float16))
    scaler.scale(q.float().sum()).backward()
    with pytest.raises(ValueError, match="float16 gradients"):
        scaler.unscale_(optim.SGD([q], lr=0.1))
    for kw in ({"growth_factor": 1.0}, {"backoff_factor": 1.0}, {"growth_interval": 0}):
        with pytest.raises(ValueError):
            ember.amp.GradScaler("cpu", **kw)


def test_state_dict_round_trip_and_pickle():
    _, _, _, sd = _run(ember, [1.0, math.inf, 1.0], init_scale=32.0, growth_interval=5)
    assert sd == {"scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 5, "_growth_tracker": 1}
    # into a fresh scaler (before its first scale()) and one already in use
    fresh = ember.amp.GradScaler("cpu")
    fresh.load_state_dict(sd)
    assert fresh.state_dict() == sd
    used = ember.amp.GradScaler("cpu")
    used.scale(ember.ones(1))
    used.load_state_dict(sd)
    assert used.state_dict() == sd and used.scale(ember.ones(1)).item() == 16.0
    # the tracker carries on from the loaded count
    p = nn.Parameter(ember.ones(1))
    opt = optim.SGD([p], lr=0.1)
    for _ in range(4):
        fresh.scale(p.sum()).backward()
        fresh.step(opt)
        fresh.update()
    assert fresh.get_scale() == 32.0 and fresh.state_dict()["_growth_tracker"] == 0
    # torch reads ember's state dict and the other way round
    t = torch.amp.GradScaler("cpu")
    t.load_state_dict(sd)
    assert t.state_dict() == sd
    clone = pickle.loads(pickle.dumps(fresh))
    assert clone.state_dict() == fresh.state_dict()
    assert copy.deepcopy(fresh).get_scale() == 32.0
    with pytest.raises(RuntimeError, match="empty"):
        ember.amp.GradScaler("cpu").load_state_dict({})


def test_disabled_is_a_pass_through():
    p = nn.Parameter(ember.tensor([1.0]))
    opt = optim.SGD([p], lr=1.0)
    scaler = ember.amp.GradScaler("cpu", enabled=False)
    loss = (p * 2).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert p.tolist() == [-1.0] and scaler.get_scale() == 1.0 and scaler.state_dict() == {}


def test_unscale_uses_the_fused_engine_op(monkeypatch):
    calls = []
    real = ember._C._amp_foreach_non_finite_check_and_unscale_
    monkeypatch.setattr(ember._C, "_amp_foreach_non_finite_check_and_unscale_",
                        lambda g, f, i: (calls.append([t.dtype for t in g]), real(g, f, i))[1])
    ps = [nn.Parameter(ember.ones(2)), nn.Parameter(ember.ones(3)),
          nn.Parameter(ember.ones(2, dtype=ember.float64))]
    opt = optim.SGD(ps, lr=0.1)
    scaler = ember.amp.GradScaler("cpu")
    scaler.scale(sum(p.sum().float() for p in ps)).backward()
    scaler.unscale_(opt)
    # one call per dtype, each over all its gradients
    assert sorted(map(str, calls)) == sorted(map(str, [[ember.float32] * 2, [ember.float64]]))


# ---- on a GPU ------------------------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_cuda_scaler_matches_cpu(opt):
    kw = {"init_scale": 8.0, "growth_interval": 2}
    gs, gt, gp, gsd = _run(ember, STEPS, dev="cuda", scaler_dev="cuda", opt=opt, **kw)
    cs, ct, cp, csd = _run(ember, STEPS, opt=opt, **kw)
    assert gs == cs and gt == ct and gsd == csd
    np.testing.assert_allclose(np.array(gp), np.array(cp), rtol=1e-6, atol=1e-7)


@needs_cuda
def test_cuda_scaler_state_lives_on_the_device_and_autocast_step():
    ember.manual_seed(0)
    lin = nn.Linear(8, 4).to("cuda")
    opt = optim.SGD(lin.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cuda", init_scale=1024.0)
    x = ember.randn(16, 8, device="cuda")
    with ember.autocast("cuda", dtype=ember.float16):
        loss = lin(x).float().pow(2).mean()
    scaled = scaler.scale(loss)
    assert scaled.device.type == "cuda" and scaler._scale.device.type == "cuda"
    assert scaler._growth_tracker.dtype is ember.int32
    scaled.backward()
    before = lin.weight.detach().cpu().clone()
    scaler.step(opt)
    scaler.update()
    assert not ember.equal(before, lin.weight.detach().cpu())
    assert scaler.get_scale() == 1024.0


@needs_cuda
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_amp_training_loop(dtype):
    """The usual recipe on a small conv net (conv, batch norm, relu, linear, cross-entropy):
    autocast + GradScaler + fused Adam + unscale_ and clipping; the loss goes down and the
    parameters stay float32 and finite."""
    low = getattr(ember, dtype)
    ember.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Flatten(), nn.Linear(8 * 6 * 6, 5)).to("cuda")
    opt = optim.Adam(model.parameters(), lr=1e-2, fused=True)
    scaler = ember.amp.GradScaler("cuda", init_scale=2.0**10)
    x = ember.randn(16, 3, 6, 6, device="cuda")
    y = ember.randint(0, 5, (16,), device="cuda")
    losses = []
    for _ in range(15):
        opt.zero_grad()
        with ember.autocast("cuda", dtype=low):
            h = model[1](model[0](x))
            assert h.dtype is low  # batch norm keeps its input's dtype, as in PyTorch
            out = model(x)
            assert out.dtype is low
            loss = nn.functional.cross_entropy(out, y)
            assert loss.dtype is ember.float32
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.8, losses
    for p in model.parameters():
        assert p.dtype is ember.float32 and p.device.type == "cuda"
        assert bool(ember.isfinite(p).all())
