"""Pinning batches: ``pin_memory(batch)`` and the loader's background pin thread.

With workers and ``pin_memory=True`` a thread of the main process receives the workers' results,
pins them, and hands them to the iterator through a queue, so the copy into page-locked memory
overlaps the training step instead of delaying ``next()``.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import multiprocessing.connection as mp_connection
import queue
import threading
from typing import Any

import ember

from ._worker import _ExceptionWrapper, _IterableEnd

__all__ = ["pin_memory"]


def pin_memory(data: Any, device: Any = None) -> Any:
    """Pins every tensor of a (nested) batch with ``Tensor.pin_memory()``; an object with its own
    ``pin_memory()`` method (a custom batch type) is pinned by calling it. Containers keep their
    type: dicts and other mappings, namedtuples, tuples, lists and sequences, dataclasses.

    >>> import ember
    >>> from ember.data.dataloader import pin_memory
    >>> b = pin_memory({"x": ember.zeros(2), "names": ["a", "b"]})
    >>> b["x"].tolist(), b["names"]
    ([0.0, 0.0], ['a', 'b'])
    """
    if isinstance(data, ember.Tensor):
        return data.pin_memory(device)
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        pinned = {k: pin_memory(v, device) for k, v in data.items()}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)  # keeps the type and its extra state (defaultdict...)
                clone.update(pinned)
                return clone
            return type(data)(pinned)  # type: ignore[call-arg]
        except TypeError:
            return pinned
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # namedtuple
            return type(data)(*(pin_memory(s, device) for s in data))
        try:
            return type(data)(pin_memory(s, device) for s in data)
        except TypeError:
            return tuple(pin_memory(s, device) for s in data)
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        fields = {
            f.name: pin_memory(getattr(data, f.name), device)
            for f in dataclasses.fields(data)
            if f.init
        }
        return dataclasses.replace(data, **fields)
    if isinstance(data, collections.abc.Sequence):
        items = [pin_memory(s, device) for s in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                clone[:] = items
                return clone
            return type(data)(items)  # type: ignore[call-arg]
        except TypeError:
            return items
    return data


class PinThread:
    """Receives the workers' results, pins them and queues them for the iterator.

    The queue carries ``("data", epoch, task_idx, result)`` and ``("died", worker_index)`` (a
    worker's process sentinel fired; the iterator finds out how it died). The thread holds no
    reference to the iterator; :meth:`stop` wakes it through a pipe and joins it.
    """

    def __init__(self, conns: list, sentinels: dict[int, int], device: Any) -> None:
        self.queue: queue.Queue = queue.Queue()
        self._wake_r, self._wake_w = mp_connection.Pipe(duplex=False)
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=_pin_loop,
            args=(list(conns), dict(sentinels), self.queue, self._wake_r, self._stopping, device),
            name="ember_data_pin_memory",
            daemon=True,
        )
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float) -> None:
        """Stops the thread; returns after ``timeout`` seconds even if it is stuck (in a custom
        ``pin_memory()``, say): it is a daemon and exits once that returns."""
        self._stopping.set()
        try:
            self._wake_w.send_bytes(b"")
        except OSError:
            pass
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self._wake_r.close()
        self._wake_w.close()


def _pin_loop(
    conns: list,
    sentinels: dict[int, int],
    out: queue.Queue,
    wake: Any,
    stopping: threading.Event,
    device: Any,
) -> None:
    watch: list[Any] = [*conns, *sentinels, wake]
    live = set(conns)
    try:
        while not stopping.is_set():
            ready = mp_connection.wait(watch)
            if stopping.is_set():
                return
            died = []
            for r in ready:
                if r in live:
                    try:
                        epoch, idx, data = r.recv()
                    except (EOFError, OSError):
                        live.discard(r)  # the worker died; its sentinel says how
                        watch.remove(r)
                        continue
                    if not isinstance(data, (_ExceptionWrapper, _IterableEnd)):
                        try:
                            data = pin_memory(data, device)
                        except Exception as e:
                            data = _ExceptionWrapper(e, "in the DataLoader's pin memory thread")
                    out.put(("data", epoch, idx, data))
                elif r in sentinels:
                    died.append(sentinels[r])
                    watch.remove(r)
            for i in died:
                out.put(("died", i))
    except Exception as e:
        if not stopping.is_set():  # a bug, not a shutdown race: let the iterator say so
            out.put(("crashed", _ExceptionWrapper(e, "in the DataLoader's pin memory thread")))
