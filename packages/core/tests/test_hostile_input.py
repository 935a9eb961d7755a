"""Hostile input gets a clear Python exception naming the op -- never a crash, a hang, a
MemoryError from an absurd size, or a silently wrong number.

Regression tests for what ``tools/fuzz_ops.py`` (the hostile-input harness) found, grouped by
category, plus a seeded slice of the harness itself: its cases run in worker subprocesses, so a
segfault or hang fails the test with the case's reproducer instead of killing pytest. Also
inference tensors (``ember.inference_mode`` / ``Tensor.is_inference()``).
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import ember
import pytest
from core_helpers import needs_torch, torch

ROOT = Path(__file__).resolve().parents[3]
E = ember


def run_isolated(code: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (a crash there fails the test, not the session)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout)


def assert_raises_isolated(code: str, exc: str, *fragments: str) -> None:
    """`code` (which binds nothing; it is the call) raises `exc` with every fragment in its
    message, in a child process: a segfault or abort shows as the child's signal."""
    probe = f"""
import ember
try:
    {code}
except BaseException as e:
    print(type(e).__name__)
    print(e)
else:
    print("NO ERROR")
"""
    r = run_isolated(probe)
    assert r.returncode == 0, f"the child died (status {r.returncode}): {r.stderr[-2000:]}"
    kind, _, msg = r.stdout.partition("\n")
    assert kind == exc, f"expected {exc}, got {r.stdout!r}"
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"


# ---- 1. crashes: saved statistics of the wrong size in norm backward kernels -----------------


@pytest.mark.parametrize("which", [2, 3, 4])
def test_batch_norm_backward_checks_weight_and_saved_stats(which):
    # A (0,) weight / save_mean / save_invstd for 3 channels was read past its end (segfault).
    args = ["E.randn(4, 3, 5)", "E.randn(4, 3, 5)", "E.ones(3)", "E.zeros(3)", "E.ones(3)"]
    args[which] = "E.ones(0)"
    name = ["", "", "weight", "save_mean", "save_invstd"][which]
    assert_raises_isolated(
        f"E = ember; E.native_batch_norm_backward({', '.join(args)}, True, True, True, True)",
        "RuntimeError", "batch_norm_backward", f"expected {name} with C = 3 elements", "(0,)")


def test_batch_norm_backward_needs_channels():
    with pytest.raises(RuntimeError, match=r"batch_norm_backward: expected an input of shape"):
        E._C.native_batch_norm_backward(E.ones(3), E.ones(3), None, E.ones(1), E.ones(1), True,
                                     True, True, True)


@pytest.mark.parametrize("which", [3, 4])
def test_group_norm_backward_checks_saved_stats(which):
    args = ["E.randn(2, 4, 3)", "E.randn(2, 4, 3)", "2", "E.zeros(2, 2)", "E.ones(2, 2)",
            "E.ones(4)"]
    args[which] = "E.ones(0, 2)"
    name = "mean" if which == 3 else "rstd"
    assert_raises_isolated(
        f"E = ember; E.native_group_norm_backward({', '.join(args)}, True, True, True)",
        "RuntimeError", "group_norm_backward", f"expected {name} with N * num_groups = 4",
        "(0, 2)")


def test_norm_backward_with_right_sizes_still_works():
    x = E.randn(4, 3, 5, requires_grad=True)
    E.nn.functional.batch_norm(x, None, None, E.ones(3), E.zeros(3), training=True).sum() \
        .backward()
    assert x.grad.shape == x.shape
    y = E.randn(2, 4, 3, requires_grad=True)
    E.nn.functional.group_norm(y, 2, E.ones(4), E.zeros(4)).square().sum().backward()
    assert y.grad.shape == y.shape and math.isfinite(y.grad.sum().item())


# ---- 2. absurd sizes: a clear error, not bad_alloc / MemoryError / a hang ------------------


@pytest.mark.parametrize("input_size, fragment", [
    ([2**40, 2**40], "expected grad_output of shape (1099511627776, 1099511627779)"),
    ([-3, 4], "input_size (-3, 4) has a negative dimension"),
    ([-1, -1], "has a negative dimension"),
    ([2**62, 2**62], "expected grad_output of shape"),
    ([2, 2**63 - 1], "overflows int64"),
])
def test_pad_backward_rejects_impossible_input_sizes(input_size, fragment):
    # reflect/replicate built index maps of input_size's length first: std::bad_alloc (as a
    # MemoryError) or "vector::_M_default_append".
    g = E.randn(2, 3, 7)
    for mode in ("reflect", "replicate", "constant"):
        with pytest.raises(RuntimeError, match="pad_backward") as info:
            E._C._pad_backward(g, input_size, [1, 2], mode)
        if mode != "constant":
            assert fragment in str(info.value)


def test_pad_backward_still_inverts_pad():
    x = E.randn(2, 3, 4, requires_grad=True)
    E.nn.functional.pad(x, (1, 2), mode="reflect").sum().backward()
    assert x.grad.shape == (2, 3, 4)
    assert E._C._pad_backward(E.ones(2, 3, 7), [2, 3, 4], [1, 2], "reflect").shape == (2, 3, 4)


@pytest.mark.parametrize("call, shape", [
    ("F.adaptive_avg_pool1d(E.zeros(2, 0, 3), 2**62)", (2, 0, 2**62)),
    # (adaptive max pools refuse 0 channels, as PyTorch: a zero batch there)
    ("F.adaptive_max_pool1d(E.zeros(0, 2, 3), 2**62)", (0, 2, 2**62)),
    ("F.adaptive_avg_pool2d(E.zeros(0, 2, 3, 3), (2**62, 2))", (0, 2, 2**62, 2)),
    ("F.adaptive_max_pool2d(E.zeros(0, 2, 3, 3), (2, 2**61))", (0, 2, 2, 2**61)),
    ("F.max_pool1d(E.zeros(0, 1, 2**40), 2)",
     (0, 1, 2**39)),
])
def test_pooling_to_an_empty_output_plans_no_windows(call, shape):
    # A zero batch/channel dim left the output empty, but a window was still planned for each
    # of 2**62 positions: ValueError "vector::reserve" (or minutes of work and bad_alloc).
    F = pytest.importorskip("ember.nn.functional")
    r = eval(call, {"E": E, "F": F})
    r = r[0] if isinstance(r, tuple) else r
    assert tuple(r.shape) == shape and r.numel() == 0


@pytest.mark.parametrize("fn", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("args", [(2**31, 2**31), (2**31, 2**31, -5), (2**40, 2**20)])
def test_tri_indices_of_an_absurd_size_fail_fast(fn, args):
    # Built the index lists in Python first: minutes of work, then a bare MemoryError.
    r = run_isolated(f"""
import resource, ember
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
try:
    ember.{fn}(*{args!r})
except RuntimeError as e:
    print("RuntimeError", e)
""", timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("RuntimeError") and fn in r.stdout, r.stdout
    assert "too large" in r.stdout or "out of memory" in r.stdout, r.stdout


@pytest.mark.parametrize("fn", ["tril_indices", "triu_indices"])
def test_tri_indices_huge_extent_with_few_entries(fn):
    assert E.tril_indices(2**40, 0).shape == (2, 0)
    assert getattr(E, fn)(0, 2**40).shape == (2, 0)
    assert getattr(E, fn)(3, 3, 2**62).shape == ((2, 9) if fn == "tril_indices" else (2, 0))
    assert getattr(E, fn)(3, 3, -(2**62)).shape == ((2, 0) if fn == "tril_indices" else (2, 9))
    with pytest.raises(TypeError, match=f"{fn}.*'row' must be int"):
        getattr(E, fn)(2.5, 3)


@needs_torch
@pytest.mark.parametrize("fn", ["tril_indices", "triu_indices"])
def test_tri_indices_match_torch(fn):
    for r, c, o in itertools.product(range(5), range(5), range(-6, 7)):
        got = getattr(E, fn)(r, c, o)
        want = getattr(torch, fn)(r, c, o)
        assert got.tolist() == want.tolist(), (fn, r, c, o)
        assert got.dtype == E.int64
    assert getattr(E, fn)(3, 4, 1, dtype=E.int32).dtype == E.int32


# ---- 3. silent wrong numbers --------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("lo, hi", [(math.nan, 0.5), (-0.5, math.nan), (math.nan, math.nan),
                                    (0.5, -0.5), (None, math.nan), (math.nan, None)])
def test_clamp_nan_bounds_propagate_like_torch(lo, hi):
    # clamp(x, nan, 0.5) ignored the NaN bound (torch: NaN everywhere).
    vals = [-2.0, -0.25, 0.0, 0.25, 3.0, math.inf, -math.inf, math.nan]
    got = E.clamp(E.tensor(vals), lo, hi)
    want = torch.clamp(torch.tensor(vals), lo, hi)
    assert torch.equal(torch.tensor(got.tolist()).isnan(), want.isnan())
    assert torch.allclose(torch.tensor(got.tolist()), want, equal_nan=True)
    # tensor bounds
    tl = None if lo is None else E.full((8,), lo)
    th = None if hi is None else E.full((8,), hi)
    got_t = E.clamp(E.tensor(vals), tl, th)
    assert torch.allclose(torch.tensor(got_t.tolist()), want, equal_nan=True)


@needs_torch
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
def test_rms_norm_default_eps_matches_torch(dtype):
    # bfloat16 / float16 used their own epsilon (2**-7, 2**-10) instead of float32's: results
    # off by up to 1% where torch normalizes in float32.
    x = [[0.5, -0.7, 0.4, -1.3], [0.01, 0.02, -0.03, 0.0]]
    got = E.rms_norm(E.tensor(x).to(getattr(E, dtype)), [4]).to(E.float64).tolist()
    want = torch.rms_norm(torch.tensor(x).to(getattr(torch, dtype)), [4]).double().tolist()
    tol = {"bfloat16": 1e-2, "float16": 2e-3}.get(dtype, 1e-6)
    for a, b in zip(sum(got, []), sum(want, [])):
        assert abs(a - b) <= tol * max(1.0, abs(b)), (got, want)


@pytest.mark.parametrize("code", [
    "M.add(x[:4], 1, out=x[2:])",  # gave [1, 2, 2, 3] (elements read after being overwritten)
    "M.add(x[2:], 1, out=x[:4])",
    "M.mul(x[:4], x[1:5], out=x[2:])",
    "x[2:].mul_(x[:4])",
    "x.reshape(2, 3).add_(x.reshape(2, 3)[0])",
    "x.reshape(2, 3).t().add_(x.reshape(3, 2))",
    "M.clamp(x[:4], 0, 3, out=x[1:5])",
    "M.where(x[:4] > 1, x[:4], x[1:5], out=x[2:])",
])
def test_partially_overlapping_output_raises_like_torch(code):
    x = E.arange(6.0)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to "
                                           "tensor refer to a single memory location"):
        eval(code, {"M": E, "x": x})
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # nothing was written


@needs_torch
def test_partial_overlap_rules_match_torch():
    # the same tensor, disjoint views and strided (not dense) views are fine, as in torch
    cases = ["M.add(x, 1, out=x)", "x.add_(x)", "M.neg(x[:3], out=x[3:])",
             "M.add(x[::2], 1, out=x[1::2])", "x[:3].copy_(x[3:])",
             "M.mul(x.view(2, 3), 2, out=x.view(2, 3))"]
    for code in cases:
        got, want = E.arange(6.0), torch.arange(6.0)
        r1 = eval(code, {"M": E, "x": got})
        r2 = eval(code, {"M": torch, "x": want})
        assert got.tolist() == want.tolist(), code
        assert r1.tolist() == r2.tolist(), code


def test_setitem_with_a_mask_of_the_wrong_shape_raises():
    # a[mask_of_shape_(1,)] = 7 broadcast the mask and filled all of a.
    a = E.arange(20.0).reshape(4, 5)
    for mask in (E.tensor([True]), E.tensor([True, False]), E.ones(4, 4, dtype=E.bool),
                 E.ones(4, 5, 1, dtype=E.bool)):
        with pytest.raises(IndexError, match=r"shape of the mask|too many indices"):
            a[mask] = 7.0
        with pytest.raises(IndexError, match=r"shape of the mask|too many indices"):
            a[mask] = E.tensor(7.0)
    assert a.tolist() == E.arange(20.0).reshape(4, 5).tolist()
    a[E.tensor([True, False, True, False])] = -1.0  # the right shape still works
    assert a[:, 0].tolist() == [-1.0, 5.0, -1.0, 15.0]


@needs_torch
def test_batch_norm_statistics_keep_nan():
    # std::max(0.0, NaN) is 0: a NaN channel reported invstd 1/sqrt(eps) and put a variance of
    # 0 into running_var.
    x = E.randn(4, 3, 5)
    x[1, 1, 2] = float("nan")
    rv = E.ones(3)
    out, mean, invstd = E.native_batch_norm(x, None, None, E.zeros(3), rv, True, 0.1, 1e-5)
    tx = torch.tensor(x.tolist())
    trv = torch.ones(3)
    _, tmean, tinvstd = torch.native_batch_norm(tx, None, None, torch.zeros(3), trv, True, 0.1,
                                                1e-5)
    assert math.isnan(invstd[1].item()) and math.isnan(rv[1].item())
    assert torch.allclose(torch.tensor(invstd.tolist()), tinvstd, equal_nan=True, rtol=1e-4)
    assert torch.allclose(torch.tensor(rv.tolist()), trv, equal_nan=True, rtol=1e-4)


# ---- 4. inference tensors -----------------------------------------------------------------


def test_inference_mode_marks_new_tensors():
    x = E.ones(3)
    assert not x.is_inference()
    with E.inference_mode():
        assert E.is_inference_mode_enabled()
        y = x * 2
        z = E.zeros(2)
        v = x[:2]  # a view of a normal tensor stays normal
        assert y.is_inference() and z.is_inference() and not v.is_inference()
        with E.inference_mode(False):
            assert not E.is_inference_mode_enabled()
            assert not (x + 1).is_inference()
    assert not E.is_inference_mode_enabled()
    assert y.is_inference() and y[0].is_inference() and y.view(3, 1).is_inference()
    assert not y.clone().is_inference()
    assert not (y + 1).is_inference()  # a new tensor outside inference mode
    with E.no_grad():
        assert not E.ones(1).is_inference()


def test_inference_mode_decorator_and_threads():
    @E.inference_mode()
    def f(t):
        return t * 3

    assert f(E.ones(2)).is_inference()
    import threading
    seen = []
    with E.inference_mode():
        th = threading.Thread(target=lambda: seen.append(E.ones(1).is_inference()))
        th.start()
        th.join()
    assert seen == [False]  # the mode is per thread


def test_inference_tensor_cannot_be_saved_for_backward():
    with E.inference_mode():
        a = E.ones(3)
    w = E.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        (a * w).sum()
    # a clone is a normal tensor
    (a.clone() * w).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0]
    # ops that save nothing of it are fine (add saves neither input)
    (a + w).sum().backward()


def test_inference_tensor_inplace_outside_inference_mode_raises():
    with E.inference_mode():
        a = E.ones(3)
        a.add_(1)  # fine inside
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                           "InferenceMode"):
        a.add_(1)
    with E.no_grad(), pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        a.mul_(2)
    assert a.tolist() == [2.0, 2.0, 2.0]


def test_inference_tensor_cannot_start_requiring_grad_outside_inference_mode():
    with E.inference_mode():
        a = E.ones(2)
        inside = E.ones(2).requires_grad_()  # allowed inside, as in torch
    assert inside.requires_grad
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor "
                                           "outside InferenceMode is not allowed"):
        a.requires_grad_()
    assert not a.requires_grad
    a.requires_grad_(False)  # turning it off is fine
    b = a.clone().requires_grad_()
    (b * 2).sum().backward()
    assert b.grad.tolist() == [2.0, 2.0]


@needs_torch
def test_inference_mode_matches_torch():
    for lib in (E, torch):
        with lib.inference_mode():
            t = lib.ones(2)
        assert t.is_inference() and not t.requires_grad
        assert not lib.ones(2).is_inference()


# ---- 5. a seeded slice of the harness ----------------------------------------------------

SLICE_OPS = ("add,mul,div,clamp,where,sum,amax,mean,cumsum,sort,topk,gather,scatter,index_select,"
             "index_add,masked_fill,cat,stack,view,reshape,expand,as_strided,narrow,unfold,"
             "diagonal,tril,matmul,native_batch_norm_backward,native_group_norm_backward,"
             "_pad_backward,pad,embedding,softmax,log_softmax,nll_loss,conv2d,max_pool2d,"
             "layer_norm,rms_norm,repeat_interleave,searchsorted,bincount,histc,copy_,fill_")


def test_fuzz_slice_has_no_crash_hang_or_bad_result():
    """A fixed-seed slice of tools/fuzz_ops.py (ops x mutations, plus a sample of the surface):
    every case runs in a worker subprocess; a crash or hang fails with the case's reproducer."""
    pytest.importorskip("yaml")  # the op table's schema loader
    import importlib.util
    import random

    # tools/fuzz_ops.py, under a name of its own (tests/fuzz_ops.py is another module)
    spec = importlib.util.spec_from_file_location("ember_tools_fuzz_ops",
                                                  ROOT / "tools" / "fuzz_ops.py")
    fuzz_ops = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fuzz_ops
    spec.loader.exec_module(fuzz_ops)
    keys, stats = fuzz_ops.build_keys(set(SLICE_OPS.split(",")), True, 2, seed=5, n_index=40)
    ops = [k for k in keys if k.startswith("op|")]
    surface = [k for k in keys if k.startswith("src|")]
    keys = ops + random.Random(5).sample(surface, min(600, len(surface)))
    assert stats["ops"] >= 40 and len(keys) > 2500
    findings, counts = fuzz_ops.run_keys(keys, timeout=60.0)
    bad = [f for f in findings if f["kind"] != "harness"]
    assert not bad, "\n\n".join(
        f"{f['kind']}: {f['desc']}\n{f['detail'][:300]}\n{fuzz_ops.repro_line(f['key'])}"
        for f in bad[:10])
    assert counts.get("ok", 0) > 0 and counts.get("exc", 0) > 0


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_abs_of_negative_zero_is_positive_zero(dtype):
    # x < 0 ? -x : x kept the sign of -0.0; torch's abs clears it
    t = ember.tensor([-0.0, 0.0, -2.5, float("-inf")], dtype=getattr(ember, dtype)).abs()
    assert not any(math.copysign(1.0, v) < 0 for v in t.float().tolist())
    assert t.float().tolist() == [0.0, 0.0, 2.5, float("inf")]


# ---- 6. found by the harness with new seeds (out= resize, BCE, index ops) -------------------

@pytest.mark.parametrize("bad", [float("nan"), 1.5, -0.25])
def test_binary_cross_entropy_checks_target_and_nan_input(bad):
    """A target outside [0, 1] (NaN included) or a NaN probability was a silent NaN / negative
    loss; torch raises for both."""
    p = ember.tensor([0.25, 0.5])
    with pytest.raises(RuntimeError, match="binary_cross_entropy: all elements of target should "
                                           "be between 0 and 1"):
        ember.nn.functional.binary_cross_entropy(p, ember.tensor([bad, 1.0]))
    with pytest.raises(RuntimeError, match="binary_cross_entropy: all elements of input should "
                                           "be between 0 and 1"):
        ember.nn.functional.binary_cross_entropy(ember.tensor([bad, 0.5]), ember.tensor([0.0, 1.0]))
    # the ends of the range are fine
    r = ember.nn.functional.binary_cross_entropy(ember.tensor([0.0, 1.0]), ember.tensor([0.0, 1.0]))
    assert r.item() == 0.0


@pytest.mark.parametrize("call", [
    lambda x, o: ember.index_select(x, 1, ember.tensor([0, 2]), out=o),
    lambda x, o: ember.take(x, ember.tensor([0, 5, 7]), out=o),
    lambda x, o: ember.gather(x, 1, ember.tensor([[0], [2], [1]]), out=o),
    lambda x, o: ember.masked_select(x, x > 5, out=o),
])
def test_index_ops_reject_an_expanded_out(call):
    """An out= whose elements share memory (expanded, stride 0) got one of several values written
    to each location: a silent wrong result; torch raises."""
    x = ember.arange(12.0).reshape(3, 4)
    o = ember.zeros(1).expand(3, 2)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        call(x, o)


@needs_torch
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_take_out_like_torch(op):
    """max(input, out=) and max(input, other, out=) were rejected (TypeError); torch accepts."""
    x = ember.tensor([[1.0, 5.0], [-2.0, 3.0]])
    o = ember.empty(0)
    assert getattr(ember, op)(x, out=o) is o
    assert o.item() == getattr(torch, op)(torch.tensor(x.tolist())).item()
    o2 = ember.empty(2, 2)
    assert getattr(ember, op)(x, x * -1, out=o2) is o2
    ref = getattr(torch, op)(torch.tensor(x.tolist()), -torch.tensor(x.tolist()))
    assert o2.tolist() == ref.tolist()


@needs_torch
@pytest.mark.parametrize("mdt,sdt", [("float16", "float32"), ("float32", "float64"),
                                     ("float64", "float32"), ("bfloat16", "float32")])
def test_normal_of_tensors_has_the_means_dtype(mdt, sdt):
    """normal(mean, std) promoted the two dtypes; torch draws in mean's dtype."""
    e = ember.normal(ember.zeros(3, dtype=getattr(ember, mdt)), ember.ones(3, dtype=getattr(ember, sdt)))
    t = torch.normal(torch.zeros(3, dtype=getattr(torch, mdt)), torch.ones(3, dtype=getattr(torch, sdt)))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] == mdt
    assert bool(ember.isfinite(e).all())
