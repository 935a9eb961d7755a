"""A broad sweep of ops not tracked elsewhere: ember vs torch at realistic sizes.

Every case is named `sweep/...`, so the sweep alone runs with

    python3 -m nox -s bench -- --filter sweep/
    PYTHONPATH=build/dev/site python3 benchmarks/run.py --filter sweep/ --repeats 7

Groups: normalisation (layer/group/batch norm forward+backward), embedding, indexing
(index_select / index_add / scatter_add / gather / where / masked_fill / boolean masks),
sorting (sort / topk / unique / cumsum), softmax backward, conv2d and pooling in
channels-last memory, interpolate, cross_entropy with label smoothing, LSTM / GRU,
scaled_dot_product_attention, einsum, small-tensor per-op overhead, optimizer steps and
clip_grad_norm_. No targets: the table's ratio column is the finding.
"""

from __future__ import annotations

import numpy as np
from harness import Stmt, case


def _F(fw):
    return fw.mod.nn.functional


def _g(fw, *shape, seed=0):
    x = fw.randn(*shape, seed=seed)
    x.requires_grad_(True)
    return x


def _ints(fw, high, *shape, seed=0):
    key = ("ints", high, shape, seed)
    if key not in fw.data_cache:
        fw.data_cache[key] = np.random.default_rng(seed).integers(0, high, shape, dtype=np.int64)
    return fw.from_numpy(fw.data_cache[key])


def _cl(fw, x):
    return x.contiguous(memory_format=fw.mod.channels_last)


def _fwd_bwd(name, call, make, out_shape=None, **kw):
    """A forward case and (when out_shape is given) a forward+backward case of `call`.

    make(fw, grad) -> dict of names; with grad=True the differentiable inputs require grad.
    """

    @case(f"sweep/{name}", unit="ms", **kw)
    def _fwd(fw):
        return Stmt(call, F=_F(fw), E=fw.mod, **make(fw, False))

    if out_shape is not None:

        @case(f"sweep/{name} fwd+bwd", unit="ms", check=False)
        def _bwd(fw):
            names = make(fw, True)
            if out_shape == ():  # a scalar loss: backward() with the implicit gradient 1
                return Stmt(f"({call}).backward()", F=_F(fw), E=fw.mod, **names)
            names["g_out"] = fw.randn(*out_shape, seed=99)
            return Stmt(f"({call}).backward(g_out)", F=_F(fw), E=fw.mod, **names)


def _x(shape, seed=0):
    def make(fw, grad):
        return {"x": _g(fw, *shape, seed=seed) if grad else fw.randn(*shape, seed=seed)}

    return make


# ---- normalisation --------------------------------------------------------------------------
LN = (64, 128, 768)  # a BERT-base block's activations (batch 64, seq 128)


def _ln(fw, grad):
    return {"x": _g(fw, *LN) if grad else fw.randn(*LN),
            "w": _g(fw, 768, seed=1) if grad else fw.randn(768, seed=1),
            "b": _g(fw, 768, seed=2) if grad else fw.randn(768, seed=2)}  # fmt: skip


_fwd_bwd("layer_norm 64x128x768", "F.layer_norm(x, (768,), w, b)", _ln, LN, rtol=1e-3, atol=1e-4)

GN = (16, 64, 32, 32)


def _gn(fw, grad):
    return {"x": _g(fw, *GN) if grad else fw.randn(*GN),
            "w": _g(fw, 64, seed=1) if grad else fw.randn(64, seed=1),
            "b": _g(fw, 64, seed=2) if grad else fw.randn(64, seed=2)}  # fmt: skip


_fwd_bwd("group_norm 32 groups (16,64,32,32)", "F.group_norm(x, 32, w, b)", _gn, GN,
         rtol=1e-3, atol=1e-4)


def _bn(fw, grad):
    d = _gn(fw, grad)
    d["rm"], d["rv"] = fw.mod.zeros(64), fw.mod.ones(64)
    return d


_fwd_bwd("batch_norm train (16,64,32,32)", "F.batch_norm(x, rm, rv, w, b, True)", _bn, GN,
         check=False)
_fwd_bwd("batch_norm eval (16,64,32,32)", "F.batch_norm(x, rm, rv, w, b, False)", _bn, GN,
         rtol=1e-3, atol=1e-4)


def _bn_cl(fw, grad):
    d = _bn(fw, False)
    x = _cl(fw, fw.randn(*GN))
    if grad:
        x.requires_grad_(True)
        d["w"].requires_grad_(True)
    d["x"] = x
    return d


_fwd_bwd("batch_norm train channels_last", "F.batch_norm(x, rm, rv, w, b, True)", _bn_cl, GN,
         check=False)

# ---- embedding ------------------------------------------------------------------------------


def _emb(fw, grad):
    return {"w": _g(fw, 30000, 256) if grad else fw.randn(30000, 256),
            "idx": _ints(fw, 30000, 64, 128)}  # fmt: skip


_fwd_bwd("embedding 30000x256 idx (64,128)", "F.embedding(idx, w)", _emb, (64, 128, 256))

# ---- indexing -------------------------------------------------------------------------------
IDX_N = (100_000, 64)


@case("sweep/index_select dim0 20k of 100kx64", unit="ms")
def _isel(fw):
    return Stmt("E.index_select(x, 0, i)", E=fw.mod, x=fw.randn(*IDX_N), i=_ints(fw, IDX_N[0], 20000))


@case("sweep/index_select dim1 (4096,1024) 256", unit="ms")
def _isel1(fw):
    return Stmt("E.index_select(x, 1, i)", E=fw.mod, x=fw.randn(4096, 1024), i=_ints(fw, 1024, 256))


@case("sweep/index_add_ dim0 20k rows into 10kx64", unit="ms", check=False)
def _iadd(fw):
    return Stmt("y.index_add_(0, i, s)", y=fw.mod.zeros(10000, 64), i=_ints(fw, 10000, 20000),
                s=fw.randn(20000, 64))


@case("sweep/scatter_add dim0 (20000,64)->(1000,64)", unit="ms", rtol=1e-3, atol=1e-3)
def _scadd(fw):
    idx = _ints(fw, 1000, 20000, 64)
    return Stmt("E.zeros(1000, 64).scatter_add_(0, i, s)", E=fw.mod, i=idx, s=fw.randn(20000, 64))


@case("sweep/gather dim1 (4096,1000) k=5", unit="ms")
def _gather(fw):
    return Stmt("E.gather(x, 1, i)", E=fw.mod, x=fw.randn(4096, 1000), i=_ints(fw, 1000, 4096, 5))


@case("sweep/gather dim0 (4096,256)", unit="ms")
def _gather0(fw):
    return Stmt("E.gather(x, 0, i)", E=fw.mod, x=fw.randn(4096, 256), i=_ints(fw, 4096, 4096, 256))


@case("sweep/x[idx] advanced 20k rows", unit="ms")
def _adv(fw):
    return Stmt("x[i]", x=fw.randn(*IDX_N), i=_ints(fw, IDX_N[0], 20000))


@case("sweep/x[mask] boolean 1M", unit="ms")
def _bmask(fw):
    x = fw.randn(1000, 1000)
    return Stmt("x[x > 0]", x=x)


@case("sweep/x[mask] = 0 (setitem)", unit="ms", check=False)
def _bmask_set(fw):
    x = fw.randn(1000, 1000)
    m = x > 0.5
    return Stmt("x[m] = 0.0", x=x.clone(), m=m)


@case("sweep/where 1M", unit="ms")
def _where(fw):
    x, y = fw.randn(1000, 1000), fw.randn(1000, 1000, seed=1)
    return Stmt("E.where(x > 0, x, y)", E=fw.mod, x=x, y=y)


@case("sweep/masked_fill 1M", unit="ms")
def _mfill(fw):
    x = fw.randn(1000, 1000)
    return Stmt("x.masked_fill(m, -1e9)", x=x, m=x > 0)


@case("sweep/masked_fill attn mask broadcast (32,8,128,128)", unit="ms")
def _mfill_b(fw):
    x = fw.randn(32, 8, 128, 128)
    m = fw.mod.ones(128, 128, dtype=fw.mod.bool).triu(1)
    return Stmt("x.masked_fill(m, float('-inf'))", x=x, m=m)


@case("sweep/index_put_ accumulate 20k rows", unit="ms", check=False)
def _iput(fw):
    return Stmt("y.index_put_((i,), s, accumulate=True)", y=fw.mod.zeros(10000, 64),
                i=_ints(fw, 10000, 20000), s=fw.randn(20000, 64))


# ---- sorting / scans ------------------------------------------------------------------------


@case("sweep/sort 1M float", unit="ms")
def _sort(fw):
    return Stmt("E.sort(x)[0]", E=fw.mod, x=fw.randn(1_000_000))


@case("sweep/sort rows (1024,1000)", unit="ms")
def _sort_rows(fw):
    return Stmt("E.sort(x, dim=1)[0]", E=fw.mod, x=fw.randn(1024, 1000))


@case("sweep/argsort rows (1024,1000)", unit="ms")
def _argsort(fw):
    return Stmt("E.argsort(x, dim=1)", E=fw.mod, x=fw.randn(1024, 1000))


@case("sweep/topk k=10 (1024,32000)", unit="ms")
def _topk(fw):
    return Stmt("E.topk(x, 10)[0]", E=fw.mod, x=fw.randn(1024, 32000))


@case("sweep/topk k=1000 1M", unit="ms")
def _topk_big(fw):
    return Stmt("E.topk(x, 1000)[0]", E=fw.mod, x=fw.randn(1_000_000))


@case("sweep/unique 1M ints", unit="ms")
def _unique(fw):
    return Stmt("E.unique(x)", E=fw.mod, x=_ints(fw, 10000, 1_000_000))


@case("sweep/unique counts+inverse 1M", unit="ms", check=False)
def _unique_ci(fw):
    return Stmt("E.unique(x, return_inverse=True, return_counts=True)", E=fw.mod,
                x=_ints(fw, 10000, 1_000_000))


@case("sweep/cumsum dim1 (1024,1000)", unit="ms", rtol=1e-3, atol=1e-3)
def _cumsum(fw):
    return Stmt("E.cumsum(x, 1)", E=fw.mod, x=fw.randn(1024, 1000))


@case("sweep/cumsum dim0 (1000,1024)", unit="ms", rtol=1e-3, atol=1e-3)
def _cumsum0(fw):
    return Stmt("E.cumsum(x, 0)", E=fw.mod, x=fw.randn(1000, 1024))


@case("sweep/bincount 1M", unit="ms")
def _bincount(fw):
    return Stmt("E.bincount(x)", E=fw.mod, x=_ints(fw, 1000, 1_000_000))


# ---- softmax backward -----------------------------------------------------------------------
SM = (64, 8, 128, 128)
_fwd_bwd("softmax attn (64,8,128,128)", "E.softmax(x, -1)", _x(SM), SM)
_fwd_bwd("log_softmax vocab (256,32000)", "E.log_softmax(x, -1)", _x((256, 32000)), (256, 32000))

# ---- conv / pool / interpolate in channels-last ---------------------------------------------
CV = (16, 64, 56, 56)


def _conv(cl):
    def make(fw, grad):
        x = fw.randn(*CV)
        w = fw.randn(64, 64, 3, 3, seed=1)
        if cl:
            x, w = _cl(fw, x), _cl(fw, w)
        if grad:
            x.requires_grad_(True)
            w.requires_grad_(True)
        return {"x": x, "w": w}

    return make


_fwd_bwd("conv2d 3x3 64->64 (16,64,56,56)", "F.conv2d(x, w, None, 1, 1)", _conv(False), CV,
         rtol=1e-3, atol=1e-2)
_fwd_bwd("conv2d 3x3 64->64 channels_last", "F.conv2d(x, w, None, 1, 1)", _conv(True), CV,
         rtol=1e-3, atol=1e-2)


@case("sweep/conv2d 1x1 64->256 channels_last", unit="ms", rtol=1e-3, atol=1e-2)
def _conv1x1(fw):
    return Stmt("F.conv2d(x, w)", F=_F(fw), x=_cl(fw, fw.randn(*CV)),
                w=_cl(fw, fw.randn(256, 64, 1, 1, seed=1)))


def _conv_cl(shape, wshape, dtype=None):
    """channels-last input and weight (float32, or float64 with dtype="float64")."""

    def make(fw, grad):
        x, w = fw.randn(*shape), fw.randn(*wshape, seed=1)
        if dtype is not None:
            x, w = x.to(getattr(fw.mod, dtype)), w.to(getattr(fw.mod, dtype))
        x, w = _cl(fw, x), _cl(fw, w)
        if grad:
            x.requires_grad_(True)
            w.requires_grad_(True)
        return {"x": x, "w": w}

    return make


_fwd_bwd("conv2d 1x1 64->256 channels_last (16,64,56,56)", "F.conv2d(x, w)",
         _conv_cl(CV, (256, 64, 1, 1)), (16, 256, 56, 56), rtol=1e-3, atol=1e-2)
_fwd_bwd("conv2d 3x3 s2 64->128 channels_last (16,64,56,56)", "F.conv2d(x, w, None, 2, 1)",
         _conv_cl(CV, (128, 64, 3, 3)), (16, 128, 28, 28), rtol=1e-3, atol=1e-2)
_fwd_bwd("conv2d 3x3 32->32 channels_last float64 (4,32,28,28)", "F.conv2d(x, w, None, 1, 1)",
         _conv_cl((4, 32, 28, 28), (32, 32, 3, 3), "float64"), (4, 32, 28, 28), rtol=1e-6,
         atol=1e-6)


PL = (16, 64, 112, 112)


def _xcl(shape, cl):
    def make(fw, grad):
        x = fw.randn(*shape)
        if cl:
            x = _cl(fw, x)
        if grad:
            x.requires_grad_(True)
        return {"x": x}

    return make


for _cl_flag, _sfx in ((False, ""), (True, " channels_last")):
    _fwd_bwd(f"max_pool2d 3x3 s2 p1 (16,64,112,112){_sfx}", "F.max_pool2d(x, 3, 2, 1)",
             _xcl(PL, _cl_flag), (16, 64, 56, 56))
    _fwd_bwd(f"avg_pool2d 2x2 (16,64,112,112){_sfx}", "F.avg_pool2d(x, 2)",
             _xcl(PL, _cl_flag), (16, 64, 56, 56))
    _fwd_bwd(f"adaptive_avg_pool2d 1 (32,512,14,14){_sfx}", "F.adaptive_avg_pool2d(x, 1)",
             _xcl((32, 512, 14, 14), _cl_flag), (32, 512, 1, 1), rtol=1e-4, atol=1e-5)
    _fwd_bwd(f"interpolate bilinear x2 (8,64,64,64){_sfx}",
             "F.interpolate(x, scale_factor=2, mode='bilinear')",
             _xcl((8, 64, 64, 64), _cl_flag), (8, 64, 128, 128), rtol=1e-4, atol=1e-5)

# ---- losses ---------------------------------------------------------------------------------


def _ce(fw, grad):
    return {"x": _g(fw, 1024, 1000) if grad else fw.randn(1024, 1000), "t": _ints(fw, 1000, 1024)}


_fwd_bwd("cross_entropy label_smoothing=0.1 (1024,1000)",
         "F.cross_entropy(x, t, label_smoothing=0.1)", _ce, (), rtol=1e-4, atol=1e-5)


def _ce_probs(fw, grad):
    d = _ce(fw, grad)
    d["t"] = fw.mod.softmax(fw.randn(1024, 1000, seed=3), -1)
    return d


_fwd_bwd("cross_entropy prob targets (1024,1000)", "F.cross_entropy(x, t)", _ce_probs, (),
         rtol=1e-4, atol=1e-5)


def _nll(fw, grad):
    d = _ce(fw, grad)
    return {"x": d["x"], "t": d["t"]}


_fwd_bwd("nll_loss (1024,1000)", "F.nll_loss(x, t)", _nll, (), rtol=1e-4, atol=1e-5)
_fwd_bwd("mse_loss 1M", "F.mse_loss(x, y)",
         lambda fw, grad: {"x": _g(fw, 1000, 1000) if grad else fw.randn(1000, 1000),
                           "y": fw.randn(1000, 1000, seed=1)}, (), rtol=1e-4, atol=1e-5)  # fmt: skip

# ---- recurrent ------------------------------------------------------------------------------


def _rnn_case(kind):
    @case(f"sweep/{kind} 1x256 seq50 batch32 fwd+bwd", unit="ms", check=False)
    def _rnn(fw):
        fw.mod.manual_seed(0)
        m = getattr(fw.mod.nn, kind)(128, 256, batch_first=True)
        x = _g(fw, 32, 50, 128)
        return Stmt("m(x)[0].sum().backward()", m=m, x=x)

    @case(f"sweep/{kind} 1x256 seq50 batch32 fwd (no_grad)", unit="ms", check=False)
    def _rnn_fwd(fw):
        fw.mod.manual_seed(0)
        m = getattr(fw.mod.nn, kind)(128, 256, batch_first=True)
        x = fw.randn(32, 50, 128)
        return Stmt("with E.no_grad(): m(x)", E=fw.mod, m=m, x=x)


_rnn_case("LSTM")
_rnn_case("GRU")

# ---- attention / einsum ---------------------------------------------------------------------
QKV = (8, 8, 256, 64)


def _qkv(fw, grad):
    return {k: (_g if grad else lambda fw, *s, seed: fw.randn(*s, seed=seed))(fw, *QKV, seed=i)
            for i, k in enumerate("qkv")}  # fmt: skip


_fwd_bwd("sdpa (8,8,256,64)", "F.scaled_dot_product_attention(q, k, v)", _qkv, QKV,
         rtol=1e-3, atol=1e-4)
_fwd_bwd("sdpa causal (8,8,256,64)", "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
         _qkv, QKV, rtol=1e-3, atol=1e-4)


@case("sweep/einsum bhqd,bhkd->bhqk", unit="ms", rtol=1e-3, atol=1e-3)
def _einsum(fw):
    return Stmt("E.einsum('bhqd,bhkd->bhqk', q, k)", E=fw.mod, q=fw.randn(*QKV),
                k=fw.randn(*QKV, seed=1))


@case("sweep/einsum ij,jk->ik 512", unit="ms", rtol=1e-3, atol=1e-3)
def _einsum_mm(fw):
    return Stmt("E.einsum('ij,jk->ik', a, b)", E=fw.mod, a=fw.randn(512, 512),
                b=fw.randn(512, 512, seed=1))


@case("sweep/einsum bij->bji transpose-sum small", unit="us")
def _einsum_small(fw):
    return Stmt("E.einsum('bij->bj', a)", E=fw.mod, a=fw.randn(4, 8, 8))


# ---- small-tensor overhead ------------------------------------------------------------------


@case("sweep/tiny add 1-element", unit="us")
def _t_add1(fw):
    return Stmt("a + b", a=fw.randn(1), b=fw.randn(1, seed=1))


@case("sweep/tiny add scalar python", unit="us")
def _t_adds(fw):
    return Stmt("a + 1.5", a=fw.randn(1))


@case("sweep/tiny view(-1)", unit="us", check=False)
def _t_view(fw):
    return Stmt("a.view(-1)", a=fw.randn(4, 4))


@case("sweep/tiny transpose(0,1)", unit="us", check=False)
def _t_tr(fw):
    return Stmt("a.transpose(0, 1)", a=fw.randn(4, 4))


@case("sweep/tiny x[0]", unit="us", check=False)
def _t_int(fw):
    return Stmt("a[0]", a=fw.randn(4, 4))


@case("sweep/tiny x[1:3, ::2]", unit="us", check=False)
def _t_slice(fw):
    return Stmt("a[1:3, ::2]", a=fw.randn(4, 4))


@case("sweep/tiny x[..., None]", unit="us", check=False)
def _t_none(fw):
    return Stmt("a[..., None]", a=fw.randn(4, 4))


@case("sweep/tiny x.item()", unit="us", check=False)
def _t_item(fw):
    return Stmt("a.item()", a=fw.randn(1))


@case("sweep/tiny x[0] = 1.0", unit="us", check=False)
def _t_setitem(fw):
    return Stmt("a[0] = 1.0", a=fw.randn(4, 4))


@case("sweep/tiny torch.tensor([1,2,3])", unit="us", check=False)
def _t_ctor(fw):
    return Stmt("E.tensor([1.0, 2.0, 3.0])", E=fw.mod)


@case("sweep/tiny zeros(4,4)", unit="us", check=False)
def _t_zeros(fw):
    return Stmt("E.zeros(4, 4)", E=fw.mod)


@case("sweep/randperm(16) after normal_(4000)", unit="us", check=False)
def _t_randperm_interleaved(fw):
    # another random op moves the counter between calls (dropout in a training loop)
    return Stmt("x.normal_(); E.randperm(16)", E=fw.mod, x=fw.mod.empty(4000))


@case("sweep/tiny ones(4,4)", unit="us", check=False)
def _t_ones(fw):
    return Stmt("E.ones(4, 4)", E=fw.mod)


@case("sweep/tiny full((4,4), 2.5)", unit="us", check=False)
def _t_full(fw):
    return Stmt("E.full((4, 4), 2.5)", E=fw.mod)


@case("sweep/tiny zeros_like (4,4)", unit="us", check=False)
def _t_zeros_like(fw):
    return Stmt("E.zeros_like(a)", E=fw.mod, a=fw.randn(4, 4))


@case("sweep/tiny cat 3x(4,4)", unit="us", check=False)
def _t_cat(fw):
    a = fw.randn(4, 4)
    return Stmt("E.cat([a, a, a])", E=fw.mod, a=a)


@case("sweep/tiny reshape+permute", unit="us", check=False)
def _t_perm(fw):
    return Stmt("a.reshape(2, 8).permute(1, 0)", a=fw.randn(4, 4))


@case("sweep/tiny add fwd+bwd requires_grad", unit="us", check=False)
def _t_ag(fw):
    return Stmt("(a * b).sum().backward()", a=_g(fw, 4), b=_g(fw, 4, seed=1))


@case("sweep/tiny Linear(16,16) forward", unit="us", check=False)
def _t_lin(fw):
    fw.mod.manual_seed(0)
    return Stmt("m(x)", m=fw.mod.nn.Linear(16, 16), x=fw.randn(2, 16))


# ---- optimizers / utilities -----------------------------------------------------------------


def _params(fw, n=100, numel=10_000):
    ps = []
    for i in range(n):
        p = fw.mod.nn.Parameter(fw.randn(numel, seed=i))
        p.grad = fw.randn(numel, seed=1000 + i)
        ps.append(p)
    return ps


@case("sweep/AdamW foreach step 100x10k", unit="ms", check=False)
def _adamw(fw):
    return Stmt("opt.step()", opt=fw.mod.optim.AdamW(_params(fw), lr=1e-3, foreach=True))


@case("sweep/AdamW step 100 small params (1k)", unit="ms", check=False)
def _adamw_small(fw):
    return Stmt("opt.step()", opt=fw.mod.optim.AdamW(_params(fw, 100, 1000), lr=1e-3))


@case("sweep/SGD nesterov step 100x10k", unit="ms", check=False)
def _sgd_n(fw):
    opt = fw.mod.optim.SGD(_params(fw), lr=1e-3, momentum=0.9, nesterov=True, weight_decay=1e-4)
    return Stmt("opt.step()", opt=opt)


@case("sweep/RMSprop step 100x10k", unit="ms", check=False)
def _rmsprop(fw):
    return Stmt("opt.step()", opt=fw.mod.optim.RMSprop(_params(fw), lr=1e-3))


@case("sweep/zero_grad 100 params", unit="us", check=False)
def _zero_grad(fw):
    ps = _params(fw, 100, 100)
    opt = fw.mod.optim.SGD(ps, lr=1e-3)

    def run():
        for p in ps:
            p.grad = p.detach()
        opt.zero_grad()

    return run


@case("sweep/clip_grad_norm_ 100x10k", unit="ms", check=False)
def _clip(fw):
    return Stmt("clip(ps, 1.0)", clip=fw.mod.nn.utils.clip_grad_norm_, ps=_params(fw))


# ---- misc pointwise / reductions ------------------------------------------------------------


@case("sweep/var_mean dim=-1 (4096,1024)", unit="ms", rtol=1e-3, atol=1e-4)
def _var(fw):
    return Stmt("E.var(x, -1)", E=fw.mod, x=fw.randn(4096, 1024))


@case("sweep/norm dim=-1 (4096,1024)", unit="ms", rtol=1e-3, atol=1e-4)
def _norm(fw):
    return Stmt("x.norm(dim=-1)", x=fw.randn(4096, 1024))


@case("sweep/max dim=1 values+indices (4096,1024)", unit="ms")
def _maxdim(fw):
    return Stmt("x.max(dim=1)[0]", x=fw.randn(4096, 1024))


@case("sweep/sum over non-contiguous dim0 (1024,4096)", unit="ms", rtol=1e-3, atol=1e-3)
def _sum0(fw):
    return Stmt("x.sum(0)", x=fw.randn(1024, 4096))


@case("sweep/transpose copy (2048,2048).t().contiguous()", unit="ms")
def _tcopy(fw):
    return Stmt("x.t().contiguous()", x=fw.randn(2048, 2048))


@case("sweep/float32->float16 1M", unit="ms", check=False)
def _half(fw):
    return Stmt("x.to(E.float16)", E=fw.mod, x=fw.randn(1000, 1000))


@case("sweep/float32->bfloat16 1M", unit="ms", check=False)
def _bf16(fw):
    return Stmt("x.to(E.bfloat16)", E=fw.mod, x=fw.randn(1000, 1000))


@case("sweep/pow 2.5 1M", unit="ms", rtol=1e-4, atol=1e-4)
def _pow(fw):
    return Stmt("x.abs().pow(2.5)", x=fw.randn(1000, 1000))


@case("sweep/silu fwd+bwd 1M", unit="ms", check=False)
def _silu(fw):
    return Stmt("F.silu(x).backward(g)", F=_F(fw), x=_g(fw, 1000, 1000), g=fw.randn(1000, 1000))


@case("sweep/tanh 1M", unit="ms", rtol=1e-4, atol=1e-5)
def _tanh(fw):
    return Stmt("E.tanh(x)", E=fw.mod, x=fw.randn(1000, 1000))


@case("sweep/add broadcast (1024,1024)+(1024,)", unit="ms")
def _badd(fw):
    return Stmt("x + b", x=fw.randn(1024, 1024), b=fw.randn(1024, seed=1))


@case("sweep/mul broadcast column (1024,1024)*(1024,1)", unit="ms")
def _bmul(fw):
    return Stmt("x * b", x=fw.randn(1024, 1024), b=fw.randn(1024, 1, seed=1))


@case("sweep/cat 8x(256,1024) dim1", unit="ms")
def _cat(fw):
    xs = [fw.randn(256, 1024, seed=i) for i in range(8)]
    return Stmt("E.cat(xs, 1)", E=fw.mod, xs=xs)


@case("sweep/stack 64x(1024,)", unit="us")
def _stack(fw):
    xs = [fw.randn(1024, seed=i) for i in range(64)]
    return Stmt("E.stack(xs)", E=fw.mod, xs=xs)


@case("sweep/randn 1M", unit="ms", check=False)
def _randn(fw):
    return Stmt("E.randn(1000, 1000)", E=fw.mod)


@case("sweep/dropout train 1M", unit="ms", check=False)
def _drop(fw):
    return Stmt("F.dropout(x, 0.1)", F=_F(fw), x=fw.randn(1000, 1000))


@case("sweep/matmul (64,128,768)@(768,3072)", unit="ms", rtol=1e-3, atol=1e-2)
def _mm3(fw):
    return Stmt("x @ w", x=fw.randn(64, 128, 768), w=fw.randn(768, 3072, seed=1))


@case("sweep/linear fwd+bwd (8192,768)->3072", unit="ms", check=False)
def _lin_bwd(fw):
    x, w = _g(fw, 8192, 768), _g(fw, 3072, 768, seed=1)
    b = _g(fw, 3072, seed=2)
    return Stmt("F.linear(x, w, b).backward(g)", F=_F(fw), x=x, w=w, b=b, g=fw.randn(8192, 3072))
