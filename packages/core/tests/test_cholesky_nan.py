"""linalg.cholesky_ex / linalg.cholesky on matrices holding NaN, against PyTorch, for the
unblocked (n <= 32) and the LAPACK (n > 32) paths."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch


def _spd_with_nan(n, where, dtype):
    a = np.eye(n) * 2.0 + 0.1
    a[where] = np.nan
    return a.astype(dtype)


@needs_torch
@pytest.mark.parametrize("n", [8, 33, 100])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cholesky_ex_nan_reports_info_as_torch(n, upper, dtype):
    """A NaN on the diagonal (or one that reaches it) stops the factorization with info > 0 for
    every n, as LAPACK's potrf in torch (OpenBLAS's blocked potrf, used for n > 32, let the NaN
    through with info 0)."""
    spots = [(0, 0), (n // 2, n // 2), (n - 1, n - 1), (n - 1, 1), (1, n - 1)]
    for where in spots:
        a = _spd_with_nan(n, where, dtype)
        eL, einfo = ember.linalg.cholesky_ex(ember.tensor(a), upper=upper)
        tL, tinfo = torch.linalg.cholesky_ex(torch.tensor(a), upper=upper)
        assert einfo.item() == tinfo.item(), (where, einfo.item(), tinfo.item())
        k = tinfo.item()
        if k == 0:  # a NaN in the triangle that is not read
            np.testing.assert_allclose(eL.numpy(), tL.numpy(), rtol=1e-5, atol=1e-6)
            continue
        e, t = eL.numpy(), tL.numpy()
        if upper:
            e, t = e.T, t.T
        # the columns factored before the failure agree, and the failing diagonal keeps its NaN
        np.testing.assert_allclose(e[:, : k - 1], t[:, : k - 1], rtol=1e-5, atol=1e-6)
        assert np.isnan(e[k - 1, k - 1])
        with pytest.raises(torch.linalg.LinAlgError, match=f"order {k} "):
            torch.linalg.cholesky(torch.tensor(a), upper=upper)
        with pytest.raises(RuntimeError, match=f"order {k} "):
            ember.linalg.cholesky(ember.tensor(a), upper=upper)


@needs_torch
def test_cholesky_ex_nan_in_a_batch():
    n = 40
    good = np.eye(n) * 2.0 + 0.1
    a = np.stack([good, _spd_with_nan(n, (20, 20), "float64"), good])
    eL, einfo = ember.linalg.cholesky_ex(ember.tensor(a))
    tL, tinfo = torch.linalg.cholesky_ex(torch.tensor(a))
    assert einfo.tolist() == tinfo.tolist() == [0, 21, 0]
    np.testing.assert_allclose(eL.numpy()[[0, 2]], tL.numpy()[[0, 2]], rtol=1e-10)
    # a failure that is not a NaN (a negative pivot) keeps working for n > 32 too
    b = good.copy()
    b[35, 35] = -1.0
    assert ember.linalg.cholesky_ex(ember.tensor(b)).info.item() == \
        torch.linalg.cholesky_ex(torch.tensor(b)).info.item() == 36
