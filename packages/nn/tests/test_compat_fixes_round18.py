"""Fixes from the eighteenth drop-in compatibility round, each found by a PyTorch-style program
run unchanged on ember (packages/nn/tests/compat_programs/r18_*.py) or by the probes around them:

- ``Dirichlet.mode`` / ``Beta.mode`` with every concentration below one: the first vertex, as
  PyTorch reports it (ember picked the vertex of the largest concentration);
- ``torch.tensor_split`` / ``Tensor.tensor_split`` with a tensor of indices or a 0-D tensor of
  sections (PyTorch's third overload; ember raised a TypeError);
- a parameter that holds a sparse gradient (``nn.Embedding(sparse=True)`` after backward)
  printed as ``Parameter containing:\\nParameter(tensor(...))``;
- the reverse-mode ``torch.func`` transforms (grad, grad_and_value, vjp, jacrev) called on dual
  tensors inside ``forward_ad.dual_level`` dropped the tangents (forward-over-reverse); the
  forward-mode ones (jvp, jacfwd, hessian) silently dropped them where PyTorch raises;
- ``repr`` of a dual tensor lacked PyTorch's ``tangent=...`` suffix;
- layer_norm / rms_norm of a bfloat16 / float16 input with float32 affine parameters (a
  LayerNorm under CPU autocast) rounded the parameters to the input's dtype and the output
  twice; PyTorch applies them in float32 and rounds once. The parameter gradients are now float32
  sums rounded once (they were rounded to bfloat16 first);
- ``dtype.to_real()`` / ``dtype.to_complex()`` were missing (an AttributeError);
- ``torch.utils.checkpoint`` of a region run under ``autocast`` recomputed it in backward
  without autocast (float32 instead of bfloat16): the non-reentrant variant raised
  CheckpointError, the reentrant one differentiated a different computation;
- under CPU autocast, einsum / tensordot / inner / linalg.multi_dot / chain_matmul /
  linalg.vecdot stayed float32; PyTorch composes them from mm / bmm, so they come out bfloat16;
- ``erfinv`` near +-1 kept only ~5 digits (its Newton residual erf(x) - y cancelled) and
  ``special.ndtri`` (``sqrt(2) erfinv(2p - 1)``) gave -inf for p below ~1e-17 and lost digits
  for small p; PyTorch's are accurate in the tails;
- ``torch.tensor`` of a list of NumPy scalars or of typed tensors inferred only a category
  (int64 / the default float / ...); PyTorch promotes the elements' own dtypes
  (``tensor([np.float64(1.5)])`` is float64, ``tensor([np.bool_(True)])`` bool).
"""

from __future__ import annotations

import ember
import ember.autograd.forward_ad as fwAD
import numpy as np
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- Dirichlet / Beta mode -------------------------------------------------------------------
def test_dirichlet_mode_all_small_is_first_vertex():
    d = ember.distributions.Dirichlet(ember.tensor([[0.7, 0.9, 0.5], [2.0, 3.0, 5.0]]))
    assert d.mode.tolist()[0] == [1.0, 0.0, 0.0]
    assert d.mode.tolist()[1] == pytest.approx([1 / 7, 2 / 7, 4 / 7])
    beta = ember.distributions.Beta(ember.tensor([0.7, 2.0, 0.5]), ember.tensor([0.9, 3.0, 0.2]))
    assert beta.mode.tolist() == pytest.approx([1.0, 1 / 3, 1.0])


@needs_torch
def test_dirichlet_mode_matches_torch():
    conc = [[0.7, 0.9, 0.5], [0.3, 0.2, 0.95], [2.0, 0.5, 0.5], [1.5, 1.5, 3.0]]
    got = ember.distributions.Dirichlet(ember.tensor(conc)).mode.flatten().tolist()
    ref = torch.distributions.Dirichlet(torch.tensor(conc)).mode.flatten().tolist()
    assert got == pytest.approx(ref)
    a, b = [0.7, 0.3, 2.0, 0.9], [0.9, 0.4, 3.0, 1.2]
    got = ember.distributions.Beta(ember.tensor(a), ember.tensor(b)).mode.tolist()
    ref = torch.distributions.Beta(torch.tensor(a), torch.tensor(b)).mode.tolist()
    assert got == pytest.approx(ref)


# ---- tensor_split with a tensor ----------------------------------------------------------------
def test_tensor_split_tensor_indices_and_sections():
    x = ember.arange(7)
    assert [t.tolist() for t in ember.tensor_split(x, ember.tensor([2, 5]))] == [[0, 1], [2, 3, 4],
                                                                                 [5, 6]]
    assert [t.tolist() for t in x.tensor_split(ember.tensor(3))] == [[0, 1, 2], [3, 4], [5, 6]]
    m = ember.arange(6.0).view(2, 3)
    parts = ember.tensor_split(m, ember.tensor([1]), dim=1)
    assert isinstance(parts, tuple) and [p.tolist() for p in parts] == [[[0.0], [3.0]],
                                                                         [[1.0, 2.0], [4.0, 5.0]]]
    assert [t.tolist() for t in ember.tensor_split(x, sections=2)] == [[0, 1, 2, 3], [4, 5, 6]]
    assert [t.tolist() for t in ember.tensor_split(x, indices=[1])] == [[0], [1, 2, 3, 4, 5, 6]]


def test_tensor_split_tensor_gradient_and_errors():
    x = ember.arange(6.0, dtype=ember.float64).requires_grad_()
    a, b = x.tensor_split(ember.tensor([2]))
    (a.sum() + 2 * b.sum()).backward()
    assert x.grad.tolist() == [1.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="int64"):
        ember.tensor_split(ember.arange(4), ember.tensor([1.0]))
    with pytest.raises(RuntimeError, match="one-dimensional"):
        ember.tensor_split(ember.arange(4), ember.tensor([[1]]))
    with pytest.raises(TypeError, match="exactly one"):
        ember.tensor_split(ember.arange(4), 2, sections=2)


@needs_torch
def test_tensor_split_tensor_matches_torch():
    for split in ([1, 4], [0, 3, 3], [7]):
        got = [t.tolist() for t in ember.tensor_split(ember.arange(6), ember.tensor(split))]
        ref = [t.tolist() for t in torch.tensor_split(torch.arange(6), torch.tensor(split))]
        assert got == ref
    got = [t.tolist() for t in ember.arange(8).view(2, 4).tensor_split(ember.tensor(3), 1)]
    ref = [t.tolist() for t in torch.arange(8).view(2, 4).tensor_split(torch.tensor(3), 1)]
    assert got == ref


# ---- a parameter with a sparse grad prints as a Parameter ---------------------------------------
def test_sparse_grad_parameter_repr():
    e = ember.nn.Embedding(3, 2, sparse=True)
    with ember.no_grad():
        e.weight.copy_(ember.arange(6.0).view(3, 2))
    before = repr(e.weight)
    e(ember.tensor([1, 1])).sum().backward()
    assert e.weight.grad.is_sparse
    assert repr(e.weight) == before == ("Parameter containing:\ntensor([[0., 1.],\n        "
                                        "[2., 3.],\n        [4., 5.]], requires_grad=True)")
    assert str(e.weight) == before
    assert isinstance(e.weight, ember.nn.Parameter)


# ---- forward-over-reverse through torch.func -----------------------------------------------------
def _tangent(t):
    return fwAD.unpack_dual(t).tangent


def test_func_reverse_transforms_carry_tangents():
    f = lambda x: (x ** 3).sum()  # noqa: E731
    with fwAD.dual_level():
        x = fwAD.make_dual(ember.tensor([1.0, 2.0], dtype=ember.float64),
                           ember.tensor([1.0, 0.5], dtype=ember.float64))
        g, v = ember.func.grad_and_value(f)(x)
        assert g.tolist() == [3.0, 12.0] and _tangent(g).tolist() == [6.0, 6.0]
        assert v.item() == 9.0 and _tangent(v).item() == 3.0 + 6.0
        assert not g.requires_grad
        assert _tangent(ember.func.grad(f)(x)).tolist() == [6.0, 6.0]
        out, pull = ember.func.vjp(lambda t: t ** 3, x)
        assert _tangent(out).tolist() == [3.0, 6.0]
        assert _tangent(pull(ember.ones(2, dtype=ember.float64))[0]).tolist() == [6.0, 6.0]
        J = ember.func.jacrev(lambda t: t ** 3)(x)
        assert _tangent(J).tolist() == [[6.0, 0.0], [0.0, 6.0]]
        plain = ember.func.grad(f)(ember.tensor([1.0, 2.0]))
        assert _tangent(plain) is None and plain.tolist() == [3.0, 12.0]


def test_func_forward_transforms_refuse_a_live_dual_level():
    f = lambda x: (x ** 3).sum()  # noqa: E731
    x = ember.tensor([1.0, 2.0])
    with fwAD.dual_level():
        for call in (lambda: ember.func.jacfwd(f)(x), lambda: ember.func.hessian(f)(x),
                     lambda: ember.func.jvp(f, (x,), (x,))):
            with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
                call()
    assert ember.func.hessian(f)(x).tolist() == [[6.0, 0.0], [0.0, 12.0]]


@needs_torch
def test_forward_over_reverse_matches_torch():
    def run(lib):
        ad = lib.autograd.forward_ad
        f = lambda x: (x.sin() * x).sum()  # noqa: E731
        with ad.dual_level():
            x = ad.make_dual(lib.tensor([0.3, 1.2, -0.7], dtype=lib.float64),
                             lib.tensor([1.0, -2.0, 0.5], dtype=lib.float64))
            g = lib.func.grad(f)(x)
            J = lib.func.jacrev(lambda t: t.exp() * t)(x)
            return (ad.unpack_dual(g).tangent.tolist(),
                    ad.unpack_dual(J).tangent.flatten().tolist())

    got, ref = run(ember), run(torch)
    assert got[0] == pytest.approx(ref[0]) and got[1] == pytest.approx(ref[1])


def test_hvp_by_forward_over_reverse_is_checked_numerically():
    # the tangent of grad(f) along v is H v; compared with central differences of the gradient
    f = lambda x: (x[0] ** 2 * x[1] + x[1].exp() * x[2] ** 3).sum()  # noqa: E731
    x0 = ember.tensor([0.4, -0.3, 0.8], dtype=ember.float64)
    v = ember.tensor([1.0, 0.5, -2.0], dtype=ember.float64)
    with fwAD.dual_level():
        hv = _tangent(ember.func.grad(f)(fwAD.make_dual(x0, v)))
    eps = 1e-6
    fd = (ember.func.grad(f)(x0 + eps * v) - ember.func.grad(f)(x0 - eps * v)) / (2 * eps)
    assert hv.tolist() == pytest.approx(fd.tolist(), abs=1e-7)


# ---- dual tensors print their tangent ------------------------------------------------------------
def test_dual_tensor_repr():
    with fwAD.dual_level():
        x = fwAD.make_dual(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 0.0]))
        assert repr(x) == "tensor([1., 2.], tangent=tensor([1., 0.]))"
        assert repr((x ** 3).sum()) == "tensor(9., tangent=3.0)"
        assert repr(ember.ones(1)) == "tensor([1.])"
    assert repr(x) == "tensor([1., 2.])"  # the level is gone: no tangent


@needs_torch
def test_dual_tensor_repr_matches_torch():
    def run(lib):
        ad = lib.autograd.forward_ad
        with ad.dual_level():
            x = ad.make_dual(lib.arange(6.0).view(2, 3), lib.ones(2, 3))
            return [repr(x), repr(x.sum()), repr(x[0] * 2)]

    assert [r.replace("ember", "torch") for r in run(ember)] == run(torch)


# ---- mixed-precision layer / RMS norm -----------------------------------------------------------
def _mixed_case():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    w = rng.normal(1, 0.3, 8).astype(np.float32)
    b = rng.normal(0, 0.3, 8).astype(np.float32)
    return x, w, b


def _bf16_exact(v):
    """float32 values rounded to bfloat16 (round to nearest even), as float64."""
    bits = np.asarray(v, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def test_mixed_layer_norm_rounds_once():
    x, w, b = _mixed_case()
    xb = ember.tensor(x).to(ember.bfloat16)
    got = ember.nn.functional.layer_norm(xb, (8,), ember.tensor(w), ember.tensor(b))
    assert got.dtype == ember.bfloat16
    # the float64 reference from the bfloat16 input, affine in float, one rounding at the end
    xr = _bf16_exact(x)
    mu, var = xr.mean(1, keepdims=True), xr.var(1, keepdims=True)
    ref = _bf16_exact(((xr - mu) / np.sqrt(var + 1e-5) * w + b).astype(np.float32))
    assert np.array(got.float().tolist()) == pytest.approx(ref, abs=1e-6, rel=0)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        ln = ember.nn.LayerNorm(8)
        with ember.no_grad():
            ln.weight.copy_(ember.tensor(w))
            ln.bias.copy_(ember.tensor(b))
        assert ember.equal(ln(xb), got)
    rms = ember.nn.functional.rms_norm(xb, (8,), ember.tensor(w), eps=1e-6)
    ref = _bf16_exact((xr / np.sqrt((xr ** 2).mean(1, keepdims=True) + 1e-6) * w)
                      .astype(np.float32))
    assert np.array(rms.float().tolist()) == pytest.approx(ref, abs=1e-6, rel=0)


def test_mixed_layer_norm_param_grads_are_float32_sums():
    x, w, b = _mixed_case()
    g = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    X = ember.tensor(x).to(ember.bfloat16).requires_grad_()
    W, B = ember.tensor(w).requires_grad_(), ember.tensor(b).requires_grad_()
    ember.nn.functional.layer_norm(X, (8,), W, B).backward(ember.tensor(g).to(ember.bfloat16))
    assert W.grad.dtype == B.grad.dtype == ember.float32 and X.grad.dtype == ember.bfloat16
    xr, gr = _bf16_exact(x), _bf16_exact(g)
    xhat = (xr - xr.mean(1, keepdims=True)) / np.sqrt(xr.var(1, keepdims=True) + 1e-5)
    assert W.grad.tolist() == pytest.approx((gr * xhat).sum(0), rel=1e-6, abs=1e-5)
    assert B.grad.tolist() == pytest.approx(gr.sum(0), rel=1e-6, abs=1e-5)


def test_layer_norm_same_dtype_unchanged_and_gradcheck():
    x, w, b = _mixed_case()
    xb = ember.tensor(x).to(ember.bfloat16)
    plain = ember.nn.functional.layer_norm(xb, (8,), ember.tensor(w).bfloat16(),
                                           ember.tensor(b).bfloat16())
    xr, wr, br = _bf16_exact(x), _bf16_exact(w), _bf16_exact(b)
    xhat = (xr - xr.mean(1, keepdims=True)) / np.sqrt(xr.var(1, keepdims=True) + 1e-5)
    ref = _bf16_exact((xhat * wr + br).astype(np.float32))
    assert np.array(plain.float().tolist()) == pytest.approx(ref, abs=1e-6, rel=0)
    args = (ember.tensor(x[:3, :4], dtype=ember.float64).requires_grad_(),
            ember.tensor(w[:4], dtype=ember.float64).requires_grad_(),
            ember.tensor(b[:4], dtype=ember.float64).requires_grad_())
    assert ember.autograd.gradcheck(
        lambda a, c, d: ember.nn.functional.layer_norm(a, (4,), c, d), args)


@needs_torch
def test_mixed_layer_norm_forward_matches_torch():
    x, w, b = _mixed_case()
    outs = []
    for lib in (ember, torch):
        F = lib.nn.functional
        xb = lib.tensor(x).to(lib.bfloat16)
        outs.append([F.layer_norm(xb, (8,), lib.tensor(w), lib.tensor(b)).float().tolist(),
                     F.layer_norm(xb, (8,), lib.tensor(w)).float().tolist()])
    assert outs[0] == outs[1]


# ---- dtype.to_real / to_complex --------------------------------------------------------------------
def test_dtype_to_real_and_to_complex():
    assert ember.complex64.to_real() is ember.float32
    assert ember.complex128.to_real() is ember.float64
    assert ember.float32.to_real() is ember.float32 and ember.int64.to_real() is ember.int64
    assert ember.float32.to_complex() is ember.complex64
    assert ember.bfloat16.to_complex() is ember.complex64
    assert ember.float64.to_complex() is ember.complex128
    assert ember.complex64.to_complex() is ember.complex64
    with pytest.raises(RuntimeError, match="Unknown Complex ScalarType"):
        ember.int64.to_complex()
    with pytest.raises(RuntimeError, match="complex32"):
        ember.float16.to_complex()
    # the usual use: the real dtype of a spectrum
    spec = ember.fft.rfft(ember.ones(8))
    assert spec.abs().dtype is spec.dtype.to_real()


@needs_torch
def test_dtype_to_real_and_to_complex_match_torch():
    for name in ("float32", "float64", "bfloat16", "complex64", "complex128", "int32", "bool"):
        e, t = getattr(ember, name), getattr(torch, name)
        assert repr(e.to_real()).replace("ember", "torch") == repr(t.to_real())
        if name not in ("int32", "bool"):
            assert repr(e.to_complex()).replace("ember", "torch") == repr(t.to_complex())


# ---- checkpoint under autocast ----------------------------------------------------------------------
def _mlp():
    m = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.GELU(), ember.nn.Linear(8, 3))
    with ember.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(ember.linspace(-0.5, 0.5, p.numel()).view(p.shape) * (1 + 0.1 * i))
    return m


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recomputes_under_the_forwards_autocast(reentrant):
    from ember.utils.checkpoint import checkpoint

    x = ember.linspace(-1, 1, 8).view(2, 4).requires_grad_()
    grads = []
    for ckpt in (True, False):
        m = _mlp()
        with ember.autocast("cpu", dtype=ember.bfloat16):
            y = checkpoint(m, x, use_reentrant=reentrant) if ckpt else m(x)
        assert y.dtype == ember.bfloat16
        y.float().pow(2).sum().backward()
        grads.append([p.grad.clone() for p in m.parameters()] + [x.grad.clone()])
        x.grad = None
    for a, b in zip(*grads):
        assert a.dtype == b.dtype and ember.equal(a, b)
    # autocast off inside the region is recomputed off too
    m = _mlp()
    with ember.autocast("cpu", dtype=ember.bfloat16):
        with ember.autocast("cpu", enabled=False):
            y = checkpoint(m, x, use_reentrant=reentrant)
    assert y.dtype == ember.float32
    y.sum().backward()
    assert m[0].weight.grad.dtype == ember.float32


def test_checkpoint_sequential_under_autocast():
    from ember.utils.checkpoint import checkpoint_sequential

    m = _mlp()
    x = ember.linspace(-1, 1, 8).view(2, 4)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = checkpoint_sequential(m, 2, x, use_reentrant=False)
    y.float().sum().backward()
    ref = _mlp()
    with ember.autocast("cpu", dtype=ember.bfloat16):
        r = ref(x)
    r.float().sum().backward()
    assert ember.equal(y, r) and ember.equal(m[0].weight.grad, ref[0].weight.grad)


@needs_torch
def test_checkpoint_under_autocast_matches_torch():
    def run(lib):
        m = lib.nn.Linear(4, 3)
        with lib.no_grad():
            m.weight.copy_(lib.linspace(-1, 1, 12).view(3, 4))
            m.bias.copy_(lib.tensor([0.1, -0.2, 0.3]))
        x = lib.linspace(-1, 1, 8).view(2, 4)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = lib.utils.checkpoint.checkpoint(m, x, use_reentrant=False)
        y.float().sum().backward()
        return str(y.dtype).split(".")[-1], m.weight.grad.tolist()

    assert run(ember) == run(torch)


# ---- CPU autocast of the composed products ----------------------------------------------------------
def test_cpu_autocast_composed_products_run_in_bfloat16():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(2, 3, 4)).astype(np.float32)
    B = rng.normal(size=(2, 4, 5)).astype(np.float32)
    a, b = ember.tensor(A, requires_grad=True), ember.tensor(B)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        outs = {
            "einsum": ember.einsum("bij,bjk->bik", a, b),
            "tensordot": ember.tensordot(a, b, dims=([2], [1])),
            "inner": ember.inner(a, a),
            "multi_dot": ember.linalg.multi_dot([a[0], b[0]]),
            "chain_matmul": ember.chain_matmul(a[0], b[0]),
            "vecdot": ember.linalg.vecdot(a, a),
        }
    for name, o in outs.items():
        assert o.dtype == ember.bfloat16, name
    # the value: the bfloat16-rounded inputs multiplied exactly, rounded once
    ab = _bf16_exact(A) @ _bf16_exact(B)
    got = np.array(outs["einsum"].float().tolist())
    assert got == pytest.approx(_bf16_exact(ab.astype(np.float32)), abs=1e-6, rel=0)
    outs["einsum"].float().sum().backward()
    assert a.grad.dtype == ember.float32
    ref = _bf16_exact(np.ones((2, 3, 5), np.float32) @ _bf16_exact(B).transpose(0, 2, 1))
    assert np.array(a.grad.tolist()) == pytest.approx(ref, rel=1e-2, abs=1e-2)
    with ember.autocast("cpu", dtype=ember.bfloat16, enabled=False):
        assert ember.einsum("ij,jk->ik", a[0], b[0]).dtype == ember.float32


@needs_torch
def test_cpu_autocast_composed_products_match_torch():
    rng = np.random.default_rng(4)
    A = rng.normal(size=(3, 4)).astype(np.float32)
    res = []
    for lib in (ember, torch):
        a = lib.tensor(A)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            outs = [lib.einsum("ij,kj->ik", a, a), lib.tensordot(a, a.T, 1), lib.inner(a, a),
                    lib.linalg.multi_dot([a, a.T, a])]
        res.append([(str(o.dtype).split(".")[-1], o.float().tolist()) for o in outs])
    assert res[0] == res[1]


# ---- erfinv / ndtri in the tails ------------------------------------------------------------------
def test_erfinv_tails_accurate():
    # reference values of the exact functions (mpmath, 40 digits)
    y = ember.tensor([-0.999999999999, 0.999999, 1 - 2.0 ** -40, 0.3, -0.6], dtype=ember.float64)
    ref = [-5.042031898572696, 3.458910737275499, 5.05125408524939, 0.2724627147267543,
           -0.5951160814499948]
    assert ember.erfinv(y).tolist() == pytest.approx(ref, rel=1e-14)
    assert ember.erfinv(ember.tensor([1.0, -1.0, 1.5])).tolist()[:2] == [float("inf"),
                                                                         float("-inf")]
    # erf(erfinv(y)) == y to the last bits in the tails too
    t = ember.tensor([1 - 1e-9, -1 + 1e-13], dtype=ember.float64)
    assert ember.erfc(ember.erfinv(t)).tolist()[0] == pytest.approx(1e-9, rel=1e-12)
    x = ember.tensor([0.999999], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(ember.erfinv, (x,))


def test_ndtri_tails_accurate():
    p = ember.tensor([1e-300, 1e-20, 1e-10, 1e-5, 0.3, 0.5, 0.975, 1 - 1e-10, 0.0, 1.0],
                     dtype=ember.float64)
    ref = [-37.0470962993612, -9.262340089798409, -6.361340902404056, -4.264890793922825,
           -0.5244005127080409, 0.0, 1.959963984540054, 6.361340889697422]
    got = ember.special.ndtri(p).tolist()
    assert got[:8] == pytest.approx(ref, rel=1e-14, abs=1e-15)
    assert got[8:] == [float("-inf"), float("inf")]
    assert all(v != v for v in ember.special.ndtri(ember.tensor([-0.1, 1.5, float("nan")])).tolist())
    # float32 in, float32 out, the float64 value rounded once
    f = ember.special.ndtri(ember.tensor([1e-20, 0.02]))
    assert f.dtype == ember.float32 and f.tolist()[0] == pytest.approx(-9.262340089798409, rel=1e-7)
    q = ember.tensor([0.01, 0.3, 0.9], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(ember.special.ndtri, (q,))
    assert ember.autograd.gradgradcheck(ember.special.ndtri, (q,))
    assert ember.special.ndtri(q).grad_fn.name() == "SpecialNdtriBackward0"


@needs_torch
def test_erfinv_ndtri_match_torch():
    p = [1e-300, 1e-20, 1e-10, 1e-5, 0.02, 0.5, 0.7, 1 - 1e-10, 1 - 2.0 ** -50]
    got = ember.special.ndtri(ember.tensor(p, dtype=ember.float64)).tolist()
    ref = torch.special.ndtri(torch.tensor(p, dtype=torch.float64)).tolist()
    assert got == pytest.approx(ref, rel=1e-13)
    y = [-0.999999999999, -0.9999, 0.5, 0.99999999, 1 - 2.0 ** -45]
    got = ember.erfinv(ember.tensor(y, dtype=ember.float64)).tolist()
    ref = torch.erfinv(torch.tensor(y, dtype=torch.float64)).tolist()
    assert got == pytest.approx(ref, rel=1e-13)


# ---- tensor() infers the dtypes of NumPy scalars and tensors in lists ----------------------------
def test_tensor_infers_element_dtypes():
    cases = [
        ([np.float64(1.5)], ember.float64), ([np.float64(1.5), 2.0], ember.float64),
        ([1, np.float64(2.0)], ember.float64), ([np.float32(1.5)], ember.float32),
        ([np.int8(1), np.int8(2)], ember.int8), ([np.int32(1), 2], ember.int64),
        ([np.uint8(3)], ember.uint8), ([[np.float64(1)], [np.float64(2)]], ember.float64),
        ([np.bool_(True)], ember.bool), ([np.float16(1)], ember.float16),
        ([np.int64(1), np.float32(2)], ember.float32), ([np.int16(1), 1.5], ember.float32),
        ([np.complex64(1)], ember.complex64),
        ([ember.tensor(1.0, dtype=ember.float64), 2.0], ember.float64),
        ([ember.tensor(1, dtype=ember.int8)], ember.int8),
        ([ember.tensor(1, dtype=ember.int8), 1], ember.int64),
        ([1, 2.5, True], ember.float32), ([True, False], ember.bool), ([], ember.float32),
        ([[], []], ember.float32), ([1, 2], ember.int64), ([1j, 1], ember.complex64),
    ]
    for data, dt in cases:
        assert ember.tensor(data).dtype is dt, (data, dt)
    assert ember.tensor([np.float64(0.1), np.float64(0.2)]).tolist() == [0.1, 0.2]  # no rounding
    assert ember.tensor([np.float64(1.5)], dtype=ember.float32).dtype is ember.float32
    assert ember.as_tensor([np.float64(1.5)]).dtype is ember.float64
    assert ember.tensor([np.int8(-3), np.int8(4)]).tolist() == [-3, 4]


@needs_torch
def test_tensor_inference_matches_torch():
    cases = [[np.float64(1.5)], [np.float64(1.5), 2.0], [np.int8(1), np.int8(2)], [np.int32(1), 2],
             [np.uint8(3)], [np.bool_(True)], [np.float16(1)], [np.int64(1), np.float32(2)],
             [np.int16(1), 1.5], [[np.float64(1)], [np.float64(2)]], [1, 2.5, True], []]
    for data in cases:
        assert str(ember.tensor(data).dtype).split(".")[1] == str(torch.tensor(data).dtype).split(".")[1]
    for lib_e, lib_t in ((ember.float64, torch.float64), (ember.int16, torch.int16)):
        got = ember.tensor([ember.tensor(1, dtype=lib_e), 2]).dtype
        ref = torch.tensor([torch.tensor(1, dtype=lib_t), 2]).dtype
        assert str(got).split(".")[1] == str(ref).split(".")[1]
