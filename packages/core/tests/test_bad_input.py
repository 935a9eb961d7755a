"""Bad input raises a clear Python exception naming the op -- never a crash or a wrong result.

Regression tests for what ``fuzz_ops.py`` (the standalone fuzzer next to this file) found, plus a
small in-suite fuzz smoke run in a subprocess so that a segfault fails the test instead of
killing pytest.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import ember
import pytest

E = ember
I64_MIN = -(2**63)


def _expanded(n: int = 3, dtype=None):
    """A length-n tensor whose elements all share one memory location (stride 0)."""
    return E.zeros(1, dtype=dtype or E.float32).expand(n)


def _nested(depth: int) -> list:
    x: list = [1.0]
    for _ in range(depth):
        x = [x]
    return x


# (callable, exception type, message regex)
ERRORS = [
    # A None where a tensor is required dereferenced a null pointer (segfault).
    (lambda: E.sign(None), TypeError, r"sign\(\) received an invalid combination of arguments - got \(NoneType\)"),
    (lambda: E.matmul(E.zeros(2), None), TypeError, r"matmul\(\) received an invalid combination of arguments"),
    (lambda: E.zeros(2).equal(None), TypeError, r"equal\(\) received an invalid combination of arguments"),
    (lambda: E.full_like(None, 1), TypeError, r"full_like\(\) received an invalid combination of arguments"),
    (lambda: E.stack([E.zeros(2), None]), TypeError, r"stack\(\) received an invalid combination of arguments"),
    (lambda: E.meshgrid([None]), TypeError, r"meshgrid\(\) received an invalid combination of arguments"),
    (lambda: E.zeros(3).lerp_(None, 0.5), TypeError, r"lerp_\(\) received an invalid combination of arguments"),
    (lambda: E.argwhere(None), TypeError, r"argwhere\(\) received an invalid combination of arguments"),
    # Storage sizes that wrapped around int64 allocated 0 bytes, then wrote (segfault).
    (lambda: E.zeros(2**62), RuntimeError, r"empty: storage size .* overflows int64"),
    (lambda: E.ones(2**31, 2**31), RuntimeError, r"empty: storage size .*float32 overflows"),
    (lambda: E.empty(2**61, dtype=E.float64), RuntimeError, r"overflows int64"),
    (lambda: E.randn(2**62), RuntimeError, r"overflows int64"),
    (lambda: E.zeros(1).new_ones(2**62), RuntimeError, r"overflows int64"),
    (lambda: E.empty_strided((2, 2), (2**62, 2**62)), RuntimeError,
     r"empty_strided: .* larger than int64"),
    # Views whose element count or extent overflowed passed the storage-bounds check.
    (lambda: E.as_strided(E.zeros(3), (2**62,), (2**62,)), RuntimeError,
     r"as_strided: .* larger than int64"),
    (lambda: E.as_strided(E.zeros(4), (2,), (1,), 2**62), RuntimeError, r"as_strided"),
    (lambda: E.zeros(3).expand(2**62, 3), RuntimeError, r"too many elements"),
    (lambda: E.zeros(1).broadcast_to([2] * 70), RuntimeError, r"too many elements"),
    (lambda: E.zeros(4).repeat(2**62, 2**62), RuntimeError, r"repeat: .* overflows int64"),
    (lambda: E.zeros(2, 2).repeat(2**62 + 1, 1), RuntimeError, r"repeat: .* overflows int64"),
    (lambda: E.cat([E.zeros(1).expand(2**62)] * 3 + [E.zeros(1).expand(2**62 + 1)]),
     RuntimeError, r"cat\(\): the total size .* overflows"),
    (lambda: E.repeat_interleave(E.tensor([2**62, 2**62])), RuntimeError,
     r"repeat_interleave: .* overflows int64"),
    (lambda: E.zeros(4).repeat_interleave(2**62 + 1), RuntimeError, r"repeat_interleave"),
    (lambda: E.split_with_sizes(E.zeros(5), [2**63 - 1, 2**63 - 1, 7]), RuntimeError,
     r"split_with_sizes: .* int64"),
    (lambda: E.tensor_split(E.zeros(4), 2**62), E.OutOfMemoryError,
     r"tensor_split: cannot create \d+ pieces"),
    (lambda: E.chunk(E.zeros(0), 2**62), E.OutOfMemoryError, r"chunk: cannot create"),
    (lambda: E.arange(0, 1e300, 1e298, dtype=E.int32), RuntimeError,
     r"arange: value .* out of range for an integer result of dtype int32"),
    # tensordot with a 0-d operand indexed an empty dim list (segfault).
    (lambda: E.tensordot(E.tensor(1.0), E.zeros(0), dims=([0], [0])), IndexError,
     r"tensordot: dimension specified as 0 but tensor has no dimensions"),
    (lambda: E.tensordot(E.tensor(1), E.zeros(4, 1, dtype=E.int64), dims=([0, 1], [1, 0])),
     IndexError, r"tensordot: .*no dimensions"),
    # Writes through a stride-0 (expanded) tensor silently lost results.
    (lambda: _expanded().add_(1), RuntimeError, r"add: .*more than one element of the written-to"),
    (lambda: _expanded().relu_(), RuntimeError, r"relu: .*single memory location"),
    (lambda: E.add(E.ones(3), 1, out=_expanded()), RuntimeError, r"add: .*single memory location"),
    (lambda: E.sign(E.ones(4, 3), out=E.zeros(1, 3).expand(4, 3)), RuntimeError, r"sign: unsupp"),
    (lambda: _expanded().copy_(E.arange(3.0)), RuntimeError, r"copy_: .*single memory location"),
    (lambda: _expanded().uniform_(), RuntimeError, r"uniform_: .*single memory location"),
    (lambda: _expanded().normal_(), RuntimeError, r"normal_: .*single memory location"),
    (lambda: _expanded(dtype=E.int64).random_(5), RuntimeError, r"random_: .*single memory"),
    (lambda: _expanded().bernoulli_(0.5), RuntimeError, r"bernoulli_: .*single memory"),
    (lambda: E.logsumexp(E.ones(4, 3), [1], out=E.zeros(1).expand(4)), RuntimeError,
     r"logsumexp: .*single memory location"),
    # Python numbers that do not fit the tensor's dtype wrapped silently.
    (lambda: E.full((2,), 300, dtype=E.uint8), RuntimeError,
     r"fill_: value 300 cannot be converted to type uint8 without overflow"),
    (lambda: E.full((2,), float("nan"), dtype=E.int64), RuntimeError, r"value nan cannot"),
    (lambda: E.full((2,), 1e308, dtype=E.float16), RuntimeError, r"to type float16 without"),
    (lambda: E.zeros(3, dtype=E.int8).fill_(255), RuntimeError, r"fill_: value 255"),
    (lambda: E.zeros(3, dtype=E.int64).fill_(float("inf")), RuntimeError, r"value inf"),
    (lambda: E.full_like(E.zeros(2, dtype=E.int64), 2.0**63), RuntimeError,
     r"int64 without overflow"),
    (lambda: E.zeros(3, dtype=E.int8).masked_fill(E.ones(3, dtype=E.bool), 200), RuntimeError,
     r"masked_fill_\(\): value 200 cannot be converted to type int8"),
    (lambda: E.zeros(3, dtype=E.int8).index_fill(0, E.tensor([0]), 200), RuntimeError,
     r"index_fill_\(\): value 200"),
    (lambda: E.zeros(2, dtype=E.int8).scatter(0, E.tensor([0]), 300), RuntimeError,
     r"scatter\(\): value 300"),
    (lambda: E.zeros(3, dtype=E.int8).clamp(0, 1000), RuntimeError,
     r"clamp: value 1000 cannot be converted to type int8"),
    (lambda: E.zeros(3).clamp(-1e308, 1), RuntimeError, r"clamp: value -1e\+308"),
    (lambda: E.tensor([2], dtype=E.int32).pow(2**32 + 2), RuntimeError,
     r"pow: value 4294967298 cannot be converted to type int32"),
    (lambda: E.ones(3, dtype=E.int8).add(1, alpha=300), RuntimeError, r"add: value 300"),
    (lambda: E.ones(3, dtype=E.float16).sub(1, alpha=1e5), RuntimeError, r"sub: value 100000"),
    (lambda: E.ones(3, dtype=E.int32).sub(3, alpha=1e-300), RuntimeError,
     r"sub: for integral input tensors, argument alpha must not be a floating point"),
    (lambda: E.ones(3, dtype=E.int8).addcmul(E.ones(3, dtype=E.int8), E.ones(3, dtype=E.int8),
                                             value=200), RuntimeError, r"addcmul: value 200"),
    (lambda: E.tensor([300], dtype=E.int8), RuntimeError,
     r"tensor\(\): value 300 cannot be converted to type int8"),
    (lambda: E.tensor([1e400], dtype=E.int64), RuntimeError, r"tensor\(\): value inf"),
    (lambda: E.tensor([float("nan")], dtype=E.int32), RuntimeError, r"value nan"),
    # Recursion per nesting level / per dim overflowed the C++ stack (segfault).
    (lambda: E.tensor(_nested(100_000)), ValueError, r"tensor\(\): sequences nested more than"),
    (lambda: E.tensor([1, _nested(100_000)]), ValueError, r"nested more than 1000 levels"),
    (lambda: E.zeros([1] * 100_000).tolist(), ValueError, r"tolist: a tensor with 100000 dims"),
    # An empty destination skipped the shape check (x[5:] = wrongly_shaped).
    (lambda: E.zeros(0).copy_(E.ones(2)), RuntimeError, r"copy_: shapes \(0,\) and \(2,\)"),
    (lambda: E.zeros(2, 2).__setitem__(slice(5, None), E.ones(4, 3)), RuntimeError,
     r"copy_: shapes \(0, 2\) and \(4, 3\) cannot be broadcast"),
    # out= aliasing an input that the op reads after resizing out= (out-of-bounds reads).
    (lambda: E.index_add(E.zeros(2), 0, E.tensor([0, 0, 0, 0, 0]), (s := E.arange(5.0)), out=s),
     RuntimeError, r"index_add\(\): unsupported operation: some elements of the input"),
    (lambda: E.index_copy(E.zeros(2), 0, E.tensor([0, 1]), (s := E.arange(5.0))[:2], out=s),
     RuntimeError, r"index_copy\(\): unsupported operation"),
    (lambda: E.scatter(E.zeros(2), 0, E.tensor([0, 1]), (s := E.arange(5.0)), out=s),
     RuntimeError, r"scatter\(\): unsupported operation"),
]


@pytest.mark.parametrize("fn,exc,msg", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_bad_input_raises(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()


def test_integer_division_by_minus_one_wraps():
    # INT_MIN / -1 trapped (SIGFPE); PyTorch wraps the quotient and the remainder is 0.
    assert (E.tensor([I64_MIN]) // -1).tolist() == [I64_MIN]
    assert (E.tensor([I64_MIN]) % -1).tolist() == [0]
    assert E.tensor([I64_MIN]).fmod(-1).tolist() == [0]
    assert E.tensor([I64_MIN]).div(-1, rounding_mode="trunc").tolist() == [I64_MIN]
    assert E.tensor([-(2**31)], dtype=E.int32).remainder(-1).tolist() == [0]
    assert (E.tensor([-128], dtype=E.int8) // -1).tolist() == [-128]
    assert (E.tensor([7, -7]) // -1).tolist() == [-7, 7]


def test_float_floor_divide_matches_python():
    # floor(x / y) alone gives -0.0 for -1 // inf (x / y underflows); Python and PyTorch give -1.
    x = E.tensor([-1.0, 1.0, 7.0, -7.0, 7.5, -0.0])
    y = E.tensor([math.inf, math.inf, 2.0, 2.0, -2.0, 3.0])
    assert (x // y).tolist() == [a // b for a, b in zip(x.tolist(), y.tolist())]
    assert E.div(E.tensor([-1]), 1e308, rounding_mode="floor").tolist() == [-1.0]


def test_triangle_of_zero_columns():
    # rows > 0, cols == 0 divided by cols (SIGFPE).
    for fn in (E.tril, E.triu):
        assert fn(E.zeros(3, 0), 3).shape == (3, 0)
    assert E.zeros(3, 0, dtype=E.float16).triu_().shape == (3, 0)


def test_fill_of_expanded_tensor_still_allowed():
    # Every write stores the same value, so fill_/zero_ on a stride-0 view stay legal (PyTorch).
    assert _expanded().fill_(2).tolist() == [2.0, 2.0, 2.0]
    assert E.full((2,), -1, dtype=E.uint8).tolist() == [255, 255]  # negatives wrap, as PyTorch


def test_out_aliasing_input_reads_inputs_first():
    # out= resized before the kernel read self (the same tensor): garbage or a crash.
    a = E.arange(1).reshape(1, 1)
    assert E.nonzero(a, out=a).shape == (0, 2)
    a = E.arange(10)
    assert E.take(a, E.tensor([9, 0]), out=a).tolist() == [9, 0]
    a = E.arange(10.0)
    assert E.index_select(a, 0, E.tensor([9, 9]), out=a).tolist() == [9.0, 9.0]
    a = E.arange(10.0)
    assert E.masked_select(a, a > 7, out=a).tolist() == [8.0, 9.0]
    a = E.arange(10.0)
    assert E.histc(a, 4, out=a).tolist() == [3.0, 2.0, 2.0, 3.0]


def test_histc_huge_range_has_no_undefined_cast():
    # (x - min) * bins overflowed to inf, and casting inf to int64 is undefined behaviour.
    assert E.histc(E.tensor([1e38, -1e38]), 10).tolist() == [1.0] + [0.0] * 8 + [1.0]


def test_arange_full_int64_range():
    # end - start overflowed int64: the result was empty.
    assert E.arange(I64_MIN, 2**63 - 1, 2**62).tolist() == [I64_MIN, -(2**62), 0, 2**62]
    assert E.arange(2**63 - 1, I64_MIN, -(2**62)).numel() == 4


def test_split_counts_do_not_overflow():
    assert len(E.chunk(E.zeros(5), 2**63 - 1)) == 5
    assert len(E.split(E.zeros(5), 2**63 - 1)) == 1


def test_repeat_interleave_keeps_repeats_dtype():
    assert E.repeat_interleave(E.tensor([1, 2], dtype=E.int32)).dtype == E.int32


# ---- in-suite fuzz smoke ----------------------------------------------------------------------

SMOKE_OPS = ("add,mul,div,remainder,floor_divide,pow,clamp,where,sum,amax,cumsum,sort,topk,"
             "kthvalue,gather,scatter,index_select,index_add,masked_fill,take,nonzero,cat,stack,"
             "repeat,tile,expand,view,reshape,as_strided,narrow,unfold,split,chunk,tensor_split,"
             "diagonal,tril,matmul,tensordot,einsum,arange,linspace,randint,multinomial,full,zeros,"
             "histc,bincount,searchsorted,repeat_interleave,targeted,surface")


def test_fuzz_smoke():
    """A fixed-seed slice of fuzz_ops.py: no crash, hang or out-of-bounds view."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import fuzz_ops
    except ImportError as e:  # the schema loader needs PyYAML
        pytest.skip(f"fuzz_ops unavailable: {e}")
    args = argparse.Namespace(seed=1234, per_op=8, surface=400, ops=SMOKE_OPS, timeout=20.0,
                              mem_gb=4, threads=1, torch=False)
    cases = fuzz_ops.build_cases(args)
    worker = fuzz_ops.Worker(args)
    problems = []
    try:
        for i, case in enumerate(cases):
            res = worker.run(i, case.code, args.timeout)
            if "crash" in res or "hang" in res:
                worker.kill()
                worker = fuzz_ops.Worker(args)
            bad = fuzz_ops.classify(res)
            # MemoryError from a split into ~2**40 pieces is a Python exception, not a crash.
            if bad and not (bad[0] == "unexpected-exception" and "MemoryError" in bad[1]):
                problems.append(f"{bad[0]}: {bad[1][:200]}\n{case.repro()}")
    finally:
        worker.close()
    assert not problems, "\n\n".join(problems[:10])
