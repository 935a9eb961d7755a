"""Contexts and Process classes that clean up after their children's shared memory.

Each start method (fork, spawn, forkserver) gets a context whose ``Process`` removes the
``/dev/shm`` segments a child created (names ``ember_<pid>_*``) once it is gone:

* a child that died abnormally (an exception, a signal, SIGKILL included) is cleaned up as soon as
  its parent notices (``join()``, ``is_alive()``, ``spawn``'s ``ProcessContext.join``);
* a child that exited normally may have sent tensors that are not received yet (their segments
  must outlive it), so its leftovers are removed when the parent exits. A child removes its own
  idle recycled segments at exit;
* when the parent itself is killed, a janitor process removes the segments of the whole tree
  once every process of it is gone (see ``_janitor``).

Everything else (queues, pipes, pools, managers) is the standard library's: tensors travel
through ``multiprocessing.reduction.ForkingPickler``, where ``init_reductions`` registers the
shared-memory reducer.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context as _mpctx
import multiprocessing.util as _mputil
import os
import threading
from typing import Any

from ember import _C

from . import _janitor

_lock = threading.Lock()
_deferred: set[int] = set()  # children started here and not cleaned up yet: done at exit


def cleanup_segments(pid: int) -> int:
    """Unlinks every ``/dev/shm`` segment that process ``pid`` created; returns how many.

    >>> cleanup_segments(2**22 + 12345)  # a pid that created none
    0
    """
    prefix = _C._shm_prefix(pid)
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return 0
    return sum(1 for n in names if n.startswith(prefix) and _C._shm_unlink(n))


def reap(pid: int, exitcode: int | None) -> None:
    """Cleans up after a child that is gone (now, or at exit when it exited normally)."""
    if exitcode is None:
        return
    if exitcode != 0:
        cleanup_segments(pid)
        with _lock:
            _deferred.discard(pid)
    _C._shm_trim_cache()  # unmap the cached mappings of its recycled segments that we let go


def _gone(pid: int) -> bool:
    """Whether no process has this pid (a live one would be a reuse of a reaped child's pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _at_exit() -> None:
    # Runs after multiprocessing has joined the non-daemon children (negative exit priority).
    # Every child started here is covered, also those never joined (active_children() reaps
    # without join()).
    with _lock:
        pids = list(_deferred)
        _deferred.clear()
    for pid in pids:
        if _gone(pid):
            cleanup_segments(pid)
    # A child leaves its busy recycled segments (named by messages still in flight) to the
    # process that supervises it (this module's Process, the DataLoader); the main process
    # removes all of its own.
    _C._shm_pool_clear(multiprocessing.parent_process() is not None)


class _ExitHook:
    """Registers `_at_exit` with multiprocessing's finalizers, again in each forked child (whose
    inherited finalizers are dropped)."""

    def register(self) -> None:
        _mputil.Finalize(None, _at_exit, exitpriority=-100)

    def after_fork(self) -> None:
        with _lock:
            _deferred.clear()  # the parent's children are not ours
        self.register()
        _janitor.after_fork()


_exit_hook = _ExitHook()


def install_exit_hook() -> None:
    _exit_hook.register()
    _mputil.register_after_fork(_exit_hook, _ExitHook.after_fork)


class _ReapingProcess:
    """Mixin for the Process classes: cleanup of a dead child's segments."""

    def _ember_reap(self) -> None:
        popen = getattr(self, "_popen", None)
        if popen is None or popen.returncode is None or self.__dict__.get("_ember_reaped"):
            return
        self.__dict__["_ember_reaped"] = True
        reap(popen.pid, popen.returncode)

    def start(self) -> None:
        _janitor.ensure_started()
        # Pickled with the process object for spawn / forkserver (fork inherits the pipe).
        self.__dict__["_ember_janitor"] = _janitor.Handle()
        super().start()  # type: ignore[misc]
        self.__dict__.pop("_ember_janitor", None)
        with _lock:
            _deferred.add(self._popen.pid)  # type: ignore[attr-defined]

    def join(self, timeout: float | None = None) -> None:
        super().join(timeout)  # type: ignore[misc]
        self._ember_reap()

    def is_alive(self) -> bool:
        alive = super().is_alive()  # type: ignore[misc]
        if not alive:
            self._ember_reap()
        return alive


class ForkProcess(_ReapingProcess, _mpctx.ForkProcess):
    pass


class SpawnProcess(_ReapingProcess, _mpctx.SpawnProcess):
    pass


class ForkServerProcess(_ReapingProcess, _mpctx.ForkServerProcess):
    pass


class _ConcreteMixin:
    def get_context(self, method: str | None = None) -> Any:
        return self if method is None else _get_concrete(method)


class ForkContext(_ConcreteMixin, _mpctx.ForkContext):
    Process = ForkProcess


class SpawnContext(_ConcreteMixin, _mpctx.SpawnContext):
    Process = SpawnProcess


class ForkServerContext(_ConcreteMixin, _mpctx.ForkServerContext):
    Process = ForkServerProcess


_concrete: dict[str, Any] = {"fork": ForkContext(), "spawn": SpawnContext()}
if multiprocessing.reduction.HAVE_SEND_HANDLE:
    _concrete["forkserver"] = ForkServerContext()


def _get_concrete(method: str) -> Any:
    try:
        ctx = _concrete[method]
    except KeyError:
        raise ValueError(
            f"cannot find context for {method!r}; expected one of {sorted(_concrete)}"
        ) from None
    ctx._check_available()
    return ctx


_std_default = _mpctx._default_context


class Process(_ReapingProcess, _mpctx.process.BaseProcess):
    """``multiprocessing.Process`` for the default start method (see the module docstring).

    >>> import ember.multiprocessing as mp
    >>> p = mp.Process(target=print, args=("hi",))
    """

    _start_method = None

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _default_context.get_context().Process._Popen(process_obj)

    @staticmethod
    def _after_fork() -> None:
        return _default_context.get_context().Process._after_fork()


class DefaultContext(_mpctx.DefaultContext):
    """The default context: the start method is the standard library's (``set_start_method``
    on either module sets both), with this module's Process classes."""

    Process = Process

    def __init__(self) -> None:
        super().__init__(None)

    def get_context(self, method: str | None = None) -> Any:
        if method is None:
            method = _std_default.get_start_method()
        return _get_concrete(method)

    def set_start_method(self, method: str | None, force: bool = False) -> None:
        _std_default.set_start_method(method, force)

    def get_start_method(self, allow_none: bool = False) -> str | None:
        return _std_default.get_start_method(allow_none)


_default_context = DefaultContext()
