"""APIs that the PyTorch-style example programs (packages/nn/tests/compat_programs) found
missing or different in ember: torch.cdist, the grad-mode context managers as bare decorators
and on generators, is_inference_mode_enabled, inference_mode(False)."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest

MODES = ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
         "donot_use_mm_for_euclid_dist"]


@pytest.mark.parametrize("shapes", [((5, 3), (4, 3)), ((2, 30, 3), (7, 3)),
                                    ((2, 1, 6, 4), (3, 5, 4)), ((0, 3), (4, 3))])
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, float("inf")])
@pytest.mark.parametrize("mode", MODES)
def test_cdist_matches_torch(shapes, p, mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ea, eb = ember.tensor(a, requires_grad=True), ember.tensor(b, requires_grad=True)
    want = torch.cdist(ta, tb, p, compute_mode=mode)
    got = ember.cdist(ea, eb, p, compute_mode=mode)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-4)
    if want.numel():
        w = rng.standard_normal(tuple(want.shape)).astype(np.float32)
        (want * torch.tensor(w)).sum().backward()
        (got * ember.tensor(w)).sum().backward()
        np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_cdist_zero_distance_has_zero_gradient(mode):
    x = ember.randn(30, 3, dtype=ember.float64, requires_grad=True)
    d = ember.cdist(x, x.detach(), compute_mode=mode)
    assert d.diagonal().abs().max().item() < 1e-6
    d.sum().backward()
    assert x.grad.isfinite().all().item()


def test_cdist_bad_input():
    with pytest.raises(RuntimeError, match="at least 2D tensors, X1 got: 1D"):
        ember.cdist(ember.ones(3), ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="same number of columns. X1: 3 X2: 4"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 4))
    with pytest.raises(RuntimeError, match="floating-point dtypes, X1 got: ember.int64"):
        ember.cdist(ember.ones(2, 3, dtype=ember.int64), ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="non-negative p values"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 3), p=-1.0)
    with pytest.raises(ValueError, match="possible modes"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 3), compute_mode="fast")


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_grad_modes_decorate_bare_and_called(lib_name):
    lib = ember if lib_name == "ember" else pytest.importorskip("torch")
    x = lib.ones(2, requires_grad=True)

    @lib.no_grad
    def f(x):
        return x * 2

    @lib.inference_mode
    def g(x):
        return x * 2, lib.is_inference_mode_enabled()

    @lib.enable_grad
    def h(x):
        return x * 2

    @lib.set_grad_enabled(False)
    def k(x):
        return x * 2

    assert lib.is_grad_enabled()  # decorating with set_grad_enabled changed nothing outside
    assert not f(x).requires_grad and not k(x).requires_grad
    y, inference = g(x)
    assert not y.requires_grad and inference and not lib.is_inference_mode_enabled()
    with lib.no_grad():
        assert h(x).requires_grad
    assert lib.is_grad_enabled()


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_inference_mode_nesting(lib_name):
    lib = ember if lib_name == "ember" else pytest.importorskip("torch")
    assert not lib.is_inference_mode_enabled()
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        with lib.inference_mode(False):  # back to grad mode, as in PyTorch
            assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
        with lib.enable_grad():
            assert lib.is_inference_mode_enabled() and lib.is_grad_enabled()
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
    assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
    assert isinstance(lib.inference_mode(False).clone(), lib.inference_mode)


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_grad_mode_decorates_generators(lib_name):
    lib = ember if lib_name == "ember" else pytest.importorskip("torch")

    @lib.no_grad()
    def gen():
        sent = yield lib.is_grad_enabled()
        yield sent, lib.is_grad_enabled()

    it = gen()
    assert next(it) is False and lib.is_grad_enabled()  # the mode holds inside the generator only
    assert it.send(5) == (5, False)
    with pytest.raises(StopIteration):
        next(it)
    assert lib.is_grad_enabled()


def test_grad_mode_refuses_to_decorate_a_class():
    with pytest.raises(RuntimeError, match="decorate its methods"):
        ember.no_grad()(type("C", (), {}))


# ---- the functions of ember._compat_ops, against torch ----------------------------------------
def _a(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


V = np.array([1.5, -2.0, 0.0, 3.0], dtype=np.float32)
M = _a(3, 4)
SQ = _a(4, 4, seed=1)
SPECIAL = np.array([0.0, -0.0, 1.0, -3.0, np.inf, -np.inf, np.nan], dtype=np.float32)
CASES = {
    "diag_1d": ("diag", (V,), {}),
    "diag_1d_offset": ("diag", (V,), {"diagonal": -2}),
    "diag_2d": ("diag", (M,), {}),
    "diag_2d_offset": ("diag", (M, 1), {}),
    "diag_embed": ("diag_embed", (M,), {}),
    "diag_embed_offset_dims": ("diag_embed", (M,), {"offset": 1, "dim1": 0, "dim2": 2}),
    "diagflat": ("diagflat", (M[:2, :2],), {"offset": -1}),
    "trace": ("trace", (M,), {}),
    "logaddexp": ("logaddexp", (V, M), {}),
    "logaddexp_inf": ("logaddexp", (SPECIAL, SPECIAL[::-1].copy()), {}),
    "logaddexp_same_inf": ("logaddexp", (SPECIAL, SPECIAL), {}),
    "logaddexp2": ("logaddexp2", (V, M), {}),
    "hypot": ("hypot", (M, V), {}),
    "fmax": ("fmax", (SPECIAL, SPECIAL[::-1].copy()), {}),
    "fmin": ("fmin", (SPECIAL, SPECIAL[::-1].copy()), {}),
    "signbit": ("signbit", (SPECIAL[:-1],), {}),
    "copysign": ("copysign", (M, V), {}),
    "copysign_negzero": ("copysign", (V, SPECIAL[:4]), {}),
    "deg2rad": ("deg2rad", (M,), {}),
    "rad2deg": ("rad2deg", (M,), {}),
    "isposinf": ("isposinf", (SPECIAL,), {}),
    "isneginf": ("isneginf", (SPECIAL,), {}),
    "sinc": ("sinc", (np.concatenate([V, [0.5]]).astype(np.float32),), {}),
    "float_power": ("float_power", (np.abs(M) + 0.1, 2.5), {}),
    "heaviside": ("heaviside", (V, np.array([0.5], np.float32)), {}),
    "asinh": ("asinh", (M,), {}),
    "acosh": ("acosh", (np.abs(M) + 1.0,), {}),
    "atanh": ("atanh", (M / 2.5,), {}),
    "logcumsumexp": ("logcumsumexp", (M, 1), {}),
    "logcumsumexp_dim0": ("logcumsumexp", (M * 30, 0), {}),
    "dist": ("dist", (M, V), {}),
    "dist_p1": ("dist", (M, V, 1), {}),
    "renorm": ("renorm", (M, 2, 0, 1.5), {}),
    "renorm_p1_dim1": ("renorm", (M, 1, 1, 2.0), {}),
    "cov": ("cov", (M,), {}),
    "cov_1d": ("cov", (V,), {}),
    "cov_correction0": ("cov", (M,), {"correction": 0}),
    "corrcoef": ("corrcoef", (M,), {}),
    "trapezoid": ("trapezoid", (M,), {}),
    "trapezoid_dx": ("trapezoid", (M,), {"dx": 0.5, "dim": 0}),
    "trapezoid_x": ("trapezoid", (M, np.array([0.0, 1.0, 3.0, 3.5], np.float32)), {}),
    "trapz": ("trapz", (M,), {}),
    "cumulative_trapezoid": ("cumulative_trapezoid", (M,), {}),
    "vander": ("vander", (V,), {}),
    "vander_increasing": ("vander", (V,), {"N": 3, "increasing": True}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compat_functions_match_torch(case):
    torch = pytest.importorskip("torch")
    name, args, kwargs = CASES[case]
    outs = []
    for lib in (torch, ember):
        a = [lib.tensor(x) if isinstance(x, np.ndarray) else x for x in args]
        outs.append(getattr(lib, name)(*a, **kwargs))
    want, got = outs
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    if isinstance(args[0], np.ndarray) and hasattr(torch.Tensor, name):  # the method spelling
        a = [ember.tensor(x) if isinstance(x, np.ndarray) else x for x in args]
        np.testing.assert_allclose(getattr(a[0], name)(*a[1:], **kwargs).numpy(), got.numpy())


GRAD_CASES = ["diag_1d", "diag_2d_offset", "diag_embed_offset_dims", "trace", "logaddexp",
              "hypot", "copysign", "sinc", "asinh", "atanh", "logcumsumexp", "dist", "cov",
              "corrcoef", "trapezoid_x", "renorm"]


@pytest.mark.parametrize("case", GRAD_CASES)
def test_compat_functions_gradients_match_torch(case):
    torch = pytest.importorskip("torch")
    name, args, kwargs = CASES[case]
    grads = []
    for lib in (torch, ember):
        a = [lib.tensor(x.astype(np.float64), requires_grad=True) if isinstance(x, np.ndarray)
             else x for x in args]
        out = getattr(lib, name)(*a, **kwargs)
        w = lib.tensor(np.linspace(-1, 1, max(out.numel(), 1)).reshape(tuple(out.shape)))
        (out * w).sum().backward()
        grads.append(a[0].grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-8)


def test_index_helpers_match_torch():
    torch = pytest.importorskip("torch")
    for lib_fn in ("tril_indices", "triu_indices"):
        for args in [(3, 3), (4, 3, 1), (3, 5, -1), (0, 2), (3, 4, 10), (3, 4, -10)]:
            want = getattr(torch, lib_fn)(*args)
            got = getattr(ember, lib_fn)(*args)
            assert got.tolist() == want.tolist() and got.dtype == ember.int64, (lib_fn, args)
    a, b, c = [1, 2], [3, 4, 5], [6]
    assert ember.cartesian_prod(*[ember.tensor(x) for x in (a, b, c)]).tolist() == \
        torch.cartesian_prod(*[torch.tensor(x) for x in (a, b, c)]).tolist()
    assert ember.cartesian_prod(ember.tensor(a)).tolist() == a
    t = [1.0, 2.0, 3.0, 4.0]
    for r, rep in [(2, False), (3, False), (2, True), (5, False), (0, False)]:
        want = torch.combinations(torch.tensor(t), r, rep)
        got = ember.combinations(ember.tensor(t), r, rep)
        assert tuple(got.shape) == tuple(want.shape) and got.tolist() == want.tolist(), (r, rep)
    blocks = ([[1, 2], [3, 4]], [5, 6, 7], 8)
    assert ember.block_diag(*[ember.tensor(x) for x in blocks]).tolist() == \
        torch.block_diag(*[torch.tensor(x) for x in blocks]).tolist()
    mixed = ember.block_diag(ember.tensor([[1]]), ember.tensor([2.5]))
    assert mixed.dtype == ember.float32 and mixed.tolist() == [[1.0, 0.0], [0.0, 2.5]]
    idx = [0, 5, 11, -1, 7]
    want = torch.unravel_index(torch.tensor(idx), (3, 4))
    got = ember.unravel_index(ember.tensor(idx), (3, 4))
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    with pytest.raises(ValueError, match="must be in range"):
        ember.unravel_index(ember.tensor([12]), (3, 4))
    e, tst = [[1, 5, 2], [7, 2, 9]], [2, 9, 4]
    for invert in (False, True):
        assert ember.isin(ember.tensor(e), ember.tensor(tst), invert=invert).tolist() == \
            torch.isin(torch.tensor(e), torch.tensor(tst), invert=invert).tolist()
    assert ember.isin(ember.tensor([1.0, 2.5]), 2.5).tolist() == [False, True]
    assert ember.isin(3, ember.tensor([1, 3])).item() is True
    assert ember.isin(ember.tensor([1, 2]), ember.tensor([], dtype=ember.int64)).tolist() == \
        [False, False]


def test_fill_diagonal_matches_torch():
    torch = pytest.importorskip("torch")
    for shape, wrap in [((3, 3), False), ((2, 4), False), ((7, 3), False), ((7, 3), True),
                        ((3, 3, 3), False)]:
        want = torch.zeros(shape).fill_diagonal_(2.5, wrap=wrap)
        got = ember.zeros(shape).fill_diagonal_(2.5, wrap=wrap)
        assert got.tolist() == want.tolist(), (shape, wrap)
    with pytest.raises(RuntimeError, match="equal length"):
        ember.zeros(2, 3, 3).fill_diagonal_(1.0)


def test_small_ones_match_torch():
    torch = pytest.importorskip("torch")
    s = ember.scalar_tensor(3)
    assert s.dtype == ember.float32 and s.ndim == 0 and s.item() == 3.0
    assert ember.scalar_tensor(2, dtype=ember.int64).dtype == ember.int64
    i32 = ember.tensor([1], dtype=ember.int32)
    t32 = torch.tensor([1], dtype=torch.int32)
    pairs = [((i32, 1.0), (t32, 1.0)), ((i32, 1), (t32, 1)), ((1, 2.0), (1, 2.0)),
             ((True, False), (True, False)), ((2, 3), (2, 3)),
             ((i32, ember.tensor(1.0, dtype=ember.float64)),
              (t32, torch.tensor(1.0, dtype=torch.float64))),
             ((ember.tensor([1.0]), ember.tensor([1.0], dtype=ember.float64)),
              (torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))),
             ((ember.tensor([True]), True), (torch.tensor([True]), True))]
    for (ea, eb), (ta, tb) in pairs:
        assert str(ember.result_type(ea, eb)).split(".")[-1] == \
            str(torch.result_type(ta, tb)).split(".")[-1], (ta, tb)
    assert ember.positive(ember.tensor([-1.0])).tolist() == [-1.0]
    with pytest.raises(RuntimeError, match="bool tensor"):
        ember.positive(ember.tensor([True]))
    x = ember.tensor([0.5, -0.25])
    assert x.deg2rad_() is x and x.tolist() == pytest.approx([0.5 * math.pi / 180,
                                                               -0.25 * math.pi / 180])
    with pytest.raises(RuntimeError, match="Supports 1D or 2D"):
        ember.diag(ember.zeros(2, 2, 2))
    with pytest.raises(RuntimeError, match="expected a matrix"):
        ember.trace(ember.zeros(3))
    with pytest.raises(RuntimeError, match="cannot be identical"):
        ember.diag_embed(ember.zeros(3), 0, 1, 1)


@pytest.mark.parametrize("dim", [-1, 1, -2, 0])
def test_narrow_backward_with_a_negative_dim(dim):
    # narrow's backward read the size of dim -1 unwrapped: garbage lengths, a bogus error
    y = ember.arange(12.0).reshape(3, 4).requires_grad_()
    y.narrow(dim, 1, 2).sum().backward()
    want = np.zeros((3, 4), dtype=np.float32)
    if dim % 2 == 1:
        want[:, 1:3] = 1
    else:
        want[1:3, :] = 1
    np.testing.assert_array_equal(y.grad.numpy(), want)


def test_return_types_print_and_pickle_like_torch():
    torch = pytest.importorskip("torch")
    import pickle

    data = [[3.0, -1.5, 2.25], [0.0, 7.0, -4.0]]
    for op, args in [("max", (1,)), ("sort", (1, True)), ("topk", (2,)), ("min", (0,)),
                     ("median", (1,))]:
        want = repr(getattr(torch.tensor(data), op)(*args))
        got = getattr(ember.tensor(data), op)(*args)
        assert repr(got).replace("ember.", "torch.") == want
        assert str(got) == repr(got)
        back = pickle.loads(pickle.dumps(got))
        assert type(back) is type(got) and ember.equal(back.values, got.values)
    r = ember.tensor([1.0, 3.0]).max(0)
    assert type(r) is ember.return_types.max and r._fields == ("values", "indices")
    values, indices = r
    assert values.item() == 3.0 and indices.item() == 1


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (None, True), (1, False), (0, True),
                                         (-1, True)])
@pytest.mark.parametrize("q", [0.3, [0.0, 0.25, 0.5, 1.0], "0-dim"])
def test_quantile_matches_torch(interpolation, dim, keepdim, q):
    torch = pytest.importorskip("torch")
    x = _a(4, 5, seed=3)
    x[1, 2] = np.nan
    x[3, :] = np.nan
    x[2, 1] = x[2, 3]  # ties
    for fn in ("quantile", "nanquantile"):
        outs = []
        for lib in (torch, ember):
            qq = lib.tensor(0.7, dtype=lib.float32) if q == "0-dim" else \
                lib.tensor(q, dtype=lib.float32) if isinstance(q, list) else q
            outs.append(getattr(lib, fn)(lib.tensor(x), qq, dim, keepdim,
                                         interpolation=interpolation))
        want, got = outs
        assert tuple(got.shape) == tuple(want.shape), fn
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_quantile_gradient_and_errors():
    torch = pytest.importorskip("torch")
    x = _a(3, 6, seed=4).astype(np.float64)
    grads = []
    for lib in (torch, ember):
        t = lib.tensor(x, requires_grad=True)
        lib.quantile(t, lib.tensor([0.2, 0.9], dtype=lib.float64), dim=1).sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-12)
    assert ember.tensor([1.0, 2.0]).quantile(0.5).item() == 1.5
    with pytest.raises(RuntimeError, match="float or double"):
        ember.quantile(ember.tensor([1, 2]), 0.5)
    with pytest.raises(RuntimeError, match=r"range \[0, 1\]"):
        ember.quantile(ember.tensor([1.0]), 1.5)
    with pytest.raises(RuntimeError, match="interpolation must be one of"):
        ember.quantile(ember.tensor([1.0]), 0.5, interpolation="cubic")


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive_matches_torch(dim):
    torch = pytest.importorskip("torch")
    data = [[1, 1, 2, 2], [1, 1, 2, 2], [3, 1, 1, 5], [3, 1, 1, 5], [3, 1, 1, 5]]
    want = torch.unique_consecutive(torch.tensor(data), True, True, dim)
    got = ember.unique_consecutive(ember.tensor(data), True, True, dim)
    for g, w in zip(got, want):
        assert g.tolist() == w.tolist() and tuple(g.shape) == tuple(w.shape)
    assert ember.tensor([2, 2, 1]).unique_consecutive().tolist() == [2, 1]
    assert ember.unique_consecutive(ember.tensor([], dtype=ember.int64)).tolist() == []


@pytest.mark.filterwarnings("ignore:Using .*cross without specifying the dim")
@pytest.mark.parametrize("dim", [None, 0, -1, 1])
def test_cross_matches_torch(dim):
    torch = pytest.importorskip("torch")
    a, b = _a(3, 3, seed=5), _a(1, 3, seed=6)
    want = torch.cross(torch.tensor(a), torch.tensor(b).expand(3, 3), dim=dim)
    got = ember.cross(ember.tensor(a), ember.tensor(b).expand(3, 3), dim=dim)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert ember.tensor(a).cross(ember.tensor(b).expand(3, 3), dim=dim).shape == (3, 3)
    with pytest.raises(RuntimeError, match="must have length 3"):
        ember.cross(ember.ones(2, 4), ember.ones(2, 4), dim=1)


def test_asarray_shares_like_torch():
    a = np.arange(4, dtype=np.float32)
    t = ember.asarray(a)
    a[0] = 9
    assert t[0].item() == 9.0  # shared
    c = ember.asarray(a, copy=True)
    a[1] = 7
    assert c[1].item() == 1.0
    assert ember.asarray(a, dtype=ember.float64).dtype == ember.float64
    with pytest.raises(ValueError, match="copy=False"):
        ember.asarray(a, dtype=ember.float64, copy=False)
    x = ember.ones(2)
    assert ember.asarray(x) is x and ember.asarray(x, copy=True) is not x
    assert ember.asarray([1, 2]).dtype == ember.int64
    assert ember.asarray(2.5).ndim == 0 and ember.asarray(2.5).dtype == ember.float32
    r = ember.asarray([1.0, 2.0], requires_grad=True)
    assert r.requires_grad and r.is_leaf
    with pytest.raises(ValueError, match="can't alias"):
        ember.asarray([1.0], copy=False)


def test_legacy_and_misc_methods():
    torch = pytest.importorskip("torch")
    x = ember.zeros(2, dtype=ember.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype == ember.float64
    assert x.new([1, 2]).tolist() == [1.0, 2.0] and x.new([1, 2]).dtype == ember.float64
    assert x.new().shape == (0,) and x.new(ember.Size([4])).shape == (4,)
    with pytest.raises(TypeError):
        x.new(ember.ones(2, dtype=ember.int64))
    y = ember.tensor([1.0, 2.0, 3.0])
    assert y.apply_(lambda v: v * 10) is y and y.tolist() == [10.0, 20.0, 30.0]
    y.map_(ember.tensor([1.0]), lambda a, b: a + b)
    assert y.tolist() == [11.0, 21.0, 31.0]
    s = ember.arange(6.0).reshape(2, 3)
    for size in [(1, 3), (2, 1), (3,), (1, 1)]:
        assert s.sum_to_size(*size).tolist() == \
            torch.arange(6.0).reshape(2, 3).sum_to_size(*size).tolist()
    with pytest.raises(RuntimeError, match="is not expandable"):
        s.sum_to_size(4)
    assert ember.tensor([0.0]).is_nonzero() is False
    assert ember.ones(2).is_same_size(ember.zeros(2))
    assert ember.tensor([-1.0, 2.0]).prelu(ember.tensor([0.5])).tolist() == [-0.5, 2.0]
    assert ember.tensor([-1.0, 0.2]).hardshrink(0.5).tolist() == [-1.0, 0.0]
    ember.set_warn_always(True)
    assert ember.is_warn_always_enabled()
    ember.set_warn_always(False)
    with pytest.warns(UserWarning, match="deprecated"):
        ember.set_default_tensor_type(ember.DoubleTensor)
    try:
        assert ember.get_default_dtype() == ember.float64 and ember.tensor([1.0]).dtype == \
            ember.float64
    finally:
        with pytest.warns(UserWarning):
            ember.set_default_tensor_type("torch.FloatTensor")
    assert ember.get_default_dtype() == ember.float32
    with pytest.raises(TypeError, match="only floating-point"), pytest.warns(UserWarning):
        ember.set_default_tensor_type("torch.LongTensor")


def test_nn_functional_ops_at_the_top_level():
    torch = pytest.importorskip("torch")
    x = _a(2, 8, 2, 2, seed=7)
    for name, args in [("pixel_shuffle", (2,)), ("channel_shuffle", (4,)),
                       ("threshold", (0.1, -5.0)), ("hardshrink", (0.5,)),
                       ("prelu", (np.array([0.25], np.float32),))]:
        want = getattr(torch, name)(torch.tensor(x), *[torch.tensor(a) if isinstance(
            a, np.ndarray) else a for a in args])
        got = getattr(ember, name)(ember.tensor(x), *[ember.tensor(a) if isinstance(
            a, np.ndarray) else a for a in args])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=name)
    a, b = ember.tensor(_a(3, 4)), ember.tensor(_a(3, 4, seed=1))
    assert ember.cosine_similarity(a, b).shape == (3,)
    assert ember.pairwise_distance(a, b).shape == (3,)
    t = ember.tensor([-1.0, 2.0])
    assert ember.relu_(t) is t and t.tolist() == [0.0, 2.0]
    import ember.nn as nn

    assert repr(nn.ChannelShuffle(2)) == "ChannelShuffle(groups=2)"


# ---- ember.linalg -----------------------------------------------------------------------------
INF = float("inf")


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, 0, INF, -INF, -1])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_linalg_vector_norm_matches_torch(ord, dim, keepdim):
    torch = pytest.importorskip("torch")
    x = _a(2, 3, 4, seed=8)
    x[0, 1, 2] = 0.0
    outs, grads = [], []
    for lib in (torch, ember):
        t = lib.tensor(x.astype(np.float64), requires_grad=True)
        r = lib.linalg.vector_norm(t, ord, dim, keepdim)
        outs.append(r.detach().numpy())
        if ord not in (0,):
            r.sum().backward()
            grads.append(t.grad.numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-10)
    if grads:
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("ord", ["fro", 1, -1, INF, -INF])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True), ((2, 1), False)])
def test_linalg_matrix_norm_matches_torch(ord, dim, keepdim):
    torch = pytest.importorskip("torch")
    x = _a(2, 3, 4, seed=9)
    want = torch.linalg.matrix_norm(torch.tensor(x), ord, dim, keepdim)
    got = ember.linalg.matrix_norm(ember.tensor(x), ord, dim, keepdim)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_linalg_norm_dispatch_matches_torch():
    torch = pytest.importorskip("torch")
    x3, x2, x1 = _a(2, 3, 4), _a(3, 4), _a(5)
    for x, kw in [(x3, {}), (x2, {}), (x2, {"ord": 1}), (x2, {"ord": INF}), (x1, {"ord": 3}),
                  (x3, {"dim": 1}), (x3, {"dim": (1, 2)}), (x3, {"ord": "fro", "dim": (0, 1)}),
                  (x2, {"ord": -1, "keepdim": True})]:
        want = torch.linalg.norm(torch.tensor(x), **kw)
        got = ember.linalg.norm(ember.tensor(x), **kw)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=str(kw))
    with pytest.raises(RuntimeError, match="must be 1D or 2D"):
        ember.linalg.norm(ember.tensor(x3), ord=2)
    for o in ("nuc", 2, -2):  # through the singular values
        want = torch.linalg.matrix_norm(torch.tensor(x3), ord=o, dim=(0, 2), keepdim=True)
        got = ember.linalg.matrix_norm(ember.tensor(x3), ord=o, dim=(0, 2), keepdim=True)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, err_msg=str(o))


def test_linalg_products_match_torch():
    torch = pytest.importorskip("torch")
    a, b = _a(4, 3, seed=10), _a(4, 3, seed=11)
    for lib_name, fn in [("cross", lambda L, x, y: L.linalg.cross(x, y)),
                         ("vecdot", lambda L, x, y: L.linalg.vecdot(x, y)),
                         ("vecdot0", lambda L, x, y: L.linalg.vecdot(x, y, dim=0)),
                         ("matmul", lambda L, x, y: L.linalg.matmul(x, y.mT)),
                         ("diagonal", lambda L, x, y: L.linalg.diagonal(x @ y.mT, offset=1))]:
        want = fn(torch, torch.tensor(a), torch.tensor(b))
        got = fn(ember, ember.tensor(a), ember.tensor(b))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=lib_name)
    chain = [_a(3), _a(3, 5, seed=1), _a(5, 2, seed=2), _a(2, 4, seed=3), _a(4, seed=4)]
    for ts in (chain, chain[1:4], chain[1:]):
        want = torch.linalg.multi_dot([torch.tensor(t) for t in ts])
        got = ember.linalg.multi_dot([ember.tensor(t) for t in ts])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    m = _a(2, 3, 3, seed=12)
    for n in (0, 1, 2, 5, -1, -3):
        want = torch.linalg.matrix_power(torch.tensor(m), n)
        got = ember.linalg.matrix_power(ember.tensor(m), n)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
    v = _a(2, 3, seed=13)
    np.testing.assert_allclose(ember.linalg.vander(ember.tensor(v), N=4).numpy(),
                               torch.linalg.vander(torch.tensor(v), N=4).numpy(), rtol=1e-6)


def test_linalg_cholesky_and_solve_triangular_match_torch():
    torch = pytest.importorskip("torch")
    g = _a(2, 4, 4, seed=14).astype(np.float64)
    spd = g @ np.swapaxes(g, -1, -2) + 4 * np.eye(4)
    spd_lower_only = np.tril(spd) + np.triu(np.full((4, 4), 99.0), 1)  # the upper part unread
    for upper in (False, True):
        outs, grads = [], []
        for lib in (torch, ember):
            # the other triangle is never read
            t = lib.tensor(np.swapaxes(spd_lower_only, -1, -2) if upper else spd_lower_only,
                           requires_grad=True)
            r = lib.linalg.cholesky(t, upper=upper)
            (r * lib.tensor(np.linspace(0, 1, 32).reshape(2, 4, 4))).sum().backward()
            outs.append(r.detach().numpy())
            grads.append(t.grad.numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-10)
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-7, atol=1e-10)
    with pytest.raises(ember.linalg.LinAlgError, match="not positive-definite"):
        ember.linalg.cholesky(-ember.eye(2))
    b = _a(2, 4, 3, seed=15).astype(np.float64)
    low = np.linalg.cholesky(spd)
    for upper, left, unit in [(False, True, False), (True, True, False), (False, False, False),
                              (True, False, True), (False, True, True)]:
        a = np.swapaxes(low, -1, -2) if upper else low
        bb = b if left else np.swapaxes(b, -1, -2)
        outs, grads = [], []
        for lib in (torch, ember):
            ta = lib.tensor(a, requires_grad=True)
            tb = lib.tensor(bb, requires_grad=True)
            x = lib.linalg.solve_triangular(ta, tb, upper=upper, left=left, unitriangular=unit)
            x.pow(2).sum().backward()
            outs.append(x.detach().numpy())
            grads.append((tb.grad.numpy(), ta.grad.numpy()))
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-8, atol=1e-12)
        tri = np.triu if upper else np.tril
        np.testing.assert_allclose(tri(grads[1][1], 1 if unit else 0),
                                   tri(grads[0][1], 1 if unit else 0), rtol=1e-8, atol=1e-12)


def test_linalg_missing_functions_say_why():
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        ember.linalg.nope  # noqa: B018


# ---- more found by a probe of everyday tensor expressions against torch ------------------------
@pytest.mark.parametrize("decimals", [1, 2, 3, -1, -2, 0])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_round_decimals_matches_torch(decimals, dtype):
    torch = pytest.importorskip("torch")
    # 2.35 in float32 is 2.3499999...: PyTorch multiplies in float (23.5) and rounds to 24
    vals = [1.25, 2.35, 1234.5678, -2.35, 0.125, 0.5, 15.0, -149.99, 0.045]
    want = torch.tensor(vals, dtype=getattr(torch, dtype)).round(decimals=decimals)
    got = ember.tensor(vals, dtype=getattr(ember, dtype)).round(decimals=decimals)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_gcd_lcm_match_torch():
    torch = pytest.importorskip("torch")
    a = [12, -18, 0, 0, 7, 100, -4]
    b = [8, 12, 5, 0, 13, 75, -6]
    for name in ("gcd", "lcm"):
        want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
        got = getattr(ember, name)(ember.tensor(a), ember.tensor(b))
        assert got.tolist() == want.tolist(), name
        assert getattr(ember.tensor(a), name)(ember.tensor(b)).tolist() == want.tolist()
    bc = ember.gcd(ember.tensor([[12], [9]]), ember.tensor([8, 6, 3]))
    assert bc.tolist() == torch.gcd(torch.tensor([[12], [9]]), torch.tensor([8, 6, 3])).tolist()
    x = ember.tensor([12, 18])
    assert x.gcd_(ember.tensor([8, 12])) is x and x.tolist() == [4, 6]
    with pytest.raises(RuntimeError, match="integer tensors"):
        ember.gcd(ember.tensor([1.0]), ember.tensor([2.0]))


def test_put_matches_torch():
    torch = pytest.importorskip("torch")
    for accumulate in (False, True):
        want = torch.zeros(2, 3).put_(torch.tensor([0, 4, -1, 4]),
                                      torch.tensor([1.0, 2.0, 3.0, 4.0]), accumulate=accumulate)
        x = ember.zeros(2, 3)
        got = x.put_(ember.tensor([0, 4, -1, 4]), ember.tensor([1.0, 2.0, 3.0, 4.0]),
                     accumulate=accumulate)
        assert got is x
        if accumulate:
            assert got.tolist() == want.tolist()
        else:  # the duplicate index 4: either write may win, as in PyTorch
            assert got[0, 0].item() == 1.0 and got[1, 2].item() == 3.0
            assert got[1, 1].item() in (2.0, 4.0)
    t = ember.zeros(2, 2).t()  # non-contiguous: flat positions are in row-major logical order
    t.put_(ember.tensor([1]), ember.tensor([5.0]))
    assert t.tolist() == [[0.0, 5.0], [0.0, 0.0]]
    with pytest.raises(IndexError, match="out of range"):
        ember.zeros(2).put_(ember.tensor([2]), ember.tensor([1.0]))
    with pytest.raises(IndexError, match="same number of elements"):  # torch's class
        ember.zeros(2).put_(ember.tensor([0]), ember.tensor([1.0, 2.0]))


def test_poisson_and_binomial_sampling():
    ember.manual_seed(0)
    rates = ember.tensor([0.0, 0.5, 4.0, 40.0]).repeat(4000, 1)
    x = ember.poisson(rates)
    assert x.shape == rates.shape and x.dtype == ember.float32
    assert x[:, 0].abs().max().item() == 0
    np.testing.assert_allclose(x.mean(0).numpy(), [0.0, 0.5, 4.0, 40.0], rtol=0.05, atol=0.03)
    g1 = ember.poisson(ember.full((5,), 3.0), generator=ember.Generator().manual_seed(7))
    g2 = ember.poisson(ember.full((5,), 3.0), generator=ember.Generator().manual_seed(7))
    assert ember.equal(g1, g2)  # a seeded generator reproduces
    b = ember.binomial(ember.full((4000,), 10.0), ember.full((4000,), 0.3))
    assert abs(b.mean().item() - 3.0) < 0.15 and b.max().item() <= 10
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.poisson(ember.tensor([-1.0]))


def test_renorm_needs_two_dims_like_torch():
    with pytest.raises(RuntimeError, match="at least 2 dimensions, got 1"):
        ember.tensor([3.0, 4.0]).renorm(2, 0, 1.0)


# ---- ember.func.vmap / functional_call ---------------------------------------------------------
def test_vmap_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a, b, c = rng.normal(size=(4, 3)), rng.normal(size=(3, 4)), rng.normal(size=(3,))
    cases = [
        (lambda L: L.func.vmap(lambda x: x.dot(x)), (a,)),
        (lambda L: L.vmap(lambda x, y: x * y, in_dims=(0, None)), (a, c)),
        (lambda L: L.func.vmap(lambda x, y: x + y, in_dims=(0, 1)), (a, b)),
        (lambda L: L.func.vmap(lambda x: (x.sum(), x * 2), out_dims=(0, 1)), (a,)),
        (lambda L: L.func.vmap(lambda x: {"s": x.sum(0)}), (b,)),
        (lambda L: L.func.vmap(L.func.vmap(lambda x: x ** 2)), (a,)),
        (lambda L: L.func.vmap(lambda x: L.outer(x, x), in_dims=1), (b,)),
    ]
    for make, args in cases:
        want = make(torch)(*[torch.tensor(x) for x in args])
        got = make(ember)(*[ember.tensor(x) for x in args])
        wl = want if isinstance(want, tuple) else (want["s"],) if isinstance(want, dict) \
            else (want,)
        gl = got if isinstance(got, tuple) else (got["s"],) if isinstance(got, dict) else (got,)
        for g, w in zip(gl, wl):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


def test_vmap_of_grad_gives_per_sample_gradients():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    w, xs, ys = rng.normal(size=(3,)), rng.normal(size=(5, 3)), rng.normal(size=(5,))
    outs = []
    for lib in (torch, ember):
        def loss(weights, x, y, lib=lib):
            return (x.dot(weights) - y) ** 2

        per = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(
            lib.tensor(w), lib.tensor(xs), lib.tensor(ys))
        outs.append(per.numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-12)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        ember.vmap(lambda x, y: x + y)(ember.ones(2), ember.ones(3))
    with pytest.raises(ValueError, match="at least one input must be mapped"):
        ember.vmap(lambda x: x, in_dims=None)(ember.ones(2))


@pytest.mark.filterwarnings("ignore:`(torch|ember).nn.utils.stateless.functional_call` is deprecated")
def test_functional_call_matches_torch():
    torch = pytest.importorskip("torch")
    outs = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        net = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3), lib.nn.Linear(3, 1))
        net.eval()
        params = {k: lib.ones_like(v) * 0.5 for k, v in net.named_parameters()}
        bufs = {"1.running_mean": lib.full((3,), 0.25)}
        x = lib.tensor([[1.0, 2.0], [3.0, -1.0]])
        w = params["0.weight"].requires_grad_()
        out = lib.func.functional_call(net, (params, bufs), (x,))
        out.sum().backward()
        before = net[0].weight.clone()
        assert lib.equal(net[0].weight, before)  # the module is unchanged
        outs.append((out.detach().numpy(), w.grad.numpy()))
        via_utils = lib.nn.utils.stateless.functional_call(net, {**params, **bufs}, x)
        assert lib.allclose(via_utils, out)
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-6)
    lin = ember.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="missing keys"):
        ember.func.functional_call(lin, {"weight": ember.ones(2, 2)}, (ember.ones(2),),
                                   strict=True)
    # A name that is not a parameter or buffer is set as a plain attribute for the call (as
    # torch 2.13); a path through a missing submodule is an AttributeError.
    ember.func.functional_call(lin, {"nope": ember.ones(1)}, (ember.ones(2),))
    assert not hasattr(lin, "nope")
    with pytest.raises(AttributeError, match="sub"):
        ember.func.functional_call(lin, {"sub.nope": ember.ones(1)}, (ember.ones(2),))


# ---- ember.jit / ember.compiler / ember.version -----------------------------------------------
class _JitNet(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(2, 2)
        self.scale: ember.jit.Final[float] = 2.0

    @ember.jit.ignore
    def debug(self):
        return "python"

    @ember.jit.export
    def features(self, x):
        return self.fc(x)

    def forward(self, x):
        return ember.jit.annotate(ember.Tensor, self.fc(x) * self.scale)



@pytest.mark.filterwarnings("ignore:ember.jit.save")
def test_jit_runs_eagerly_as_pytorch_with_the_jit_disabled(tmp_path):
    @ember.jit.script
    def double(x: ember.Tensor) -> ember.Tensor:
        if ember.jit.is_scripting() or ember.jit.is_tracing():
            return x
        return x * 2

    assert double(ember.tensor([1.0])).tolist() == [2.0]

    net = _JitNet().eval()
    scripted = ember.jit.script(net)
    x = ember.ones(3, 2)
    traced = ember.jit.trace(net, (x,))
    assert scripted is net and traced is net and scripted.debug() == "python"
    assert not isinstance(scripted, ember.jit.ScriptModule)
    path = tmp_path / "model.pt"
    ember.jit.save(scripted, str(path))
    loaded = ember.jit.load(str(path), map_location="cpu")
    assert ember.equal(loaded(x), net(x))
    frozen = ember.jit.optimize_for_inference(ember.jit.freeze(net))
    assert frozen is net
    with pytest.raises(RuntimeError, match="eval mode"):
        ember.jit.freeze(_JitNet())
    with pytest.raises(RuntimeError, match="example_inputs"):
        ember.jit.trace(net)
    fut = ember.jit.fork(lambda a: a + 1, ember.ones(1))
    assert ember.jit.wait(fut).tolist() == [2.0]


def test_compiler_and_version_modules():
    torch = pytest.importorskip("torch")
    assert ember.compiler.is_compiling() is False

    @ember.compiler.disable
    def f(x):
        return x + 1

    @ember.compiler.disable(recursive=False)
    def g(x):
        return x + 2

    assert f(1) == 2 and g(1) == 3
    assert ember.version.__version__ == ember.__version__
    assert ember.version.hip is None and ember.version.debug is False
    assert ember.version.cuda is None or isinstance(ember.version.cuda, str)
    assert set(ember.version.__all__) <= set(dir(torch.version)) | {"__version__"}


def test_poisson_and_binomial_of_nan_or_inf_return_at_once():
    # A nan / inf rate or count used to spin forever in the rejection loops.
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.poisson(ember.tensor([float("nan"), 2.0]))  # torch refuses nan too
    assert ember.poisson(ember.tensor([float("inf")])).tolist() == [float("inf")]
    got = ember.binomial(ember.tensor([float("inf"), 10.0, float("nan")]),
                         ember.tensor([0.5, float("nan"), 0.5])).tolist()
    assert got[0] == float("inf") and math.isnan(got[1]) and math.isnan(got[2])
    from ember.distributions._special import poisson

    out = poisson(ember.tensor([float("nan"), 3.0]))
    assert math.isnan(out.tolist()[0]) and out.tolist()[1] >= 0


@pytest.mark.parametrize("dtype", [ember.float32, ember.complex64, ember.bool])
def test_gcd_lcm_refuse_non_integer_dtypes_like_torch(dtype):
    # A complex input used to loop forever on inf / nan (Euclid's loop on floats).
    x = ember.tensor([float("inf"), 4.0]).to(dtype)
    for name in ("gcd", "lcm"):
        with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented for'):
            getattr(ember, name)(x, x)


def test_module_load_like_torch():
    p = ember.nn.Parameter(ember.zeros(3))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        p.module_load(ember.ones(3))  # outside no_grad, as torch
    with ember.no_grad():
        r = p.module_load(ember.ones(3))
        a = p.module_load(ember.full((3,), 2.0), assign=True)
    assert r.tolist() == [1.0, 1.0, 1.0] == p.tolist() and not r.requires_grad
    assert a.tolist() == [2.0, 2.0, 2.0] and not a.requires_grad and p.tolist() == [1.0] * 3
