"""PowerSGD DDP communication hooks (ember.distributed.algorithms.ddp_comm_hooks.powerSGD_hook)
on a one-rank group, where the all-reduces leave the values alone, so the compression itself is
checked: exactness on low-rank gradients, error feedback, warm start (power iteration towards
the top singular vectors), the batched hook, the statistics and pickling. The two-rank behaviour
against torch is compat_programs/powersgd.py."""

from __future__ import annotations

import pickle

import ember
import numpy as np
import pytest
from ember.distributed.algorithms._comm_types import GradBucket
from ember.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd


@pytest.fixture(autouse=True)
def one_rank():
    import ember.distributed as dist

    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def make_bucket(*arrays: np.ndarray, index: int = 0, last: bool = True) -> GradBucket:
    """A bucket whose flat buffer holds the arrays (float32), with views as gradients."""
    flat = ember.tensor(np.concatenate([a.reshape(-1) for a in arrays]).astype(np.float32))
    views, off = [], 0
    for a in arrays:
        views.append(flat[off:off + a.size].view(*a.shape))
        off += a.size
    params = [ember.zeros(*a.shape) for a in arrays]
    return GradBucket(index, flat, views, params, last)


def run(state, *arrays, hook=psgd.powerSGD_hook, **kw) -> list[np.ndarray]:
    bucket = make_bucket(*arrays, **kw)
    out = hook(state, bucket).wait()
    assert out is bucket.buffer()
    return [g.numpy().copy() for g in bucket.gradients()]


def started(**kw) -> psgd.PowerSGDState:
    """A state past its plain all-reduce iterations."""
    kw.setdefault("start_powerSGD_iter", 2)
    state = psgd.PowerSGDState(None, **kw)
    state.iter = state.start_powerSGD_iter
    return state


RANK1 = np.outer([1.0, -2.0, 0.5, 3.0, 1.5, -1.0], [0.5, 1.0, -1.0, 2.0, 0.25, -0.5, 1.0, 0.75])
FULL = np.arange(48, dtype=np.float64).reshape(6, 8) % 7 - 3.0  # rank 6
RANK3 = (RANK1 + np.outer([0.0, 1.0, 1.0, -1.0, 2.0, 0.5], np.arange(8.0) / 4)
         + np.outer([1.0, 0.0, -1.0, 0.0, 1.0, 0.0], np.cos(np.arange(8.0))))


def test_rank_one_gradient_is_exact_and_leaves_no_error():
    state = started()
    bias = np.array([0.1, -0.2, 0.3, 0.4, -0.5, 0.6])
    got_w, got_b = run(state, RANK1, bias)
    np.testing.assert_allclose(got_w, RANK1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_b, bias, rtol=1e-6)  # a vector: all-reduced as it is
    np.testing.assert_allclose(state.error_dict[0].numpy(), 0, atol=1e-5)
    # the bucket's P (6 x 1) and Q (8 x 1) memory; stats: 48 + 6 -> 14 + 6
    assert state.p_memory_dict[0].numel() == 6 and state.q_memory_dict[0].numel() == 8
    assert state.compression_stats() == (54 / 20, 54, 20)
    assert state.iter == 3


def test_rank_one_of_a_full_rank_gradient_is_the_projection_on_p():
    state = started(use_error_feedback=False, warm_start=False)
    q0_state = np.random.RandomState(0)  # the generator the first Q is seeded from
    (got,) = run(state, FULL)
    # the result is P P^T M for the unit vector P along M q (q the orthonormalized random Q)
    assert np.linalg.matrix_rank(got, tol=1e-4) == 1
    u = np.linalg.svd(got)[0][:, :1]  # the unit column P
    np.testing.assert_allclose(got, u @ u.T @ FULL, rtol=1e-4, atol=1e-4)
    assert not state.p_memory_dict and not state.q_memory_dict  # no warm start: not kept
    assert state.rng.randint(1 << 30) != q0_state.randint(1 << 30)  # one seed drawn


def test_error_feedback_carries_the_residual_to_the_next_step():
    state = started(warm_start=False)
    (first,) = run(state, FULL)
    residual = FULL - first
    np.testing.assert_allclose(state.error_dict[0].numpy(), residual.reshape(-1), atol=1e-5)
    # a zero gradient next: what is compressed is the residual alone
    (second,) = run(state, np.zeros_like(FULL))
    assert np.abs(second).max() > 0.1
    np.testing.assert_allclose(state.error_dict[0].numpy(), (residual - second).reshape(-1),
                               atol=1e-5)
    # over the two steps nothing is lost: sent + error = the gradients' sum
    np.testing.assert_allclose(first + second + state.error_dict[0].numpy().reshape(6, 8),
                               FULL, atol=1e-4)


def test_no_error_feedback_keeps_no_error():
    state = started(use_error_feedback=False)
    run(state, FULL)
    assert state.error_dict == {}


def test_warm_start_reuses_q_and_converges_to_the_top_singular_pair():
    state = started(use_error_feedback=False)
    run(state, FULL)
    rng_after_first = state.rng.get_state()[2]
    q_first = state.q_memory_dict[0]
    for _ in range(40):
        (got,) = run(state, FULL)
    assert state.q_memory_dict[0] is q_first  # the same memory, updated in place
    assert state.rng.get_state()[2] == rng_after_first  # no new random Q
    u, s, vt = np.linalg.svd(FULL)
    best = s[0] * np.outer(u[:, 0], vt[0])
    np.testing.assert_allclose(got, best, rtol=1e-3, atol=1e-3)


def test_without_warm_start_each_step_draws_a_new_q():
    state = started(use_error_feedback=False, warm_start=False)
    positions = []
    for _ in range(3):
        run(state, FULL)
        positions.append(state.rng.get_state()[2])
    assert positions[0] < positions[1] < positions[2]


def test_before_start_iter_plain_allreduce_and_iteration_counting():
    state = psgd.PowerSGDState(None, start_powerSGD_iter=3)
    got = run(state, FULL, last=False)
    np.testing.assert_allclose(got[0], FULL, rtol=1e-6)  # averaged over one rank
    assert state.iter == 0  # only the iteration's last bucket counts
    for _ in range(3):
        run(state, FULL, last=True)
    assert state.iter == 3 and state.compression_stats() == (0, 0, 0) and not state.error_dict
    run(state, FULL, last=True)  # the first compressed iteration
    assert state.iter == 4 and state.compression_stats()[1:] == (48, 14)


def test_small_matrices_are_not_compressed():
    # 4 x 4 at rank 1: (4 + 4) * 1 * 2 = 16, not < 16 elements -> sent as is
    state = started()
    small = np.arange(16.0).reshape(4, 4)
    (got,) = run(state, small)
    np.testing.assert_allclose(got, small)
    assert state.compression_stats() == (1.0, 16, 16)
    state = started(min_compression_rate=1)  # 8 < 16: compressed
    run(state, small)
    assert state.compression_stats() == (2.0, 16, 8)


def test_higher_rank_and_conv_shaped_gradients():
    # a 4-D gradient is viewed as shape[0] x rest; rank 3 reproduces a rank-3 matrix exactly
    # ((6 + 8) * 3 = 42) * 0.5 < 48: worth compressing at this rate
    state = started(matrix_approximation_rank=3, min_compression_rate=0.5)
    conv = RANK3.reshape(6, 2, 2, 2)
    (got,) = run(state, conv)
    np.testing.assert_allclose(got, conv, rtol=1e-4, atol=1e-4)
    assert state.p_memory_dict[0].numel() == 18 and state.q_memory_dict[0].numel() == 24


def test_batching_same_shapes_gives_the_same_result():
    a, b = FULL, FULL[::-1].copy() * 0.5
    plain = run(started(matrix_approximation_rank=2, use_error_feedback=False), a, b)
    batched = run(started(matrix_approximation_rank=2, use_error_feedback=False,
                          batch_tensors_with_same_shape=True), a, b)
    for x, y in zip(plain, batched):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


def test_batched_hook_rank_one_bucket_is_exact_and_pads_to_a_square():
    state = started()
    vec = np.array([1.0, 2.0, -1.0])
    bucket_values = np.outer(vec, [2.0, -1.0, 0.5]).reshape(-1)  # 9 = 3 x 3, rank 1
    (got,) = run(state, bucket_values, hook=psgd.batched_powerSGD_hook)
    np.testing.assert_allclose(got, bucket_values, rtol=1e-5, atol=1e-5)
    assert state.compression_stats() == (9 / 6, 9, 6)
    state = started(matrix_approximation_rank=2)
    # 10 values padded to a 4 x 4 matrix of rows a, 2a, (5, -1, 0, 0), 0: rank 2, kept exactly
    values = np.array([1.0, 2.0, 3.0, 4.0, 2.0, 4.0, 6.0, 8.0, 5.0, -1.0])
    (got,) = run(state, values, hook=psgd.batched_powerSGD_hook)
    assert got.shape == (10,)
    assert state.error_dict[0].numel() == 16 and tuple(state.q_memory_dict[0].shape) == (4, 2)
    assert state.compression_stats()[1:] == (10, 16)
    np.testing.assert_allclose(got, values, atol=1e-4)
    np.testing.assert_allclose(state.error_dict[0].numpy(), 0, atol=1e-4)


def test_orthogonalize_and_epsilon():
    m = ember.tensor([[3.0, 1.0], [4.0, 2.0], [0.0, 5.0]])
    psgd._orthogonalize(m)
    got = m.numpy()
    np.testing.assert_allclose(got.T @ got, np.eye(2), atol=1e-6)
    np.testing.assert_allclose(got[:, 0], [0.6, 0.8, 0.0], rtol=1e-6)
    z = ember.zeros(3, 2)
    psgd._orthogonalize(z, epsilon=1e-8)
    assert np.isfinite(z.numpy()).all()


def test_state_pickles_without_its_process_group():
    import ember.distributed as dist

    state = started(matrix_approximation_rank=2)
    run(state, FULL)
    state.process_group = dist.new_group([0])
    clone = pickle.loads(pickle.dumps(state))
    assert clone.process_group is dist.distributed_c10d._get_default_group()
    assert "process_group" not in state.__getstate__()
    assert clone.iter == state.iter and clone.matrix_approximation_rank == 2
    assert clone.compression_stats() == state.compression_stats()
    np.testing.assert_array_equal(clone.error_dict[0].numpy(), state.error_dict[0].numpy())
    np.testing.assert_array_equal(clone.q_memory_dict[0].numpy(), state.q_memory_dict[0].numpy())
    assert clone.rng.randint(1000) == state.rng.randint(1000)  # the generator state too


def test_arguments_and_defaults():
    s = psgd.PowerSGDState(None)
    assert (s.matrix_approximation_rank, s.start_powerSGD_iter, s.min_compression_rate,
            s.use_error_feedback, s.warm_start, s.orthogonalization_epsilon,
            s.compression_stats_logging_frequency, s.batch_tensors_with_same_shape) == (
        1, 1000, 2, True, True, 0, 10000, False)
    with pytest.raises(ValueError, match="start_powerSGD_iter"):
        psgd.PowerSGDState(None, start_powerSGD_iter=1)
    with pytest.raises(ValueError, match="start_powerSGD_iter"):
        psgd.PowerSGDState(None, start_powerSGD_iter=0, use_error_feedback=False)
    assert psgd.PowerSGDState(None, start_powerSGD_iter=1, use_error_feedback=False,
                              warm_start=False).start_powerSGD_iter == 1
    assert psgd.__all__ == ["PowerSGDState", "powerSGD_hook", "batched_powerSGD_hook"]


def test_with_ddp_on_one_rank_exact_for_a_low_rank_input():
    from ember import nn

    # a rank-2 batch: the weight gradient dY^T X has rank 2, which rank-2 PowerSGD keeps exactly
    x = (np.outer([1.0, 2.0, -1.0, 0.5], np.linspace(-1, 1, 20))
         + np.outer([0.0, 1.0, 1.0, -1.0], np.cos(np.arange(20.0)))).astype(np.float32)

    def train(hook_state):
        ember.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(nn.Linear(20, 16))
        if hook_state is not None:
            model.register_comm_hook(hook_state, psgd.powerSGD_hook)
        for _ in range(3):
            model.zero_grad()
            model(ember.tensor(x)).pow(2).sum().backward()
        return model.module.weight.grad.numpy()

    state = psgd.PowerSGDState(None, start_powerSGD_iter=2, matrix_approximation_rank=2)
    np.testing.assert_allclose(train(state), train(None), rtol=1e-4, atol=1e-4)
    # one compressed iteration: 320 + 16 elements sent as 2 * (16 + 20) + 16
    assert state.iter == 3 and state.compression_stats()[1:] == (336, 88)


def test_should_compress_matches_torch():
    torch_psgd = pytest.importorskip(
        "torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook")
    for rows, cols, rank, rate in [(16, 20, 2, 2), (4, 4, 1, 2), (4, 4, 1, 1), (100, 3, 4, 2)]:
        assert psgd._should_compress(rows, cols, rank, rate) == \
            torch_psgd._should_compress(rows, cols, rank, rate)
