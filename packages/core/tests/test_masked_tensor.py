"""ember.masked.MaskedTensor against torch.masked.MaskedTensor: construction and its checks, the
repr, pointwise ops and the equal-mask rule, reductions, softmax, where, view / select ops,
conversions and gradients (MaskedTensor grads). Where PyTorch's prototype fails (log_softmax,
norm, var with unbiased=...) ember's results are checked against the masked functions."""

from __future__ import annotations

import copy
import math
import pickle

import ember
import numpy as np
import pytest
from ember.masked import MaskedTensor, as_masked_tensor, masked_tensor

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings(
    "ignore:The PyTorch API of MaskedTensors:UserWarning",
    "ignore:It is not recommended to create a MaskedTensor:UserWarning",
    "ignore:mm is not implemented in __torch_dispatch__:UserWarning")

DATA = [[0.5, -1.0, 2.0, 3.0], [4.0, -5.0, 0.25, 6.0], [-7.0, 8.0, 9.0, -0.5]]
MASK = [[True, False, True, True], [False, False, False, False], [True, True, False, True]]


def _pair(data: list = DATA, mask: list = MASK, dtype: str = "float32",
          requires_grad: bool = False) -> tuple[MaskedTensor, object]:
    e = masked_tensor(ember.tensor(data, dtype=getattr(ember, dtype)), ember.tensor(mask),
                      requires_grad=requires_grad)
    t = torch.masked.masked_tensor(torch.tensor(data, dtype=getattr(torch, dtype)),
                                   torch.tensor(mask), requires_grad=requires_grad)
    return e, t


def _np(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach()
    return np.array(x.tolist(), dtype=np.float64)


def _same(e, t, atol: float = 1e-5) -> None:
    """Same kind, dtype, shape and mask; the same data where the mask is True."""
    if not isinstance(t, torch.Tensor):
        assert e == t
        return
    if isinstance(t, torch.masked.MaskedTensor):
        assert isinstance(e, MaskedTensor), type(e)
        assert str(e.dtype).rsplit(".", 1)[-1] == str(t.dtype).rsplit(".", 1)[-1]
        assert tuple(e.shape) == tuple(t.shape)
        em, tm = e.get_mask().tolist(), t.get_mask().tolist()
        assert em == tm
        keep = np.array(tm, dtype=bool)
        ed, td = _np(e.get_data()), _np(t.get_data())
        np.testing.assert_allclose(ed[keep], td[keep], rtol=1e-5, atol=atol)
    else:
        assert not isinstance(e, MaskedTensor)
        np.testing.assert_allclose(_np(e), _np(t), rtol=1e-5, atol=atol)


# ---- construction ----------------------------------------------------------------------------
def test_construct_fields_and_copies():
    d, m = ember.tensor(DATA), ember.tensor(MASK)
    mt = masked_tensor(d, m)
    assert isinstance(mt, ember.Tensor) and isinstance(mt, MaskedTensor)
    assert ember.masked.is_masked_tensor(mt) and not ember.masked.is_masked_tensor(d)
    assert mt.shape == ember.Size([3, 4]) and mt.dtype is ember.float32 and mt.ndim == 2
    assert mt.layout is ember.strided and not mt.is_sparse and not mt.requires_grad
    assert mt.device == d.device and mt.size(1) == 4 and mt.numel() == 12 and len(mt) == 3
    assert mt.get_data().tolist() == DATA and mt.get_mask().tolist() == MASK
    d.add_(100)  # as in PyTorch, the MaskedTensor holds copies
    assert mt.get_data().tolist() == DATA
    for ctor in (MaskedTensor, masked_tensor, as_masked_tensor):
        assert type(ctor(ember.tensor(DATA), m)) is MaskedTensor


def test_prototype_warning():
    with pytest.warns(UserWarning, match="prototype stage"):
        masked_tensor(ember.ones(2), ember.tensor([True, False]))
    with pytest.warns(UserWarning, match="not recommended"):
        mt = MaskedTensor(ember.ones(2, requires_grad=True), ember.tensor([True, False]))
    assert not mt.requires_grad  # as PyTorch: a wrapper of its own, not of data's graph


@pytest.mark.parametrize("case", ["data", "mask", "shape", "mask_dtype", "complex", "uint8",
                                  "int_grad"])
def test_construct_errors_match_torch(case):
    def build(lib):
        ones = lib.ones(2, 3)
        bools = lib.ones(2, 3, dtype=lib.bool)
        args = {
            "data": ([[1.0]], bools), "mask": (ones, [[True]]),
            "shape": (ones, lib.ones(3, 2, dtype=lib.bool)), "mask_dtype": (ones, ones),
            "complex": (ones.to(lib.complex64), bools), "uint8": (ones.to(lib.uint8), bools),
            "int_grad": (ones.to(lib.int64), bools),
        }[case]
        return args, {"requires_grad": case == "int_grad"}

    errors = []
    for lib, ctor in ((torch, torch.masked.masked_tensor), (ember, masked_tensor)):
        args, kw = build(lib)
        with pytest.raises(Exception) as info:
            ctor(*args, **kw)
        errors.append((type(info.value), str(info.value).replace("torch.", "ember.")))
    assert errors[0] == errors[1]


def test_sparse_layouts_refused():
    d = ember.tensor([[1.0, 0.0], [0.0, 2.0]])
    with pytest.raises(NotImplementedError, match="strided only"):
        masked_tensor(d.to_sparse(), (d != 0).to_sparse())
    with pytest.raises(TypeError, match="same layout"):
        masked_tensor(d.to_sparse(), d != 0)


# ---- repr --------------------------------------------------------------------------------------
REPR_CASES = [
    (DATA, MASK, "float32"),
    ([1.0, 2.0, 3.0], [True, False, True], "float64"),
    ([1e9, 2.0, 3.0], [True, False, True], "float32"),
    ([[1e9, 2.0], [3.0, 4.0]], [[True, False], [False, True]], "float32"),
    ([-1.5, float("nan"), float("inf"), -0.0], [True, True, True, True], "float32"),
    ([1, 2, 123456789], [True, False, True], "int64"),
    ([True, False], [True, False], "bool"),
    ([[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]],
     [[[True, False], [False, True]], [[True, True], [False, False]]], "float16"),
    (11.0, True, "float32"),
    (3.0, False, "float32"),
    (5, True, "int32"),
    (True, True, "bool"),
]


@pytest.mark.parametrize("data,mask,dtype", REPR_CASES)
def test_repr_matches_torch(data, mask, dtype):
    e, t = _pair(data, mask, dtype)
    assert repr(e) == repr(t)
    assert str(e) == str(t)


def test_repr_of_results_and_grads():
    e, t = _pair(requires_grad=True)
    assert repr(e * 2) == repr(t * 2)
    assert repr(e.sum(1)) == repr(t.sum(1))
    assert repr(masked_tensor(ember.zeros(0), ember.zeros(0, dtype=ember.bool))) == \
        "MaskedTensor(\n  []\n)"  # (PyTorch's repr fails on an empty MaskedTensor)


# ---- accessors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0, -1.5, float("nan")])
def test_to_tensor(value):
    e, t = _pair()
    _same(e.to_tensor(value), t.to_tensor(value))
    assert not isinstance(e.to_tensor(value), MaskedTensor)


# ---- pointwise ---------------------------------------------------------------------------------
UNARY = ["abs", "neg", "exp", "expm1", "sin", "cos", "tanh", "sigmoid", "floor", "ceil", "round",
         "trunc", "frac", "sign", "square", "sqrt", "log", "log1p", "rsqrt", "reciprocal", "erf",
         "isnan", "signbit", "deg2rad", "sinc", "nan_to_num", "positive", "atan", "asinh",
         "logit", "i0", "exp2", "rad2deg", "sgn"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_torch(op):
    e, t = _pair()
    _same(getattr(e, op)(), getattr(t, op)())
    _same(getattr(ember, op)(e), getattr(torch, op)(t))


@pytest.mark.parametrize("op", ["abs_", "neg_", "exp_", "sin_", "clamp_", "mul_", "add_"])
def test_unary_inplace_matches_torch(op):
    e, t = _pair()
    args = {"clamp_": (-1.0, 2.0), "mul_": (3.0,), "add_": (e,)}.get(op, ())
    targs = {"clamp_": (-1.0, 2.0), "mul_": (3.0,), "add_": (t,)}.get(op, ())
    out = getattr(e, op)(*args)
    getattr(t, op)(*targs)
    assert out is e
    _same(e, t)


def test_clamp_pow_and_operators_match_torch():
    e, t = _pair()
    _same(e.clamp(-1, 2), t.clamp(-1, 2))
    _same(e.clamp(min=0.0), t.clamp(min=0.0))
    _same(e.pow(2), t.pow(2))
    _same(e ** 2, t ** 2)
    _same(-e, -t)
    _same(abs(e), abs(t))
    _same(1 / e, 1 / t)
    _same(e // 2, t // 2)
    _same(e % 2, t % 2)
    _same(e.float_power(2), t.float_power(2))


BINARY = ["add", "sub", "mul", "div", "atan2", "maximum", "minimum", "fmax", "fmin", "eq", "ne",
          "lt", "le", "gt", "ge", "fmod", "remainder", "logaddexp", "floor_divide", "true_divide",
          "nextafter", "greater", "less_equal"]


@pytest.mark.parametrize("op", BINARY)
def test_binary_matches_torch(op):
    e, t = _pair()
    e2, t2 = _pair([[v * 0.5 + 1 for v in row] for row in DATA], MASK)
    _same(getattr(e, op)(e2), getattr(t, op)(t2))
    _same(getattr(ember, op)(e, e2), getattr(torch, op)(t, t2))
    # a plain tensor (broadcast) and a number count as unmasked
    _same(getattr(e, op)(ember.tensor([1.0, 2.0, -3.0, 0.5])),
          getattr(t, op)(torch.tensor([1.0, 2.0, -3.0, 0.5])))
    if op not in ("atan2", "maximum", "minimum", "fmax", "fmin", "logaddexp", "nextafter"):
        _same(getattr(e, op)(1.5), getattr(t, op)(1.5))  # (those take tensors only)


def test_operators_match_torch():
    e, t = _pair()
    for f in (lambda a: a + a, lambda a: a - 1, lambda a: 1 + a, lambda a: 2 * a,
              lambda a: a * a, lambda a: a / 2, lambda a: a > 0, lambda a: a == a,
              lambda a: a != 2.0, lambda a: a <= 1):
        _same(f(e), f(t))
    b, tb = _pair([[True, False]], [[True, True]], "bool")
    _same(~b, ~tb)
    i, ti = _pair([3, 5, 6], [True, False, True], "int32")
    for f in (lambda a: a & 6, lambda a: a | 1, lambda a: a ^ a):
        _same(f(i), f(ti))


def test_binary_masks_must_match():
    e, t = _pair()
    other = [[not v for v in row] for row in MASK]
    e2, t2 = _pair(DATA, other)
    errors = []
    for a, b in ((t, t2), (e, e2)):
        with pytest.raises(ValueError) as info:
            a + b
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "masks must match" in errors[0]
    # equal masks in other tensors, and masks that would broadcast (PyTorch refuses those too)
    same, _ = _pair(DATA, [list(r) for r in MASK])
    _same(e + same, t + t)
    row, trow = _pair([1.0, 2.0, 3.0, 4.0], MASK[0])
    with pytest.raises(ValueError, match="masks must match"):
        trow + t
    with pytest.raises(ValueError, match="masks must match"):
        row + e
    with pytest.raises(ValueError, match="masks must match"):
        e.add_(e2)


def test_int_and_bool_pointwise_match_torch():
    e, t = _pair([1, 2, 3], [True, False, True], "int64")
    _same(e / 2, t / 2)
    _same(e + 1.5, t + 1.5)
    _same(e * e, t * t)
    b, tb = _pair([True, False, True], [True, True, False], "bool")
    _same(b.bool(), tb.bool())


# ---- reductions --------------------------------------------------------------------------------
REDUCTIONS = ["sum", "mean", "amax", "amin", "argmax", "argmin", "prod", "all"]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("how", [(), (0,), (1,), (-1,), ("kw", 1, True), ("kw", 0, True)])
def test_reductions_match_torch(op, how):
    e, t = _pair()  # row 1 fully masked out: masked out in dim-1 results
    if how and how[0] == "kw":
        kw = {"dim": how[1], "keepdim": how[2]}
        _same(getattr(e, op)(**kw), getattr(t, op)(**kw))
    else:
        _same(getattr(e, op)(*how), getattr(t, op)(*how))
        _same(getattr(ember, op)(e, *how), getattr(torch, op)(t, *how))


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("how", [(), (0,), (1,), ("kw", 1, True)])
def test_var_std_match_torch(op, how):
    e, t = _pair()
    if how and how[0] == "kw":
        _same(getattr(e, op)(dim=how[1], keepdim=how[2]), getattr(t, op)(dim=how[1],
                                                                          keepdim=how[2]))
    else:
        _same(getattr(e, op)(*how), getattr(t, op)(*how))


def test_reduction_extras():
    e, t = _pair()
    _same(e.sum((0, 1)), t.sum((0, 1)))
    _same(e.sum(1, dtype=ember.float64), t.sum(1, dtype=torch.float64))
    _same(e.mean(dim=1, keepdim=True), t.mean(dim=1, keepdim=True))
    _same(e.sum(1).sum(), t.sum(1).sum())
    _same((e > 0).all(1), (t > 0).all(1))
    i, ti = _pair([[1, 2], [3, 4]], [[True, False], [True, True]], "int64")
    _same(i.sum(1), ti.sum(1))
    _same(i.amax(0), ti.amax(0))
    nothing, tnothing = _pair([1.0, 2.0], [False, False])
    _same(nothing.sum(), tnothing.sum())  # 0, masked out
    assert not nothing.mean().get_mask().item()


def test_reductions_torch_lacks():
    """norm, var(unbiased=False / correction=) and any: PyTorch's prototype raises; ember
    computes them over the specified elements (checked against ember.masked)."""
    e, _ = _pair()
    d, m = ember.tensor(DATA), ember.tensor(MASK)
    got = e.norm(dim=1)
    want = ember.masked.norm(d, 2.0, 1, mask=m)
    assert got.get_mask().tolist() == [True, False, True]
    assert got.get_data()[0].item() == pytest.approx(want[0].item())
    assert e.norm().item() == pytest.approx(math.sqrt(sum(
        v * v for row, mr in zip(DATA, MASK) for v, k in zip(row, mr) if k)), rel=1e-6)
    assert e.var(1, unbiased=False).get_data()[0].item() == pytest.approx(
        ember.masked.var(d, 1, unbiased=False, mask=m)[0].item())
    assert e.std(1, correction=0).get_data()[2].item() == pytest.approx(
        ember.masked.std(d, 1, correction=0, mask=m)[2].item())
    assert (e > 5).any(1).get_data().tolist() == [False, False, True]
    assert (e > 5).any(1).get_mask().tolist() == [True, False, True]


def test_masked_functions_take_masked_tensors():
    e, t = _pair()
    _same(ember.masked.sum(e, 1), torch.masked.sum(t, 1))
    _same(ember.masked.amax(e, 0), torch.masked.amax(t, 0))


# ---- softmax -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_matches_torch(dim):
    e, t = _pair()
    _same(e.softmax(dim), t.softmax(dim))
    _same(ember.softmax(e, dim), torch.softmax(t, dim))
    _same(ember.nn.functional.softmax(e, dim=dim), torch.nn.functional.softmax(t, dim=dim))
    _same(ember.softmax(e, dim, dtype=ember.float64), torch.softmax(t, dim,
                                                                   dtype=torch.float64))


def test_log_softmax():
    """PyTorch's prototype has no log_softmax; ember's is the masked one."""
    e, t = _pair()
    got = e.log_softmax(1)
    want = ember.masked.log_softmax(ember.tensor(DATA), 1, mask=ember.tensor(MASK))
    assert got.get_mask().tolist() == MASK
    keep = np.array(MASK)
    np.testing.assert_allclose(_np(got.get_data())[keep], _np(want)[keep], rtol=1e-6)
    np.testing.assert_allclose(_np(got.get_data())[keep],
                               np.log(_np(t.softmax(1).get_data())[keep]), rtol=1e-5, atol=1e-6)


# ---- where -------------------------------------------------------------------------------------
def test_where_matches_torch():
    e, t = _pair()
    e2, t2 = _pair([[-v for v in row] for row in DATA], [[True] * 4, [True, False] * 2,
                                                          [False] * 4])
    cond = [[True, False, True, False]] * 3
    ce, ct = ember.tensor(cond), torch.tensor(cond)
    _same(ember.where(ce, e, e2), torch.where(ct, t, t2))
    _same(ember.where(ce, e, 0.0), torch.where(ct, t, 0.0))
    # a plain tensor first (PyTorch's prototype recurses forever here): unmasked
    got = ember.where(ce, ember.tensor(DATA), e2)
    assert got.get_mask().tolist() == ember.where(ce, True, e2.get_mask()).tolist()
    assert got.get_data().tolist() == ember.where(ce, ember.tensor(DATA), e2.get_data()).tolist()
    method = e.where(ce, e2)  # (PyTorch's Tensor.where recurses forever with MaskedTensors)
    assert method.get_mask().tolist() == torch.where(ct, t, t2).get_mask().tolist()
    with pytest.raises(TypeError, match="plain bool tensor"):
        ember.where(e > 0, e, e)


# ---- view and select ops ------------------------------------------------------------------------
VIEWS = [
    ("transpose", lambda a: a.transpose(0, 1)), ("t", lambda a: a.t()),
    ("reshape", lambda a: a.reshape(4, 3)), ("reshape-1", lambda a: a.reshape(-1)),
    ("view", lambda a: a.view(2, 6)), ("flatten", lambda a: a.flatten()),
    ("expand", lambda a: a.expand(2, 3, 4)), ("unsqueeze", lambda a: a.unsqueeze(0)),
    ("select", lambda a: a.select(0, 2)), ("narrow", lambda a: a.narrow(1, 1, 2)),
    ("getitem0", lambda a: a[0]), ("getitem_slice", lambda a: a[:, 1:3]),
    ("getitem_int", lambda a: a[2, 1]), ("getitem_none", lambda a: a[None]),
    ("getitem_ellipsis", lambda a: a[..., :2]), ("unfold", lambda a: a.unfold(1, 2, 1)),
    ("split", lambda a: a.split(1)), ("chunk", lambda a: a.chunk(2, 1)),
    ("reshape_as", lambda a: a.reshape_as(a.t())), ("ravel", lambda a: a.ravel()),
]


@pytest.mark.parametrize("name,f", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_match_torch(name, f):
    e, t = _pair()
    got, want = f(e), f(t)
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        _same(got, want)


def test_index_with_tensors_and_joins_match_torch():
    e, t = _pair()
    _same(e[ember.tensor([2, 0])], t[torch.tensor([2, 0])])
    _same(e[ember.tensor(MASK)], t[torch.tensor(MASK)])
    _same(ember.cat([e, e], 1), torch.cat([t, t], 1))
    _same(ember.stack([e, e]), torch.stack([t, t]))
    _same(e.expand_as(ember.ones(2, 3, 4)), t.expand_as(torch.ones(2, 3, 4)))


def test_views_torch_lacks():
    """permute, squeeze, flip, unbind: PyTorch's prototype raises; ember applies them to the
    data and the mask alike."""
    e, _ = _pair()
    d, m = ember.tensor(DATA), ember.tensor(MASK)
    for f in (lambda a: a.permute(1, 0), lambda a: a.unsqueeze(1).squeeze(1),
              lambda a: a.flip(0), lambda a: a.movedim(0, 1)):
        got = f(e)
        assert got.get_data().tolist() == f(d).tolist()
        assert got.get_mask().tolist() == f(m).tolist()
    rows = list(e)
    assert [r.get_mask().tolist() for r in rows] == MASK


def test_view_keeps_memory():
    e, _ = _pair()
    v = e.view(12)
    v.mul_(2)
    assert e.get_data()[0, 0].item() == 1.0


# ---- contiguity, conversions, copies ---------------------------------------------------------------
def test_contiguous_and_conversions_match_torch():
    e, t = _pair()
    assert e.is_contiguous() == t.is_contiguous()
    assert e.t().is_contiguous() == t.t().is_contiguous()
    assert e.t().contiguous().is_contiguous() == t.t().contiguous().is_contiguous()
    _same(e.t().contiguous(), t.t().contiguous())
    for conv in (lambda a, lib: a.to(lib.float64), lambda a, lib: a.to(lib.int32),
                 lambda a, lib: a.double(), lambda a, lib: a.int(), lambda a, lib: a.to("cpu"),
                 lambda a, lib: a.type(lib.float64), lambda a, lib: lib.ones_like(a)):
        _same(conv(e, ember), conv(t, torch))
    assert e.to(ember.float32) is e


def test_detach_clone_and_deepcopy():
    e, t = _pair(requires_grad=True)
    for f in (lambda a: a.detach(), lambda a: a.clone()):
        got, want = f(e), f(t)
        _same(got, want)
        assert (got.requires_grad, got.is_leaf) == (want.requires_grad, want.is_leaf)
    c = copy.deepcopy(e)
    assert c is not e and c.requires_grad and c.get_mask().tolist() == MASK
    p = pickle.loads(pickle.dumps(e))
    assert p.requires_grad and p.get_data().tolist() == DATA and p.get_mask().tolist() == MASK


def test_scalars_and_lists():
    e, t = _pair()
    assert float(e.sum()) == pytest.approx(float(t.sum()))
    assert bool(e.sum() > 0) == bool(t.sum() > 0)
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        e.item()
    with pytest.raises(RuntimeError, match="not supported for tensor subclasses"):
        e.tolist()
    with pytest.raises(RuntimeError, match="not supported for tensor subclasses"):
        e.numpy()


def test_unsupported_op_is_a_type_error():
    e, t = _pair()
    with pytest.raises(TypeError):
        torch.mm(t, t.t())
    with pytest.raises(TypeError, match="not supported for MaskedTensor"):
        ember.mm(e, e.t())


# ---- autograd ------------------------------------------------------------------------------------
GRAD_CASES = [
    ("sum", lambda a: a.sum()),
    ("mean_dim", lambda a: a.mean(1).sum()),
    ("exp_mul", lambda a: (a * a).exp().sum(0).sum()),
    ("softmax", lambda a: (a.softmax(1) * a).sum(1).sum()),
    ("amax", lambda a: a.amax(0).sum()),
    ("prod", lambda a: a.prod(1).sum()),
    ("var", lambda a: a.var(1).sum()),
    ("view", lambda a: (a.transpose(0, 1)[1:] * 3).sum()),
    ("index", lambda a: a[0].sum() * 2),
    ("to_tensor", lambda a: a.to_tensor(0).pow(2).sum()),
]


@pytest.mark.parametrize("name,f", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_match_torch(name, f):
    e, t = _pair(requires_grad=True)
    le, lt = f(e), f(t)
    if isinstance(lt, torch.masked.MaskedTensor):
        _same(le, lt, atol=1e-4)
    le.backward()
    lt.backward()
    assert isinstance(e.grad, MaskedTensor) and isinstance(t.grad, torch.masked.MaskedTensor)
    # ember's gradient has the input's mask; PyTorch's is also masked out where a view or
    # select op did not read the input (the values agree wherever PyTorch's is specified)
    tmask = np.array(t.grad.get_mask().tolist())
    assert e.grad.get_mask().tolist() == MASK
    assert not (tmask & ~np.array(MASK)).any()
    np.testing.assert_allclose(_np(e.grad.get_data())[tmask], _np(t.grad.get_data())[tmask],
                               rtol=1e-5, atol=1e-3)
    if tmask.tolist() != MASK:  # the inputs the op did not read get 0
        untouched = np.array(MASK) & ~tmask
        assert (_np(e.grad.get_data())[untouched] == 0).all()


def test_where_gradient():
    """(PyTorch's prototype fails in where's backward.)"""
    e, _ = _pair(requires_grad=True)
    x = ember.tensor(DATA, requires_grad=True)
    cond = ember.tensor(DATA) > 1
    e.where(cond, 2 * e).sum().backward()
    ember.where(cond, x, 2 * x).sum().backward()
    keep = np.array(MASK)
    np.testing.assert_allclose(_np(e.grad.get_data())[keep], _np(x.grad)[keep])


def test_autograd_grad_and_leaf_state():
    e, t = _pair(requires_grad=True)
    assert e.is_leaf and e.grad is None and e.grad_fn is None
    out = (e * e).sum()
    assert out.requires_grad and not out.is_leaf and out.grad_fn is not None
    (ge,) = ember.autograd.grad(out, e)
    (gt,) = torch.autograd.grad((t * t).sum(), t)
    _same(ge, gt)
    # backward with an explicit MaskedTensor gradient
    y, ty = e * 3, t * 3
    y.backward(masked_tensor(ember.ones(3, 4), ember.tensor(MASK)))
    ty.backward(torch.masked.masked_tensor(torch.ones(3, 4), torch.tensor(MASK)))
    _same(e.grad, t.grad)
    e.grad = None
    assert e.grad is None


def test_as_masked_tensor_gradient_reaches_data():
    x = ember.tensor(DATA, requires_grad=True)
    tx = torch.tensor(DATA, requires_grad=True)
    a = as_masked_tensor(x, ember.tensor(MASK))
    ta = torch.masked.as_masked_tensor(tx, torch.tensor(MASK))
    assert (a.requires_grad, a.is_leaf) == (ta.requires_grad, ta.is_leaf)
    (a * a).sum().backward()
    (ta * ta).sum().backward()
    # PyTorch hands x a MaskedTensor gradient; ember a plain one (0 where masked out)
    keep = np.array(MASK)
    np.testing.assert_allclose(_np(x.grad)[keep], _np(tx.grad.get_data())[keep])
    assert (_np(x.grad)[~keep] == 0).all()


def test_requires_grad_toggles_and_hooks():
    e, t = _pair()
    assert e.requires_grad_() is e and e.requires_grad
    seen = []
    e.register_hook(lambda g: seen.append(type(g).__name__))
    (e * 2).sum().backward()
    assert seen == ["MaskedTensor"]
    assert e.grad.get_mask().tolist() == MASK
    assert e.grad.get_data()[0, 0].item() == 2.0


def test_integer_var_and_zero_dim_prod_match_torch():
    e, t = _pair([[-1], [2], [2], [0]], [[True], [True], [False], [False]], "int64")
    _same(e.var(), t.var())  # in the default floating dtype, as PyTorch
    _same(e.std(0), t.std(0))
    for dtype in ("bool", "int32", "float16"):
        z, tz = _pair(1, True, dtype)
        _same(z.prod(0), tz.prod(0))  # integers promoted to int64
        _same(z.sum(), tz.sum())


def test_reductions_of_zero_dim_and_one_dim_match_torch():
    for data, mask in ((2.5, True), (2.5, False), ([1.0, -2.0, 3.0], [False, True, True])):
        e, t = _pair(data, mask)
        for f in (lambda a: a.sum(), lambda a: a.sum(0), lambda a: a.amax(-1),
                  lambda a: a.argmin(0), lambda a: a.mean(), lambda a: a.softmax(0)):
            _same(f(e), f(t))


def test_requires_grad_setter_and_autograd_backward_list():
    e, t = _pair()
    e.requires_grad = True
    t.requires_grad = True
    ember.autograd.backward([(e * e).sum()])
    torch.autograd.backward([(t * t).sum()])
    _same(e.grad, t.grad)
    out = (e * 2).sum()
    out.backward(retain_graph=True)
    out.backward()  # gradients accumulate
    keep = np.array(MASK)
    np.testing.assert_allclose(_np(e.grad.get_data())[keep],
                               (2 * np.array(DATA) + 4)[keep])


@pytest.mark.parametrize("name", ["hstack", "vstack", "column_stack", "hsplit", "vsplit",
                                  "dsplit", "atleast_3d", "broadcast_to", "broadcast_tensors",
                                  "meshgrid", "F.unfold"])
def test_more_view_and_join_ops_match_torch(name):
    def run(a, lib):
        return {
            "hstack": lambda: lib.hstack([a, a]), "vstack": lambda: lib.vstack([a, a]),
            "column_stack": lambda: lib.column_stack([a, a]), "hsplit": lambda: lib.hsplit(a, 2),
            "vsplit": lambda: lib.vsplit(a, 3), "dsplit": lambda: lib.dsplit(a.unsqueeze(0), 2),
            "atleast_3d": lambda: lib.atleast_3d(a),
            "broadcast_to": lambda: lib.broadcast_to(a, (2, 3, 4)),
            "broadcast_tensors": lambda: lib.broadcast_tensors(a, a),
            "meshgrid": lambda: lib.meshgrid(a[0], a[2], indexing="ij"),
            "F.unfold": lambda: lib.nn.functional.unfold(a.reshape(1, 1, 3, 4), (2, 2)),
        }[name]()

    e, t = _pair()
    got, want = run(e, ember), run(t, torch)
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        _same(got, want)


def test_joins_and_kron_torch_lacks():
    e, _ = _pair()
    d, m = ember.tensor(DATA), ember.tensor(MASK)
    joined = ember.cat([e, ember.ones(1, 4)])  # a plain tensor joins as unmasked
    assert joined.get_mask().tolist() == MASK + [[True] * 4]
    parts = e.split([1, 3], 1)
    assert [p.get_mask().tolist() for p in parts] == [m[:, :1].tolist(), m[:, 1:].tolist()]
    k = ember.kron(e, e)
    assert k.get_data().tolist() == ember.kron(d, d).tolist()
    assert k.get_mask().tolist() == (ember.kron(m.float(), m.float()) != 0).tolist()


def test_save_and_load():
    import io

    e, _ = _pair(requires_grad=True)
    buf = io.BytesIO()
    ember.save({"mt": e, "ints": _pair([1, 2], [True, False], "int32")[0]}, buf)
    buf.seek(0)
    back = ember.load(buf)
    assert isinstance(back["mt"], MaskedTensor) and back["mt"].requires_grad
    assert back["mt"].get_data().tolist() == DATA and back["mt"].get_mask().tolist() == MASK
    assert back["ints"].dtype is ember.int32 and back["ints"].get_mask().tolist() == [True, False]


def test_setitem_writes_data_and_keeps_mask():
    """(PyTorch's prototype fails here or silently writes nothing.)"""
    e, _ = _pair()
    e[0] = 5.0
    e[:, 1] = ember.tensor([7.0, 8.0, 9.0])
    e[2] = masked_tensor(ember.full((4,), -1.0), ember.tensor(MASK[2]))
    assert e.get_data()[0].tolist() == [5.0, 7.0, 5.0, 5.0]
    assert e.get_data()[2].tolist() == [-1.0] * 4
    assert e.get_mask().tolist() == MASK
    with pytest.raises(ValueError, match="masks must match"):
        e[2] = masked_tensor(ember.ones(4), ember.ones(4, dtype=ember.bool))


def test_pointwise_extras_torch_lacks():
    e, _ = _pair()
    d = ember.tensor(DATA)
    keep = np.array(MASK)
    np.testing.assert_allclose(_np((1 - e).get_data())[keep], _np(1 - d)[keep])
    np.testing.assert_allclose(_np(ember.add(e, e, alpha=2).get_data())[keep], _np(3 * d)[keep])
    np.testing.assert_allclose(_np(ember.max(e, e * 2).get_data())[keep],
                               _np(ember.max(d, d * 2))[keep])
    z = ember.zeros_like(e)
    assert isinstance(z, MaskedTensor) and z.get_mask().tolist() == MASK
    plain = e.new_zeros(2)
    assert not isinstance(plain, MaskedTensor) and plain.dtype is ember.float32
    with pytest.raises(TypeError, match="amax"):
        e.max()
