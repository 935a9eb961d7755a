"""Core compatibility gaps with PyTorch (session 24): pickling and deep copies of views (strides,
storage offset, whole storage; deepcopy keeps views of one storage shared), SVD-based ops on NaN
(LinAlgError) and inf (NaN results) input, the legacy storage classes (FloatStorage, ...),
native_group_norm / native_batch_norm statistics, random_'s keyword-only generator and
unsafe_split's non-view outputs."""

import copy
import math
import pickle
import warnings

import ember
import pytest

try:
    import torch
except ImportError:  # the comparisons against PyTorch skip without it
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- pickling and deepcopy of views ----------------------------------------------------------

def _geometry(t):
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.untyped_storage().nbytes(),
            t.is_contiguous())


def test_pickle_keeps_view_strides_offset_and_storage():
    b = ember.arange(12.0).reshape(3, 4)
    r = pickle.loads(pickle.dumps(b.t()))
    assert _geometry(r) == ((4, 3), (1, 4), 0, 48, False)
    assert r.tolist() == b.t().tolist()
    r = pickle.loads(pickle.dumps(b[1:, 1:]))
    assert _geometry(r) == ((2, 3), (4, 1), 5, 48, False)
    assert r.tolist() == [[5.0, 6.0, 7.0], [9.0, 10.0, 11.0]]
    assert r._base is None and r.is_leaf
    # a stride-0 expansion keeps its stride (and its small storage)
    r = pickle.loads(pickle.dumps(ember.tensor([1, 2, 3]).expand(4, 3)))
    assert _geometry(r) == ((4, 3), (0, 1), 0, 24, False)
    assert r.tolist() == [[1, 2, 3]] * 4
    # another dtype's view, bool, bfloat16
    r = pickle.loads(pickle.dumps(b.view(ember.int32)[1:]))
    assert (r.dtype, r.stride(), r.storage_offset()) == (ember.int32, (4, 1), 4)
    r = pickle.loads(pickle.dumps(ember.tensor([True, False, True])[1:]))
    assert r.tolist() == [False, True] and r.storage_offset() == 1
    x = ember.arange(16.0).reshape(4, 4).to(ember.bfloat16)[::2]
    r = pickle.loads(pickle.dumps(x))
    assert r.dtype == ember.bfloat16 and r.stride() == (8, 1) and ember.equal(r, x)


def test_pickle_contiguous_and_grad_flags():
    x = ember.arange(6.0).reshape(2, 3)
    r = pickle.loads(pickle.dumps(x))
    assert _geometry(r) == ((2, 3), (3, 1), 0, 24, True) and r.tolist() == x.tolist()
    p = ember.nn.Parameter(ember.arange(12.0).reshape(3, 4).t())
    r = pickle.loads(pickle.dumps(p))
    assert type(r) is ember.nn.Parameter and r.requires_grad and r.stride() == (1, 4)
    r = pickle.loads(pickle.dumps(ember.empty(3, 4, device="meta").t()))
    assert r.device.type == "meta" and r.stride() == (1, 4)
    assert pickle.loads(pickle.dumps(ember.empty(0))).shape == (0,)


def test_pickle_like_torch_no_sharing_between_pickled_tensors():
    # as in PyTorch, each pickled tensor carries its own copy of its storage
    b = ember.arange(12.0).reshape(3, 4)
    a, v = pickle.loads(pickle.dumps([b, b.t()]))
    a[0, 1] = 100.0
    assert v[1, 0].item() == 1.0
    a, c = pickle.loads(pickle.dumps([b, b]))
    assert a is c  # one object stays one object


def test_small_slice_sent_between_processes_carries_only_its_elements():
    from ember.multiprocessing_reductions import _reduce_tensor_mp

    big = ember.arange(100000.0)
    fn, args = _reduce_tensor_mp(big[10:20:2])
    assert len(args[0]) == 5 * 4  # not the 400000-byte storage
    assert fn(*args).tolist() == [10.0, 12.0, 14.0, 16.0, 18.0]
    fn, args = big[10:20:2].__reduce_ex__(2)  # plain pickle: the whole storage, as PyTorch
    r = fn(*args)
    assert r.untyped_storage().nbytes() == 400000 and r.storage_offset() == 10


def test_unpickle_refuses_view_past_storage():
    from ember.multiprocessing_reductions import rebuild_tensor_strided

    with pytest.raises(ValueError, match="do not fit a storage of 16 bytes"):
        rebuild_tensor_strided(b"\0" * 16, "float32", (2, 2), (4, 1), 0, False)
    t = rebuild_tensor_strided(bytes(range(8)), "uint8", (2, 2), (1, 2), 3, False)
    assert t.tolist() == [[3, 5], [4, 6]] and t.storage_offset() == 3


def test_deepcopy_keeps_views_shared():
    b = ember.arange(12.0).reshape(3, 4)
    d = copy.deepcopy({"v": b.t(), "s": b[1:, 1:], "b": b})
    assert d["v"].untyped_storage().data_ptr() == d["s"].untyped_storage().data_ptr()
    assert d["b"].untyped_storage().data_ptr() == d["v"].untyped_storage().data_ptr()
    assert d["b"].untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    assert d["s"].storage_offset() == 5 and d["v"].stride() == (1, 4)
    d["b"][1, 1] = -1.0
    assert d["v"][1, 1].item() == -1.0 and d["s"][0, 0].item() == -1.0
    assert b[1, 1].item() == 5.0
    x = ember.arange(6.0)[::2]
    r = copy.deepcopy(x)
    assert (r.stride(), r.storage_offset(), r.untyped_storage().nbytes()) == ((2,), 0, 24)
    # leaf flags and grad
    w = ember.ones(3, requires_grad=True)
    w.grad = ember.full((3,), 2.0)
    r = copy.deepcopy(w)
    assert r.requires_grad and r.is_leaf and r.grad.tolist() == [2.0, 2.0, 2.0]
    m = copy.deepcopy(ember.empty(3, 4, device="meta").t())
    assert m.device.type == "meta" and m.stride() == (1, 4)


@needs_torch
def test_pickle_and_deepcopy_match_torch():
    for lib in (ember, torch):
        b = lib.arange(12.0).reshape(3, 4)
        got = []
        for x in (b.t(), b[1:, 1:], b[:, ::2], lib.zeros(2, 3).expand(4, 2, 3)):
            r = pickle.loads(pickle.dumps(x))
            got.append((tuple(r.stride()), r.storage_offset(), r.untyped_storage().nbytes(),
                        r.tolist()))
        d = copy.deepcopy([b, b.t(), b[1:]])
        got.append([x.untyped_storage().data_ptr() == d[0].untyped_storage().data_ptr()
                    for x in d])
        if lib is ember:
            mine = got
    assert mine == got


# ---- SVD of non-finite input ------------------------------------------------------------------

_NAN_MSG = ("linalg.svd: The algorithm failed to converge because the input matrix contained "
            "non-finite values.")
_SVD_OPS = {
    "norm_nuc": lambda L, m: L.norm(m, p="nuc"),
    "tensor_norm_nuc": lambda L, m: m.norm(p="nuc"),
    "matrix_norm_nuc": lambda L, m: L.linalg.matrix_norm(m, ord="nuc"),
    "matrix_norm_2": lambda L, m: L.linalg.matrix_norm(m, ord=2),
    "matrix_norm_-2": lambda L, m: L.linalg.matrix_norm(m, ord=-2),
    "svd": lambda L, m: L.linalg.svd(m).S,
    "svdvals": lambda L, m: L.linalg.svdvals(m),
    "torch_svd": lambda L, m: L.svd(m)[1],
    "pinv": lambda L, m: L.linalg.pinv(m),
    "matrix_rank": lambda L, m: L.linalg.matrix_rank(m),
    "cond": lambda L, m: L.linalg.cond(m),
}


@pytest.mark.parametrize("op", sorted(_SVD_OPS))
def test_svd_ops_on_nan_raise_linalg_error(op):
    m = ember.tensor([[1.0, float("nan")], [3.0, 4.0]])
    with pytest.raises(ember.linalg.LinAlgError) as info:
        _SVD_OPS[op](ember, m)
    assert str(info.value) == _NAN_MSG
    assert isinstance(info.value, RuntimeError)
    if torch is not None:
        with pytest.raises(torch.linalg.LinAlgError, match="linalg.svd: The algorithm failed"):
            _SVD_OPS[op](torch, torch.tensor([[1.0, float("nan")], [3.0, 4.0]]))


@pytest.mark.parametrize("op", sorted(_SVD_OPS))
def test_svd_ops_on_inf_answer_nan(op):
    got = _SVD_OPS[op](ember, ember.tensor([[1.0, float("inf")], [3.0, 4.0]]))
    if op == "matrix_rank":
        assert got.item() == 0  # NaN singular values are not above the tolerance
    else:
        assert all(math.isnan(v) for v in got.reshape(-1).tolist())
    if torch is not None:
        want = _SVD_OPS[op](torch, torch.tensor([[1.0, float("inf")], [3.0, 4.0]]))
        assert str(got.tolist()) == str(want.tolist())


def test_svd_inf_batch_and_complex():
    m = ember.stack([ember.tensor([[1.0, float("inf")], [3.0, 4.0]]),
                     ember.tensor([[3.0, 0.0], [0.0, 4.0]])])
    s = ember.linalg.svdvals(m)
    assert math.isnan(s[0, 0].item()) and s[1].tolist() == [4.0, 3.0]
    U, S, Vh = ember.linalg.svd(m.to(ember.complex128))
    assert math.isnan(U[0, 0, 0].real.item()) and S[1].tolist() == [4.0, 3.0]
    with pytest.raises(ember.linalg.LinAlgError, match=r"\(Batch element 1\): The algorithm"):
        ember.linalg.svdvals(ember.stack([m[1], ember.full((2, 2), float("nan"))]))


# ---- legacy storage classes --------------------------------------------------------------------

_LEGACY = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
           "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
           "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
           "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
           "ComplexDoubleStorage": "complex128"}


@pytest.mark.parametrize("name", sorted(_LEGACY))
def test_legacy_storage_classes(name):
    cls = getattr(ember, name)
    dt = getattr(ember, _LEGACY[name])
    assert cls.dtype == dt and issubclass(cls, ember.TypedStorage)
    s = cls(3)
    assert type(s) is ember.TypedStorage and s.dtype == dt and s.size() == 3
    assert isinstance(s, cls) and isinstance(s, ember.TypedStorage)
    assert s.device == ember.device("cpu") and s.type() == f"ember.{name}"
    assert cls().size() == 0
    data = [1, 0] if name == "BoolStorage" else [1, 2]
    s = cls(data)
    assert s.tolist() == ember.tensor(data, dtype=dt).tolist()
    assert ember.zeros(2, dtype=dt).storage_type() is cls
    assert isinstance(ember.zeros(2, dtype=dt).storage(), cls)
    others = [getattr(ember, n) for n in _LEGACY if n != name]
    assert not any(isinstance(s, o) for o in others)
    if torch is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = getattr(torch, name)(data)
        assert t.tolist() == s.tolist() and str(t.dtype)[6:] == str(dt)[6:]


def test_legacy_storage_constructors_and_errors():
    u = ember.UntypedStorage(8)
    s = ember.FloatStorage(wrap_storage=u)
    assert s.size() == 2 and s.untyped() is u
    assert ember.FloatStorage((1, 2)).tolist() == [1.0, 2.0]
    assert ember.FloatStorage.from_buffer(b"\x00\x00\x80?", "little").tolist() == [1.0]
    assert ember.LongStorage([1, 2]).tolist() == [1, 2]
    assert ember.ComplexFloatStorage([1 + 2j]).tolist() == [1 + 2j]
    assert ember.Tensor(ember.FloatStorage([1, 2])).tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="invalid combination of arguments"):
        ember.FloatStorage(3, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="invalid combination of arguments"):
        ember.FloatStorage(2, device="cpu")
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        ember.FloatStorage("a")
    with pytest.raises(TypeError, match="invalid data type 'Tensor'"):
        ember.FloatStorage(ember.ones(2))
    assert not isinstance(ember.FloatStorage(2), ember.UntypedStorage)
    assert ember.zeros(2, dtype=ember.uint16).storage_type() is None
    r = pickle.loads(pickle.dumps(ember.IntStorage([1, 2])))
    assert isinstance(r, ember.IntStorage) and r.tolist() == [1, 2]


# ---- native_group_norm / native_batch_norm statistics ----------------------------------------

@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_native_group_norm_float_stats_of_half_input_with_float_weight(dt):
    x = (ember.arange(24.0).reshape(2, 4, 3) / 8).to(getattr(ember, dt))
    out, mean, rstd = ember.native_group_norm(x, ember.ones(4), ember.zeros(4), 2, 4, 3, 2, 1e-5)
    assert out.dtype == x.dtype and mean.dtype == rstd.dtype == ember.float32
    assert mean.shape == rstd.shape == (2, 2)
    # group 0 of sample 0: (0 .. 5) / 8, mean 2.5 / 8, variance 35 / 12 / 64
    assert mean[0, 0].item() == pytest.approx(2.5 / 8, rel=1e-6)
    assert rstd[0, 0].item() == pytest.approx(1 / math.sqrt(35 / 12 / 64 + 1e-5), rel=1e-5)
    _, m2, r2 = ember.native_group_norm(x, ember.ones(4, dtype=x.dtype), None, 2, 4, 3, 2, 1e-5)
    assert m2.dtype == r2.dtype == x.dtype
    _, m3, _ = ember.native_group_norm(x, None, None, 2, 4, 3, 2, 1e-5)
    assert m3.dtype == x.dtype
    if torch is not None:
        tx = torch.tensor(x.float().tolist()).to(getattr(torch, dt))
        t = torch.native_group_norm(tx, torch.ones(4), torch.zeros(4), 2, 4, 3, 2, 1e-5)
        assert str(t[1].dtype) == "torch.float32"
        assert mean.view(-1).tolist() == pytest.approx(t[1].view(-1).tolist(), rel=1e-6)
        assert rstd.view(-1).tolist() == pytest.approx(t[2].view(-1).tolist(), rel=1e-5)


def test_native_group_norm_half_input_backward():
    x = (ember.arange(24.0).reshape(2, 4, 3) / 8).to(ember.bfloat16).requires_grad_()
    w = ember.linspace(0.5, 2.0, 4).requires_grad_()
    out = ember.native_group_norm(x, w, None, 2, 4, 3, 2, 1e-5)[0]
    (out.float() * ember.arange(24.0).reshape(2, 4, 3)).sum().backward()
    assert x.grad.dtype == ember.bfloat16 and w.grad.dtype == ember.float32
    assert x.grad.shape == (2, 4, 3) and bool(ember.isfinite(w.grad).all())


def test_native_batch_norm_eval_returns_empty_stats():
    x = ember.arange(24.0).reshape(2, 4, 3)
    rm, rv = ember.arange(4.0), ember.full((4,), 4.0)
    out, m, r = ember.native_batch_norm(x, None, None, rm, rv, False, 0.1, 0.0)
    assert m.shape == r.shape == (0,) and m.dtype == r.dtype == ember.float32
    assert out[1, 2].tolist() == [(18 - 2) / 2, (19 - 2) / 2, (20 - 2) / 2]  # x[1, 2] = 18..20
    out, m, r = ember.native_batch_norm(x, None, None, rm, rv, training=False, momentum=0.1,
                                        eps=0.0)
    assert m.shape == (0,)
    xh = x.to(ember.float16)
    _, m, r = ember.native_batch_norm(xh, ember.ones(4, dtype=ember.float16), None,
                                      rm.half(), rv.half(), False, 0.1, 1e-5)
    assert m.shape == (0,) and m.dtype == ember.float16
    _, m, r = ember.native_batch_norm(x, None, None, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    assert m.shape == r.shape == (4,)
    # eval backward still uses the running statistics
    xg = x.clone().requires_grad_()
    ember.native_batch_norm(xg, None, None, rm, rv, False, 0.1, 0.0)[0].sum().backward()
    assert xg.grad.tolist() == [[[0.5] * 3] * 4] * 2
    if torch is not None:
        t = torch.native_batch_norm(torch.arange(24.0).reshape(2, 4, 3), None, None,
                                    torch.arange(4.0), torch.full((4,), 4.0), False, 0.1, 0.0)
        assert tuple(t[1].shape) == (0,) and t[0].tolist() == ember.native_batch_norm(
            x, None, None, rm, rv, False, 0.1, 0.0)[0].tolist()


# ---- random_'s generator is keyword-only; unsafe_split's outputs ------------------------------

def test_random_refuses_positional_generator():
    x = ember.zeros(3)
    g0 = ember.Generator()
    for call in (lambda: x.random_(None), lambda: ember.Tensor.random_(x, None),
                 lambda: x.random_(0, 5, None), lambda: x.random_(to=None),
                 lambda: x.random_(g0), lambda: x.bernoulli(None), lambda: x.bernoulli(g0),
                 lambda: x.bernoulli_(0.5, None), lambda: ember.bernoulli(x, None)):
        with pytest.raises(TypeError):
            call()
    g = ember.Generator().manual_seed(0)
    assert x.random_(generator=g) is x and x.random_(5, None).shape == (3,)
    assert all(0 <= v < 5 for v in x.random_(5).tolist())
    assert all(1 <= v < 5 for v in x.random_(1, 5, generator=None).tolist())
    assert all(2 <= v < 4 for v in x.random_(2, to=4).tolist())
    p = ember.full((4,), 0.5)
    assert p.bernoulli().shape == (4,) and p.bernoulli(generator=g).shape == (4,)
    assert p.bernoulli(1.0).tolist() == [1.0] * 4
    assert x.random_(2).random_() is x
    if torch is not None:
        with pytest.raises(TypeError):
            torch.zeros(3).random_(None)


def _split_meta(outs, base):
    o = outs[0]
    return (o.requires_grad, o.grad_fn.name() if o.grad_fn else None, o._base is base, o.is_leaf,
            o._is_view())


def test_unsafe_split_outputs_are_not_views():
    b = ember.arange(6.0)
    for outs in (ember.unsafe_split(b, 2), ember.unsafe_chunk(b, 3),
                 ember.unsafe_split_with_sizes(b, [2, 4]), b.unsafe_split(2)):
        assert _split_meta(outs, b) == (False, None, False, True, False)
        assert outs[0].untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    w = ember.arange(6.0, requires_grad=True)
    assert _split_meta(ember.unsafe_split(w, 2), w) == (True, "UnsafeSplitBackward0", False,
                                                        False, False)
    assert _split_meta(ember.unsafe_chunk(w, 3), w)[1] == "UnsafeSplitBackward0"
    assert _split_meta(ember.unsafe_split_with_sizes(w, [2, 4]), w)[1] == \
        "UnsafeSplitWithSizesBackward0"
    with ember.no_grad():  # no history under no_grad (a view would keep requires_grad)
        assert _split_meta(ember.unsafe_split(w, 2), w) == (False, None, False, True, False)
    p = ember.unsafe_split(ember.arange(4.0), 2)
    p[0][0] = 9.0  # writes through to the base
    assert p[0]._base is None
    if torch is not None:
        tw = torch.arange(6.0, requires_grad=True)
        assert _split_meta(torch.unsafe_split(tw, 2), tw) == _split_meta(
            ember.unsafe_split(w, 2), w)
        with torch.no_grad():
            assert not torch.unsafe_split(tw, 2)[0].requires_grad


def test_unsafe_split_gradients():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=ember.float64,
                     requires_grad=True)
    a, b = ember.unsafe_split(x * 1, [1, 2])
    (a.sum() * 3 + (b ** 2).sum()).backward()
    assert x.grad.tolist() == [[3.0, 3.0], [6.0, 8.0], [10.0, 12.0]]
    ga = ember.autograd.gradcheck
    assert ga(lambda t: ember.unsafe_split(t, [1, 2], 0)[1], (x.detach().requires_grad_(),))
    assert ga(lambda t: ember.unsafe_chunk(t, 2, 1)[1], (x.detach().requires_grad_(),))
    assert ember.autograd.gradgradcheck(lambda t: ember.unsafe_split(t, 2, 0)[0] ** 2,
                                        (x.detach().requires_grad_(),))
    import ember.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        d = fwAD.make_dual(ember.arange(4.0), ember.full((4,), 2.0))
        assert fwAD.unpack_dual(ember.unsafe_split(d, 2)[1]).tangent.tolist() == [2.0, 2.0]
