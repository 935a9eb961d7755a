"""DistributedDataParallel: data-parallel training over ember.distributed (torch's API).

Each process holds a replica of the module and feeds it its share of the batch. At construction
the parameters and buffers are broadcast from rank 0 so the replicas start equal; during
backward the gradients are averaged over the ranks, so every replica takes the same step.

Gradients are reduced in buckets, laid out as torch lays them out: the first iteration packs all
parameters into one flat buffer in registration order; after it the buckets are rebuilt in the
order backward produced the gradients, into flat buffers of ``bucket_cap_mb`` MiB (with the
default cap the first 1 MiB, so communication starts early). With
``find_unused_parameters=True`` (and no static graph), whose used parameters may change, the
buckets are never rebuilt: they are sized from the start, in reverse registration order. A hook on each parameter (run after its
gradient is accumulated) copies the gradient into its bucket; when a bucket is full its
all-reduce is started asynchronously, and backward goes on computing the earlier layers while it
runs. The last hook waits for all buckets and writes the averaged gradients back.

ember's autograd has no end-of-backward callback, so that final wait runs inside the hook of the
last parameter to get a gradient; with ``find_unused_parameters=True`` the parameters that take
no part in the output are found by walking the autograd graph after forward and marked ready when
backward starts, so their buckets do not wait for gradients that never come.

Uneven inputs (``with ddp.join(): ...``, ember.distributed.algorithms.join): each forward starts
with a join-signal all-reduce; a rank that has run out of batches answers it and issues the same
collectives as the others' iteration (buffer broadcast, a flag saying whether backward reduces,
then one all-reduce of zeros per bucket), and when all are done the last rank to finish
broadcasts its parameters, so every replica ends equal.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

import ember
from ember.nn.modules.module import Module

__all__ = ["DistributedDataParallel"]

_MiB = 1024 * 1024
_FIRST_BUCKET_BYTES = 1 * _MiB
_BUFFER_BROADCAST_BYTES = 250 * _MiB


def _dist() -> Any:
    try:
        import ember.distributed as dist
    except ImportError as e:  # ember-nn installed without ember-distributed
        raise RuntimeError(
            "DistributedDataParallel needs the ember-distributed package "
            "(ember.distributed) to be installed"
        ) from e
    return dist


def _tensors_in(obj: Any) -> Iterator[ember.Tensor]:
    """Every tensor in a nested structure of tuples, lists, dicts (and dataclass-like objects)."""
    if isinstance(obj, ember.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors_in(x)


def _to_device(obj: Any, device: Any) -> Any:
    if isinstance(obj, ember.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(_to_device(x, device) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, device) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v, device)) for k, v in obj.items())
    return obj


def _grad_accumulator(p: ember.Tensor) -> Any:
    """The autograd node that accumulates into ``p.grad`` (alive while a graph uses it)."""
    return p.view_as(p).grad_fn.next_functions[0][0]


def _reachable_nodes(outputs: Any) -> dict[int, Any]:
    """Every autograd node reachable from the tensors in ``outputs``, by id. (A node's Python
    object is the same each time it is reached only while one is alive: keep the dict while
    comparing.)"""
    seen: dict[int, Any] = {}
    stack = [t.grad_fn for t in _tensors_in(outputs) if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(n for n, _ in node.next_functions if n is not None and id(n) not in seen)
    return seen


def _coalesced_broadcast(tensors: list[ember.Tensor], src: int, group: Any, limit: int) -> None:
    """Broadcasts ``tensors`` from ``src`` through flat buffers of at most ``limit`` bytes per
    dtype and device, and copies the received values back."""
    dist = _dist()
    by_kind: dict[tuple, list[ember.Tensor]] = {}
    for t in tensors:
        by_kind.setdefault((t.dtype, str(t.device)), []).append(t)
    with ember.no_grad():
        for group_tensors in by_kind.values():
            chunk: list[ember.Tensor] = []
            size = 0
            for t in [*group_tensors, None]:
                if t is not None and (not chunk or size + t.numel() * t.element_size() <= limit):
                    chunk.append(t)
                    size += t.numel() * t.element_size()
                    continue
                flat = ember.cat([c.detach().reshape(-1) for c in chunk])
                dist.broadcast(flat, src, group=group)
                offset = 0
                for c in chunk:
                    n = c.numel()
                    c.copy_(flat[offset : offset + n].view(c.shape))
                    offset += n
                chunk, size = ([t], t.numel() * t.element_size()) if t is not None else ([], 0)


class _Bucket:
    """A flat gradient buffer for some parameters (of one dtype and device)."""

    def __init__(self, index: int, param_indices: list[int], params: list[ember.Tensor]) -> None:
        self.index = index
        self.param_indices = param_indices
        self.params = params
        numel = sum(p.numel() for p in params)
        self.buffer = ember.zeros(numel, dtype=params[0].dtype, device=params[0].device)
        self.views: list[ember.Tensor] = []
        offset = 0
        for p in params:
            self.views.append(self.buffer[offset : offset + p.numel()].view(p.shape))
            offset += p.numel()
        self.pending = len(params)
        self.future: Any = None


class _Reducer:
    """Buckets, autograd hooks and the per-iteration state of DDP's gradient reduction."""

    def __init__(
        self,
        ddp: DistributedDataParallel,
        params: list[ember.Tensor],
        names: list[str],
        bucket_cap_bytes: int,
        first_bucket_bytes: int | None = None,
    ) -> None:
        self.params = params
        self.names = names
        self.group = ddp.process_group
        self.gradient_as_bucket_view = ddp.gradient_as_bucket_view
        self.find_unused = ddp.find_unused_parameters
        self.static_graph = ddp.static_graph
        self.comm_hook: tuple[Any, Callable] | None = None
        self.buckets: list[_Bucket] = []
        self.where: list[tuple[int, int]] = []  # param index -> (bucket, position in bucket)
        self.bucket_cap_bytes = bucket_cap_bytes
        self.first_bucket_bytes = (
            min(_FIRST_BUCKET_BYTES, bucket_cap_bytes) if first_bucket_bytes is None
            else first_bucket_bytes)
        # As torch: one bucket (per dtype and device) until the rebuild in the ready order,
        # unless no rebuild comes (find_unused_parameters without static_graph).
        if self.static_graph or not self.find_unused:
            initial_limits = [sys.maxsize]
        else:
            initial_limits = [self.first_bucket_bytes, bucket_cap_bytes]
        self._build_buckets(list(range(len(params))), initial_limits, initial=True)
        self.iteration = 0
        # The order in which gradients became ready in the first iteration; the buckets are
        # rebuilt in that order (rank 0's) before the second one.
        self.ready_order: list[int] = []
        self.rebuilt = False
        self.expect_hooks = False
        # Under Join with divide_by_initial_world_size=False: the join signal's all-reduce,
        # whose result (the number of ranks still training) divides the gradients.
        self.join_count: Any = None
        self._reset_iteration()
        # In a static graph the parameters unused in the first iteration stay unused.
        self.static_unused: list[int] | None = None
        self._ddp = weakref.ref(ddp)
        self.handles = []
        me = weakref.ref(self)
        for i, p in enumerate(params):

            def hook(_p: ember.Tensor, i: int = i) -> None:
                r = me()
                if r is not None:
                    r._autograd_hook(i)

            self.handles.append(p.register_post_accumulate_grad_hook(hook))

    # ---- buckets ---------------------------------------------------------------------------
    def _build_buckets(self, order: list[int], limits: list[int] | None = None,
                       initial: bool = False) -> None:
        """Parameters in ``order`` grouped per dtype and device into buckets of at most
        ``limits[0]`` bytes for the first of each kind, ``limits[1]`` for the others (default:
        first_bucket_bytes, bucket_cap_bytes). As torch's: the initial buckets are sized over the
        parameters in registration order and then reversed (bucket 0 holds the last ones, each
        bucket its parameters in registration order); a rebuild takes ``order`` as the order the
        gradients became ready, bucket 0 first."""
        if limits is None:
            limits = [self.first_bucket_bytes, self.bucket_cap_bytes]
        rank_of = {i: k for k, i in enumerate(order)}
        open_: dict[tuple, tuple[list[int], int, int]] = {}  # kind -> (indices, bytes, #closed)
        done: list[list[int]] = []
        for i in order:
            p = self.params[i]
            kind = (p.dtype, str(p.device))
            idx, size, closed = open_.get(kind, ([], 0, 0))
            idx.append(i)
            size += p.numel() * p.element_size()
            if size >= limits[min(closed, len(limits) - 1)]:
                done.append(idx)
                idx, size, closed = [], 0, closed + 1
            open_[kind] = (idx, size, closed)
        done.extend(idx for idx, _, _ in open_.values() if idx)
        # Bucket 0 holds the parameters whose gradients come first.
        done.sort(key=lambda idx: rank_of[idx[0]])
        if initial:
            done.reverse()
        self.buckets = [
            _Bucket(b, idx, [self.params[i] for i in idx]) for b, idx in enumerate(done)
        ]
        self.where = [(0, 0)] * len(self.params)
        for b in self.buckets:
            for pos, i in enumerate(b.param_indices):
                self.where[i] = (b.index, pos)
        if self.gradient_as_bucket_view:
            with ember.no_grad():
                for b in self.buckets:
                    for p, view in zip(b.params, b.views):
                        if p.grad is not None:
                            view.copy_(p.grad)
                            p.grad = view

    def _rebuild_buckets(self) -> None:
        """Rebuilds the buckets in the order the first iteration produced the gradients (rank 0's,
        so that every rank has the same buckets)."""
        dist = _dist()
        self.rebuilt = True
        n = len(self.params)
        order = self.ready_order + [i for i in range(n) if i not in set(self.ready_order)]
        t = ember.tensor(order, dtype=ember.int64, device=self.params[0].device)
        src = self._ddp()._src_rank() if self._ddp() is not None else 0
        dist.broadcast(t, src, group=self.group)
        order = [int(x) for x in t.tolist()]
        if sorted(order) != list(range(n)):
            raise RuntimeError(
                f"DistributedDataParallel: rank {src} sent an invalid parameter order "
                "for the buckets (do all ranks hold the same module?)"
            )
        if order != [i for b in self.buckets for i in b.param_indices]:
            self._build_buckets(order)

    @property
    def bucket_indices(self) -> list[list[int]]:
        """Per bucket, the indices (into the parameters DDP synchronizes: ``module.parameters()`` less the
        ignored ones) of its parameters."""
        return [list(b.param_indices) for b in self.buckets]

    # ---- per iteration ---------------------------------------------------------------------
    def _reset_iteration(self) -> None:
        n = len(self.params)
        self.ready = [False] * n
        self.local_used = [False] * n
        self.unused: list[int] = []
        self.marked_unused = False
        self.next_bucket = 0
        self.any_ready = False
        for b in self.buckets:
            b.pending = len(b.params)
            b.future = None

    def check_previous_iteration(self) -> None:
        """Raises if the last backward did not reduce every gradient (a parameter got none)."""
        if not (self.expect_hooks and self.any_ready):
            return
        missing = [i for i, r in enumerate(self.ready) if not r]
        rank = _dist().get_rank(self.group)
        self._abandon_iteration()
        names = ", ".join(self.names[i] for i in missing)
        raise RuntimeError(
            "DistributedDataParallel: expected to have finished reduction in the prior iteration "
            "before starting a new one. Some parameters received no gradient in the last backward, "
            "so their buckets were never reduced: pass find_unused_parameters=True to "
            "DistributedDataParallel (or static_graph=True if the same ones are unused in every "
            "iteration), and make sure every forward output takes part in the loss. Parameters "
            f"that did not receive a gradient on rank {rank}: {names} (indices {missing})"
        )

    def _abandon_iteration(self) -> None:
        # Wait for what was started so that no collective is left in flight.
        for b in self.buckets[: self.next_bucket]:
            try:
                b.future.wait()
            except Exception:  # noqa: BLE001 - the error above is the one to report
                pass
        self.expect_hooks = False
        self._reset_iteration()

    def _should_rebuild(self) -> bool:
        """Whether the buckets are rebuilt in the ready order before this iteration: as in
        torch, once, after the first iteration (the second with static_graph), and never with
        find_unused_parameters (whose used parameters may change) unless the graph is static."""
        if self.rebuilt or (self.find_unused and not self.static_graph):
            return False
        return self.iteration > (1 if self.static_graph else 0)

    def prepare_for_backward(self, outputs: Any) -> None:
        """Called at the end of a forward whose backward should reduce the gradients."""
        if self._should_rebuild():
            self._rebuild_buckets()
        elif not self.rebuilt:
            self.ready_order = []  # the order of the last iteration before the rebuild counts
        self._reset_iteration()
        self.expect_hooks = True
        if self.static_graph and self.static_unused is not None:
            self.unused = list(self.static_unused)
        elif self.find_unused or self.static_graph:
            reached = _reachable_nodes(outputs)
            accumulators = [_grad_accumulator(p) for p in self.params]  # alive: ids stay distinct
            self.unused = [i for i, a in enumerate(accumulators) if reached.get(id(a)) is not a]
            del accumulators, reached
            if self.static_graph:
                self.static_unused = list(self.unused)

    def _autograd_hook(self, i: int) -> None:
        if not self.expect_hooks:
            return  # a backward outside DDP's control (no_sync, or no DDP forward before it)
        if self.ready[i]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {self.names[i]} (index {i}) received a gradient "
                "twice in one iteration: a second backward through the same forward (retain_graph), "
                "or a parameter used in several forwards before backward, is not supported; use "
                "no_sync() for gradient accumulation"
            )
        self.any_ready = True
        self.local_used[i] = True
        if not self.marked_unused:
            self.marked_unused = True
            for u in self.unused:
                self._mark_ready(u)
        self._mark_ready(i)

    def _mark_ready(self, i: int) -> None:
        self.ready[i] = True
        if not self.rebuilt:
            self.ready_order.append(i)
        b_index, pos = self.where[i]
        b = self.buckets[b_index]
        p, view = self.params[i], b.views[pos]
        with ember.no_grad():
            g = p.grad
            if g is None:
                view.zero_()
            elif not (self.gradient_as_bucket_view and g.data_ptr() == view.data_ptr()):
                view.copy_(g)
                if self.gradient_as_bucket_view:
                    p.grad = view
        b.pending -= 1
        # Buckets start in index order on every rank, so collectives match across ranks.
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            self._launch(self.buckets[self.next_bucket])
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets):
            self._finalize()

    def _launch(self, b: _Bucket) -> None:
        from ember.distributed.algorithms._comm_types import GradBucket

        bucket = GradBucket(b.index, b.buffer, b.views, b.params, b.index == len(self.buckets) - 1)
        b.future = self._reduce(bucket)

    def _reduce(self, bucket: Any) -> Any:
        """Starts the reduction of a GradBucket (by the comm hook, or an all-reduce averaging
        over the ranks); returns its future."""
        from ember.distributed.algorithms.ddp_comm_hooks.default_hooks import _allreduce_divided

        if self.comm_hook is None:
            if self.join_count is not None:
                divisor = self.join_count.count()
            else:
                divisor = _dist().get_world_size(self.group)
            return _allreduce_divided(self.group, bucket, divisor)
        state, hook = self.comm_hook
        future = hook(state, bucket)
        if not hasattr(future, "wait"):
            raise RuntimeError(
                f"DistributedDataParallel: the communication hook {hook!r} must "
                f"return a Future (with wait()), got {type(future).__name__}"
            )
        return future

    def shadow_iteration(self) -> None:
        """On a rank that has joined (see DistributedDataParallel.join): the collectives of one
        synchronized backward of the other ranks, contributing zero gradients (and no use of
        any parameter); this rank's own gradients are left alone."""
        from ember.distributed.algorithms._comm_types import GradBucket

        dist = _dist()
        if self._should_rebuild():
            self._rebuild_buckets()
        futures = []
        for b in self.buckets:
            zeros = ember.zeros_like(b.buffer)
            views, offset = [], 0
            for p in b.params:
                views.append(zeros[offset : offset + p.numel()].view(p.shape))
                offset += p.numel()
            last = b.index == len(self.buckets) - 1
            futures.append(self._reduce(GradBucket(b.index, zeros, views, b.params, last)))
        for f in futures:
            f.wait()
        if self.find_unused or self.static_graph:
            used = ember.zeros(len(self.params), dtype=ember.int32, device=self.params[0].device)
            dist.all_reduce(used, op=dist.ReduceOp.MAX, group=self.group)
        self.iteration += 1

    def _finalize(self) -> None:
        self.expect_hooks = False
        dist = _dist()
        for b in self.buckets:
            result = b.future.wait()
            if isinstance(result, (list, tuple)):  # torch-style futures hold [tensor]
                result = result[0]
            if not isinstance(result, ember.Tensor) or result.numel() != b.buffer.numel():
                raise RuntimeError(
                    f"DistributedDataParallel: the communication hook's future must "
                    f"hold a tensor of {b.buffer.numel()} elements (the bucket), got "
                    f"{type(result).__name__}"
                )
            if result.data_ptr() != b.buffer.data_ptr():
                with ember.no_grad():
                    b.buffer.copy_(result.reshape(-1))
        globally_used = None
        if self.find_unused or self.static_graph:
            # A parameter unused here may have been used on another rank: only those unused
            # everywhere keep their gradient untouched. (Every rank takes part, whether or not it
            # found unused parameters itself.)
            used = ember.tensor(
                [1 if u else 0 for u in self.local_used],
                dtype=ember.int32,
                device=self.params[0].device,
            )
            dist.all_reduce(used, op=dist.ReduceOp.MAX, group=self.group)
            globally_used = [bool(x) for x in used.tolist()]
        with ember.no_grad():
            for b in self.buckets:
                for i, p, view in zip(b.param_indices, b.params, b.views):
                    if globally_used is not None and not globally_used[i]:
                        continue
                    if self.gradient_as_bucket_view:
                        if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                            p.grad = view
                    elif p.grad is None:
                        p.grad = view.clone()
                    else:
                        p.grad.copy_(view)
        self.iteration += 1
        self._reset_iteration()

    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def __del__(self) -> None:
        try:
            self.remove_hooks()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _DDPJoinHook:
    """What DistributedDataParallel does on a rank that has joined (a JoinHook): each main_hook
    issues the collectives of one iteration of the ranks still training, in their order; the
    post_hook broadcasts the model from a last joiner."""

    def __init__(self, ddp: DistributedDataParallel, divide_by_initial_world_size: bool) -> None:
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self) -> None:
        ddp = self.ddp
        buffers = ddp._synced_buffers() if ddp.broadcast_buffers else []
        if ddp.require_forward_param_sync and buffers:
            src = ddp._find_common_rank(False)
            _coalesced_broadcast(buffers, src, ddp.process_group, _BUFFER_BROADCAST_BYTES)
        should_sync = ddp._all_reduce_sync_flag(False)
        # The forward of the ranks still training decides the next buffer synchronization.
        ddp.require_forward_param_sync = should_sync
        if should_sync:
            ddp.reducer.shadow_iteration()

    def post_hook(self, is_last_joiner: bool) -> None:
        ddp = self.ddp
        src = ddp._find_common_rank(is_last_joiner)
        tensors = [p.detach() for p in ddp._synced_params()]
        if ddp.broadcast_buffers:
            tensors += ddp._synced_buffers()
        _coalesced_broadcast(tensors, src, ddp.process_group, _BUFFER_BROADCAST_BYTES)


class DistributedDataParallel(Module):
    """Wraps ``module`` for data-parallel training: one process per replica, gradients averaged
    over the ranks of ``process_group`` during backward (torch.nn.parallel's API).

    Args:
        module: the model; its parameters and buffers are broadcast from rank 0 here.
        device_ids: for a CUDA module, ``[device]`` it lives on (inputs are moved there); None
            for CPU modules.
        output_device: accepted for compatibility (outputs stay where the module puts them).
        dim: accepted for compatibility (single-device replicas do not scatter inputs).
        broadcast_buffers: deprecated (FutureWarning): ``forward_sync_buffers``, except that
            False also leaves the buffers out of the initial broadcast.
        init_sync: check at construction that the ranks hold the same parameters and
            broadcast rank 0's parameters and buffers (False: the caller ensures they agree).
        process_group: the group to reduce over (None: the default group).
        bucket_cap_mb: bucket size in MiB (the first bucket is at most 1 MiB).
        find_unused_parameters: look for parameters that take no part in the forward's output
            and do not wait for their gradients.
        gradient_as_bucket_view: make each ``param.grad`` a view into its bucket (saves a copy
            and the memory of the gradients).
        static_graph: the set of used parameters is the same in every iteration (found once).
        device_mesh: a 1-D ``DeviceMesh`` whose group to reduce over (instead of
            process_group).
        batched_grad_copy: accepted (a kernel-launch optimization of torch's reducer).
        forward_sync_buffers: broadcast the module's buffers from rank 0 at the start of each
            forward that follows a training forward (grad enabled, outside ``no_sync``); None
            is True.

    Example (run with ``python -m ember.distributed.run --nproc-per-node 2 train.py``)::

        import ember, ember.distributed as dist
        from ember.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        model = DDP(ember.nn.Linear(10, 1))
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        loss = model(ember.randn(8, 10)).pow(2).mean()
        loss.backward()       # gradients averaged over the ranks
        opt.step()            # every replica takes the same step
    """

    def __init__(
        self,
        module: Module,
        device_ids: Sequence[int | Any] | None = None,
        output_device: int | Any | None = None,
        dim: int = 0,
        broadcast_buffers: bool | None = None,
        init_sync: bool = True,
        process_group: Any = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        delay_all_reduce_named_params: Any = None,
        param_to_hook_all_reduce: Any = None,
        mixed_precision: Any = None,
        device_mesh: Any = None,
        skip_all_reduce_unused_params: bool = False,
        bucket_cap_mb_list: list[int] | None = None,
        batched_grad_copy: bool = False,
        forward_sync_buffers: bool | None = None,
    ) -> None:
        super().__init__()
        if (delay_all_reduce_named_params is None) != (param_to_hook_all_reduce is None):
            raise ValueError("delay_all_reduce_named_params and param_to_hook_all_reduce need to "
                             "be set at the same time.")
        for name, value, default in (
                ("delay_all_reduce_named_params", delay_all_reduce_named_params, None),
                ("mixed_precision", mixed_precision, None),
                ("skip_all_reduce_unused_params", skip_all_reduce_unused_params, False),
                ("bucket_cap_mb_list", bucket_cap_mb_list, None)):
            if value is not default and value != default:
                raise NotImplementedError(f"DistributedDataParallel: {name}={value!r} is not "
                                          "supported by ember's DDP")
        if process_group is not None and device_mesh is not None:
            raise RuntimeError("Cannot specify both process_group and device_mesh arguments.")
        if device_mesh is not None:
            if device_mesh.ndim != 1:
                raise RuntimeError(f"Only 1D device mesh is supported, but got {device_mesh}.")
            process_group = device_mesh.get_group(mesh_dim=0)
        if broadcast_buffers is not None:
            warnings.warn(
                "Both `broadcast_buffers` and `forward_sync_buffers` were specified. "
                "`broadcast_buffers` is deprecated and its value is ignored when "
                "`forward_sync_buffers` is provided." if forward_sync_buffers is not None else
                "`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead. "
                "IMPORTANT: unlike `broadcast_buffers=False`, `forward_sync_buffers=False` still "
                "syncs buffers at init.", FutureWarning, stacklevel=2)
        if forward_sync_buffers is not None:
            init_sync_buffers = True
        else:
            # the deprecated flag also keeps the buffers out of the initial broadcast
            forward_sync_buffers = init_sync_buffers = (
                True if broadcast_buffers is None else bool(broadcast_buffers))
        if check_reduction:
            warnings.warn("The `check_reduction` argument in `DistributedDataParallel` module is "
                          "deprecated. Please avoid using it.", FutureWarning, stacklevel=2)
        if not isinstance(module, Module):
            raise TypeError(
                f"DistributedDataParallel: module must be an nn.Module, got {type(module).__name__}"
            )
        dist = _dist()
        if not dist.is_initialized():
            raise ValueError(  # PyTorch's class (its get_world_size raises it)
                "DistributedDataParallel: the default process group has not been "
                "initialized; call ember.distributed.init_process_group(...) first"
            )
        if process_group is None:
            # the default group itself, as torch keeps it (Join compares the joinables' groups)
            group = getattr(dist, "group", None)
            process_group = getattr(group, "WORLD", None)
        default_cap = bucket_cap_mb is None
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError(
                f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}"
            )
        # parameters and buffers DDP leaves alone (_set_params_and_buffers_to_ignore_for_model:
        # expert-parallel weights that differ per rank, for one)
        self.parameters_to_ignore = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        named = [(n, p) for n, p in module.named_parameters()
                 if p.requires_grad and n not in self.parameters_to_ignore]
        if not named:
            raise RuntimeError(
                "DistributedDataParallel is not needed when a module doesn't have any "
                "parameter that requires a gradient"
            )
        devices = {str(p.device) for _, p in module.named_parameters()}
        device_types = {p.device.type for _, p in module.named_parameters()}
        if device_ids is not None:
            if device_types != {"cuda"} or len(devices) != 1:
                raise ValueError(
                    "DistributedDataParallel: device_ids and output_device only work with a module "
                    f"on a single CUDA device, but got device_ids {list(device_ids)}, output_device "
                    f"{output_device}, and module parameters on {sorted(devices)}"
                )
            if len(device_ids) != 1:
                raise ValueError(
                    f"DistributedDataParallel: device_ids must list the one device of "
                    f"the module, got {list(device_ids)}"
                )
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else None
        self.output_device = output_device
        self.dim = dim
        self.forward_sync_buffers = bool(forward_sync_buffers)
        self.process_group = process_group
        self.device_mesh = device_mesh
        self.batched_grad_copy = batched_grad_copy
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.bucket_bytes_cap = int(bucket_cap_mb * _MiB)
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self._device = (
            ember.device(
                f"cuda:{device_ids[0]}" if isinstance(device_ids[0], int) else device_ids[0]
            )
            if device_ids
            else None
        )

        from ember.distributed.algorithms.join import _JoinConfig

        self._join_config = _JoinConfig.disabled()  # set by Join (see join())
        self._divide_by_initial_world_size = True

        if init_sync:  # else the user promises the replicas start equal
            self._verify_same_model_on_all_ranks()
            self._sync_module_states(init_sync_buffers)
        # torch's small first bucket (for the gradients ready first) only with the default cap
        first_cap = min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap) if default_cap else (
            self.bucket_bytes_cap)
        self.reducer = _Reducer(
            self, [p for _, p in named], [n for n, _ in named], self.bucket_bytes_cap, first_cap
        )

    @property
    def broadcast_buffers(self) -> bool:
        """The deprecated name of forward_sync_buffers."""
        return self.forward_sync_buffers

    @broadcast_buffers.setter
    def broadcast_buffers(self, value: bool) -> None:
        self.forward_sync_buffers = value

    def _set_static_graph(self) -> None:
        """static_graph=True set after construction (torch's older spelling, still used by
        training frameworks); call it before the first iteration."""
        self.static_graph = True
        self.reducer.static_graph = True

    # ---- setup -----------------------------------------------------------------------------
    def _src_rank(self) -> int:
        if self.process_group is None:
            return 0
        dist = _dist()
        return (
            int(dist.get_global_rank(self.process_group, 0))
            if hasattr(dist, "get_global_rank")
            else 0
        )

    def _verify_same_model_on_all_ranks(self) -> None:
        """All ranks must hold the same parameters, as torch checks them: an all-gather of the
        parameter counts (here also of a fingerprint of every size and stride, so that every
        rank learns of a difference), then a broadcast of rank 0's sizes and strides, which
        each rank compares with its own."""
        dist = _dist()
        params = self._synced_params()
        meta: list[int] = []
        for p in params:
            meta += list(p.shape) + list(p.stride())
        mod = (1 << 61) - 1
        fingerprint = 0
        for v in meta:
            fingerprint = (fingerprint * 1000003 + v + 1) % mod
        device = params[0].device if params else "cpu"
        mine = ember.tensor([len(params), len(meta), fingerprint], dtype=ember.int64,
                            device=device)
        world = dist.get_world_size(self.process_group)
        parts = [ember.empty_like(mine) for _ in range(world)]
        dist.all_gather(parts, mine, group=self.process_group)
        stats = [tuple(t.tolist()) for t in parts]
        me = dist.get_rank(self.process_group)
        for r, (count, _, _) in enumerate(stats):
            if count != len(params):
                raise RuntimeError(
                    f"DDP expects same model across all ranks, but Rank {me} has {len(params)} "
                    f"params, while rank {r} has inconsistent {count} params.")
        if any(s[1] != len(meta) for s in stats):  # rank 0's list would not fit: stop here
            raise RuntimeError(
                "DDP expects same model across all ranks, but the parameters' numbers of "
                f"dimensions differ: this rank (rank {me}) has {[p.dim() for p in params]}, "
                f"ranks {[r for r, s in enumerate(stats) if s[1] != len(meta)]} differ")
        ref = ember.tensor(meta, dtype=ember.int64, device=device)
        dist.broadcast(ref, self._src_rank(), group=self.process_group)
        ref_meta = ref.tolist()
        at = 0
        for i, p in enumerate(params):
            n = p.dim()
            sizes, strides = ref_meta[at:at + n], ref_meta[at + n:at + 2 * n]
            at += 2 * n
            if sizes != list(p.shape):
                raise RuntimeError(
                    f"[{me}]: params[{i}] in this process with sizes {list(p.shape)} appears not "
                    "to match sizes of the same param in process 0.")
            if strides != list(p.stride()):
                raise RuntimeError(
                    f"params[{i}] in this process with sizes {list(p.shape)} appears not to "
                    "match strides of the same param in process 0.")
        differ = [r for r, s in enumerate(stats) if s != stats[0]]
        if differ:  # this rank matches rank 0, but others do not (they raise the details)
            raise RuntimeError(
                f"DDP expects same model across all ranks, but the sizes or strides of the "
                f"parameters of rank(s) {differ} differ from those of rank 0")

    def _synced_params(self) -> list[ember.Tensor]:
        """The module's parameters DDP keeps equal on the ranks (all but the ignored)."""
        return [p for n, p in self.module.named_parameters() if n not in self.parameters_to_ignore]

    def _synced_buffers(self) -> list[ember.Tensor]:
        return [b for n, b in self.module.named_buffers() if n not in self.parameters_to_ignore]

    @staticmethod
    def _set_params_and_buffers_to_ignore_for_model(
            module: Module, params_and_buffers_to_ignore: Iterable[str]) -> None:
        """Names (as ``module.named_parameters()`` / ``named_buffers()`` give them) of the
        parameters and buffers a DDP made of ``module`` later is to leave alone: not
        broadcast from rank 0, not checked for equality, their gradients not averaged (the
        experts of expert parallelism, which differ per rank). Call it before wrapping.

        Example::

            >>> import ember
            >>> from ember.nn.parallel import DistributedDataParallel as DDP
            >>> model = ember.nn.ModuleDict({"experts": ember.nn.ModuleList([ember.nn.Linear(2, 2)])})
            >>> DDP._set_params_and_buffers_to_ignore_for_model(model, ["experts.0.weight"])
            >>> sorted(model._ddp_params_and_buffers_to_ignore)
            ['experts.0.weight']
            >>> ddp = DDP(model)  # doctest: +SKIP
        """
        names = list(params_and_buffers_to_ignore)
        module._ddp_params_and_buffers_to_ignore = names  # type: ignore[attr-defined]
        wanted = set(names)
        for name, t in [*module.named_parameters(), *module.named_buffers()]:
            if name in wanted:
                t._ddp_ignored = True  # type: ignore[attr-defined]

    def _sync_module_states(self, buffers: bool = True) -> None:
        tensors = [p.detach() for p in self._synced_params()]
        if buffers:
            tensors += self._synced_buffers()
        if tensors:
            _coalesced_broadcast(
                tensors, self._src_rank(), self.process_group, _BUFFER_BROADCAST_BYTES
            )

    # ---- training --------------------------------------------------------------------------
    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        inputs, kwargs, will_sync = self._pre_forward(inputs, kwargs)
        return self._post_forward(self.module(*inputs, **kwargs), will_sync)

    def _pre_forward(self, inputs: tuple, kwargs: dict) -> tuple[tuple, dict, bool]:
        """Before the module runs: inputs to the device, buffers synchronized, the Join
        handshake; returns the inputs and whether this backward synchronizes gradients."""
        self.reducer.check_previous_iteration()
        will_sync = ember.is_grad_enabled() and self.require_backward_grad_sync
        joining = self._join_config.enable
        if joining:
            from ember.distributed.algorithms.join import Join

            # Tells the ranks that have joined that this one still trains (they shadow this
            # iteration's collectives: see _DDPJoinHook).
            count = Join.notify_join_context(self)
            self.reducer.join_count = None if self._divide_by_initial_world_size else count
        else:
            self.reducer.join_count = None
        if self._device is not None:
            inputs, kwargs = _to_device(inputs, self._device), _to_device(kwargs, self._device)
        buffers = self._synced_buffers() if self.broadcast_buffers else []
        # As in torch: the buffers are synchronized when the previous forward was a training
        # one (grad enabled, gradients synchronized), so every rank decides the same way. Under
        # Join they come from the highest rank still training (rank 0 may have joined).
        if self.require_forward_param_sync and buffers:
            src = self._find_common_rank(True) if joining else self._src_rank()
            _coalesced_broadcast(buffers, src, self.process_group, _BUFFER_BROADCAST_BYTES)
        if joining:
            self._all_reduce_sync_flag(will_sync)
        return inputs, kwargs, will_sync

    def _post_forward(self, output: Any, will_sync: bool) -> Any:
        """After the module ran: the reducer learns which outputs backward will start from."""
        if will_sync:
            self.require_forward_param_sync = True
            self.reducer.prepare_for_backward(output)
        else:
            self.require_forward_param_sync = False
            self.reducer.expect_hooks = False
        return output

    # ---- uneven inputs (Join) --------------------------------------------------------------
    def join(
        self,
        divide_by_initial_world_size: bool = True,
        enable: bool = True,
        throw_on_early_termination: bool = False,
    ) -> Any:
        """A context manager for training with a different number of batches on each rank:
        ``ember.distributed.algorithms.join.Join([self], ...)``.

        A rank that leaves its training loop inside the context keeps answering the other
        ranks' collectives (all-reducing zero gradients), so nobody hangs; when every rank is
        done, the parameters (and buffers, with ``broadcast_buffers``) of a rank that joined
        last are broadcast, so all replicas end equal.

        Args:
            divide_by_initial_world_size: average the gradients over the whole world size
                (True, the joined ranks count as zero gradients) or over the ranks still
                training (False).
            enable: False makes the context do nothing.
            throw_on_early_termination: raise on every rank as soon as one runs out of inputs.

        Example::

            >>> with ddp.join():                     # doctest: +SKIP
            ...     for x, y in my_batches:          # uneven across ranks
            ...         loss_fn(ddp(x), y).backward(); opt.step(); opt.zero_grad()
        """
        from ember.distributed.algorithms.join import Join

        return Join(
            [self],
            enable,
            throw_on_early_termination,
            divide_by_initial_world_size=divide_by_initial_world_size,
        )

    def join_hook(self, **kwargs: Any) -> _DDPJoinHook:
        """DDP's JoinHook (``divide_by_initial_world_size`` in kwargs, default True)."""
        return _DDPJoinHook(self, bool(kwargs.get("divide_by_initial_world_size", True)))

    @property
    def join_device(self) -> Any:
        """The device of the join signal: the one of the module's parameters."""
        return self.reducer.params[0].device

    @property
    def join_process_group(self) -> Any:
        """The process group the gradients are reduced over."""
        return self.process_group

    def _find_common_rank(self, candidate: bool) -> int:
        """The highest group rank among the candidates (as a global rank, for broadcasts)."""
        dist = _dist()
        rank = dist.get_rank(self.process_group)
        t = ember.tensor([rank if candidate else -1], dtype=ember.int64, device=self.join_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.process_group)
        chosen = int(t.item())
        if chosen < 0:
            raise RuntimeError(
                "DistributedDataParallel: no rank is a candidate to synchronize the model "
                "from (every rank reported that it had joined)"
            )
        if self.process_group is None:
            return chosen
        return int(dist.get_global_rank(self.process_group, chosen))

    def _all_reduce_sync_flag(self, will_sync: bool) -> bool:
        """Under Join: whether any rank still training reduces gradients in this iteration's
        backward (a joined rank passes False and then shadows that reduction)."""
        dist = _dist()
        flag = ember.tensor([1 if will_sync else 0], dtype=ember.int32, device=self.join_device)
        dist.all_reduce(flag, group=self.process_group)
        return int(flag.item()) != 0

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Within this context backward does not reduce gradients: they accumulate locally, and
        the first backward after it reduces the sum.

        >>> # with ddp.no_sync():
        >>> #     for x in micro_batches[:-1]: ddp(x).sum().backward()
        >>> # ddp(micro_batches[-1]).sum().backward()   # reduces the accumulated gradients
        """
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def register_comm_hook(self, state: object, hook: Callable[[Any, Any], Any]) -> None:
        """Replaces the all-reduce of each bucket by ``hook(state, bucket) -> Future[Tensor]``
        (see ember.distributed.algorithms.ddp_comm_hooks); call it once, before training."""
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable, got {type(hook).__name__}")
        if self.reducer.comm_hook is not None:
            raise RuntimeError(
                "register_comm_hook or register_builtin_comm_hook can only be called once"
            )
        if self.reducer.iteration > 0 or self.reducer.any_ready:
            raise RuntimeError("register_comm_hook must be called before the first backward")
        self.reducer.comm_hook = (state, hook)

    def _get_ddp_logging_data(self) -> dict[str, Any]:
        return {
            "world_size": _dist().get_world_size(self.process_group),
            "bucket_cap_bytes": self.bucket_bytes_cap,
            "num_buckets": len(self.reducer.buckets),
            "bucket_sizes": [b.buffer.numel() for b in self.reducer.buckets],
            "find_unused_parameters": self.find_unused_parameters,
            "gradient_as_bucket_view": self.gradient_as_bucket_view,
            "static_graph": self.static_graph,
            "iterations": self.reducer.iteration,
        }

    def __getstate__(self) -> dict:
        raise TypeError("DistributedDataParallel cannot be pickled; pickle its .module instead")
