"""DataLoader: batches from a dataset, in this process or in worker processes."""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import numbers
import os
import queue
import signal
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator

import ember
import numpy as np
from ember import _C, _shm_janitor

from . import _memory, _worker
from ._collate import default_collate, default_convert
from ._pin_memory import PinThread, pin_memory
from ._worker import _ExceptionWrapper, _FetchError, _IterableEnd, _ResumeIteration
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "pin_memory"]

# How long shutdown waits for workers to exit on their own before terminating them (seconds).
SHUTDOWN_TIMEOUT = 5.0


class _InfiniteConstantSampler(Sampler):
    """The "indices" of an IterableDataset: None forever (the dataset decides when to stop)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


def _default_context() -> Any:
    # fork is the fastest to start and shares the dataset copy-on-write; spawn elsewhere.
    if sys.platform.startswith("linux"):
        return mp.get_context("fork")
    return mp.get_context()


class DataLoader:
    """Iterates batches of ``dataset`` with PyTorch's ``torch.utils.data.DataLoader`` semantics.

    >>> import ember
    >>> from ember.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(ember.arange(10.0), ember.arange(10))
    >>> [y.tolist() for _, y in DataLoader(ds, batch_size=4)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    _INIT_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                    "persistent_workers")

    #: Forked workers see the dataset's lists and tuples of at least this many immutable values
    #: (ints, floats, strings, bytes, tuples of those) as a :class:`CompactList`, so that reading
    #: them does not copy them into every worker (see packages/data/README.md); None turns it off.
    compact_lists_min_len: int | None = 65536

    def __init__(
        self,
        dataset: Dataset | Iterable,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | Iterable | None = None,
        batch_sampler: Sampler | Iterable | None = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: ember.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable "
                f"multiprocessing (got num_workers={num_workers!r}, expected an int >= 0)."
            )
        if generator is not None and not isinstance(generator, ember.Generator):
            raise TypeError(
                f"DataLoader: generator must be an ember.Generator (or None), got "
                f"{type(generator).__name__}"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
            raise TypeError(
                f"DataLoader: timeout should be a number of seconds, got {type(timeout).__name__} "
                f"{timeout!r}"
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if math.isnan(timeout):  # NaN > 0 is False: it silently meant "wait forever"
            raise ValueError("DataLoader: timeout should be a non-negative number of seconds, "
                             "got nan")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing. Let "
                "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and (
            not isinstance(prefetch_factor, int) or prefetch_factor <= 0
        ):
            raise ValueError(
                f"prefetch_factor option should be a positive integer, got {prefetch_factor!r}"
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if not isinstance(pin_memory_device, str):
            raise TypeError(
                "pin_memory_device option should be a device string such as 'cuda' or "
                f"'cuda:1', but got {type(pin_memory_device).__name__}"
            )
        if pin_memory_device:
            try:
                ember.device(pin_memory_device)
            except (ValueError, RuntimeError) as e:
                raise ValueError(
                    f"pin_memory_device={pin_memory_device!r} is not a valid device: {e}"
                ) from None
            if not pin_memory:
                warnings.warn(
                    f"DataLoader: pin_memory_device={pin_memory_device!r} has no effect "
                    "without pin_memory=True",
                    stacklevel=2,
                )

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.in_order = in_order
        # what len(self) last reported for an IterableDataset (PyTorch's attribute name): the
        # iterators warn when more batches than that come out
        self._IterableDataset_len_called: int | None = None

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = "iterable"
            if shuffle not in (False, None):
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified shuffle option, but "
                    f"got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler option, but "
                    f"got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                    f"but got batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = "map"

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with "
                "drop_last"
            )

        if sampler is None:
            if self._dataset_kind == "iterable":
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self._iterator: Any = None
        self.__initialized = True

    # -- attributes -------------------------------------------------------------------------
    @property
    def multiprocessing_context(self) -> Any:
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx: Any) -> None:
        if ctx is not None:
            if self.num_workers == 0:
                raise ValueError(
                    "multiprocessing_context can only be used with multi-process loading "
                    f"(num_workers > 0), but got num_workers={self.num_workers}"
                )
            if isinstance(ctx, str):
                methods = mp.get_all_start_methods()
                if ctx not in methods:
                    raise ValueError(
                        "multiprocessing_context option should specify a valid start method in "
                        f"{methods!r}, but got multiprocessing_context={ctx!r}"
                    )
                ctx = mp.get_context(ctx)
            elif not isinstance(ctx, mp.context.BaseContext):
                raise TypeError(
                    "multiprocessing_context option should be a valid context object or a "
                    f"string specifying the start method, but got multiprocessing_context={ctx}"
                )
        self.__multiprocessing_context = ctx

    def __setattr__(self, attr: str, val: Any) -> None:
        if self.__dict__.get("_DataLoader__initialized") and attr in self._INIT_FROZEN:
            raise ValueError(
                f"{attr} attribute should not be set after {self.__class__.__name__} is "
                "initialized"
            )
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    # -- iteration ----------------------------------------------------------------------------
    def _get_iterator(self) -> _BaseIter:
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        return _MultiProcessIter(self)

    def __iter__(self) -> _BaseIter:
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self) -> int:
        if self._dataset_kind == "iterable":
            length = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is not None:
                if self.drop_last:
                    length = length // self.batch_size
                else:
                    length = -(-length // self.batch_size)
            self._IterableDataset_len_called = length
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self) -> None:
        """Kept for PyTorch compatibility; ember does not warn about the worker count."""


def _profiled_next(next_fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """__next__ recorded as "enumerate(DataLoader)#<iterator>.__next__" while ember.profiler
    records (one check otherwise)."""

    def __next__(self: Any) -> Any:
        if not _C._profiler_enabled():
            return next_fn(self)
        from ember.profiler import record_function

        with record_function(f"enumerate(DataLoader)#{type(self).__name__}.__next__"):
            return next_fn(self)

    __next__.__doc__ = next_fn.__doc__
    return __next__



def _skip_counter(gen: ember.Generator) -> None:
    """Advances a CPU generator by one counter. torch draws the loader's seed as two 32-bit
    MT19937 outputs, ember's random_ takes one counter: one more leaves the generator where
    torch's is, so the RandomSampler that shuffles with it next yields torch's order (randperm
    follows torch's MT19937 stream, one counter per draw)."""
    if gen.device.type != "cpu":
        return
    words = gen.get_state().numpy().view(np.uint64).copy()  # (seed, offset)
    words[1] += np.uint64(1)
    gen.set_state(ember.from_numpy(words.view(np.uint8)))

class _BaseIter:
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__next__" in cls.__dict__:
            cls.__next__ = _profiled_next(cls.__dict__["__next__"])  # type: ignore[method-assign]

    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._iterable = loader._dataset_kind == "iterable"
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        self._pin_memory = loader.pin_memory
        self._pin_memory_device = loader.pin_memory_device or None
        if self._pin_memory and not ember.cuda.is_available():
            # PyTorch's warning. Pinning still runs (custom batch types' pin_memory() is
            # called); tensors stay in ordinary memory, as Tensor.pin_memory() does without CUDA.
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
        self._timeout = loader.timeout
        self._num_yielded = 0
        self._loader_num_workers = loader.num_workers
        # each worker may end on its own partial batch, so a correctly split dataset can give up
        # to num_workers - 1 batches more than len(dataloader) says
        self._len_slack = (loader.num_workers - 1 if loader.num_workers > 0 and self._auto_collation
                           and not self._drop_last else 0)
        self._reported_len = loader._IterableDataset_len_called if self._iterable else None
        self._shutdown = False
        self._sampler_iter = iter(self._index_sampler)
        gen = loader.generator if loader.generator is not None else ember.default_generator
        # One draw per iterator, like PyTorch: seeds the workers of this epoch.
        self._base_seed = int(ember.empty((), dtype=ember.int64).random_(generator=gen).item())
        if loader.generator is not None:
            _skip_counter(loader.generator)

    def __iter__(self) -> _BaseIter:
        return self

    def __len__(self) -> int:
        return len(self._index_sampler)

    def _reset(self, loader: DataLoader) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._reported_len = loader._IterableDataset_len_called if self._iterable else None

    def _count_yield(self) -> None:
        self._num_yielded += 1
        # An IterableDataset that yields more than len(dataloader) said: most often one that
        # does not split its samples between the workers, so each worker yields all of them
        # and every sample comes several times (PyTorch warns the same).
        if (self._reported_len is not None
                and self._num_yielded == self._reported_len + self._len_slack + 1):
            msg = (f"Length of IterableDataset {self._dataset} was reported to be "
                   f"{self._reported_len} (when accessing len(dataloader)), but "
                   f"{self._num_yielded} {'batches' if self._auto_collation else 'samples'} "
                   "have been fetched. ")
            if self._loader_num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly "
                        "configuring the IterableDataset replica at each worker (each worker "
                        "iterates its own copy of the dataset: split the samples with "
                        "ember.utils.data.get_worker_info()).")
            warnings.warn(msg, UserWarning, stacklevel=3)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        if loader.timeout > 0:
            # The main process can't time itself out: a hung __getitem__ would hang silently.
            # AssertionError, as PyTorch's _SingleProcessDataLoaderIter.
            raise AssertionError(
                f"DataLoader: timeout={loader.timeout} needs worker processes (num_workers > 0); "
                "with num_workers=0 the batches are loaded in this process, which cannot time "
                "itself out (set timeout=0 or use workers)")
        super().__init__(loader)
        self._fetcher = _worker.create_fetcher(
            self._iterable, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def __next__(self) -> Any:
        index = next(self._sampler_iter)
        try:
            data = self._fetcher.fetch(index)
        except _FetchError as e:
            exc = e.exc
            if hasattr(exc, "add_note"):
                exc.add_note(f"(while the DataLoader was fetching sample index {e.index!r})")
            raise exc.with_traceback(exc.__traceback__) from None
        self._count_yield()
        if self._pin_memory:
            data = pin_memory(data, self._pin_memory_device)
        return data


class _Pool:
    """The worker processes and their channels; shutdown() is safe to call any number of times
    and runs from the iterator's finalizer, so it holds no reference to the iterator."""

    def __init__(self) -> None:
        self.workers: list[Any] = []
        self.index_queues: list[Any] = []
        self.result_conns: list[Any] = []
        self.pin_thread: PinThread | None = None
        self.done = False

    def shutdown(self, graceful: bool = True) -> None:
        """Stops the workers: asks them to exit (graceful), then terminates what is left."""
        if self.done:
            return
        self.done = True
        # First the thread reading the result pipes, which are closed below.
        if self.pin_thread is not None:
            self.pin_thread.stop(SHUTDOWN_TIMEOUT if graceful else 0.5)
        for q in self.index_queues:
            try:
                q.put(None)
            except Exception:
                pass
        # A worker blocked sending a batch gets EPIPE and exits; an idle one reads None.
        for c in self.result_conns:
            try:
                c.close()
            except Exception:
                pass
        deadline = time.monotonic() + (SHUTDOWN_TIMEOUT if graceful else 0.2)
        for w in self.workers:
            w.join(timeout=max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            if w.is_alive():
                w.terminate()
                w.join(timeout=1.0)
            if w.is_alive():
                w.kill()
                w.join()
        for q in self.index_queues:
            try:
                q.cancel_join_thread()
                q.close()
            except Exception:
                pass
        # Batches no one will receive (in the pipes, or from a killed worker).
        for w in self.workers:
            if w.pid is not None:
                _worker.cleanup_segments(w.pid)
        _C._shm_trim_cache()  # unmap the recycled segments no batch uses any more


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class _MultiProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        from ember.multiprocessing_reductions import init_reductions

        init_reductions()
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        self._persistent = loader.persistent_workers
        ctx = loader.multiprocessing_context or _default_context()
        self._pool = pool = _Pool()
        self._finalizer = weakref.finalize(self, pool.shutdown)
        self._epoch = 0
        fork = ctx.get_start_method() == "fork"
        min_len = loader.compact_lists_min_len
        # Spawned workers unpickle a private copy of the dataset: nothing is shared to protect.
        plan = _memory.plan_compaction(self._dataset, min_len) if fork and min_len else []
        try:
            with _memory.frozen_gc() if fork else contextlib.nullcontext():
                self._start_workers(ctx, loader, plan)
        except BaseException:
            self._finalizer()
            raise
        # Tasks only now, after every fork: the first one makes a RandomSampler build its
        # permutation (a list of n ints), and a worker forked after that would keep a private
        # copy of every page of it that this process touches while it iterates.
        self._conn_worker = {c: i for i, c in enumerate(pool.result_conns)}
        self._sentinel_worker = {w.sentinel: i for i, w in enumerate(pool.workers)}
        if self._pin_memory:
            try:
                pool.pin_thread = PinThread(
                    pool.result_conns, self._sentinel_worker, self._pin_memory_device
                )
            except BaseException:
                self._finalizer()
                raise
        self._start_epoch()

    def _start_workers(self, ctx: Any, loader: DataLoader, plan: _memory.Plan) -> None:
        pool = self._pool
        # One /dev/shm janitor for the loader and its workers (they join it: fork inherits it,
        # spawn / forkserver workers get it with the process object), instead of one per worker.
        _shm_janitor.ensure_started()
        # fork and spawn workers are this process's children; the kernel can kill them when the
        # thread that starts them exits, which is the process's end for the main thread only.
        direct_child = ctx.get_start_method() in ("fork", "spawn")
        death_signal = threading.current_thread() is threading.main_thread()
        for i in range(self._num_workers):
            iq = ctx.Queue()
            iq.cancel_join_thread()
            reader, writer = ctx.Pipe(duplex=False)
            # A forked worker inherits the loader's read ends: it closes them, so that a
            # worker writing to a loader that has gone away gets EPIPE instead of blocking.
            inherited = pool.result_conns + [reader] if ctx.get_start_method() == "fork" else []
            w = ctx.Process(
                target=_worker.worker_loop,
                args=(
                    self._iterable,
                    self._dataset,
                    iq,
                    writer,
                    self._auto_collation,
                    self._collate_fn,
                    self._drop_last,
                    self._base_seed,
                    loader.worker_init_fn,
                    i,
                    self._num_workers,
                    os.getpid(),
                    inherited,
                    plan,
                    direct_child,
                    death_signal,
                ),
                daemon=True,
            )
            w._ember_janitor = _shm_janitor.Handle()  # pickled with it for spawn / forkserver
            w.start()
            del w._ember_janitor
            writer.close()
            pool.workers.append(w)
            pool.index_queues.append(iq)
            pool.result_conns.append(reader)

    # -- bookkeeping --------------------------------------------------------------------------
    def _start_epoch(self) -> None:
        self._send_idx = 0  # tasks sent this epoch
        self._rcvd_idx = 0  # next task to yield (in order)
        self._consumed = 0
        self._task_worker: dict[int, int] = {}
        self._results: dict[int, Any] = {}
        self._outstanding = [0] * self._num_workers
        self._active = [True] * self._num_workers
        self._next_worker = itertools.cycle(range(self._num_workers))
        self._sampler_done = False
        for _ in range(self._prefetch_factor * self._num_workers):  # type: ignore[operator]
            if not self._try_put_index():
                break

    def _reset(self, loader: DataLoader) -> None:
        super()._reset(loader)
        self._epoch += 1  # results of the previous epoch still in flight are dropped
        if self._iterable:
            for q in self._pool.index_queues:
                q.put(_ResumeIteration(self._epoch))
        self._start_epoch()

    def _try_put_index(self) -> bool:
        if self._sampler_done:
            return False
        for _ in range(self._num_workers):
            w = next(self._next_worker)
            if self._active[w] and self._outstanding[w] < self._prefetch_factor:  # type: ignore[operator]
                break
        else:
            return False
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            self._sampler_done = True
            return False
        self._pool.index_queues[w].put((self._epoch, self._send_idx, index))
        self._task_worker[self._send_idx] = w
        self._outstanding[w] += 1
        self._send_idx += 1
        return True

    # -- receiving ----------------------------------------------------------------------------
    def _timed_out(self) -> RuntimeError:
        self._shutdown_workers(graceful=False)  # a stuck worker will not answer
        return RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _receive(self) -> None:
        """Blocks until at least one result arrives; raises on timeout or a dead worker."""
        if self._pool.pin_thread is not None:
            return self._receive_pinned(self._pool.pin_thread)
        pool = self._pool
        timeout = self._timeout if self._timeout > 0 else None
        conns = [c for c in pool.result_conns if not c.closed]
        ready = mp_connection.wait(conns + list(self._sentinel_worker), timeout)
        if not ready:
            raise self._timed_out()
        got = False
        for r in ready:
            if r in self._conn_worker:
                try:
                    epoch, idx, data = r.recv()
                except (EOFError, OSError):
                    continue  # the worker died; its sentinel says how
                got = True
                if epoch == self._epoch:
                    self._results[idx] = data
        if got:
            return
        for r in ready:
            if r in self._sentinel_worker:
                self._worker_died(self._sentinel_worker[r])
        # A closed pipe without a dead worker: look again (the exit status is on its way).
        for i, w in enumerate(pool.workers):
            w.join(timeout=1.0)
            if w.exitcode is not None:
                self._worker_died(i)
        raise RuntimeError("DataLoader: a worker closed its result pipe unexpectedly")

    def _receive_pinned(self, pin: PinThread) -> None:
        """_receive when the pin thread reads the pipes: its queue has the results, pinned."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            # Wake up now and then to notice a pin thread that is gone (it never should be).
            wait = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))
            try:
                item = pin.queue.get(timeout=wait)
                break
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._timed_out() from None
                if not pin.is_alive() and pin.queue.empty():
                    self._shutdown_workers(graceful=False)
                    raise RuntimeError("DataLoader: the pin memory thread exited") from None
        items = [item]
        while True:
            try:
                items.append(pin.queue.get_nowait())
            except queue.Empty:
                break
        for item in items:
            if item[0] == "data":
                _, epoch, idx, data = item
                if epoch == self._epoch:
                    self._results[idx] = data
        for item in items:
            if item[0] == "died":
                self._worker_died(item[1])
            elif item[0] == "crashed":
                self._shutdown_workers(graceful=False)
                item[1].reraise()

    def _worker_died(self, i: int) -> None:
        w = self._pool.workers[i]
        w.join(timeout=1.0)
        code = w.exitcode
        self._shutdown_workers(graceful=False)
        if code is not None and code < 0:
            raise RuntimeError(
                f"DataLoader worker {i} (pid {w.pid}) was killed by signal "
                f"{_signal_name(-code)} ({-code}). If it was SIGKILL, the worker may have run "
                "out of memory; if SIGSEGV or SIGBUS, the dataset code crashed."
            )
        raise RuntimeError(
            f"DataLoader worker {i} (pid {w.pid}) exited unexpectedly with exit code {code}"
        )

    def __next__(self) -> Any:
        if self._shutdown:
            raise StopIteration
        while True:
            if self._in_order:
                if self._rcvd_idx in self._results:
                    idx = self._rcvd_idx
                    self._rcvd_idx += 1
                    data = self._results.pop(idx)
                    return_now = self._process(idx, data)
                    if return_now is not _SKIP:
                        return return_now
                    continue
            elif self._results:
                idx = next(iter(self._results))
                data = self._results.pop(idx)
                return_now = self._process(idx, data)
                if return_now is not _SKIP:
                    return return_now
                continue
            if self._consumed == self._send_idx and not self._try_put_index():
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            self._receive()

    def _process(self, idx: int, data: Any) -> Any:
        w = self._task_worker.pop(idx)
        self._outstanding[w] -= 1
        self._consumed += 1
        if isinstance(data, _IterableEnd):
            self._active[w] = False
            return _SKIP
        self._try_put_index()
        if isinstance(data, _ExceptionWrapper):
            data.reraise()
        self._count_yield()
        return data  # pinned by the pin thread

    def _shutdown_workers(self, graceful: bool = True) -> None:
        self._shutdown = True
        self._results.clear()
        if graceful:
            self._finalizer()
        elif self._finalizer.detach() is not None:
            self._pool.shutdown(graceful=False)

    def __del__(self) -> None:
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()


_SKIP = object()
