"""Regression tests for the gaps the fourth round of compat programs found: BN fusion
(torch.nn.utils.fusion), skip_init, convert_conv2d/3d_weight_memory_format,
consume_prefix_in_state_dict_if_present, AdaptiveLogSoftmaxWithLoss, torch._assert and
Tensor.new_empty_strided, each compared with torch."""

from __future__ import annotations

import collections

import ember
import numpy as np
import pytest
from ember.nn.modules.utils import consume_prefix_in_state_dict_if_present
from ember.nn.utils.fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)

torch = pytest.importorskip("torch")


def _copy(dst, src) -> None:
    """src's (torch) state into dst (ember)."""
    dst.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy())
                         for k, v in src.state_dict().items()})


def _trained_bn(tbn):
    with torch.no_grad():
        tbn.running_mean.uniform_(-1, 1)
        tbn.running_var.uniform_(0.5, 2)
        if tbn.weight is not None:
            tbn.weight.uniform_(0.5, 1.5)
            tbn.bias.uniform_(-1, 1)
    return tbn.eval()


@pytest.mark.parametrize("kind", ["conv1d", "conv2d", "conv2d_nobias", "conv3d", "convT2d",
                                  "bn_no_affine"])
def test_fuse_conv_bn_eval_matches_torch(kind):
    torch.manual_seed(0)
    n = {"conv1d": 1, "conv3d": 3}.get(kind, 2)
    if kind == "convT2d":
        tconv = torch.nn.ConvTranspose2d(3, 4, 3, stride=2)
        econv = ember.nn.ConvTranspose2d(3, 4, 3, stride=2)
    else:
        tconv = getattr(torch.nn, f"Conv{n}d")(3, 4, 3, bias=kind != "conv2d_nobias")
        econv = getattr(ember.nn, f"Conv{n}d")(3, 4, 3, bias=kind != "conv2d_nobias")
    tbn = _trained_bn(getattr(torch.nn, f"BatchNorm{n}d")(4, affine=kind != "bn_no_affine"))
    ebn = getattr(ember.nn, f"BatchNorm{n}d")(4, affine=kind != "bn_no_affine")
    _copy(econv, tconv)
    _copy(ebn, tbn)
    tconv.eval(), econv.eval(), ebn.eval()
    transpose = kind == "convT2d"
    tf = torch.nn.utils.fusion.fuse_conv_bn_eval(tconv, tbn, transpose=transpose)
    ef = fuse_conv_bn_eval(econv, ebn, transpose=transpose)
    assert isinstance(ef.weight, ember.nn.Parameter) and ef.bias is not None
    np.testing.assert_allclose(ef.weight.detach().numpy(), tf.weight.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ef.bias.detach().numpy(), tf.bias.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    x = np.random.default_rng(1).normal(size=(2, 3) + (6,) * n).astype(np.float32)
    np.testing.assert_allclose(ef(ember.from_numpy(x)).detach().numpy(),
                               ebn(econv(ember.from_numpy(x))).detach().numpy(), atol=1e-5)
    assert econv.bias is None or econv.bias is not ef.bias  # a copy: the original is unchanged


def test_fuse_linear_bn_eval_and_weights_match_torch():
    torch.manual_seed(0)
    tl, tbn = torch.nn.Linear(5, 3), _trained_bn(torch.nn.BatchNorm1d(3))
    el, ebn = ember.nn.Linear(5, 3), ember.nn.BatchNorm1d(3)
    _copy(el, tl)
    _copy(ebn, tbn)
    el.eval(), ebn.eval(), tl.eval()
    tf, ef = torch.nn.utils.fusion.fuse_linear_bn_eval(tl, tbn), fuse_linear_bn_eval(el, ebn)
    np.testing.assert_allclose(ef.weight.detach().numpy(), tf.weight.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ef.bias.detach().numpy(), tf.bias.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    w, b = fuse_linear_bn_weights(el.weight, None, ebn.running_mean, ebn.running_var, ebn.eps,
                                  ebn.weight, ebn.bias)
    tw, tb = torch.nn.utils.fusion.fuse_linear_bn_weights(
        tl.weight, None, tbn.running_mean, tbn.running_var, tbn.eps, tbn.weight, tbn.bias)
    np.testing.assert_allclose(b.detach().numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-6)
    w, b = fuse_conv_bn_weights(ember.ones(2, 1, 1), None, ember.zeros(2), ember.ones(2), 0.0,
                                None, None)
    assert not w.requires_grad and b.tolist() == [0.0, 0.0]  # as conv_w and conv_b


def test_fusion_refuses_training_mode():
    conv, bn = ember.nn.Conv2d(1, 2, 1), ember.nn.BatchNorm2d(2)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        fuse_conv_bn_eval(conv, bn)
    with pytest.raises(AssertionError, match="out_features must equal bn.num_features"):
        fuse_linear_bn_eval(ember.nn.Linear(2, 3).eval(), ember.nn.BatchNorm1d(4).eval())
    with pytest.raises(ValueError, match="track running statistics"):
        fuse_conv_bn_eval(conv.eval(), ember.nn.BatchNorm2d(2, track_running_stats=False).eval())


def test_skip_init():
    m = ember.nn.utils.skip_init(ember.nn.Conv2d, 2, 3, 3, bias=False)
    assert tuple(m.weight.shape) == (3, 2, 3, 3) and m.weight.device.type == "cpu"
    assert m.bias is None

    class NoDevice(ember.nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="must support a 'device' arg"):
        ember.nn.utils.skip_init(NoDevice, 2)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        ember.nn.utils.skip_init(dict)


def test_convert_conv_weight_memory_format():
    m = ember.nn.Sequential(ember.nn.Conv2d(2, 4, 3), ember.nn.ReLU(),
                            ember.nn.Sequential(ember.nn.ConvTranspose2d(4, 2, 2)))
    before = [p.detach().clone() for p in m.parameters()]
    out = ember.nn.utils.convert_conv2d_weight_memory_format(m, ember.channels_last)
    assert out is m
    assert m[0].weight.is_contiguous(memory_format=ember.channels_last)
    assert m[2][0].weight.is_contiguous(memory_format=ember.channels_last)
    assert isinstance(m[0].weight, ember.nn.Parameter)
    assert all(ember.equal(a, b) for a, b in zip(before, m.parameters()))
    m3 = ember.nn.utils.convert_conv3d_weight_memory_format(ember.nn.Conv3d(1, 2, 2),
                                                           ember.channels_last_3d)
    tm3 = torch.nn.utils.convert_conv3d_weight_memory_format(torch.nn.Conv3d(1, 2, 2),
                                                            torch.channels_last_3d)
    assert m3.weight.stride() == tm3.weight.stride()


def test_consume_prefix_matches_torch():
    tm = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    tsd = tm.state_dict()
    esd = collections.OrderedDict((k, ember.zeros(1)) for k in tsd)
    esd._metadata = collections.OrderedDict((k, dict(v)) for k, v in tsd._metadata.items())
    torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(tsd, "module.")
    consume_prefix_in_state_dict_if_present(esd, "module.")
    assert list(esd) == list(tsd) == ["0.weight", "0.bias"]
    assert list(esd._metadata) == list(tsd._metadata)
    plain = collections.OrderedDict(a=1)
    consume_prefix_in_state_dict_if_present(plain, "module.")  # nothing to strip
    assert list(plain) == ["a"]


def test_adaptive_log_softmax_matches_torch():
    torch.manual_seed(0)
    ta = torch.nn.AdaptiveLogSoftmaxWithLoss(12, 30, [4, 10, 20], div_value=2.0,
                                             head_bias=True)
    ea = ember.nn.AdaptiveLogSoftmaxWithLoss(12, 30, [4, 10, 20], div_value=2.0,
                                             head_bias=True)
    assert [n for n, _ in ea.named_parameters()] == [n for n, _ in ta.named_parameters()]
    _copy(ea, ta)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 12)).astype(np.float32)
    t = np.array([0, 3, 4, 9, 10, 19, 20, 29, 2])
    ex = ember.from_numpy(x).requires_grad_()
    tx = torch.from_numpy(x).requires_grad_()
    eo, to = ea(ex, ember.from_numpy(t)), ta(tx, torch.from_numpy(t))
    np.testing.assert_allclose(eo.output.detach().numpy(), to.output.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(eo.loss.item(), to.loss.item(), rtol=1e-6)
    eo.loss.backward()
    to.loss.backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), atol=1e-6)
    for (n, ep), (_, tp) in zip(ea.named_parameters(), ta.named_parameters()):
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), atol=1e-6, err_msg=n)
    np.testing.assert_allclose(ea.log_prob(ember.from_numpy(x)).detach().numpy(),
                               ta.log_prob(torch.from_numpy(x)).detach().numpy(), atol=1e-5)
    assert ea.predict(ember.from_numpy(x)).tolist() == ta.predict(torch.from_numpy(x)).tolist()
    one = ea(ember.from_numpy(x[0]), ember.tensor(5))  # unbatched
    assert one.output.shape == () and one.output.item() == pytest.approx(
        ta(torch.from_numpy(x[0]), torch.tensor(5)).output.item(), abs=1e-5)
    assert tuple(ea.log_prob(ember.from_numpy(x[0])).shape) == (30,)
    assert repr(ea) == repr(ta)


def test_adaptive_log_softmax_errors():
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive"):
        ember.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 3])
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive"):
        ember.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [10])
    asm = ember.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        asm(ember.randn(2, 4), ember.tensor([1, 10]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        asm(ember.randn(3, 4), ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected"):
        asm(ember.randn(2, 4), ember.tensor([[1], [2]]))
    with pytest.raises(RuntimeError, match=r"expected input of shape \(N, 4\)"):
        asm.log_prob(ember.randn(2, 5))


def test_assert_and_new_empty_strided():
    ember._assert(True, "fine")
    ember._assert(ember.tensor(1), "fine")
    with pytest.raises(AssertionError, match="expected NCHW"):
        ember._assert(False, "expected NCHW")
    x = ember.ones(2, dtype=ember.float64)
    y = x.new_empty_strided((2, 3), (1, 2))
    t = torch.ones(2, dtype=torch.float64).new_empty_strided((2, 3), (1, 2))
    assert y.stride() == t.stride() and y.dtype == ember.float64 and not y.requires_grad
    z = x.new_empty_strided([3], [2], dtype=ember.int32, requires_grad=False)
    assert z.dtype == ember.int32 and tuple(z.shape) == (3,)
    assert x.new_empty_strided((2,), (1,), requires_grad=True).requires_grad


@pytest.mark.parametrize("k,shape", [(1, (2, 3, 5)), (2, (2, 4, 4, 4)), (3, (2, 2, 3, 3, 3))])
@pytest.mark.parametrize("affine,stats", [(False, False), (True, True)])
def test_lazy_instance_norm_matches_torch(k, shape, affine, stats):
    e = getattr(ember.nn, f"LazyInstanceNorm{k}d")(affine=affine, track_running_stats=stats)
    t = getattr(torch.nn, f"LazyInstanceNorm{k}d")(affine=affine, track_running_stats=stats)
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    np.testing.assert_allclose(e(ember.from_numpy(x)).detach().numpy(),
                               t(torch.from_numpy(x)).detach().numpy(), atol=1e-5)
    assert type(e).__name__ == f"InstanceNorm{k}d" and list(e.state_dict()) == list(t.state_dict())
    if affine:  # (with nothing to materialize torch leaves num_features at 0)
        assert repr(e) == repr(t)
    if stats:
        np.testing.assert_allclose(e.running_var.numpy(), t.running_var.numpy(), rtol=1e-5)


def test_lazy_instance_norm_unbatched_and_errors():
    m = ember.nn.LazyInstanceNorm2d()
    assert tuple(m(ember.randn(3, 4, 4)).shape) == (3, 4, 4) and m.num_features == 3
    with pytest.raises(ValueError, match=r"expected 3D \(unbatched\) or 4D input"):
        ember.nn.LazyInstanceNorm2d()(ember.randn(4, 4))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("kw", [dict(size=(4, 5)), dict(size=(20, 3)), dict(scale_factor=0.37),
                                dict(scale_factor=(0.5, 2.3)), dict(size=(1, 1))])
def test_interpolate_antialias_matches_torch(mode, align_corners, kw):
    # torchvision's Resize(antialias=True) on tensors goes through this
    img = np.random.default_rng(0).normal(size=(2, 3, 17, 13)).astype(np.float32)
    t = torch.nn.functional.interpolate(torch.from_numpy(img), mode=mode, antialias=True,
                                        align_corners=align_corners, **kw)
    e = ember.nn.functional.interpolate(ember.from_numpy(img), mode=mode, antialias=True,
                                        align_corners=align_corners, **kw)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


def test_interpolate_antialias_gradient_and_errors():
    x = np.random.default_rng(1).normal(size=(1, 2, 12, 12))
    g = np.random.default_rng(2).normal(size=(1, 2, 5, 7))
    tx = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.interpolate(tx, size=(5, 7), mode="bicubic", antialias=True).backward(
        torch.from_numpy(g))
    ex = ember.from_numpy(x).requires_grad_()
    ember.nn.functional.interpolate(ex, size=(5, 7), mode="bicubic", antialias=True).backward(
        ember.from_numpy(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="anti-alias option is restricted to bilinear and bicubic"):
        ember.nn.functional.interpolate(ember.ones(1, 1, 4, 4), size=2, antialias=True)
    # uint8 images resize as in torch (was refused)
    r = ember.nn.functional.interpolate(ember.ones(1, 1, 4, 4, dtype=ember.uint8), size=2,
                                        mode="bilinear", antialias=True)
    assert r.dtype is ember.uint8 and r.tolist() == [[[[1, 1], [1, 1]]]]


def test_nn_modules_utils_is_an_attribute():
    # torch.nn.modules.utils._pair(...) works without importing the submodule
    assert ember.nn.modules.utils._pair(3) == torch.nn.modules.utils._pair(3) == (3, 3)
