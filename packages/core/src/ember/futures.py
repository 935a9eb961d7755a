"""``ember.futures``: a ``Future`` holds the result of work that completes later (on another
thread, or when a collective finishes), as PyTorch's ``torch.futures``.

A future is completed once, with ``set_result(value)`` or ``set_exception(error)``.
``wait()`` blocks until then and returns the value (or raises the error); ``then(callback)``
gives a new future of ``callback(self)``, run as soon as this one completes;
``add_done_callback(callback)`` runs ``callback(self)`` at completion and returns nothing.
``collect_all`` gathers several futures into one; ``wait_all`` waits for several and returns
their values.

>>> import ember
>>> from ember.futures import Future, collect_all, wait_all
>>> f = Future()
>>> g = f.then(lambda fut: fut.value() * 2)
>>> f.set_result(ember.ones(2))
>>> g.wait().tolist()
[2.0, 2.0]
>>> a, b = Future(), Future()
>>> both = collect_all([a, b])
>>> a.set_result(1); b.set_result(2)
>>> [x.value() for x in both.wait()], wait_all([a, b])
([1, 2], [1, 2])
"""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Any, Callable, Generic, TypeVar

__all__ = ["Future", "collect_all", "wait_all"]

T = TypeVar("T")
S = TypeVar("S")

_PENDING, _VALUE, _ERROR = 0, 1, 2
_POLL_S = 0.2  # how often a blocked wait() checks that something can still complete it


class Future(Generic[T]):
    """The result of an asynchronous computation (``torch.futures.Future``).

    ``devices`` (a list of devices, as in PyTorch) is recorded; CPU work needs no stream
    synchronization, and ember's CUDA ops on the current stream are ordered by it.

    A future may also be completed on demand: a subclass (or ember itself, e.g. for a
    collective's result) registers a *waiter* with ``_set_waiter(fn)``; the first ``wait()``
    calls ``fn()`` in the waiting thread and completes the future with its return value (or
    the error it raises).

    >>> from ember.futures import Future
    >>> f = Future()
    >>> f.done()
    False
    >>> f.set_result(3)
    >>> f.done(), f.wait(), f.value()
    (True, 3, 3)
    """

    def __init__(self, *, devices: list[Any] | None = None) -> None:
        self._cond = threading.Condition()
        self._state = _PENDING
        self._result: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] = []
        # run (once, in a waiting thread) to make progress on a lazily completed future
        self._drivers: list[Callable[[], None]] = []
        self._devices = _parse_devices(devices)

    # ----------------------------------------------------------------- completion
    def done(self) -> bool:
        """Whether the future is completed (with a value or an error)."""
        return self._state != _PENDING

    def set_result(self, result: T) -> None:
        """Completes the future with ``result``, then runs its callbacks (in this thread).

        Raises RuntimeError if it is already completed.
        """
        self._complete(_VALUE, result, "set_result")

    def set_exception(self, result: BaseException) -> None:
        """Completes the future with an error that ``wait()`` and ``value()`` raise.

        >>> from ember.futures import Future
        >>> f = Future()
        >>> f.set_exception(ValueError("no data"))
        >>> f.wait()
        Traceback (most recent call last):
        ...
        ValueError: no data
        """
        if not isinstance(result, BaseException):
            raise TypeError(
                f"Future.set_exception: expected an exception, got {type(result).__name__} "
                f"({result!r})"
            )
        self._complete(_ERROR, result, "set_exception")

    def _complete(self, state: int, payload: Any, op: str) -> None:
        with self._cond:
            if self._state != _PENDING:
                raise RuntimeError(
                    f"Future.{op}: the future is already completed; a Future can only be "
                    "marked completed once"
                )
            if state == _VALUE:
                self._result = payload
            else:
                self._error = payload
            self._state = state
            self._drivers = []
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for callback in callbacks:
            callback(self)

    def _set_waiter(self, waiter: Callable[[], T]) -> None:
        """Completes the future with ``waiter()`` when it is first waited for."""

        def drive() -> None:
            if self.done():
                return
            try:
                value = waiter()
            except BaseException as e:  # noqa: BLE001  (any error becomes the future's)
                if not self.done():
                    self._complete(_ERROR, e, "wait")
                return
            if not self.done():
                self._complete(_VALUE, value, "wait")

        with self._cond:
            self._drivers.append(drive)

    def _drive(self) -> None:
        with self._cond:
            drivers, self._drivers = self._drivers, []
        for drive in drivers:
            drive()

    # ----------------------------------------------------------------- results
    def wait(self) -> T:
        """Blocks until the future is completed and returns its value; raises its error if
        it was completed with ``set_exception``. Waiting on a future that nothing can complete
        any more (no other Python thread is running) raises RuntimeError instead of hanging."""
        self._drive()
        self._block("Future.wait")
        return self._unwrap()

    def _block(self, op: str) -> None:
        with self._cond:
            while self._state == _PENDING:
                if self._cond.wait(timeout=_POLL_S) or self._state != _PENDING:
                    continue
                if threading.active_count() == 1:
                    raise RuntimeError(
                        f"{op}: the future can never complete: it has no result yet and no "
                        "other thread is running to call set_result/set_exception on it"
                    )

    def value(self) -> T:
        """The value of a completed future (raises its error); call it after ``wait()`` or
        in a callback. RuntimeError if the future is not completed yet."""
        if self._state == _PENDING:
            raise RuntimeError(
                "Future.value: the future is not completed yet; call wait() first (or read "
                "the value in a then()/add_done_callback callback)"
            )
        return self._unwrap()

    def _unwrap(self) -> T:
        if self._state == _ERROR:
            assert self._error is not None
            raise self._error
        return self._result

    # ----------------------------------------------------------------- callbacks
    def then(self, callback: Callable[[Future[T]], S]) -> Future[S]:
        """A new future completed with ``callback(self)`` once this future completes (at once
        when it already is). An error raised by ``callback`` (including this future's own
        error re-raised by ``value()``) completes the new future with a RuntimeError that
        names it, as in PyTorch.

        >>> from ember.futures import Future
        >>> f = Future()
        >>> g = f.then(lambda fut: fut.value() + 1).then(lambda fut: fut.value() * 10)
        >>> f.set_result(1)
        >>> g.wait()
        20
        """
        _check_callable(callback, "then")
        out: Future[S] = Future(devices=self._devices)

        def run(fut: Future[T]) -> None:
            try:
                value = callback(fut)
            except BaseException as e:  # noqa: BLE001
                err = RuntimeError(
                    "Got the following error when running the callback: "
                    f"{type(e).__name__}: {e}"
                )
                err.__cause__ = e
                out.set_exception(err)
                return
            out.set_result(value)

        with self._cond:
            out._drivers.append(self._drive)  # waiting on `out` makes this one progress
        self._on_completion(run)
        return out

    def add_done_callback(self, callback: Callable[[Future[T]], None]) -> None:
        """Runs ``callback(self)`` when the future completes (at once when it already is).
        Its return value is ignored; an error it raises is reported on stderr and dropped
        (use ``then`` to chain results and errors).

        >>> from ember.futures import Future
        >>> f, seen = Future(), []
        >>> f.add_done_callback(lambda fut: seen.append(fut.value()))
        >>> f.set_result(7)
        >>> seen
        [7]
        """
        _check_callable(callback, "add_done_callback")

        def run(fut: Future[T]) -> None:
            try:
                callback(fut)
            except Exception:  # noqa: BLE001  (PyTorch logs and drops a callback's error)
                print("Got the following error when running the callback:", file=sys.stderr)
                traceback.print_exc(file=sys.stderr)

        self._on_completion(run)

    def _on_completion(self, fn: Callable[[Future[T]], None]) -> None:
        with self._cond:
            if self._state == _PENDING:
                self._callbacks.append(fn)
                return
        fn(self)

    def __repr__(self) -> str:
        state = {_PENDING: "pending", _VALUE: "done", _ERROR: "failed"}[self._state]
        return f"<ember.futures.Future object ({state}) at {id(self):#x}>"


def _parse_devices(devices: list[Any] | None) -> list[Any]:
    if devices is None:
        return []
    import ember

    try:
        return [ember.device(d if not isinstance(d, int) else f"cuda:{d}") for d in devices]
    except (TypeError, RuntimeError, ValueError) as e:
        raise ValueError(f"Future: devices must be a list of devices, got {devices!r}") from e


def _check_callable(callback: Any, op: str) -> None:
    if not callable(callback):
        raise TypeError(
            f"Future.{op}: callback must be a callable taking the future, got "
            f"{type(callback).__name__}"
        )


def _check_futures(futures: Any, op: str) -> list[Future[Any]]:
    try:
        futs = list(futures)
    except TypeError:
        raise TypeError(
            f"{op}: expected a list of ember.futures.Future, got {type(futures).__name__}"
        ) from None
    for i, f in enumerate(futs):
        if not isinstance(f, Future):
            raise TypeError(
                f"{op}: expected a list of ember.futures.Future, got {type(f).__name__} at "
                f"index {i}"
            )
    return futs


def collect_all(futures: list[Future[Any]]) -> Future[list[Future[Any]]]:
    """A future completed, once every one of ``futures`` is, with the list of them (in
    order); if one of them failed, it fails with the first such error.

    >>> from ember.futures import Future, collect_all
    >>> a, b = Future(), Future()
    >>> c = collect_all([a, b])
    >>> a.set_result("x"); c.done()
    False
    >>> b.set_result("y"); [f.value() for f in c.wait()]
    ['x', 'y']
    """
    futs = _check_futures(futures, "collect_all")
    out: Future[list[Future[Any]]] = Future()
    if not futs:
        out.set_result([])
        return out
    remaining = [len(futs)]
    lock = threading.Lock()

    def one_done(_: Future[Any]) -> None:
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if not last:
            return
        for f in futs:
            if f._state == _ERROR:
                assert f._error is not None
                out.set_exception(f._error)
                return
        out.set_result(futs)

    def drive_all() -> None:
        for f in futs:
            f._drive()

    with out._cond:
        out._drivers.append(drive_all)
    for f in futs:
        f._on_completion(one_done)
    return out


def wait_all(futures: list[Future[Any]]) -> list[Any]:
    """Waits for every future and returns their values in order; raises the error of the
    first one (in order) that failed.

    >>> from ember.futures import Future, wait_all
    >>> a, b = Future(), Future()
    >>> a.set_result(1); b.set_result(2)
    >>> wait_all([a, b])
    [1, 2]
    """
    futs = _check_futures(futures, "wait_all")
    for f in futs:
        f._drive()
    for f in futs:
        f._block("wait_all")
    return [f.value() for f in futs]
