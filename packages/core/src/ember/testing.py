"""``ember.testing``: the checks programs and their tests call, as ``torch.testing`` has them:
:func:`assert_close` (tensors, NumPy arrays, numbers, and sequences/mappings of them, with
per-dtype default tolerances) and :func:`make_tensor` (a random tensor in a range).

>>> import ember
>>> ember.testing.assert_close(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.0 + 1e-7]))
>>> try:
...     ember.testing.assert_close(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.5]))
... except AssertionError as e:
...     print(str(e).splitlines()[0])
Tensor-likes are not close!
"""

from __future__ import annotations

import collections.abc
import numbers
from typing import Any, Callable

import numpy as np

from ember import _C
from ember._C import Tensor

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# (rtol, atol) when neither is given, by dtype; integer and bool types compare exactly
_DEFAULT_TOLERANCES = {
    _C.float16: (1e-3, 1e-5),
    _C.bfloat16: (1.6e-2, 1e-5),
    _C.float32: (1.3e-6, 1e-5),
    _C.float64: (1e-7, 1e-7),
    _C.complex64: (1.3e-6, 1e-5),
    _C.complex128: (1e-7, 1e-7),
}
_NUMPY_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-5), np.dtype(np.float32): (1.3e-6, 1e-5),
                     np.dtype(np.float64): (1e-7, 1e-7), np.dtype(np.complex64): (1.3e-6, 1e-5),
                     np.dtype(np.complex128): (1e-7, 1e-7)}


class _Mismatch(AssertionError):
    pass


def _tolerances(dtype: Any) -> tuple[float, float]:
    if isinstance(dtype, np.dtype):
        return _NUMPY_TOLERANCES.get(dtype, (0.0, 0.0))
    return _DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


def _to_numpy(t: Tensor) -> np.ndarray:
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype is _C.bfloat16:
        t = t.float()
    return np.array(t.numpy(), copy=True)


def _fail(message: str, msg: Any, path: str) -> None:
    if path:
        message = f"{message}\n\nThe failure occurred for item {path}"
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise _Mismatch(message)


def _compare_values(a: np.ndarray, e: np.ndarray, rtol: float, atol: float, equal_nan: bool,
                    scalars: bool, msg: Any, path: str) -> None:
    exact = rtol == 0 and atol == 0
    integral = a.dtype.kind in "iub" and e.dtype.kind in "iub"
    if integral:
        # as integers: the absolute difference stays integral, the relative one is float32
        ai, ei = a.astype(np.int64), e.astype(np.int64)
        diff = np.abs(ai - ei)
        ok = diff <= atol + rtol * np.abs(ei)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = diff.astype(np.float32) / np.abs(ei).astype(np.float32)
    else:
        common = np.result_type(a.dtype, e.dtype) if a.dtype.kind == "f" or e.dtype.kind == "f" \
            else np.dtype(np.float64)
        if a.dtype.kind == "c" or e.dtype.kind == "c":  # complex: |a - e| against |e|
            common = np.result_type(a.dtype, e.dtype, np.complex64)
        elif common.kind != "f":
            common = np.dtype(np.float64)
        af, ef = a.astype(common), e.astype(common)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            diff = np.abs(af - ef)
            ok = (diff <= atol + rtol * np.abs(ef)) & np.isfinite(diff)
            rel = diff / np.abs(ef)
        ok |= af == ef  # equal infinities
        if equal_nan:
            ok |= np.isnan(af) & np.isnan(ef)
    if bool(np.all(ok)):
        return
    bad = ~ok
    word = "close" if not exact else "equal"
    if scalars:
        lines = [f"Scalars are not {word}!", "", f"Expected {e.item()} but got {a.item()}.",
                 f"Absolute difference: {diff.item()}" + ("" if exact else f" (up to {atol} allowed)"),
                 f"Relative difference: {rel.item()}" + ("" if exact else f" (up to {rtol} allowed)")]
    else:
        d = np.where(bad, np.nan_to_num(diff.astype(np.float64), nan=np.inf), -1)
        r = np.where(bad, np.nan_to_num(rel, nan=np.inf), -1)
        ia, ir = np.unravel_index(int(np.argmax(d)), d.shape), np.unravel_index(int(np.argmax(r)), r.shape)
        n, total = int(bad.sum()), bad.size
        lines = [f"Tensor-likes are not {word}!", "",
                 f"Mismatched elements: {n} / {total} ({100.0 * n / total:.1f}%)",
                 f"Greatest absolute difference: {diff[ia]} at index {tuple(int(i) for i in ia)}"
                 + ("" if exact else f" (up to {atol} allowed)"),
                 f"Greatest relative difference: {rel[ir]} at index {tuple(int(i) for i in ir)}"
                 + ("" if exact else f" (up to {rtol} allowed)")]
    _fail("\n".join(lines), msg, path)


def _compare(actual: Any, expected: Any, path: str, opts: dict[str, Any]) -> None:
    msg = opts["msg"]
    tensor_like = (Tensor, np.ndarray)
    if actual is None or expected is None:
        if actual is not expected:
            _fail(f"None mismatch: {actual} is not {expected}", msg, path)
        return
    if _is_sparse(actual) or _is_sparse(expected):
        _compare_sparse(actual, expected, path, opts)
        return
    if isinstance(actual, tensor_like) or isinstance(expected, tensor_like):
        _compare_tensors(actual, expected, path, opts)
        return
    if isinstance(actual, (bool, numbers.Number)) and isinstance(expected, (bool, numbers.Number)):
        if type(actual) is not type(expected) and opts["check_dtype"]:
            _fail(f"The (d)types do not match: {type(actual)} != {type(expected)}.", msg, path)
        rtol, atol = opts["rtol"], opts["atol"]
        if rtol is None:  # Python floats are float64 values
            rtol, atol = (1e-7, 1e-7) if isinstance(actual, float) or isinstance(expected, float) \
                else (0.0, 0.0)
        _compare_values(np.asarray(actual), np.asarray(expected), rtol, atol, opts["equal_nan"], True,
                        msg, path)
        return
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        ka, ke = list(actual.keys()), list(expected.keys())
        if set(ka) != set(ke):
            missing = sorted(set(ke) - set(ka), key=repr)
            extra = sorted(set(ka) - set(ke), key=repr)
            _fail(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                  f"{missing}\nAdditional keys in the actual mapping: {extra}", msg, path)
        for k in ke:
            _compare(actual[k], expected[k], f"{path}[{k!r}]", opts)
        return
    seq = collections.abc.Sequence
    if isinstance(actual, seq) and isinstance(expected, seq) and \
            not isinstance(actual, (str, bytes)) and not isinstance(expected, (str, bytes)):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", msg, path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{path}[{i}]", opts)
        return
    raise TypeError(
        f"assert_close: no comparison for inputs of types {type(actual).__name__} and "
        f"{type(expected).__name__}" + (f" at item {path}" if path else "") + " (expected "
        "tensors, NumPy arrays, numbers, or sequences/mappings of them)"
    )


def _compare_tensors(actual: Any, expected: Any, path: str, opts: dict[str, Any]) -> None:
    msg = opts["msg"]
    if type(actual) is not type(expected) and not (
            opts["allow_subclasses"] and isinstance(actual, Tensor) and isinstance(expected, Tensor)):
        if not (isinstance(actual, Tensor) and isinstance(expected, Tensor)):
            raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} "
                            f"and {type(expected)}.")
        _fail(f"The values for attribute 'type' do not match: {type(actual)} != {type(expected)}.",
              msg, path)
    if tuple(actual.shape) != tuple(expected.shape):
        _fail(f"The values for attribute 'shape' do not match: {_shape(actual)} != "
              f"{_shape(expected)}.", msg, path)
    if isinstance(actual, Tensor):
        if opts["check_device"] and actual.device != expected.device:
            _fail(f"The values for attribute 'device' do not match: {actual.device} != "
                  f"{expected.device}.", msg, path)
        if opts["check_stride"] and tuple(actual.stride()) != tuple(expected.stride()):
            _fail(f"The values for attribute 'stride()' do not match: {tuple(actual.stride())} != "
                  f"{tuple(expected.stride())}.", msg, path)
    if opts["check_dtype"] and actual.dtype != expected.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.",
              msg, path)
    rtol, atol = opts["rtol"], opts["atol"]
    if rtol is None:
        ra, aa = _tolerances(actual.dtype)
        re_, ae = _tolerances(expected.dtype)
        rtol, atol = max(ra, re_), max(aa, ae)
    a = _to_numpy(actual) if isinstance(actual, Tensor) else np.asarray(actual)
    e = _to_numpy(expected) if isinstance(expected, Tensor) else np.asarray(expected)
    _compare_values(a, e, rtol, atol, opts["equal_nan"], a.ndim == 0, msg, path)


def _is_sparse(x: Any) -> bool:
    return type(x).__name__ == "SparseTensor" and type(x).__module__ == "ember.sparse"


def _compare_sparse(actual: Any, expected: Any, path: str, opts: dict[str, Any]) -> None:
    """Sparse tensors (ember.sparse) of the same layout: COO tensors coalesced, their indices
    equal exactly and their values close; CSR tensors by crow/col indices and values."""
    msg = opts["msg"]
    la, le = getattr(actual, "layout", type(actual)), getattr(expected, "layout", type(expected))
    if la != le:
        _fail(f"The values for attribute 'layout' do not match: {la} != {le}.", msg, path)
    if tuple(actual.shape) != tuple(expected.shape):
        _fail(f"The values for attribute 'shape' do not match: {tuple(actual.shape)} != "
              f"{tuple(expected.shape)}.", msg, path)
    exact = dict(opts, rtol=0.0, atol=0.0, check_dtype=False)
    if actual.is_sparse:
        a, e = actual.coalesce(), expected.coalesce()
        if a._nnz() != e._nnz():
            _fail(f"The number of specified values in sparse COO tensors does not match: "
                  f"{a._nnz()} != {e._nnz()}", msg, path)
        _compare_tensors(a._indices(), e._indices(), path + " (sparse COO indices)", exact)
        _compare_tensors(a._values().detach(), e._values().detach(),
                         path + " (sparse COO values)", opts)
        return
    if actual.is_sparse_csr:
        kind, ends, inner = "CSR", actual.crow_indices, expected.crow_indices
        name, cols, ecols = "crow_indices", actual.col_indices, expected.col_indices
        iname = "col_indices"
    else:
        kind, ends, inner = "CSC", actual.ccol_indices, expected.ccol_indices
        name, cols, ecols = "ccol_indices", actual.row_indices, expected.row_indices
        iname = "row_indices"
    _compare_tensors(ends(), inner(), f"{path} (sparse {kind} {name})", exact)
    _compare_tensors(cols(), ecols(), f"{path} (sparse {kind} {iname})", exact)
    _compare_tensors(actual.values().detach(), expected.values().detach(),
                     f"{path} (sparse {kind} values)", opts)


def _shape(t: Any) -> str:
    return repr(t.shape) if isinstance(t, Tensor) else repr(tuple(t.shape))


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raises AssertionError unless ``actual`` and ``expected`` are close: same type, shape,
    device and dtype (each check can be turned off), and ``|actual - expected| <= atol + rtol *
    |expected|`` elementwise. Without ``rtol``/``atol`` (give both or neither) the tolerances
    follow the dtypes (float32: 1.3e-6 and 1e-5; float64: 1e-7 and 1e-7; float16, bfloat16
    looser; integers and bools exactly). Sequences and mappings are compared item by item.
    ``msg`` replaces the message, or (a callable) rewrites it.

    >>> import ember
    >>> ember.testing.assert_close({"w": ember.ones(2)}, {"w": ember.ones(2)}, rtol=0, atol=0)
    """
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{missing}.")
    opts = dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
                check_device=check_device, check_dtype=check_dtype, check_stride=check_stride,
                msg=msg)
    try:
        _compare(actual, expected, "", opts)
    except _Mismatch as exc:
        raise AssertionError(str(exc)) from None


def make_tensor(
    *shape: Any,
    dtype: Any,
    device: Any = None,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """A tensor of the shape filled with values drawn uniformly from ``[low, high)`` (default
    ``[-9, 9)``; integers from ``[low, high)``, bools at random), from the default generator.

    >>> import ember
    >>> t = ember.testing.make_tensor(2, 3, dtype=ember.float32, low=0, high=1)
    >>> tuple(t.shape), bool(((t >= 0) & (t < 1)).all())
    ((2, 3), True)
    """
    import ember

    if len(shape) == 1 and isinstance(shape[0], (tuple, list, ember.Size)):
        shape = tuple(shape[0])
    if low is not None and high is not None and low > high:
        raise ValueError(f"make_tensor: low ({low}) must not exceed high ({high})")
    if dtype is ember.bool:
        out = ember.randint(0, 2, shape, device=device).to(ember.bool)
    elif dtype in (ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64):
        lo = -9 if low is None else int(np.ceil(low))
        hi = 10 if high is None else int(np.ceil(high))
        if dtype is ember.uint8:
            lo = max(lo, 0)
        if hi <= lo:
            hi = lo + 1
        out = ember.randint(lo, hi, shape, dtype=dtype, device=device)
    else:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        out = (ember.rand(shape, device=device) * (hi - lo) + lo).to(dtype)
    if exclude_zero:
        tiny = 1 if not out.is_floating_point() else float(ember.finfo(dtype).tiny)
        out = ember.where(out == 0, ember.full_like(out, tiny), out)
    if noncontiguous and out.numel() > 1:
        doubled = ember.repeat_interleave(out.flatten(), 2).reshape(*shape[:-1], shape[-1] * 2)
        out = doubled[..., ::2]
    if requires_grad:
        out.requires_grad_(True)
    return out


# assert_allclose's own defaults (looser than assert_close's for float32 and float64)
_ALLCLOSE_TOLERANCES = {_C.float16: (1e-3, 1e-3), _C.float32: (1e-4, 1e-5),
                        _C.float64: (1e-5, 1e-8)}


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None,
                    atol: float | None = None, equal_nan: bool = True, msg: str = "") -> None:
    """Deprecated (as in PyTorch since 1.12; use :func:`assert_close`): ``assert_close`` with
    NaNs equal by default, dtypes not compared, non-tensors made tensors (``expected`` in
    ``actual``'s dtype) and, when neither tolerance is given, rtol/atol of (1e-3, 1e-3) for
    float16, (1e-4, 1e-5) for float32, (1e-5, 1e-8) for float64 (the largest of both inputs'),
    else exact. Warns FutureWarning.
    """
    import warnings

    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed "
                  "in a future release. Please use `torch.testing.assert_close()` instead. You can "
                  "find detailed upgrade instructions in "
                  "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = _C.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = _C.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, check_stride=False, msg=msg or None)
