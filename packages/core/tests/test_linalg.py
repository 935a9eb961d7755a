"""Matrix products (ops/linalg.yaml) against NumPy, and against torch when it is installed."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from core_helpers import to_np

RNG = np.random.default_rng(0)


def arr(shape, dtype=np.float32, layout="contig"):
    """A NumPy array of `shape` and the ember tensor sharing its memory (same strides).

    layout: "contig", "transposed" (last two dims swapped in memory) or "strided" (every
    other element of a twice-as-wide buffer along the last dim).
    """
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        base = RNG.standard_normal(shape[:-2] + (shape[-1], shape[-2])).astype(dtype)
        a = np.swapaxes(base, -1, -2)
    elif layout == "strided" and len(shape) >= 1:
        base = RNG.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(dtype)
        a = base[..., ::2]
    else:
        a = RNG.standard_normal(shape).astype(dtype)
    return a, ember.from_numpy(a)


def intarr(shape, dtype):
    a = RNG.integers(-20, 20, size=shape).astype(dtype)
    return a, ember.from_numpy(a)


def close(t, expected, dtype=np.float32):
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(to_np(t), expected, rtol=tol, atol=tol)


MATMUL_SHAPES = [
    ((4,), (4,)),
    ((3, 4), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 3, 4), (6, 4, 5)),
    ((2, 2, 3, 4), (2, 2, 4, 1)),
    ((1, 4), (4, 1)),
    ((5, 1), (1, 6)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
@pytest.mark.parametrize("layout", ["contig", "transposed", "strided"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_vs_numpy(sa, sb, layout, dtype):
    a, ea = arr(sa, dtype, layout)
    b, eb = arr(sb, dtype, layout)
    r = ember.matmul(ea, eb)
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert r.dtype is (ember.float32 if dtype == np.float32 else ember.float64)
    assert tuple(r.shape) == expected.shape
    close(r, expected, dtype)


def test_matmul_method_and_torch():
    torch = pytest.importorskip("torch")
    for sa, sb in MATMUL_SHAPES:
        a, ea = arr(sa)
        b, eb = arr(sb)
        r = ea.matmul(eb)
        t = torch.matmul(torch.from_numpy(a), torch.from_numpy(b))
        assert tuple(r.shape) == tuple(t.shape)
        np.testing.assert_allclose(to_np(r), t.numpy(), rtol=1e-4, atol=1e-4)


def test_matmul_batched_folding_and_layouts():
    # 3-D @ 2-D folds into one gemm; permuted batches and transposed rhs must still be right.
    a, ea = arr((6, 5, 7))
    b, eb = arr((7, 3), layout="transposed")
    close(ember.matmul(ea, eb), a.astype(np.float64) @ b)
    ap = np.transpose(a, (1, 0, 2))  # batch dim not outermost in memory: no fold
    close(ember.matmul(ember.from_numpy(ap), eb), ap.astype(np.float64) @ b)
    at = np.swapaxes(a, 1, 2)  # column-major matrices in each batch
    c, ec = arr((5, 3), layout="transposed")
    close(ember.matmul(ember.from_numpy(at), ec), at.astype(np.float64) @ c)
    # Many small matrices (the batch-parallel path) and a broadcast lhs.
    x, ex = arr((37, 9, 8))
    y, ey = arr((37, 8, 10), layout="transposed")
    close(ember.bmm(ex, ey), x.astype(np.float64) @ y)
    w, ew = arr((9, 8))
    close(ember.matmul(ew, ey), w.astype(np.float64) @ y)


def test_matmul_larger_than_blas_threshold():
    a, ea = arr((130, 70))
    b, eb = arr((70, 90), layout="transposed")
    close(ember.mm(ea, eb), a.astype(np.float64) @ b)
    x, ex = arr((3, 80, 80))
    close(ember.bmm(ex, ex), x.astype(np.float64) @ x)


# Products cut into tiles that OpenBLAS runs on the calling thread (spread over ember's pool):
# row blocks, 2-D tiles, gemv/dot blocks, and shapes left whole to OpenBLAS (large K).
TILED_SHAPES = [
    ((128, 64, 64), (128, 64, 64)),  # one call per matrix
    ((6, 70, 64), (6, 64, 64)),  # two row blocks per matrix
    ((40, 300), (300, 400)),  # 2-D tiles
    ((3, 37, 200), (3, 200, 500)),  # 2-D tiles, uneven edges, batched
    ((32, 64, 64), (64, 64)),  # batches folded into one (2048 x 64) matrix, then row blocks
    ((5000, 100), (100, 1)),  # gemv over row blocks
    ((1, 100), (100, 5000)),  # gemv over column blocks
    ((7, 1, 100), (7, 100, 300)),  # row vectors
    ((8, 600), (600, 300)),  # K too large for tiles: one OpenBLAS call
    ((1, 10000), (10000, 3)),  # long gemv: one OpenBLAS call
]


@pytest.mark.parametrize("sa,sb", TILED_SHAPES)
@pytest.mark.parametrize("layout", ["contig", "transposed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_tiled(sa, sb, layout, dtype):
    a, ea = arr(sa, dtype, layout)
    b, eb = arr(sb, dtype, "transposed" if layout == "contig" else "contig")
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    tol = 2e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(to_np(ember.matmul(ea, eb)), expected, rtol=tol, atol=tol)


def test_baddbmm_tiled_beta_alpha():
    b1, eb1 = arr((3, 37, 200), np.float64, "transposed")
    b2, eb2 = arr((3, 200, 500), np.float64)
    i, ei = arr((37, 1), np.float64)
    expected = 0.5 * i + 2 * (b1 @ b2)
    close(ember.baddbmm(ei, eb1, eb2, beta=0.5, alpha=2), expected, np.float64)
    nan = ember.full((3, 37, 500), float("nan"), dtype=ember.float64)
    close(ember.baddbmm(nan, eb1, eb2, beta=0, alpha=2), 2 * (b1 @ b2), np.float64)


@pytest.mark.parametrize(
    "sa,sb,out",
    [
        ((0, 3), (3, 4), (0, 4)),
        ((3, 0), (0, 4), (3, 4)),
        ((0, 2, 3), (3, 4), (0, 2, 4)),
        ((2, 3, 0), (2, 0, 5), (2, 3, 5)),
        ((0,), (0,), ()),
    ],
)
def test_matmul_empty(sa, sb, out):
    r = ember.matmul(ember.ones(sa), ember.ones(sb))
    assert tuple(r.shape) == out
    assert np.all(to_np(r) == 0)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_matmul_integers_exact(dtype):
    a, ea = intarr((2, 3, 5), dtype)
    b, eb = intarr((5, 4), dtype)
    r = ember.matmul(ea, eb)
    expected = (a.astype(np.int64) @ b.astype(np.int64)).astype(dtype)  # wraps like PyTorch
    assert r.dtype is getattr(ember, np.dtype(dtype).name)
    np.testing.assert_array_equal(to_np(r), expected)
    v, ev = intarr((5,), dtype)
    np.testing.assert_array_equal(
        to_np(ember.mv(ember.from_numpy(b.T.copy()), ev)), (b.T.astype(np.int64) @ v).astype(dtype)
    )
    assert ember.dot(ev, ev).item() == int((v.astype(np.int64) @ v.astype(np.int64)).astype(dtype))


def test_matmul_int_wraps_like_torch():
    torch = pytest.importorskip("torch")
    a = np.full((2, 3), 100, dtype=np.int8)
    b = np.full((3, 2), 3, dtype=np.int8)
    r = ember.matmul(ember.from_numpy(a), ember.from_numpy(b))
    np.testing.assert_array_equal(
        to_np(r), torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    )


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_matmul_half_types(dt):
    a, ea = arr((2, 3, 16))
    b, eb = arr((16, 5), layout="transposed")
    ha, hb = ea.to(getattr(ember, dt)), eb.to(getattr(ember, dt))
    r = ember.matmul(ha, hb)
    assert r.dtype is getattr(ember, dt)
    expected = to_np(ha.to(ember.float32)).astype(np.float64) @ to_np(hb.to(ember.float32))
    np.testing.assert_allclose(to_np(r.to(ember.float32)), expected, rtol=2e-2, atol=5e-2)


def test_matmul_errors():
    with pytest.raises(
        RuntimeError, match=r"matmul: shapes \(3, 4\) and \(5, 6\) cannot be multiplied \(4 != 5\)"
    ):
        ember.matmul(ember.ones(3, 4), ember.ones(5, 6))
    with pytest.raises(
        RuntimeError, match=r"matmul: shapes \(3,\) and \(4,\) cannot be multiplied"
    ):
        ember.matmul(ember.ones(3), ember.ones(4))
    with pytest.raises(RuntimeError, match="at least 1D, but they are 0D and 1D"):
        ember.matmul(ember.ones(()), ember.ones(3))
    with pytest.raises(
        RuntimeError, match="expected m1 and m2 to have the same dtype, but got: float != double"
    ):
        ember.matmul(ember.ones(3, 4), ember.ones(4, 2, dtype=ember.float64))
    with pytest.raises(
        RuntimeError,
        match=r"matmul: batch dimensions of shapes \(2, 3, 4\) and \(3, 4, 6\) cannot be broadcast",
    ):
        ember.matmul(ember.ones(2, 3, 4), ember.ones(3, 4, 6))
    with pytest.raises(TypeError, match="matmul: not implemented for dtype bool"):
        ember.matmul(ember.ones(2, 2, dtype=ember.bool), ember.ones(2, 2, dtype=ember.bool))


def test_mm_bmm_mv_dot():
    a, ea = arr((3, 4), layout="transposed")
    b, eb = arr((4, 5), layout="strided")
    close(ember.mm(ea, eb), a.astype(np.float64) @ b)
    close(ea.mm(eb), a.astype(np.float64) @ b)
    x, ex = arr((2, 3, 4), np.float64, "transposed")
    y, ey = arr((2, 4, 5), np.float64, "strided")
    close(ember.bmm(ex, ey), x @ y, np.float64)
    v, ev = arr((4,), layout="strided")
    close(ember.mv(ea, ev), a.astype(np.float64) @ v)
    w = ember.ones(8)[::2]
    assert ember.dot(w, ev).item() == pytest.approx(float(v.sum()), rel=1e-5)
    r = ember.vdot(ev, ev)
    assert r.shape == () and r.item() == pytest.approx(float(v @ v), rel=1e-5)


def test_mm_family_errors():
    with pytest.raises(
        RuntimeError, match=r"mm: shapes \(3, 4\) and \(5, 6\) cannot be multiplied \(4 != 5\)"
    ):
        ember.mm(ember.ones(3, 4), ember.ones(5, 6))
    with pytest.raises(RuntimeError, match="mm: expected mat2 to be a 2-D tensor"):
        ember.mm(ember.ones(3, 4), ember.ones(4))
    with pytest.raises(
        RuntimeError,
        match="mm: expected m1 and m2 to have the same dtype, but got: float != double",
    ):
        ember.mm(ember.ones(3, 4), ember.ones(4, 6, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="bmm: expected batch1 to be a 3-D tensor"):
        ember.bmm(ember.ones(3, 4), ember.ones(2, 4, 5))
    with pytest.raises(
        RuntimeError, match=r"bmm: batch sizes of shapes \(2, 3, 4\) and \(3, 4, 5\) don't match"
    ):
        ember.bmm(ember.ones(2, 3, 4), ember.ones(3, 4, 5))
    with pytest.raises(
        RuntimeError, match=r"bmm: shapes \(2, 3, 4\) and \(2, 5, 5\) cannot be multiplied"
    ):
        ember.bmm(ember.ones(2, 3, 4), ember.ones(2, 5, 5))
    with pytest.raises(RuntimeError, match=r"mv: shapes \(3, 4\) and \(5,\) cannot be multiplied"):
        ember.mv(ember.ones(3, 4), ember.ones(5))
    with pytest.raises(RuntimeError, match="dot: 1D tensors expected, but got 2D and 1D tensors"):
        ember.dot(ember.ones(3, 1), ember.ones(3))
    with pytest.raises(
        RuntimeError,
        match="dot: expected both vectors to have the same dtype, but got: float != double",
    ):
        ember.dot(ember.ones(3), ember.ones(3, dtype=ember.float64))
    with pytest.raises(RuntimeError, match=r"vdot: shapes \(3,\) and \(4,\) cannot be multiplied"):
        ember.vdot(ember.ones(3), ember.ones(4))


def test_addmm_family():
    m1, e1 = arr((3, 4), np.float64)
    m2, e2 = arr((4, 5), np.float64, "transposed")
    s, es = arr((5,), np.float64)
    close(ember.addmm(es, e1, e2), s + m1 @ m2, np.float64)
    close(ember.addmm(es, e1, e2, beta=0.5, alpha=2.0), 0.5 * s + 2 * (m1 @ m2), np.float64)
    nan = ember.full((3, 5), float("nan"), dtype=ember.float64)
    close(ember.addmm(nan, e1, e2, beta=0), m1 @ m2, np.float64)  # beta=0 ignores self
    # in-place and out=
    c, ec = arr((3, 5), np.float64)
    c0 = c.copy()  # ec shares c's memory
    assert ec.addmm_(e1, e2, alpha=-1) is ec
    close(ec, c0 - m1 @ m2, np.float64)
    out = ember.empty(0, dtype=ember.float64)
    ember.addmm(es, e1, e2, out=out)
    close(out, s + m1 @ m2, np.float64)
    # addmv
    v, ev = arr((4,), np.float64, "strided")
    y, ey = arr((3,), np.float64)
    close(ember.addmv(ey, e1, ev, beta=2, alpha=3), 2 * y + 3 * (m1 @ v), np.float64)
    close(ember.addmv(ember.ones(1, dtype=ember.float64), e1, ev), 1 + m1 @ v, np.float64)
    # baddbmm / addbmm
    b1, eb1 = arr((2, 3, 4), np.float64, "transposed")
    b2, eb2 = arr((2, 4, 5), np.float64)
    i, ei = arr((3, 1), np.float64)
    close(ember.baddbmm(ei, eb1, eb2, beta=0.5, alpha=2), 0.5 * i + 2 * (b1 @ b2), np.float64)
    close(ember.addbmm(ei, eb1, eb2, alpha=2), i + 2 * (b1 @ b2).sum(0), np.float64)
    # addr
    p, ep = arr((3,), np.float64)
    q, eq = arr((5,), np.float64)
    close(ember.addr(ec, ep, eq, beta=2, alpha=0.5), 2 * to_np(ec) + 0.5 * np.outer(p, q), np.float64)


def test_beta_zero_ignores_nan_on_every_path():
    # Small products (one call each), 2-D tiles, and a product left whole to OpenBLAS.
    for n in (4, 50, 300, 700):
        b1, eb1 = arr((2, n, n), np.float64)
        b2, eb2 = arr((2, n, n), np.float64, "transposed")
        nan = ember.full((2, n, n), float("nan"), dtype=ember.float64)
        close(ember.baddbmm(nan, eb1, eb2, beta=0), b1 @ b2, np.float64)
    v, ev = arr((4,), np.float64)
    m, em = arr((3, 4), np.float64)
    nan = ember.full((3,), float("nan"), dtype=ember.float64)
    close(ember.addmv(nan, em, ev, beta=0), m @ v, np.float64)


def test_addmm_integer_and_errors():
    a, ea = intarr((3, 4), np.int64)
    b, eb = intarr((4, 2), np.int64)
    s, es = intarr((3, 2), np.int64)
    np.testing.assert_array_equal(
        to_np(ember.addmm(es, ea, eb, beta=2, alpha=3)), 2 * s + 3 * (a @ b)
    )
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point number"):
        ember.addmm(es, ea, eb, alpha=0.5)
    with pytest.raises(
        RuntimeError,
        match=r"addmm: self of shape \(2, 5\) can't be broadcast to the result shape \(3, 6\)",
    ):
        ember.addmm(ember.ones(2, 5), ember.ones(3, 4), ember.ones(4, 6))
    with pytest.raises(
        RuntimeError,
        match="addmm: expected self and mat1 to have the same dtype, but got: double != float",
    ):
        ember.addmm(ember.ones(6, dtype=ember.float64), ember.ones(3, 4), ember.ones(4, 6))
    with pytest.raises(RuntimeError, match=r"addmv: self of shape \(4,\) can't be broadcast"):
        ember.addmv(ember.ones(4), ember.ones(3, 4), ember.ones(4))
    with pytest.raises(
        RuntimeError, match=r"baddbmm: self of shape \(3, 3, 5\) can't be broadcast"
    ):
        ember.baddbmm(ember.ones(3, 3, 5), ember.ones(2, 3, 4), ember.ones(2, 4, 5))
    with pytest.raises(RuntimeError, match="shapes"):
        ember.ones(3, 5).addmm_(ember.ones(3, 4), ember.ones(5, 6))


def test_outer_inner_promotion():
    o = ember.outer(ember.arange(3), ember.ones(2, dtype=ember.float64))
    assert o.dtype is ember.float64
    np.testing.assert_array_equal(to_np(o), np.outer(np.arange(3), np.ones(2)))
    assert ember.ger(ember.ones(2), ember.ones(3)).shape == (2, 3)
    with pytest.raises(RuntimeError, match="outer: expected 1-D argument vec2, but got 2-D"):
        ember.outer(ember.ones(3), ember.ones(4, 1))
    a, ea = arr((2, 3, 4), np.float64)
    b, eb = arr((5, 4), np.float64, "transposed")
    close(ember.inner(ea, eb), np.inner(a, b), np.float64)
    assert ember.inner(ember.ones(2), ember.tensor(3.0)).tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="inner: the last dimension must match"):
        ember.inner(ember.ones(2, 3), ember.ones(4))


def test_tensordot():
    a, ea = arr((2, 3, 4), np.float64)
    b, eb = arr((3, 4, 5), np.float64, "transposed")
    close(ember.tensordot(ea, eb), np.tensordot(a, b), np.float64)
    close(ember.tensordot(ea, eb, 0), np.tensordot(a, b, 0), np.float64)
    c, ec = arr((4, 3, 6), np.float64)
    close(ember.tensordot(ea, ec, ([1, 2], [1, 0])), np.tensordot(a, c, ([1, 2], [1, 0])), np.float64)
    close(
        ember.tensordot(ea, ec, dims=([-1], [0])), np.tensordot(a, c, ([2], [0])), np.float64
    )
    with pytest.raises(
        RuntimeError,
        match="contracted dimensions need to match, but first has size 3 in dim -1 and second has size 4 in dim 0",
    ):
        ember.tensordot(ember.ones(2, 3), ember.ones(4, 4), 1)
    with pytest.raises(RuntimeError, match="tensordot: expects dims >= 0, but got dims=-1"):
        ember.tensordot(ember.ones(2, 3), ember.ones(3, 4), -1)
    with pytest.raises(RuntimeError, match="dims=3"):
        ember.tensordot(ember.ones(2, 3), ember.ones(3, 4), 3)
    with pytest.raises(RuntimeError, match="both dimension lists should have same length"):
        ember.tensordot(ember.ones(2, 3), ember.ones(3, 4), ([1], [0, 1]))
    with pytest.raises(IndexError, match="tensordot: dimension out of range"):
        ember.tensordot(ember.ones(2, 3), ember.ones(3, 4), ([2], [0]))


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    (" i j , j k -> k i ", [(3, 4), (4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ijk->j", [(2, 3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,j", [(3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),
    ("ijk,jkl->il", [(2, 3, 4), (3, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk->j", [(3, 4), (4, 5)]),
    ("ij,kl->ijkl", [(2, 3), (4, 5)]),
    ("Ab,bC->AC", [(3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("...i,i->...", [(2, 3, 4), (4,)]),
    ("i...->...", [(3, 4, 2)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum_vs_numpy(eq, shapes):
    arrays = [
        arr(s, np.float64, "transposed" if len(s) >= 2 and k % 2 else "contig")
        for k, s in enumerate(shapes)
    ]
    r = ember.einsum(eq, [t for _, t in arrays])
    expected = np.einsum(eq, *[a for a, _ in arrays])
    assert tuple(r.shape) == expected.shape
    close(r, expected, np.float64)


def test_einsum_sums_ellipsis_dims_missing_from_output():
    a, ea = arr((3, 4, 5), np.float64)
    b, eb = arr((3, 4, 5), np.float64, "transposed")
    close(ember.einsum("b...,b...->b", [ea, eb]), (a * b).sum((1, 2)), np.float64)


def test_einsum_vs_torch_and_ints():
    torch = pytest.importorskip("torch")
    a, ea = intarr((3, 4), np.int64)
    b, eb = intarr((4, 5), np.int64)
    np.testing.assert_array_equal(to_np(ember.einsum("ij,jk->ik", [ea, eb])), a @ b)
    x, ex = arr((2, 1, 3, 4))
    y, ey = arr((5, 4, 2))
    t = torch.einsum("...ij,...jk->...ik", torch.from_numpy(x), torch.from_numpy(y))
    np.testing.assert_allclose(
        to_np(ember.einsum("...ij,...jk->...ik", [ex, ey])), t.numpy(), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "eq,shapes,msg",
    [
        (
            "ij,jk->ik",
            [(2, 3), (4, 4)],
            "subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3",
        ),
        ("ij,jk->ik", [(2, 3)], "fewer operands were provided than specified in the equation"),
        ("ij->ij", [(2, 3), (3, 4)], "more operands were provided than specified in the equation"),
        (
            "ij,jk->il",
            [(2, 3), (3, 4)],
            "output subscript l does not appear in the equation for any input operand",
        ),
        (
            "ijk,jk->ik",
            [(2, 3), (3, 4)],
            r"number of subscripts in the equation \(3\) does not match the number of dimensions \(2\) for operand 0",
        ),
        ("ij,jk->iik", [(2, 3), (3, 4)], "output subscript i appears more than once in the output"),
        (
            "i1,jk->ik",
            [(2, 3), (3, 4)],
            "invalid subscript given at index 1 in the equation string, subscripts must be in",
        ),
        (
            "ii->i",
            [(2, 3)],
            "subscript i is repeated for operand 0 but the sizes don't match, 2 != 3",
        ),
        ("i..,i->i", [(2, 3), (2,)], "not part of a valid ellipsis"),
    ],
)
def test_einsum_errors(eq, shapes, msg):
    with pytest.raises(RuntimeError, match=msg):
        ember.einsum(eq, [ember.ones(s) for s in shapes])


def test_einsum_dtype_mismatch():
    with pytest.raises(RuntimeError, match="expected all operands to have the same dtype"):
        ember.einsum("ij,jk", [ember.ones(2, 3), ember.ones(3, 4, dtype=ember.float64)])


def test_kron():
    a, ea = arr((2, 3), np.float64, "transposed")
    b, eb = arr((3, 4), np.float64)
    close(ember.kron(ea, eb), np.kron(a, b), np.float64)
    c, ec = arr((2, 2, 2), np.float64)
    close(ember.kron(ea, ec), np.kron(a, c), np.float64)
    close(ember.kron(ec, eb), np.kron(c, b), np.float64)
    k = ember.kron(ember.arange(3), ember.ones(2))
    assert k.dtype is ember.float32 and k.tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert ember.kron(ember.tensor(2.0), ember.tensor(3.0)).item() == 6.0


def test_out_and_views():
    a, ea = arr((3, 4))
    b, eb = arr((4, 5))
    out = ember.empty(3, 5)
    r = ember.matmul(ea, eb, out=out)
    assert r is out or r.data_ptr() == out.data_ptr()
    close(out, a.astype(np.float64) @ b)
    out2 = ember.empty(1)
    ember.mm(ea, eb, out=out2)
    assert tuple(out2.shape) == (3, 5)
    # the result never aliases an input
    r = ember.matmul(ea, ember.from_numpy(np.eye(4, dtype=np.float32)))
    assert r.data_ptr() != ea.data_ptr()


@pytest.mark.parametrize("sa,sb", [((64, 16, 16), (64, 16, 16)), ((40, 300), (300, 400))])
def test_thread_count_does_not_change_results(sa, sb):
    _, ex = arr(sa)
    _, ey = arr(sb)
    n = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        r1 = to_np(ember.matmul(ex, ey)).copy()
        ember.set_num_threads(2)
        r2 = to_np(ember.matmul(ex, ey)).copy()
    finally:
        ember.set_num_threads(n)
    np.testing.assert_array_equal(r1, r2)
