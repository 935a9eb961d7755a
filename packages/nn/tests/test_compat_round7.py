"""Regression tests for what the seventh round of compat programs found: complex parameters
(nn.Parameter of a complex tensor, and the optimizers updating one as the pair of reals it
holds, as PyTorch does), each compared with torch."""

from __future__ import annotations

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_parameter_accepts_complex_tensors():
    p = ember.nn.Parameter(ember.zeros(3, dtype=ember.complex64))
    assert p.requires_grad and p.dtype == ember.complex64
    with pytest.raises(RuntimeError, match="floating point and complex"):
        ember.nn.Parameter(ember.zeros(3, dtype=ember.int64))
    assert not ember.nn.Parameter(ember.zeros(3, dtype=ember.int64), requires_grad=False).requires_grad


_OPTIMIZERS = [
    ("Adam", {}), ("AdamW", {"weight_decay": 0.1}), ("Adam", {"amsgrad": True}),
    ("RMSprop", {"centered": True, "momentum": 0.5}), ("Adagrad", {"initial_accumulator_value": 0.3}),
    ("Adadelta", {}), ("Adamax", {}), ("NAdam", {}), ("RAdam", {}), ("Rprop", {}), ("ASGD", {}),
    ("SGD", {"momentum": 0.9, "nesterov": True}),
]


def _run_complex(lib, name: str, kw: dict) -> tuple[np.ndarray, dict]:
    r = np.random.default_rng(0)
    start = (r.normal(size=4) + 1j * r.normal(size=4)).astype(np.complex64)
    p = lib.nn.Parameter(lib.tensor(start))
    opt = getattr(lib.optim, name)([p], lr=0.1, **kw)
    for _ in range(5):
        t = lib.tensor((r.normal(size=4) + 1j * r.normal(size=4)).astype(np.complex64))
        opt.zero_grad()
        ((p - t).abs() ** 2).sum().backward()
        opt.step()
    state = {k: v for k, v in opt.state[p].items() if isinstance(v, lib.Tensor) and v.dim() > 0}
    return p.detach().numpy(), {k: v.numpy() for k, v in state.items()}


@pytest.mark.parametrize("name,kw", _OPTIMIZERS, ids=[f"{n}{i}" for i, (n, _) in enumerate(_OPTIMIZERS)])
def test_optimizers_update_complex_parameters_as_torch(name, kw):
    # before: Adam & co. squared the complex gradient (g * g, not |g|^2 per part) and took
    # complex square roots, silently off; Adagrad / Rprop started the imaginary parts at 0
    got, got_state = _run_complex(ember, name, kw)
    ref, ref_state = _run_complex(torch, name, kw)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    assert sorted(got_state) == sorted(ref_state)
    for k in ref_state:  # the state stays complex, shaped like the parameter
        assert got_state[k].dtype == ref_state[k].dtype, k
        np.testing.assert_allclose(got_state[k], ref_state[k], rtol=1e-5, atol=1e-6, err_msg=k)


# ---- embedding_bag / SparseAdam -----------------------------------------------------------------
_W = np.arange(30, dtype=np.float32).reshape(10, 3)


def test_embedding_bag_refuses_offsets_not_starting_at_zero():
    # before: the indices before offsets[0] were silently dropped
    with pytest.raises(RuntimeError, match=r"offsets\[0\] has to be 0"):
        ember.nn.functional.embedding_bag(ember.tensor([1, 2, 3]), ember.tensor(_W),
                                          ember.tensor([1, 2]))
    with pytest.raises(RuntimeError):
        torch.nn.functional.embedding_bag(torch.tensor([1, 2, 3]), torch.tensor(_W),
                                          torch.tensor([1, 2]))


def test_embedding_bag_refuses_float_offsets():
    with pytest.raises(RuntimeError, match="offsets of dtype int64 or int32"):
        ember.nn.functional.embedding_bag(ember.tensor([1, 2]), ember.tensor(_W),
                                          ember.tensor([0.0]))


def test_embedding_bag_max_of_empty_input_is_zeros():
    # before: IndexError from amax about a zero-size reduction
    w = ember.tensor(_W, requires_grad=True)
    got = ember.nn.functional.embedding_bag(ember.tensor([], dtype=ember.int64), w,
                                            ember.tensor([0, 0]), mode="max")
    ref = torch.nn.functional.embedding_bag(torch.tensor([], dtype=torch.int64),
                                            torch.tensor(_W, requires_grad=True),
                                            torch.tensor([0, 0]), mode="max")
    np.testing.assert_array_equal(got.detach().numpy(), ref.detach().numpy())
    assert got.requires_grad
    got2 = ember.nn.functional.embedding_bag(ember.zeros(0, 2, dtype=ember.int64), w, mode="max")
    assert tuple(got2.shape) == (0, 3)


def test_embedding_bag_max_with_sparse_raises():
    with pytest.raises(ValueError, match="max mode does not support sparse weights"):
        ember.nn.functional.embedding_bag(ember.tensor([1, 2, 3]), ember.tensor(_W),
                                          ember.tensor([0, 2]), mode="max", sparse=True)
    bag = ember.nn.EmbeddingBag(10, 3, mode="max", sparse=True)  # built, refused when called
    with pytest.raises(ValueError):
        bag(ember.tensor([1, 2]), ember.tensor([0]))


def test_sparse_adam_refuses_complex_parameters():
    with pytest.raises(ValueError, match="complex"):
        ember.optim.SparseAdam([ember.nn.Parameter(ember.zeros(3, dtype=ember.complex64))])
    with pytest.raises(ValueError, match="complex"):
        torch.optim.SparseAdam([torch.nn.Parameter(torch.zeros(3, dtype=torch.complex64))])


# ---- attention / padding ------------------------------------------------------------------------
def test_sdpa_gqa_with_different_key_and_value_head_counts():
    # before: a reshape error ("shape '[1, 4, 5, 4]' is invalid for input of size 40")
    r = np.random.default_rng(0)
    q, k, v = (r.normal(size=s).astype(np.float32) for s in ((1, 4, 3, 4), (1, 2, 5, 4),
                                                               (1, 1, 5, 4)))
    got = ember.nn.functional.scaled_dot_product_attention(
        ember.tensor(q), ember.tensor(k), ember.tensor(v), enable_gqa=True)
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), enable_gqa=True)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="multiple of the key heads"):
        ember.nn.functional.scaled_dot_product_attention(
            ember.ones(1, 4, 3, 4), ember.ones(1, 3, 5, 4), ember.ones(1, 1, 5, 4), enable_gqa=True)


def test_pad_sequence_takes_the_first_sequences_dtype():
    seqs = [np.ones((2, 3), np.float32), np.ones((4, 3), np.float64)]
    got = ember.nn.utils.rnn.pad_sequence([ember.tensor(s) for s in seqs])
    ref = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs])
    assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1] == "float32"
    np.testing.assert_array_equal(got.numpy(), ref.numpy())


def test_unpad_sequence_checks_lengths_against_the_batch():
    # before: lengths longer than the padded batch, or too many, were silently accepted
    padded = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="unpad_sequence: expected 2 lengths in"):
        ember.nn.utils.rnn.unpad_sequence(padded, ember.tensor([1, 4]), batch_first=True)
    with pytest.raises(RuntimeError, match="unpad_sequence"):
        ember.nn.utils.rnn.unpad_sequence(padded, [1, 1, 1], batch_first=True)
    out = ember.nn.utils.rnn.unpad_sequence(padded, [3, 1], batch_first=True)
    assert [tuple(t.shape) for t in out] == [(3,), (1,)]


# ---- state_dict / module plumbing ----------------------------------------------------------------
def test_load_state_dict_assign_keeps_the_models_requires_grad():
    # before: a Parameter(requires_grad=False) in the state dict froze the model's parameter
    def run(lib):
        m = lib.nn.Linear(2, 3)
        m.load_state_dict({"weight": lib.nn.Parameter(lib.ones(3, 2), requires_grad=False),
                           "bias": lib.ones(3)}, assign=True)
        return m.weight.requires_grad, type(m.bias).__name__, m.bias.requires_grad
    assert run(ember) == run(torch) == (True, "Parameter", True)


def test_batchnorm_loads_a_state_dict_without_num_batches_tracked():
    # old (version < 2) or hand-built state dicts have no num_batches_tracked: torch loads them
    sd = {"weight": [1.0, 2.0], "bias": [0.0, 1.0], "running_mean": [0.5, 0.5],
          "running_var": [2.0, 2.0]}
    for lib in (ember, torch):
        bn = lib.nn.BatchNorm1d(2)
        assert lib.nn.BatchNorm1d._version == 2
        res = bn.load_state_dict({k: lib.tensor(v) for k, v in sd.items()})
        assert res.missing_keys == [] and bn.num_batches_tracked.item() == 0
        assert bn.running_var.tolist() == [2.0, 2.0]
    # a version-2 state dict must still have it
    sd2 = {k: ember.tensor(v) for k, v in sd.items()}
    sd2 = type(ember.nn.BatchNorm1d(2).state_dict())(sd2)
    sd2._metadata = {"": {"version": 2}}
    with pytest.raises(RuntimeError, match="num_batches_tracked"):
        ember.nn.BatchNorm1d(2).load_state_dict(sd2)


def test_set_submodule_as_torch():
    seq = ember.nn.Sequential(ember.nn.Linear(1, 1), ember.nn.Sequential(ember.nn.ReLU()))
    seq.set_submodule("0", ember.nn.Tanh())
    seq.set_submodule("1.5", ember.nn.GELU())  # added to an existing parent
    assert isinstance(seq[0], ember.nn.Tanh) and isinstance(seq[1]._modules["5"], ember.nn.GELU)
    with pytest.raises(AttributeError):
        seq.set_submodule("1.7", ember.nn.GELU(), strict=True)
    with pytest.raises(ValueError, match="not an nn.Module"):
        seq.set_submodule("0", 5)
    with pytest.raises(AttributeError):
        seq.set_submodule("9.x", ember.nn.GELU())
    with pytest.raises(ValueError):
        seq.set_submodule("", ember.nn.GELU())


# ---- integer overflow of Python scalars, loss argument checks ------------------------------------
@pytest.mark.parametrize("dtype,value", [("int8", 300), ("int8", -129), ("uint8", -256),
                                         ("uint8", 256), ("int32", 2**31)])
def test_where_refuses_a_scalar_that_overflows_the_tensors_dtype(dtype, value):
    # before: the scalar wrapped around silently (int8 300 -> 44)
    for lib in (ember, torch):
        t = lib.tensor([1, 2], dtype=getattr(lib, dtype))
        with pytest.raises(RuntimeError, match="overflow"):
            lib.where(lib.tensor([True, False]), t, value)
        with pytest.raises(RuntimeError, match="overflow"):
            lib.where(lib.tensor([True, False]), value, t)


def test_where_scalar_in_range_and_unsigned_wrap_as_torch():
    for value in (-1, -255, 255, 127):
        got = ember.where(ember.tensor([True, False]), ember.tensor([1, 2], dtype=ember.uint8), value)
        ref = torch.where(torch.tensor([True, False]), torch.tensor([1, 2], dtype=torch.uint8), value)
        assert got.tolist() == ref.tolist() and got.dtype == ember.uint8


def test_pad_value_must_fit_an_integer_tensor():
    with pytest.raises(RuntimeError, match="overflow"):
        ember.nn.functional.pad(ember.tensor([1, 2], dtype=ember.int8), (1, 1), value=300)
    with pytest.raises(RuntimeError, match="overflow"):
        ember.nn.functional.pad(ember.tensor([1, 2], dtype=ember.uint8), (1, 0), value=-1)
    got = ember.nn.functional.pad(ember.tensor([1, 2], dtype=ember.int8), (1, 0), value=-128)
    assert got.tolist() == [-128, 1, 2]


def test_multi_margin_loss_checks_the_target():
    x = ember.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]])
    with pytest.raises(RuntimeError, match="int64"):  # before: float targets were cast
        ember.nn.functional.multi_margin_loss(x, ember.tensor([0.0, 2.0]))
    with pytest.raises(RuntimeError, match="1-D with size equal"):  # before: reshaped
        ember.nn.functional.multi_margin_loss(x, ember.tensor([[0], [2]]))
    with pytest.raises(RuntimeError, match="1-D with size equal"):
        ember.nn.functional.multi_margin_loss(x, ember.tensor([1]))
    got = ember.nn.functional.multi_margin_loss(x, ember.tensor([0, 2]), p=2)
    ref = torch.nn.functional.multi_margin_loss(torch.tensor(x.tolist()), torch.tensor([0, 2]), p=2)
    assert got.item() == pytest.approx(ref.item(), rel=1e-6)


def test_triplet_losses_refuse_non_positive_margins_and_mixed_dims():
    a = ember.ones(2, 3)
    for margin in (0.0, -1.0):
        with pytest.raises(ValueError, match="margin must be greater than 0"):
            ember.nn.functional.triplet_margin_loss(a, a, a, margin=margin)
        with pytest.raises(ValueError, match="margin must be greater than 0"):
            ember.nn.functional.triplet_margin_with_distance_loss(a, a, a, margin=margin)
        with pytest.raises(ValueError, match="greater than 0"):
            ember.nn.TripletMarginWithDistanceLoss(margin=margin)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        ember.nn.functional.triplet_margin_with_distance_loss(a, a, ember.ones(3))


def test_cosine_embedding_loss_target_dims():
    x = ember.tensor([0.5, -1.0, 2.0])
    with pytest.raises(RuntimeError, match="1-D input .* takes a 0-D target"):
        ember.nn.functional.cosine_embedding_loss(x, ember.ones(3), ember.tensor([-1.0]))
    got = ember.nn.functional.cosine_embedding_loss(x, ember.ones(3), ember.tensor(-1.0))
    ref = torch.nn.functional.cosine_embedding_loss(torch.tensor(x.tolist()), torch.ones(3),
                                                    torch.tensor(-1.0))
    assert got.item() == pytest.approx(ref.item(), rel=1e-6)


def test_embedding_bag_scale_grad_by_freq_scales_each_rows_gradient():
    # before: the flag was silently ignored. Each row's gradient is divided by how often its
    # index occurs in the mini-batch (torch's documented rule; its CPU kernel's counts are off
    # for some orders, e.g. [1, 1, 2], so the gradient is checked against that rule)
    w0 = np.sin(np.arange(24.0)).reshape(8, 3).astype(np.float32)
    idx, offs = [1, 2, 1, 5, 0, 7, 7], [0, 3, 3]
    for mode, pad in (("sum", None), ("mean", 7), ("mean", None)):
        grads = []
        for freq in (True, False):
            w = ember.tensor(w0, requires_grad=True)
            out = ember.nn.functional.embedding_bag(ember.tensor(idx), w, ember.tensor(offs),
                                                    mode=mode, padding_idx=pad,
                                                    scale_grad_by_freq=freq)
            (out * ember.arange(out.numel()).reshape(out.shape)).sum().backward()
            grads.append(w.grad.numpy())
            ref = torch.nn.functional.embedding_bag(torch.tensor(idx), torch.tensor(w0),
                                                    torch.tensor(offs), mode=mode,
                                                    padding_idx=pad, scale_grad_by_freq=freq)
            np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
        counts = np.maximum(np.bincount(idx, minlength=8), 1).astype(np.float32)
        np.testing.assert_allclose(grads[0], grads[1] / counts[:, None], rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="max mode does not support scaling"):
        ember.nn.functional.embedding_bag(ember.tensor(idx), ember.tensor(w0), ember.tensor(offs),
                                          mode="max", scale_grad_by_freq=True)


def test_orthogonal_right_inverse_of_a_complex_matrix_keeps_its_phase():
    # before: the projection onto the unitary matrices cast the input to float64, dropping the
    # imaginary part (a ComplexWarning and a real-valued "unitary" weight)
    r = np.random.default_rng(0)
    w = (r.normal(size=(3, 3)) + 1j * r.normal(size=(3, 3))).astype(np.complex64)

    def run(lib):
        m = lib.nn.Linear(3, 3, bias=False)
        m.weight = lib.nn.Parameter(lib.eye(3, dtype=lib.complex64))
        lib.nn.utils.parametrizations.orthogonal(m)
        m.weight = lib.tensor(w)
        return m.weight.detach().numpy()

    got = run(ember)
    np.testing.assert_allclose(got, run(torch), rtol=1e-5, atol=1e-5)
    assert np.abs(got.imag).max() > 0.1


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_with_complex_parameters_matches_torch(line_search):
    # before: TypeError "gt: not implemented for dtype complex64" from the flat complex gradient
    def run(lib):
        p = lib.nn.Parameter(lib.tensor([0j, 1 + 0j]))
        q = lib.nn.Parameter(lib.tensor([0.5]))
        t = lib.tensor([1 + 2j, -1j])
        o = lib.optim.LBFGS([p, q], lr=0.5, line_search_fn=line_search, max_iter=5)

        def closure():
            o.zero_grad()
            loss = ((p - t).abs() ** 2).sum() + ((q - 2) ** 2).sum()
            loss.backward()
            return loss
        for _ in range(3):
            o.step(closure)
        return lib.view_as_real(p.detach()).numpy(), q.detach().numpy()
    for g, r in zip(run(ember), run(torch)):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_triplet_margin_with_distance_loss_default_distance_is_a_submodule():
    got = ember.nn.TripletMarginWithDistanceLoss()
    ref = torch.nn.TripletMarginWithDistanceLoss()
    assert repr(got) == repr(ref)
    assert isinstance(got.distance_function, ember.nn.PairwiseDistance)
    a = ember.tensor([[0.5, 1.0]])
    assert got(a, a + 0.1, a - 0.2).item() == pytest.approx(
        ref(*(torch.tensor(t.tolist()) for t in (a, a + 0.1, a - 0.2))).item(), rel=1e-6)
