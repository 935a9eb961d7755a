"""Work handles of asynchronous collectives and the per-group executor that runs them in order.

Hand-off costs were measured with a micro-benchmark (submit -> start, end -> wait() return). What
is cheap here: a Future is a plain lock held until the result is set (its waiters block in
Lock.acquire, which releases the GIL; no Condition, whose every wait allocates a lock and runs
Python bookkeeping under the GIL), and the background thread sleeps in a C queue
(queue.SimpleQueue). What avoids the hand-off altogether: Work.wait() on an operation that no
thread has started yet runs the queued operations up to it in the waiting thread (under the
executor's run lock, head first, so a group's operations still run in issue order). That is the
case of ``op(async_op=True).wait()`` and of DDP's final wait when the executor thread has not been
scheduled yet, e.g. because the caller held the GIL (it only gives it up after
sys.getswitchinterval() = 5 ms unless it blocks).
"""

from __future__ import annotations

import collections
import queue
import sys
import threading
import traceback
from datetime import timedelta
from typing import Any, Callable

from ember import futures as _futures

__all__ = ["Future", "Work"]


def _lock_timeout(timeout: float | None) -> float:
    """Lock.acquire's timeout argument for a wait of `timeout` seconds (None: forever)."""
    if timeout is None:
        return -1
    return min(max(float(timeout), 0.0), threading.TIMEOUT_MAX)


class Future(_futures.Future):
    """The result of an asynchronous operation: an ``ember.futures.Future`` (so
    ``ember.futures.collect_all`` / ``wait_all`` take a collective's future, as torch's do) with
    a lighter completion path for the collectives' hand-off (see the module doc).

    Example::

        >>> f = Future(); f.set_result(3); f.wait()
        3
    """

    def __init__(self) -> None:  # noqa: D107  (the base's state is replaced, not extended)
        self._mutex = threading.Lock()  # guards _done and _callbacks
        self._gate = threading.Lock()  # held until the result is set; waiters block on it
        self._gate.acquire()
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future], Any]] = []
        self._devices: list[Any] = []

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._finish(value, None)

    def set_exception(self, error: BaseException) -> None:
        if not isinstance(error, BaseException):
            raise TypeError(f"Future.set_exception: expected an exception, got "
                            f"{type(error).__name__} ({error!r})")
        self._finish(None, error)

    def _finish(self, value: Any, error: BaseException | None) -> None:
        with self._mutex:
            if self._done:
                raise RuntimeError("Future: the result was already set")
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
        self._gate.release()
        for cb in callbacks:
            cb(self)

    def _wait_done(self, timeout: float | None) -> bool:
        """Blocks (GIL released) until the result is set; whether it was within timeout."""
        if self._done:
            return True
        if not self._gate.acquire(timeout=_lock_timeout(timeout)):
            return self._done
        self._gate.release()  # open for every other waiter
        return True

    def wait(self, timeout: float | None = None) -> Any:
        """Blocks until the result is set; returns it (raises the operation's error)."""
        if not self._wait_done(timeout):
            raise TimeoutError(f"Future: not completed within {timeout} s")
        if self._error is not None:
            raise self._error
        return self._value

    def value(self) -> Any:
        """The result of a completed future (raises its error)."""
        if not self._done:
            raise RuntimeError("Future.value(): the future is not completed yet")
        return self.wait()

    def then(self, callback: Callable[[Future], Any]) -> Future:
        """A future completed with callback(self) once this one completes; an error the
        callback raises fails it with a RuntimeError naming that error, as in torch."""
        _futures._check_callable(callback, "then")
        out = Future()

        def run(f: Future) -> None:
            try:
                value = callback(f)
            except BaseException as e:  # noqa: BLE001  (forwarded to the chained future)
                err = RuntimeError("Got the following error when running the callback: "
                                   f"{type(e).__name__}: {e}")
                err.__cause__ = e
                out.set_exception(err)
                return
            out.set_result(value)

        self._on_completion(run)
        return out

    def add_done_callback(self, callback: Callable[[Future], Any]) -> None:
        """Runs callback(self) at completion (at once when done); an error it raises is
        reported on stderr and dropped, as in torch."""
        _futures._check_callable(callback, "add_done_callback")

        def run(f: Future) -> None:
            try:
                callback(f)
            except Exception:  # noqa: BLE001
                print("Got the following error when running the callback:", file=sys.stderr)
                traceback.print_exc(file=sys.stderr)

        self._on_completion(run)

    # what ember.futures' collect_all / wait_all use of a future
    def _on_completion(self, fn: Callable[[Future], Any]) -> None:
        with self._mutex:
            if not self._done:
                self._callbacks.append(fn)
                return
        fn(self)

    @property
    def _state(self) -> int:
        if not self._done:
            return _futures._PENDING
        return _futures._VALUE if self._error is None else _futures._ERROR

    def _drive(self) -> None:
        return None

    def _block(self, op: str) -> None:
        self._wait_done(None)

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("done" if self._error is None else "failed")
        return f"<ember.distributed.Future object ({state}) at {id(self):#x}>"


class Work:
    """A handle on a collective started with async_op=True.

    Example::

        >>> work = dist.all_reduce(t, async_op=True)  # doctest: +SKIP
        >>> work.wait(); work.is_completed()          # doctest: +SKIP
        True
    """

    def __init__(self, op_name: str, outputs: list | None = None,
                 executor: _Executor | None = None) -> None:
        self.op_name = op_name
        self._outputs = outputs or []
        self._future = Future()
        self._value: Any = None  # what the operation returned (the sender of an any-source recv)
        self._executor = executor  # runs it; wait() may run it here if it has not started
        # a receive's sender, as a group rank or a function of the value (any source)
        self._source: int | Callable[[Any], int] | None = None

    def _run(self, fn: Callable[[], Any], before_finish: Callable[[], None] | None = None) -> None:
        try:
            r = fn()
        except BaseException as e:  # noqa: BLE001  (raised again by wait())
            if before_finish is not None:
                before_finish()
            self._future.set_exception(e)
        else:
            self._value = r
            if before_finish is not None:
                before_finish()
            self._future.set_result(self._outputs)

    def is_completed(self) -> bool:
        return self._future.done()

    def is_success(self) -> bool:
        return self._future.done() and self._future._error is None

    def exception(self) -> BaseException | None:
        return self._future._error

    def wait(self, timeout: timedelta | float | None = None) -> bool:
        """Blocks until the collective finished; raises its error. Returns True."""
        t = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        if t is not None and t <= 0:
            t = None  # torch's kNoTimeout
        ex = self._executor
        if ex is not None and t is None and not self._future.done():
            ex.run_queued_until(self)  # no hand-off when no thread has started it yet
        if not self._future._wait_done(t):
            raise RuntimeError(f"Work.wait: {self.op_name} did not complete within {t} s")
        if self._future._error is not None:
            raise self._future._error
        return True

    def result(self) -> list:
        """The output tensors of the collective (after waiting for it)."""
        self.wait()
        return self._future.value()

    def get_future(self) -> Future:
        """A Future completed with the output tensors when the collective finishes."""
        return self._future

    def source_rank(self) -> int:
        """The rank, within the receive's group, that sent the message of a recv / irecv (waits
        for it); any other operation raises RuntimeError, as in torch.

        Example::

            >>> w = dist.irecv(buf)        # from any source  # doctest: +SKIP
            >>> w.source_rank()                               # doctest: +SKIP
            1
        """
        if self._source is None:
            raise RuntimeError("sourceRank() may only be called on work objects that correspond "
                               f"to a recv or recv-from-any call (this one is {self.op_name})")
        self.wait()
        return self._source if isinstance(self._source, int) else self._source(self._value)

    _source_rank = source_rank

    def synchronize(self) -> None:
        self.wait()


_STOP = object()


class _Executor:
    """Runs a group's operations in call order: inline when nothing is queued, else on a
    background thread (so async_op=True returns at once and later calls wait their turn).

    Whoever runs an operation (the thread, or a thread waiting for one in Work.wait) holds
    `lock` and takes the head of the queue, so operations run one at a time in issue order.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()  # held while an operation runs
        self.mutex = threading.Lock()  # guards queue, pending, last, closed
        self.queue: collections.deque = collections.deque()
        self.pending = 0  # queued or running operations
        self.last: Work | None = None  # the last queued operation
        self.wakeups: queue.SimpleQueue = queue.SimpleQueue()  # one token per queued op
        self.thread: threading.Thread | None = None
        self.closed = False

    def run(self, op_name: str, fn: Callable[[], Any], outputs: list, async_op: bool,
            returns_value: bool = False) -> Any:
        """Runs fn in order: a Work when async_op, else None (or fn's value if returns_value)."""
        if not async_op and self.pending == 0:
            with self.lock:
                value = fn()
            return value if returns_value else None
        work = Work(op_name, outputs, self)
        with self.mutex:
            if self.closed:
                raise RuntimeError(f"{op_name}: the process group was destroyed")
            self.queue.append((work, fn))
            self.pending += 1
            self.last = work
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name=f"ember-{self.name}",
                                               daemon=True)
                self.thread.start()
        self.wakeups.put(None)
        if async_op:
            return work
        work.wait()
        return work._value if returns_value else None

    def _done_one(self) -> None:
        with self.mutex:
            self.pending -= 1

    def _run_head(self) -> bool:
        """Runs the head of the queue; the caller holds `lock`. False when the queue is empty."""
        with self.mutex:
            if not self.queue:
                return False
            work, fn = self.queue.popleft()
        work._run(fn, self._done_one)
        return True

    def run_queued_until(self, work: Work) -> None:
        """Runs queued operations, head first, in this thread until `work` is done; returns
        early when another thread is running one (then `work` is left to it)."""
        while not work._future.done():
            if not self.lock.acquire(blocking=False):
                return
            try:
                if not self._run_head():
                    return
            finally:
                self.lock.release()

    def _loop(self) -> None:
        while True:
            if self.wakeups.get() is _STOP:
                return
            with self.lock:
                self._run_head()  # nothing when a waiter already ran it

    def drain(self, timeout: float | None = None) -> bool:
        """Waits until every queued operation ran; whether that happened within timeout."""
        with self.mutex:
            last = self.last if self.pending else None
        return last is None or last._future._wait_done(timeout)

    def close(self) -> None:
        with self.mutex:
            self.closed = True
        self.wakeups.put(_STOP)
