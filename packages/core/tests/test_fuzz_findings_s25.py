"""Findings of the s25 fuzzing round (tools/fuzz_ops.py with seeds 1476-1495, --torch on seed
1476, fuzz_api.py --torch over the pooling / conv / padding functions, and hand-written
differential probes of the indexing, reduction, linalg, fft, special, nn.functional, sorting,
dtype-promotion and out= families), each fixed and pinned here with explicit values, and against
PyTorch where it is installed.

Exception classes now PyTorch's: nn argument checks (kernel_size / stride / dilation / padding of
the pools, im2col / col2im and the convolutions, groups, output_padding, padding='same' with a
stride, an unknown padding string, divisor_override=0, a group_norm group count that does not
divide the channels, an interpolate output size below 1 or a non-finite scale_factor, a
non-constant pad's value= argument, empty_strided's size / stride mismatch) raised ValueError
where torch raises RuntimeError; a non-constant pad of an input with too few dims was a
RuntimeError (torch: NotImplementedError, as for too many); an out-of-range index of gather /
scatter / scatter_add / scatter_reduce / take_along_dim / index_add was an IndexError (torch:
RuntimeError; take / index_select / index_copy / index_fill / put keep IndexError);
index_select of a 0-d tensor with several indices and index_fill with a 2-D index were
IndexErrors (torch: RuntimeError); put's source / index count mismatch a RuntimeError (torch:
IndexError); xlogy / xlog1py / copysign of a complex number leaked float()'s TypeError (torch:
NotImplementedError).

Values: linalg.cond of a singular matrix in the norms 1, -1, inf, -inf, 'fro', 'nuc' raised
(inv's LinAlgError) where torch returns inf; scatter_reduce took neither 'max' nor 'min' (torch's
aliases of amax / amin); zeros / ones / full / empty had no out= (a TypeError), and every
factory computed an explicit dtype= other than out='s and cast it (torch refuses); eq / ne / lt
/ le / gt / ge refused a floating out= and signbit a bool one when an input required grad (their
bool result has no gradient to lose: torch takes them).

Indexing an expanded (self-overlapping) tensor that requires grad indexed a copy of all of it:
list(x) of 40000 elements took a minute (quadratic time and memory), and x[i] was no view (an
in-place write did not reach the shared memory, one through an overlapping x[i] was not refused).
"""

from __future__ import annotations

import math
import time

import ember
import ember.nn.functional as F
import pytest
from test_fuzz_findings_s14 import _same

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- a. linalg.cond of a singular matrix ----------------------------------------------------

SINGULAR = [[1.0, 2.0], [2.0, 4.0]]


@pytest.mark.parametrize("p", [1, -1, math.inf, -math.inf, "fro"])
def test_cond_of_a_singular_matrix_is_inf(p):
    # was: LinAlgError from inv()
    r = ember.linalg.cond(ember.tensor(SINGULAR), p)
    assert r.dtype == ember.float32 and r.shape == () and r.item() == math.inf
    r = ember.linalg.cond(ember.zeros(2, 2, dtype=ember.float64), p)
    assert r.item() == math.inf


def test_cond_batch_mixes_finite_and_inf():
    A = ember.stack([ember.tensor([[2.0, 0.0], [0.0, 0.5]]), ember.tensor(SINGULAR)])
    assert ember.linalg.cond(A, 1).tolist() == [4.0, math.inf]
    assert ember.linalg.cond(A, "fro").tolist() == pytest.approx([4.25, math.inf])
    # an invertible one is unchanged: norm(A, 1) * norm(inv(A), 1) = 7 * 3
    B = ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ember.float64)
    assert ember.linalg.cond(B, 1).item() == pytest.approx(21.0, rel=1e-12)


def test_cond_of_a_singular_matrix_keeps_its_gradient_path():
    A = ember.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=ember.float64, requires_grad=True)
    ember.linalg.cond(A, "fro").backward()
    assert A.grad is not None and all(math.isfinite(v) for v in A.grad.flatten().tolist())


def test_cond_nuc_from_the_singular_values():
    # as torch: sum(S) * sum(1 / S), NaN for a zero matrix (was: inv()'s LinAlgError)
    assert math.isnan(ember.linalg.cond(ember.zeros(2, 2), "nuc").item())
    B = ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ember.float64)
    assert ember.linalg.cond(B, "nuc").item() == pytest.approx(17.0, rel=1e-12)
    assert ember.linalg.cond(ember.tensor(SINGULAR), "nuc").item() > 1e6


@needs_torch
@pytest.mark.parametrize("p", [1, -1, math.inf, -math.inf, "fro"])
def test_cond_of_a_singular_matrix_matches_torch(p):
    _same(lambda M: M.linalg.cond(M.stack([M.eye(2), M.tensor(SINGULAR)]), p))
    _same(lambda M: M.linalg.cond(M.zeros(2, 2, dtype=M.float64), p))


@needs_torch
def test_cond_nuc_matches_torch():
    _same(lambda M: M.linalg.cond(M.zeros(2, 2), "nuc"))
    _same(lambda M: M.linalg.cond(M.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=M.float64), "nuc"),
          rtol=1e-12)
    _same(lambda M: M.linalg.cond(M.tensor([[1 + 1j, 2.0], [3.0, 4.0]], dtype=M.complex128),
                                  "nuc"), rtol=1e-12)


# ---- b. nn argument checks: RuntimeError, as torch ---------------------------------------------

def _x4(M):
    return M.ones(1, 1, 4, 4)


NN_RUNTIME = {
    "max_pool2d_kernel0": lambda M: M.nn.functional.max_pool2d(_x4(M), 0),
    "max_pool2d_pad": lambda M: M.nn.functional.max_pool2d(_x4(M), 2, padding=2),
    "max_pool1d_dilation0": lambda M: M.nn.functional.max_pool1d(M.ones(1, 1, 4), 2, dilation=0),
    "avg_pool1d_stride": lambda M: M.nn.functional.avg_pool1d(M.ones(1, 1, 4), 2, stride=-1),
    "avg_pool2d_divisor0": lambda M: M.nn.functional.avg_pool2d(_x4(M), 2, divisor_override=0),
    "avg_pool3d_divisor0": lambda M: M.nn.functional.avg_pool3d(M.ones(1, 1, 2, 2, 2), 2,
                                                                divisor_override=0),
    "lp_pool2d_stride0": lambda M: M.nn.functional.lp_pool2d(_x4(M), 2, 0),
    "frac_pool_too_large": lambda M: M.nn.functional.fractional_max_pool2d(_x4(M), 2,
                                                                           output_size=4),
    "unfold_kernel0": lambda M: M.nn.functional.unfold(_x4(M), 0),
    "unfold_stride0": lambda M: M.nn.functional.unfold(_x4(M), 2, stride=0),
    "unfold_padding": lambda M: M.nn.functional.unfold(_x4(M), 2, padding=-1),
    "fold_kernel0": lambda M: M.nn.functional.fold(M.ones(1, 4, 4), (3, 3), 0),
    "conv1d_groups0": lambda M: M.nn.functional.conv1d(M.ones(1, 2, 8), M.ones(4, 1, 3),
                                                       groups=0),
    "conv1d_stride0": lambda M: M.nn.functional.conv1d(M.ones(1, 2, 8), M.ones(4, 2, 3),
                                                       stride=0),
    "conv1d_padding": lambda M: M.nn.functional.conv1d(M.ones(1, 2, 8), M.ones(4, 2, 3),
                                                       padding=-1),
    "conv1d_dilation0": lambda M: M.nn.functional.conv1d(M.ones(1, 2, 8), M.ones(4, 2, 3),
                                                         dilation=0),
    "conv1d_same_strided": lambda M: M.nn.functional.conv1d(M.ones(1, 1, 8), M.ones(1, 1, 4),
                                                            padding="same", stride=2),
    "conv2d_bad_padding": lambda M: M.nn.functional.conv2d(_x4(M), M.ones(1, 1, 2, 2),
                                                           padding="foo"),
    "conv_transpose1d_output_padding": lambda M: M.nn.functional.conv_transpose1d(
        M.ones(1, 2, 8), M.ones(2, 2, 3), stride=2, padding=1, output_padding=2),
    "conv_transpose2d_stride0": lambda M: M.nn.functional.conv_transpose2d(
        _x4(M), M.ones(1, 1, 2, 2), stride=0),
    "conv_transpose2d_groups0": lambda M: M.nn.functional.conv_transpose2d(
        _x4(M), M.ones(1, 1, 2, 2), groups=0),
    "interpolate_size0": lambda M: M.nn.functional.interpolate(M.ones(1, 2, 4), size=0),
    "interpolate_small_scale": lambda M: M.nn.functional.interpolate(M.ones(1, 2, 4),
                                                                     scale_factor=0.1),
    "interpolate_inf_scale": lambda M: M.nn.functional.interpolate(M.ones(1, 2, 4),
                                                                   scale_factor=math.inf),
    "pad_reflect_value": lambda M: M.nn.functional.pad(M.ones(1, 2, 6), (1, 1), mode="reflect",
                                                       value=1.0),
    "empty_strided_lengths": lambda M: M.empty_strided((2, 3), (1,)),
    "local_response_norm_size0": lambda M: M.nn.functional.local_response_norm(
        M.ones(1, 4, 2, 2), 0),
}


@pytest.mark.parametrize("name", sorted(NN_RUNTIME))
def test_nn_argument_checks_raise_runtime_error(name):
    with pytest.raises(RuntimeError) as info:  # was: ValueError (no subclass of RuntimeError)
        NN_RUNTIME[name](ember)
    assert not isinstance(info.value, ValueError)


@needs_torch
@pytest.mark.parametrize("name", sorted(NN_RUNTIME))
def test_nn_argument_checks_match_torch(name):
    _same(NN_RUNTIME[name])


def test_group_norm_groups_not_dividing_channels():
    with pytest.raises(RuntimeError, match="divisible by num_groups") as info:
        ember.group_norm(ember.ones(2, 6, 3), 4)
    assert not isinstance(info.value, ValueError)


def test_nn_modules_keep_torch_value_error():
    # torch's modules check these in __init__ with ValueError: unchanged
    with pytest.raises(ValueError, match="padding='same'"):
        ember.nn.Conv2d(1, 1, 2, stride=2, padding="same")


@pytest.mark.parametrize("shape,mode", [((12,), "reflect"), ((12,), "replicate"),
                                        ((12,), "circular"), ((2, 6), "reflect")])
def test_pad_with_too_few_dims_is_not_implemented(shape, mode):
    pad = (1, 1) if len(shape) == 1 else (1, 1, 1, 1)
    with pytest.raises(NotImplementedError, match="pad"):  # was: RuntimeError
        F.pad(ember.ones(*shape), pad, mode=mode)
    # the supported ranks still pad
    assert F.pad(ember.arange(6.0).reshape(1, 6), (2, 1), mode="reflect").tolist() == [
        [2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 4.0]]


@needs_torch
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_with_too_few_dims_matches_torch(mode):
    _same(lambda M: M.nn.functional.pad(M.ones(12), (1, 1), mode=mode))


# ---- c. indexing ops: torch's exception classes ----------------------------------------------

def _z(M):
    return M.arange(12.0).reshape(3, 4)


INDEX_RUNTIME = {  # an out-of-range index: RuntimeError in torch (was IndexError)
    "gather": lambda M: M.gather(_z(M), 1, M.tensor([[-1]])),
    "gather_high": lambda M: M.gather(_z(M), 1, M.tensor([[4]])),
    "take_along_dim": lambda M: M.take_along_dim(_z(M), M.tensor([[12]])),
    "scatter": lambda M: _z(M).scatter(1, M.tensor([[5]]), M.ones(1, 1)),
    "scatter_value": lambda M: _z(M).scatter(1, M.tensor([[5]]), 2.0),
    "scatter_add": lambda M: _z(M).scatter_add(1, M.tensor([[-1]]), M.ones(1, 1)),
    "scatter_reduce": lambda M: _z(M).scatter_reduce(1, M.tensor([[4]]), M.ones(1, 1), "sum"),
    "index_add": lambda M: _z(M).index_add(1, M.tensor([4]), M.ones(3, 1)),
    "index_select_0d": lambda M: M.tensor(1.0).index_select(0, M.tensor([0, 0])),
    "index_fill_2d_index": lambda M: _z(M).index_fill(1, M.tensor([[1]]), 1.0),
}

INDEX_INDEXERROR = {  # these stay IndexError, as torch
    "take": lambda M: M.take(_z(M), M.tensor([12])),
    "index_select": lambda M: _z(M).index_select(0, M.tensor([3])),
    "index_select_neg": lambda M: M.zeros(2, 3, 4).index_select(2, M.tensor([-5])),
    "index_copy": lambda M: _z(M).index_copy(1, M.tensor([4]), M.ones(3, 1)),
    "index_fill": lambda M: _z(M).index_fill(1, M.tensor([4]), 1.0),
    "put": lambda M: _z(M).put(M.tensor([12]), M.ones(1)),
    "put_count": lambda M: _z(M).put(M.tensor([1, 2]), M.ones(3)),  # was: RuntimeError
    "put_accumulate_count": lambda M: _z(M).put_(M.tensor([1, 2]), M.ones(3), accumulate=True),
    "getitem": lambda M: _z(M)[3],
}


@pytest.mark.parametrize("name", sorted(INDEX_RUNTIME))
def test_index_errors_are_runtime_errors(name):
    with pytest.raises(RuntimeError) as info:
        INDEX_RUNTIME[name](ember)
    assert not isinstance(info.value, IndexError)


@pytest.mark.parametrize("name", sorted(INDEX_INDEXERROR))
def test_index_errors_that_stay_index_errors(name):
    with pytest.raises(IndexError):
        INDEX_INDEXERROR[name](ember)


@needs_torch
@pytest.mark.parametrize("name", sorted(INDEX_RUNTIME) + sorted(INDEX_INDEXERROR))
def test_index_error_classes_match_torch(name):
    _same({**INDEX_RUNTIME, **INDEX_INDEXERROR}[name])


def test_in_range_indexing_ops_unchanged():
    x = ember.arange(12.0).reshape(3, 4)
    assert ember.gather(x, 1, ember.tensor([[-0], [3], [1]])).tolist() == [[0.0], [7.0], [9.0]]
    assert x.index_select(1, ember.tensor([3, 0])).tolist() == [[3.0, 0.0], [7.0, 4.0],
                                                               [11.0, 8.0]]
    assert ember.zeros(2, 3).index_add(1, ember.tensor([2, 2]), ember.ones(2, 2)).tolist() == [
        [0.0, 0.0, 2.0], [0.0, 0.0, 2.0]]
    assert ember.zeros(4).scatter_add(0, ember.tensor([3, 3]), ember.ones(2)).tolist() == [
        0.0, 0.0, 0.0, 2.0]


# ---- d. scatter_reduce's 'max' / 'min' -------------------------------------------------------

@pytest.mark.parametrize("reduce,include_self,want", [
    ("max", True, [[0.0, 5.0, 0.0, -1.0]]),
    ("max", False, [[0.0, 5.0, 0.0, -3.0]]),
    ("min", True, [[0.0, 0.0, 0.0, -3.0]]),
    ("min", False, [[0.0, 2.0, 0.0, -3.0]]),
])
def test_scatter_reduce_takes_max_and_min(reduce, include_self, want):
    x = ember.tensor([[0.0, 0.0, 0.0, -1.0]])
    idx = ember.tensor([[1, 1, 3]])
    src = ember.tensor([[2.0, 5.0, -3.0]])
    r = x.scatter_reduce(1, idx, src, reduce, include_self=include_self)  # was: RuntimeError
    assert r.tolist() == want
    amax = "amax" if reduce == "max" else "amin"
    assert r.tolist() == x.scatter_reduce(1, idx, src, amax, include_self=include_self).tolist()
    with pytest.raises(RuntimeError, match="reduce argument must be either"):
        x.scatter_reduce(1, idx, src, "maximum")


@needs_torch
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_scatter_reduce_max_min_match_torch(reduce):
    _same(lambda M: M.tensor([[0.0, 0.0, 0.0, -1.0]]).scatter_reduce(
        1, M.tensor([[1, 1, 3]]), M.tensor([[2.0, 5.0, -3.0]]), reduce))
    _same(lambda M: M.tensor([[0.0, 0.0, 0.0, -1.0]]).scatter_reduce(
        1, M.tensor([[1, 1, 3]]), M.tensor([[2.0, 5.0, -3.0]]), reduce, include_self=False))


# ---- e. complex or non-numeric scalars of xlogy / xlog1py / copysign ---------------------------

COMPLEX_SCALAR = {
    "xlogy_other": lambda M: M.xlogy(M.tensor([1.0]), 1 + 1j),
    "xlogy_self": lambda M: M.xlogy(1 + 1j, M.tensor([1.0])),
    "special.xlog1py": lambda M: M.special.xlog1py(M.tensor([1.0]), 1j),
    "copysign": lambda M: M.copysign(M.tensor([1.0]), 1j),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_SCALAR))
def test_complex_scalar_is_not_implemented(name):
    with pytest.raises(NotImplementedError, match="complex"):  # was: float()'s TypeError
        COMPLEX_SCALAR[name](ember)


@needs_torch
@pytest.mark.parametrize("name", sorted(COMPLEX_SCALAR))
def test_complex_scalar_matches_torch(name):
    _same(COMPLEX_SCALAR[name])


def test_string_scalar_is_a_type_error():
    with pytest.raises(TypeError, match="xlogy"):
        ember.xlogy(ember.tensor([1.0]), "a")
    with pytest.raises(TypeError, match="copysign"):  # was: float()'s ValueError
        ember.copysign(ember.tensor([1.0]), "a")
    # numbers still work
    assert ember.copysign(ember.tensor([1.0, -2.0]), -1).tolist() == [-1.0, -2.0]
    assert ember.xlogy(ember.tensor([2.0]), math.e).tolist() == pytest.approx([2.0])


# ---- f. out= of zeros / ones / full / empty -----------------------------------------------------

@pytest.mark.filterwarnings("ignore:.*was resized")
def test_factories_take_out():
    o = ember.ones(3, dtype=ember.int8)
    r = ember.zeros(2, out=o)  # was: TypeError (unexpected keyword argument 'out')
    assert r is o and o.dtype == ember.int8 and o.tolist() == [0, 0]
    o = ember.zeros(0)
    assert ember.ones(2, 2, out=o) is o and o.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    o = ember.zeros(0, dtype=ember.float64)
    assert ember.full((2,), 1.5, out=o) is o and o.tolist() == [1.5, 1.5]
    assert o.dtype == ember.float64
    o = ember.zeros(0, dtype=ember.int64)
    assert ember.empty(3, 1, out=o).shape == (3, 1) and o.dtype == ember.int64
    for make in (lambda **kw: ember.zeros(2, **kw), lambda **kw: ember.full((2,), 1, **kw),
                 lambda **kw: ember.arange(2, **kw), lambda **kw: ember.eye(2, **kw),
                 lambda **kw: ember.rand(2, **kw), lambda **kw: ember.randperm(2, **kw)):
        # a dtype= other than out's, even a castable one (was: computed and cast)
        with pytest.raises(RuntimeError, match="does not match dtype of out parameter"):
            make(out=ember.zeros(2), dtype=ember.float64)
        assert make(out=ember.zeros(0), dtype=ember.float32).dtype == ember.float32
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        ember.zeros(2, out=ember.zeros(2, requires_grad=True))


@needs_torch
@pytest.mark.filterwarnings("ignore:.*was resized")
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("call", [
    lambda M, o: M.zeros(2, out=o), lambda M, o: M.zeros((2, 1), out=o),
    lambda M, o: M.ones(2, 2, out=o), lambda M, o: M.full((2,), 3, out=o),
    lambda M, o: M.full((2,), 1.5, out=o),
])
def test_factories_take_out_as_torch(call):
    _same(lambda M: call(M, M.zeros(0, dtype=M.int16)))
    _same(lambda M: M.arange(3, out=M.zeros(0), dtype=M.float64))
    _same(lambda M: call(M, M.zeros(0, dtype=M.float64)))
    _same(lambda M: call(M, M.zeros(2, dtype=M.float32)))


# ---- g. indexing an expanded tensor that requires grad ------------------------------------------

def test_iterating_an_expanded_tensor_is_linear():
    n = 20000
    x = ember.zeros(1).requires_grad_().expand(n)
    t = time.perf_counter()
    items = list(x)  # was: quadratic (each item indexed a copy of all of x): minutes
    assert time.perf_counter() - t < 10.0
    assert len(items) == n and items[5].shape == () and items[5].grad_fn is not None


def test_index_of_an_expanded_tensor_is_a_view():
    leaf = ember.tensor([2.0], requires_grad=True)
    a = (leaf * 1).expand(3, 4)
    y = a[1, 2]
    y.mul_(2)  # writes the one shared element, as torch: every element of a reads 4
    assert a.tolist() == [[4.0] * 4] * 3
    (y * 1).backward()
    assert leaf.grad.tolist() == [2.0]
    # a write through an overlapping view is refused (it was made into a copy)
    a = (ember.tensor([2.0], requires_grad=True) * 1).expand(3, 4)
    with pytest.raises(RuntimeError, match="single memory location"):
        a[1].mul_(2)


def test_index_of_an_expanded_tensor_gradients():
    leaf = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    a = leaf.expand(3, 2)
    (a[1:, ::1] * ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ember.float64)).sum().backward()
    assert leaf.grad.tolist() == [4.0, 6.0]
    leaf.grad = None
    (a[None, 1] * ember.tensor([[1.0, 2.0]], dtype=ember.float64)).sum().backward()
    assert leaf.grad.tolist() == [1.0, 2.0]
    leaf.grad = None
    (a[[0, 2], 1] * ember.tensor([5.0, 7.0], dtype=ember.float64)).sum().backward()
    assert leaf.grad.tolist() == [0.0, 12.0]
    leaf.grad = None
    (a[..., 0].sum() + a[-1, -1] * 3).backward()
    assert leaf.grad.tolist() == [3.0, 3.0]
    assert a[1].grad_fn.name() == "SelectBackward0"


@needs_torch
def test_index_of_an_expanded_tensor_matches_torch():
    def run(M):
        leaf = M.tensor([2.0], requires_grad=True)
        a = (leaf * 1).expand(3, 4)
        y = a[1, 2]
        y.mul_(2)
        (y * 3).backward()
        return M.cat([a.detach().flatten(), leaf.grad])

    _same(run)
    _same(lambda M: (M.tensor([2.0], requires_grad=True) * 1).expand(3, 4)[1].mul_(2))


# ---- h. out= of bool-result ops when an input requires grad ------------------------------------

BOOL_OUT = {
    "eq": lambda M, x, o: M.eq(x, M.tensor([0.5, 2.0], dtype=M.float64), out=o),
    "ne": lambda M, x, o: M.ne(x, 1, out=o),
    "lt": lambda M, x, o: M.lt(x, 1.5, out=o),
    "ge": lambda M, x, o: M.ge(x, 0.5, out=o),
}
BOOL_OUT_WANT = {"eq": [1.0, 0.0], "ne": [1.0, 1.0], "lt": [1.0, 0.0], "ge": [1.0, 1.0]}


@pytest.mark.parametrize("name", sorted(BOOL_OUT))
def test_bool_result_into_a_float_out_with_grad(name):
    x = ember.tensor([0.5, 3.0], dtype=ember.float64, requires_grad=True)
    o = ember.zeros(2, dtype=ember.float64)
    r = BOOL_OUT[name](ember, x, o)  # was: "don't support automatic differentiation"
    assert r is o and o.tolist() == BOOL_OUT_WANT[name] and not o.requires_grad
    # a differentiable op still refuses
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        ember.mul(x, 2, out=ember.zeros(2, dtype=ember.float64))


def test_signbit_into_a_bool_out_with_grad():
    x = ember.tensor([0.5, -3.0], dtype=ember.float64, requires_grad=True)
    o = ember.zeros(2, dtype=ember.bool)
    assert ember.signbit(x, out=o) is o and o.tolist() == [False, True]  # was refused
    with pytest.raises(RuntimeError, match="dtype bool"):  # a float out= stays refused
        ember.signbit(x, out=ember.zeros(2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        ember.special.erf(x, out=ember.zeros(2, dtype=ember.float64))


@needs_torch
@pytest.mark.parametrize("name", sorted(BOOL_OUT))
def test_bool_result_into_a_float_out_with_grad_matches_torch(name):
    _same(lambda M: BOOL_OUT[name](M, M.tensor([0.5, 3.0], dtype=M.float64, requires_grad=True),
                                   M.zeros(2, dtype=M.float64)))
