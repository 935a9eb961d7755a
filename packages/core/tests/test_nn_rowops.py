"""The row-wise nn kernels: softmax / log_softmax (last and strided dims) and their backward,
the fused cross entropy over class indices (forward, backward, double backward), nll_loss's
parallel reductions and layer / RMS norm over many rows -- values against torch, on one and two
threads (the fused SGD step is tested in packages/nn/tests/test_optim_sgd_vec.py)."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch
from ember.autograd import gradcheck, gradgradcheck

F = torch.nn.functional if torch is not None else None


def rnd(*shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def close(e, t, dtype="float32", **kw):
    k = dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    k.update(kw)
    t = t.detach().numpy() if hasattr(t, "detach") else t
    np.testing.assert_allclose(e.detach().numpy(), t, **k)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = ember.get_num_threads()
    ember.set_num_threads(request.param)
    yield request.param
    ember.set_num_threads(old)


# ---- softmax --------------------------------------------------------------------------------

SOFTMAX_CASES = [((300, 37), -1), ((64, 1024), 1), ((5, 1), 1), ((4, 9, 33), 1),
                 ((3, 70, 5), 1), ((2, 6, 3, 17), 1), ((40, 3), 0), ((3, 4, 100), 0)]


@needs_torch
@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
def test_softmax_rows_and_strided_dims_match_torch(shape, dim, threads):
    a = rnd(*shape) * 5
    e, t = ember.tensor(a), torch.tensor(a)
    g = rnd(*shape, seed=1)
    for log in (False, True):
        fe = ember.log_softmax if log else ember.softmax
        ft = torch.log_softmax if log else torch.softmax
        ye, yt = fe(e, dim), ft(t, dim)
        close(ye, yt)
        bwe = ember._C._log_softmax_backward_data if log else ember._C._softmax_backward_data
        bwt = torch._log_softmax_backward_data if log else torch._softmax_backward_data
        close(bwe(ember.tensor(g), ye, dim), bwt(torch.tensor(g), yt, dim, torch.float32),
              atol=1e-5)


@needs_torch
def test_softmax_non_contiguous_nan_and_inf_columns(threads):
    a = rnd(6, 40, 9) * 3
    a[1, :, 2] = -np.inf  # a whole column of -inf: softmax nan as torch
    a[2, 5, 4] = np.nan  # a NaN poisons its column only
    a[3, 7, :] = np.inf
    e, t = ember.tensor(a), torch.tensor(a)
    for dim in (0, 1, 2):
        for f in ("softmax", "log_softmax"):
            r, q = getattr(ember, f)(e, dim).numpy(), getattr(torch, f)(t, dim).numpy()
            np.testing.assert_array_equal(np.isnan(r), np.isnan(q))
            np.testing.assert_allclose(r, q, rtol=2e-5, atol=2e-6)
    # a transposed (non-contiguous) input
    x = rnd(33, 20)
    close(ember.softmax(ember.tensor(x).t(), 0), torch.softmax(torch.tensor(x).t(), 0))
    close(ember.log_softmax(ember.tensor(x).t(), 1), torch.log_softmax(torch.tensor(x).t(), 1))
    assert ember.softmax(ember.zeros(0, 5), 0).shape == (0, 5)


@needs_torch
def test_softmax_strided_autograd_matches_torch():
    a = rnd(4, 13, 21)
    e = ember.tensor(a).requires_grad_()
    t = torch.tensor(a).requires_grad_()
    g = rnd(4, 13, 21, seed=3)
    (ember.softmax(e, 1) * ember.tensor(g)).sum().backward()
    (torch.softmax(t, 1) * torch.tensor(g)).sum().backward()
    close(e.grad, t.grad, atol=1e-6)


# ---- fused cross entropy --------------------------------------------------------------------

def _targets(shape, c, seed=1, ignore=None):
    t = np.random.default_rng(seed).integers(0, c, shape)
    if ignore is not None and t.size > 1:
        t.flat[:: max(1, t.size // 3)] = ignore
    return t


CE_SHAPES = [(7,), (37, 7), (5, 7, 3), (3, 7, 2, 3), (300, 1000)]


def _loss_and_grad_close(le, lt, e, t, dtype):
    """ember's loss le (of leaf e) matches torch's lt (of leaf t), and so do the gradients
    after both take the same random grad_output."""
    close(le, lt, dtype, rtol=1e-4 if dtype == "float32" else 1e-10)
    go = rnd(*lt.shape, seed=9, dtype=dtype)
    le.backward(ember.tensor(go))
    lt.backward(torch.tensor(go))
    close(e.grad, t.grad, dtype, atol=1e-6 if dtype == "float32" else 1e-12)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_all_options_match_torch(dtype, shape, reduction, weighted, smoothing):
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0], *shape[2:])
    a = rnd(*shape, dtype=dtype) * 3
    tg = _targets(tshape, c, ignore=2 if len(shape) > 1 else None)
    w = np.random.default_rng(5).uniform(0.2, 2.0, c).astype(dtype) if weighted else None
    e = ember.tensor(a).requires_grad_()
    t = torch.tensor(a).requires_grad_()
    kw = dict(reduction=reduction, ignore_index=2, label_smoothing=smoothing)
    le = ember.cross_entropy(e, ember.tensor(tg), None if w is None else ember.tensor(w), **kw)
    lt = F.cross_entropy(t, torch.tensor(tg), None if w is None else torch.tensor(w), **kw)
    _loss_and_grad_close(le, lt, e, t, dtype)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 7, 3), (3, 7, 2, 3)], ids=str)
def test_fused_op_with_spatial_dims_matches_torch(dtype, shape):
    # cross_entropy sends spatial inputs through log_softmax + nll_loss (faster there); the
    # fused op still accepts them, with the classes strided.
    tg = _targets((shape[0], *shape[2:]), 7, ignore=2)
    a = rnd(*shape, dtype=dtype)
    w = np.linspace(0.5, 2.0, 7).astype(dtype)
    for reduction in ("mean", "sum", "none"):
        kw = dict(reduction=reduction, ignore_index=2, label_smoothing=0.2)
        e = ember.tensor(a).requires_grad_()
        t = torch.tensor(a).requires_grad_()
        le = ember._C._cross_entropy_loss(e, ember.tensor(tg), ember.tensor(w), **kw)[0]
        lt = F.cross_entropy(t, torch.tensor(tg), torch.tensor(w), **kw)
        _loss_and_grad_close(le, lt, e, t, dtype)


@needs_torch
def test_cross_entropy_non_contiguous_logits_and_targets(threads):
    a = rnd(10, 30)
    tg = _targets((30,), 10)
    e = ember.tensor(a).requires_grad_()
    t = torch.tensor(a).requires_grad_()
    te = ember.tensor(np.stack([tg, tg]))[:, ::1][0]  # a row of a 2-D target
    le = ember.cross_entropy(e.t(), te, label_smoothing=0.1)
    lt = F.cross_entropy(t.t(), torch.tensor(tg), label_smoothing=0.1)
    close(le, lt)
    le.backward()
    lt.backward()
    close(e.grad, t.grad, atol=1e-7)


@needs_torch
def test_cross_entropy_empty_batch_and_all_ignored():
    x = ember.zeros(0, 4, requires_grad=True)
    tg = ember.zeros(0, dtype=ember.int64)
    assert np.isnan(ember.cross_entropy(x, tg).item())
    assert np.isnan(F.cross_entropy(torch.zeros(0, 4), torch.zeros(0, dtype=torch.int64)).item())
    assert ember.cross_entropy(x, tg, reduction="sum").item() == 0.0
    assert ember.cross_entropy(x, tg, reduction="none").shape == (0,)
    ember.cross_entropy(x, tg, reduction="sum").backward()
    assert x.grad.shape == (0, 4)
    # every target ignored: mean is 0 / 0 = nan (as torch), the gradient zero
    a = rnd(3, 4)
    e = ember.tensor(a).requires_grad_()
    t = torch.tensor(a).requires_grad_()
    ign = np.full(3, -100)
    for smoothing in (0.0, 0.2):
        le = ember.cross_entropy(e, ember.tensor(ign), label_smoothing=smoothing)
        lt = F.cross_entropy(t, torch.tensor(ign), label_smoothing=smoothing)
        assert np.isnan(le.item()) and np.isnan(lt.item())
        le.backward()
        assert np.all(e.grad.numpy() == 0)


def test_cross_entropy_bad_input_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(IndexError, match=r"cross_entropy: target 4 is out of bounds \(4 classes"):
        ember.cross_entropy(x, ember.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        ember._C._cross_entropy_loss(x, ember.tensor([0, 1, 1]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match=r"cross_entropy: expected target of shape \(3,\)"):
        ember._C._cross_entropy_loss(x, ember.tensor([0, 1]))
    t, lse = ember.tensor([0, 1, 1]), ember.zeros(3)
    with pytest.raises(RuntimeError, match="cross_entropy_backward: grad_output of shape"):
        ember._C._cross_entropy_loss_backward(ember.zeros(2), x, t, None, lse, "none", -100, 0.0)
    with pytest.raises(RuntimeError, match=r"cross_entropy_backward: expected lse of the target's "
                                           r"shape \(3,\) \(one per sample\), got \(2,\)"):
        ember._C._cross_entropy_loss_backward(ember.ones(()), x, t, None, ember.zeros(2), "mean",
                                              -100, 0.0)
    # the forward's second output is the per-sample log-sum-exp (0 where ignored)
    a = rnd(3, 4, dtype="float64")
    _, lse = ember._C._cross_entropy_loss(ember.tensor(a), ember.tensor([0, -100, 3]))
    ref = np.log(np.exp(a).sum(1))
    np.testing.assert_allclose(lse.numpy(), [ref[0], 0.0, ref[2]], rtol=1e-12)


CE_GRAD_CASES = [
    dict(),
    dict(label_smoothing=0.25),
    dict(reduction="sum", ignore_index=1),
    dict(reduction="none", label_smoothing=0.1, weight=True),
    dict(weight=True, label_smoothing=0.3, ignore_index=0),
]


@pytest.mark.parametrize("kw", CE_GRAD_CASES, ids=str)
@pytest.mark.parametrize("shape", [(4, 5), (2, 5, 3), (5,)], ids=str)
def test_cross_entropy_gradcheck_and_gradgradcheck(kw, shape):
    kw = dict(kw)
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0], *shape[2:])
    tg = ember.tensor(_targets(tshape, c, seed=4))
    if kw.pop("weight", False):
        kw["weight"] = ember.tensor(np.linspace(0.5, 2.0, c))
    x = ember.tensor(rnd(*shape, dtype="float64")).requires_grad_()

    def f(x):
        return ember.cross_entropy(x, tg, **kw)

    def fused(x):  # the op itself, also for spatial inputs (strided classes)
        return ember._C._cross_entropy_loss(x, tg, **kw)[0]

    for fn in (f, fused):
        assert gradcheck(fn, x)
        assert gradgradcheck(fn, x)


# ---- nll_loss, layer_norm, rms_norm over many rows --------------------------------------------

@needs_torch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_parallel_and_thread_count_independent(reduction):
    a = rnd(5000, 10, dtype="float64")
    tg = _targets((5000,), 10, ignore=-100)
    w = np.linspace(0.5, 1.5, 10)
    out = []
    for n in (1, 2):
        old = ember.get_num_threads()
        ember.set_num_threads(n)
        try:
            e = ember.tensor(a).requires_grad_()
            le = ember.nll_loss(e, ember.tensor(tg), ember.tensor(w), reduction)
            le.sum().backward()
            out.append((le.detach().numpy(), e.grad.numpy()))
        finally:
            ember.set_num_threads(old)
    np.testing.assert_array_equal(out[0][0], out[1][0])  # the same bits on 1 and 2 threads
    np.testing.assert_array_equal(out[0][1], out[1][1])
    t = torch.tensor(a).requires_grad_()
    lt = F.nll_loss(t, torch.tensor(tg), torch.tensor(w), reduction=reduction)
    lt.sum().backward()
    np.testing.assert_allclose(out[0][0], lt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(out[0][1], t.grad.numpy(), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("rms", [False, True], ids=["layer_norm", "rms_norm"])
def test_norms_many_rows_match_torch(rms, threads):
    a = rnd(1000, 96) * 2 + 1
    w, b = rnd(96, seed=2), rnd(96, seed=3)
    e, t = (ember.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_())
    ew, tw = ember.tensor(w).requires_grad_(), torch.tensor(w).requires_grad_()
    eb, tb = ember.tensor(b).requires_grad_(), torch.tensor(b).requires_grad_()
    if rms:
        ye, yt = ember.rms_norm(e, (96,), ew, 1e-5), F.rms_norm(t, (96,), tw, 1e-5)
    else:
        ye, yt = ember.layer_norm(e, (96,), ew, eb, 1e-5), F.layer_norm(t, (96,), tw, tb, 1e-5)
    close(ye, yt, atol=1e-5)
    g = rnd(1000, 96, seed=4)
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    close(e.grad, t.grad, atol=1e-4, rtol=1e-4)
    close(ew.grad, tw.grad, atol=1e-3, rtol=1e-4)
