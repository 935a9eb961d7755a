"""What runs inside a DataLoader worker process, and the messages it exchanges with the loader.

Protocol: the loader puts ``(epoch, task_idx, indices)`` on the worker's index queue (``None``
stops it, ``_ResumeIteration`` restarts an iterable dataset's stream for a new epoch of a
persistent worker); the worker answers every task with exactly one
``(epoch, task_idx, result)`` on its own result pipe, where ``result`` is the collated batch, an
``_ExceptionWrapper`` or ``_IterableEnd``. Batches stacked by ``default_collate`` in a worker are
in shared memory and cross the pipe by name (see ember/multiprocessing_reductions.py).
"""

from __future__ import annotations

import os
import queue
import random
import signal
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import ember
from ember import _C

from . import _collate, _memory

__all__ = ["WorkerInfo", "get_worker_info"]

# How often an idle worker checks that the loader's process is still alive (seconds).
WATCHDOG_INTERVAL = 0.5


class WorkerInfo:
    """What ``get_worker_info()`` returns in a worker: ``id``, ``num_workers``, ``seed`` (this
    worker's, base seed + id) and ``dataset`` (this worker's copy)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any
    __initialized = False

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key: str, val: Any) -> None:
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__keys)
        return f"{self.__class__.__name__}({items})"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process, its :class:`WorkerInfo`; in the main process, None.

    An ``IterableDataset`` uses it to shard its stream::

        info = get_worker_info()
        if info is not None:
            start, step = info.id, info.num_workers
    """
    return _worker_info


@dataclass
class _IterableEnd:
    worker_id: int


@dataclass
class _ResumeIteration:
    epoch: int


class _ExceptionWrapper:
    """An exception caught in a worker, re-raised in the main process with its traceback."""

    def __init__(self, exc: BaseException, where: str) -> None:
        self.exc_type = type(exc)
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.msg = f"Caught {self.exc_type.__name__} {where}.\nOriginal {tb}"

    def reraise(self) -> None:
        msg = self.msg
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:  # an exception type whose constructor wants other arguments
            raise RuntimeError(msg) from None
        raise exc


class _KeyErrorMessage(str):
    """KeyError repr()s its message; keep the traceback readable."""

    def __repr__(self) -> str:
        return str(self)


class _FetchError(Exception):
    """Carries the sample index a dataset failed on out of a fetcher."""

    def __init__(self, exc: BaseException, index: Any) -> None:
        super().__init__()
        self.exc = exc
        self.index = index


def _no_stop(exc: BaseException, what: str) -> BaseException:
    """A StopIteration out of a dataset's __getitem__ or a collate_fn would end the epoch early
    without a word (the loader's __next__ re-raises it); as PEP 479 does for generators, it
    becomes a RuntimeError that says where it came from."""
    if not isinstance(exc, StopIteration):
        return exc
    err = RuntimeError(f"DataLoader: {what} raised StopIteration, which would end the epoch "
                       "early and silently; a map-style dataset's end is its len(), and a "
                       "collate_fn must return a batch (raise another exception to fail)")
    err.__cause__ = exc
    return err


def _collated(collate_fn: Callable, data: Any) -> Any:
    try:
        return collate_fn(data)
    except StopIteration as e:
        raise _no_stop(e, "the collate_fn") from e


class _MapFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.getitems = getattr(dataset, "__getitems__", None)

    def fetch(self, index: Any) -> Any:
        ds = self.dataset
        if self.auto_collation:
            if self.getitems is not None:
                try:
                    data = self.getitems(index)
                except Exception as e:
                    raise _FetchError(_no_stop(e, "the dataset's __getitems__"), index) from e
            else:
                data = []
                append = data.append
                i = None
                try:
                    for i in index:
                        append(ds[i])
                except Exception as e:
                    raise _FetchError(_no_stop(e, "the dataset's __getitem__"), i) from e
        else:
            try:
                data = ds[index]
            except Exception as e:
                raise _FetchError(_no_stop(e, "the dataset's __getitem__"), index) from e
        return _collated(self.collate_fn, data)


class _IterFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool):
        self.dataset_iter = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if len(data) == 0 or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.dataset_iter)
        return _collated(self.collate_fn, data)


def create_fetcher(
    iterable: bool, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool
) -> Any:
    cls = _IterFetcher if iterable else _MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


def seed_everything(seed: int, worker_id: int) -> None:
    """Seeds ember's, Python's and NumPy's global generators for a worker. NumPy's is seeded now
    if ``numpy.random`` is imported, else the moment it is: importing it costs ~20 ms of CPU per
    worker, which a worker that never draws from it should not pay."""
    ember.manual_seed(seed)
    random.seed(seed)
    if "numpy.random" in sys.modules:
        _seed_numpy(sys.modules["numpy.random"], seed, worker_id)
    else:
        sys.meta_path.insert(0, _SeedNumpyOnImport(seed, worker_id))


def _seed_numpy(np_random: Any, seed: int, worker_id: int) -> None:
    ss = np_random.SeedSequence([worker_id, seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF])
    np_random.seed(ss.generate_state(4))


class _SeedNumpyOnImport:
    """A meta-path finder that seeds NumPy's global generator right after ``numpy.random`` is
    first imported in this process."""

    def __init__(self, seed: int, worker_id: int) -> None:
        self.seed, self.worker_id = seed, worker_id

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "numpy.random":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        seed, worker_id = self.seed, self.worker_id

        def exec_and_seed(module: Any) -> None:
            exec_module(module)
            _seed_numpy(module, seed, worker_id)

        loader.exec_module = exec_and_seed  # type: ignore[method-assign]
        return spec


def cleanup_segments(pid: int) -> int:
    """Unlinks every /dev/shm segment process `pid` created (the process is gone or no one will
    ever map them). Returns how many were removed."""
    prefix = _C._shm_prefix(pid)
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return 0
    n = 0
    for name in names:
        if name.startswith(prefix) and _C._shm_unlink(name):
            n += 1
    return n


def _parent_alive(ppid: int, main_pid: int) -> bool:
    """Whether the loader's process lives: this worker still has its parent (an orphan is
    re-parented, so its parent pid changes) and the loader's process is not dead or a zombie (a
    zombie's pid answers kill(pid, 0) until its own parent reaps it)."""
    if os.getppid() != ppid:
        return False
    try:
        os.kill(main_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{main_pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # no /proc: kill() said it exists


def _die_with_parent() -> bool:
    """Asks the kernel to SIGKILL this process when its parent thread exits (Linux
    PR_SET_PDEATHSIG). Unlike a check between tasks, it works while the worker is stuck in a
    dataset call, a queue or a C function. Returns whether it is armed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def _watchdog(ppid: int, main_pid: int) -> None:
    """A daemon thread for workers the kernel cannot watch: kills this process once the loader's
    is gone, even while the worker's main thread is blocked (in a dataset call, a sleep, I/O)."""
    import time

    while _parent_alive(ppid, main_pid):
        time.sleep(WATCHDOG_INTERVAL)
    os.kill(os.getpid(), signal.SIGKILL)  # the tree's janitor removes our segments


def watch_parent(main_pid: int, direct_child: bool, parent_death_signal: bool) -> int:
    """Sets up this worker's parent-death detection; returns the parent pid to compare with.

    A fork or spawn worker's parent is the loader's process (``main_pid``), known before the
    worker runs: a worker that starts late, after the loader was killed, sees another parent
    (comparing with the parent it finds at start would take the adoptive one for the loader).
    A forkserver worker's parent is the server. With ``parent_death_signal`` (the loader forked
    from its main thread, whose exit is the process's), the kernel kills the worker with its
    parent; otherwise a watchdog thread does, within ``WATCHDOG_INTERVAL``."""
    ppid = main_pid if direct_child else os.getppid()
    if not (parent_death_signal and direct_child and _die_with_parent()):
        import threading

        threading.Thread(target=_watchdog, args=(ppid, main_pid), daemon=True,
                         name="ember-worker-watchdog").start()
    # The parent may have died before the signal was armed: then it never comes.
    if not _parent_alive(ppid, main_pid):
        os.kill(os.getpid(), signal.SIGKILL)
    return ppid


def worker_loop(
    iterable: bool,
    dataset: Any,
    index_queue: Any,
    result_conn: Any,
    auto_collation: bool,
    collate_fn: Callable,
    drop_last: bool,
    base_seed: int,
    init_fn: Callable | None,
    worker_id: int,
    num_workers: int,
    main_pid: int,
    inherited_conns: list | None = None,
    compaction: list | None = None,
    direct_child: bool = True,
    parent_death_signal: bool = False,
) -> None:
    global _worker_info
    ppid = watch_parent(main_pid, direct_child, parent_death_signal)
    for c in inherited_conns or ():
        c.close()
    if compaction:
        _memory.apply_compaction(compaction)
    # Ctrl-C reaches the whole process group: the main process handles it and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ember.set_num_threads(1)  # the workers already use the cores
    seed = base_seed + worker_id
    seed_everything(seed, worker_id)
    _collate._use_shared_memory = True
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    from ember.multiprocessing_reductions import init_reductions

    init_reductions()
    where = f"in DataLoader worker process {worker_id} (pid {os.getpid()})"
    init_exception = None
    fetcher = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
    except Exception as e:
        init_exception = _ExceptionWrapper(e, where + " while starting (worker_init_fn / iter)")
    orphaned = False
    try:
        while True:
            try:
                r = index_queue.get(timeout=WATCHDOG_INTERVAL)
            except queue.Empty:
                if not _parent_alive(ppid, main_pid):
                    orphaned = True
                    break
                continue
            if r is None:
                break
            if isinstance(r, _ResumeIteration):
                try:
                    fetcher = create_fetcher(
                        iterable, dataset, auto_collation, collate_fn, drop_last
                    )
                except Exception as e:
                    init_exception = _ExceptionWrapper(e, where + " while restarting iteration")
                continue
            epoch, idx, index = r
            data: Any
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)  # type: ignore[union-attr]
                except StopIteration:
                    data = _IterableEnd(worker_id)
                except _FetchError as e:
                    what = "sample index" if not isinstance(e.index, list) else "sample indices"
                    data = _ExceptionWrapper(e.exc, f"{where} while fetching {what} {e.index!r}")
                except Exception as e:
                    data = _ExceptionWrapper(e, f"{where} while fetching batch {idx}")
            try:
                result_conn.send((epoch, idx, data))
            except Exception as e:
                if isinstance(e, (BrokenPipeError, EOFError, ConnectionError)):
                    break  # the loader is gone or shutting down
                # The batch could not be pickled: report that instead.
                result_conn.send(
                    (epoch, idx, _ExceptionWrapper(e, f"{where} while sending batch {idx}"))
                )
            del data
    except KeyboardInterrupt:
        pass
    finally:
        # A worker whose main process died (noticed by the watchdog, or by a broken pipe while
        # sending) removes the shared-memory segments it made, since nobody else will.
        if orphaned or not _parent_alive(ppid, main_pid):
            cleanup_segments(os.getpid())
        try:
            result_conn.close()
        except Exception:
            pass
        sys.stdout.flush()
