"""ember.nn.functional against torch.nn.functional: forward and backward with identical inputs."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from nn_helpers import assert_close, to_ember, to_np, to_torch

torch = pytest.importorskip("torch")
TF = torch.nn.functional
torch.set_num_threads(1)  # tiny problems: torch's thread pool only adds overhead here

RNG = np.random.default_rng(0)


def _rand(*shape, dtype="float64", positive=False):
    a = RNG.standard_normal(shape).astype(dtype)
    return np.abs(a) + 0.1 if positive else a


def _compare(fe, ft, arrays, *, tol=1e-10, grad=True, ints=()):
    """Runs fe on ember copies and ft on torch copies of arrays; compares outputs and grads."""
    ev = [to_ember(a, requires_grad=grad and i not in ints) for i, a in enumerate(arrays)]
    tv = [to_torch(a, requires_grad=grad and i not in ints) for i, a in enumerate(arrays)]
    eo, to = fe(*ev), ft(*tv)
    if isinstance(eo, tuple):
        eo, to = eo[0], to[0]
    assert tuple(eo.shape) == tuple(to.shape)
    assert_close(eo, to, rtol=tol, atol=tol)
    if grad:
        g = RNG.standard_normal(tuple(to.shape))
        eo.backward(to_ember(g.astype(to_np(to).dtype)))
        to.backward(to_torch(g.astype(to_np(to).dtype)))
        for i, (a, b) in enumerate(zip(ev, tv)):
            if i in ints:
                continue
            assert_close(a.grad, b.grad, rtol=tol, atol=tol)


ACTIVATIONS = [
    ("relu", {}), ("relu6", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {"alpha": 0.7}),
    ("selu", {}), ("celu", {"alpha": 1.3}), ("gelu", {}), ("gelu", {"approximate": "tanh"}),
    ("silu", {}), ("mish", {}), ("tanh", {}), ("sigmoid", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 0.7}), ("hardsigmoid", {}), ("hardswish", {}),
    ("softplus", {"beta": 2.0, "threshold": 3.0}), ("softsign", {}), ("logsigmoid", {}),
    ("softmax", {"dim": 1}), ("log_softmax", {"dim": 0}), ("softmin", {"dim": -1}),
    ("glu", {"dim": 1}), ("tanhshrink", {}), ("softshrink", {"lambd": 0.3}),
    ("hardshrink", {"lambd": 0.3}), ("normalize", {"dim": 1}),
]


@pytest.mark.parametrize("name,kw", ACTIVATIONS, ids=[f"{n}{k}" for n, k in ACTIVATIONS])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_activations(name, kw, dtype):
    x = _rand(3, 4, 5, dtype=dtype)
    tol = 1e-10 if dtype == "float64" else 1e-5
    if name in ("hardsigmoid", "celu"):
        # torch's float64 backward of these rounds a constant (1/6, 1/alpha) to float32;
        # ember's gradient is the exact one (checked against the closed form below)
        tol = max(tol, 1e-7)
    _compare(lambda t: getattr(F, name)(t, **kw), lambda t: getattr(TF, name)(t, **kw), [x],
             tol=tol)


def test_celu_hardsigmoid_gradients_are_exact():
    x = np.array([-1.0, -2.5, 0.5])
    e = to_ember(x, requires_grad=True)
    F.celu(e, 1.3).sum().backward()
    np.testing.assert_allclose(to_np(e.grad), np.where(x > 0, 1.0, np.exp(x / 1.3)), rtol=1e-15)
    h = to_ember(x, requires_grad=True)
    F.hardsigmoid(h).sum().backward()
    np.testing.assert_allclose(to_np(h.grad), np.full(3, 1 / 6), rtol=1e-15)


def test_inplace_activations_write_the_input():
    x = ember.tensor([-1.0, 2.0])
    assert F.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]
    y = ember.tensor([-2.0, 2.0])
    F.leaky_relu(y, 0.5, inplace=True)
    assert y.tolist() == [-1.0, 2.0]


def test_prelu_per_channel():
    _compare(F.prelu, TF.prelu, [_rand(2, 3, 4), _rand(3)])
    _compare(F.prelu, TF.prelu, [_rand(2, 3), _rand(1)])


def test_softmax_implicit_dim_warns():
    with pytest.warns(UserWarning, match="Implicit dimension"):
        F.softmax(ember.ones(2, 3))


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"dilation": 2, "groups": 2},
                                {"padding": "same"}])
def test_conv2d(kw):
    _compare(lambda x, w, b: F.conv2d(x, w, b, **kw), lambda x, w, b: TF.conv2d(x, w, b, **kw),
             [_rand(2, 4, 7, 6), _rand(6, 4 // kw.get("groups", 1), 3, 3), _rand(6)])


def test_conv1d_conv3d_and_transposed():
    _compare(lambda x, w: F.conv1d(x, w, stride=2, padding=1),
             lambda x, w: TF.conv1d(x, w, stride=2, padding=1), [_rand(2, 3, 9), _rand(4, 3, 3)])
    _compare(F.conv3d, TF.conv3d, [_rand(1, 2, 4, 4, 4), _rand(3, 2, 2, 2, 2)])
    _compare(lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, output_padding=1),
             lambda x, w, b: TF.conv_transpose1d(x, w, b, stride=2, output_padding=1),
             [_rand(2, 3, 5), _rand(3, 2, 3), _rand(2)])
    _compare(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, groups=1),
             lambda x, w: TF.conv_transpose2d(x, w, stride=2, padding=1),
             [_rand(1, 2, 4, 4), _rand(2, 3, 3, 3)])


def test_conv_bad_input_names_the_op():
    with pytest.raises(RuntimeError, match="conv2d"):
        F.conv2d(ember.ones(2, 3), ember.ones(4, 3, 3, 3))


def test_unfold_fold():
    _compare(lambda x: F.unfold(x, 2, padding=1, stride=2),
             lambda x: TF.unfold(x, 2, padding=1, stride=2), [_rand(2, 3, 5, 5)])
    _compare(lambda x: F.fold(x, (4, 5), 2), lambda x: TF.fold(x, (4, 5), 2), [_rand(2, 12, 12)])


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pools(ceil_mode):
    x = _rand(2, 3, 7, 6)
    _compare(lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=ceil_mode),
             lambda t: TF.max_pool2d(t, 3, 2, 1, ceil_mode=ceil_mode), [x])
    _compare(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=ceil_mode, count_include_pad=False),
             lambda t: TF.avg_pool2d(t, 3, 2, 1, ceil_mode=ceil_mode, count_include_pad=False),
             [x])
    _compare(lambda t: F.max_pool1d(t, 2, ceil_mode=ceil_mode),
             lambda t: TF.max_pool1d(t, 2, ceil_mode=ceil_mode), [_rand(2, 3, 7)])
    _compare(lambda t: F.avg_pool1d(t, 3, 1, 1), lambda t: TF.avg_pool1d(t, 3, 1, 1),
             [_rand(2, 3, 7)])


def test_pool_indices_and_adaptive():
    x = _rand(2, 3, 7, 6)
    eo, ei = F.max_pool2d(to_ember(x), 2, return_indices=True)
    to, ti = TF.max_pool2d(to_torch(x), 2, return_indices=True)
    assert_close(ei, ti)
    _compare(lambda t: F.adaptive_avg_pool2d(t, (3, None)),
             lambda t: TF.adaptive_avg_pool2d(t, (3, None)), [x])
    _compare(lambda t: F.adaptive_max_pool2d(t, 4), lambda t: TF.adaptive_max_pool2d(t, 4), [x])
    _compare(lambda t: F.adaptive_avg_pool1d(t, 3), lambda t: TF.adaptive_avg_pool1d(t, 3),
             [_rand(2, 3, 7)])
    _compare(lambda t: F.adaptive_max_pool1d(t, 3), lambda t: TF.adaptive_max_pool1d(t, 3),
             [_rand(2, 3, 7)])
    _compare(lambda t: F.lp_pool2d(t, 2, 2), lambda t: TF.lp_pool2d(t, 2, 2),
             [_rand(1, 2, 4, 4, positive=True)])


def test_norms():
    x = _rand(4, 6, 5)
    _compare(lambda t, w, b: F.layer_norm(t, (5,), w, b), lambda t, w, b: TF.layer_norm(t, (5,), w, b),
             [x, _rand(5), _rand(5)])
    _compare(lambda t, w, b: F.group_norm(t, 3, w, b), lambda t, w, b: TF.group_norm(t, 3, w, b),
             [x, _rand(6), _rand(6)])
    _compare(lambda t, w: F.rms_norm(t, (6, 5), w, 1e-6), lambda t, w: TF.rms_norm(t, (6, 5), w, 1e-6),
             [x, _rand(6, 5)])
    _compare(lambda t, w, b: F.instance_norm(t, weight=w, bias=b),
             lambda t, w, b: TF.instance_norm(t, weight=w, bias=b), [x, _rand(6), _rand(6)])
    _compare(lambda t: F.local_response_norm(t, 3), lambda t: TF.local_response_norm(t, 3), [x])


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_updates_running_stats(training):
    x = _rand(4, 3, 5)
    erm, erv = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    trm, trv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    w, b = _rand(3), _rand(3)
    _compare(lambda t, w_, b_: F.batch_norm(t, erm, erv, w_, b_, training, 0.3),
             lambda t, w_, b_: TF.batch_norm(t, trm, trv, w_, b_, training, 0.3), [x, w, b])
    assert_close(erm, trm)
    assert_close(erv, trv)


def test_batch_norm_one_value_per_channel():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(ember.ones(1, 3), None, None, training=True)


def test_dropout_statistics_and_eval():
    x = ember.ones(10000)
    y = F.dropout(x, 0.3)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.03
    assert_close(y[y != 0], ember.full([int((y != 0).sum().item())], 1 / 0.7), rtol=1e-6)
    assert F.dropout(x, 0.3, training=False) is x or F.dropout(x, 0.3, False).equal(x)
    z = F.dropout2d(ember.ones(8, 50, 3, 3), 0.5)
    per_channel = z.reshape(8, 50, 9)
    assert bool((per_channel.amax(2) == per_channel.amin(2)).all().item())
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)
    a = F.alpha_dropout(ember.randn(20000), 0.2, training=True)
    assert abs(a.mean().item()) < 0.05 and abs(a.std().item() - 1) < 0.05


def test_embedding_and_bag():
    w = _rand(10, 4)
    idx = np.array([[1, 2, 2], [0, 9, 1]])
    _compare(lambda w_, i: F.embedding(i, w_, padding_idx=2),
             lambda w_, i: TF.embedding(i, w_, padding_idx=2), [w, idx], ints=(1,))
    for mode in ("sum", "mean", "max"):
        _compare(lambda w_, i: F.embedding_bag(i, w_, mode=mode),
                 lambda w_, i: TF.embedding_bag(i, w_, mode=mode), [w, idx], ints=(1,))
    flat, offs = np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2])
    _compare(lambda w_, i, o: F.embedding_bag(i, w_, o, mode="sum"),
             lambda w_, i, o: TF.embedding_bag(i, w_, o, mode="sum"), [w, flat, offs], ints=(1, 2))
    with pytest.raises(IndexError, match="out of range"):
        F.embedding(ember.tensor([10]), to_ember(w))


def test_embedding_max_norm_renormalizes_rows():
    w = _rand(5, 3) * 10
    ew, tw = to_ember(w), to_torch(w)
    F.embedding(ember.tensor([0, 2]), ew, max_norm=1.0)
    TF.embedding(torch.tensor([0, 2]), tw, max_norm=1.0)
    assert_close(ew, tw, rtol=1e-6, atol=1e-6)


def test_one_hot():
    t = ember.tensor([[0, 3], [2, 1]])
    assert to_np(F.one_hot(t)).tolist() == TF.one_hot(torch.tensor([[0, 3], [2, 1]])).tolist()
    assert tuple(F.one_hot(t, 6).shape) == (2, 2, 6)
    with pytest.raises(RuntimeError, match="num_classes"):
        F.one_hot(t, 2)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode):
    x = _rand(2, 3, 5, 6)
    kw = {"value": 1.5} if mode == "constant" else {}
    _compare(lambda t: F.pad(t, (1, 2, 2, 1), mode=mode, **kw),
             lambda t: TF.pad(t, (1, 2, 2, 1), mode=mode, **kw), [x])
    if mode == "constant":
        _compare(lambda t: F.pad(t, (-1, 2)), lambda t: TF.pad(t, (-1, 2)), [x])


@pytest.mark.parametrize("mode,ac", [("nearest", None), ("nearest-exact", None),
                                     ("bilinear", False), ("bilinear", True)])
def test_interpolate_2d(mode, ac):
    x = _rand(2, 3, 5, 4)
    for kw in ({"size": (7, 9)}, {"scale_factor": 2}, {"scale_factor": (1.5, 0.5)}, {"size": 3}):
        _compare(lambda t: F.interpolate(t, mode=mode, align_corners=ac, **kw),
                 lambda t: TF.interpolate(t, mode=mode, align_corners=ac, **kw), [x])


def test_interpolate_linear_trilinear():
    _compare(lambda t: F.interpolate(t, size=9, mode="linear"),
             lambda t: TF.interpolate(t, size=9, mode="linear"), [_rand(2, 3, 5)])
    _compare(lambda t: F.interpolate(t, scale_factor=2, mode="trilinear", align_corners=True),
             lambda t: TF.interpolate(t, scale_factor=2, mode="trilinear", align_corners=True),
             [_rand(1, 2, 3, 3, 2)])


def test_pixel_shuffle_and_distances():
    _compare(lambda t: F.pixel_shuffle(t, 2), lambda t: TF.pixel_shuffle(t, 2), [_rand(2, 8, 3, 4)])
    _compare(lambda t: F.pixel_unshuffle(t, 2), lambda t: TF.pixel_unshuffle(t, 2),
             [_rand(2, 2, 4, 6)])
    _compare(F.cosine_similarity, TF.cosine_similarity, [_rand(4, 5), _rand(4, 5)])
    _compare(lambda a, b: F.pairwise_distance(a, b, 3.0), lambda a, b: TF.pairwise_distance(a, b, 3.0),
             [_rand(4, 5), _rand(4, 5)])
    _compare(F.pdist, TF.pdist, [_rand(5, 3)])


def _logp(*shape):
    return np.log(np.abs(_rand(*shape)) + 0.1)


LOSSES = [
    ("cross_entropy", lambda: [_rand(4, 5), RNG.integers(0, 5, 4)], {"label_smoothing": 0.1}, (1,)),
    ("cross_entropy", lambda: [_rand(4, 5, 3), RNG.integers(0, 5, (4, 3))], {}, (1,)),
    ("nll_loss", lambda: [_rand(4, 5), RNG.integers(0, 5, 4)], {"reduction": "sum"}, (1,)),
    ("mse_loss", lambda: [_rand(3, 4), _rand(3, 4)], {}, ()),
    ("l1_loss", lambda: [_rand(3, 4), _rand(3, 4)], {"reduction": "none"}, ()),
    ("smooth_l1_loss", lambda: [_rand(3, 4), _rand(3, 4)], {"beta": 0.5}, ()),
    ("huber_loss", lambda: [_rand(3, 4), _rand(3, 4)], {"delta": 0.7}, ()),
    ("binary_cross_entropy", lambda: [RNG.uniform(0.05, 0.95, (3, 4)), RNG.uniform(0, 1, (3, 4))],
     {}, ()),
    ("binary_cross_entropy_with_logits", lambda: [_rand(3, 4), RNG.uniform(0, 1, (3, 4))],
     {}, ()),
    ("kl_div", lambda: [_logp(3, 4), RNG.uniform(0, 1, (3, 4))], {"reduction": "batchmean"}, ()),
    ("poisson_nll_loss", lambda: [_rand(3, 4), RNG.uniform(0, 4, (3, 4))], {"full": True}, ()),
    ("poisson_nll_loss", lambda: [_rand(3, 4, positive=True), RNG.uniform(0, 4, (3, 4))],
     {"log_input": False}, ()),
    ("gaussian_nll_loss", lambda: [_rand(3, 4), _rand(3, 4), _rand(3, 4, positive=True)],
     {"full": True}, ()),
    ("gaussian_nll_loss", lambda: [_rand(3, 4), _rand(3, 4), _rand(3, 1, positive=True)], {}, ()),
    ("cosine_embedding_loss", lambda: [_rand(4, 5), _rand(4, 5), np.array([1.0, -1, 1, -1])],
     {"margin": 0.1}, (2,)),
    ("margin_ranking_loss", lambda: [_rand(6), _rand(6), np.sign(_rand(6))], {"margin": 0.2}, (2,)),
    ("triplet_margin_loss", lambda: [_rand(4, 5), _rand(4, 5), _rand(4, 5)], {"swap": True}, ()),
    ("hinge_embedding_loss", lambda: [_rand(6), np.sign(_rand(6))], {}, (1,)),
    ("soft_margin_loss", lambda: [_rand(6), np.sign(_rand(6))], {}, (1,)),
    ("multilabel_soft_margin_loss", lambda: [_rand(3, 4), RNG.integers(0, 2, (3, 4)) * 1.0], {}, (1,)),
    ("multi_margin_loss", lambda: [_rand(3, 4), RNG.integers(0, 4, 3)], {"p": 2, "margin": 0.5}, (1,)),
    ("multilabel_margin_loss", lambda: [_rand(2, 4), np.array([[3, 0, -1, 1], [1, 2, 3, -1]])],
     {}, (1,)),
]


@pytest.mark.parametrize("name,make,kw,ints", LOSSES, ids=[f"{n}-{i}" for i, (n, *_) in enumerate(LOSSES)])
def test_losses(name, make, kw, ints):
    arrays = make()
    _compare(lambda *a: getattr(F, name)(*a, **kw), lambda *a: getattr(TF, name)(*a, **kw), arrays,
             ints=ints)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss(reduction):
    t_len, n, c = 6, 2, 4
    logits = _rand(t_len, n, c)
    targets = np.array([[1, 2, 2], [3, 1, 0]])
    il, tl = [6, 5], [3, 2]
    # compared through log_softmax: torch's ctc backward returns the gradient with respect to
    # the logits under log_softmax (exp(lp) - posterior) rather than with respect to log_probs;
    # both agree on the gradient of the logits, which is what training uses
    _compare(lambda a, t: F.ctc_loss(a.log_softmax(2), t, il, tl, reduction=reduction),
             lambda a, t: TF.ctc_loss(a.log_softmax(2), t, il, tl, reduction=reduction),
             [logits, targets], ints=(1,), tol=1e-8)


def test_ctc_loss_impossible_alignment():
    lp = ember.zeros(2, 1, 3).log_softmax(2)
    targets = ember.tensor([[1, 1]])  # needs 3 steps (a blank between the repeats)
    assert F.ctc_loss(lp, targets, [2], [2], reduction="sum").item() == float("inf")
    assert F.ctc_loss(lp, targets, [2], [2], reduction="sum", zero_infinity=True).item() == 0.0


def test_loss_errors():
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(ember.ones(2), ember.ones(2), reduction="avg")
    with pytest.raises(ValueError, match="target size"):
        F.binary_cross_entropy(ember.full([2], 0.5), ember.ones(3))
    with pytest.raises(ValueError, match=r"expected input batch_size \(3\) to match target"):
        F.cross_entropy(ember.ones(3, 4), ember.tensor([0, 1]))


def test_sdpa():
    q, k, v = _rand(2, 3, 4, 8), _rand(2, 3, 5, 8), _rand(2, 3, 5, 6)
    _compare(F.scaled_dot_product_attention, TF.scaled_dot_product_attention, [q, k, v])
    q2 = _rand(2, 3, 5, 8)
    _compare(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, scale=0.3),
             lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, is_causal=True, scale=0.3),
             [q2, k, v])


def test_embedding_bag_options():
    w = _rand(10, 4)
    flat, offs = np.array([1, 2, 4, 5, 4, 3, 0]), np.array([0, 2, 5, 7])
    psw = _rand(7)
    _compare(lambda w_, i, o, p: F.embedding_bag(i, w_, o, mode="sum", per_sample_weights=p,
                                                 include_last_offset=True),
             lambda w_, i, o, p: TF.embedding_bag(i, w_, o, mode="sum", per_sample_weights=p,
                                                  include_last_offset=True),
             [w, flat, offs, psw], ints=(1, 2))
    _compare(lambda w_, i, o: F.embedding_bag(i, w_, o, mode="mean", padding_idx=4),
             lambda w_, i, o: TF.embedding_bag(i, w_, o, mode="mean", padding_idx=4),
             [w, flat, offs[:3]], ints=(1, 2))
    with pytest.raises(ValueError, match="offsets"):
        F.embedding_bag(ember.tensor([1, 2]), to_ember(w))


@pytest.mark.parametrize("kw", [
    {"scale_factor": 1.7, "mode": "nearest", "recompute_scale_factor": True},
    {"scale_factor": 0.6, "mode": "linear"},
    {"size": 11, "mode": "nearest-exact"},
    {"size": 4, "mode": "area"},
])
def test_interpolate_1d_options(kw):
    _compare(lambda t: F.interpolate(t, **kw), lambda t: TF.interpolate(t, **kw), [_rand(2, 3, 7)])


def test_interpolate_errors():
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(ember.ones(1, 1, 4))
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(ember.ones(1, 1, 4), size=8, align_corners=True)
    with pytest.raises(NotImplementedError, match="expects 4-D input"):  # torch's class
        F.interpolate(ember.ones(1, 1, 4), size=8, mode="bilinear")


def test_pad_errors_and_1d_modes():
    for mode in ("reflect", "replicate", "circular"):
        _compare(lambda t: F.pad(t, (3, 1), mode=mode), lambda t: TF.pad(t, (3, 1), mode=mode),
                 [_rand(2, 3, 5)])
    _compare(lambda t: F.pad(t, (1, 1, 1, 1, 1, 1), mode="replicate"),
             lambda t: TF.pad(t, (1, 1, 1, 1, 1, 1), mode="replicate"), [_rand(1, 2, 3, 3, 3)])
    with pytest.raises(RuntimeError, match="reflect padding"):
        F.pad(ember.ones(1, 1, 3), (3, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="even"):  # torch's class
        F.pad(ember.ones(1, 3), (1,))


@pytest.mark.parametrize("name,args", [("relu6", ()), ("elu", (1.0,)), ("selu", ()),
                                       ("celu", (1.0,)), ("hardtanh", (-1.0, 1.0)),
                                       ("hardsigmoid", ())])
def test_inplace_activations_write_into_input(name, args):
    x = ember.tensor([-3.0, -0.5, 0.5, 7.0])
    expected = getattr(F, name)(x.clone(), *args).tolist()
    out = getattr(F, name)(x, *args, inplace=True)
    assert out is x and x.tolist() == expected
