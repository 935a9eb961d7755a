"""Complex dtypes: the dtype objects and promotion, creation and conversion, printing,
serialization, the complex views and pointwise ops, reductions and products (vs NumPy/torch)."""

import io
import itertools
import pickle

import ember
import numpy as np
import pytest

C64, C128 = ember.complex64, ember.complex128
REAL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
        "float64"]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def crandn(*shape, dtype=np.complex128, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def close(a, b, rtol=1e-6, atol=1e-6):
    a = a.numpy() if isinstance(a, ember.Tensor) else np.asarray(a)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ---- dtypes ----------------------------------------------------------------------------------

def test_dtype_objects():
    assert repr(C64) == "ember.complex64" and repr(C128) == "ember.complex128"
    assert ember.cfloat is C64 and ember.cdouble is C128
    assert C64.itemsize == 8 and C128.itemsize == 16
    assert C64.is_complex and C128.is_complex and not ember.float32.is_complex
    assert not C64.is_floating_point and C64.is_signed
    assert pickle.loads(pickle.dumps(C128)) is C128
    z = ember.zeros(2, dtype=C64)
    assert z.is_complex() and ember.is_complex(z) and not z.is_floating_point()
    assert z.element_size() == 8


@pytest.mark.parametrize("name", REAL + ["complex64", "complex128"])
def test_promote_types_matches_torch(torch, name):
    for other in ("complex64", "complex128"):
        a, b = getattr(ember, name), getattr(ember, other)
        want = torch.promote_types(getattr(torch, name), getattr(torch, other))
        assert ember.promote_types(a, b) is getattr(ember, str(want).split(".")[1])
        assert ember.promote_types(b, a) is ember.promote_types(a, b)


def test_can_cast(torch):
    for a, b in itertools.product(REAL + ["complex64", "complex128"], repeat=2):
        if "complex" not in a + b:
            continue
        assert ember.can_cast(getattr(ember, a), getattr(ember, b)) == torch.can_cast(
            getattr(torch, a), getattr(torch, b)), (a, b)


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32", "bool"])
def test_binary_result_dtypes(torch, dt):
    x = ember.ones(3, dtype=getattr(ember, dt))
    tx = torch.ones(3, dtype=getattr(torch, dt))
    cases = [(x + 1j, tx + 1j), (x * ember.ones(3, dtype=C64), tx * torch.ones(3, dtype=torch.complex64)),
             (x + ember.tensor(1j, dtype=C128), tx + torch.tensor(1j, dtype=torch.complex128))]
    for got, want in cases:
        assert repr(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        close(got, want.numpy())


def test_default_complex_follows_default_float():
    old = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        assert ember.tensor([1j]).dtype is C128
        assert (ember.ones(2, dtype=ember.int32) * 1j).dtype is C128
    finally:
        ember.set_default_dtype(old)
    assert ember.tensor([1j]).dtype is C64
    assert ember.tensor([1, 2.5, 1j]).dtype is C64


# ---- creation and conversion -------------------------------------------------------------------

def test_tensor_from_python_and_back():
    z = ember.tensor([[1 + 2j, 3], [-1j, 0.5]])
    assert z.dtype is C64 and z.shape == (2, 2)
    assert z.tolist() == [[1 + 2j, 3 + 0j], [-1j, 0.5 + 0j]]
    assert isinstance(z[0, 0].item(), complex) and z[0, 0].item() == 1 + 2j
    assert complex(z[1, 0]) == -1j
    assert ember.tensor(2 + 3j, dtype=C128).item() == 2 + 3j
    assert ember.tensor([np.complex64(1 + 1j)]).tolist() == [1 + 1j]


@pytest.mark.parametrize("npdt,dt", [(np.complex64, C64), (np.complex128, C128)])
def test_numpy_round_trip(npdt, dt):
    a = crandn(3, 4, dtype=npdt)
    t = ember.from_numpy(a)
    assert t.dtype is dt
    np.testing.assert_array_equal(t.numpy(), a)
    a[0, 0] = 5j  # from_numpy shares memory
    assert t[0, 0].item() == 5j
    np.testing.assert_array_equal(ember.tensor(a).numpy(), a)
    np.testing.assert_array_equal(np.asarray(ember.tensor(a[:, ::2])), a[:, ::2])


def test_factories():
    for dt in (C64, C128):
        assert ember.zeros(2, 3, dtype=dt).tolist() == [[0j] * 3] * 2
        assert ember.ones(2, dtype=dt).tolist() == [1 + 0j, 1 + 0j]
        assert ember.full((2,), 1 - 2j, dtype=dt).tolist() == [1 - 2j, 1 - 2j]
        assert ember.empty(4, dtype=dt).shape == (4,)
        assert ember.zeros_like(ember.ones(3), dtype=dt).dtype is dt
    assert ember.full((2,), 1 - 2j).dtype is C64


def test_randn_complex_variance():
    ember.manual_seed(0)
    z = ember.randn(200000, dtype=C64)
    assert z.dtype is C64
    parts = ember.view_as_real(z).numpy()
    np.testing.assert_allclose(parts.var(axis=0), [0.5, 0.5], rtol=0.03)
    np.testing.assert_allclose(parts.mean(axis=0), [0.0, 0.0], atol=0.01)
    assert ember.randn(3, dtype=C128).dtype is C128


def test_casts_match_torch(torch):
    a = crandn(5) * 3
    z = ember.tensor(a)
    tz = torch.tensor(a)
    for name in ("float32", "float64", "int32", "int64", "bool", "float16", "complex64"):
        got = z.to(getattr(ember, name))
        want = tz.to(getattr(torch, name))
        if name == "float16":
            close(got.float(), want.float().numpy(), rtol=1e-3, atol=1e-3)
        else:
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    for name in ("float32", "float64", "int64", "bool", "uint8"):
        r = ember.tensor([0, 1, 2], dtype=getattr(ember, name))
        assert r.to(C64).tolist() == [0j, (1 + 0j), (1 if name == "bool" else 2) + 0j]
    assert ember.tensor([1.5]).cfloat().dtype is C64
    assert ember.tensor([1.5]).cdouble().dtype is C128


def test_complex_to_real_cast_warns_once(monkeypatch):
    import ember._tensor as et

    monkeypatch.setattr(et, "_warned_complex_cast", False)
    z = ember.tensor([1 + 2j])
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        assert z.float().tolist() == [1.0]
    with pytest.raises(TypeError, match="complex"):
        float(z)
    with pytest.raises(TypeError, match="real number, not complex"):
        ember.tensor([1j], dtype=ember.float32)


def test_out_and_inplace_casting_rules():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.add(ember.ones(3, dtype=C64), 1, out=ember.empty(3))
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.add_(1j)
    z = ember.zeros(3, dtype=C64)
    z.add_(ember.ones(3))  # real into complex is fine
    assert z.tolist() == [1 + 0j] * 3
    out = ember.empty(3, dtype=C128)
    ember.mul(ember.ones(3), 2j, out=out)
    assert out.tolist() == [2j] * 3


def test_repr_matches_torch(torch):
    cases = [[1 + 2j, 3 - 1j], [0.5 - 0.25j, 1e-5 + 3j], [1j], [-1 - 1j, 2.5 + 0j, 100 + 1e3j]]
    for data in cases:
        assert repr(ember.tensor(data)) == repr(torch.tensor(data)).replace("torch.", "ember.")
    assert repr(ember.tensor(1 + 2j)) == repr(torch.tensor(1 + 2j))
    assert repr(ember.tensor([[1j, 2], [3, 4j]], dtype=C128)) == repr(
        torch.tensor([[1j, 2], [3, 4j]], dtype=torch.complex128)).replace("torch.", "ember.")
    assert repr(ember.zeros(0, dtype=C64)) == "tensor([], dtype=ember.complex64)"


def test_save_load_round_trip():
    d = {"a": ember.tensor(crandn(3, 2)), "b": ember.tensor(crandn(4, dtype=np.complex64))}
    buf = io.BytesIO()
    ember.save(d, buf)
    buf.seek(0)
    e = ember.load(buf)
    for k in d:
        assert e[k].dtype is d[k].dtype
        np.testing.assert_array_equal(e[k].numpy(), d[k].numpy())


def test_load_torch_checkpoint(torch):
    a = crandn(3, 2)
    buf = io.BytesIO()
    torch.save({"z": torch.tensor(a), "w": torch.tensor(a.astype(np.complex64))[1:]}, buf)
    buf.seek(0)
    e = ember.load(buf)
    assert e["z"].dtype is C128 and e["w"].dtype is C64
    np.testing.assert_array_equal(e["z"].numpy(), a)
    np.testing.assert_array_equal(e["w"].numpy(), a.astype(np.complex64)[1:])


def test_unsupported_ops_raise_clear_errors():
    z = ember.ones(3, dtype=C64)
    with pytest.raises(TypeError, match="complex64"):
        z.sort()
    with pytest.raises(TypeError, match=r"not implemented for dtype complex64"):
        ember.erf(z)  # no complex erf in torch either
    with pytest.raises(TypeError, match=r"complex128"):
        ember.ones(2, dtype=C128).max()
    with pytest.raises(TypeError):
        ember.lt(z, z)
    with pytest.raises(TypeError, match="uniform_: not implemented for dtype int64"):
        ember.ones(2, dtype=ember.int64).uniform_()  # complex fills both parts, as in torch


def test_autograd_through_unsupported_complex_ops_raises():
    x = ember.ones(4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="nan_to_num: autograd through complex"):
        ember.nan_to_num(x / 1j)
    z = ember.ones(4, dtype=C64, requires_grad=True)
    with pytest.raises(NotImplementedError, match="nan_to_num: autograd through complex"):
        ember.nan_to_num(z)
    with ember.no_grad():
        assert (x / 1j).dtype is C64
    with pytest.raises(RuntimeError, match="in-place abs"):
        ember.ones(2, dtype=C64).abs_()


def _grads(torch, fn_ember, fn_torch, *arrays):
    ins_e = [ember.tensor(a, requires_grad=True) for a in arrays]
    ins_t = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn_ember(*ins_e).backward()
    fn_torch(*ins_t).backward()
    for e, t in zip(ins_e, ins_t):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_complex_view_and_pointwise_grads_match_torch(torch):
    z, w = crandn(3, 4), np.random.default_rng(9).standard_normal((3, 4, 2))
    _grads(torch, lambda a: (ember.view_as_real(a) * ember.tensor(w)).sum(),
           lambda a: (torch.view_as_real(a) * torch.tensor(w)).sum(), z)
    _grads(torch, lambda a: (a.real * 2 + a.imag * 3).sum(),
           lambda a: (a.real * 2 + a.imag * 3).sum(), z)
    _grads(torch, lambda a: a.abs().sum(), lambda a: a.abs().sum(), z)
    _grads(torch, lambda a: ember.view_as_real(a.conj_physical().t())[..., 1].sum(),
           lambda a: torch.view_as_real(a.conj_physical().t())[..., 1].sum(), z)
    re, im = np.random.default_rng(2).standard_normal((2, 5))
    _grads(torch, lambda a, b: ember.complex(a, b).abs().sum(),
           lambda a, b: torch.complex(a, b).abs().sum(), re, im)
    _grads(torch, lambda a: (ember.view_as_complex(a).imag * 2).sum(),
           lambda a: (torch.view_as_complex(a).imag * 2).sum(), w)


def test_complex_mul_grads_match_torch(torch):
    # mul records complex history: grad * conj(other); a real factor gets the real part.
    z, u = crandn(3, 4), crandn(1, 4)
    r = np.random.default_rng(4).standard_normal((3, 4))
    loss_e = lambda t: ember.view_as_real(t).pow(2).sum()  # noqa: E731
    loss_t = lambda t: torch.view_as_real(t).pow(2).sum()  # noqa: E731
    _grads(torch, lambda a, b: loss_e(a * b), lambda a, b: loss_t(a * b), z, u)  # broadcast
    _grads(torch, lambda a, b: loss_e(a * b), lambda a, b: loss_t(a * b), r, z)  # real * complex
    _grads(torch, lambda a: loss_e(a * (0.5 - 2j)), lambda a: loss_t(a * (0.5 - 2j)), z)
    _grads(torch, lambda a: loss_e(a * (0.5 - 2j)), lambda a: loss_t(a * (0.5 - 2j)), r)
    _grads(torch, lambda a: loss_e(a.mul(a)), lambda a: loss_t(a.mul(a)), z)
    # add / sub (alpha conjugated too): what accumulating complex gradients runs
    _grads(torch, lambda a, b: loss_e(a * 2j + b), lambda a, b: loss_t(a * 2j + b), z, u)
    _grads(torch, lambda a, b: loss_e(ember.sub(a, b, alpha=1 - 1j)),
           lambda a, b: loss_t(torch.sub(a, b, alpha=1 - 1j)), z, u)
    _grads(torch, lambda a, b: loss_e(ember.add(a, b, alpha=3)),
           lambda a, b: loss_t(torch.add(a, b, alpha=3)), z, r)


def test_rotary_embedding_through_complex_mul_trains_like_torch(torch):
    # LLaMA's rotary embeddings: view_as_complex of channel pairs times polar(1, angles)
    def rope(m, x):
        ang = m.outer(m.arange(5, dtype=m.float64), m.tensor([1.0, 0.1]))
        f = m.polar(m.ones_like(ang), ang)
        return m.view_as_real(m.view_as_complex(x.reshape(5, 2, 2)) * f).flatten(1)

    x = np.random.default_rng(5).standard_normal((5, 4))
    w = np.random.default_rng(6).standard_normal((4, 4))
    _grads(torch, lambda a, b: (rope(ember, a) @ b).tanh().sum(),
           lambda a, b: (rope(torch, a) @ b).tanh().sum(), x, w)


def test_complex_mul_double_backward(torch):
    z = crandn(4)
    outs = []
    for m in (ember, torch):
        a = m.tensor(z, requires_grad=True)
        (g,) = m.autograd.grad(m.view_as_real(a * a * a).sum(), a, create_graph=True)
        (gg,) = m.autograd.grad(m.view_as_real(g).pow(2).sum(), a)
        outs.append(gg.numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-10)


# ---- views ------------------------------------------------------------------------------------

def test_view_as_real_and_complex():
    a = crandn(3, 4)
    z = ember.tensor(a)
    r = ember.view_as_real(z)
    assert r.dtype is ember.float64 and r.shape == (3, 4, 2) and r.stride() == (8, 2, 1)
    np.testing.assert_array_equal(r.numpy(), np.stack([a.real, a.imag], -1))
    r[0, 0, 1] = 7.0  # a view
    assert z[0, 0].item().imag == 7.0
    back = ember.view_as_complex(r)
    assert back.dtype is C128 and back.data_ptr() == z.data_ptr()
    # non-contiguous: a transposed complex tensor keeps its strides, doubled
    t = z.t()
    assert ember.view_as_real(t).stride() == (2, 8, 1)
    np.testing.assert_array_equal(ember.view_as_real(t).numpy()[..., 0], a.real.T)
    with pytest.raises(RuntimeError, match="complex"):
        ember.view_as_real(ember.ones(2))
    with pytest.raises(RuntimeError, match="size 2"):
        ember.view_as_complex(ember.ones(3, 3))
    with pytest.raises(RuntimeError, match="stride 1"):
        ember.view_as_complex(ember.ones(2, 4).t())
    with pytest.raises(RuntimeError, match="float32 and float64"):
        ember.view_as_complex(ember.ones(3, 2, dtype=ember.int32))


def test_real_imag_views_are_writable():
    a = crandn(2, 3)
    z = ember.tensor(a)
    np.testing.assert_array_equal(z.real.numpy(), a.real)
    np.testing.assert_array_equal(z.imag.numpy(), a.imag)
    z.real[0, 0] = 10.0
    z.imag = ember.zeros(2, 3, dtype=ember.float64)
    assert z[0, 0].item() == 10.0 + 0j and z.imag.abs().sum().item() == 0
    z.real = 1.0
    assert z.real.tolist() == [[1.0] * 3] * 2
    x = ember.ones(2)
    assert x.real.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="non-complex"):
        x.imag
    assert ember.real(z).dtype is ember.float64


def test_conj():
    a = crandn(4)
    z = ember.tensor(a)
    np.testing.assert_array_equal(z.conj().numpy(), a.conj())
    np.testing.assert_array_equal(ember.conj_physical(z).numpy(), a.conj())
    assert not z.conj().is_conj() and not ember.is_conj(z)
    assert z.conj().resolve_conj().tolist() == z.conj().tolist()
    x = ember.ones(2)
    assert x.conj() is x
    m = ember.tensor(crandn(2, 3))
    np.testing.assert_array_equal(m.mH.numpy(), m.numpy().conj().T)
    np.testing.assert_array_equal(m.H.numpy(), m.numpy().conj().T)


# ---- pointwise ---------------------------------------------------------------------------------

@pytest.mark.parametrize("npdt", [np.complex64, np.complex128])
def test_pointwise_vs_numpy(npdt):
    a, b = crandn(3, 5, dtype=npdt, seed=1), crandn(3, 5, dtype=npdt, seed=2)
    za, zb = ember.tensor(a), ember.tensor(b)
    rtol = 1e-5 if npdt == np.complex64 else 1e-12
    for got, want in [(za + zb, a + b), (za - zb, a - b), (za * zb, a * b), (za / zb, a / b),
                      (-za, -a), (za * 2, a * 2), (za + 1.5, a + 1.5), (za / 2j, a / 2j),
                      (2 - za, 2 - a), (za ** 2, a ** 2), (za ** 0.5, a ** 0.5),
                      (ember.exp(za), np.exp(a)), (ember.log(za), np.log(a)),
                      (ember.sqrt(za), np.sqrt(a)), (za.add(zb, alpha=2j), a + 2j * b)]:
        assert got.dtype is za.dtype
        close(got, want, rtol=rtol, atol=rtol)
    absz = za.abs()
    assert absz.dtype is (ember.float32 if npdt == np.complex64 else ember.float64)
    close(absz, np.abs(a), rtol=rtol)
    close(za.angle(), np.angle(a), rtol=rtol, atol=rtol)
    eq = za == ember.tensor(np.where(np.arange(5) % 2 == 0, a, b))
    assert eq.dtype is ember.bool
    np.testing.assert_array_equal(eq.numpy(), np.arange(5)[None].repeat(3, 0) % 2 == 0)
    assert (za != za).sum().item() == 0


def test_pointwise_broadcast_and_noncontiguous():
    a, b = crandn(4, 3), crandn(3)
    za = ember.tensor(a).t()  # (3, 4) non-contiguous
    close(za * ember.tensor(b)[:, None], a.T * b[:, None], 1e-12, 1e-12)
    close(ember.exp(za), np.exp(a.T), 1e-12, 1e-12)
    close(ember.tensor(a)[:, ::2] + 1j, a[:, ::2] + 1j, 1e-12, 1e-12)


def test_abs_is_overflow_safe_and_angle_real():
    z = ember.tensor([3e38 + 4e38j, 0j, -2 + 0j], dtype=C64)
    close(z.abs(), np.abs(np.array([3e38 + 4e38j, 0, -2], dtype=np.complex64)), rtol=1e-6)
    assert ember.angle(ember.tensor([-1.0, 2.0, 0.0])).tolist() == pytest.approx(
        [np.pi, 0.0, 0.0])
    assert ember.angle(ember.tensor([-3, 1])).dtype is ember.float32


def test_complex_and_polar(torch):
    re, im = np.random.default_rng(3).standard_normal((2, 4, 3))
    z = ember.complex(ember.tensor(re), ember.tensor(im))
    assert z.dtype is C128
    np.testing.assert_array_equal(z.numpy(), re + 1j * im)
    z32 = ember.complex(ember.tensor(re, dtype=ember.float32), ember.tensor(im[0],
                                                                           dtype=ember.float32))
    assert z32.dtype is C64 and z32.shape == (4, 3)
    p = ember.polar(ember.tensor(np.abs(re)), ember.tensor(im))
    want = torch.polar(torch.tensor(np.abs(re)), torch.tensor(im)).numpy()
    close(p, want, 1e-12, 1e-12)
    with pytest.raises(TypeError, match="same dtype"):
        ember.complex(ember.ones(2), ember.ones(2, dtype=ember.float64))
    with pytest.raises(TypeError, match="float32 or float64"):
        ember.complex(ember.ones(2, dtype=ember.int64), ember.ones(2, dtype=ember.int64))


# ---- reductions, products, shape ops -------------------------------------------------------------

@pytest.mark.parametrize("npdt", [np.complex64, np.complex128])
def test_reductions(npdt):
    a = crandn(3, 4, 5, dtype=npdt)
    z = ember.tensor(a)
    rtol = 1e-5 if npdt == np.complex64 else 1e-12
    close(z.sum(), a.sum(), rtol, rtol)
    close(z.sum(1), a.sum(1), rtol, rtol)
    close(z.sum((0, 2), keepdim=True), a.sum((0, 2), keepdims=True), rtol, rtol)
    close(z.mean(), a.mean(), rtol, rtol)
    close(z.mean(-1), a.mean(-1), rtol, rtol)
    close(z.prod(), a.prod(), 1e-4 if npdt == np.complex64 else 1e-11, 1e-6)
    close(z.prod(1), a.prod(1), rtol * 10, rtol)
    close(z.transpose(0, 2).sum(0), a.transpose(2, 1, 0).sum(0), rtol, rtol)
    assert z.sum().dtype is z.dtype and z.mean(0).dtype is z.dtype
    assert ember.zeros(0, dtype=C64).prod().item() == 1 + 0j


@pytest.mark.parametrize("npdt", [np.complex64, np.complex128])
def test_matmul(npdt):
    a, b = crandn(4, 3, dtype=npdt), crandn(3, 5, dtype=npdt, seed=4)
    za, zb = ember.tensor(a), ember.tensor(b)
    rtol = 1e-5 if npdt == np.complex64 else 1e-12
    close(za @ zb, a @ b, rtol, rtol)
    close(ember.mm(za, zb), a @ b, rtol, rtol)
    close(za.t() @ za, a.T @ a, rtol, rtol)  # transposed operand
    close(za @ zb[:, 0], a @ b[:, 0], rtol, rtol)  # matrix-vector
    ba, bb = crandn(2, 4, 3, dtype=npdt, seed=5), crandn(2, 3, 2, dtype=npdt, seed=6)
    close(ember.bmm(ember.tensor(ba), ember.tensor(bb)), ba @ bb, rtol, rtol)
    close(ember.tensor(ba) @ zb, ba @ b, rtol, rtol)  # broadcast batch
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.mm(za, ember.ones(3, 5))


def test_shape_ops_move_complex_values():
    a = crandn(4, 6)
    z = ember.tensor(a)
    np.testing.assert_array_equal(ember.cat([z, z[:1]]).numpy(), np.concatenate([a, a[:1]]))
    np.testing.assert_array_equal(ember.stack([z, z], 1).numpy(), np.stack([a, a], 1))
    np.testing.assert_array_equal(z.reshape(3, 8).numpy(), a.reshape(3, 8))
    np.testing.assert_array_equal(z.t().contiguous().numpy(), a.T)
    np.testing.assert_array_equal(z[[2, 0]].numpy(), a[[2, 0]])
    np.testing.assert_array_equal(z[:, [5, 1, 1]].numpy(), a[:, [5, 1, 1]])
    np.testing.assert_array_equal(z[z.real > 0].numpy(), a[a.real > 0])
    np.testing.assert_array_equal(z.flip(0).numpy(), a[::-1])
    np.testing.assert_array_equal(z.roll(2, 1).numpy(), np.roll(a, 2, 1))
    np.testing.assert_array_equal(z.index_select(1, ember.tensor([3, 0])).numpy(), a[:, [3, 0]])
    w = z.clone()
    w[1] = 0
    w[:, 0] = 1j
    b = a.copy()
    b[1] = 0
    b[:, 0] = 1j
    np.testing.assert_array_equal(w.numpy(), b)
    m = z.clone().masked_fill_(z.real < 0, 2 + 2j)
    np.testing.assert_array_equal(m.numpy(), np.where(a.real < 0, 2 + 2j, a))
    np.testing.assert_array_equal(z.narrow(1, 2, 3).numpy(), a[:, 2:5])
    p = ember.pad(z, [1, 2], "reflect")
    np.testing.assert_array_equal(p.numpy(), np.pad(a, [(0, 0), (1, 2)], mode="reflect"))
    q = ember.pad(z, [1, 1], "constant", 0.0)
    np.testing.assert_array_equal(q.numpy(), np.pad(a, [(0, 0), (1, 1)]))
    np.testing.assert_array_equal(z.unfold(1, 3, 2).numpy()[0, 1], a[0, 2:5])


def test_finfo_and_assert_close():
    assert ember.finfo(C64).eps == ember.finfo(ember.float32).eps
    assert ember.finfo(C128).dtype == "float64"
    a = ember.tensor([1 + 1j, 2 - 1j])
    ember.testing.assert_close(a, a + 1e-9j)
    with pytest.raises(AssertionError):
        ember.testing.assert_close(a, a + 1e-2j)
