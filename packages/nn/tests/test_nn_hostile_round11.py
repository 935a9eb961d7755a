"""Hostile input, round 11 (nn part): empty batches in batch norm, degenerate CTC inputs and
huge interpolation sizes.

``BatchNorm1d/2d/3d`` (and ``F.batch_norm``) in training mode refused an input without elements
(a batch of 0 samples, or 0 positions) with "expected more than 1 value per channel when
training", so a data-parallel rank or a detection head that got no samples for a step crashed
the run. PyTorch returns an empty output of the input's shape and dtype, leaves the running
statistics alone (``num_batches_tracked`` still counts the step) and gives weight and bias zero
gradients; ember now does the same. A single value per channel is still refused.

``F.ctc_loss`` / ``nn.CTCLoss`` with an input length of 0 started the alpha recursion at time
step 0 anyway, so such a sample's loss was ``-log p(blank at t=0)`` (2.53 here) instead of 0 for
an empty target, and finite instead of inf (0 with ``zero_infinity``) for a non-empty one: a
silent wrong number. A log-probability of -inf (a masked class) turned the loss of a sample that
could not be aligned into NaN, and with ``zero_infinity=True`` into NaN instead of 0, with NaN
gradients. Both now give PyTorch's values. An empty ``log_probs`` (T = 0 or N = 0) failed with
"shape '[1]' is invalid for input of size 0" or "cat(): expected a non-empty list of Tensors";
it is now PyTorch's "log_probs tensor must not be empty", naming the shape.

``F.interpolate`` with a scale factor so large that the output size does not fit in int64
(``scale_factor=1e30``) failed in the kernel's binding with "an int sequence failed to unpack the
object at pos 1", not naming interpolate; it now says which size does not fit (a RuntimeError,
or a TypeError for an explicit ``size``, PyTorch's classes).

The rest of round 11: packages/core/tests/test_hostile_input_round11.py.
"""

import math

import ember as E
import ember.nn as nn
import ember.nn.functional as F
import pytest

# ---- batch norm of an empty batch ---------------------------------------------------------------


def _empty_batch_norm(cls, shape, dtype=E.float32):
    m = cls(3)
    with E.no_grad():
        m.weight.fill_(2.0)
        m.bias.fill_(0.5)
    x = E.zeros(*shape, dtype=dtype, requires_grad=True)
    y = m(x)
    y.sum().backward()
    return m, x, y


@pytest.mark.parametrize("cls, shape", [
    (nn.BatchNorm1d, (0, 3)), (nn.BatchNorm1d, (0, 3, 5)), (nn.BatchNorm2d, (0, 3, 2, 2)),
    (nn.BatchNorm2d, (2, 3, 0, 2)), (nn.BatchNorm3d, (0, 3, 2, 2, 2)),
])
def test_an_empty_batch_normalizes_to_an_empty_output(cls, shape):
    m, x, y = _empty_batch_norm(cls, shape)
    assert tuple(y.shape) == shape and y.dtype == E.float32
    assert m.running_mean.tolist() == [0.0, 0.0, 0.0]
    assert m.running_var.tolist() == [1.0, 1.0, 1.0]
    assert int(m.num_batches_tracked) == 1
    assert tuple(x.grad.shape) == shape
    assert m.weight.grad.tolist() == [0.0, 0.0, 0.0]
    assert m.bias.grad.tolist() == [0.0, 0.0, 0.0]


def test_an_empty_half_batch_keeps_its_dtype():
    _, _, y = _empty_batch_norm(nn.BatchNorm2d, (0, 3, 2, 2), E.float16)
    assert y.dtype == E.float16 and tuple(y.shape) == (0, 3, 2, 2)


def test_functional_batch_norm_of_an_empty_batch():
    rm, rv = E.zeros(3), E.ones(3)
    out = F.batch_norm(E.zeros(0, 3), rm, rv, training=True)
    assert tuple(out.shape) == (0, 3)
    assert rm.tolist() == [0.0, 0.0, 0.0] and rv.tolist() == [1.0, 1.0, 1.0]
    assert tuple(F.batch_norm(E.zeros(0, 3), None, None, training=True).shape) == (0, 3)
    assert tuple(nn.LazyBatchNorm1d()(E.zeros(0, 3)).shape) == (0, 3)


def test_an_empty_batch_then_a_real_one_averages_only_the_real_one():
    m = nn.BatchNorm1d(3, momentum=None)
    m(E.zeros(0, 3))
    m(E.tensor([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]))
    # cumulative average over 2 counted steps of which only the second had statistics
    assert m.running_mean.tolist() == [1.0, 1.5, 2.0]
    assert m.running_var.tolist() == [1.5, 1.5, 1.5]
    assert int(m.num_batches_tracked) == 2


def test_one_value_per_channel_is_still_refused():
    with pytest.raises(ValueError, match=r"expected more than 1 value per channel when "
                                         r"training, got input size \(1, 3\)"):
        nn.BatchNorm1d(3)(E.ones(1, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm2d(3)(E.ones(1, 3, 1, 1))


def test_torch_normalizes_an_empty_batch_the_same_way():
    torch = pytest.importorskip("torch")
    for shape in [(0, 3), (0, 3, 2, 2), (2, 3, 0, 2)]:
        cls = torch.nn.BatchNorm1d if len(shape) == 2 else torch.nn.BatchNorm2d
        m = cls(3)
        with torch.no_grad():
            m.weight.fill_(2.0)
            m.bias.fill_(0.5)
        x = torch.zeros(*shape, requires_grad=True)
        y = m(x)
        y.sum().backward()
        em, ex, ey = _empty_batch_norm(nn.BatchNorm1d if len(shape) == 2 else nn.BatchNorm2d,
                                       shape)
        assert tuple(y.shape) == tuple(ey.shape)
        assert m.running_mean.tolist() == em.running_mean.tolist()
        assert m.running_var.tolist() == em.running_var.tolist()
        assert int(m.num_batches_tracked) == int(em.num_batches_tracked)
        assert m.weight.grad.tolist() == em.weight.grad.tolist()
        assert m.bias.grad.tolist() == em.bias.grad.tolist()


# ---- CTC loss with empty inputs and masked classes ----------------------------------------------


def _log_probs(lib):
    # deterministic, not random: (T=4, N=2, C=3) in float64
    return (lib.arange(24, dtype=lib.float64).reshape(4, 2, 3).sin() * 2).log_softmax(2)


def _ctc(lib, functional, lp, il, tl, targets, **kw):
    x = lp.detach().clone().requires_grad_(True)
    loss = functional.ctc_loss(x, lib.tensor(targets), il, tl, **kw)
    loss.sum().backward()
    return [round(v, 6) for v in loss.reshape(-1).tolist()], x.grad


def test_a_sample_without_time_steps_has_loss_zero_for_an_empty_target():
    loss, grad = _ctc(E, F, _log_probs(E), [0, 4], [0, 1], [[1], [1]], reduction="none")
    assert loss[0] == 0.0
    assert grad[:, 0].abs().sum().item() == 0.0  # nothing of sample 0 was used
    assert loss[1] == pytest.approx(1.114533, abs=1e-6)


def test_a_sample_without_time_steps_cannot_emit_a_label():
    loss, _ = _ctc(E, F, _log_probs(E), [0, 4], [1, 1], [[1], [1]], reduction="none")
    assert loss[0] == math.inf
    loss, grad = _ctc(E, F, _log_probs(E), [0, 4], [1, 1], [[1], [1]], reduction="none",
                      zero_infinity=True)
    assert loss[0] == 0.0 and not grad.isnan().any().item()
    loss, _ = _ctc(E, F, _log_probs(E), [0, 4], [0, 1], [[1], [1]], reduction="mean")
    assert loss[0] == pytest.approx(1.114533 / 2, abs=1e-6)


def test_a_masked_class_gives_an_infinite_loss_not_nan():
    lp = _log_probs(E).clone()
    lp[:, 0, 1] = -math.inf  # sample 0's only label can never be emitted
    loss, grad = _ctc(E, F, lp, [4, 4], [1, 1], [[1], [1]], reduction="none")
    assert loss[0] == math.inf
    assert loss[1] == pytest.approx(1.114533, abs=1e-6)
    loss, grad = _ctc(E, F, lp, [4, 4], [1, 1], [[1], [1]], reduction="none",
                      zero_infinity=True)
    assert loss[0] == 0.0
    assert not grad.isnan().any().item()
    assert grad[:, 0].abs().sum().item() == 0.0
    # a masked class the target does not need changes nothing
    lp2 = _log_probs(E).clone()
    lp2[:, 0, 2] = -math.inf
    loss2, _ = _ctc(E, F, lp2, [4, 4], [1, 1], [[1], [1]], reduction="none")
    assert math.isfinite(loss2[0])


@pytest.mark.parametrize("shape", [(0, 1, 3), (4, 0, 3)])
def test_empty_log_probs_are_named(shape):
    n = shape[1]
    with pytest.raises(RuntimeError, match=r"^ctc_loss: log_probs tensor must not be empty, got "
                                           rf"shape \({shape[0]}, {n}, 3\)"):
        F.ctc_loss(E.zeros(*shape), E.zeros(n, 1, dtype=E.int64), [0] * n, [0] * n)


def test_torch_gives_the_same_ctc_losses():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    cases = [([0, 4], [0, 1], [[1], [1]], {}), ([0, 4], [1, 1], [[1], [1]], {}),
             ([0, 4], [1, 1], [[1], [1]], {"zero_infinity": True}),
             ([0, 4], [0, 1], [[1], [1]], {"reduction": "mean"}),
             ([0, 4], [0, 1], [[1], [1]], {"reduction": "sum"})]
    for il, tl, tg, kw in cases:
        kw = {"reduction": "none", **kw}
        assert _ctc(E, F, _log_probs(E), il, tl, tg, **kw)[0] == \
            _ctc(torch, tf, _log_probs(torch), il, tl, tg, **kw)[0]
    for zi in (False, True):
        elp, tlp = _log_probs(E).clone(), _log_probs(torch).clone()
        elp[:, 0, 1] = -math.inf
        tlp[:, 0, 1] = -math.inf
        assert _ctc(E, F, elp, [4, 4], [1, 1], [[1], [1]], reduction="none",
                    zero_infinity=zi)[0] == \
            _ctc(torch, tf, tlp, [4, 4], [1, 1], [[1], [1]], reduction="none",
                 zero_infinity=zi)[0]
    with pytest.raises(RuntimeError, match="log_probs tensor must not be empty"):
        tf.ctc_loss(torch.zeros(0, 1, 3), torch.zeros(1, 0, dtype=torch.long), [0], [0])


# ---- interpolate to a size past int64 -----------------------------------------------------------


def test_an_output_size_past_int64_is_named():
    with pytest.raises(RuntimeError, match=r"^interpolate: output size \[4000000000000000079538"
                                           r"499354624\] of input \(1, 1, 4\) \(scale_factor "
                                           r"1e\+30\) does not fit in int64"):
        F.interpolate(E.zeros(1, 1, 4), scale_factor=1e30)
    with pytest.raises(TypeError, match=r"^interpolate: output size \[9223372036854775808\]"):
        F.interpolate(E.zeros(1, 1, 4), size=2**63)
    assert F.interpolate(E.arange(2.0).reshape(1, 1, 2), scale_factor=2.0).tolist() == \
        [[[0.0, 0.0, 1.0, 1.0]]]


def test_torch_refuses_the_huge_scale_factor_with_a_runtime_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.nn.functional.interpolate(torch.zeros(1, 1, 4), scale_factor=1e30)


# ---- packing a batch of no sequences ------------------------------------------------------------
#
# ``pack_padded_sequence`` of a (T, 0, *) batch with no lengths failed with Python's "max() arg
# is an empty sequence" (a ValueError); it is now PyTorch's RuntimeError, naming the op.


@pytest.mark.parametrize("lengths", [[], E.tensor([], dtype=E.int64)])
def test_packing_a_batch_of_no_sequences_is_named(lengths):
    with pytest.raises(RuntimeError, match=r"^pack_padded_sequence: cannot pack empty tensors "
                                           r"\(a batch of 0 sequences, input shape \(3, 0, 1\)\)"):
        nn.utils.rnn.pack_padded_sequence(E.zeros(3, 0, 1), lengths, enforce_sorted=False)
    packed = nn.utils.rnn.pack_padded_sequence(E.arange(4.0).reshape(2, 2, 1), [2, 1])
    assert packed.data.reshape(-1).tolist() == [0.0, 1.0, 2.0]
    assert packed.batch_sizes.tolist() == [2, 1]


def test_torch_refuses_packing_no_sequences_with_a_runtime_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="Cannot pack empty tensors"):
        torch.nn.utils.rnn.pack_padded_sequence(torch.zeros(3, 0, 1), [], enforce_sorted=False)
