"""F.grouped_mm (torch 2.13's mixture-of-experts product): the four operand layouts against
NumPy (and torch, when installed), gradients checked numerically in float64, bias / out_dtype,
and bad offsets refused with the op's name."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest

RNG = np.random.default_rng(0)
# name: (mat_a shape, mat_b shape, offs); inner sizes are multiples of 4 (torch's CPU kernel
# wants 16-byte strides)
CASES = {
    "2d_3d": ((6, 8), (2, 8, 4), [2, 6]),
    "2d_3d_tail": ((7, 8), (2, 8, 4), [0, 4]),
    "2d_2d": ((4, 8), (8, 4), [4, 8]),
    "3d_2d": ((2, 4, 8), (8, 8), [4, 8]),
    "3d_3d": ((2, 4, 8), (2, 8, 4), None),
}


def _reference(a: np.ndarray, b: np.ndarray, offs: list[int] | None) -> np.ndarray:
    if offs is None:
        return a @ b
    spans = list(zip([0] + offs[:-1], offs))
    if a.ndim == 2 and b.ndim == 3:
        out = np.zeros((a.shape[0], b.shape[-1]), a.dtype)
        for i, (s, e) in enumerate(spans):
            out[s:e] = a[s:e] @ b[i]
        return out
    if a.ndim == 2:
        return np.stack([a[:, s:e] @ b[s:e] for s, e in spans])
    return np.concatenate([a[i] @ b[:, s:e] for i, (s, e) in enumerate(spans)], 1)


def _offs(offs: list[int] | None) -> ember.Tensor | None:
    return None if offs is None else ember.tensor(offs, dtype=ember.int32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_layouts_match_numpy_and_torch(case):
    sa, sb, offs = CASES[case]
    a = RNG.standard_normal(sa).astype(np.float32)
    b = RNG.standard_normal(sb).astype(np.float32)
    got = F.grouped_mm(ember.from_numpy(a), ember.from_numpy(b), offs=_offs(offs)).numpy()
    np.testing.assert_allclose(got, _reference(a, b, offs), rtol=1e-5, atol=1e-5)
    torch = pytest.importorskip("torch")
    if case != "2d_3d_tail":  # torch leaves the rows past offs[-1] unspecified
        t_offs = None if offs is None else torch.tensor(offs, dtype=torch.int32)
        want = torch.nn.functional.grouped_mm(torch.from_numpy(a), torch.from_numpy(b),
                                              offs=t_offs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["2d_3d", "2d_2d", "3d_2d"])
def test_gradients_in_float64(case):
    sa, sb, offs = CASES[case]
    a = ember.from_numpy(RNG.standard_normal(sa)).requires_grad_()
    b = ember.from_numpy(RNG.standard_normal(sb)).requires_grad_()
    assert ember.autograd.gradcheck(lambda x, y: F.grouped_mm(x, y, offs=_offs(offs)), (a, b))


def test_bias_and_out_dtype():
    a, b = ember.ones(3, 2, dtype=ember.bfloat16), ember.ones(2, 2, 4, dtype=ember.bfloat16)
    out = F.grouped_mm(a, b, offs=_offs([1, 3]), bias=ember.arange(4.0).to(ember.bfloat16),
                       out_dtype=ember.float32)
    assert out.dtype == ember.float32
    np.testing.assert_array_equal(out.numpy(), np.full((3, 4), 2.0) + np.arange(4.0))


def test_bad_offsets_are_refused():
    a, b = ember.ones(6, 5), ember.ones(2, 5, 3)
    with pytest.raises(ValueError, match="grouped_mm: offs is required"):
        F.grouped_mm(a, b)
    with pytest.raises(ValueError, match="1-D int32"):
        F.grouped_mm(a, b, offs=ember.tensor([2, 6]))
    with pytest.raises(ValueError, match="must increase"):
        F.grouped_mm(a, b, offs=_offs([4, 2]))
    with pytest.raises(ValueError, match="2 offsets for 3 groups"):
        F.grouped_mm(a, ember.ones(3, 5, 3), offs=_offs([2, 6]))
    with pytest.raises(ValueError, match="inner size"):
        F.grouped_mm(a, ember.ones(2, 4, 3), offs=_offs([2, 6]))
    with pytest.raises(ValueError, match="offs must be None"):
        F.grouped_mm(ember.ones(2, 3, 5), ember.ones(2, 5, 4), offs=_offs([1, 2]))
