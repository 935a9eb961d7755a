"""PowerSGD gradient compression for DistributedDataParallel (Vogels et al., "PowerSGD:
Practical Low-Rank Gradient Compression for Distributed Optimization", NeurIPS 2019), as
torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook.

Each gradient matrix M (a parameter's gradient viewed as rows x everything else) is sent as two
thin factors instead of itself: with Q (cols x r) from the previous step (warm start) or random,
P = M Q is summed over the ranks and orthonormalized, Q = M^T P is summed, and the average
gradient is approximated by P Q^T / world_size. What the approximation leaves out of this
rank's gradient is added to its next one (error feedback). Vectors, and matrices whose factors
would not be at least ``min_compression_rate`` times smaller, are all-reduced as they are, and
every bucket is for the first ``start_powerSGD_iter`` iterations.

Example::

    >>> state = PowerSGDState(process_group=None, matrix_approximation_rank=2,  # doctest: +SKIP
    ...                       start_powerSGD_iter=10)
    >>> ddp_model.register_comm_hook(state, powerSGD_hook)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any

import ember
import numpy as np
from ember.distributed.algorithms._comm_types import Future, GradBucket
from ember.distributed.algorithms.ddp_comm_hooks.default_hooks import (
    _allreduce_divided,
    _world_size,
)

__all__ = ["PowerSGDState", "powerSGD_hook", "batched_powerSGD_hook"]

logger = logging.getLogger(__name__)


def _orthogonalize(matrices: ember.Tensor, epsilon: float = 0) -> None:
    """Makes the columns of a matrix (or of each matrix of a batch, dim 0) orthonormal in place,
    by Gram-Schmidt; epsilon is added to each column's norm before dividing by it (a column of
    zeros then stays zero instead of turning into NaN)."""
    batch = matrices if matrices.ndim == 3 else matrices.unsqueeze(0)
    cols = batch.shape[2]
    with ember.no_grad():
        for i in range(cols):
            col = batch[:, :, i:i + 1]
            norm = ember.linalg.vector_norm(col, dim=1, keepdim=True)
            if epsilon == 0:
                if bool((norm == 0).any()):
                    logger.error(
                        "PowerSGD: a matrix to orthogonalize has a column of zeros; set a small "
                        "orthogonalization_epsilon (e.g. 1e-8) in PowerSGDState")
                col.div_(norm)
            else:
                col.div_(norm + epsilon)
            if i + 1 < cols:
                rest = batch[:, :, i + 1:]
                rest.sub_((col * rest).sum(dim=1, keepdim=True) * col)


def _should_compress(num_rows: int, num_cols: int, rank: int,
                     min_compression_rate: float) -> tuple[bool, int, int]:
    """(whether the factors are at least min_compression_rate times smaller than the matrix,
    the matrix's element count, the factors' element count)."""
    uncompressed = num_rows * num_cols
    compressed = (num_rows + num_cols) * rank
    return compressed * min_compression_rate < uncompressed, uncompressed, compressed


class PowerSGDState:
    """The hyperparameters of PowerSGD and what it keeps between iterations (the error of each
    bucket, the last P and Q of each bucket), passed to ``register_comm_hook`` with
    ``powerSGD_hook`` or ``batched_powerSGD_hook``.

    - process_group: the group to average over (None: the world);
    - matrix_approximation_rank: r, the rank of the approximation (lower: more compression);
    - start_powerSGD_iter: plain all-reduce for the iterations before it (at least 2 with error
      feedback or warm start: DDP rebuilds its buckets after the first iteration);
    - min_compression_rate: a matrix is compressed only if its factors are this many times
      smaller, ``(rows + cols) * r * min_compression_rate < rows * cols``;
    - use_error_feedback: add what compression dropped to the next gradient;
    - warm_start: start from the previous iteration's Q instead of a random one;
    - orthogonalization_epsilon: added to the column norms when orthonormalizing P;
    - random_seed: seeds the random initial Q (the same on every rank);
    - compression_stats_logging_frequency: log the compression rate every so many iterations;
    - batch_tensors_with_same_shape: compress the matrices of one shape with batched matmuls.

    Example::

        >>> state = PowerSGDState(None, matrix_approximation_rank=1)
        >>> state.compression_stats()
        (0, 0, 0)
    """

    __slots__ = [
        "process_group",
        "matrix_approximation_rank",
        "start_powerSGD_iter",
        "min_compression_rate",
        "orthogonalization_epsilon",
        "use_error_feedback",
        "warm_start",
        "batch_tensors_with_same_shape",
        "rng",
        "error_dict",
        "p_memory_dict",
        "q_memory_dict",
        "iter",
        "total_numel_before_compression",
        "total_numel_after_compression",
        "compression_stats_logging_frequency",
        "next_stats_report",
    ]

    def __init__(self, process_group: Any, matrix_approximation_rank: int = 1,
                 start_powerSGD_iter: int = 1_000, min_compression_rate: float = 2,  # noqa: N803
                 use_error_feedback: bool = True, warm_start: bool = True,
                 orthogonalization_epsilon: float = 0, random_seed: int = 0,
                 compression_stats_logging_frequency: int = 10_000,
                 batch_tensors_with_same_shape: bool = False) -> None:
        logger.info(
            "PowerSGD config: matrix_approximation_rank = %s; start_powerSGD_iter = %s; "
            "min_compression_rate = %s; orthogonalization_epsilon = %s; use_error_feedback = %s;"
            " warm_start = %s; random_seed = %s; compression_stats_logging_frequency = %s; "
            "batch_tensors_with_same_shape = %s", matrix_approximation_rank, start_powerSGD_iter,
            min_compression_rate, orthogonalization_epsilon, use_error_feedback, warm_start,
            random_seed, compression_stats_logging_frequency, batch_tensors_with_same_shape)
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError(
                f"PowerSGDState: start_powerSGD_iter must be > 1 when use_error_feedback or "
                f"warm_start is on, got {start_powerSGD_iter}: DDP rebuilds its buckets after "
                "the first iteration, which would invalidate the per-bucket memory")
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        # numpy's generator, so that seeding ember's global generator does not change Q
        self.rng = np.random.RandomState(random_seed)
        self.error_dict: dict[int, ember.Tensor] = {}
        self.p_memory_dict: dict[int, ember.Tensor] = {}
        self.q_memory_dict: dict[int, ember.Tensor] = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, compression_stats_logging_frequency)
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the process group (which does not pickle); unpickling uses the
        default group."""
        logger.warning("PowerSGDState: the process group is not pickled; the unpickled state "
                       "uses the default process group")
        return {s: getattr(self, s) for s in self.__slots__ if s != "process_group"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from ember.distributed import distributed_c10d

        self.process_group = (distributed_c10d._get_default_group()
                              if distributed_c10d.is_initialized() else None)
        logger.warning("PowerSGDState: unpickled with the default process group")
        for name, value in state.items():
            setattr(self, name, value)

    def maybe_increase_iter(self, bucket: GradBucket) -> None:
        """Counts one more iteration once the iteration's last bucket is reduced."""
        if bucket.is_last():
            self.iter += 1
            if self.iter == self.start_powerSGD_iter:
                logger.info("Start to apply PowerSGD after %s iterations.", self.iter)

    def compression_stats(self) -> tuple[float, int, int]:
        """(elements before / after compression, elements before, elements after), summed over
        the buckets of every PowerSGD iteration so far; (0, 0, 0) before the first."""
        after = self.total_numel_after_compression
        rate = self.total_numel_before_compression / after if after > 0 else 0
        return rate, self.total_numel_before_compression, after

    def _report(self, bucket: GradBucket) -> None:
        if bucket.is_last() and self.iter >= self.next_stats_report:
            rate, before, after = self.compression_stats()
            logger.info("Compression stats: iter %s, total before compression %s, total after "
                        "compression %s, rate %s", self.iter, before, after, rate)
            self.next_stats_report += self.compression_stats_logging_frequency

    def _random_q(self, shape: tuple[int, ...], dtype: ember.dtype,
                  device: ember.device) -> ember.Tensor:
        """A standard-normal tensor drawn from a generator seeded by self.rng: the same on
        every rank, and independent of ember's global random state."""
        gen = ember.Generator()
        gen.manual_seed(int(self.rng.randint(1_000_000_000)))
        q = ember.randn(*shape, generator=gen, dtype=ember.float32)
        return q.to(device=device, dtype=dtype)


def _done(value: ember.Tensor) -> Future[ember.Tensor]:
    fut: Future[ember.Tensor] = Future()
    fut.set_result(value)
    return fut


def _add_error(state: PowerSGDState, key: int, flat: ember.Tensor) -> ember.Tensor | None:
    """With error feedback: adds the bucket's stored error to flat and returns a copy of the
    result (to compute the new error from); None without."""
    if not state.use_error_feedback:
        return None
    err = state.error_dict.get(key)
    if err is not None and err.numel() == flat.numel():
        flat.add_(err)
    else:
        if err is not None:
            logger.warning("PowerSGD: bucket %s changed size (%s -> %s elements); its error "
                           "feedback restarts from zero", key, err.numel(), flat.numel())
        logger.info("A zero tensor of length %s that represents local error is created.",
                    flat.numel())
        state.error_dict[key] = ember.zeros_like(flat)
    return flat.clone()


def powerSGD_hook(state: PowerSGDState, bucket: GradBucket) -> Future[ember.Tensor]:  # noqa: N802
    """A DDP communication hook that averages the bucket's gradients with PowerSGD: plain
    all-reduce before ``state.start_powerSGD_iter``; after it, the vectors and the matrices
    not worth compressing are all-reduced together in one buffer, and every other gradient M
    (viewed as ``shape[0] x rest``) is replaced by ``P Q^T / world_size`` with P = M Q summed
    over the ranks and orthonormalized and Q = M^T P summed over the ranks.

    Example::

        >>> state = PowerSGDState(process_group=None, start_powerSGD_iter=10)  # doctest: +SKIP
        >>> ddp_model.register_comm_hook(state, powerSGD_hook)  # doctest: +SKIP
    """
    import ember.distributed as dist

    group = state.process_group
    world = _world_size(group)
    flat = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return _allreduce_divided(group, bucket, world)

    key = bucket.index()
    with ember.no_grad():
        before = _add_error(state, key, flat)
        plain: list[ember.Tensor] = []
        # shape -> matrices of that shape (one list per matrix without batching)
        groups: dict[Any, list[ember.Tensor]] = defaultdict(list)
        for i, grad in enumerate(bucket.gradients()):
            if grad.ndim <= 1:
                state.total_numel_before_compression += grad.numel()
                state.total_numel_after_compression += grad.numel()
                plain.append(grad)
                continue
            matrix = grad.view(grad.shape[0], -1)
            rows, cols = matrix.shape
            rank = min(rows, cols, state.matrix_approximation_rank)
            worth, n_before, n_after = _should_compress(rows, cols, rank,
                                                        state.min_compression_rate)
            state.total_numel_before_compression += n_before
            if worth:
                groups[(rows, cols) if state.batch_tensors_with_same_shape else i].append(matrix)
                state.total_numel_after_compression += n_after
            else:
                plain.append(grad)
                state.total_numel_after_compression += n_before
        state._report(bucket)

        # the matrices of each group stacked into a batch, with their P and Q memory
        batches = []
        p_total = q_total = 0
        for mats in groups.values():
            rows, cols = mats[0].shape
            rank = min(rows, cols, state.matrix_approximation_rank)
            batches.append((mats, rows, cols, rank))
            p_total += len(mats) * rows * rank
            q_total += len(mats) * cols * rank
        fresh = (not state.warm_start or key not in state.p_memory_dict
                 or state.p_memory_dict[key].numel() != p_total
                 or state.q_memory_dict[key].numel() != q_total)
        if fresh:
            state.p_memory_dict[key] = flat.new_empty(p_total)
            state.q_memory_dict[key] = flat.new_empty(q_total)
        ps, qs, p_off, q_off = [], [], 0, 0
        for mats, rows, cols, rank in batches:
            k = len(mats)
            ps.append(state.p_memory_dict[key][p_off:p_off + k * rows * rank].view(k, rows, rank))
            qs.append(state.q_memory_dict[key][q_off:q_off + k * cols * rank].view(k, cols, rank))
            p_off += k * rows * rank
            q_off += k * cols * rank
        for q in qs:  # a warm-started Q (the last average) is orthonormalized again
            if fresh:
                q.copy_(state._random_q(tuple(q.shape), flat.dtype, flat.device))
            _orthogonalize(q, state.orthogonalization_epsilon)

        # the gradients not worth compressing: one all-reduce of them all
        if plain:
            buf = ember.cat([g.reshape(-1) for g in plain])
            dist.all_reduce(buf, group=group)
            buf.div_(world)
            off = 0
            for g in plain:
                g.copy_(buf[off:off + g.numel()].view(g.shape))
                off += g.numel()

        if batches:
            stacks = [ember.stack(mats) for mats, _, _, _ in batches]
            for m, p, q in zip(stacks, ps, qs):
                p.copy_(ember.bmm(m, q))
            dist.all_reduce(state.p_memory_dict[key], group=group)
            for p in ps:
                _orthogonalize(p, state.orthogonalization_epsilon)
            for m, p, q in zip(stacks, ps, qs):
                q.copy_(ember.bmm(m.transpose(1, 2), p))
            dist.all_reduce(state.q_memory_dict[key], group=group)
            state.q_memory_dict[key].div_(world)
            for (mats, _, _, _), p, q in zip(batches, ps, qs):
                approx = ember.bmm(p, q.transpose(1, 2))
                for j, mat in enumerate(mats):
                    mat.copy_(approx[j])

        if before is not None:
            state.error_dict[key] = before - flat
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
    state.maybe_increase_iter(bucket)
    return _done(flat)


def batched_powerSGD_hook(state: PowerSGDState, bucket: GradBucket) -> Future[ember.Tensor]:  # noqa: N802
    """PowerSGD on the whole bucket at once: the flat buffer, zero-padded to a square of side
    ``ceil(sqrt(numel))``, is compressed as one matrix (fewer, larger matmuls and collectives
    than ``powerSGD_hook``, usually a worse approximation). Plain all-reduce before
    ``state.start_powerSGD_iter``.

    Example::

        >>> state = PowerSGDState(process_group=None, start_powerSGD_iter=10)  # doctest: +SKIP
        >>> ddp_model.register_comm_hook(state, batched_powerSGD_hook)  # doctest: +SKIP
    """
    import ember.distributed as dist

    group = state.process_group
    world = _world_size(group)
    flat = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return _allreduce_divided(group, bucket, world)

    key = bucket.index()
    total = flat.numel()
    side = math.isqrt(total)
    if side * side < total:
        side += 1
    rank = state.matrix_approximation_rank
    state.total_numel_before_compression += total
    state.total_numel_after_compression += side * rank * 2
    state._report(bucket)
    with ember.no_grad():
        padded = ember.cat([flat, flat.new_zeros(side * side - total)])
        before = _add_error(state, key, padded)
        matrix = padded.view(side, side)
        fresh = (not state.warm_start or key not in state.p_memory_dict
                 or tuple(state.q_memory_dict[key].shape) != (side, rank))
        if fresh:
            state.p_memory_dict[key] = flat.new_empty(side, rank)
            state.q_memory_dict[key] = state._random_q((side, rank), flat.dtype, flat.device)
        p, q = state.p_memory_dict[key], state.q_memory_dict[key]
        _orthogonalize(q, state.orthogonalization_epsilon)
        p.copy_(matrix @ q)
        dist.all_reduce(p, group=group)
        _orthogonalize(p, state.orthogonalization_epsilon)
        q.copy_(matrix.t() @ p)
        dist.all_reduce(q, group=group)
        q.div_(world)
        matrix.copy_(p @ q.t())
        if before is not None:
            state.error_dict[key] = before - padded
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        flat.copy_(padded[:total])
    state.maybe_increase_iter(bucket)
    return _done(flat)
