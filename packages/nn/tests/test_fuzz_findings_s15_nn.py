"""nn.functional findings of the s15 fuzzing round (fuzz_api.py --torch, seeds 1221-1225): the
shapes dropout3d and feature_alpha_dropout accept as PyTorch does, multilabel_margin_loss of an
empty batch, and adaptive_max_pool's dtype refusal. Explicit values, and PyTorch where it is
installed."""

from __future__ import annotations

import warnings

import ember
import ember.nn.functional as F
import numpy as np
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None


# ---- dropout3d of other than 4-D / 5-D input: a deprecation warning, read as unbatched ------------

def test_dropout3d_of_a_3d_input_masks_along_its_first_dim():
    ember.manual_seed(0)
    x = ember.ones(6, 3, 4)
    with pytest.warns(UserWarning, match="dropout3d"):
        r = F.dropout3d(x, 0.5, training=True)
    assert tuple(r.shape) == (6, 3, 4)
    rows = r.reshape(6, -1).tolist()
    for row in rows:  # one mask entry per index of dim 0, scaled by 1 / (1 - p)
        assert set(row) in ({0.0}, {2.0})
    with pytest.warns(UserWarning):
        assert F.dropout3d(x, 0.5, training=False) is x
    with pytest.warns(UserWarning):
        r = F.dropout3d(ember.ones(4), 0.5, training=True)
    assert tuple(r.shape) == (4,) and set(r.tolist()) <= {0.0, 2.0}
    with pytest.warns(UserWarning):
        assert F.dropout3d(ember.ones(()), 1.0).item() == 0.0
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="2 dimensions"):
        F.dropout3d(ember.ones(()), 0.5, training=True)
    # in place: the input itself holds the result
    y = ember.ones(5, 2)
    with pytest.warns(UserWarning):
        out = F.dropout3d(y, 0.5, training=True, inplace=True)
    assert out.tolist() == y.tolist()
    # 4-D and 5-D inputs: no warning, channels of (C, D, H, W) masked
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = F.dropout3d(ember.ones(3, 2, 2, 2), 0.5)
    assert all(len(set(c)) == 1 for c in r.reshape(3, -1).tolist())


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 3, 4), (2, 3, 4, 5, 6, 7), (0, 3)])
@pytest.mark.parametrize("training,p", [(False, 0.5), (True, 0.5), (True, 1.0), (True, 0.0)])
def test_dropout3d_shapes_match_torch(shape, training, p):
    def run(M):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return tuple(M.nn.functional.dropout3d(M.ones(shape), p, training=training).shape)
            except RuntimeError:
                return "RuntimeError"

    assert run(ember) == run(torch)


def test_feature_alpha_dropout_checks_the_shape_only_when_dropping():
    x = ember.arange(4.0)
    assert F.feature_alpha_dropout(x, 0.5, training=False) is x
    assert F.feature_alpha_dropout(ember.ones(()), 0.0, training=True).item() == 1.0
    with pytest.raises(RuntimeError):
        F.feature_alpha_dropout(x, 0.5, training=True)
    if torch is not None:
        assert torch.nn.functional.feature_alpha_dropout(torch.arange(4.0), 0.5).tolist() == \
            [0.0, 1.0, 2.0, 3.0]
        with pytest.raises(RuntimeError):
            torch.nn.functional.feature_alpha_dropout(torch.arange(4.0), 0.5, training=True)


# ---- multilabel_margin_loss of an empty batch ----------------------------------------------------

def test_multilabel_margin_loss_of_an_empty_batch():
    x = ember.zeros(0, 3)
    t = ember.zeros(0, 3, dtype=ember.int64)
    assert F.multilabel_margin_loss(x, t, reduction="none").shape == (0,)
    assert F.multilabel_margin_loss(x, t, reduction="sum").item() == 0.0
    assert np.isnan(F.multilabel_margin_loss(x, t).item())  # the mean of nothing
    # a non-empty batch is unchanged
    r = F.multilabel_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]), ember.tensor([[3, 0, -1, 1]]))
    assert abs(r.item() - 0.85) < 1e-6
    if torch is not None:
        tr = torch.nn.functional.multilabel_margin_loss(torch.zeros(0, 3),
                                                        torch.zeros(0, 3, dtype=torch.long),
                                                        reduction="none")
        assert tuple(tr.shape) == (0,)


# ---- adaptive_max_pool of an integer tensor ----------------------------------------------------------

def test_adaptive_max_pool_of_int_is_dtype_not_implemented():
    x = ember.ones(1, 2, 2, dtype=ember.int64)
    with pytest.raises(ember.DtypeNotImplementedError):
        F.adaptive_max_pool2d(x, 0)
    with pytest.raises(NotImplementedError):  # torch's class
        F.adaptive_max_pool2d(x, 0)
    if torch is not None:
        with pytest.raises(NotImplementedError):
            torch.nn.functional.adaptive_max_pool2d(torch.ones(1, 2, 2, dtype=torch.int64), 1)
