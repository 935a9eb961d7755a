"""Quantization, part 2 (session 25): quantized models' state dicts move between torch and
ember; quantized Embedding / EmbeddingBag / ConvTranspose / LayerNorm / Sigmoid / Softmax;
reference quantized modules and the FX graph mode flow (prepare_fx / convert_fx)."""

import contextlib
import io

import ember
import ember.ao.nn.quantized as ennq
import ember.ao.quantization as eq
import numpy as np
import pytest
from ember import nn

torch = pytest.importorskip("torch")
tq = pytest.importorskip("torch.ao.quantization")
tnnq = pytest.importorskip("torch.ao.nn.quantized")
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _e(t):
    return ember.tensor(t.detach().numpy())


def _copy_weights(tm, em):
    em.load_state_dict({k: _e(v) for k, v in tm.state_dict().items()})


@contextlib.contextmanager
def _engine(name):
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = old


def _static_pair(t_mods, e_mods, x, qconfig="default"):
    """(torch model, ember model) after the same eager prepare / calibrate / convert."""
    tm = torch.nn.Sequential(tq.QuantStub(), *t_mods, tq.DeQuantStub()).eval()
    em = nn.Sequential(eq.QuantStub(), *e_mods, eq.DeQuantStub()).eval()
    _copy_weights(tm, em)
    tm.qconfig = tq.default_qconfig if qconfig == "default" else tq.get_default_qconfig(qconfig)
    em.qconfig = eq.default_qconfig if qconfig == "default" else eq.get_default_qconfig(qconfig)
    tp, ep = tq.prepare(tm), eq.prepare(em)
    tp(x)
    ep(_e(x))
    return tq.convert(tp), eq.convert(ep)


def _torch_save_load_ember(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, weights_only=True)


def _ember_save_load_torch(obj):
    buf = io.BytesIO()
    ember.save(obj, buf, format="torch")
    buf.seek(0)
    return torch.load(buf, weights_only=True)


# ---- 1. quantized models' state dicts between the libraries ----------------------------------
class _TNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.c, self.r = torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU()
        self.bn = torch.nn.BatchNorm2d(3)
        self.l = torch.nn.Linear(12, 4)

    def forward(self, x):
        return self.dq(self.l(self.bn(self.r(self.c(self.q(x)))).flatten(1)))


class _ENet(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.dq = eq.QuantStub(), eq.DeQuantStub()
        self.c, self.r = nn.Conv2d(2, 3, 3), nn.ReLU()
        self.bn = nn.BatchNorm2d(3)
        self.l = nn.Linear(12, 4)

    def forward(self, x):
        return self.dq(self.l(self.bn(self.r(self.c(self.q(x)))).flatten(1)))


@pytest.fixture(scope="module")
def _nets_once():
    return _build_converted_nets()


@pytest.fixture
def _nets(_nets_once):
    """Fresh copies of the converted torch and ember models (built once: calibrating their
    histogram observers is the slow part)."""
    import copy

    tq_model, eq_model, x = _nets_once
    return copy.deepcopy(tq_model), copy.deepcopy(eq_model), x


def _build_converted_nets():
    torch.manual_seed(0)
    x = torch.randn(4, 2, 4, 4)
    tm = tq.fuse_modules(_TNet().eval(), [["c", "r"]])
    tm.qconfig = tq.get_default_qconfig("x86")
    tp = tq.prepare(tm)
    tp(x)
    em = eq.fuse_modules(_ENet().eval(), [["c", "r"]])
    em.qconfig = eq.get_default_qconfig("x86")
    ep = eq.prepare(em)
    ep(ember.randn(4, 2, 4, 4))  # other calibration data: the state dict overwrites it all
    return tq.convert(tp), eq.convert(ep), x


def test_torch_saved_quantized_state_dict_loads_into_ember_model(_nets):
    tq_model, eq_model, x = _nets
    sd = _torch_save_load_ember(tq_model.state_dict())  # weights_only=True
    assert sd["l._packed_params.dtype"] is ember.qint8
    weight, bias = sd["l._packed_params._packed_params"]
    assert weight.qscheme() is ember.per_channel_affine and bias.dtype is ember.float32
    assert sd["c.weight"].int_repr().tolist() == \
        tq_model.c.weight().int_repr().tolist()
    result = eq_model.load_state_dict(sd)
    assert not result.missing_keys and not result.unexpected_keys
    np.testing.assert_array_equal(eq_model(_e(x)).numpy(), tq_model(x).numpy())
    # ember's state dict has torch's keys, in torch's order
    assert list(eq_model.state_dict()) == list(tq_model.state_dict())


def test_ember_saved_quantized_state_dict_loads_into_torch_model(_nets, _nets_once):
    import copy

    tq_model, eq_model, x = _nets
    tq_model.load_state_dict(_ember_save_load_torch(eq_model.state_dict()))
    np.testing.assert_array_equal(eq_model(_e(x)).numpy(), tq_model(x).numpy())
    # and ember's own format keeps the layout too
    buf = io.BytesIO()
    ember.save(eq_model.state_dict(), buf)
    buf.seek(0)
    fresh = copy.deepcopy(_nets_once[1])
    fresh.load_state_dict(ember.load(buf, weights_only=True))
    np.testing.assert_array_equal(fresh(_e(x)).numpy(), eq_model(_e(x)).numpy())


def test_quantized_linear_state_dict_layouts_and_errors():
    m = ennq.Linear(3, 2)
    w = ember.quantize_per_tensor(ember.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, 1.0]]), 0.5, 0,
                                  ember.qint8)
    m.set_weight_bias(w, ember.tensor([0.25, -0.5]))
    m.scale, m.zero_point = 0.125, 3
    sd = m.state_dict()
    assert list(sd) == ["scale", "zero_point", "_packed_params.dtype",
                        "_packed_params._packed_params"]
    assert sd._metadata["_packed_params"] == {"version": 3} and sd._metadata[""]["version"] == 3
    fresh = ennq.Linear(3, 2)
    fresh.load_state_dict({"weight": w, "bias": ember.tensor([0.25, -0.5]),  # older layout
                           "scale": ember.tensor(0.125), "zero_point": ember.tensor(3)})
    assert fresh.weight().int_repr().tolist() == [[2, -2, 1], [0, 4, 2]]
    assert fresh.scale == 0.125 and fresh.zero_point == 3 and "_bias" not in dict(
        fresh.named_parameters())
    wrong = dict(sd)
    wrong["_packed_params._packed_params"] = (ember.quantize_per_tensor(
        ember.ones(5, 3), 0.5, 0, ember.qint8), None)
    with pytest.raises(RuntimeError, match="size mismatch"):
        ennq.Linear(3, 2).load_state_dict(wrong)
    # torch reads it (its LinearPackedParams version 3 layout)
    t = tnnq.Linear(3, 2)
    t.load_state_dict(_ember_save_load_torch(sd))
    assert t.weight().int_repr().tolist() == [[2, -2, 1], [0, 4, 2]]
    assert t.bias().tolist() == [0.25, -0.5] and t.scale == 0.125


# ---- 2. more quantized modules, against torch's kernels --------------------------------------
def test_quantized_conv_transpose_2d_matches_torch_exactly():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 5, 5)
    with _engine("fbgemm"):
        tc, ec = _static_pair(
            [torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2)],
            [nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2)], x)
        assert type(ec[1]) is ennq.ConvTranspose2d
        assert repr(ec[1]) == repr(tc[1])
        want = tc(x).numpy()
    np.testing.assert_array_equal(ec(_e(x)).numpy(), want)
    # explicit: weight 1 (scale 0.5), input 1 (scale 0.5): every output pixel is 0.5 * 0.5 * 2
    m = ennq.ConvTranspose2d(1, 1, 2, bias=False)
    m.set_weight_bias(ember.quantize_per_tensor(ember.full((1, 1, 2, 2), 0.5), 0.5, 0,
                                                ember.qint8), None)
    m.scale = 0.25
    xq = ember.quantize_per_tensor(ember.ones(1, 1, 1, 2), 0.5, 0, ember.quint8)
    assert m(xq).int_repr().tolist() == [[[[2, 4, 2], [2, 4, 2]]]]


def test_quantized_conv_transpose_1d_and_state_dict():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 7)
    with _engine("fbgemm"):
        tc, ec = _static_pair([torch.nn.ConvTranspose1d(3, 2, 3, stride=2, dilation=2)],
                              [nn.ConvTranspose1d(3, 2, 3, stride=2, dilation=2)], x)
        np.testing.assert_array_equal(ec(_e(x)).numpy(), tc(x).numpy())
        sd = _torch_save_load_ember(tc.state_dict())
    assert sd["1.weight"].shape == (3, 2, 3) and sd["1.weight"].qscheme() is \
        ember.per_tensor_affine
    ec.load_state_dict(sd)
    with pytest.raises(AssertionError, match="Per channel weight observer"):
        m = nn.Sequential(nn.ConvTranspose1d(2, 2, 2))
        m.qconfig = eq.get_default_qconfig("x86")
        eq.prepare(m)
    with pytest.raises(RuntimeError, match="per tensor"):
        ennq.ConvTranspose1d(2, 2, 2).set_weight_bias(
            ember.quantize_per_channel(ember.ones(2, 2, 2), ember.tensor([0.1, 0.2]),
                                       ember.tensor([0, 0]), 0, ember.qint8), None)


def test_quantized_layer_norm_batch_norm_and_activations_match_torch():
    torch.manual_seed(2)
    x = torch.randn(3, 4, 6) * 3
    tc, ec = _static_pair([torch.nn.LayerNorm([6])], [nn.LayerNorm([6])], x)
    assert type(ec[1]) is ennq.LayerNorm and ec[1]._get_name() == "QuantizedLayerNorm"
    # the integers agree; the output scale only as closely as the float LayerNorms the
    # observers saw during calibration (a few float32 ulps)
    got, want = ec[1](ec[0](_e(x))), tc[1](tc[0](x))
    assert got.int_repr().tolist() == want.int_repr().tolist()
    assert got.q_scale() == pytest.approx(want.q_scale(), rel=1e-6)
    assert list(ec.state_dict()) == list(tc.state_dict())
    x = torch.randn(64) * 4
    acts_t = [torch.nn.Hardswish(), torch.nn.LeakyReLU(0.2), torch.nn.ELU(0.7), torch.nn.ReLU6(),
              torch.nn.Sigmoid()]
    acts_e = [nn.Hardswish(), nn.LeakyReLU(0.2), nn.ELU(0.7), nn.ReLU6(), nn.Sigmoid()]
    tc, ec = _static_pair(acts_t, acts_e, x)
    assert [type(m).__name__ for m in ec] == [type(m).__name__ for m in tc]  # Sigmoid stays
    np.testing.assert_array_equal(ec(_e(x)).numpy(), tc(x).numpy())
    x = torch.randn(2, 3, 4, 4) * 4
    tc, ec = _static_pair([torch.nn.BatchNorm2d(3)], [nn.BatchNorm2d(3)], x)
    ec.load_state_dict(_torch_save_load_ember(tc.state_dict()))  # num_batches_tracked too
    np.testing.assert_array_equal(ec(_e(x)).numpy(), tc(x).numpy())


def test_quantized_sigmoid_and_softmax_modules():
    x = torch.tensor([[-2.0, 0.0, 0.5, 3.0]])
    tx = torch.quantize_per_tensor(x, 0.05, 40, torch.quint8)
    ex = ember.quantize_per_tensor(_e(x), 0.05, 40, ember.quint8)
    ts, es = tnnq.Sigmoid(1 / 256, 0), ennq.Sigmoid(1 / 256, 0)
    assert es(ex).int_repr().tolist() == ts(tx).int_repr().tolist() == [[31, 128, 159, 244]]
    tsm, esm = tnnq.Softmax(1, 1 / 256, 0), ennq.Softmax(1, 1 / 256, 0)
    assert esm(ex).int_repr().tolist() == tsm(tx).int_repr().tolist()


def _float_qparams_qconfigs(t_dtype, e_dtype):
    tobs = tq.PerChannelMinMaxObserver.with_args(
        dtype=t_dtype, qscheme=torch.per_channel_affine_float_qparams, ch_axis=0)
    eobs = eq.PerChannelMinMaxObserver.with_args(
        dtype=e_dtype, qscheme=ember.per_channel_affine_float_qparams, ch_axis=0)
    return (tq.QConfig(activation=tq.PlaceholderObserver.with_args(dtype=torch.float32),
                       weight=tobs),
            eq.QConfig(activation=eq.PlaceholderObserver.with_args(dtype=ember.float32),
                       weight=eobs))


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_embedding_matches_torch(bits):
    t_dtype, e_dtype = (torch.quint8, ember.quint8) if bits == 8 else \
        (torch.quint4x2, ember.quint4x2)
    qct, qce = _float_qparams_qconfigs(t_dtype, e_dtype)
    torch.manual_seed(3)
    te, ee = torch.nn.Sequential(torch.nn.Embedding(20, 8)), nn.Sequential(nn.Embedding(20, 8))
    _copy_weights(te, ee)
    te.qconfig, ee.qconfig = qct, qce
    tc, ec = tq.convert(tq.prepare(te)), eq.convert(eq.prepare(ee))
    if bits == 4:
        # torch's from_float builds a quint8 module around the 4-bit table (its forward then
        # fails); ember keeps the dtype. Compare with torch's module built for 4 bits.
        tc[0] = tnnq.Embedding(20, 8, dtype=t_dtype)
        tc[0].set_weight(_ember_save_load_torch(ec[0].weight()))
    assert type(ec[0]) is ennq.Embedding and ec[0].weight().dtype is e_dtype
    idx = torch.randint(0, 20, (3, 5))
    np.testing.assert_array_equal(ec(_e(idx)).numpy(), tc(idx).numpy())
    # the state dicts cross both ways
    ec.load_state_dict(_torch_save_load_ember(tc.state_dict()))
    tc.load_state_dict(_ember_save_load_torch(ec.state_dict()))
    np.testing.assert_array_equal(ec(_e(idx)).numpy(), tc(idx).numpy())
    with pytest.raises(IndexError, match="out of range"):
        ec(ember.tensor([20]))


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_embedding_bag_matches_torch(bits):
    t_dtype, e_dtype = (torch.quint8, ember.quint8) if bits == 8 else \
        (torch.quint4x2, ember.quint4x2)
    qct, qce = _float_qparams_qconfigs(t_dtype, e_dtype)
    torch.manual_seed(4)
    tb, eb = torch.nn.EmbeddingBag(20, 8, mode="sum"), nn.EmbeddingBag(20, 8, mode="sum")
    eb.weight.data = _e(tb.weight)
    tb.qconfig, eb.qconfig = qct, qce
    tbq, ebq = tnnq.EmbeddingBag.from_float(tb), ennq.EmbeddingBag.from_float(eb)
    ind, off, psw = torch.randint(0, 20, (30,)), torch.tensor([0, 4, 4, 19]), torch.rand(30)
    for args in ((ind, off), (ind, off, psw), (ind.reshape(5, 6),)):
        np.testing.assert_array_equal(ebq(*[_e(a) for a in args]).numpy(), tbq(*args).numpy())
    assert repr(ebq).replace("ember", "torch") == repr(tbq)
    with pytest.raises(NotImplementedError, match="mode='sum'"):
        ennq.EmbeddingBag(4, 2, mode="mean")
    with pytest.raises(ValueError, match="offsets"):
        ebq(ember.tensor([1, 2]), ember.tensor([1]))


def test_embedding_convert_with_default_mapping():
    m = nn.Sequential(nn.Embedding(5, 3), nn.EmbeddingBag(5, 3, mode="sum"))
    m.qconfig = eq.float_qparams_weight_only_qconfig
    q = eq.convert(eq.prepare(m))
    assert [type(c).__name__ for c in q] == ["Embedding", "EmbeddingBag"]
    assert q[0].weight().qscheme() is ember.per_channel_affine_float_qparams
    # explicit: a row's value is q * scale + (-zero_point * scale); zero_point = -min / scale
    e = ennq.Embedding(1, 3)
    e.set_weight(ember.quantize_per_channel(ember.tensor([[-1.0, 0.0, 2.0]]), ember.tensor([0.5]),
                                            ember.tensor([2.0]), 0, ember.quint8))
    assert e.weight().int_repr().tolist() == [[0, 2, 6]]
    assert e(ember.tensor([0])).tolist() == [[-1.0, 0.0, 2.0]]


# ---- 3. reference modules and the FX flow -----------------------------------------------------
def test_reference_linear_and_conv_match_torch():
    import ember.ao.nn.quantized.reference as er
    import torch.ao.nn.quantized.reference as tr
    from torch.ao.quantization.utils import get_qparam_dict as t_qparams

    torch.manual_seed(5)
    tl, el = torch.nn.Linear(5, 3), nn.Linear(5, 3)
    _copy_weights(tl, el)
    tobs, eobs = tq.default_per_channel_weight_observer(), eq.default_per_channel_weight_observer()
    tobs(tl.weight)
    eobs(el.weight)
    tm, em = tr.Linear.from_float(tl, t_qparams(tobs)), er.Linear.from_float(el, er.get_qparam_dict(eobs))
    assert em.get_quantized_weight().int_repr().tolist() == \
        tm.get_quantized_weight().int_repr().tolist()
    np.testing.assert_array_equal(em.get_weight().numpy(), tm.get_weight().detach().numpy())
    x = torch.randn(4, 5)
    np.testing.assert_allclose(em(_e(x)).detach().numpy(), tm(x).detach().numpy(), atol=1e-6)
    assert repr(em) == repr(tm) and list(em.state_dict()) == list(tm.state_dict())
    tc, ec = torch.nn.Conv2d(2, 3, 3), nn.Conv2d(2, 3, 3)
    _copy_weights(tc, ec)
    tobs, eobs = tq.default_weight_observer(), eq.default_weight_observer()
    tobs(tc.weight)
    eobs(ec.weight)
    tm, em = tr.Conv2d.from_float(tc, t_qparams(tobs)), er.Conv2d.from_float(ec, er.get_qparam_dict(eobs))
    x = torch.randn(2, 2, 5, 5)
    np.testing.assert_allclose(em(_e(x)).detach().numpy(), tm(x).detach().numpy(), atol=1e-6)
    em.load_state_dict(_torch_save_load_ember(tm.state_dict()))  # qscheme / dtype entries too
    assert em.weight_qscheme is ember.per_tensor_affine and em.weight_dtype is ember.qint8
    # explicit: weight 0.26 with scale 0.1 -> 3 -> 0.3
    lin = nn.Linear(1, 1)
    lin.weight.data = ember.tensor([[0.26]])
    ref = er.Linear.from_float(lin, {"qscheme": ember.per_tensor_affine, "dtype": ember.qint8,
                                     "scale": 0.1, "zero_point": 0})
    assert ref.get_weight().tolist() == [[pytest.approx(0.3)]]


def _fx_models():
    import ember.nn.functional as EF
    import torch.nn.functional as TF

    def make(lib, F):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.c, self.bn, self.r = lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3), lib.nn.ReLU()
                self.l0, self.l1, self.l2 = lib.nn.Linear(12, 12), lib.nn.Linear(12, 12), \
                    lib.nn.Linear(12, 4)
                self.r2 = lib.nn.ReLU()

            def forward(self, x):
                y = lib.flatten(self.r(self.bn(self.c(x))), 1)
                a = self.l0(y)
                b = self.r2(self.l1(a))
                z = F.relu(a + b)
                return self.l2(z).reshape(2, -1)

        return M().eval()

    torch.manual_seed(6)
    tm, em = make(torch, TF), make(ember, EF)
    _copy_weights(tm, em)
    return tm, em


@pytest.fixture(scope="module")
def _fx_prepared():
    """torch's and ember's FX-prepared and calibrated models (once: torch's first prepare_fx
    is slow)."""
    from ember.ao.quantization import quantize_fx as efx
    from torch.ao.quantization import quantize_fx as tfx

    tm, em = _fx_models()
    ex, cal = torch.randn(2, 2, 4, 4), torch.randn(16, 2, 4, 4)
    tp = tfx.prepare_fx(tm, tq.get_default_qconfig_mapping("x86"), (ex,))
    ep = efx.prepare_fx(em, eq.get_default_qconfig_mapping("x86"), (_e(ex),))
    # the same observers in the same places (shared ones counted once)
    t_obs = {id(m) for n, m in tp.named_modules() if "activation_post_process" in n}
    e_obs = {id(m) for n, m in ep.named_modules() if "activation_post_process" in n}
    assert len(e_obs) == len(t_obs) == 6
    tp(cal)
    ep(_e(cal))
    return tp, ep


@pytest.mark.parametrize("reference", [False, True])
def test_prepare_fx_convert_fx_match_torch(reference, _fx_prepared):
    import copy

    from ember.ao.quantization import quantize_fx as efx
    from torch.ao.quantization import quantize_fx as tfx

    tp, ep = (copy.deepcopy(m) for m in _fx_prepared)
    x = torch.randn(2, 2, 4, 4)
    if reference:
        tc, ec = tfx.convert_to_reference_fx(tp), efx.convert_to_reference_fx(ep)
        assert type(ec.get_submodule("l0")).__name__ == "Linear"
        assert ec.get_submodule("l0")._get_name() == "QuantizedLinear(Reference)"
    else:
        tc, ec = tfx.convert_fx(tp), efx.convert_fx(ep)
        kinds = {n: type(m).__name__ for n, m in ec.named_children()}
        assert kinds["c"] == "ConvReLU2d" and kinds["l1"] == "LinearReLU"
        assert kinds["l0"] == kinds["l2"] == "Linear"
        for name in ("c", "l0", "l1", "l2"):
            tmod, emod = tc.get_submodule(name), ec.get_submodule(name)
            assert emod.zero_point == tmod.zero_point
            assert emod.scale == pytest.approx(tmod.scale, rel=1e-6)
            assert emod.weight().int_repr().tolist() == tmod.weight().int_repr().tolist()
    want, got = tc(x).detach().numpy(), ec(_e(x)).detach().numpy()
    assert np.abs(got - want).max() < 1e-6  # the same integers (scales agree to float32 ulps)


def test_fx_flow_partial_qconfig_and_errors():
    from ember.ao.quantization import quantize_fx as efx

    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2)).eval()
    mapping = eq.QConfigMapping().set_global(eq.default_qconfig).set_module_name("2", None)
    p = efx.prepare_fx(m, mapping, (ember.randn(1, 3),))
    p(ember.randn(8, 3))
    q = efx.convert_fx(p)
    assert type(q.get_submodule("0")) is ennq.Linear
    assert type(q.get_submodule("2")) is nn.Linear  # left float by the mapping
    y = q(ember.randn(4, 3))
    assert isinstance(y, ember.Tensor) and y.shape == (4, 2)
    with pytest.raises(AssertionError, match="eval mode"):
        efx.prepare_fx(nn.Linear(2, 2), mapping, (ember.randn(1, 2),))
    with pytest.raises(TypeError, match="tuple"):
        efx.prepare_fx(m, mapping, ember.randn(1, 3))
    with pytest.raises(RuntimeError, match="prepare_fx"):
        efx.convert_fx(ember.fx.symbolic_trace(m))


# ---- 4. the shared module code prints as torch's modules do ------------------------------------
def test_quantized_module_reprs_match_torch():
    import ember.ao.nn.intrinsic.quantized as eiq
    import ember.ao.nn.quantized.dynamic as eqd
    import torch.ao.nn.intrinsic.quantized as tiq
    import torch.ao.nn.quantized.dynamic as tqd

    def both(make):
        return repr(make(ennq, eiq, eqd)).replace("ember.", "torch."), repr(make(tnnq, tiq, tqd))

    for make in (lambda q, i, d: q.Conv2d(2, 4, 3, padding=1, groups=2),
                 lambda q, i, d: q.Conv1d(2, 4, 3, dilation=2, bias=False),
                 lambda q, i, d: q.ConvTranspose2d(2, 2, 2, output_padding=1, stride=2),
                 lambda q, i, d: q.ConvTranspose1d(2, 2, 3, padding=1),
                 lambda q, i, d: q.Linear(2, 3), lambda q, i, d: i.LinearReLU(2, 2),
                 lambda q, i, d: i.ConvReLU1d(1, 1, 1), lambda q, i, d: q.Hardswish(0.1, 2),
                 lambda q, i, d: q.ELU(0.1, 2, 0.5), lambda q, i, d: q.LeakyReLU(0.1, 1),
                 lambda q, i, d: i.BNReLU2d(2), lambda q, i, d: d.LSTM(2, 3, num_layers=2),
                 lambda q, i, d: d.GRU(2, 2, bidirectional=True),
                 lambda q, i, d: q.Sigmoid(0.1, 0), lambda q, i, d: q.Softmax(1),
                 lambda q, i, d: q.LayerNorm(4, None, None, 0.1, 2),
                 lambda q, i, d: q.Embedding(3, 2), lambda q, i, d: q.EmbeddingBag(3, 2)):
        got, want = both(make)
        assert got == want


def test_dynamic_gru_uses_the_float_step():
    # the shared float GRU step: h' = n + z * (h - n), as PyTorch's cell
    import ember.ao.nn.quantized.dynamic as eqd

    torch.manual_seed(7)
    tg, eg = torch.nn.GRU(3, 4), nn.GRU(3, 4)
    _copy_weights(tg, eg)
    tg.qconfig = tq.default_dynamic_qconfig
    eg.qconfig = eq.default_dynamic_qconfig
    import torch.ao.nn.quantized.dynamic as tqd

    tq_gru, eq_gru = tqd.GRU.from_float(tg), eqd.GRU.from_float(eg)
    x = torch.randn(5, 2, 3)
    np.testing.assert_allclose(eq_gru(_e(x))[0].numpy(), tq_gru(x)[0].detach().numpy(),
                               atol=1e-5)


def test_quantized_group_norm_instance_norm_prelu_match_torch():
    torch.manual_seed(8)
    cases = (([torch.nn.GroupNorm(2, 4)], [nn.GroupNorm(2, 4)], torch.randn(2, 4, 3, 3) * 3),
             ([torch.nn.InstanceNorm2d(3, affine=True)], [nn.InstanceNorm2d(3, affine=True)],
              torch.randn(2, 3, 4, 4) * 2),
             ([torch.nn.InstanceNorm1d(3)], [nn.InstanceNorm1d(3)], torch.randn(2, 3, 6) * 2))
    for t_mods, e_mods, x in cases:
        tc, ec = _static_pair(t_mods, e_mods, x)
        assert type(ec[1]).__name__ == type(tc[1]).__name__
        got, want = ec[1](ec[0](_e(x))), tc[1](tc[0](x))
        # (the observers saw the float norms' outputs, equal to a few float32 ulps)
        assert got.q_scale() == pytest.approx(want.q_scale(), rel=1e-6)
        assert got.q_zero_point() == want.q_zero_point()
        assert got.int_repr().tolist() == want.int_repr().tolist()
    # PReLU: torch's kernel is right while the quint8 slope's integer stays below ~100 (it
    # halves positive outputs beyond: see the report); compare there, and explicit numbers
    x = torch.tensor([[-2.0, -0.8, 0.0, 1.0, 2.0, 4.0]])  # (no ties: -1.0 * 0.25 / 0.1 is
    # one, which torch's vectorized kernel rounds to 57, ember's float path to even 58)
    tx, ex = torch.quantize_per_tensor(x, 0.05, 100, torch.quint8), \
        ember.quantize_per_tensor(_e(x), 0.05, 100, ember.quint8)
    tp, ep = tnnq.PReLU(0.1, 60, 1), ennq.PReLU(0.1, 60, 1)
    tp.set_weight(torch.quantize_per_tensor(torch.tensor([0.25]), 0.01, 0, torch.quint8))
    ep.set_weight(ember.quantize_per_tensor(ember.tensor([0.25]), 0.01, 0, ember.quint8))
    assert ep(ex).int_repr().tolist() == tp(tx).int_repr().tolist()
    assert ep(ex).dequantize()[0].tolist() == pytest.approx([-0.5, -0.2, 0.0, 1.0, 2.0, 4.0])
    m = nn.Sequential(eq.QuantStub(), nn.PReLU(2), eq.DeQuantStub()).eval()
    m.qconfig = eq.default_qconfig
    p = eq.prepare(m)
    p(ember.randn(4, 2, 3))
    q = eq.convert(p)
    assert type(q[1]) is ennq.PReLU and q[1].weight.dtype is ember.quint8


def test_dynamic_quantized_state_dicts_cross():
    torch.manual_seed(9)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    em = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    _copy_weights(tm, em)
    tqm = tq.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)
    eqm = eq.quantize_dynamic(em, {nn.Linear}, dtype=ember.qint8)
    assert list(eqm.state_dict()) == list(tqm.state_dict())
    assert eqm.state_dict()._metadata["0"]["version"] == 4
    eqm.load_state_dict(_torch_save_load_ember(tqm.state_dict()))
    tqm.load_state_dict(_ember_save_load_torch(eqm.state_dict()))
    x = torch.randn(5, 4)
    # (the dynamic kernels' float rescaling agrees to a float32 ulp)
    np.testing.assert_allclose(eqm(_e(x)).numpy(), tqm(x).numpy(), rtol=1e-6, atol=1e-7)


def test_fx_fixed_qparams_and_scalar_ops_match_torch(_fx_prepared):
    from ember.ao.quantization import quantize_fx as efx
    from torch.ao.quantization import quantize_fx as tfx

    def make(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.l0, self.l1, self.l2 = lib.nn.Linear(8, 8), lib.nn.Linear(8, 8), \
                    lib.nn.Linear(8, 8)

            def forward(self, x):
                a = self.l0(x)
                b = self.l1(lib.sigmoid(a))  # fixed output parameters (1/256, 0)
                return self.l2(b + a * 2.0)  # a scalar mul shares a's observer

        return M().eval()

    torch.manual_seed(10)
    tm, em = make(torch), make(ember)
    _copy_weights(tm, em)
    ex, cal, x = torch.randn(2, 8), torch.randn(16, 8), torch.randn(4, 8)
    tp = tfx.prepare_fx(tm, tq.get_default_qconfig_mapping("x86"), (ex,))
    ep = efx.prepare_fx(em, eq.get_default_qconfig_mapping("x86"), (_e(ex),))
    tp(cal)
    ep(_e(cal))
    tc, ec = tfx.convert_fx(tp), efx.convert_fx(ep)
    assert ec.get_submodule("l0").scale == pytest.approx(tc.get_submodule("l0").scale, rel=1e-6)
    assert "sigmoid" in ec.code and "mul_scalar" in ec.code
    np.testing.assert_allclose(ec(_e(x)).numpy(), tc(x).numpy(), atol=1e-6)


def test_prepare_qat_fx_trains_and_converts_as_torch(_fx_prepared):
    from ember.ao.quantization import quantize_fx as efx
    from torch.ao.quantization import quantize_fx as tfx

    def make(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.l0, self.r, self.l1 = lib.nn.Linear(8, 8), lib.nn.ReLU(), lib.nn.Linear(8, 4)

            def forward(self, x):
                return self.l1(self.r(self.l0(x)) + x)

        return M().train()

    torch.manual_seed(11)
    tm, em = make(torch), make(ember)
    _copy_weights(tm, em)
    ex = torch.randn(2, 8)
    tp = tfx.prepare_qat_fx(tm, tq.get_default_qat_qconfig_mapping("x86"), (ex,))
    ep = efx.prepare_qat_fx(em, eq.get_default_qat_qconfig_mapping("x86"), (_e(ex),))
    assert type(ep.get_submodule("l0")).__name__ == "LinearReLU"  # the QAT fused module
    for _ in range(2):  # fake-quantized training forwards agree
        batch = torch.randn(16, 8)
        np.testing.assert_allclose(ep(_e(batch)).detach().numpy(), tp(batch).detach().numpy(),
                                   atol=1e-6)
    tc, ec = tfx.convert_fx(tp.eval()), efx.convert_fx(ep.eval())
    x = torch.randn(4, 8)
    np.testing.assert_allclose(ec(_e(x)).numpy(), tc(x).numpy(), atol=1e-6)
    with pytest.raises(AssertionError, match="training mode"):
        efx.prepare_qat_fx(make(ember).eval(), eq.get_default_qat_qconfig_mapping("x86"),
                           (_e(ex),))
