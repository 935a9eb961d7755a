"""Findings of the s23 fuzzing round (tools/fuzz_ops.py --torch, seeds 1440-1454, the surface
with seed 1450, and targeted --ops runs), each fixed and pinned here with explicit values, and
against PyTorch where it is installed. In Python (no rebuild): F.gelu / softplus / logsigmoid /
hardshrink / softshrink take out= as PyTorch's do (a TypeError before), of the input's exact
dtype and only when nothing requires grad. Built from C++: tensor() / as_tensor() take a Python
int past int64's range in a float or complex list or with a floating / uint64 dtype= ([1.5, 2**70]
was a ValueError, as was 2**63 into uint64); all / any refuse an out= that is neither bool nor
uint8 (a float32 out= took the result); a convolution without filters (weight of shape
(0, C, k)) or a transposed one without output channels is refused instead of returning an empty
tensor, and so is a negative output_padding (convolution's raw op ignored it); ormqr refuses a
tau shorter than min(other's reflected side, input.shape[-1]) (an empty tau was Q = I, a short
one applied only its first reflectors); embedding / embedding_dense_backward take int64 or int32
indices only (int8 / uint8 / int16 were looked up); and inner / tensordot of two dtypes name
themselves (mm's "m1 and m2 ... float != signed char" was reported)."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import pytest
from test_fuzz_findings_s14 import _same

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- a. out= of the activations PyTorch's functional takes it for -----------------------------

X = [[-1.0, 0.25, 2.0]]
ACT_OUT = {  # name -> expected values of X (float64)
    "gelu": [-0.15865525393145702, 0.14967658142073093, 1.9544997361036416],
    "softplus": [0.31326168751822286, 0.8259394198788436, 2.1269280110429727],
    "logsigmoid": [-1.3132616875182228, -0.5759394198788436, -0.1269280110429725],
    "hardshrink": [-1.0, 0.0, 2.0],
    "softshrink": [-0.5, 0.0, 1.5],
}


@pytest.mark.parametrize("name", sorted(ACT_OUT))
def test_activation_writes_into_out(name):
    x = ember.tensor(X, dtype=ember.float64)
    o = ember.zeros(1, 3, dtype=ember.float64)
    r = getattr(F, name)(x, out=o)  # was: unexpected keyword argument 'out'
    assert r is o
    assert o.tolist()[0] == pytest.approx(ACT_OUT[name], rel=1e-12, abs=1e-15)
    # an empty out= is resized; out= may be the input itself
    e = ember.empty(0, dtype=ember.float64)
    assert getattr(F, name)(x, out=e).shape == (1, 3)
    y = x.clone()
    getattr(F, name)(y, out=y)
    assert y.tolist()[0] == pytest.approx(ACT_OUT[name], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", sorted(ACT_OUT))
@pytest.mark.parametrize("out_dt", ["float64", "float16", "int64"])
def test_activation_out_must_have_the_input_dtype(name, out_dt):
    o = ember.zeros(1, 3, dtype=getattr(ember, out_dt))
    with pytest.raises(RuntimeError, match=f"{name}: expected the out= tensor to have dtype "
                                           f"float32, but got {out_dt}"):
        getattr(F, name)(ember.tensor(X), out=o)
    assert o.tolist() == [[0, 0, 0]]


@pytest.mark.parametrize("name", sorted(ACT_OUT))
def test_activation_out_is_not_differentiable(name):
    x = ember.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        getattr(F, name)(x, out=ember.zeros(1, 3))
    with ember.no_grad():
        assert getattr(F, name)(x, out=ember.zeros(1, 3)).shape == (1, 3)
    with pytest.raises(TypeError, match="argument 'out' must be Tensor, not list"):
        getattr(F, name)(ember.tensor(X), out=[0.0])


@needs_torch
@pytest.mark.parametrize("name", sorted(ACT_OUT))
@pytest.mark.parametrize("out_dt", ["float32", "float64", "int64"])
def test_activation_out_matches_torch(name, out_dt):
    _same(lambda M: getattr(M.nn.functional, name)(
        M.tensor(X), out=M.zeros(1, 3, dtype=getattr(M, out_dt))))


# ---- b. tensor() of a Python int past int64 --------------------------------------------------

def test_tensor_of_a_big_int_in_a_float_list():
    t = ember.tensor([1.5, 2**70])  # was: value cannot be converted to an integer type
    assert t.dtype == ember.float32 and t.tolist() == [1.5, 1.1805916207174113e21]
    t = ember.as_tensor([[2**70], [-1.5]])
    assert t.dtype == ember.float32 and t.tolist() == [[1.1805916207174113e21], [-1.5]]
    assert ember.tensor([2**70], dtype=ember.float64).tolist() == [1.1805916207174113e21]
    assert ember.tensor(2**64, dtype=ember.float64).item() == 18446744073709551616.0
    c = ember.tensor([1, 2**70 + 1j])
    assert c.dtype == ember.complex64 and c.tolist() == [1 + 0j, 1.1805916207174113e21 + 1j]
    assert ember.tensor([1.5, -2**70], dtype=ember.float16).tolist() == [1.5, float("-inf")]
    u = ember.tensor([2**63, 2**64 - 1, 3], dtype=ember.uint64)
    assert u.tolist() == [2**63, 2**64 - 1, 3]


def test_tensor_of_a_big_int_still_refused_where_it_cannot_fit():
    for data, kw in [([2**70], {}), ([True, 2**70], {}), ([2**63], {}),
                     ([-1, 2**63], {"dtype": ember.int64}),
                     ([2**63], {"dtype": ember.int32})]:
        with pytest.raises(ValueError, match="cannot be converted to an integer type"):
            ember.tensor(data, **kw)
    with pytest.raises(OverflowError, match="too large to convert to float"):
        ember.tensor([1.5, 10**400])
    with pytest.raises(OverflowError, match="too big to convert"):  # as torch
        ember.tensor([2**64], dtype=ember.uint64)


@needs_torch
@pytest.mark.parametrize("src", ["[1.5, 2**70]", "[2**70, 1.5]", "[[1.5], [2**64 - 1]]",
                                 "[2**70, 1.5 + 1j]", "[True, 2**70]", "[2**70]",
                                 "[1.5, 10**400]"])
def test_tensor_of_a_big_int_matches_torch(src):
    _same(lambda M: M.tensor(eval(src)))  # noqa: S307 (a literal of the table above)


@needs_torch
@pytest.mark.parametrize("dt", ["float64", "float16", "complex128", "uint64"])
def test_tensor_of_a_big_int_with_dtype_matches_torch(dt):
    _same(lambda M: M.tensor([2**63, 3], dtype=getattr(M, dt)))


# ---- c. all / any: out= is bool or uint8 -----------------------------------------------------

@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("out_dt", ["float32", "int64", "int8"])
def test_all_any_refuse_a_non_boolean_out(name, out_dt):
    x = ember.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    o = ember.zeros(2, dtype=getattr(ember, out_dt))
    with pytest.raises(RuntimeError, match=rf"{name} only supports a bool \(or uint8\) out= "
                                           rf"tensor, but got {out_dt}"):
        getattr(ember, name)(x, 1, out=o)  # float32 out= was [0., 1.] / [1., 1.]
    assert o.tolist() == [0, 0]


def test_all_any_take_a_bool_or_uint8_out():
    x = ember.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    o = ember.zeros(2, dtype=ember.uint8)
    assert ember.all(x, 1, out=o).tolist() == [0, 1] and o.dtype == ember.uint8
    b = ember.zeros(2, dtype=ember.bool)
    assert ember.any(x, 1, out=b).tolist() == [True, True]
    xu = ember.tensor([0, 7], dtype=ember.uint8)
    assert ember.any(xu, out=ember.zeros((), dtype=ember.bool)).item() is True
    assert ember.all(xu, out=ember.zeros((), dtype=ember.uint8)).item() == 0


@needs_torch
@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dt, out_dt", [("float32", "float32"), ("float32", "uint8"),
                                        ("uint8", "bool"), ("int64", "int64"),
                                        ("bool", "bool"), ("uint8", "float64")])
def test_all_any_out_dtypes_match_torch(name, dt, out_dt):
    _same(lambda M: getattr(M, name)(M.tensor([[0, 1, 2], [3, 4, 5]], dtype=getattr(M, dt)), 1,
                                     out=M.zeros(2, dtype=getattr(M, out_dt))))


# ---- d. a convolution without filters ------------------------------------------------------

@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_refuses_a_weight_without_filters(nd):
    x = ember.ones((2, 3) + (5,) * nd)
    w = ember.ones((0, 3) + (3,) * nd)
    conv = getattr(F, f"conv{nd}d")
    with pytest.raises(RuntimeError, match="expected weight to be at least 1 at dimension 0"):
        conv(x, w)  # was an empty (2, 0, 3...) result
    with pytest.raises(RuntimeError, match="expected weight to be at least 2 at dimension 0"):
        conv(ember.ones((2, 2) + (5,) * nd), ember.ones((0, 1) + (3,) * nd), groups=2)
    with pytest.raises(RuntimeError, match="expected a weight with at least one output channel"):
        getattr(F, f"conv_transpose{nd}d")(x, ember.ones((3, 0) + (3,) * nd))
    # a filter per output channel still convolves: 3 channels x 3**nd taps of ones
    assert conv(x, ember.ones((1, 3) + (3,) * nd)).flatten()[0].item() == 3.0 * 3**nd


@needs_torch
@pytest.mark.parametrize("w_shape, groups", [((0, 3, 3, 3), 1), ((1, 2, 3, 3), 2),
                                             ((4, 3, 3, 3), 1)])
def test_conv_without_filters_matches_torch(w_shape, groups):
    c = 3 if groups == 1 else 4
    _same(lambda M: M.nn.functional.conv2d(M.ones(2, c, 5, 5, dtype=M.float64),
                                           M.ones(*w_shape, dtype=M.float64), groups=groups))


# ---- e. ormqr: tau has one reflector per column of Q's product --------------------------------

def _qr_parts():
    a = ember.tensor([[2.0, 1.0, 0.5], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0], [1.0, 0.0, 1.0]],
                     dtype=ember.float64)
    return ember.geqrf(a)


@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("left", [True, False])
def test_ormqr_refuses_a_short_tau(k, left):
    a, tau = _qr_parts()
    c = ember.eye(4, 2, dtype=ember.float64) if left else ember.eye(2, 4, dtype=ember.float64)
    side = -2 if left else -1
    with pytest.raises(RuntimeError, match=rf"tau.shape\[-1\] must be equal to "
                                           rf"min\(other.shape\[{side}\], input.shape\[-1\]\)"):
        ember.ormqr(a, tau[:k], c, left=left)  # an empty tau was Q = I


def test_ormqr_with_the_full_tau_still_applies_q():
    a, tau = _qr_parts()
    q = ember.linalg.householder_product(a, tau)
    got = ember.ormqr(a, tau, ember.eye(4, 2, dtype=ember.float64))
    for g, w in zip(got.flatten().tolist(), q[:, :2].flatten().tolist()):
        assert g == pytest.approx(w, abs=1e-12)
    # the first column of Q is a / ||a|| up to sign: (2, 1, 0, 1) / sqrt(6)
    assert [abs(v) for v in got[:, 0].tolist()] == pytest.approx(
        [2 / 6**0.5, 1 / 6**0.5, 0.0, 1 / 6**0.5], abs=1e-12)


@needs_torch
@pytest.mark.parametrize("k", [0, 2, 3])
def test_ormqr_tau_length_matches_torch(k):
    a, tau = _qr_parts()
    an, tn = a.tolist(), tau[:k].tolist()
    _same(lambda M: M.ormqr(M.tensor(an, dtype=M.float64), M.tensor(tn, dtype=M.float64),
                            M.eye(4, 2, dtype=M.float64)))


def test_convolution_refuses_a_negative_output_padding():
    x, w = ember.ones(1, 1, 4, 4), ember.ones(1, 1, 3, 3)
    for transposed in (False, True):
        with pytest.raises(RuntimeError, match="negative output_padding is not supported"):
            ember.convolution(x, w, None, [1, 1], [0, 0], [1, 1], transposed, [-1, -1], 1)
    # a plain convolution still ignores a non-negative one: 9 taps of ones
    r = ember.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert r.shape == (1, 1, 2, 2) and r.flatten().tolist() == [9.0] * 4


@needs_torch
@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_output_padding_matches_torch(transposed):
    _same(lambda M: M.convolution(M.ones(1, 1, 4, 4), M.ones(1, 1, 3, 3), None, [1, 1], [0, 0],
                                  [1, 1], transposed, [-1, -1], 1))


# ---- f. embedding's indices are int64 or int32 -----------------------------------------------

@pytest.mark.parametrize("dt", ["int8", "uint8", "int16"])
def test_embedding_refuses_narrow_integer_indices(dt):
    w = ember.arange(10.0).reshape(5, 2)
    idx = ember.tensor([1, 0], dtype=getattr(ember, dt))
    with pytest.raises(RuntimeError, match=f"embedding: expected integer indices of dtype int64 "
                                           f"or int32, got {dt}"):
        ember.embedding(w, idx)  # was [[2., 3.], [0., 1.]]
    with pytest.raises(RuntimeError, match="embedding_backward: expected integer indices"):
        ember.embedding_dense_backward(ember.ones(2, 2), idx, 5, -1, False)
    assert ember.embedding(w, idx.to(ember.int32)).tolist() == [[2.0, 3.0], [0.0, 1.0]]
    g = ember.embedding_dense_backward(ember.ones(2, 2), idx.to(ember.int64), 5, -1, False)
    assert g.tolist() == [[1.0, 1.0], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    with pytest.raises(TypeError, match="embedding: expected integer indices"):
        ember.embedding(w, ember.zeros(2))  # a float tensor stays a TypeError


@needs_torch
@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "int64"])
def test_embedding_index_dtypes_match_torch(dt):
    _same(lambda M: M.embedding(M.arange(10.0).reshape(5, 2),
                                M.tensor([1, 0], dtype=getattr(M, dt))))


# ---- g. inner / tensordot name themselves when the dtypes differ ------------------------------

@pytest.mark.parametrize("other_dt", ["int8", "float64", "bfloat16"])
def test_inner_and_tensordot_name_the_dtype_mismatch(other_dt):
    a = ember.ones(2, 3)
    b = ember.ones(3, dtype=getattr(ember, other_dt))
    with pytest.raises(RuntimeError, match=f"inner: expected both inputs to have the same dtype, "
                                           f"but got float32 and {other_dt}"):
        ember.inner(a, b)  # was mm's "m1 and m2 ... float != signed char"
    with pytest.raises(RuntimeError, match=f"tensordot: expected both inputs to have the same "
                                           f"dtype, but got float32 and {other_dt}"):
        ember.tensordot(a, b.reshape(3, 1), 1)
    # a 0-d operand is a product, which promotes (as torch's)
    assert ember.inner(ember.tensor(2.0), ember.tensor([1, 2], dtype=ember.int8)).tolist() == [
        2.0, 4.0]
    assert ember.inner(a, ember.ones(3)).tolist() == [3.0, 3.0]


@needs_torch
@pytest.mark.parametrize("other_dt", ["int8", "float64", "float32"])
def test_inner_and_tensordot_dtypes_match_torch(other_dt):
    _same(lambda M: M.inner(M.ones(2, 3), M.ones(3, dtype=getattr(M, other_dt))))
    _same(lambda M: M.tensordot(M.ones(2, 3), M.ones(3, 2, dtype=getattr(M, other_dt)), 1))
