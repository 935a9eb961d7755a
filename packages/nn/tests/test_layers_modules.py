"""The layer modules against torch.nn with identical weights: forward, backward, train/eval,
running statistics, reprs and shape errors that name the module path."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn
from nn_helpers import assert_close, copy_weights, to_ember, to_torch

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # tiny problems: torch's thread pool only adds overhead here

RNG = np.random.default_rng(1)

CASES = [
    ("Conv1d", (3, 4, 3), {"stride": 2, "padding": 1}, (2, 3, 9)),
    ("Conv2d", (4, 6, 3), {"groups": 2, "padding": "same"}, (2, 4, 6, 5)),
    ("Conv2d", (3, 4, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 3, 6, 5)),
    ("Conv2d", (3, 4, 3), {"padding": 2, "padding_mode": "circular"}, (2, 3, 6, 5)),
    ("Conv2d", (3, 4, 2), {"padding": 1, "padding_mode": "replicate", "bias": False}, (2, 3, 4, 4)),
    ("Conv3d", (2, 3, 2), {}, (1, 2, 3, 4, 4)),
    ("ConvTranspose1d", (3, 2, 3), {"stride": 2}, (2, 3, 5)),
    ("ConvTranspose2d", (3, 2, 3), {"stride": 2, "output_padding": 1}, (2, 3, 4, 4)),
    ("BatchNorm1d", (3,), {}, (4, 3, 5)),
    ("BatchNorm1d", (3,), {"momentum": None}, (6, 3)),
    ("BatchNorm2d", (3,), {"affine": False}, (4, 3, 2, 2)),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (4, 3, 2, 2)),
    ("LayerNorm", ((4, 5),), {}, (3, 4, 5)),
    ("GroupNorm", (2, 4), {}, (3, 4, 5)),
    ("RMSNorm", (5,), {"eps": 1e-6}, (3, 5)),
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 4, 4)),
    ("PReLU", (3,), {}, (2, 3, 4)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 7, 7)),
    ("AvgPool2d", (2,), {}, (2, 3, 6, 6)),
    ("AdaptiveAvgPool2d", ((2, 3),), {}, (2, 3, 7, 7)),
    ("AdaptiveMaxPool2d", (2,), {}, (2, 3, 7, 7)),
    ("Upsample", (), {"scale_factor": 2, "mode": "bilinear"}, (1, 2, 3, 3)),
    ("UpsamplingBilinear2d", (), {"size": (5, 4)}, (1, 2, 3, 3)),
    ("PixelShuffle", (2,), {}, (1, 8, 2, 2)),
    ("ReflectionPad2d", ((1, 2, 0, 1),), {}, (1, 2, 3, 4)),
    ("ZeroPad2d", (1,), {}, (1, 2, 3, 4)),
    ("GELU", (), {"approximate": "tanh"}, (3, 4)),
    ("Softmax", (), {"dim": 1}, (3, 4)),
    ("GLU", (), {}, (3, 4)),
    ("Conv1d", (2, 4, 3), {"padding": 2, "padding_mode": "circular", "dilation": 2}, (2, 2, 7)),
    ("Conv1d", (2, 4, 4), {"padding": "same", "padding_mode": "reflect"}, (2, 2, 7)),
    ("Conv2d", (4, 4, 3), {"groups": 4, "stride": (2, 1)}, (2, 4, 7, 6)),
    ("BatchNorm3d", (2,), {"momentum": 0.5}, (3, 2, 2, 2, 2)),
    ("LayerNorm", (5,), {"bias": False}, (3, 5)),
    ("GroupNorm", (1, 4), {"affine": False}, (3, 4, 5)),
    ("InstanceNorm1d", (3,), {}, (3, 5)),
    ("InstanceNorm1d", (3,), {"affine": True}, (2, 3, 5)),
    ("LocalResponseNorm", (3,), {}, (2, 5, 4, 4)),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "dilation": 1}, (2, 3, 9)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 9)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "divisor_override": 4},
     (2, 3, 7, 7)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 9)),
    ("AdaptiveMaxPool1d", (4,), {}, (2, 3, 9)),
    ("LPPool1d", (2, 3), {}, (2, 3, 9)),
    ("Upsample", (), {"size": (5, 7), "mode": "nearest"}, (1, 2, 3, 3)),
    ("Upsample", (), {"scale_factor": 1.7, "mode": "linear", "align_corners": True}, (1, 2, 5)),
    ("UpsamplingNearest2d", (), {"scale_factor": 3}, (1, 2, 3, 2)),
    ("PixelUnshuffle", (2,), {}, (1, 2, 4, 6)),
    ("ReflectionPad1d", (2,), {}, (2, 3, 5)),
    ("ReplicationPad2d", ((2, 0, 1, 3),), {}, (2, 3, 4, 4)),
    ("ReplicationPad3d", (1,), {}, (1, 2, 3, 3, 3)),
    ("CircularPad2d", (1,), {}, (2, 3, 4, 4)),
    ("ConstantPad1d", ((2, -1), 3.5), {}, (2, 3, 5)),
    ("ConstantPad3d", (1, -2.0), {}, (1, 2, 2, 2, 2)),
    ("ZeroPad1d", ((1, 2),), {}, (2, 3)),
    ("ReLU", (), {}, (3, 4)),
    ("ReLU6", (), {}, (3, 4)),
    ("LeakyReLU", (0.3,), {}, (3, 4)),
    ("PReLU", (), {"init": 0.1}, (3, 4)),
    ("ELU", (0.5,), {}, (3, 4)),
    ("SELU", (), {}, (3, 4)),
    ("CELU", (2.0,), {}, (3, 4)),
    ("SiLU", (), {}, (3, 4)),
    ("Mish", (), {}, (3, 4)),
    ("Tanh", (), {}, (3, 4)),
    ("Sigmoid", (), {}, (3, 4)),
    ("Hardtanh", (-0.5, 0.5), {}, (3, 4)),
    ("Hardswish", (), {}, (3, 4)),
    ("Softplus", (), {"beta": 2.0}, (3, 4)),
    ("Softsign", (), {}, (3, 4)),
    ("LogSigmoid", (), {}, (3, 4)),
    ("LogSoftmax", (), {"dim": 0}, (3, 4)),
    ("Softmin", (), {"dim": 1}, (3, 4)),
    ("Softmax2d", (), {}, (2, 3, 2, 2)),
    ("Threshold", (0.1, -2.0), {}, (3, 4)),
    ("Tanhshrink", (), {}, (3, 4)),
    ("Softshrink", (0.2,), {}, (3, 4)),
    ("Hardshrink", (0.2,), {}, (3, 4)),
    ("Identity", (), {}, (3, 4)),
    ("RReLU", (0.1, 0.3), {}, (3, 4)),
    ("Unfold", (2,), {"padding": 1, "stride": 2}, (2, 3, 5, 5)),
    ("Fold", ((4, 5), 2), {}, (2, 12, 12)),
    ("Upsample", (), {"size": (3, 2), "mode": "area"}, (1, 2, 7, 5)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kw,shape", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_module_matches_torch(name, args, kw, shape, dtype):
    # RReLU draws random slopes in training: compared in eval mode only (its training mode
    # is tested statistically below)
    em = getattr(nn, name)(*args, **kw)
    tm = getattr(torch.nn, name)(*args, **kw)
    em, tm = (em.double(), tm.double()) if dtype == "float64" else (em, tm)
    copy_weights(em, tm)
    assert repr(em) == repr(tm)
    tol = 1e-9 if dtype == "float64" else 2e-5
    for training in ((True, False, True) if name != "RReLU" else (False,)):
        em.train(training)
        tm.train(training)
        x = RNG.standard_normal(shape).astype(dtype)
        ex, tx = to_ember(x, True), to_torch(x, True)
        eo, to = em(ex), tm(tx)
        assert_close(eo, to, rtol=tol, atol=tol)
        g = RNG.standard_normal(tuple(to.shape)).astype(dtype)
        eo.backward(to_ember(g))
        to.backward(to_torch(g))
        assert_close(ex.grad, tx.grad, rtol=tol, atol=tol)
        for (n, ep), (_, tp) in zip(em.named_parameters(), tm.named_parameters()):
            assert_close(ep.grad, tp.grad, rtol=tol, atol=tol)
            ep.grad = None
            tp.grad = None
        # running statistics and num_batches_tracked follow torch's
        for (n, eb), (_, tb) in zip(em.named_buffers(), tm.named_buffers()):
            assert_close(eb, tb, rtol=tol, atol=tol)


def test_default_init_statistics_match_torch():
    conv = nn.Conv2d(16, 32, 3)
    bound = 1 / np.sqrt(16 * 9)
    w = conv.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    emb = nn.Embedding(1000, 8, padding_idx=3)
    assert emb.weight[3].abs().sum().item() == 0
    assert abs(emb.weight.std().item() - 1) < 0.05
    bn = nn.BatchNorm2d(4)
    assert bn.weight.tolist() == [1.0] * 4 and bn.num_batches_tracked.dtype == ember.int64


def test_embedding_matches_torch_and_padding_gets_no_grad():
    em = nn.Embedding(10, 3, padding_idx=0).double()
    tm = torch.nn.Embedding(10, 3, padding_idx=0).double()
    copy_weights(em, tm)
    idx = np.array([[0, 2, 4], [4, 0, 9]])
    eo = em(ember.from_numpy(idx))
    to = tm(torch.from_numpy(idx))
    assert_close(eo, to)
    eo.sum().backward()
    to.sum().backward()
    assert_close(em.weight.grad, tm.weight.grad)
    assert em.weight.grad[0].abs().sum().item() == 0


def test_losses_modules():
    x, t = RNG.standard_normal((4, 5)), RNG.integers(0, 5, 4)
    w = np.abs(RNG.standard_normal(5))
    e = nn.CrossEntropyLoss(weight=ember.from_numpy(w), label_smoothing=0.2)(to_ember(x), ember.from_numpy(t))
    r = torch.nn.CrossEntropyLoss(weight=torch.from_numpy(w), label_smoothing=0.2)(
        to_torch(x), torch.from_numpy(t))
    assert_close(e, r, rtol=1e-10, atol=1e-10)
    assert "weight" in dict(nn.NLLLoss(weight=ember.ones(3)).named_buffers())


def test_dropout_modules_train_eval():
    d = nn.Dropout(0.5)
    x = ember.ones(1000)
    assert (d(x) == 0).any().item()
    d.eval()
    assert d(x).equal(x)
    assert repr(nn.Dropout2d(0.2)) == "Dropout2d(p=0.2, inplace=False)"


def test_wrong_shape_error_names_module_path():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4, 2))
    with pytest.raises(Exception) as info:
        model(ember.zeros(1, 3, 5, 5))
    assert info.value.__notes__[0].startswith(("in model.0 (", "in model.3 ("))
    with pytest.raises(ValueError, match="BatchNorm2d"):
        nn.BatchNorm2d(3)(ember.zeros(2, 3))


def _arr(kind, shape):
    if kind == "prob":
        return RNG.uniform(0.05, 0.95, shape)
    if kind == "pos":
        return np.abs(RNG.standard_normal(shape)) + 0.1
    if kind == "sign":
        return np.sign(RNG.standard_normal(shape))
    if kind.startswith("int"):
        return RNG.integers(0, int(kind[3:]), shape)
    return RNG.standard_normal(shape)


LOSS_CASES = [
    ("L1Loss", {}, [("f", (3, 4)), ("f", (3, 4))]),
    ("MSELoss", {"reduction": "sum"}, [("f", (3, 4)), ("f", (3, 4))]),
    ("CrossEntropyLoss", {"ignore_index": 2}, [("f", (6, 4)), ("int4", (6,))]),
    ("CrossEntropyLoss", {"reduction": "none"}, [("f", (3, 4)), ("prob", (3, 4))]),
    ("NLLLoss", {}, [("f", (3, 4, 2)), ("int4", (3, 2))]),
    ("SmoothL1Loss", {"beta": 0.3}, [("f", (3, 4)), ("f", (3, 4))]),
    ("HuberLoss", {"delta": 0.4, "reduction": "none"}, [("f", (3, 4)), ("f", (3, 4))]),
    ("BCELoss", {}, [("prob", (3, 4)), ("prob", (3, 4))]),
    ("BCEWithLogitsLoss", {}, [("f", (3, 4)), ("prob", (3, 4))]),
    ("KLDivLoss", {"reduction": "batchmean", "log_target": True}, [("f", (3, 4)), ("f", (3, 4))]),
    ("PoissonNLLLoss", {"full": True}, [("f", (3, 4)), ("pos", (3, 4))]),
    ("GaussianNLLLoss", {}, [("f", (3, 4)), ("f", (3, 4)), ("pos", (3, 4))]),
    ("CosineEmbeddingLoss", {"margin": 0.2}, [("f", (3, 4)), ("f", (3, 4)), ("sign", (3,))]),
    ("MarginRankingLoss", {"margin": 0.1}, [("f", (5,)), ("f", (5,)), ("sign", (5,))]),
    ("TripletMarginLoss", {"p": 1.0}, [("f", (3, 4)), ("f", (3, 4)), ("f", (3, 4))]),
    ("TripletMarginWithDistanceLoss", {"swap": True}, [("f", (3, 4)), ("f", (3, 4)), ("f", (3, 4))]),
    ("HingeEmbeddingLoss", {"margin": 0.5}, [("f", (3, 4)), ("sign", (3, 4))]),
    ("SoftMarginLoss", {}, [("f", (3, 4)), ("sign", (3, 4))]),
    ("MultiLabelSoftMarginLoss", {}, [("f", (3, 4)), ("int2", (3, 4))]),
    ("MultiMarginLoss", {"margin": 0.7}, [("f", (3, 4)), ("int4", (3,))]),
]


@pytest.mark.parametrize("name,kw,spec", LOSS_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LOSS_CASES)])
def test_loss_modules_match_torch(name, kw, spec):
    arrays = [_arr(k, s) for k, s in spec]
    grad_ix = [i for i, (k, _) in enumerate(spec) if k in ("f", "prob", "pos") and i == 0]
    ev = [to_ember(a, i in grad_ix) for i, a in enumerate(arrays)]
    tv = [to_torch(a, i in grad_ix) for i, a in enumerate(arrays)]
    if name == "MultiLabelSoftMarginLoss":
        ev[1], tv[1] = ev[1].double(), tv[1].double()
    eo = getattr(nn, name)(**kw)(*ev)
    to = getattr(torch.nn, name)(**kw)(*tv)
    assert_close(eo, to, rtol=1e-10, atol=1e-10)
    eo.sum().backward()
    to.sum().backward()
    for i in grad_ix:
        assert_close(ev[i].grad, tv[i].grad, rtol=1e-10, atol=1e-10)


def test_embedding_bag_module_and_from_pretrained():
    em = nn.EmbeddingBag(10, 3, mode="max").double()
    tm = torch.nn.EmbeddingBag(10, 3, mode="max").double()
    copy_weights(em, tm)
    assert repr(em) == repr(tm)
    idx, off = np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4])
    eo = em(ember.from_numpy(idx), ember.from_numpy(off))
    to = tm(torch.from_numpy(idx), torch.from_numpy(off))
    assert_close(eo, to)
    eo.sum().backward()
    to.sum().backward()
    assert_close(em.weight.grad, tm.weight.grad)
    pre = nn.Embedding.from_pretrained(ember.ones(4, 2, dtype=ember.float64), padding_idx=1)
    assert not pre.weight.requires_grad and pre.padding_idx == 1


def test_embedding_max_norm_module():
    em = nn.Embedding(6, 4, max_norm=0.5).double()
    tm = torch.nn.Embedding(6, 4, max_norm=0.5).double()
    copy_weights(em, tm)
    idx = np.array([0, 3, 3, 5])
    assert_close(em(ember.from_numpy(idx)), tm(torch.from_numpy(idx)), rtol=1e-6, atol=1e-6)
    assert_close(em.weight, tm.weight, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layer,bad", [
    (lambda: nn.Conv2d(3, 4, 3), (2, 5, 8, 8)),
    (lambda: nn.LayerNorm(6), (2, 5)),
    (lambda: nn.BatchNorm1d(4), (2, 3)),
    (lambda: nn.GroupNorm(2, 4), (2, 6, 3)),
    (lambda: nn.MaxPool2d(2), (4,)),
])
def test_bad_input_names_module_path(layer, bad):
    model = nn.Sequential(nn.Identity(), layer())
    with pytest.raises((RuntimeError, ValueError)) as info:
        model(ember.zeros(*bad))
    assert info.value.__notes__[0].startswith("in model.1 (")
    assert str(tuple(bad)) in str(info.value)  # the received shape is named


def test_rrelu_training_slopes_lie_in_range():
    m = nn.RReLU(0.1, 0.3)
    x = -ember.ones(10000)
    y = m(x)
    assert bool(((y <= -0.1) & (y >= -0.3)).all().item())
    assert abs(y.mean().item() + 0.2) < 0.01
    assert m(ember.tensor([2.0])).tolist() == [2.0]
