"""Hostile input, round 12 (nn part).

``F.batch_norm`` with a negative ``eps`` normalized by ``sqrt(var + eps)`` of a negative number:
every output was NaN, silently; torch refuses it with a ValueError, and so does ember now (a NaN
eps too, which gave NaN the same way).

``F.glu(x, dim)`` with a dim out of range failed with a bare ``IndexError: tuple index out of
range`` that named neither glu nor the dim; it is now an IndexError naming both and the valid
range, as torch's.

``F.pixel_shuffle`` / ``pixel_unshuffle`` with a zero or negative factor said the channels (or
height and width) "must be divisible by upscale_factor^2 = 4" for a factor of -2, which they
were; the message now says the factor must be positive, as torch's does.

``prune.l1_unstructured(..., amount=nan)`` failed with "cannot convert float NaN to integer"
(torch's message too), naming neither the argument nor what it must be; it is now the same
ValueError as for an amount outside [0, 1].

``Module.load_state_dict`` of complex values into a real parameter (a checkpoint of a complex
model loaded into its real twin) dropped the imaginary parts without a word; torch's ``copy_``
warns (once per process). Each such key now warns, naming the key and both dtypes.

The rest of round 12: packages/core/tests/test_hostile_input_round12.py.
"""

import ember as E
import pytest

F = E.nn.functional


# ---- batch_norm's eps ----------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [-1.0, -1e-5, float("nan")])
@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_refuses_a_negative_eps(eps, training):
    x = E.tensor([[1.0, 2.0], [3.0, 6.0]])
    rm, rv = E.zeros(2), E.ones(2)
    with pytest.raises(ValueError, match=r"batch_norm: eps must be non-negative, but got "):
        F.batch_norm(x, rm, rv, training=training, eps=eps)  # was all NaN
    assert rm.tolist() == [0.0, 0.0] and rv.tolist() == [1.0, 1.0]  # nothing updated
    with pytest.raises(ValueError, match="eps must be non-negative"):
        E.nn.BatchNorm1d(2, eps=eps)(x)


def test_batch_norm_with_eps_zero_still_normalizes():
    x = E.tensor([[1.0, 2.0], [3.0, 6.0]])
    assert F.batch_norm(x, None, None, training=True, eps=0.0).tolist() == [[-1.0, -1.0],
                                                                           [1.0, 1.0]]


def test_torch_refuses_a_negative_batch_norm_eps():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="eps must be non-negative"):
        torch.nn.functional.batch_norm(torch.ones(2, 2), torch.zeros(2), torch.ones(2), eps=-1.0)


# ---- glu's dim -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [1, 3, -2])
def test_glu_names_a_dim_out_of_range(dim):
    with pytest.raises(IndexError, match=rf"glu: dim {dim} is out of range for input of shape "
                                         r"\(4,\) \(expected to be in range of \[-1, 0\]\)"):
        F.glu(E.ones(4), dim=dim)  # was "tuple index out of range"
    with pytest.raises(IndexError, match="glu: dim"):
        E.nn.GLU(dim)(E.ones(4))
    assert F.glu(E.tensor([[2.0, 0.0]]), dim=-1).tolist() == [[1.0]]
    assert F.glu(E.tensor([[2.0], [0.0]]), dim=0).tolist() == [[1.0]]


def test_torch_glu_dim_out_of_range_is_an_index_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.nn.functional.glu(torch.ones(4), dim=3)


# ---- pixel_shuffle / pixel_unshuffle factors -----------------------------------------------------


@pytest.mark.parametrize("r", [0, -1, -2])
def test_pixel_shuffle_factors_must_be_positive(r):
    x = E.arange(16.0).reshape(1, 4, 2, 2)
    with pytest.raises(RuntimeError, match=rf"pixel_shuffle: expects a positive upscale_factor, "
                                           rf"but got {r}"):
        F.pixel_shuffle(x, r)
    with pytest.raises(RuntimeError, match=rf"pixel_unshuffle: expects a positive "
                                           rf"downscale_factor, but got {r}"):
        F.pixel_unshuffle(x, r)
    with pytest.raises(RuntimeError, match="positive upscale_factor"):
        E.nn.PixelShuffle(r)(x)
    # a positive factor that does not divide still names the sizes
    with pytest.raises(RuntimeError, match=r"the 4 channels of input \(1, 4, 2, 2\) must be "
                                           r"divisible by upscale_factor\^2 = 9"):
        F.pixel_shuffle(x, 3)


def test_pixel_shuffle_round_trip_still_works():
    x = E.arange(16.0).reshape(1, 4, 2, 2)
    y = F.pixel_shuffle(x, 2)
    assert y.shape == (1, 1, 4, 4)
    assert y[0, 0, 0].tolist() == [0.0, 4.0, 1.0, 5.0]
    assert F.pixel_unshuffle(y, 2).tolist() == x.tolist()


def test_torch_refuses_the_same_factors():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="positive upscale_factor"):
        torch.nn.functional.pixel_shuffle(torch.ones(1, 4, 2, 2), -2)
    with pytest.raises(RuntimeError, match="positive downscale_factor"):
        torch.nn.functional.pixel_unshuffle(torch.ones(1, 4, 2, 2), 0)


# ---- prune's amount ------------------------------------------------------------------------------


@pytest.mark.parametrize("amount", [float("nan"), 1.5, -0.5])
def test_a_prune_amount_outside_the_unit_interval_is_named(amount):
    m = E.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=rf"amount={amount} should either be a float in the "
                                         r"range \[0, 1\] or a non-negative integer"):
        E.nn.utils.prune.l1_unstructured(m, "weight", amount=amount)
    assert not hasattr(m, "weight_mask")  # nothing half-applied
    E.nn.utils.prune.l1_unstructured(m, "weight", amount=0.5)
    assert int(m.weight_mask.sum()) == 2


# ---- complex checkpoint values into real parameters ----------------------------------------------


def test_loading_complex_values_into_a_real_parameter_warns_naming_the_key():
    m = E.nn.Linear(1, 1)
    with pytest.warns(UserWarning, match=r"for weight: copying the complex ember.complex64 values "
                                         r"of the state dict into a parameter of dtype "
                                         r"ember.float32 discards their imaginary parts"):
        m.load_state_dict({"weight": E.tensor([[3 + 1j]]), "bias": E.zeros(1)})
    assert m.weight.tolist() == [[3.0]]


@pytest.mark.filterwarnings("ignore:Complex modules are a new feature")
def test_loading_real_or_complex_into_complex_does_not_warn():
    import warnings

    m = E.nn.Linear(1, 1).to(E.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.load_state_dict({"weight": E.tensor([[3 + 1j]]), "bias": E.zeros(1)})
        E.nn.Linear(1, 1).load_state_dict({"weight": E.ones(1, 1), "bias": E.zeros(1)})
    assert m.weight.tolist() == [[3 + 1j]]
