"""Saved statistics of the fused norms (native_layer_norm, _fused_rms_norm, native_batch_norm)
for float16 / bfloat16 inputs: their dtype follows torch's rule (float32 for RMS norm and
whenever a parameter is float32, the input's dtype otherwise), their values and the backward
kernels that read them agree with PyTorch, on CPU and (dtype only) on meta."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch

pytestmark = needs_torch

DTYPES = ["float16", "bfloat16"]


def _pair(a: np.ndarray, dtype: str):
    """The same float32 array as an ember and a torch tensor of dtype."""
    return (
        ember.tensor(a).to(getattr(ember, dtype)),
        torch.tensor(a).to(getattr(torch, dtype)),
    )


def _np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().float().numpy()
    return t.float().numpy()


def _same(e, t, tol):
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
    np.testing.assert_allclose(_np(e), _np(t), rtol=tol, atol=tol)


def _affine(rng, n, param_dtype, dtype):
    """weight / bias pairs: None, the input's dtype or float32."""
    if param_dtype is None:
        return (None, None), (None, None)
    pd = dtype if param_dtype == "input" else "float32"
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    (ew, tw), (eb, tb) = _pair(w, pd), _pair(b, pd)
    return (ew, eb), (tw, tb)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params", [None, "input", "float32"])
def test_layer_norm_stats_match_torch(dtype, params):
    rng = np.random.default_rng(0)
    ex, tx = _pair(rng.standard_normal((4, 3, 8)).astype(np.float32) * 3 + 1, dtype)
    (ew, eb), (tw, tb) = _affine(rng, 8, params, dtype)
    eo = ember.native_layer_norm(ex, [8], ew, eb, 1e-5)
    to = torch.native_layer_norm(tx, [8], tw, tb, 1e-5)
    for e, t in zip(eo, to):
        _same(e, t, 2e-2)
    if params is not None:
        assert eo[1].dtype == (ember.float32 if params == "float32" else ex.dtype)
    # The backward reads the saved statistics in whatever dtype they have.
    eg, tg = _pair(rng.standard_normal((4, 3, 8)).astype(np.float32), dtype)
    tw_ = tw if tw is not None else None
    ew_ = ew if ew is not None else None
    egrads = ember.native_layer_norm_backward(eg, ex, [8], eo[1], eo[2], ew_, True, True, True)
    tgrads = torch.ops.aten.native_layer_norm_backward(
        tg, tx, [8], to[1], to[2], tw_, tb, [True, tw is not None, tb is not None]
    )
    _same(egrads[0], tgrads[0], 5e-2)
    if tw is not None:
        np.testing.assert_allclose(_np(egrads[1]), _np(tgrads[1]), rtol=5e-2, atol=5e-2)


@pytest.mark.filterwarnings("ignore:Mismatch dtype")  # torch's note on its unfused path
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params", [None, "input", "float32"])
def test_rms_norm_stats_are_float32(dtype, params):
    rng = np.random.default_rng(1)
    ex, tx = _pair(rng.standard_normal((5, 16)).astype(np.float32) * 2, dtype)
    (ew, _), (tw, _) = _affine(rng, 16, params, dtype)
    eo = ember._C._fused_rms_norm(ex, [16], ew, 1e-6)
    to = torch._fused_rms_norm(tx, [16], tw, 1e-6)
    assert eo[1].dtype == ember.float32
    _same(eo[0], to[0], 2e-2)
    _same(eo[1], to[1], 1e-5)  # computed in float32, not rounded to the input's dtype
    eg, tg = _pair(rng.standard_normal((5, 16)).astype(np.float32), dtype)
    egi = ember._C._fused_rms_norm_backward(eg, ex, [16], eo[1], ew, True, False)[0]
    txg = tx.clone().requires_grad_()
    torch.nn.functional.rms_norm(txg, [16], tw, 1e-6).backward(tg)
    _same(egi, txg.grad, 5e-2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "case", ["no_params", "input_params", "f32_params", "f32_running", "eval_f32", "eval_input"]
)
def test_batch_norm_stats_match_torch(dtype, case):
    rng = np.random.default_rng(2)
    ex, tx = _pair(rng.standard_normal((4, 3, 5)).astype(np.float32) * 2 + 0.5, dtype)
    pd = "float32" if case in ("f32_params", "f32_running", "eval_f32") else dtype
    (ew, eb), (tw, tb) = (
        _affine(rng, 3, "float32" if pd == "float32" else "input", dtype)
        if case != "no_params"
        else ((None, None), (None, None))
    )
    training = not case.startswith("eval")
    erm = erv = trm = trv = None
    if case in ("f32_running", "eval_f32", "eval_input"):
        erm, trm = _pair(np.full(3, 0.1, np.float32), pd)
        erv, trv = _pair(np.full(3, 2.0, np.float32), pd)
        if case == "f32_running":  # torch wants the weights in the running statistics' dtype
            (ew, eb), (tw, tb) = _affine(rng, 3, "float32", dtype)
    eo = ember.native_batch_norm(ex, ew, eb, erm, erv, training, 0.1, 1e-5)
    to = torch.native_batch_norm(tx, tw, tb, trm, trv, training, 0.1, 1e-5)
    _same(eo[0], to[0], 2e-2)
    for e, t in zip(eo[1:], to[1:]):
        assert str(e.dtype) == "ember." + str(t.dtype).split(".")[-1]
        if training:  # (torch's CPU kernel saves no statistics in eval mode: empty tensors)
            _same(e, t, 2e-2)
    if erm is not None:
        _same(erm, trm, 2e-2)
        _same(erv, trv, 2e-2)
    eg, tg = _pair(rng.standard_normal((4, 3, 5)).astype(np.float32), dtype)
    # eval mode saves no statistics (as torch): ember's backward takes the running ones there
    sm, si = (eo[1], eo[2]) if training else (erm, (erv.float() + 1e-5).rsqrt())
    egi = ember.native_batch_norm_backward(eg, ex, ew, sm, si, training, True, False, False)
    tgi = torch.ops.aten.native_batch_norm_backward(
        tg, tx, tw, trm, trv, to[1], to[2], training, 1e-5, [True, False, False]
    )[0]
    _same(egi[0], tgi, 5e-2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_meta_stats_dtype_matches_cpu(dtype):
    x = ember.randn(2, 3, 4).to(getattr(ember, dtype))
    w32 = ember.ones(4)
    for args in ((None, None), (w32, None)):
        cpu = ember.native_layer_norm(x, [4], *args, 1e-5)
        meta = ember.native_layer_norm(
            x.to("meta"), [4], *[a.to("meta") if a is not None else None for a in args], 1e-5
        )
        assert [t.dtype for t in meta] == [t.dtype for t in cpu]
        assert [t.shape for t in meta] == [t.shape for t in cpu]
    meta = ember._C._fused_rms_norm(x.to("meta"), [4], None, 1e-5)
    assert meta[1].dtype == ember.float32 and meta[1].device.type == "meta"
    rm, rv = ember.zeros(3, device="meta"), ember.ones(3, device="meta")
    meta = ember.native_batch_norm(x.to("meta"), None, None, rm, rv, True, 0.1, 1e-5)
    assert meta[1].dtype == meta[2].dtype == ember.float32
    meta = ember.native_batch_norm(x.to("meta"), None, None, None, None, True, 0.1, 1e-5)
    assert meta[1].dtype == x.dtype


def test_float32_and_float64_unchanged():
    for dt in (ember.float32, ember.float64):
        x = ember.randn(3, 6, dtype=dt)
        _, m, r = ember.native_layer_norm(x, [6], ember.ones(6, dtype=dt), None, 1e-5)
        assert m.dtype == r.dtype == dt
        assert ember._C._fused_rms_norm(x, [6], None, 1e-5)[1].dtype == dt


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_empty_rows_have_torchs_statistics(dtype):
    # No normalized elements: mean 0 and rstd NaN (0/0 variance), as torch; layer norm once
    # returned uninitialised memory here and group norm 1/sqrt(eps).
    x, tx = _pair(np.zeros((3, 0), np.float32), dtype)
    for got, want in zip(ember.native_layer_norm(x, [0], None, None, 1e-5)[1:],
                         torch.native_layer_norm(tx, [0], None, None, 1e-5)[1:]):
        assert got.dtype == getattr(ember, str(want.dtype).split(".")[1])
        np.testing.assert_array_equal(_np(got), _np(want))
    g, tg = _pair(np.zeros((2, 4, 0), np.float32), dtype)
    got = ember._C.native_group_norm(g, 2, None, None, 1e-5)
    want = torch.native_group_norm(tg, None, None, 2, 4, 0, 2, 1e-5)
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(_np(a), _np(b))
