"""ember.ao.quantization (eager mode) against explicit values and PyTorch: observers and their
qparams, fake quantize modules (values, straight-through gradients, the fused QAT default),
QConfigs, fusion, prepare / convert with the quantized modules (integer arithmetic as fbgemm),
a QAT training program, and quantize_dynamic."""

from __future__ import annotations

import copy
import io
import re
import warnings

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from ember import nn
from ember.ao import quantization as eq
from ember.ao.nn import quantized as nnq

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    t.backends.quantized.engine = "x86"
    return t


@pytest.fixture
def tq(torch):
    import torch.ao.quantization as tq

    return tq


def _conv(kw: dict, lib):
    return {k: (getattr(lib, v) if isinstance(v, str) else v) for k, v in kw.items()}


# ---- observers ---------------------------------------------------------------------------------
def test_minmax_observer_explicit_values():
    obs = eq.MinMaxObserver()
    obs(ember.tensor([-1.0, 2.0]))
    scale, zp = obs.calculate_qparams()
    assert scale.tolist() == [pytest.approx(3.0 / 255, rel=1e-6)]
    assert zp.tolist() == [85] and zp.dtype is ember.int32  # 0 - round(-1 / (3/255))
    sym = eq.MinMaxObserver(dtype=ember.qint8, qscheme=ember.per_tensor_symmetric)
    sym(ember.tensor([-1.0, 2.0]))
    scale, zp = sym.calculate_qparams()
    assert scale.tolist() == [pytest.approx(2.0 / 127.5, rel=1e-6)] and zp.tolist() == [0]
    usym = eq.MinMaxObserver(dtype=ember.quint8, qscheme=ember.per_tensor_symmetric)
    usym(ember.tensor([-1.0, 2.0]))
    assert usym.calculate_qparams()[1].tolist() == [128]
    assert eq.MinMaxObserver(reduce_range=True).quant_max == 127
    assert eq.MinMaxObserver(dtype=ember.qint8, reduce_range=True).quant_min == -64
    with pytest.warns(UserWarning, match="must run observer"):
        s, z = eq.MinMaxObserver().calculate_qparams()
    assert s.tolist() == [1.0] and z.tolist() == [0]
    with pytest.raises(NotImplementedError):
        eq.MinMaxObserver(qscheme=ember.per_channel_affine)
    with pytest.raises(AssertionError, match="include 0"):
        eq.MinMaxObserver(quant_min=1, quant_max=10)


def test_moving_average_explicit_values():
    obs = eq.MovingAverageMinMaxObserver(averaging_constant=0.5)
    obs(ember.tensor([0.0, 2.0]))
    obs(ember.tensor([-2.0, 4.0]))
    assert (obs.min_val.item(), obs.max_val.item()) == (-1.0, 3.0)
    pc = eq.MovingAveragePerChannelMinMaxObserver(averaging_constant=0.5, ch_axis=1)
    pc(ember.tensor([[0.0, 1.0], [2.0, 3.0]]))
    pc(ember.tensor([[4.0, 1.0], [4.0, 9.0]]))
    assert pc.min_val.tolist() == [2.0, 1.0] and pc.max_val.tolist() == [3.0, 6.0]


OBSERVERS = [
    ("MinMaxObserver", {}),
    ("MinMaxObserver", {"dtype": "qint8", "qscheme": "per_tensor_symmetric"}),
    ("MinMaxObserver", {"reduce_range": True}),
    ("MinMaxObserver", {"quant_min": 0, "quant_max": 15}),
    ("MovingAverageMinMaxObserver", {"averaging_constant": 0.3}),
    ("PerChannelMinMaxObserver", {"ch_axis": 1}),
    ("PerChannelMinMaxObserver", {"dtype": "qint8", "qscheme": "per_channel_symmetric"}),
    ("PerChannelMinMaxObserver", {"qscheme": "per_channel_affine_float_qparams"}),
    ("MovingAveragePerChannelMinMaxObserver",
     {"averaging_constant": 0.2, "qscheme": "per_channel_symmetric", "quant_min": 0,
      "quant_max": 100}),
    ("HistogramObserver", {"reduce_range": True}),
    ("HistogramObserver", {"bins": 256, "dtype": "qint8", "qscheme": "per_tensor_symmetric"}),
]


@pytest.mark.parametrize("kind,kw", OBSERVERS)
def test_observers_match_torch(tq, torch, kind, kw):
    eo = getattr(eq, kind)(**_conv(kw, ember))
    to = getattr(tq, kind)(**_conv(kw, torch))
    g = np.random.default_rng(0)
    for i in range(3):
        x = (g.standard_normal((4, 5, 6)) * (i + 1) + i).astype(np.float32)
        eo(ember.tensor(x))
        to(torch.tensor(x))
    es, ez = eo.calculate_qparams()
    ts, tz = to.calculate_qparams()
    np.testing.assert_array_equal(es.numpy(), ts.numpy())
    np.testing.assert_array_equal(ez.numpy(), tz.numpy())
    assert str(ez.dtype).split(".")[-1] == str(tz.dtype).split(".")[-1]
    np.testing.assert_array_equal(eo.min_val.numpy(), to.min_val.numpy())


# ---- fake quantize -----------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["default_fake_quant", "default_weight_fake_quant",
                                   "default_per_channel_weight_fake_quant"])
def test_fake_quantize_matches_torch_with_straight_through_grad(tq, torch, which):
    ef, tf = getattr(eq, which)(), getattr(tq, which)()
    g = np.random.default_rng(1)
    for i in range(3):
        x = (g.standard_normal((4, 6)) * (1 + i)).astype(np.float32)
        ex = ember.tensor(x, requires_grad=True)
        tx = torch.tensor(x, requires_grad=True)
        ey, ty = ef(ex), tf(tx)
        np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())
        w = g.standard_normal(x.shape).astype(np.float32)
        (ey * ember.tensor(w)).sum().backward()
        (ty * torch.tensor(w)).sum().backward()
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
    np.testing.assert_array_equal(ef.scale.numpy(), tf.scale.numpy())
    assert ef.zero_point.tolist() == tf.zero_point.tolist()


def test_fake_quantize_switches():
    fq = eq.FakeQuantize(quant_min=0, quant_max=255)
    fq(ember.tensor([0.0, 2.55]))
    assert fq.scale.tolist() == [pytest.approx(0.01)] and fq.zero_point.tolist() == [0]
    fq.disable_observer()
    y = fq(ember.tensor([0.0, 25.5]))  # the range stays [0, 2.55]: clamped
    assert y.tolist() == [0.0, pytest.approx(2.55)]
    fq.disable_fake_quant()
    assert fq(ember.tensor([0.123])).tolist() == [pytest.approx(0.123)]
    m = nn.Sequential(eq.FakeQuantize())
    m.apply(eq.disable_observer)
    assert m[0].observer_enabled.tolist() == [0]
    m.apply(eq.enable_observer)
    m.apply(eq.disable_fake_quant)
    assert m[0].observer_enabled.tolist() == [1] and m[0].fake_quant_enabled.tolist() == [0]
    assert m[0].fake_quant_enabled.dtype is ember.uint8


@pytest.mark.parametrize("scale", [1.0, 1e-6, 0.0])
def test_fused_fake_quant_matches_torch(tq, torch, scale):
    g = np.random.default_rng(2)
    pairs = [(eq.get_default_qat_qconfig("x86").activation(),
              tq.get_default_qat_qconfig("x86").activation()),
             (eq.default_fused_per_channel_wt_fake_quant(),
              tq.default_fused_per_channel_wt_fake_quant()),
             (eq.default_fused_wt_fake_quant(), tq.default_fused_wt_fake_quant())]
    for ef, tf in pairs:
        for i in range(3):
            x = ((g.standard_normal((4, 5)) * (i + 1) + i) * scale).astype(np.float32)
            ey, ty = ef(ember.tensor(x)), tf(torch.tensor(x))
            np.testing.assert_array_equal(ey.numpy(), ty.detach().numpy())
            np.testing.assert_array_equal(ef.scale.numpy(), tf.scale.numpy())
            assert ef.zero_point.tolist() == tf.zero_point.tolist()


# ---- qconfig -----------------------------------------------------------------------------------
def test_qconfigs(tq):
    for backend in ("x86", "fbgemm", "qnnpack", "onednn"):
        for ours, theirs in ((eq.get_default_qconfig(backend), tq.get_default_qconfig(backend)),
                             (eq.get_default_qat_qconfig(backend),
                              tq.get_default_qat_qconfig(backend))):
            for part in ("activation", "weight"):
                a, b = getattr(ours, part)(), getattr(theirs, part)()
                assert type(a).__name__ == type(b).__name__
                obs_a = getattr(a, "activation_post_process", a)
                obs_b = getattr(b, "activation_post_process", b)
                assert type(obs_a).__name__ == type(obs_b).__name__
                assert (obs_a.quant_min, obs_a.quant_max) == (obs_b.quant_min, obs_b.quant_max)
                assert str(obs_a.qscheme).split(".")[-1] == str(obs_b.qscheme).split(".")[-1]
    with pytest.raises(AssertionError, match="not supported"):
        eq.get_default_qconfig("arm")
    with pytest.raises(ValueError, match="observer instance"):
        eq.QConfig(activation=eq.MinMaxObserver(), weight=eq.MinMaxObserver)
    assert ember.quantization.QConfig is eq.QConfig
    assert ember.quantization.prepare is eq.prepare


# ---- fusion ------------------------------------------------------------------------------------
class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.quant = eq.QuantStub()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(64, 16)
        self.relu2 = nn.ReLU()
        self.fc2 = nn.Linear(16, 5)
        self.dequant = eq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.pool(self.relu(self.bn(self.conv(x))))
        x = self.fc2(self.relu2(self.fc1(x.flatten(1))))
        return self.dequant(x)


def _torch_net(torch, tq):
    tnn = torch.nn

    class Net(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant = tq.QuantStub()
            self.conv = tnn.Conv2d(3, 4, 3, padding=1)
            self.bn = tnn.BatchNorm2d(4)
            self.relu = tnn.ReLU()
            self.pool = tnn.MaxPool2d(2)
            self.fc1 = tnn.Linear(64, 16)
            self.relu2 = tnn.ReLU()
            self.fc2 = tnn.Linear(16, 5)
            self.dequant = tq.DeQuantStub()

        def forward(self, x):
            x = self.quant(x)
            x = self.pool(self.relu(self.bn(self.conv(x))))
            x = self.fc2(self.relu2(self.fc1(x.flatten(1))))
            return self.dequant(x)

    torch.manual_seed(0)
    tm = Net()
    with torch.no_grad():
        tm.bn.running_mean.uniform_(-0.5, 0.5)
        tm.bn.running_var.uniform_(0.5, 2)
        tm.bn.weight.uniform_(0.5, 1.5)
        tm.bn.bias.uniform_(-0.2, 0.2)
    em = _Net()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    return em, tm


FUSE = [["conv", "bn", "relu"], ["fc1", "relu2"]]


def test_fuse_modules_eval_and_qat():
    m = _Net().eval()
    x = ember.randn(2, 3, 8, 8)
    want = m(x)
    f = eq.fuse_modules(m, FUSE)
    assert [type(f.conv).__name__, type(f.bn).__name__, type(f.relu).__name__,
            type(f.fc1).__name__] == ["ConvReLU2d", "Identity", "Identity", "LinearReLU"]
    assert type(f.conv[0]) is nn.Conv2d and f.conv[0].bias is not None
    ember.testing.assert_close(f(x), want, atol=1e-5, rtol=1e-5)
    assert type(m.conv) is nn.Conv2d  # not in place
    q = eq.fuse_modules_qat(_Net().train(), FUSE)
    assert type(q.conv).__name__ == "ConvBnReLU2d" and type(q.conv[1]) is nn.BatchNorm2d
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        eq.fuse_modules(_Net().train(), FUSE)
    bad = _Net().eval()
    bad.bn.train()
    with pytest.raises(AssertionError, match="same mode"):
        eq.fuse_modules(bad, FUSE)
    with pytest.raises(NotImplementedError, match="Cannot fuse"):
        eq.fuse_modules(_Net().eval(), [["fc1", "fc2"]])


# ---- post-training static quantization -----------------------------------------------------------
@pytest.mark.parametrize("qconfig", ["x86", "default_qconfig"])
def test_ptq_matches_torch(torch, tq, qconfig):
    em, tm = _torch_net(torch, tq)
    em.eval()
    tm.eval()
    ef, tf = eq.fuse_modules(em, FUSE), tq.fuse_modules(tm, FUSE)
    if qconfig == "x86":
        ef.qconfig, tf.qconfig = eq.get_default_qconfig("x86"), tq.get_default_qconfig("x86")
    else:
        ef.qconfig, tf.qconfig = eq.default_qconfig, tq.default_qconfig
    ep, tp = eq.prepare(ef), tq.prepare(tf)
    assert isinstance(ep.conv.activation_post_process, type(ef.qconfig.activation()))
    assert not hasattr(ep.dequant, "activation_post_process")
    assert not hasattr(ep.relu, "activation_post_process")
    g = np.random.default_rng(3)
    for i in range(3):
        c = (g.standard_normal((6, 3, 8, 8)) * (1 + i)).astype(np.float32)
        ep(ember.tensor(c))
        tp(torch.tensor(c))
    ec, tc = eq.convert(ep), tq.convert(tp)
    assert [type(ec.quant).__name__, type(ec.conv).__name__, type(ec.fc1).__name__,
            type(ec.fc2).__name__, type(ec.dequant).__name__] == [
        "Quantize", "ConvReLU2d", "LinearReLU", "Linear", "DeQuantize"]
    assert not hasattr(ec, "qconfig") and not hasattr(ec.fc2, "activation_post_process")
    assert ec.quant.scale.tolist() == tc.quant.scale.tolist()
    assert ec.quant.zero_point.tolist() == tc.quant.zero_point.tolist()
    for name in ("conv", "fc1", "fc2"):
        a, b = getattr(ec, name), getattr(tc, name)
        assert a.scale == pytest.approx(b.scale, rel=1e-6) and a.zero_point == b.zero_point
        np.testing.assert_array_equal(a.weight().int_repr().numpy(),
                                      b.weight().int_repr().numpy())
    x = g.standard_normal((5, 3, 8, 8)).astype(np.float32)
    qx_e, qx_t = ec.quant(ember.tensor(x)), tc.quant(torch.tensor(x))
    np.testing.assert_array_equal(qx_e.int_repr().numpy(), qx_t.int_repr().numpy())
    conv_e, conv_t = ec.conv(qx_e), tc.conv(qx_t)
    d = np.abs(conv_e.int_repr().numpy().astype(int) - conv_t.int_repr().numpy().astype(int))
    assert d.max() <= 1 and (d > 0).mean() < 0.01
    ye, yt = ec(ember.tensor(x)), tc(torch.tensor(x))
    assert np.abs(ye.numpy() - yt.numpy()).max() <= ec.fc2.scale * 1.01


def _torch_qweight(torch, w, per_channel):
    if per_channel:
        s = torch.tensor(np.abs(w).reshape(w.shape[0], -1).max(1) / 127.0, dtype=torch.float64)
        return torch.quantize_per_channel(torch.tensor(w), s, torch.zeros(w.shape[0],
                                          dtype=torch.int64), 0, torch.qint8)
    return torch.quantize_per_tensor(torch.tensor(w), float(np.abs(w).max() / 127), 0,
                                     torch.qint8)


def _ember_qweight(tw):
    if str(tw.qscheme()).endswith("per_channel_affine"):
        return ember.quantize_per_channel(ember.tensor(tw.dequantize().numpy()),
                                          ember.tensor(tw.q_per_channel_scales().numpy()),
                                          ember.tensor(tw.q_per_channel_zero_points().numpy()),
                                          0, ember.qint8)
    return ember.quantize_per_tensor(ember.tensor(tw.dequantize().numpy()), tw.q_scale(),
                                     tw.q_zero_point(), ember.qint8)


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("cfg", [dict(stride=1, padding=0, dilation=1, groups=1),
                                 dict(stride=2, padding=1, dilation=1, groups=2),
                                 dict(stride=1, padding=2, dilation=2, groups=1)])
def test_quantized_conv2d_matches_torch(torch, per_channel, cfg):
    import torch.ao.nn.quantized as tnnq

    g = np.random.default_rng(4)
    w = (g.standard_normal((6, 4 // cfg["groups"], 3, 3)) * 0.3).astype(np.float32)
    b = g.standard_normal(6).astype(np.float32)
    tmod = tnnq.Conv2d(4, 6, 3, **cfg)
    tw = _torch_qweight(torch, w, per_channel)
    tmod.set_weight_bias(tw, torch.tensor(b))
    tmod.scale, tmod.zero_point = 0.05, 60
    emod = nnq.Conv2d(4, 6, 3, **cfg)
    emod.set_weight_bias(_ember_qweight(tw), ember.tensor(b))
    emod.scale, emod.zero_point = 0.05, 60
    x = g.standard_normal((2, 4, 9, 9)).astype(np.float32)
    te = tmod(torch.quantize_per_tensor(torch.tensor(x), 0.03, 70, torch.quint8))
    ee = emod(ember.quantize_per_tensor(ember.tensor(x), 0.03, 70, ember.quint8))
    assert ee.shape == tuple(te.shape) and (ee.q_scale(), ee.q_zero_point()) == (0.05, 60)
    d = np.abs(ee.int_repr().numpy().astype(int) - te.int_repr().numpy().astype(int))
    assert d.max() <= 1 and (d > 0).mean() < 0.01


@pytest.mark.parametrize("per_channel", [True, False])
def test_quantized_linear_matches_torch(torch, per_channel):
    import torch.ao.nn.intrinsic.quantized as tnniq
    import torch.ao.nn.quantized as tnnq
    from ember.ao.nn.intrinsic import quantized as nniq

    g = np.random.default_rng(5)
    w = (g.standard_normal((7, 12)) * 0.2).astype(np.float32)
    b = g.standard_normal(7).astype(np.float32)
    tw = _torch_qweight(torch, w, per_channel)
    x = g.standard_normal((3, 2, 12)).astype(np.float32)
    for tcls, ecls in ((tnnq.Linear, nnq.Linear), (tnniq.LinearReLU, nniq.LinearReLU)):
        tmod, emod = tcls(12, 7), ecls(12, 7)
        tmod.set_weight_bias(tw, torch.tensor(b))
        emod.set_weight_bias(_ember_qweight(tw), ember.tensor(b))
        tmod.scale = emod.scale = 0.04
        tmod.zero_point = emod.zero_point = 100
        te = tmod(torch.quantize_per_tensor(torch.tensor(x), 0.02, 64, torch.quint8))
        ee = emod(ember.quantize_per_tensor(ember.tensor(x), 0.02, 64, ember.quint8))
        d = np.abs(ee.int_repr().numpy().astype(int) - te.int_repr().numpy().astype(int))
        assert d.max() <= 1 and (d > 0).mean() < 0.01
        assert repr(emod) == repr(tmod).replace("torch.", "ember.")


def test_quantized_linear_explicit_and_errors():
    m = nnq.Linear(2, 1)
    m.set_weight_bias(ember.quantize_per_tensor(ember.tensor([[1.0, -1.0]]), 0.5, 0, ember.qint8),
                      ember.tensor([0.5]))
    m.scale, m.zero_point = 0.25, 10
    x = ember.quantize_per_tensor(ember.tensor([[3.0, 1.0], [0.0, 4.0]]), 0.5, 0, ember.quint8)
    y = m(x)  # 3 - 1 + 0.5 = 2.5 -> 10 + 10; 0 - 4 + 0.5 = -3.5 -> 10 - 14 = -4 -> clamped to 0
    assert y.int_repr().tolist() == [[20], [0]] and y.dequantize().tolist() == [[2.5], [-2.5]]
    with pytest.raises(RuntimeError, match="quantized"):
        m(ember.tensor([[3.0, 1.0]]))
    with pytest.raises(RuntimeError, match="features"):
        m(ember.quantize_per_tensor(ember.ones(1, 3), 0.5, 0, ember.quint8))
    with pytest.raises(RuntimeError, match="qint8"):
        m.set_weight_bias(ember.quantize_per_tensor(ember.ones(1, 2), 0.5, 0, ember.quint8), None)


def test_converted_model_state_dict_round_trip():
    m = _Net().eval()
    m = eq.fuse_modules(m, FUSE)
    m.qconfig = eq.default_qconfig
    p = eq.prepare(m)
    p(ember.randn(4, 3, 8, 8))
    q = eq.convert(p)
    buf = io.BytesIO()
    ember.save(q.state_dict(), buf)
    buf.seek(0)
    sd = ember.load(buf)
    # PyTorch's layout: a quantized Linear's (weight, bias) pair under _packed_params
    assert sd["fc2._packed_params._packed_params"][0].is_quantized and sd["fc2.scale"].item() == pytest.approx(q.fc2.scale)
    fresh = copy.deepcopy(q)
    fresh.fc2.scale, fresh.fc2.zero_point = 1.0, 0
    fresh.load_state_dict(sd)
    x = ember.randn(2, 3, 8, 8)
    assert fresh(x).tolist() == q(x).tolist()


# ---- quantization-aware training ---------------------------------------------------------------
def test_qat_program_matches_torch(torch, tq):
    em, tm = _torch_net(torch, tq)
    em.train()
    tm.train()
    ef, tf = eq.fuse_modules_qat(em, FUSE), tq.fuse_modules_qat(tm, FUSE)
    ef.qconfig, tf.qconfig = eq.get_default_qat_qconfig("x86"), tq.get_default_qat_qconfig("x86")
    ep, tp = eq.prepare_qat(ef), tq.prepare_qat(tf)
    assert type(ep.conv).__name__ == "ConvBnReLU2d" and type(ep.conv).__module__.startswith(
        "ember.ao.nn.intrinsic.qat")
    assert type(ep.fc2).__module__ == "ember.ao.nn.qat"
    assert len(list(ep.parameters())) == len(list(tp.parameters())) == 8
    eopt = ember.optim.SGD(ep.parameters(), lr=0.05, momentum=0.9)
    topt = torch.optim.SGD(tp.parameters(), lr=0.05, momentum=0.9)
    g = np.random.default_rng(6)
    X = g.standard_normal((6, 8, 3, 8, 8)).astype(np.float32)
    Y = g.integers(0, 5, (6, 8))
    for step in range(6):
        if step == 4:  # freeze the quantization parameters and the batch-norm statistics
            ep.apply(eq.disable_observer)
            tp.apply(tq.disable_observer)
            ep.apply(ember.ao.nn.intrinsic.qat.freeze_bn_stats)
            tp.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)
        el = F.cross_entropy(ep(ember.tensor(X[step])), ember.tensor(Y[step]))
        tl = torch.nn.functional.cross_entropy(tp(torch.tensor(X[step])),
                                               torch.tensor(Y[step]))
        eopt.zero_grad()
        el.backward()
        eopt.step()
        topt.zero_grad()
        tl.backward()
        topt.step()
        assert el.item() == pytest.approx(tl.item(), rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(ep.conv.weight.detach().numpy(),
                               tp.conv.weight.detach().numpy(), rtol=1e-4, atol=1e-5)
    ep.eval()
    tp.eval()
    ec, tc = eq.convert(ep), tq.convert(tp)
    assert type(ec.conv).__name__ == "ConvReLU2d" and type(ec.fc2).__name__ == "Linear"
    x = g.standard_normal((10, 3, 8, 8)).astype(np.float32)
    ye, yt = ec(ember.tensor(x)), tc(torch.tensor(x))
    step_size = ec.fc2.scale
    assert step_size == pytest.approx(tc.fc2.scale, rel=1e-5)
    assert np.abs(ye.numpy() - yt.numpy()).max() <= step_size * 1.01
    acc_e = (ye.numpy().argmax(1) == yt.numpy().argmax(1)).mean()
    assert acc_e >= 0.9


def test_prepare_qat_needs_training_mode():
    m = _Net().eval()
    m.qconfig = eq.get_default_qat_qconfig("x86")
    with pytest.raises(AssertionError, match="training mode"):
        eq.prepare_qat(m)


def test_prepare_warns_without_qconfig():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        eq.prepare(_Net().eval())
    assert any("None of the submodule got qconfig" in str(x.message) for x in w)


# ---- dynamic quantization ----------------------------------------------------------------------
def test_quantize_dynamic_matches_torch(torch, tq):
    torch.manual_seed(1)
    tm = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 3))
    em = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 3))
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tdyn = tq.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)
    edyn = eq.quantize_dynamic(em, {nn.Linear}, dtype=ember.qint8)
    assert type(em[0]) is nn.Linear  # not in place
    assert repr(edyn) == repr(tdyn).replace("torch.", "ember.")
    np.testing.assert_array_equal(edyn[0].weight().int_repr().numpy(),
                                  tdyn[0].weight().int_repr().numpy())
    assert edyn[0].weight().q_scale() == tdyn[0].weight().q_scale()
    g = np.random.default_rng(7)
    for s in (1.0, 10.0, 0.01):
        x = (g.standard_normal((7, 10)) * s).astype(np.float32)
        ye, yt = edyn(ember.tensor(x)), tdyn(torch.tensor(x))
        np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-5, atol=1e-6 * s)


def test_dynamic_linear_explicit():
    from ember.ao.nn.quantized.dynamic import Linear as DLinear

    m = DLinear(2, 1)
    m.set_weight_bias(ember.quantize_per_tensor(ember.tensor([[1.0, -1.0]]), 0.5, 0,
                                                ember.qint8), ember.tensor([0.5]))
    # x in [0, 3]: scale 3/127, zero point 0; x quantizes to [127, 42], w to [2, -2]
    y = m(ember.tensor([[3.0, 1.0]]))
    assert y.tolist() == [[pytest.approx((127 * 2 - 42 * 2) * (3 / 127) * 0.5 + 0.5, rel=1e-6)]]
    with pytest.raises(RuntimeError, match="float"):
        m(ember.tensor([[1, 2]]))


# ---- FloatFunctional / QFunctional (skip connections) --------------------------------------------
def _res(lib, Q, FF):
    class Res(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant = Q.QuantStub()
            self.conv1 = lib.nn.Conv2d(3, 3, 3, padding=1)
            self.relu1 = lib.nn.ReLU()
            self.conv2 = lib.nn.Conv2d(3, 3, 3, padding=1)
            self.skip = FF()
            self.dequant = Q.DeQuantStub()

        def forward(self, x):
            x = self.quant(x)
            y = self.conv2(self.relu1(self.conv1(x)))
            return self.dequant(self.skip.add_relu(x, y))

    return Res()


def test_float_functional_residual_ptq_matches_torch(torch, tq):
    import torch.ao.nn.quantized as tnnq

    torch.manual_seed(2)
    tm = _res(torch, tq, tnnq.FloatFunctional).eval()
    em = _res(ember, eq, nnq.FloatFunctional).eval()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tm = tq.fuse_modules(tm, [["conv1", "relu1"]])
    em = eq.fuse_modules(em, [["conv1", "relu1"]])
    tm.qconfig, em.qconfig = tq.get_default_qconfig("x86"), eq.get_default_qconfig("x86")
    tp, ep = tq.prepare(tm), eq.prepare(em)
    assert type(ep.skip.activation_post_process).__name__ == "HistogramObserver"
    g = np.random.default_rng(8)
    for _ in range(2):
        c = g.standard_normal((4, 3, 6, 6)).astype(np.float32)
        tp(torch.tensor(c))
        ep(ember.tensor(c))
    tc, ec = tq.convert(tp), eq.convert(ep)
    assert type(ec.skip) is nnq.QFunctional
    assert ec.skip.scale == pytest.approx(tc.skip.scale, rel=1e-6)
    assert ec.skip.zero_point == tc.skip.zero_point
    x = g.standard_normal((3, 3, 6, 6)).astype(np.float32)
    ye, yt = ec(ember.tensor(x)), tc(torch.tensor(x))
    assert np.abs(ye.numpy() - yt.numpy()).max() <= ec.skip.scale * 1.01
    with pytest.raises(RuntimeError, match="not intended"):
        ec.skip(ember.ones(1))


@pytest.mark.parametrize("c", [0.0, 3.0, -3.0, 0.25, -0.25, 0.35])
def test_qfunctional_scalar_ops_match_torch(torch, c):
    x = [-1.0, 0.5, 2.0, 20.0]
    qe = ember.quantize_per_tensor(ember.tensor(x), 0.1, 10, ember.quint8)
    qt = torch.quantize_per_tensor(torch.tensor(x), 0.1, 10, torch.quint8)
    f = nnq.QFunctional()
    for ours, theirs in ((f.add_scalar(qe, c), torch.ops.quantized.add_scalar(qt, c)),
                         (f.mul_scalar(qe, c), torch.ops.quantized.mul_scalar(qt, c))):
        assert ours.q_scale() == pytest.approx(theirs.q_scale(), rel=1e-9)
        assert ours.q_zero_point() == theirs.q_zero_point()
        assert ours.int_repr().tolist() == theirs.int_repr().tolist()


def test_qfunctional_explicit():
    f = nnq.QFunctional()
    f.scale, f.zero_point = 0.5, 2
    a = ember.quantize_per_tensor(ember.tensor([1.0, -2.0]), 0.25, 0, ember.qint8)
    b = ember.quantize_per_tensor(ember.tensor([0.5, 0.75]), 0.25, 0, ember.qint8)
    assert f.add(a, b).dequantize().tolist() == [1.5, -1.0]
    assert f.add_relu(a, b).dequantize().tolist() == [1.5, 0.0]
    assert f.mul(a, b).dequantize().tolist() == [0.5, -1.5]
    assert f.cat([a, b]).dequantize().tolist() == [1.0, -2.0, 0.5, 1.0]


def test_float_functional_residual_qat_matches_torch(torch, tq):
    import torch.ao.nn.quantized as tnnq

    torch.manual_seed(3)
    tm = _res(torch, tq, tnnq.FloatFunctional).train()
    em = _res(ember, eq, nnq.FloatFunctional).train()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tm.qconfig, em.qconfig = tq.get_default_qat_qconfig("x86"), eq.get_default_qat_qconfig("x86")
    tp, ep = tq.prepare_qat(tm), eq.prepare_qat(em)
    eopt = ember.optim.SGD(ep.parameters(), lr=0.1)
    topt = torch.optim.SGD(tp.parameters(), lr=0.1)
    g = np.random.default_rng(9)
    for _ in range(3):
        x = g.standard_normal((4, 3, 6, 6)).astype(np.float32)
        el = (ep(ember.tensor(x)) ** 2).mean()
        tl = (tp(torch.tensor(x)) ** 2).mean()
        eopt.zero_grad()
        el.backward()
        eopt.step()
        topt.zero_grad()
        tl.backward()
        topt.step()
        assert el.item() == pytest.approx(tl.item(), rel=1e-5)
    ec, tc = eq.convert(ep.eval()), tq.convert(tp.eval())
    x = g.standard_normal((3, 3, 6, 6)).astype(np.float32)
    ye, yt = ec(ember.tensor(x)), tc(torch.tensor(x))
    assert np.abs(ye.numpy() - yt.numpy()).max() <= ec.skip.scale * 1.01


def test_old_module_spellings_are_the_same_classes():
    import ember.nn.intrinsic.qat
    import ember.nn.quantized.dynamic
    from ember.ao.nn import intrinsic, qat

    assert ember.nn.quantized.Linear is nnq.Linear
    assert ember.nn.quantized.dynamic.Linear is nnq.dynamic.Linear
    assert ember.nn.intrinsic.ConvBnReLU2d is intrinsic.ConvBnReLU2d
    assert ember.nn.intrinsic.qat.ConvBnReLU2d is intrinsic.qat.ConvBnReLU2d
    assert ember.nn.qat.Linear is qat.Linear
    assert ember.quantization.QuantStub is eq.QuantStub and ember.ao.quantization is eq


def _elementwise_net(lib, Q):
    tnn = lib.nn

    class Net(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant = Q.QuantStub()
            self.conv = tnn.Conv2d(3, 4, 3)
            self.bn = tnn.BatchNorm2d(4)
            self.hs = tnn.Hardswish()
            self.bn2 = tnn.BatchNorm2d(4)
            self.relu = tnn.ReLU()
            self.lrelu = tnn.LeakyReLU(0.1)
            self.elu = tnn.ELU(0.5)
            self.drop = tnn.Dropout(0.3)
            self.dequant = Q.DeQuantStub()

        def forward(self, x):
            x = self.hs(self.bn(self.conv(self.quant(x))))
            x = self.elu(self.lrelu(self.relu(self.bn2(x))))
            x = lib.nn.functional.dropout(self.drop(x), 0.2, training=self.training)
            return self.dequant(x)

    return Net()


def test_batchnorm_hardswish_leaky_elu_dropout_ptq_match_torch(torch, tq):
    torch.manual_seed(0)
    tm, em = _elementwise_net(torch, tq), _elementwise_net(ember, eq)
    with torch.no_grad():
        for b in (tm.bn, tm.bn2):
            b.running_mean.uniform_(-0.5, 0.5)
            b.running_var.uniform_(0.5, 2)
            b.weight.uniform_(0.5, 1.5)
            b.bias.uniform_(-0.2, 0.2)
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tm = tq.fuse_modules(tm.eval(), [["bn2", "relu"]])
    em = eq.fuse_modules(em.eval(), [["bn2", "relu"]])
    tm.qconfig, em.qconfig = tq.get_default_qconfig("x86"), eq.get_default_qconfig("x86")
    tp, ep = tq.prepare(tm), eq.prepare(em)
    g = np.random.default_rng(10)
    for _ in range(2):
        c = g.standard_normal((4, 3, 7, 7)).astype(np.float32)
        tp(torch.tensor(c))
        ep(ember.tensor(c))
    tc, ec = tq.convert(tp), eq.convert(ep)
    def shape(m):  # the layout of the repr, the observed scales aside (float rounding)
        return re.sub(r"scale=[0-9.e-]+", "scale=S", repr(m).replace("torch.", "ember."))

    assert shape(ec) == shape(tc)
    x = g.standard_normal((4, 3, 7, 7)).astype(np.float32)
    ye, yt = ec(ember.tensor(x)), tc(torch.tensor(x))
    assert np.abs(ye.numpy() - yt.numpy()).max() <= ec.elu.scale * 1.01
    sd = ec.state_dict()
    assert sd["hs.scale"].item() == pytest.approx(ec.hs.scale)
    copy_ = copy.deepcopy(ec)
    copy_.hs.scale = 1.0
    copy_.load_state_dict(sd)
    assert copy_.hs.scale == ec.hs.scale
    with pytest.raises(NotImplementedError, match="training-mode dropout"):
        F.dropout(ember.quantize_per_tensor(ember.ones(2), 0.1, 0, ember.quint8), 0.5, True)


def test_qfunctional_state_dict_keeps_qparams():
    f = nnq.QFunctional()
    f.scale, f.zero_point = 0.25, 7
    sd = f.state_dict()
    assert sd["scale"].item() == 0.25 and sd["zero_point"].item() == 7
    g = nnq.QFunctional()
    g.load_state_dict(sd)
    assert (g.scale, g.zero_point) == (0.25, 7)


@pytest.mark.parametrize("mode", ["qat_v0", "qat_v1", "ptq"])
def test_prepared_state_dict_matches_torch_and_loads(torch, tq, mode):
    em, tm = _torch_net(torch, tq)
    if mode == "ptq":
        ef, tf = eq.fuse_modules(em.eval(), FUSE), tq.fuse_modules(tm.eval(), FUSE)
        ef.qconfig, tf.qconfig = eq.get_default_qconfig("x86"), tq.get_default_qconfig("x86")
        ep, tp = eq.prepare(ef), tq.prepare(tf)
    else:
        version = int(mode[-1])
        ef, tf = eq.fuse_modules_qat(em.train(), FUSE), tq.fuse_modules_qat(tm.train(), FUSE)
        ef.qconfig = eq.get_default_qat_qconfig("x86", version)
        tf.qconfig = tq.get_default_qat_qconfig("x86", version)
        ep, tp = eq.prepare_qat(ef), tq.prepare_qat(tf)
    x = np.random.default_rng(11).standard_normal((4, 3, 8, 8)).astype(np.float32)
    ye, yt = ep(ember.tensor(x)), tp(torch.tensor(x))
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    es, ts = ep.state_dict(), tp.state_dict()
    assert sorted(es) == sorted(ts)
    assert all(tuple(es[k].shape) == tuple(ts[k].shape) for k in ts)
    # a torch checkpoint of the prepared model resumes in ember
    fresh = copy.deepcopy(ep)
    fresh.load_state_dict({k: ember.tensor(v.numpy()) for k, v in ts.items()})
    for k, v in fresh.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), ts[k].numpy())


def _se_net(lib, Q, FF):
    tnn = lib.nn

    class SE(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant = Q.QuantStub()
            self.conv = tnn.Conv2d(3, 6, 3, padding=1)
            self.relu = tnn.ReLU()
            self.pool = tnn.AdaptiveAvgPool2d(1)
            self.fc1 = tnn.Conv2d(6, 3, 1)
            self.relu1 = tnn.ReLU()
            self.fc2 = tnn.Conv2d(3, 6, 1)
            self.gate = tnn.Hardsigmoid()
            self.mul = FF()
            self.head = tnn.Linear(6 * 36, 4)
            self.tanh = tnn.Tanh()
            self.dequant = Q.DeQuantStub()

        def forward(self, x):
            x = self.relu(self.conv(self.quant(x)))
            s = self.gate(self.fc2(self.relu1(self.fc1(self.pool(x)))))
            x = self.mul.mul(x, s)
            return self.dequant(self.tanh(self.head(x.flatten(1))))

    return SE()


def test_qat_with_fixed_qparams_activations_matches_torch(torch, tq):
    import torch.ao.nn.quantized as tnnq

    torch.manual_seed(4)
    tm = _se_net(torch, tq, tnnq.FloatFunctional).train()
    em = _se_net(ember, eq, nnq.FloatFunctional).train()
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    fuse = [["conv", "relu"], ["fc1", "relu1"]]
    tm, em = tq.fuse_modules_qat(tm, fuse), eq.fuse_modules_qat(em, fuse)
    tm.qconfig, em.qconfig = tq.get_default_qat_qconfig("x86"), eq.get_default_qat_qconfig("x86")
    tp, ep = tq.prepare_qat(tm), eq.prepare_qat(em)
    assert type(ep.gate.activation_post_process) is eq.FixedQParamsFakeQuantize
    assert ep.tanh.activation_post_process.zero_point.tolist() == [128]
    eopt = ember.optim.SGD(ep.parameters(), lr=0.1)
    topt = torch.optim.SGD(tp.parameters(), lr=0.1)
    g = np.random.default_rng(12)
    for _ in range(3):
        x = g.standard_normal((4, 3, 6, 6)).astype(np.float32)
        el = (ep(ember.tensor(x)) ** 2).mean()
        tl = (tp(torch.tensor(x)) ** 2).mean()
        eopt.zero_grad()
        el.backward()
        eopt.step()
        topt.zero_grad()
        tl.backward()
        topt.step()
        assert el.item() == pytest.approx(tl.item(), rel=1e-5)
    ec, tc = eq.convert(ep.eval()), tq.convert(tp.eval())
    x = g.standard_normal((5, 3, 6, 6)).astype(np.float32)
    ye, yt = ec(ember.tensor(x)), tc(torch.tensor(x))
    assert np.abs(ye.numpy() - yt.numpy()).max() <= 2 / 256 + 1e-6  # one step of tanh's output


def test_quantize_dynamic_warns_about_modules_it_keeps_float():
    m = nn.Sequential(nn.Linear(4, 4))
    m.cell = nn.LSTMCell(4, 4)
    with pytest.warns(UserWarning, match="no dynamic quantized version of LSTMCell"):
        q = eq.quantize_dynamic(m, {nn.Linear, nn.LSTMCell}, dtype=ember.qint8)
    assert type(q.cell) is nn.LSTMCell and type(q[0]).__name__ == "Linear"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eq.quantize_dynamic(nn.Sequential(nn.Linear(4, 4)), {nn.Linear}, dtype=ember.qint8)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True},
                                {"batch_first": True, "num_layers": 2}])
def test_dynamic_rnns_match_torch(torch, tq, kind, kw):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(getattr(torch.nn, kind)(5, 4, **kw))
    em = nn.Sequential(getattr(nn, kind)(5, 4, **kw))
    em.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tdyn = tq.quantize_dynamic(tm, dtype=torch.qint8)  # the default spec quantizes RNNs too
    edyn = eq.quantize_dynamic(em, dtype=ember.qint8)
    assert repr(edyn) == repr(tdyn)
    g = np.random.default_rng(13)
    x = g.standard_normal((6, 3, 5)).astype(np.float32)
    (ye, he), (yt, ht) = edyn[0](ember.tensor(x)), tdyn[0](torch.tensor(x))
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(he if kind == "LSTM" else (he,), ht if kind == "LSTM" else (ht,)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    if not kw.get("batch_first"):
        n = 2 * kw.get("num_layers", 1) if kw.get("bidirectional") else 1
        h0 = g.standard_normal((n, 3, 4)).astype(np.float32)
        hx_e = (ember.tensor(h0), ember.tensor(h0 * 0.5)) if kind == "LSTM" else ember.tensor(h0)
        hx_t = (torch.tensor(h0), torch.tensor(h0 * 0.5)) if kind == "LSTM" else torch.tensor(h0)
        np.testing.assert_allclose(edyn[0](ember.tensor(x), hx_e)[0].numpy(),
                                   tdyn[0](torch.tensor(x), hx_t)[0].numpy(),
                                   rtol=1e-5, atol=1e-6)
    # the int8 weights survive a state_dict round trip
    fresh = eq.quantize_dynamic(nn.Sequential(getattr(nn, kind)(5, 4, **kw)), dtype=ember.qint8)
    fresh.load_state_dict(edyn.state_dict())
    assert fresh(ember.tensor(x))[0].tolist() == ye.tolist()
    with pytest.raises(RuntimeError, match="3 dimensions"):
        edyn[0](ember.tensor(x[0]))


def _conv1d_net(lib, Q):
    tnn = lib.nn

    class Net(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant = Q.QuantStub()
            self.conv1 = tnn.Conv1d(3, 6, 5, padding=2)
            self.bn1 = tnn.BatchNorm1d(6)
            self.relu1 = tnn.ReLU()
            self.conv2 = tnn.Conv1d(6, 4, 3, stride=2, dilation=2, groups=2)
            self.relu2 = tnn.ReLU()
            self.fc = tnn.Linear(4 * 6, 3)
            self.dequant = Q.DeQuantStub()

        def forward(self, x):
            x = self.relu2(self.conv2(self.relu1(self.bn1(self.conv1(self.quant(x))))))
            return self.dequant(self.fc(x.flatten(1)))

    return Net()


@pytest.mark.parametrize("mode", ["ptq", "qat"])
def test_conv1d_quantization_matches_torch(torch, tq, mode):
    torch.manual_seed(5)
    tm, em = _conv1d_net(torch, tq), _conv1d_net(ember, eq)
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    fuse = [["conv1", "bn1", "relu1"], ["conv2", "relu2"]]
    g = np.random.default_rng(14)
    if mode == "ptq":
        tm, em = tq.fuse_modules(tm.eval(), fuse), eq.fuse_modules(em.eval(), fuse)
        tm.qconfig, em.qconfig = tq.get_default_qconfig("x86"), eq.get_default_qconfig("x86")
        tp, ep = tq.prepare(tm), eq.prepare(em)
        for _ in range(2):
            c = g.standard_normal((4, 3, 16)).astype(np.float32)
            tp(torch.tensor(c))
            ep(ember.tensor(c))
    else:
        tm, em = tq.fuse_modules_qat(tm.train(), fuse), eq.fuse_modules_qat(em.train(), fuse)
        tm.qconfig = tq.get_default_qat_qconfig("x86")
        em.qconfig = eq.get_default_qat_qconfig("x86")
        tp, ep = tq.prepare_qat(tm), eq.prepare_qat(em)
        assert type(ep.conv1).__module__ == "ember.ao.nn.intrinsic.qat"
        assert type(ep.conv2) is ember.ao.nn.intrinsic.ConvReLU1d  # float in QAT, as torch
        eopt = ember.optim.SGD(ep.parameters(), lr=0.1)
        topt = torch.optim.SGD(tp.parameters(), lr=0.1)
        for _ in range(3):
            c = g.standard_normal((4, 3, 16)).astype(np.float32)
            el, tl = (ep(ember.tensor(c)) ** 2).mean(), (tp(torch.tensor(c)) ** 2).mean()
            eopt.zero_grad()
            el.backward()
            eopt.step()
            topt.zero_grad()
            tl.backward()
            topt.step()
            assert el.item() == pytest.approx(tl.item(), rel=1e-5)
        tp.eval()
        ep.eval()
    tc, ec = tq.convert(tp), eq.convert(ep)
    assert type(ec.conv1).__name__ == "ConvReLU1d" and type(ec.conv1).__module__.startswith(
        "ember.ao.nn.intrinsic.quantized")
    assert repr(ec.conv2).split(", scale")[0] == repr(tc.conv2).split(", scale")[0]
    x = g.standard_normal((5, 3, 16)).astype(np.float32)
    ye, yt = ec(ember.tensor(x)), tc(torch.tensor(x))
    assert np.abs(ye.numpy() - yt.numpy()).max() <= ec.fc.scale * 1.01


def _ao_modules():
    import importlib
    import pkgutil

    import ember.ao

    names = ["ember.ao", "ember.quantization", "ember._quantized", "ember.backends.quantized"]
    names += [info.name for info in pkgutil.walk_packages(ember.ao.__path__, "ember.ao.")]
    return [n for n in names if importlib.import_module(n)]


@pytest.mark.parametrize("name", _ao_modules())
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
