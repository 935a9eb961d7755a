"""Findings of the s22 fuzzing round (packages/core/tests/fuzz_ops.py --torch, seeds 1431-1436,
and tools/fuzz_ops.py --torch, seeds 1433 and 1435), each fixed and pinned here with explicit
values, and against PyTorch where it is installed. All but the norms' are built from C++, so they
need the rebuilt extension: the unary ops that keep their input's dtype (neg, abs, sgn, sign,
floor, ceil, trunc, frac, round, bitwise_not, nan_to_num, conj_physical) and msort / tril / triu
take an out= tensor of that dtype only (neg of int16 300 into an int8 out= wrapped to -44);
constant_pad_nd / F.pad refuse a value their dtype cannot hold (2**31 into float16 padded with inf,
1000 into int8 with -24); cumsum_ / cumprod_ refuse a dtype= other than self's (a bfloat16 cumsum_
with dtype=int32 truncated every element and wrote zeros back); cumsum / cumprod refuse bool
results (dtype= or out=: a running "any"); amax / amin of an empty tensor over every dim raise
PyTorch's RuntimeError asking for a dim (was an IndexError about dim 1); bincount of a float or
bool tensor is PyTorch's NotImplementedError (still a TypeError), as are the dtype refusals of
lerp, multinomial, normal, complex and polar (PyTorch raises RuntimeError kinds there, which a
TypeError escaped); the vector and matrix norms
refuse a dtype= that narrows the input (float32 to float16) and an integer input even with
dtype= (C++ norm and ember.linalg); and device strings follow PyTorch's grammar ('cuda:-1' was
the current device, 'cpu:+1', 'cpu:01', 'cuda:1abc' were taken, 'cuda:128' and index 300 wrapped
in the int8 index). In Python (no rebuild): Tensor.new_tensor takes any sequence (range was
refused) on self's device, and (built from C++) tensor() of a bytearray / array.array /
memoryview gives int64 or the default float dtype as PyTorch (bytearray([200]) + 100 was 44 in
uint8)."""

from __future__ import annotations

import re

import ember
import ember.nn.functional as F
import pytest
from test_fuzz_findings_s14 import _same

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- a. out= of the unary ops that keep their input's dtype -----------------------------------

# op, input dtype, a mismatched out= dtype (the input's casts to it)
SAME_DTYPE_UNARY = [
    ("neg", "int16", "int8"), ("abs", "int32", "float64"), ("sgn", "int16", "int32"),
    ("sign", "float32", "float64"), ("floor", "int32", "int64"), ("ceil", "float32", "float64"),
    ("trunc", "int16", "int8"), ("frac", "float32", "float64"), ("round", "int16", "uint8"),
    ("bitwise_not", "int16", "int8"), ("nan_to_num", "int16", "int8"),
    ("conj_physical", "float32", "float64"),
]


@pytest.mark.parametrize("name, dt, out_dt", SAME_DTYPE_UNARY)
def test_unary_ops_refuse_an_out_of_another_dtype(name, dt, out_dt):
    x = ember.tensor([300, -2], dtype=getattr(ember, dt))
    o = ember.zeros(2, dtype=getattr(ember, out_dt))
    with pytest.raises(RuntimeError, match=f"{name}: expected the out= tensor to have dtype {dt}"):
        getattr(ember, name)(x, out=o)
    assert o.tolist() == [0, 0]  # untouched


def test_neg_into_a_narrower_out_no_longer_wraps():
    x = ember.tensor([300, -2], dtype=ember.int16)
    with pytest.raises(RuntimeError, match="got int8"):  # was written as [-44, 2]
        ember.neg(x, out=ember.zeros(2, dtype=ember.int8))
    o = ember.zeros(2, dtype=ember.int16)
    assert ember.neg(x, out=o) is o and o.tolist() == [-300, 2]


def test_unary_ops_still_write_their_own_dtype_and_in_place():
    x = ember.tensor([-1.5, 2.5, 0.25])
    o = ember.empty(0)
    assert ember.floor(x, out=o).tolist() == [-2.0, 2.0, 0.0]
    assert ember.round(x, out=o).tolist() == [-2.0, 2.0, 0.0]
    y = ember.tensor([-3, 4], dtype=ember.int8)
    assert y.abs_().tolist() == [3, 4] and y.dtype == ember.int8
    assert y.neg_().tolist() == [-3, -4]
    # a complex abs writes its real dtype
    r = ember.abs(ember.tensor([3 + 4j]), out=ember.empty(1))
    assert r.dtype == ember.float32 and r.tolist() == [5.0]
    # square and relu cast into a wider out= as before (PyTorch takes those)
    assert ember.square(ember.tensor([3, -2], dtype=ember.int32),
                        out=ember.empty(2, dtype=ember.float64)).tolist() == [9.0, 4.0]


@pytest.mark.parametrize("name", ["msort", "tril", "triu"])
def test_msort_tril_triu_take_an_out_of_the_input_dtype_only(name):
    x = ember.tensor([[3, 1], [2, 4]], dtype=ember.int8)
    with pytest.raises(RuntimeError, match="int8"):  # bfloat16 out= was written
        getattr(ember, name)(x, out=ember.zeros(2, 2, dtype=ember.bfloat16))
    o = ember.zeros(2, 2, dtype=ember.int8)
    getattr(ember, name)(x, out=o)
    want = {"msort": [[2, 1], [3, 4]], "tril": [[3, 0], [2, 4]], "triu": [[3, 1], [0, 4]]}
    assert o.tolist() == want[name]


@needs_torch
@pytest.mark.parametrize("name, dt, out_dt", SAME_DTYPE_UNARY + [
    ("square", "int32", "float64"), ("neg", "float32", "float32")])
def test_unary_out_dtypes_match_torch(name, dt, out_dt):
    _same(lambda M: getattr(M, name)(M.tensor([3, -2], dtype=getattr(M, dt)),
                                     out=M.zeros(2, dtype=getattr(M, out_dt))))


@needs_torch
@pytest.mark.parametrize("name", ["msort", "tril", "triu"])
@pytest.mark.parametrize("out_dt", ["int8", "bfloat16", "int64"])
def test_msort_tril_triu_out_dtypes_match_torch(name, out_dt):
    _same(lambda M: getattr(M, name)(M.tensor([[3, 1], [2, 4]], dtype=M.int8),
                                     out=M.zeros(2, 2, dtype=getattr(M, out_dt))))


# ---- b. a padding value must fit the input's dtype ------------------------------------------

@pytest.mark.parametrize("dt, value", [("float16", 2**31), ("float16", 1e6), ("int8", 1000),
                                       ("uint8", -256), ("int32", 2**40), ("int8", 1.5e3)])
def test_constant_pad_refuses_a_value_the_dtype_cannot_hold(dt, value):
    x = ember.tensor([1, 2], dtype=getattr(ember, dt))
    with pytest.raises(RuntimeError, match="constant_pad_nd: value .* cannot be converted to type"):
        ember.constant_pad_nd(x, [1, 0], value=value)  # float16 was inf, int8 1000 was -24
    with pytest.raises(RuntimeError, match="cannot be converted"):
        F.pad(x, (0, 2), value=float(value))


def test_constant_pad_takes_what_the_dtype_can_hold():
    x = ember.tensor([1, 2], dtype=ember.uint8)
    assert ember.constant_pad_nd(x, [1, 0], value=-1).tolist() == [255, 1, 2]  # wraps, as torch
    h = ember.constant_pad_nd(ember.tensor([1.5], dtype=ember.float16), [0, 1], value=65504)
    assert h.tolist() == [1.5, 65504.0]
    assert F.pad(ember.tensor([1, 2], dtype=ember.int8), (1, 1), value=-7.0).tolist() == [-7, 1, 2,
                                                                                          -7]
    # nothing is padded (only crops): the value is never written, so it is not checked
    assert ember.constant_pad_nd(ember.tensor([1, 2, 3], dtype=ember.int8), [-1, 0],
                                 value=1000).tolist() == [2, 3]


@needs_torch
@pytest.mark.parametrize("dt, pad, value", [("float16", [1, 0], 2**31), ("int8", [1, 0], 1000),
                                            ("uint8", [1, 0], -1), ("uint8", [0, 1], -256),
                                            ("int8", [-1, 0], 1000), ("float16", [0, 2], 65504)])
def test_constant_pad_values_match_torch(dt, pad, value):
    _same(lambda M: M.constant_pad_nd(M.tensor([1, 2, 3], dtype=getattr(M, dt)), pad, value))


# ---- c. cumsum_ / cumprod_ / cumsum dtypes ----------------------------------------------------

@pytest.mark.parametrize("name", ["cumsum_", "cumprod_"])
def test_inplace_scans_refuse_a_dtype_other_than_self(name):
    x = ember.tensor([0.5, 1.5, 2.5], dtype=ember.bfloat16)
    with pytest.raises(RuntimeError, match=f"{name}: dtype=int32 differs from the dtype of self"):
        getattr(x, name)(0, dtype=ember.int32)  # cumsum_ wrote [0, 0, 0]
    assert x.tolist() == [0.5, 1.5, 2.5]
    y = ember.tensor([0.5, 1.5, 2.5])
    want = [0.5, 2.0, 4.5] if name == "cumsum_" else [0.5, 0.75, 1.875]
    assert getattr(y, name)(0, dtype=ember.float32).tolist() == want
    z = ember.tensor([1, 2, 3], dtype=ember.int32)  # no dtype=: the int64 scan casts back
    assert getattr(z, name)(0).tolist() == ([1, 3, 6] if name == "cumsum_" else [1, 2, 6])
    assert z.dtype == ember.int32


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scans_refuse_a_bool_result(name):
    x = ember.tensor([1.0, 0.0, 2.0])
    with pytest.raises(NotImplementedError, match=f"{name}: not implemented for dtype bool"):
        getattr(ember, name)(x, 0, dtype=ember.bool)  # was a running any / all
    with pytest.raises(NotImplementedError, match="bool"):
        getattr(ember, name)(x, 0, out=ember.zeros(3, dtype=ember.bool))
    b = getattr(ember, name)(ember.tensor([True, False, True]), 0)  # bool input: int64 scan
    assert b.dtype == ember.int64 and b.tolist() == ([1, 1, 2] if name == "cumsum" else [1, 0, 0])
    assert ember.sum(x, dtype=ember.bool).item() is True  # sum / prod to bool stay (torch too)


@needs_torch
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scan_dtypes_match_torch(name):
    _same(lambda M: getattr(M, name)(M.tensor([1.0, 0.0, 2.0]), 0, dtype=M.bool))
    _same(lambda M: getattr(M, name)(M.tensor([1.0, 0.0, 2.0]), 0,
                                     out=M.zeros(3, dtype=M.bool)))
    _same(lambda M: getattr(M.tensor([0.5, 1.5]), name + "_")(0, dtype=M.float32))
    _same(lambda M: getattr(M, name)(M.tensor([True, False, True]), 0))
    with pytest.raises(RuntimeError):
        getattr(torch.tensor([0.5, 1.5], dtype=torch.bfloat16), name + "_")(0, dtype=torch.int32)


# ---- d. amax / amin of an empty tensor, bincount's exception class -----------------------------

@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_of_an_empty_tensor_over_every_dim_asks_for_a_dim(name):
    x = ember.zeros(3, 0)
    for dim in (None, []):
        with pytest.raises(RuntimeError, match=rf"{name}\(\): Expected reduction dim to be "
                                               "specified for input.numel\\(\\) == 0") as e:
            getattr(ember, name)(x, dim)
        assert not isinstance(e.value, IndexError)  # was IndexError about dim 1
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        getattr(ember, name)(x, 1)  # an explicit empty dim stays an IndexError (as torch)
    assert getattr(ember, name)(x, 0).shape == (0,)
    assert getattr(ember, name)(ember.tensor([[1.0, 5.0]]), None).item() == (
        5.0 if name == "amax" else 1.0)


def test_bincount_of_a_float_or_bool_tensor_is_not_implemented():
    for x in (ember.tensor([1.0, 2.0]), ember.tensor([True, False])):
        with pytest.raises(NotImplementedError, match="bincount\\(\\): expected an integer"):
            ember.bincount(x)
        with pytest.raises(TypeError):  # still a TypeError, as before
            x.bincount()
    assert ember.bincount(ember.tensor([1, 1, 3])).tolist() == [0, 2, 0, 1]


@needs_torch
def test_empty_reductions_and_bincount_match_torch():
    for name in ("amax", "amin"):
        _same(lambda M: getattr(M, name)(M.zeros(3, 0)))
        _same(lambda M: getattr(M, name)(M.zeros(3, 0), []))
        _same(lambda M: getattr(M, name)(M.zeros(3, 0), 1))
        _same(lambda M: getattr(M, name)(M.zeros(3, 0), 0))
    _same(lambda M: M.bincount(M.tensor([1.0, 2.0])))
    _same(lambda M: M.bincount(M.tensor([True, False])))


DTYPE_REFUSALS = {
    "lerp": lambda M: M.lerp(M.tensor([1, 2]), M.tensor([3, 4]), 0.5),
    "multinomial": lambda M: M.multinomial(M.tensor([1, 2]), 1),
    "normal": lambda M: M.normal(M.tensor([1, 2]), M.tensor([1, 2])),
    "complex": lambda M: M.complex(M.tensor([1, 2]), M.tensor([1, 2])),
    "polar": lambda M: M.polar(M.tensor([1.0]).double(), M.tensor([1.0])),
}


@pytest.mark.parametrize("name", sorted(DTYPE_REFUSALS))
def test_dtype_refusals_are_runtime_errors_too(name):
    with pytest.raises(NotImplementedError, match=name) as e:  # a RuntimeError (was TypeError)
        DTYPE_REFUSALS[name](ember)
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, TypeError)


@needs_torch
@pytest.mark.parametrize("name", sorted(DTYPE_REFUSALS))
def test_dtype_refusal_classes_match_torch(name):
    with pytest.raises(RuntimeError):
        DTYPE_REFUSALS[name](torch)
    with pytest.raises(RuntimeError):
        DTYPE_REFUSALS[name](ember)


# ---- e. the norms' dtype= ---------------------------------------------------------------------

NORMS = {
    "vector_norm": lambda M, x, dt: M.linalg.vector_norm(x, dtype=dt),
    "linalg.norm": lambda M, x, dt: M.linalg.norm(x, dtype=dt),
    "norm": lambda M, x, dt: M.norm(x, dtype=dt),
    "norm_fro": lambda M, x, dt: M.norm(x, p="fro", dtype=dt),
    "Tensor.norm": lambda M, x, dt: x.norm(1, dtype=dt),
    "matrix_norm": lambda M, x, dt: M.linalg.matrix_norm(x.reshape(1, -1), dtype=dt),
}


@pytest.mark.parametrize("name", sorted(NORMS))
def test_norms_refuse_a_narrowing_dtype(name):
    fn = NORMS[name]
    x = ember.tensor([3.0, 4.0])
    with pytest.raises(RuntimeError, match=r"the dtype of the input \(Float\) should be convertible "
                                           r"without narrowing to the specified dtype \(Half\)"):
        fn(ember, x, ember.float16)  # was 5.0 in float16
    with pytest.raises(RuntimeError, match=r"\(Half\) .* \(BFloat16\)"):
        fn(ember, x.half(), ember.bfloat16)
    r = fn(ember, x, ember.float64)
    assert r.dtype == ember.float64 and r.item() == (7.0 if name == "Tensor.norm" else 5.0)
    r = fn(ember, x.half(), ember.float32)
    assert r.dtype == ember.float32 and r.item() == (7.0 if name == "Tensor.norm" else 5.0)


@pytest.mark.parametrize("name", ["vector_norm", "norm", "Tensor.norm", "matrix_norm"])
def test_norms_refuse_an_integer_input_even_with_a_dtype(name):
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. "
                                           "Got Long"):
        NORMS[name](ember, ember.tensor([3, 4]), ember.float32)  # was 5.0


@pytest.mark.parametrize("ord", ["fro", 1, float("inf"), -1, 2, "nuc"])
def test_matrix_norm_refuses_an_integer_input(ord):
    a = ember.tensor([[3, -4], [1, 2]])
    with pytest.raises(RuntimeError, match="linalg.matrix_norm: Expected a floating point"):
        ember.linalg.matrix_norm(a, ord=ord)  # ord=1 was the int64 6, 'fro' named vector_norm
    if ord in ("fro", 1, float("inf"), -1):
        want = {"fro": 30 ** 0.5, 1: 6.0, float("inf"): 7.0, -1: 4.0}[ord]
        assert ember.linalg.matrix_norm(a.double(), ord=ord).item() == pytest.approx(want)


@needs_torch
@pytest.mark.parametrize("ord", ["fro", 1, float("inf"), -1])
def test_matrix_norm_of_integers_matches_torch(ord):
    _same(lambda M: M.linalg.matrix_norm(M.tensor([[3, -4], [1, 2]]), ord=ord))
    _same(lambda M: M.linalg.matrix_norm(M.tensor([[3, -4], [1, 2]]).double(), ord=ord))


@needs_torch
@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("in_dt, dt", [("float32", "float16"), ("float16", "bfloat16"),
                                       ("float32", "float64"), ("float16", "float32"),
                                       ("float64", "float32"), ("int64", "float32")])
def test_norm_dtypes_match_torch(name, in_dt, dt):
    _same(lambda M: NORMS[name](M, M.tensor([3, 4]).to(getattr(M, in_dt)), getattr(M, dt)))


# ---- f. device strings ------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["cpu:-1", "cuda:-1", "cpu:+1", "cpu:01", "cuda:1abc", "cpu: 1",
                                  "cuda:", "cuda:0x1"])
def test_device_strings_follow_torchs_grammar(spec):
    with pytest.raises(RuntimeError, match=re.escape(f"Invalid device string: '{spec}'")):
        ember.device(spec)  # 'cuda:-1' was the current cuda device, 'cpu:+1' cpu:1
    with pytest.raises(RuntimeError, match="Invalid device string"):
        ember.zeros(2, device=spec)


def test_device_indices_past_int8_are_refused():
    with pytest.raises(RuntimeError, match="Device index must not be negative"):
        ember.device("cpu", -1)
    for bad in (lambda: ember.device("cuda:128"), lambda: ember.device("cuda", 300),
                lambda: ember.device("cuda:999")):
        with pytest.raises(RuntimeError, match="out of range"):  # wrapped to no index / 44
            bad()
    assert repr(ember.device("cuda:0")) == "device(type='cuda', index=0)"
    assert ember.device("cuda:127").index == 127 and ember.device("cuda", 7).index == 7
    assert ember.device("cpu:1").index == 1 and ember.device("meta").index is None
    assert ember.zeros(2, device="cpu:0").tolist() == [0.0, 0.0]


@needs_torch
@pytest.mark.parametrize("spec", ["cpu:-1", "cuda:-1", "cpu:+1", "cpu:01", "cuda:1abc", "cpu: 1",
                                  "cuda:0", "cpu:1", "cuda:127"])
def test_device_strings_match_torch(spec):
    try:
        want = torch.device(spec)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            ember.device(spec)
    else:
        got = ember.device(spec)
        assert (got.type, got.index) == (want.type, want.index)


# ---- g. new_tensor and buffers that are not NumPy arrays ----------------------------------------

def test_new_tensor_takes_any_sequence_and_self_s_device():
    x = ember.zeros(2, dtype=ember.float64)
    r = x.new_tensor(range(3))  # was "could not infer dtype of range"
    assert r.dtype == ember.float64 and r.tolist() == [0.0, 1.0, 2.0]
    assert x.new_tensor([[1, 2]], dtype=ember.int8).tolist() == [[1, 2]]
    m = ember.zeros(2, device="meta").new_tensor([1.0, 2.0])  # self's device (was cpu)
    assert m.device.type == "meta" and m.shape == (2,)
    g = x.new_tensor([1.5], requires_grad=True)
    assert g.requires_grad and g.is_leaf


def test_a_bytearray_or_array_is_a_sequence_of_python_numbers():
    import array

    r = ember.tensor(bytearray([200, 1]))
    assert r.dtype == ember.int64 and (r + 100).tolist() == [300, 101]  # uint8 wrapped to 44
    assert ember.tensor(memoryview(b"ab")).tolist() == [97, 98]
    assert ember.tensor(memoryview(b"ab")).dtype == ember.int64
    assert ember.tensor(array.array("b", [1, -2])).dtype == ember.int64
    d = ember.tensor(array.array("d", [1.5, 2.0]))
    assert d.dtype == ember.float32 and d.tolist() == [1.5, 2.0]  # the default dtype
    assert ember.tensor(bytearray([1]), dtype=ember.uint8).dtype == ember.uint8
    np = pytest.importorskip("numpy")
    assert ember.tensor(np.array([1, 2], dtype=np.uint8)).dtype == ember.uint8  # NumPy keeps its
    assert ember.tensor(np.float64(1.5)).dtype == ember.float64
    assert ember.tensor(np.array([1.5], dtype=np.float16)).dtype == ember.float16


@needs_torch
def test_new_tensor_and_buffers_match_torch():
    import array

    _same(lambda M: M.zeros(2, dtype=M.float64).new_tensor(range(3)))
    _same(lambda M: M.zeros(2, dtype=M.int8).new_tensor([1, 2]))
    _same(lambda M: M.tensor(bytearray([200, 1])) + 100)
    _same(lambda M: M.tensor(memoryview(b"ab")))
    _same(lambda M: M.tensor(array.array("b", [1, -2])))
    _same(lambda M: M.tensor(array.array("d", [1.5, 2.0])))
    _same(lambda M: M.tensor(array.array("f", [1.5, 2.0]), dtype=M.float64))
