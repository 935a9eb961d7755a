"""A janitor process that removes a process tree's ``/dev/shm`` segments once the whole tree is
gone, however it ended (the main process SIGKILLed included).

The first process that starts a child through ``ember.multiprocessing`` starts the janitor (a
small interpreter that imports nothing of ember) and keeps the write end of a pipe to it. Every
process of the tree holds a copy of that end (inherited by fork, passed to spawn and forkserver
children with the process object) and writes its pid once. When the last copy closes (every
process of the tree has exited), the janitor reads EOF, waits for the registered processes to be
gone, and unlinks their segments (``ember_<pid>_*``). After normal exits there is nothing left
for it to do: the processes clean up after themselves.
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
