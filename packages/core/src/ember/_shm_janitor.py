"""A janitor process that removes a process tree's ``/dev/shm`` segments once the whole tree is
gone, however it ended (SIGKILL of the whole process group included).

A process starts the janitor (a small interpreter that imports nothing of ember, in a session of
its own so that a kill of the process group does not reach it) before it creates its first named
segment (the engine's create hook, ``set_shm_create_hook`` in core/shared_memory.h), or when it
starts a child through ``ember.multiprocessing``; it keeps the write end of a pipe to it. Every
process of the tree holds a copy of that end (inherited by fork, passed to ``ember.multiprocessing``
spawn and forkserver children with the process object; a child started otherwise by spawn starts
a janitor of its own) and writes its pid once, before its first segment exists. When the last
copy closes (every process of the tree has exited), the janitor reads EOF, waits for the
registered processes to be gone (zombies count as gone), and unlinks their segments
(``ember_<pid>_*``). A pid still alive after a minute is left alone (it may be a reuse). After
normal exits there is nothing left for it to do: the processes clean up after themselves.

>>> import ember
>>> from ember import _shm_janitor
>>> t = ember.zeros(4).share_memory_()  # starts (or joins) this process tree's janitor
>>> _shm_janitor.running()
True
"""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing import context as _mpctx
from multiprocessing import reduction
from typing import Any

_CODE = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
pids, buf = set(), b""
with os.fdopen(int(sys.argv[1]), "rb", buffering=0) as f:
    while True:
        chunk = f.read(4096)
        if not chunk:
            break
        *lines, buf = (buf + chunk).split(b"\n")
        pids.update(int(x) for x in lines if x.strip().isdigit())

def alive(pid):
    try:  # a zombie is dead: only its exit status waits to be collected
        with open("/proc/%d/stat" % pid, "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                return False
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

pending, deadline = set(pids), time.monotonic() + 60
while pending and time.monotonic() < deadline:  # zombies not reaped yet
    pending = {p for p in pending if alive(p)}
    if pending:
        time.sleep(0.1)
try:
    names = os.listdir("/dev/shm")
except OSError:
    names = []
for pid in pids - pending:  # a pid still alive after a minute may be a reuse: left alone
    prefix = "ember_%d_" % pid
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass
"""

_lock = threading.Lock()
_write_fd: int | None = None  # this process's copy of the pipe's write end
_registered_pid: int | None = None


def _register() -> None:
    global _registered_pid
    if _write_fd is None or _registered_pid == os.getpid():
        return
    try:
        os.write(_write_fd, b"%d\n" % os.getpid())
        _registered_pid = os.getpid()
    except OSError:  # the janitor is gone: nothing to do
        pass


def ensure_started() -> None:
    """Starts the janitor of this process tree if it has none (best effort: without one, the
    segments of a process killed with its parent may stay)."""
    global _write_fd
    with _lock:
        if _write_fd is None:
            r, w = os.pipe()
            try:
                os.set_inheritable(r, True)
                devnull = [(os.POSIX_SPAWN_OPEN, i, os.devnull, os.O_RDWR, 0) for i in range(3)]
                # Its own session: a Ctrl-C or a kill of the process group does not reach it.
                os.posix_spawn(sys.executable, [sys.executable, "-c", _CODE, str(r)], os.environ,
                               file_actions=devnull, setsid=True)  # fmt: skip
            except OSError:
                os.close(w)
                return
            finally:
                os.close(r)
            _write_fd = w
        _register()


def running() -> bool:
    """Whether this process has a janitor (started here or inherited)."""
    return _write_fd is not None


def _reset_lock_in_child() -> None:
    # A fork while another thread held the lock would leave the child's copy locked forever.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_lock_in_child)


def after_fork() -> None:
    """In a forked child: register under its own pid (the write end is inherited)."""
    with _lock:
        _register()


def _adopt(dupfd: Any) -> None:
    global _write_fd
    fd = dupfd.detach()
    with _lock:
        if _write_fd is None:
            _write_fd = fd
        elif fd != _write_fd:
            os.close(fd)
        _register()


class Handle:
    """Travels with a spawn / forkserver process object: gives the child a copy of the write
    end."""

    def __reduce__(self) -> tuple:
        popen = _mpctx.get_spawning_popen()
        if popen is None or _write_fd is None:
            return (_noop, ())
        return (_adopt, (reduction.DupFd(_write_fd),))


def _noop() -> Any:
    return None
