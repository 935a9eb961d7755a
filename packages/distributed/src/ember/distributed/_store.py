"""Key-value stores for rendezvous: TCPStore, FileStore, HashStore, PrefixStore (torch's API).

Values are bytes (a str is encoded as UTF-8); `add` keeps a counter as its decimal text, as torch
does, so `get` of a counter returns e.g. b"3". `get` and `wait` block until the keys exist or the
store's timeout passes (then they raise `DistStoreError`, a RuntimeError naming the keys).
"""

from __future__ import annotations

import fcntl
import os
import pickle
import socket
import struct
import threading
import time
from datetime import timedelta
from typing import Any

from ._common import DistError, DistNetworkError

__all__ = ["DistStoreError", "FileStore", "HashStore", "PrefixStore", "QueueEmptyError", "Store",
           "TCPStore"]

_DEFAULT_TIMEOUT = timedelta(seconds=300)


class DistStoreError(DistError):  # torch: DistStoreError < DistError < RuntimeError
    """A store operation failed or timed out."""


class QueueEmptyError(DistStoreError):  # torch: QueueEmptyError < DistStoreError
    """A non-blocking ``queue_pop`` found the queue empty."""


_INTERNAL = "__ember_store_clients__"  # TCPStore's count of joined clients; never listed


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return bytes(value)
    raise TypeError(f"store value must be bytes or str, got {type(value).__name__}")


def _seconds(timeout: timedelta | float | None, default: float) -> float:
    if timeout is None:
        return default
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)


class _Table:
    """The key-value state with blocking waits (used by the TCP server and HashStore)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.queues: dict[str, list[bytes]] = {}  # queue_push / queue_pop, apart from data
        self.cond = threading.Condition()

    def _has(self, key: str) -> bool:
        return key in self.data or bool(self.queues.get(key))

    def set(self, key: str, value: bytes) -> None:
        with self.cond:
            self.data[key] = value
            self.cond.notify_all()

    def add(self, key: str, amount: int) -> int:
        with self.cond:
            v = int(self.data.get(key, b"0")) + amount
            self.data[key] = str(v).encode()
            self.cond.notify_all()
            return v

    def append(self, key: str, value: bytes) -> None:
        with self.cond:
            self.data[key] = self.data.get(key, b"") + value
            self.cond.notify_all()

    def multi_set(self, keys: list[str], values: list[bytes]) -> None:
        with self.cond:
            self.data.update(zip(keys, values))
            self.cond.notify_all()

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        with self.cond:
            cur = self.data.get(key)
            if (cur is None and expected == b"") or cur == expected:
                self.data[key] = desired
                self.cond.notify_all()
                return desired
            return expected if cur is None else cur

    def wait(self, keys: list[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not all(self._has(k) for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 1.0))
            return True

    def get(self, key: str) -> bytes | None:
        with self.cond:
            return self.data.get(key)

    def check(self, keys: list[str]) -> bool:
        with self.cond:
            return all(self._has(k) for k in keys)

    def queue_push(self, key: str, value: bytes) -> None:
        with self.cond:
            self.queues.setdefault(key, []).append(value)
            self.cond.notify_all()

    def queue_pop(self, key: str) -> bytes | None:
        """The queue's oldest value, or None when it is empty (the client waits and retries)."""
        with self.cond:
            q = self.queues.get(key)
            if not q:
                return None
            value = q.pop(0)
            if not q:
                del self.queues[key]
            return value

    def queue_len(self, key: str) -> int:
        with self.cond:
            return len(self.queues.get(key, ()))

    def list_keys(self) -> list[str]:
        with self.cond:
            keys = [k for k in self.data if k != _INTERNAL]
            return keys + [k for k, q in self.queues.items() if q and k not in self.data]

    def delete(self, key: str) -> bool:
        with self.cond:
            return self.data.pop(key, None) is not None

    def num_keys(self) -> int:
        with self.cond:
            return len(self.data)


class Store:
    """Base class of the key-value stores: set/get/add/wait/delete_key/num_keys/compare_set.

    Example::

        >>> store = HashStore()
        >>> store.set("a", "1"); store.get("a")
        b'1'
    """

    def __init__(self, timeout: timedelta = _DEFAULT_TIMEOUT) -> None:
        self._timeout = _seconds(timeout, 300.0)

    @property
    def timeout(self) -> timedelta:
        return timedelta(seconds=self._timeout)

    def set_timeout(self, timeout: timedelta) -> None:
        """Sets the default timeout of get and wait."""
        self._timeout = _seconds(timeout, self._timeout)

    # Subclasses implement these on str keys and bytes values.
    def _op(self, cmd: str, *args: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def set(self, key: str, value: bytes | str) -> None:
        """Stores value under key (replacing any previous value)."""
        self._op("set", key, _as_bytes(value))

    def get(self, key: str) -> bytes:
        """The value of key, waiting up to the store's timeout for it to be set."""
        self.wait([key])
        value = self._op("get", key)
        if value is None:
            raise DistStoreError(f"store: key {key!r} was deleted while get waited for it")
        return value

    def add(self, key: str, amount: int) -> int:
        """Adds amount to the integer counter at key (0 if unset) and returns the new value."""
        return int(self._op("add", key, int(amount)))

    def compare_set(self, key: str, expected_value: bytes | str,
                    desired_value: bytes | str) -> bytes:
        """Sets key to desired_value if its value is expected_value (or it is unset and
        expected_value is empty); returns the value the key holds afterwards."""
        return self._op("compare_set", key, _as_bytes(expected_value), _as_bytes(desired_value))

    def append(self, key: str, value: bytes | str) -> None:
        """Appends value to the bytes at key (sets it if unset), atomically."""
        self._op("append", key, _as_bytes(value))

    def multi_set(self, keys: list[str], values: list[bytes | str]) -> None:
        """Sets every key to its value in one atomic update."""
        keys, values = list(keys), [_as_bytes(v) for v in values]
        if len(keys) != len(values):
            raise ValueError(f"store.multi_set: {len(keys)} keys but {len(values)} values")
        self._op("multi_set", keys, values)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        """The values of keys, waiting up to the store's timeout for all of them to be set.

        >>> s = HashStore(); s.multi_set(["a", "b"], [b"1", "2"]); s.multi_get(["b", "a"])
        [b'2', b'1']
        """
        keys = list(keys)
        self.wait(keys)
        values = self._op("multi_get", keys)
        missing = [k for k, v in zip(keys, values) if v is None]
        if missing:
            raise DistStoreError(f"store: keys {missing} were deleted while multi_get waited")
        return values

    def has_extended_api(self) -> bool:
        """Whether append / multi_get / multi_set are supported (they are, by every store)."""
        return True

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        """Waits until every key in keys is set; DistStoreError after the timeout."""
        keys = [keys] if isinstance(keys, str) else list(keys)
        t = _seconds(timeout, self._timeout)
        if not self._op("wait", keys, t):
            raise DistStoreError(
                f"{type(self).__name__}: timed out after {t:g} s waiting for keys {keys}")

    def check(self, keys: list[str]) -> bool:
        """Whether every key in keys is set (does not wait)."""
        return bool(self._op("check", list(keys)))

    def delete_key(self, key: str) -> bool:
        """Removes key; whether it existed."""
        return bool(self._op("delete", key))

    def num_keys(self) -> int:
        """How many keys the store holds."""
        return int(self._op("num_keys"))

    def list_keys(self) -> list[str]:
        """Every key the store holds (a queue's key while it has items).

        >>> s = HashStore(); s.set("a", "1"); s.list_keys()
        ['a']
        """
        return list(self._op("list_keys"))

    def queue_push(self, key: str, value: bytes | str) -> None:
        """Appends value to the FIFO queue at key (made on first push); a waiter on key wakes.

        >>> s = HashStore(); s.queue_push("q", "a"); s.queue_push("q", b"b"); s.queue_len("q")
        2
        """
        self._op("queue_push", key, _as_bytes(value))

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        """Removes and returns the oldest value of the queue at key. With block=True it waits
        up to the store's timeout for one (then DistStoreError); with block=False an empty queue
        raises QueueEmptyError.

        >>> s = HashStore(); s.queue_push("q", "a"); s.queue_pop("q")
        b'a'
        """
        deadline = time.monotonic() + self._timeout
        while True:
            value = self._op("queue_pop", key)
            if value is not None:
                return value
            if not block:
                raise QueueEmptyError(f"{type(self).__name__}.queue_pop: queue {key!r} is empty")
            left = deadline - time.monotonic()
            if left <= 0 or not self._op("wait", [key], left):
                raise DistStoreError(f"{type(self).__name__}.queue_pop: timed out after "
                                     f"{self._timeout:g} s waiting for an item in queue {key!r}")

    def queue_len(self, key: str) -> int:
        """How many values the queue at key holds (0 for a queue never pushed to)."""
        return int(self._op("queue_len", key))

    def barrier(self, key: str, world_size: int, timeout: timedelta | None = None) -> None:
        """Blocks until world_size callers (processes or threads) called barrier with key;
        DistStoreError after timeout (default: the store's).

        >>> HashStore().barrier("start", 1)
        """
        if int(world_size) < 1:
            raise ValueError(f"store.barrier: world_size must be >= 1, got {world_size}")
        if self.add(f"{key}/num_members", 1) == int(world_size):
            self.set(f"{key}/last_member", "1")
        self.wait([f"{key}/last_member"], timeout)

    def clone(self) -> Store:
        """A new handle to the same underlying store (for use from another thread)."""
        raise NotImplementedError(f"{type(self).__name__}.clone is not supported")


class HashStore(Store):
    """An in-process store (threads of one process).

    Example::

        >>> s = HashStore(); s.add("n", 2)
        2
    """

    def __init__(self) -> None:
        super().__init__()
        self._table = _Table()

    def _op(self, cmd: str, *args: Any) -> Any:
        return _dispatch(self._table, cmd, args)

    def clone(self) -> HashStore:
        """A handle sharing this store's table."""
        c = HashStore()
        c._table, c._timeout = self._table, self._timeout
        return c


def _dispatch(table: _Table, cmd: str, args: tuple) -> Any:
    if cmd == "set":
        return table.set(*args)
    if cmd == "get":
        return table.get(*args)
    if cmd == "add":
        return table.add(*args)
    if cmd == "compare_set":
        return table.compare_set(*args)
    if cmd == "append":
        return table.append(*args)
    if cmd == "multi_set":
        return table.multi_set(*args)
    if cmd == "multi_get":
        return [table.get(k) for k in args[0]]
    if cmd == "wait":
        return table.wait(*args)
    if cmd == "check":
        return table.check(*args)
    if cmd == "delete":
        return table.delete(*args)
    if cmd == "num_keys":
        return table.num_keys()
    if cmd == "queue_push":
        return table.queue_push(*args)
    if cmd == "queue_pop":
        return table.queue_pop(*args)
    if cmd == "queue_len":
        return table.queue_len(*args)
    if cmd == "list_keys":
        return table.list_keys()
    raise DistStoreError(f"store: unknown command {cmd!r}")


# ---- TCP: length-prefixed pickled (cmd, args) requests, one thread per client connection ----

_HDR = struct.Struct("!I")


def _send_msg(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HDR.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("store: connection closed")
        buf += chunk
    return bytes(buf)


def _recv_msg(sock: socket.socket) -> Any:
    (n,) = _HDR.unpack(_recv_exact(sock, _HDR.size))
    return pickle.loads(_recv_exact(sock, n))


class _TCPServer:
    def __init__(self, host: str, port: int) -> None:
        self.table = _Table()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bind_host = "" if host in ("", "0.0.0.0") else host
        try:
            self.sock.bind((bind_host, port))
        except OSError as e:
            self.sock.close()
            raise DistNetworkError(f"TCPStore: cannot listen on {host}:{port}: {e}") from e
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        self.live = 0  # connected clients
        self.changed = threading.Condition()
        threading.Thread(target=self._accept, name="ember-tcpstore", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with self.changed:
            self.live += 1
        try:
            self._serve_client(conn)
        finally:
            with self.changed:
                self.live -= 1
                self.changed.notify_all()

    def _serve_client(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    cmd, args = _recv_msg(conn)
                except (ConnectionError, OSError, EOFError):
                    return
                try:
                    reply = ("ok", _dispatch(self.table, cmd, args))
                except Exception as e:  # noqa: BLE001  (sent back to the client)
                    reply = ("error", f"{type(e).__name__}: {e}")
                try:
                    _send_msg(conn, reply)
                except OSError:
                    return

    def close(self, linger: float = 10.0) -> None:
        """Stops accepting clients, then serves the connected ones until they leave (up to
        linger seconds): the host must not exit while a rank still waits on a reply."""
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self.changed:
            self.changed.wait_for(lambda: self.live == 0, timeout=linger)


class TCPStore(Store):
    """A store served over TCP by the master process (is_master=True), reached by every rank.

    The master runs a small threaded server; every TCPStore (the master's included) is a client.
    With wait_for_workers and a world_size, the constructor returns once world_size clients joined.
    port=0 on the master picks a free port (read it back from `store.port`).

    Example::

        >>> server = TCPStore("127.0.0.1", 0, 1, is_master=True)
        >>> server.set("k", b"v"); server.get("k")
        b'v'
    """

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout: timedelta = _DEFAULT_TIMEOUT,
                 wait_for_workers: bool = True, multi_tenant: bool = False,
                 master_listen_fd: int | None = None, use_libuv: bool = True) -> None:
        super().__init__(timeout)
        self.host = host_name
        self._server = _TCPServer(host_name, port) if is_master else None
        self.port = self._server.port if self._server else int(port)
        self._world_size = world_size
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._sock = self._connect()
        if world_size is not None and world_size > 0:
            self.add("__ember_store_clients__", 1)
            if is_master and wait_for_workers:
                self._wait_clients(world_size)

    @property
    def libuvBackend(self) -> bool:  # noqa: N802  (torch's name)
        return False

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self._timeout
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        delay = 0.01
        while True:
            try:
                s = socket.create_connection((host, self.port), timeout=max(1.0, self._timeout))
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(None)
                return s
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistNetworkError(
                        f"TCPStore: cannot connect to {self.host}:{self.port} within "
                        f"{self._timeout:g} s: {e}") from e
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _wait_clients(self, world_size: int) -> None:
        deadline = time.monotonic() + self._timeout
        while int(self._op("get", "__ember_store_clients__") or b"0") < world_size:
            if time.monotonic() > deadline:
                joined = int(self._op("get", "__ember_store_clients__") or b"0")
                raise DistStoreError(
                    f"TCPStore: timed out after {self._timeout:g} s waiting for {world_size} "
                    f"workers to join {self.host}:{self.port} ({joined} joined)")
            time.sleep(0.005)

    def _op(self, cmd: str, *args: Any) -> Any:
        with self._lock:
            if self._sock is None:
                raise DistStoreError("TCPStore: the store was closed")
            try:
                _send_msg(self._sock, (cmd, args))
                status, value = _recv_msg(self._sock)
            except (OSError, ConnectionError, EOFError) as e:
                raise DistStoreError(
                    f"TCPStore: lost the connection to {self.host}:{self.port} during {cmd} "
                    f"(did the master process exit?): {e}") from e
        if status != "ok":
            raise DistStoreError(f"TCPStore: {cmd} failed on the server: {value}")
        return value

    def clone(self) -> TCPStore:
        """A new client connection to the same server (not a master, joins no count)."""
        c = TCPStore.__new__(TCPStore)
        Store.__init__(c, timedelta(seconds=self._timeout))
        c.host, c.port, c._server, c._world_size = self.host, self.port, None, self._world_size
        c._lock = threading.Lock()
        c._sock = None
        c._sock = c._connect()
        return c

    def num_keys(self) -> int:
        """How many keys the store holds (its internal worker counter excluded)."""
        n = int(self._op("num_keys"))
        return n - 1 if self._world_size else n

    def close(self) -> None:
        """Closes this client (and stops the server if this is the master)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
        if self._server is not None:
            self._server.close()
            self._server = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class FileStore(Store):
    """A store kept in a file that every rank opens (a shared file system works across hosts).

    Each operation takes an exclusive fcntl lock and reads/rewrites the pickled table; waits poll.
    The file counts the FileStore objects using it: each one registers when it is made and
    leaves when it is closed or garbage-collected; when the last one leaves and at least
    ``world_size`` of them have left, the file is deleted (as torch does; with world_size -1 the
    file is kept). Start a job with a file that does not exist yet.

    Example::

        >>> import os, tempfile; path = tempfile.mktemp()
        >>> s = FileStore(path, 1); s.set("x", b"1"); s.get("x")
        b'1'
        >>> del s; os.path.exists(path)
        False
    """

    def __init__(self, file_name: str, world_size: int = -1,
                 timeout: timedelta = _DEFAULT_TIMEOUT) -> None:
        super().__init__(timeout)
        self.path = file_name
        self.world_size = world_size
        self._owner_pid = os.getpid()  # a forked child's copy does not hold a reference
        self._registered = False

        def register(table: dict, meta: dict) -> tuple[None, bool]:
            meta["refs"] = meta.get("refs", 0) + 1
            return None, True

        self._locked(register)
        self._registered = True

    def _locked(self, fn, unlink_if_true: bool = False) -> Any:
        """Runs fn(table, meta) -> (result, changed) under the file's lock, rewriting the file
        when changed (table: the user's keys; meta: the reference counts); with
        unlink_if_true, deletes the file (still locked) when the result is true."""
        while True:
            f = os.fdopen(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600), "r+b")
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                if os.fstat(f.fileno()).st_ino == os.stat(self.path).st_ino:
                    break  # locked the file that is at the path (not one deleted meanwhile)
            except FileNotFoundError:
                pass
            f.close()
        with f:
            try:
                raw = f.read()
                table, meta = pickle.loads(raw) if raw else ({}, {})
                result, changed = fn(table, meta)
                if changed:
                    f.seek(0)
                    f.truncate()
                    f.write(pickle.dumps((table, meta)))
                    f.flush()
                if unlink_if_true and result:
                    os.unlink(self.path)
                return result
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _op(self, cmd: str, *args: Any) -> Any:
        if not self._registered:
            raise DistStoreError(f"FileStore({self.path!r}): used after close()")
        if cmd == "wait":
            keys, timeout = args
            deadline = time.monotonic() + timeout
            delay = 0.001
            while not self._op("check", keys):
                if time.monotonic() > deadline:
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
            return True

        def fn(table: dict, meta: dict) -> tuple[Any, bool]:
            t = _Table()
            t.data = table
            before = dict(table)
            r = _dispatch(t, cmd, args)
            return r, table != before

        return self._locked(fn)

    def clone(self) -> FileStore:
        """Another user of the same file."""
        return FileStore(self.path, self.world_size, timedelta(seconds=self._timeout))

    def has_extended_api(self) -> bool:
        """False, as torch's FileStore (append / multi_get / multi_set still work here)."""
        return False

    def queue_push(self, key: str, value: bytes | str) -> None:
        raise NotImplementedError("FileStore: queue support is not implemented.")

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        raise NotImplementedError("FileStore: queue support is not implemented.")

    def queue_len(self, key: str) -> int:
        raise NotImplementedError("FileStore: queue support is not implemented.")

    def close(self) -> None:
        """Leaves the file (deleting it if this was its last user, see the class doc); the
        store cannot be used afterwards. Garbage collection does the same."""
        if not self._registered or os.getpid() != self._owner_pid:
            return
        self._registered = False
        if not os.path.exists(self.path):  # already cleaned up (e.g. by a tmp dir's removal)
            return

        def leave(table: dict, meta: dict) -> tuple[bool, bool]:
            meta["refs"] = meta.get("refs", 0) - 1
            meta["done"] = meta.get("done", 0) + 1
            last = meta["refs"] <= 0 and 0 <= self.world_size <= meta["done"]
            return last, True

        self._locked(leave, unlink_if_true=True)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown, file system gone)
            pass


class PrefixStore(Store):
    """Prepends prefix + "/" to every key of another store (one namespace per process group).

    Example::

        >>> s = PrefixStore("group1", HashStore()); s.set("k", b"v"); s.get("k")
        b'v'
    """

    def __init__(self, prefix: str, store: Store) -> None:
        super().__init__(timedelta(seconds=store._timeout))
        self.prefix = prefix
        self.underlying_store = store

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def _op(self, cmd: str, *args: Any) -> Any:
        if cmd in ("wait", "check", "multi_get", "multi_set"):
            return self.underlying_store._op(cmd, [self._k(k) for k in args[0]], *args[1:])
        if cmd == "num_keys":
            return self.underlying_store._op(cmd)
        if cmd == "list_keys":  # only this namespace's keys, without the prefix
            start = self._k("")
            return [k[len(start):] for k in self.underlying_store._op(cmd) if k.startswith(start)]
        return self.underlying_store._op(cmd, self._k(args[0]), *args[1:])

    def has_extended_api(self) -> bool:
        return self.underlying_store.has_extended_api()

    def clone(self) -> PrefixStore:
        """The same prefix over a clone of the underlying store."""
        c = PrefixStore(self.prefix, self.underlying_store.clone())
        c._timeout = self._timeout
        return c
