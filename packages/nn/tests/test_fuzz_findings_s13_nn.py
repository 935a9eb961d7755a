"""Findings of the differential fuzzer (fuzz_api.py --torch, seeds 1204-1215) in
ember.nn.functional, each fixed and pinned here with explicit values, and against PyTorch where
it is installed: loss dtypes, inputs PyTorch accepts (bool targets, 0-d or N-d triplets, a 0
output size), a clear error in place of a Python OverflowError."""

from __future__ import annotations

import math
import warnings

import ember
import ember.nn.functional as F
import pytest


def _name(dtype: object) -> str:
    return str(dtype).split(".")[-1]


def test_regression_losses_promote_a_0d_operand_in_full():
    # torch broadcasts input and target first, so a 0-d float64 target makes a float64 loss
    x, t = ember.tensor([[[0.25]]]), ember.tensor(0.5, dtype=ember.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the size-mismatch warning
        for f in (F.l1_loss, F.mse_loss, F.smooth_l1_loss):
            assert f(x, t).dtype == ember.float64 and f(t, x).dtype == ember.float64
            assert f(x, t, reduction="none").dtype == ember.float64
        # huber_loss keeps its input's dtype
        assert F.huber_loss(x, t).dtype == ember.float32 and F.huber_loss(t, x).dtype == ember.float64
    assert F.l1_loss(x, x.double()).dtype == ember.float64


def test_regression_losses_take_a_bool_target():
    x, t = ember.tensor([0.5, 2.0]), ember.tensor([True, False])
    assert F.mse_loss(x, t).item() == pytest.approx((0.25 + 4.0) / 2)
    assert F.smooth_l1_loss(x, t).item() == pytest.approx((0.125 + 1.5) / 2)
    assert F.huber_loss(x.half(), t).dtype == ember.float16
    expected = (math.log1p(math.exp(-0.5)) + math.log(2.0)) / 2  # targets 1 and 0
    assert F.soft_margin_loss(ember.tensor([0.5, -1.0]), t).item() == pytest.approx(expected)
    with pytest.raises(RuntimeError):  # as torch: l1_loss subtracts the bool target
        F.l1_loss(x, t)


def test_poisson_nll_loss_with_integer_target_keeps_the_input_dtype():
    x, t = ember.tensor([-0.6, -0.23, 0.14, 0.51], dtype=ember.float16), ember.tensor([4, 9, 0, 4])
    r = F.poisson_nll_loss(x, t, full=True, reduction="none")
    assert r.dtype == ember.float16
    assert r.float().tolist() == pytest.approx([6.1055, 15.656, 1.1504, 2.7832], abs=2e-3)
    assert F.poisson_nll_loss(x, t, full=True).dtype == ember.float16


def test_triplet_margin_loss_takes_any_rank_and_pairwise_distance_0d():
    a, b = ember.tensor(1.0), ember.tensor(3.0)
    assert F.pairwise_distance(a, b).item() == pytest.approx(2.0, abs=1e-5)
    assert F.pairwise_distance(a, b, keepdim=True).shape == ()
    assert F.triplet_margin_loss(a, b, a).item() == pytest.approx(3.0, abs=1e-5)
    assert F.triplet_margin_with_distance_loss(a, b, a).item() == pytest.approx(3.0, abs=1e-5)
    A = ember.arange(24.0).reshape(2, 3, 4) / 10
    r = F.triplet_margin_loss(A, A.flip(-1), A * 2, reduction="none")
    assert r.shape == (2, 3) and r[0, 0].item() == pytest.approx(1.0730, abs=1e-4)
    assert F.triplet_margin_loss(A, A.flip(-1), A * 2).item() == pytest.approx(0.2330, abs=1e-4)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_loss(A, A, a)


def test_adaptive_pools_with_a_zero_output_size_are_empty():
    x = ember.ones(2, 3, 4, 5, requires_grad=True)
    r = F.adaptive_avg_pool2d(x, (0, 2))
    assert r.shape == (2, 3, 0, 2) and r.dtype == ember.float32 and r.requires_grad
    r, i = F.adaptive_max_pool2d(x, 0, return_indices=True)
    assert r.shape == i.shape == (2, 3, 0, 0) and i.dtype == ember.int64
    assert F.adaptive_avg_pool1d(ember.ones(3, 4), 0).shape == (3, 0)
    assert F.adaptive_max_pool1d(ember.ones(1, 3, 4), 0).shape == (1, 3, 0)
    assert F.adaptive_avg_pool3d(ember.ones(2, 3, 4, 5), (1, 0, 2)).shape == (2, 1, 0, 2)
    assert F.adaptive_max_pool3d(ember.ones(1, 2, 3, 4, 5), (0, 0, 0)).shape == (1, 2, 0, 0, 0)
    r.sum().backward()  # an empty result: zero gradients
    assert x.grad is None or x.grad.abs().sum().item() == 0


def test_integer_hardtanh_with_an_infinite_bound_is_a_clear_error():
    x = ember.tensor([1, 2], dtype=ember.int32)
    with pytest.raises(RuntimeError, match="cannot be converted to the integer type"):
        F.hardtanh(x, -float("inf"), 1.0)
    assert F.hardtanh(x, -1, 1).tolist() == [1, 1]


def test_nn_findings_match_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss"):
            e = getattr(F, name)(ember.tensor([[0.25]]), ember.tensor(0.5, dtype=ember.float64))
            t = getattr(tf, name)(torch.tensor([[0.25]]), torch.tensor(0.5, dtype=torch.float64))
            assert _name(e.dtype) == _name(t.dtype) and e.item() == pytest.approx(t.item()), name
    for name in ("mse_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss"):
        e = getattr(F, name)(ember.tensor([0.5, -2.0]), ember.tensor([True, False]))
        t = getattr(tf, name)(torch.tensor([0.5, -2.0]), torch.tensor([True, False]))
        assert e.item() == pytest.approx(t.item(), rel=1e-6), name
    xs, ts = [-0.6, -0.23, 0.14, 0.51], [4, 9, 0, 4]
    e = F.poisson_nll_loss(ember.tensor(xs, dtype=ember.float16), ember.tensor(ts), full=True, reduction="none")
    t = tf.poisson_nll_loss(torch.tensor(xs, dtype=torch.float16), torch.tensor(ts), full=True, reduction="none")
    assert _name(e.dtype) == _name(t.dtype) and e.tolist() == t.tolist()
    A = torch.arange(24.0).reshape(2, 3, 4) / 10
    B = ember.arange(24.0).reshape(2, 3, 4) / 10
    assert F.triplet_margin_loss(B, B.flip(-1), B * 2, swap=True, p=1).item() == pytest.approx(
        tf.triplet_margin_loss(A, A.flip(-1), A * 2, swap=True, p=1).item(), rel=1e-5)
    assert tuple(tf.adaptive_max_pool2d(torch.ones(1, 2, 4, 4), (0, 2)).shape) == (1, 2, 0, 2)


def test_pdist_of_fewer_than_two_rows_is_empty():
    for shape in ((0, 3), (1, 3), (0, 0), (1, 0)):
        x = ember.ones(*shape, requires_grad=True)
        r = F.pdist(x)
        assert r.shape == (0,) and r.dtype == ember.float32 and r.requires_grad
    assert F.pdist(ember.ones(3, 0)).tolist() == [0.0, 0.0, 0.0]
    assert F.pdist(ember.tensor([[0.0, 0.0], [3.0, 4.0]])).tolist() == [5.0]


def test_dropout_of_an_empty_tensor_returns_it_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropout2d's 3-D input warning
        a = ember.zeros(2, 0, 5, dtype=ember.uint8)
        assert F.dropout2d(a, training=True) is a and a.dtype == ember.uint8
    e = ember.zeros(0, 3, dtype=ember.int8)
    assert F.dropout(e) is e and F.dropout1d(a) is a
    assert F.dropout2d(ember.zeros(0, 2, 3, 3)).shape == (0, 2, 3, 3)
    assert F.dropout(ember.ones(4, 5), 0.5).shape == (4, 5)


def test_float_arguments_past_int64_and_mixed_cosine_similarity_dtypes():
    # a Python int p or eps past int64 failed to convert to the norm's Scalar
    one = ember.ones(2, 3)
    # (torch overflows to inf; ember's p-norm is scaled by the largest |x|: ~max |x - y + eps|)
    r = F.pairwise_distance(one, ember.zeros(2, 3), 2 ** 63).tolist()
    assert r == pytest.approx([1.0 + 1e-6] * 2, rel=1e-6)
    assert F.normalize(one, 2 ** 63).tolist() == [[1.0] * 3] * 2
    assert F.pdist(ember.ones(3, 2), 2 ** 63).tolist() == [0.0] * 3
    r = F.cosine_similarity(ember.tensor([[1.0, 2.0]]), ember.tensor([[2.0, 1.0]]), eps=2 ** 70)
    assert r.item() == pytest.approx(4.0 / 2.0 ** 140, rel=1e-3)
    # a uint8 x1 with a float16 x2 computes in float16; two integer inputs are refused
    r = F.cosine_similarity(ember.tensor([[1, 2]], dtype=ember.uint8),
                            ember.tensor([[2.0, 1.0]], dtype=ember.float16))
    assert r.dtype == ember.float16 and r.item() == pytest.approx(0.8, abs=1e-3)
    with pytest.raises(RuntimeError, match="expected common dtype to be floating point"):
        F.cosine_similarity(ember.tensor([[1, 2]]), ember.tensor([[2, 1]]))


def test_instance_norm_counts_spatial_elements_with_an_empty_batch_or_channel_dim():
    # numel / (N C) read 0 spatial elements when N or C was 0
    assert F.instance_norm(ember.ones(2, 0, 5)).shape == (2, 0, 5)
    assert F.instance_norm(ember.ones(0, 3, 5)).shape == (0, 3, 5)
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(ember.ones(2, 3, 1))


def test_local_response_norm_of_empty_and_integer_inputs():
    for shape in ((2, 0, 5), (0, 3, 5), (2, 3, 0)):
        assert F.local_response_norm(ember.ones(*shape), 2).shape == shape
    r = F.local_response_norm(ember.arange(12).reshape(1, 3, 4), 2)
    assert r.dtype == ember.float32
    assert r[0, 2].tolist() == pytest.approx([7.9761, 8.9644, 9.9493, 10.9304], abs=1e-4)
    assert F.local_response_norm(ember.ones(1, 3, 4, dtype=ember.float16), 2).dtype == ember.float16


def test_max_unpool_of_an_empty_batch():
    r = F.max_unpool1d(ember.zeros(0, 3), ember.zeros(0, 3, dtype=ember.int64), 2)
    assert r.shape == (0, 6)
    r = F.max_unpool2d(ember.zeros(0, 2, 2, 2), ember.zeros(0, 2, 2, 2, dtype=ember.int64), 2)
    assert r.shape == (0, 2, 4, 4)
    r = F.max_unpool1d(ember.tensor([[[5.0, 6.0]]]), ember.tensor([[[1, 2]]]), 2)
    assert r.tolist() == [[[0.0, 5.0, 6.0, 0.0]]]


def test_adaptive_max_pools_with_a_zero_output_size_still_check_the_dtype():
    with pytest.raises(TypeError, match="adaptive_max_pool: expected a floating-point input, got bool"):
        F.adaptive_max_pool1d(ember.ones(1, 2, 4, dtype=ember.bool), 0)
    # torch's average pool returns an empty result of any dtype here
    r = F.adaptive_avg_pool2d(ember.ones(1, 2, 4, 4, dtype=ember.int64), (0, 1))
    assert r.shape == (1, 2, 0, 1) and r.dtype == ember.int64
