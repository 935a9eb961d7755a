"""nn-level findings of the s14 fuzz round (fuzz_api.py --torch, seeds 1216-), pinned with
explicit values and against PyTorch where it is installed."""

from __future__ import annotations

import math

import ember
import ember.nn.functional as F
import pytest

try:
    import torch
except ImportError:
    torch = None


def test_softsign_of_complex_input():
    x = ember.tensor([1 + 2j, -3j])
    r = F.softsign(x)
    assert r.dtype == ember.complex64
    want = [(1 + 2j) / (1 + abs(1 + 2j)), -3j / 4]
    for g, w in zip(r.tolist(), want):
        assert g == pytest.approx(w, rel=1e-6)
    if torch is not None:
        t = torch.nn.functional.softsign(torch.tensor([1 + 2j, -3j]))
        for g, w in zip(r.tolist(), t.tolist()):
            assert g == pytest.approx(w, rel=1e-6)


def test_pdist_and_cdist_of_half_inputs_as_torch():
    for dt in (ember.float16, ember.bfloat16):
        a = ember.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]], dtype=dt)
        with pytest.raises(NotImplementedError, match="pdist"):
            F.pdist(a)
        with pytest.raises(NotImplementedError, match="cdist"):
            ember.cdist(a, a)
        assert F.pdist(a[:1]).shape == (0,)  # no pairs: nothing to compute
        big = a.repeat(10, 1)  # more than 25 rows: the matrix-product path takes half dtypes
        d = ember.cdist(big, big)
        assert d.dtype == dt and d[0, 1].item() == pytest.approx(5.0, rel=1e-2)


def test_dropout_p0_in_place_on_an_expanded_tensor():
    x = ember.zeros(3).expand(4, 3)
    assert F.dropout(x, 0.0, True, inplace=True) is x  # nothing to write
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        F.dropout(x, 0.5, True, inplace=True)
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.nn.functional.dropout(torch.zeros(3).expand(4, 3), 0.5, True, inplace=True)


def test_soft_margin_loss_with_an_unsigned_target():
    # -target of a uint8 255 wrapped to 1 before the product
    x = ember.full((3, 1), -0.15, dtype=ember.float64)
    y = ember.tensor([0, 0, 255], dtype=ember.uint8).reshape(3, 1)
    want = (2 * math.log(2.0) + math.log1p(math.exp(255 * 0.15))) / 3
    assert F.soft_margin_loss(x, y).item() == pytest.approx(want, rel=1e-12)
    if torch is not None:
        t = torch.nn.functional.soft_margin_loss(torch.full((3, 1), -0.15, dtype=torch.float64),
                                                 torch.tensor([0, 0, 255], dtype=torch.uint8)
                                                 .reshape(3, 1))
        assert F.soft_margin_loss(x, y).item() == pytest.approx(t.item(), rel=1e-12)


def test_silu_of_complex_input():
    z = ember.tensor([1 + 2j, -0.5j])
    r = F.silu(z)
    for g, v in zip(r.tolist(), [1 + 2j, -0.5j]):
        assert g == pytest.approx(v / (1 + complex(math.e) ** (-v)), rel=1e-6)
    if torch is not None:
        t = torch.nn.functional.silu(torch.tensor([1 + 2j, -0.5j]))
        for g, w in zip(r.tolist(), t.tolist()):
            assert g == pytest.approx(w, rel=1e-6)
