"""CUDA matrix products (csrc/cuda/linalg_ops.cpp, cuBLAS) against the CPU kernels: every op in
float64 (tight), float32 with TF32 off (rtol 1e-4) and on (loose), float16 / bfloat16 (loose),
integers (exact, wrapping), transposed and sliced operands, broadcast batches, K == 0, beta == 0
with NaN in self, 1-D matmul, empty shapes, and matmul's gradients.

Operands are made on the CPU and copied to the device, so these tests need only the copy hooks and
the linalg kernels (plus view ops, which change no data)."""

import math

import ember
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")

FLOATS = [ember.float64, ember.float32, ember.float16, ember.bfloat16]
# (rtol, atol) of a CUDA result against the CPU result from the same (rounded) inputs.
TOL = {
    ember.float64: (1e-10, 1e-12),
    ember.float32: (1e-4, 1e-5),
    ember.float16: (2e-2, 2e-2),
    ember.bfloat16: (5e-2, 5e-2),
}


@pytest.fixture(autouse=True)
def _tf32_off():
    prev = ember.get_float32_matmul_precision()
    ember.set_float32_matmul_precision("highest")
    yield
    ember.set_float32_matmul_precision(prev)


def rand(*shape, dtype=ember.float64, seed=0):
    g = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    t = ember.tensor(g.standard_normal(shape) if shape else g.standard_normal(), dtype=ember.float64)
    return t.to(dtype)


def randint(*shape, dtype=ember.int64, seed=0):
    g = np.random.default_rng(seed + sum(shape))
    low = 0 if dtype == ember.uint8 else -50
    return ember.tensor(g.integers(low, 50, size=shape), dtype=dtype)


def host(t):
    """A CUDA (or CPU) result as a float64 / int64 NumPy array on the host."""
    t = t.cpu()
    if t.dtype.is_floating_point:
        return t.to(ember.float64).numpy()
    return t.numpy()


def dev(t):
    return t.to("cuda")


def check(gpu, cpu, dtype):
    assert gpu.device.type == "cuda"
    assert gpu.dtype == cpu.dtype == dtype
    assert tuple(gpu.shape) == tuple(cpu.shape)
    rtol, atol = TOL.get(dtype, (0, 0))
    np.testing.assert_allclose(host(gpu), host(cpu), rtol=rtol, atol=atol)


# ---- every op, every floating dtype ---------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_plain_products_match_cpu(dtype):
    a, b = rand(17, 33, dtype=dtype, seed=1), rand(33, 9, dtype=dtype, seed=2)
    v, w = rand(33, dtype=dtype, seed=3), rand(33, dtype=dtype, seed=4)
    check(ember.mm(dev(a), dev(b)), ember.mm(a, b), dtype)
    check(ember.matmul(dev(a), dev(b)), ember.matmul(a, b), dtype)
    check(dev(a) @ dev(b), a @ b, dtype)
    check(ember.mv(dev(a), dev(v)), ember.mv(a, v), dtype)
    check(ember.dot(dev(v), dev(w)), ember.dot(v, w), dtype)
    check(ember.vdot(dev(v), dev(w)), ember.vdot(v, w), dtype)
    x, y = rand(5, 7, 11, dtype=dtype, seed=5), rand(5, 11, 3, dtype=dtype, seed=6)
    check(ember.bmm(dev(x), dev(y)), ember.bmm(x, y), dtype)
    check(ember.matmul(dev(x), dev(y)), ember.matmul(x, y), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_accumulating_products_match_cpu(dtype):
    m1, m2 = rand(6, 10, dtype=dtype, seed=1), rand(10, 4, dtype=dtype, seed=2)
    c = rand(6, 4, dtype=dtype, seed=3)
    for beta, alpha in [(1, 1), (0.5, -2.0), (0, 3.0), (2.0, 0)]:
        check(ember.addmm(dev(c), dev(m1), dev(m2), beta=beta, alpha=alpha),
              ember.addmm(c, m1, m2, beta=beta, alpha=alpha), dtype)
    # self broadcasts: a row, a column, a 0-d tensor.
    row, col, s = rand(4, dtype=dtype, seed=4), rand(6, 1, dtype=dtype, seed=5), rand(dtype=dtype)
    for init in (row, col, s):
        check(ember.addmm(dev(init), dev(m1), dev(m2), beta=0.75),
              ember.addmm(init, m1, m2, beta=0.75), dtype)
    # A bias row over more rows than the broadcast kernel's row slices (2048) and columns that
    # end inside a block: linalg_ops.cu's broadcast_rows_kernel.
    tall, wide = rand(2500, 3, dtype=dtype, seed=8), rand(3, 300, dtype=dtype, seed=9)
    bias = rand(300, dtype=dtype, seed=10)
    check(ember.addmm(dev(bias), dev(tall), dev(wide)), ember.addmm(bias, tall, wide), dtype)
    v, y = rand(10, dtype=dtype, seed=6), rand(6, dtype=dtype, seed=7)
    check(ember.addmv(dev(y), dev(m1), dev(v), beta=0.5, alpha=2),
          ember.addmv(y, m1, v, beta=0.5, alpha=2), dtype)
    check(ember.addmv(dev(s), dev(m1), dev(v)), ember.addmv(s, m1, v), dtype)
    b1, b2 = rand(3, 6, 5, dtype=dtype, seed=8), rand(3, 5, 4, dtype=dtype, seed=9)
    cb = rand(3, 6, 4, dtype=dtype, seed=10)
    check(ember.baddbmm(dev(cb), dev(b1), dev(b2), beta=-1, alpha=0.5),
          ember.baddbmm(cb, b1, b2, beta=-1, alpha=0.5), dtype)
    check(ember.baddbmm(dev(c), dev(b1), dev(b2)), ember.baddbmm(c, b1, b2), dtype)  # broadcast self
    check(ember.addbmm(dev(c), dev(b1), dev(b2), beta=0.25, alpha=3),
          ember.addbmm(c, b1, b2, beta=0.25, alpha=3), dtype)


def test_cpu_zero_dim_self_joins_the_device():
    m1, m2 = rand(4, 3, seed=1), rand(3, 5, seed=2)
    s = ember.tensor(2.5, dtype=ember.float64)  # stays on the CPU
    check(ember.addmm(s, dev(m1), dev(m2)), ember.addmm(s, m1, m2), ember.float64)


# ---- float32 and TF32 ------------------------------------------------------------------------


def test_float32_tf32_switch_round_trips_and_reaches_the_kernels():
    from ember import _C_cuda

    assert ember.backends.cuda.matmul.allow_tf32 is False
    assert _C_cuda._get_allow_tf32() is False
    ember.backends.cuda.matmul.allow_tf32 = True
    assert ember.backends.cuda.matmul.allow_tf32 is True
    assert ember.get_float32_matmul_precision() == "high"
    assert _C_cuda._get_allow_tf32() is True
    ember.set_float32_matmul_precision("medium")
    assert _C_cuda._get_allow_tf32() is True and ember.backends.cuda.matmul.allow_tf32
    ember.set_float32_matmul_precision("highest")
    assert _C_cuda._get_allow_tf32() is False
    assert ember.backends.cuda.matmul.allow_tf32 is False


def test_float32_with_tf32_is_loose_and_without_is_tight():
    a, b = rand(256, 512, dtype=ember.float32, seed=1), rand(512, 128, dtype=ember.float32, seed=2)
    ref = host(a.to(ember.float64) @ b.to(ember.float64))
    exact = host(dev(a) @ dev(b))
    np.testing.assert_allclose(exact, ref, rtol=1e-4, atol=1e-3)
    ember.backends.cuda.matmul.allow_tf32 = True
    try:
        fast = host(dev(a) @ dev(b))
        bfast = host(ember.bmm(dev(a).unsqueeze(0), dev(b).unsqueeze(0)))[0]
    finally:
        ember.backends.cuda.matmul.allow_tf32 = False
    # TF32 keeps 10 mantissa bits: errors of ~1e-3 relative to the row norms (sqrt(512) ~ 22).
    np.testing.assert_allclose(fast, ref, rtol=0, atol=0.5)
    np.testing.assert_allclose(bfast, ref, rtol=0, atol=0.5)
    assert np.abs(exact - ref).max() < 1e-2


# ---- layouts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32, ember.float16], ids=str)
def test_transposed_and_sliced_operands(dtype):
    a, b = rand(12, 20, dtype=dtype, seed=1), rand(20, 16, dtype=dtype, seed=2)
    da, db = dev(a), dev(b)
    # Transposed views (column-major: cuBLAS op T, no copy).
    check(ember.mm(dev(b).t(), dev(a).t()), ember.mm(b.t(), a.t()), dtype)
    check(ember.mm(da, dev(b.t().contiguous()).t()), ember.mm(a, b), dtype)
    # Sliced: a row stride larger than the row (leading dimension), a column step (copied).
    check(ember.mm(da[:, 2:15], db[3:16, ::2]), ember.mm(a[:, 2:15], b[3:16, ::2]), dtype)
    check(ember.mm(da[::2, ::3], db[:7, 1:]), ember.mm(a[::2, ::3], b[:7, 1:]), dtype)
    check(ember.mv(da.t(), dev(rand(12, dtype=dtype))), ember.mv(a.t(), rand(12, dtype=dtype)),
          dtype)
    check(ember.mv(da[:, ::2], db[::2, 0]), ember.mv(a[:, ::2], b[::2, 0]), dtype)
    check(ember.dot(da[0, ::2], db[::2, 1]), ember.dot(a[0, ::2], b[::2, 1]), dtype)
    c = rand(12, 12, dtype=dtype, seed=3)
    check(ember.addmm(dev(c).t(), da, db[:, :12].t().t(), beta=0.5),
          ember.addmm(c.t(), a, b[:, :12], beta=0.5), dtype)
    # Batched: transposed inner dims, a permuted batch, a sliced batch.
    x, y = rand(4, 9, 6, dtype=dtype, seed=4), rand(4, 9, 5, dtype=dtype, seed=5)
    check(ember.bmm(dev(x).transpose(1, 2), dev(y)), ember.bmm(x.transpose(1, 2), y), dtype)
    p = rand(9, 4, 6, dtype=dtype, seed=6)
    check(ember.bmm(dev(p).transpose(0, 1).transpose(1, 2), dev(y)),
          ember.bmm(p.transpose(0, 1).transpose(1, 2), y), dtype)
    check(ember.bmm(dev(x)[::2].transpose(1, 2), dev(y)[1::2]),
          ember.bmm(x[::2].transpose(1, 2), y[1::2]), dtype)


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32, ember.bfloat16], ids=str)
def test_matmul_batch_broadcasting(dtype):
    cases = [
        ((2, 3, 4, 5), (5, 6)),        # B shared: batches fold into one matrix
        ((4, 5), (2, 3, 5, 6)),        # A shared: stride-0 batches
        ((2, 1, 4, 5), (3, 5, 6)),     # both broadcast: expanded copies
        ((1, 3, 4, 5), (2, 1, 5, 6)),
        ((3, 4, 5), (1, 5, 6)),
        ((2, 3, 4, 5), (2, 3, 5, 6)),
        ((5,), (2, 3, 5, 6)),          # 1-D first: a row
        ((2, 3, 4, 5), (5,)),          # 1-D second: a column
    ]
    for i, (sa, sb) in enumerate(cases):
        a, b = rand(*sa, dtype=dtype, seed=10 + i), rand(*sb, dtype=dtype, seed=20 + i)
        check(ember.matmul(dev(a), dev(b)), ember.matmul(a, b), dtype)
    # B shared but A's batches not stackable (a transposed batch): strided batches.
    a, b = rand(3, 2, 4, 5, dtype=dtype, seed=1), rand(5, 6, dtype=dtype, seed=2)
    check(ember.matmul(dev(a).transpose(0, 1), dev(b)), ember.matmul(a.transpose(0, 1), b), dtype)


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32], ids=str)
def test_matmul_one_dimensional_cases(dtype):
    v, w = rand(7, dtype=dtype, seed=1), rand(7, dtype=dtype, seed=2)
    m = rand(7, 3, dtype=dtype, seed=3)
    r = ember.matmul(dev(v), dev(w))
    assert r.shape == ()
    check(r, ember.matmul(v, w), dtype)
    check(ember.matmul(dev(v), dev(m)), ember.matmul(v, m), dtype)        # (7,) @ (7, 3) -> (3,)
    check(ember.matmul(dev(m).t(), dev(v)), ember.matmul(m.t(), v), dtype)  # (3, 7) @ (7,) -> (3,)
    assert ember.matmul(dev(v), dev(w)).item() == pytest.approx(ember.matmul(v, w).item(),
                                                                  rel=1e-5)


# ---- empty shapes, K == 0, beta == 0 --------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_k_zero_gives_beta_times_self_or_zeros(dtype):
    a, b = rand(3, 0, dtype=dtype), rand(0, 4, dtype=dtype)
    r = ember.mm(dev(a), dev(b))
    assert r.shape == (3, 4)
    assert (host(r) == 0).all()
    c = rand(3, 4, dtype=dtype, seed=3)
    check(ember.addmm(dev(c), dev(a), dev(b), beta=2.5), ember.addmm(c, a, b, beta=2.5), dtype)
    nan_c = ember.full((3, 4), math.nan, dtype=dtype)
    assert (host(ember.addmm(dev(nan_c), dev(a), dev(b), beta=0)) == 0).all()
    check(ember.bmm(dev(rand(2, 3, 0, dtype=dtype)), dev(rand(2, 0, 5, dtype=dtype))),
          ember.bmm(rand(2, 3, 0, dtype=dtype), rand(2, 0, 5, dtype=dtype)), dtype)
    assert host(ember.dot(dev(rand(0, dtype=dtype)), dev(rand(0, dtype=dtype)))) == 0
    check(ember.addmv(dev(rand(3, dtype=dtype)), dev(a), dev(rand(0, dtype=dtype)), beta=-1),
          ember.addmv(rand(3, dtype=dtype), a, rand(0, dtype=dtype), beta=-1), dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_beta_zero_ignores_nan_in_self(dtype):
    m1, m2 = rand(5, 6, dtype=dtype, seed=1), rand(6, 7, dtype=dtype, seed=2)
    nan_c = ember.full((5, 7), math.nan, dtype=dtype)
    r = ember.addmm(dev(nan_c), dev(m1), dev(m2), beta=0)
    assert not np.isnan(host(r)).any()
    check(r, ember.mm(m1, m2), dtype)
    nan_b = ember.full((2, 5, 7), math.nan, dtype=dtype)
    b1, b2 = rand(2, 5, 6, dtype=dtype, seed=3), rand(2, 6, 7, dtype=dtype, seed=4)
    r = ember.baddbmm(dev(nan_b), dev(b1), dev(b2), beta=0, alpha=2)
    assert not np.isnan(host(r)).any()
    check(r, ember.baddbmm(ember.zeros((2, 5, 7), dtype=dtype), b1, b2, beta=0, alpha=2), dtype)
    r = ember.addmv(dev(ember.full((5,), math.nan, dtype=dtype)), dev(m1), dev(m2[:, 0]), beta=0)
    assert not np.isnan(host(r)).any()
    r = ember.addbmm(dev(nan_c), dev(b1), dev(b2), beta=0)
    assert not np.isnan(host(r)).any()
    # beta != 0 does propagate NaN, as on the CPU.
    assert np.isnan(host(ember.addmm(dev(nan_c), dev(m1), dev(m2), beta=1))).all()


def test_empty_shapes():
    for sa, sb in [((0, 3), (3, 4)), ((3, 4), (4, 0)), ((0, 2, 3), (0, 3, 4)), ((2, 0, 3), (3, 1))]:
        a, b = rand(*sa), rand(*sb)
        r = ember.matmul(dev(a), dev(b))
        assert r.shape == ember.matmul(a, b).shape and r.numel() == 0
        assert r.device.type == "cuda"
    r = ember.addmm(dev(rand(0, 4)), dev(rand(0, 3)), dev(rand(3, 4)))
    assert r.shape == (0, 4)


# ---- integers, errors ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ember.int64, ember.int32, ember.int16, ember.int8, ember.uint8],
                         ids=str)
def test_integer_products_are_exact_like_cpu(dtype):
    a, b = randint(6, 9, dtype=dtype, seed=1), randint(9, 4, dtype=dtype, seed=2)
    c = randint(6, 4, dtype=dtype, seed=3)
    for gpu, cpu in [
        (ember.mm(dev(a), dev(b)), ember.mm(a, b)),
        (ember.mm(dev(b).t(), dev(a).t()), ember.mm(b.t(), a.t())),
        (ember.addmm(dev(c), dev(a), dev(b), beta=2, alpha=-3), ember.addmm(c, a, b, beta=2, alpha=-3)),
        (ember.matmul(dev(randint(2, 1, 3, 9, dtype=dtype)), dev(randint(4, 9, 5, dtype=dtype))),
         ember.matmul(randint(2, 1, 3, 9, dtype=dtype), randint(4, 9, 5, dtype=dtype))),
        (ember.dot(dev(a[0]), dev(b[:, 1])), ember.dot(a[0], b[:, 1])),
        (ember.mv(dev(a)[:, ::2], dev(b)[::2, 0]), ember.mv(a[:, ::2], b[::2, 0])),
        (ember.addbmm(dev(c), dev(randint(3, 6, 2, dtype=dtype)), dev(randint(3, 2, 4, dtype=dtype))),
         ember.addbmm(c, randint(3, 6, 2, dtype=dtype), randint(3, 2, 4, dtype=dtype))),
    ]:
        assert gpu.dtype == dtype and gpu.device.type == "cuda"
        np.testing.assert_array_equal(host(gpu), host(cpu))
    # Wrapping arithmetic matches the CPU.
    big = ember.full((2, 3), 2**40, dtype=ember.int64)
    np.testing.assert_array_equal(host(ember.mm(dev(big), dev(big.t()))), host(ember.mm(big, big.t())))


def test_errors_name_the_op():
    a, b = dev(rand(2, 3)), dev(rand(4, 5))
    with pytest.raises(RuntimeError, match=r"mm: shapes \(2, 3\) and \(4, 5\) cannot be multiplied"):
        ember.mm(a, b)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype"):
        ember.mm(a, dev(rand(3, 2, dtype=ember.float32)))
    with pytest.raises(RuntimeError, match="bmm: expected batch1 to be a 3-D tensor"):
        ember.bmm(a, a)
    with pytest.raises(TypeError, match="not implemented for dtype bool"):
        ember.mm(dev(ember.ones(2, 2, dtype=ember.bool)), dev(ember.ones(2, 2, dtype=ember.bool)))
    with pytest.raises(RuntimeError, match="argument beta must not be a floating point number"):
        ember.addmm(dev(randint(2, 2)), dev(randint(2, 2)), dev(randint(2, 2)), beta=0.5)


# ---- bigger products, autograd ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16], ids=str)
def test_large_products_against_float64(dtype):
    a, b = rand(300, 700, dtype=dtype, seed=1), rand(700, 260, dtype=dtype, seed=2)
    ref = host(a.to(ember.float64) @ b.to(ember.float64))
    got = host(dev(a) @ dev(b))
    scale = math.sqrt(700)
    tol = {ember.float32: 1e-4, ember.float16: 2e-3, ember.bfloat16: 1.5e-2}[dtype]
    assert np.abs(got - ref).max() <= tol * scale * 4
    x, y = rand(8, 64, 96, dtype=dtype, seed=3), rand(8, 96, 48, dtype=dtype, seed=4)
    ref = host(x.to(ember.float64) @ y.to(ember.float64))
    assert np.abs(host(dev(x) @ dev(y)) - ref).max() <= tol * math.sqrt(96) * 4


@pytest.mark.parametrize("shapes", [((4, 6), (6, 3)), ((2, 4, 6), (2, 6, 3)), ((6,), (6, 3)),
                                    ((4, 6), (6,))], ids=str)
def test_matmul_gradients_match_cpu(shapes):
    sa, sb = shapes
    a, b = rand(*sa, seed=1), rand(*sb, seed=2)
    out_shape = tuple(ember.matmul(a, b).shape)
    g = rand(*out_shape, seed=3) if out_shape else ember.tensor(1.5, dtype=ember.float64)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    ember.matmul(ca, cb).backward(g)
    da, db = dev(a).requires_grad_(), dev(b).requires_grad_()
    out = ember.matmul(da, db)
    assert out.requires_grad and out.device.type == "cuda"
    out.backward(dev(g))
    assert da.grad.device.type == "cuda" and db.grad.device.type == "cuda"
    np.testing.assert_allclose(host(da.grad), host(ca.grad), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(host(db.grad), host(cb.grad), rtol=1e-10, atol=1e-12)


def test_addmm_gradients_match_cpu():
    c, m1, m2 = rand(4, 3, seed=1), rand(4, 5, seed=2), rand(5, 3, seed=3)
    g = rand(4, 3, seed=4)
    cpu = [t.clone().requires_grad_() for t in (c, m1, m2)]
    ember.addmm(*cpu, beta=0.5, alpha=2).backward(g)
    gpu = [dev(t).requires_grad_() for t in (c, m1, m2)]
    ember.addmm(*gpu, beta=0.5, alpha=2).backward(dev(g))
    for x, y in zip(gpu, cpu):
        np.testing.assert_allclose(host(x.grad), host(y.grad), rtol=1e-10, atol=1e-12)


def test_composites_and_out_variants_on_cuda():
    # Composites built on these kernels (and on the CUDA pointwise ops), out= and in-place forms
    # (which copy the kernel's result through the CUDA _copy_from).
    a, b = rand(4, 6, seed=1), rand(6, 5, seed=2)
    v, w = rand(4, seed=3), rand(5, seed=4)
    c = rand(4, 5, seed=5)
    check(ember.outer(dev(v), dev(w)), ember.outer(v, w), ember.float64)
    check(ember.addr(dev(c), dev(v), dev(w), beta=0.5, alpha=2),
          ember.addr(c, v, w, beta=0.5, alpha=2), ember.float64)
    check(ember.inner(dev(a), dev(b.t())), ember.inner(a, b.t()), ember.float64)
    check(ember.tensordot(dev(a), dev(b), dims=1), ember.tensordot(a, b, dims=1), ember.float64)
    check(ember.einsum("ij,jk->ik", dev(a), dev(b)), ember.einsum("ij,jk->ik", a, b), ember.float64)
    out = dev(ember.zeros(4, 5, dtype=ember.float64))
    r = ember.mm(dev(a), dev(b), out=out)
    assert r is out or r.data_ptr() == out.data_ptr()
    check(out, ember.mm(a, b), ember.float64)
    expected = ember.addmm(c, a, b, beta=0.5, alpha=-1)
    inplace = dev(c)
    inplace.addmm_(dev(a), dev(b), beta=0.5, alpha=-1)
    check(inplace, expected, ember.float64)
