"""ember.optim.swa_utils (issue 15: training scripts keep an EMA/SWA copy of the model):
AveragedModel with the SWA and EMA averages, update_bn and SWALR, against torch."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn, optim
from ember.optim.swa_utils import (
    SWALR,
    AveragedModel,
    get_ema_avg_fn,
    get_ema_multi_avg_fn,
    get_swa_avg_fn,
    get_swa_multi_avg_fn,
    update_bn,
)
from nn_helpers import copy_weights, to_np, torch


def _net(lib):
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2))


def _states(n=4, seed=0):
    """n successive weight settings of the net, as NumPy arrays by state-dict key."""
    rng = np.random.default_rng(seed)
    ref = _net(ember).state_dict()
    out = []
    for _ in range(n):
        sd = {}
        for k, v in ref.items():
            if v.is_floating_point():
                sd[k] = rng.standard_normal(tuple(v.shape)).astype(np.float32)
            else:
                sd[k] = np.array(int(rng.integers(0, 10)), dtype=np.int64)
        out.append(sd)
    return out


def _load(model, sd, lib):
    model.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in sd.items()})


def _averaged(lib, states, **kw):
    model = _net(lib)
    _load(model, states[0], lib)
    avg = lib.optim.swa_utils.AveragedModel(model, **kw)
    for sd in states:
        _load(model, sd, lib)
        avg.update_parameters(model)
    return avg


def _kwargs(lib, how):
    su = lib.optim.swa_utils
    return {
        "swa": {},
        "swa_fn": {"avg_fn": su.get_swa_avg_fn()},
        "swa_multi": {"multi_avg_fn": su.get_swa_multi_avg_fn()},
        "ema_fn": {"avg_fn": su.get_ema_avg_fn(0.8)},
        "ema_multi": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.8)},
    }[how]


@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("how", ["swa", "swa_fn", "swa_multi", "ema_fn", "ema_multi"])
def test_averaged_model_matches_torch(how, use_buffers):
    pytest.importorskip("torch")
    states = _states()
    e = _averaged(ember, states, use_buffers=use_buffers, **_kwargs(ember, how))
    if how == "swa_multi" and use_buffers:
        # torch's multi-tensor SWA refuses the integer num_batches_tracked buffer (addcdiv);
        # ember averages it as the default SWA path does
        with pytest.raises(RuntimeError, match="addcdiv"):
            _averaged(torch, states, use_buffers=use_buffers, **_kwargs(torch, how))
        how = "swa"
    t = _averaged(torch, states, use_buffers=use_buffers, **_kwargs(torch, how))
    assert int(e.n_averaged) == int(t.n_averaged) == len(states)
    esd, tsd = e.state_dict(), t.state_dict()
    assert list(esd) == list(tsd)
    for k in esd:
        np.testing.assert_allclose(to_np(esd[k]), to_np(tsd[k]), rtol=1e-5, atol=1e-6, err_msg=k)
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    e.eval()
    t.eval()
    np.testing.assert_allclose(to_np(e(ember.from_numpy(x))), to_np(t(torch.from_numpy(x))),
                               rtol=1e-5, atol=1e-5)


def test_swa_is_the_mean_and_ema_the_decayed_sum():
    states = _states(3)
    swa = _averaged(ember, states)
    key = "0.weight"
    np.testing.assert_allclose(to_np(swa.module.state_dict()[key]),
                               np.mean([s[key] for s in states], axis=0), rtol=1e-5, atol=1e-6)
    # buffers are not averaged by default: they follow the last model
    np.testing.assert_array_equal(to_np(swa.module.state_dict()["1.running_mean"]),
                                  states[-1]["1.running_mean"])
    ema = _averaged(ember, states, multi_avg_fn=get_ema_multi_avg_fn(0.5))
    want = 0.5 * (0.5 * states[0][key] + 0.5 * states[1][key]) + 0.5 * states[2][key]
    np.testing.assert_allclose(to_np(ema.module.state_dict()[key]), want, rtol=1e-5, atol=1e-6)
    # the copy is independent of the model it was made from
    assert swa.module[0].weight is not _net(ember)[0].weight


def test_averaged_model_is_a_module():
    model = _net(ember)
    avg = AveragedModel(model)
    assert [n for n, _ in avg.named_buffers()][0] == "n_averaged"
    assert avg.n_averaged.dtype == ember.int64 and int(avg.n_averaged) == 0
    assert len(list(avg.parameters())) == len(list(model.parameters()))
    avg.update_parameters(model)
    for p, q in zip(avg.parameters(), model.parameters()):
        assert p is not q and bool(ember.equal(p, q))
    # a reloaded average continues where it was
    again = AveragedModel(_net(ember))
    again.load_state_dict(avg.state_dict())
    assert int(again.n_averaged) == 1


def test_averaged_model_errors():
    model = _net(ember)
    with pytest.raises(TypeError, match="expected an nn.Module"):
        AveragedModel(ember.ones(2))
    with pytest.raises(ValueError, match="avg_fn or multi_avg_fn"):
        AveragedModel(model, avg_fn=get_swa_avg_fn(), multi_avg_fn=get_swa_multi_avg_fn())
    avg = AveragedModel(model)
    with pytest.raises(ValueError, match="averaged model has 6 parameters, the model passed has 2"):
        avg.update_parameters(nn.Linear(3, 4))
    with pytest.raises(ValueError, match=r"shape \(4, 5\) cannot be averaged into one of shape"):
        avg.update_parameters(nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
    with pytest.raises(ValueError, match=r"decay must be in \[0, 1\]"):
        get_ema_avg_fn(1.5)
    with pytest.raises(ValueError, match=r"decay must be in \[0, 1\]"):
        get_ema_multi_avg_fn(-0.1)


def test_update_bn_matches_torch():
    pytest.importorskip("torch")
    e, t = _net(ember), _net(torch)
    copy_weights(e, t)
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal((6, 3)).astype(np.float32) * 3 + 1 for _ in range(4)]
    e.eval()
    t.eval()
    update_bn([(ember.from_numpy(b), 0) for b in batches], e)
    torch.optim.swa_utils.update_bn([(torch.from_numpy(b), 0) for b in batches], t)
    assert not e.training and not t.training  # the mode is restored
    assert e[1].momentum == t[1].momentum == 0.1
    for k in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        np.testing.assert_allclose(to_np(e.state_dict()[k]), to_np(t.state_dict()[k]),
                                   rtol=1e-5, atol=1e-6, err_msg=k)
    # the statistics are the cumulative mean over the pass, not a momentum average
    update_bn(ember.from_numpy(np.stack(batches)), e)  # batches from a tensor: one per row
    assert int(e[1].num_batches_tracked) == 4
    # a model without BatchNorm is left alone
    lin = nn.Linear(3, 2)
    update_bn([ember.ones(2, 3)], lin)
    assert lin.training


@pytest.mark.parametrize("strategy,epochs", [("cos", 3), ("linear", 4), ("cos", 0), ("linear", 1)])
def test_swalr_matches_torch(strategy, epochs):
    pytest.importorskip("torch")

    def run(lib):
        a, b = lib.nn.Parameter(lib.zeros(1)), lib.nn.Parameter(lib.zeros(1))
        opt = lib.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.2}], lr=1.0)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.5], anneal_epochs=epochs,
                                          anneal_strategy=strategy)
        lrs = [sched.get_last_lr()]
        for _ in range(7):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
        return np.array(lrs), opt

    (e, eopt), (t, _) = run(ember), run(torch)
    np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-12)
    assert [g["swa_lr"] for g in eopt.param_groups] == [0.05, 0.5]


def test_swalr_errors_and_state():
    opt = optim.SGD([nn.Parameter(ember.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="'cos' or 'linear'"):
        SWALR(opt, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs must be an int >= 0"):
        SWALR(opt, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="one value per param group"):
        SWALR(opt, [0.1, 0.2])
    sched = SWALR(opt, 0.1, anneal_epochs=5, anneal_strategy="linear")
    opt.step()
    sched.step()
    sd = sched.state_dict()
    assert sd["_anneal_strategy"] == "linear" and "optimizer" not in sd
    opt2 = optim.SGD([nn.Parameter(ember.zeros(1))], lr=1.0)
    other = SWALR(opt2, 0.1)
    other.load_state_dict(sd)
    assert other.anneal_func(0.5) == 0.5 and other.anneal_epochs == 5
