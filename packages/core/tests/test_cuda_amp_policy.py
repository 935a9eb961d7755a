"""autocast's per-device op lists (PyTorch's CPU and CUDA lists): the policy as a pure function of
op name, device type and dtype; the wrappers of the CUDA lists driven on CPU tensors (the CPU
standing in for the GPU by giving it the CUDA lists); and autocast("cuda") end to end on CUDA
tensors against float32 CPU results (skipped without a CUDA device)."""

from __future__ import annotations

import math

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from core_helpers import to_np
from ember.amp import autocast_mode as am
from ember.amp.autocast_mode import cast_dtype, cast_policy

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")

# PyTorch's documented CUDA lists (torch.amp, "CUDA Ops that can autocast to float16 / float32 /
# promote"), plus the ops its autocast kernels list that the page omits (einsum, attention,
# huber_loss, logsumexp)
CUDA_LOWER = ["__matmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul",
              "multi_dot", "einsum", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "linear", "matmul", "mm", "mv", "prelu",
              "scaled_dot_product_attention", "lstm_cell", "gru_cell", "rnn_tanh_cell",
              "rnn_relu_cell"]
CUDA_FP32 = ["__pow__", "__rpow__", "__rtruediv__", "acos", "asin",
             "binary_cross_entropy_with_logits", "cosh", "cosine_embedding_loss", "cdist",
             "cosine_similarity", "cross_entropy", "cumprod", "cumsum", "dist", "erfinv", "exp",
             "expm1", "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm",
             "log", "log_softmax", "log10", "log1p", "log2", "margin_ranking_loss", "mse_loss",
             "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "norm", "normalize",
             "pdist", "poisson_nll_loss", "pow", "prod", "reciprocal", "rsqrt", "sinh",
             "smooth_l1_loss", "soft_margin_loss", "softmax", "softmin", "softplus", "sum",
             "renorm", "tan", "triplet_margin_loss", "huber_loss", "logsumexp"]
CUDA_PROMOTE = ["addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample",
                "index_put", "scatter_add", "tensordot", "cat", "stack"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_lists_follow_torch(dtype):
    low = getattr(ember, dtype)
    for op in CUDA_LOWER:
        assert cast_policy(op, "cuda") == "lower", op
        assert cast_dtype(op, "cuda", low) is low, op
    for op in CUDA_FP32:
        assert cast_policy(op, "cuda") == "fp32", op
        assert cast_dtype(op, "cuda", low) is ember.float32, op
    for op in CUDA_PROMOTE:
        assert cast_policy(op, "cuda") == "promote", op
        assert cast_dtype(op, "cuda", low, (low, ember.float32)) is ember.float32, op
        assert cast_dtype(op, "cuda", low, (low, low)) is None, op  # nothing to promote
    # ops on no list run in their inputs' dtypes
    for op in ("relu", "add", "batch_norm", "max_pool2d", "dropout", "tanh"):
        assert cast_policy(op, "cuda") is None and cast_dtype(op, "cuda", low) is None, op


def test_policy_is_per_device():
    f16, bf16 = ember.float16, ember.bfloat16
    # the products are lower on both
    for op in ("mm", "matmul", "linear", "conv2d", "bmm", "scaled_dot_product_attention"):
        assert cast_dtype(op, "cpu", bf16) is bf16 and cast_dtype(op, "cuda", f16) is f16
    # on the CPU, PyTorch leaves softmax, exp/log, sums and the norms alone; CUDA runs them in
    # float32
    for op in ("softmax", "log_softmax", "exp", "log", "sum", "cumsum", "layer_norm",
               "group_norm", "pow"):
        assert cast_policy(op, "cpu") is None and cast_dtype(op, "cuda", f16) is ember.float32, op
    # ops on the CPU lists only
    assert cast_dtype("trace", "cpu", bf16) is ember.float32 and cast_policy("trace", "cuda") is None
    assert cast_dtype("ctc_loss", "cpu", bf16) is ember.float32
    assert cast_dtype("max_pool3d", "cpu", bf16) is ember.float32 and not cast_policy("max_pool3d", "cuda")
    assert cast_dtype("prelu", "cpu", bf16) is bf16
    # einsum is on no CPU list of PyTorch's, but composed from bmm there it comes out in bfloat16
    assert cast_policy("einsum", "cpu") == "lower"
    # bilinear: autocast off inside on the CPU, promote on CUDA
    assert cast_policy("bilinear", "cpu") == "plain" and cast_policy("bilinear", "cuda") == "promote"
    # binary_cross_entropy: float32 on the CPU, refused on CUDA
    assert cast_dtype("binary_cross_entropy", "cpu", bf16) is ember.float32
    with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
        cast_dtype("binary_cross_entropy", "cuda", f16)
    # whole recurrent layers: GRU lower on CUDA (cuDNN's RNN) only
    assert cast_policy("lstm", "cpu") == cast_policy("lstm", "cuda") == "lower"
    assert cast_policy("gru", "cpu") is None and cast_policy("gru", "cuda") == "lower"
    # unknown device types and ops: untouched
    assert cast_policy("mm", "xla") is None and cast_dtype("no_such_op", "cuda", f16) is None


def test_promote_picks_the_widest_floating_input():
    f16, bf16, f32, f64 = ember.float16, ember.bfloat16, ember.float32, ember.float64
    assert cast_dtype("addcmul", "cuda", f16, (f16, f32, f16)) is f32
    assert cast_dtype("addcmul", "cuda", f16, (f16, bf16)) is f32  # two 16-bit formats
    assert cast_dtype("cat", "cuda", f16, (f16, f64)) is f64
    assert cast_dtype("dot", "cuda", bf16, (bf16, bf16)) is None
    assert cast_dtype("dot", "cuda", bf16, ()) is None


def test_list_entries_reach_ember_functions():
    """The names on the lists are ember's: the important ones resolve to functions to wrap."""
    found = {op: [p for p in am._places(op)
                  if getattr(am._owner(p[0]), p[1], None) is not None] for op in am._CUDA_POLICY}
    for op in ("linear", "conv2d", "conv_transpose2d", "matmul", "mm", "bmm", "addmm",
               "__matmul__", "prelu", "scaled_dot_product_attention", "softmax", "log_softmax",
               "layer_norm", "group_norm", "exp", "log", "sum", "cumsum", "prod", "pow",
               "__pow__", "mse_loss", "cross_entropy", "nll_loss", "normalize", "softplus",
               "addcmul", "cat", "binary_cross_entropy"):
        assert found[op], f"{op}: no ember function carries it"


def test_cuda_lists_install_only_with_a_cuda_region():
    """The CUDA lists are wrapped while a CUDA region is enabled (set_autocast_enabled does not
    check for a device), and leave CPU tensors alone."""
    assert not getattr(ember.Tensor.sum, "__wrapped_by_autocast__", False)
    x = ember.ones(3, dtype=ember.float16)
    am.set_autocast_enabled("cuda", True)
    try:
        assert getattr(ember.Tensor.sum, "__wrapped_by_autocast__", False)
        assert getattr(F.softmax, "__wrapped_by_autocast__", False)
        assert x.sum().dtype is ember.float16  # a CPU tensor: the CUDA lists do not apply
        assert F.softmax(x, 0).dtype is ember.float16
        with ember.autocast("cpu", dtype=ember.bfloat16):
            # CPU region: softmax is not on the CPU list; mm is
            assert F.softmax(x, 0).dtype is ember.float16
            assert ember.mm(ember.ones(2, 2), ember.ones(2, 2)).dtype is ember.bfloat16
    finally:
        am.set_autocast_enabled("cuda", False)
    assert not getattr(ember.Tensor.sum, "__wrapped_by_autocast__", False)
    assert not getattr(F.softmax, "__wrapped_by_autocast__", False)


# ---- the wrappers over the CUDA lists ----------------------------------------------------------

def _inputs(dev, seed=0):
    rng = np.random.default_rng(seed)

    def r(*shape, pos=False):
        a = rng.standard_normal(shape).astype(np.float32)
        return ember.tensor(np.abs(a) + 0.5 if pos else a, device=dev)

    return {"a": r(4, 4), "b": r(4, 4), "v": r(4), "bt": r(2, 4, 4), "img": r(1, 2, 5, 5),
            "w": r(3, 2, 3, 3), "p": r(4, 4, pos=True), "u": r(4, 4, pos=True) * 0.4,
            "q": r(1, 2, 3, 4), "tgt": ember.tensor([0, 3, 1, 2], device=dev)}


# (op on the lists, function of the inputs); the expected dtype comes from cast_dtype
CASES = [
    ("linear", lambda t: F.linear(t["a"], t["b"])),
    ("matmul", lambda t: ember.matmul(t["a"], t["b"])),
    ("__matmul__", lambda t: t["a"] @ t["b"]),
    ("mm", lambda t: t["a"].mm(t["b"])),
    ("bmm", lambda t: ember.bmm(t["bt"], t["bt"])),
    ("addmm", lambda t: ember.addmm(t["v"], t["a"], t["b"])),
    ("baddbmm", lambda t: ember.baddbmm(t["bt"], t["bt"], t["bt"])),
    ("addmv", lambda t: ember.addmv(t["v"], t["a"], t["v"])),
    ("mv", lambda t: ember.mv(t["a"], t["v"])),
    ("einsum", lambda t: ember.einsum("ij,jk->ik", t["a"], t["b"])),
    ("conv2d", lambda t: F.conv2d(t["img"], t["w"], padding=1)),
    ("scaled_dot_product_attention",
     lambda t: F.scaled_dot_product_attention(t["q"], t["q"], t["q"])),
    ("exp", lambda t: ember.exp(t["a"])),
    ("log", lambda t: t["p"].log()),
    ("pow", lambda t: ember.pow(t["p"], 1.5)),
    ("__pow__", lambda t: t["a"] ** 2),
    ("__rtruediv__", lambda t: 1.0 / t["p"]),
    ("sum", lambda t: t["a"].sum()),
    ("prod", lambda t: ember.prod(t["u"], 1)),
    ("cumsum", lambda t: ember.cumsum(t["a"], 1)),
    ("softmax", lambda t: F.softmax(t["a"], 1)),
    ("log_softmax", lambda t: t["a"].log_softmax(1)),
    ("layer_norm", lambda t: F.layer_norm(t["a"], (4,))),
    ("group_norm", lambda t: F.group_norm(t["img"], 1)),
    ("mse_loss", lambda t: F.mse_loss(t["a"], t["b"])),
    ("cross_entropy", lambda t: F.cross_entropy(t["a"], t["tgt"])),
    ("normalize", lambda t: F.normalize(t["a"])),
    ("softplus", lambda t: F.softplus(t["a"])),
    ("rsqrt", lambda t: t["p"].rsqrt()),
    ("logsumexp", lambda t: ember.logsumexp(t["a"], 1)),
    ("relu", lambda t: F.relu(t["a"])),  # on no list
    ("add", lambda t: t["a"] + t["a"] * 2.0),
]
IDS = [c[0] for c in CASES]


def _lowered(t, low):
    """The inputs as the ops' inputs look under autocast: a, p, img, q in the autocast dtype
    (outputs of earlier lower-precision layers), the rest float32."""
    out = dict(t)
    for k in ("a", "p", "img", "q", "bt"):
        out[k] = t[k].to(low)
    return out


@pytest.mark.parametrize("op,fn", CASES, ids=IDS)
def test_cuda_lists_on_cpu_tensors(op, fn, monkeypatch):
    """The CUDA lists given to the CPU: each op's result dtype is what cast_dtype says for CUDA
    (the wrappers' logic, without a GPU)."""
    monkeypatch.setitem(am._POLICY, "cpu", am._CUDA_POLICY)
    low = ember.bfloat16
    t = _lowered(_inputs("cpu"), low)
    ref = fn(_inputs("cpu"))  # float32, autocast off
    with ember.autocast("cpu", dtype=low):
        got = fn(t)
    want = cast_dtype(op, "cuda", low) or got.dtype
    if cast_policy(op, "cuda") is None:
        assert got.dtype is low  # its (lowered) input's dtype
    else:
        assert got.dtype is want, (op, got.dtype, want)
    np.testing.assert_allclose(to_np(got), to_np(ref), rtol=6e-2, atol=6e-2)


def test_cuda_promote_and_banned_on_cpu_tensors(monkeypatch):
    monkeypatch.setitem(am._POLICY, "cpu", am._CUDA_POLICY)
    h = ember.ones(3, dtype=ember.bfloat16)
    f = ember.full((3,), 2.0)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        assert ember.addcmul(h, h, f).dtype is ember.float32
        assert ember.dot(h, f).dtype is ember.float32  # mixed inputs promoted before the op
        assert ember.dot(h, h).dtype is ember.bfloat16
        assert ember.cat([h, f]).dtype is ember.float32
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(ember.full((3,), 0.5), ember.ones(3))
        # an explicit dtype= turns the cast off, as in PyTorch
        assert h.sum(dtype=ember.bfloat16).dtype is ember.bfloat16
        assert h.sum().dtype is ember.float32
        # float64 is never lowered
        d = ember.ones(2, 2, dtype=ember.float64)
        assert (d @ d).dtype is ember.float64 and d.exp().dtype is ember.float64
    assert ember.dot(h, h).dtype is ember.bfloat16


# ---- on a GPU ------------------------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op,fn", CASES, ids=IDS)
def test_autocast_cuda_ops(op, fn, dtype):
    low = getattr(ember, dtype)
    ref = fn(_inputs("cpu"))
    t = _inputs("cuda")
    with ember.autocast("cuda", dtype=low):
        got = fn(t)  # float32 inputs
        low_in = fn(_lowered(t, low))
    pol = cast_policy(op, "cuda")
    assert got.device.type == "cuda"
    if pol == "lower":
        assert got.dtype is low and low_in.dtype is low
    elif pol == "fp32":
        assert got.dtype is ember.float32 and low_in.dtype is ember.float32
    else:
        assert got.dtype is ember.float32 and low_in.dtype is low
    tol = 2e-2 if dtype == "float16" else 6e-2
    np.testing.assert_allclose(to_np(got.cpu()), to_np(ref), rtol=tol, atol=tol)


@needs_cuda
def test_autocast_cuda_training_step_reaches_float32_weights():
    ember.manual_seed(0)
    lin = ember.nn.Linear(8, 4).to("cuda")
    x = ember.randn(16, 8, device="cuda")
    y = ember.randint(0, 4, (16,), device="cuda")
    with ember.autocast("cuda", dtype=ember.float16):
        h = lin(x)
        assert h.dtype is ember.float16
        loss = F.cross_entropy(h, y)
        assert loss.dtype is ember.float32
        assert F.softmax(h, 1).dtype is ember.float32
        assert ember.relu(h).dtype is ember.float16
    loss.backward()
    assert lin.weight.grad.dtype is ember.float32 and lin.weight.grad.device.type == "cuda"
    assert math.isfinite(float(lin.weight.grad.abs().sum().item()))
    with pytest.raises(RuntimeError, match="unsafe to autocast"):
        with ember.autocast("cuda"):
            F.binary_cross_entropy(ember.sigmoid(x), ember.rand(16, 8, device="cuda"))


# (ember has no 3-d pooling yet: those entries of the CPU list wait for it)
CPU_CASES = [
    ("prelu", lambda m, F, x: F.prelu(x, m.full((1,), 0.25))),
    ("cat", lambda m, F, x: m.cat([x.to(m.bfloat16), x])),
    ("softmax", lambda m, F, x: F.softmax(x.to(m.bfloat16), 1)),
    ("exp", lambda m, F, x: m.exp(x.to(m.bfloat16))),
    ("mm", lambda m, F, x: m.mm(x, x.t())),
    ("mse_loss", lambda m, F, x: F.mse_loss(x.to(m.bfloat16), x)),
]


@pytest.mark.parametrize("op,fn", CPU_CASES, ids=[c[0] for c in CPU_CASES])
def test_cpu_list_matches_torch(op, fn):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF

    a = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        e = fn(ember, F, ember.tensor(a))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = fn(torch, TF, torch.tensor(a))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], op
    np.testing.assert_allclose(to_np(e), t.float().numpy(), rtol=3e-2, atol=3e-2)
