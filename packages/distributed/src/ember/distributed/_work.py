"""Work handles of asynchronous collectives and the per-group executor that runs them in order."""

from __future__ import annotations

import collections
import threading
from datetime import timedelta
from typing import Any, Callable

__all__ = ["Future", "Work"]


class Future:
    """The result of an asynchronous operation (torch.futures.Future's core API).

    Example::

        >>> f = Future(); f.set_result(3); f.wait()
        3
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future], Any]] = []

    def done(self) -> bool:
        return self._done

    def set_result(self, value: Any) -> None:
        self._finish(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._finish(None, error)

    def _finish(self, value: Any, error: BaseException | None) -> None:
        with self._cond:
            if self._done:
                raise RuntimeError("Future: the result was already set")
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            cb(self)

    def wait(self, timeout: float | None = None) -> Any:
        """Blocks until the result is set; returns it (raises the operation's error)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._done, timeout):
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
        """A future completed with callback(self) once this one completes."""
        out = Future()

        def run(f: Future) -> None:
            try:
                out.set_result(callback(f))
            except Exception as e:  # noqa: BLE001  (forwarded to the chained future)
                out.set_exception(e)

        self.add_done_callback(run)
        return out

    def add_done_callback(self, callback: Callable[[Future], Any]) -> None:
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)


class Work:
    """A handle on a collective started with async_op=True.

    Example::

        >>> work = dist.all_reduce(t, async_op=True)  # doctest: +SKIP
        >>> work.wait(); work.is_completed()          # doctest: +SKIP
        True
    """

    def __init__(self, op_name: str, outputs: list | None = None) -> None:
        self.op_name = op_name
        self._outputs = outputs or []
        self._future = Future()
        self._value: Any = None  # what the operation returned (the sender of an any-source recv)

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            r = fn()
        except BaseException as e:  # noqa: BLE001  (raised again by wait())
            self._future.set_exception(e)
        else:
            self._value = r
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
        try:
            self._future.wait(t)
        except TimeoutError:
            raise RuntimeError(
                f"Work.wait: {self.op_name} did not complete within {t} s") from None
        return True

    def result(self) -> list:
        """The output tensors of the collective (after waiting for it)."""
        self.wait()
        return self._future.value()

    def get_future(self) -> Future:
        """A Future completed with the output tensors when the collective finishes."""
        return self._future

    def _source_rank(self) -> int:
        """The sender of an irecv from any source (after wait)."""
        self.wait()
        return self._value

    def synchronize(self) -> None:
        self.wait()


class _Executor:
    """Runs a group's operations in call order: inline when nothing is queued, else on a
    background thread (so async_op=True returns at once and later calls wait their turn)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lock = threading.Lock()  # held while an operation runs
        self.cond = threading.Condition()
        self.queue: collections.deque = collections.deque()
        self.pending = 0
        self.thread: threading.Thread | None = None
        self.closed = False

    def run(self, op_name: str, fn: Callable[[], Any], outputs: list, async_op: bool,
            returns_value: bool = False) -> Any:
        """Runs fn in order: a Work when async_op, else None (or fn's value if returns_value)."""
        if not async_op:
            with self.cond:
                idle = self.pending == 0
            if idle:
                with self.lock:
                    value = fn()
                return value if returns_value else None
        work = Work(op_name, outputs)
        with self.cond:
            if self.closed:
                raise RuntimeError(f"{op_name}: the process group was destroyed")
            self.queue.append((work, fn))
            self.pending += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name=f"ember-{self.name}",
                                               daemon=True)
                self.thread.start()
            self.cond.notify_all()
        if async_op:
            return work
        work.wait()
        return work._value if returns_value else None

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.closed:
                    self.cond.wait()
                if not self.queue:
                    return
                work, fn = self.queue.popleft()
            with self.lock:
                work._run(fn)
            with self.cond:
                self.pending -= 1
                self.cond.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Waits until every queued operation ran; whether that happened within timeout."""
        with self.cond:
            return self.cond.wait_for(lambda: self.pending == 0, timeout)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
