"""``spawn`` / ``start_processes``: N processes running ``fn(rank, *args)``, joined together.

When one process fails (an exception, a non-zero exit, a signal), the others are terminated
(SIGTERM, then SIGKILL after a grace period) and ``join`` raises ``ProcessRaisedException``
(with the child's traceback) or ``ProcessExitedException`` (with its exit code or signal),
naming the failed rank.
"""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback
from typing import Callable

from . import _context

__all__ = [
    "ProcessContext",
    "ProcessException",
    "ProcessExitedException",
    "ProcessRaisedException",
    "spawn",
    "start_processes",
]


class ProcessException(Exception):
    """A process of a ``spawn`` group failed; ``error_index`` is its rank, ``error_pid`` its
    process id (torch's names; ``pid`` is the same)."""

    def __init__(self, msg: str, error_index: int, error_pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    @property
    def pid(self) -> int:
        return self.error_pid

    def __reduce__(self) -> tuple:
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """The process of rank ``error_index`` raised an exception; the message holds its
    traceback."""


class ProcessExitedException(ProcessException):
    """The process of rank ``error_index`` exited with ``exit_code`` (negative: killed by
    ``signal_name``) without raising a Python exception."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self) -> tuple:
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code,
                            self.signal_name)


def _wrap(fn: Callable, i: int, args: tuple, error_file: str) -> None:
    """Runs in the child: ``fn(i, *args)``; an exception's traceback goes to ``error_file``."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent interrupted us: it reports its own error
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes started by ``start_processes(..., join=False)``.

    >>> import ember.multiprocessing as mp
    >>> ctx = mp.spawn(print, args=("hi",), nprocs=1, join=False, start_method="fork")
    >>> while not ctx.join():
    ...     pass
    """

    def __init__(self, processes: list, error_files: list[str]) -> None:
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list[int]:
        return [int(p.pid) for p in self.processes]

    def _terminate_others(self, failed: int, grace_period: float) -> None:
        alive = [p for i, p in enumerate(self.processes) if i != failed and p.is_alive()]
        for p in alive:
            p.terminate()
        deadline = time.monotonic() + grace_period
        for p in alive:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in alive:
            if p.is_alive():
                p.kill()
                p.join()

    def _remove_error_files(self) -> None:
        for path in self.error_files:
            try:
                os.unlink(path)
            except OSError:
                pass

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Waits up to ``timeout`` seconds (forever if None) for the processes.

        Returns True once all exited successfully, False while some still run; raises
        ``ProcessRaisedException`` / ``ProcessExitedException`` for the first one that failed,
        after terminating the others (SIGTERM, then SIGKILL after ``grace_period`` seconds,
        default 30).
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self.sentinels.pop(sentinel)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0 and failed is None:
                failed = i
        if failed is None:
            if self.sentinels:
                return False
            self._remove_error_files()
            return True
        self._terminate_others(failed, 30.0 if grace_period is None else grace_period)
        self.sentinels.clear()
        p = self.processes[failed]
        code, pid = p.exitcode, int(p.pid)
        try:
            with open(self.error_files[failed]) as f:
                trace = f.read()
        except OSError:
            trace = ""
        self._remove_error_files()
        if trace:
            raise ProcessRaisedException(
                f"\n\n-- Process {failed} terminated with the following error:\n{trace}",
                failed, pid,
            )
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            raise ProcessExitedException(
                f"process {failed} (pid {pid}) terminated with signal {name}", failed, pid,
                exit_code=code, signal_name=name,
            )
        raise ProcessExitedException(
            f"process {failed} (pid {pid}) terminated with exit code {code}", failed, pid,
            exit_code=code,
        )


# torch's name for the spawn method's ProcessContext (kept for code that checks the type).
SpawnContext = ProcessContext


def start_processes(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True,
                    daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    """Starts ``nprocs`` processes running ``fn(i, *args)`` for i in ``range(nprocs)``.

    ``join=True`` waits for them all (raising when one fails, see ``ProcessContext.join``);
    ``join=False`` returns the ``ProcessContext``.

    >>> import ember.multiprocessing as mp
    >>> mp.start_processes(print, args=("hello",), nprocs=2, start_method="fork")
    """
    if not callable(fn):
        raise TypeError(f"start_processes: fn must be callable, got {type(fn).__name__}")
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise ValueError(f"start_processes: nprocs must be a positive int, got {nprocs!r}")
    if not isinstance(args, tuple):
        raise TypeError(f"start_processes: args must be a tuple, got {type(args).__name__}")
    ctx = _context._default_context.get_context(start_method)
    error_files, processes = [], []
    try:
        for i in range(nprocs):
            fd, path = tempfile.mkstemp(prefix="ember_spawn_", suffix=".err")
            os.close(fd)
            error_files.append(path)
            p = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
            p.start()
            processes.append(p)
    except BaseException:
        for p in processes:
            p.kill()
            p.join()
        for path in error_files:
            os.unlink(path)
        raise
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    try:
        while not context.join():
            pass
    except KeyboardInterrupt:  # Ctrl-C: stop the group instead of waiting for it at exit
        context._terminate_others(-1, 5.0)
        context._remove_error_files()
        raise
    return None


def spawn(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True,
          daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    """``start_processes`` (default start method "spawn"): runs ``fn(i, *args)`` in
    ``nprocs`` new processes.

    >>> import ember.multiprocessing as mp
    >>> def work(rank, scale):
    ...     assert rank * scale >= 0
    >>> mp.spawn(work, args=(2,), nprocs=2)  # doctest: +SKIP
    """
    return start_processes(fn, args=args, nprocs=nprocs, join=join, daemon=daemon,
                           start_method=start_method)
