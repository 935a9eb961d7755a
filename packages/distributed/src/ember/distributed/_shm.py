"""The `shm` backend: CPU collectives among the processes of one machine through shared memory.

Rank 0 of a group creates one segment (ember._C._ShmGroup: header, two sets of per-rank slots,
per-pair mailboxes) and publishes its name through the store; once every rank has mapped it,
rank 0 unlinks the name, so nothing is left in /dev/shm whatever way the processes exit. The data
path is memcpy into slots, a lock-free barrier on counters in the segment, and reductions in C++
(packages/core/csrc/python/shm_collectives_py.cpp); no socket is involved after rendezvous.

all_reduce is a reduce-scatter (rank r reduces the r-th 1/world share of every slot) followed by
an all-gather (every rank copies each reduced share), chunk by chunk, so large tensors move at
memory bandwidth. Every wait has the group's timeout and watches the peers' pids.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import logging
import os
import threading
import time
import uuid
from typing import Any, Callable

import ember
import numpy as np
from ember import _C

from ._common import (
    CollectiveArgError,
    DistBackendError,
    ReduceOp,
    check_op_dtype,
    dtype_code,
    out_buffer,
    src_buffer,
)

logger = logging.getLogger("ember.distributed")

_OK, _TIMEOUT, _PEER_DEAD, _ABORTED, _MISMATCH = 0, 1, 2, 3, 4

# Per rank and buffer set; by default 16 MiB / world size within [1, 8] MiB, so a group's
# segment stays near 32 MiB (docker's default /dev/shm is 64 MiB): big chunks mean few barriers
# per large all_reduce. Where /dev/shm is smaller, rank 0 halves the slots until they fit.
_SLOT_BYTES = min(1 << 30, int(os.environ.get("EMBER_SHM_SLOT_BYTES", "0")))
_MAILBOX_BYTES = min(1 << 30, int(os.environ.get("EMBER_SHM_MAILBOX_BYTES", str(256 << 10))))
_MIN_SLOT = 64 << 10

_unlink_at_exit: set[str] = set()


@atexit.register
def _unlink_leftovers() -> None:
    for name in list(_unlink_at_exit):
        try:
            _C._shm_unlink(name.lstrip("/"))
        except Exception:  # noqa: BLE001  (best effort at exit)
            pass


def _debug_detail() -> bool:
    v = os.environ.get("EMBER_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    return (v or "").upper() == "DETAIL"


class ShmBackend:
    """One group's shared-memory transport (group-local ranks)."""

    name = "shm"

    def __init__(self, store: Any, rank: int, size: int, timeout: float, label: str) -> None:
        self._rank, self._size, self.timeout, self.label = rank, size, timeout, label
        self._broken: str | None = None
        self._seq = 0
        self._debug = _debug_detail()
        # messages taken out of a mailbox ahead of the receive that matches their tag
        self._stash: dict[tuple[int, int], collections.deque] = {}
        self._stash_lock = threading.Lock()
        self._src_locks: dict[int, threading.RLock] = {}
        slot = _SLOT_BYTES or min(8 << 20, max(1 << 20, (16 << 20) // size))
        slot = max(4096 * size, (slot // 64) * 64)  # scatter/all_to_all split a slot by rank
        mbox = max(4096, (_MAILBOX_BYTES // 64) * 64)
        if rank == 0:
            seg = f"/ember_dist_{os.getpid()}_{uuid.uuid4().hex[:12]}"
            _unlink_at_exit.add(seg)
            while True:
                try:
                    self.g = _C._ShmGroup(seg, True, size, rank, slot, mbox)
                    break
                except RuntimeError as e:
                    smaller = max(4096 * size, _MIN_SLOT, slot // 2 // 64 * 64)
                    if "cannot reserve" not in str(e) or smaller >= slot:
                        raise
                    logger.warning("ember.distributed: %s; retrying with %d KiB slots", e,
                                   smaller >> 10)
                    slot, mbox = smaller, min(mbox, smaller)
            store.set("shm_segment", f"{seg} {slot} {mbox}")
        else:
            seg, s_slot, s_mbox = store.get("shm_segment").decode().split()
            slot, mbox = int(s_slot), int(s_mbox)
            try:
                self.g = _C._ShmGroup(seg, False, size, rank, slot, mbox)
            except RuntimeError as e:
                raise DistBackendError(
                    f"shm backend (group {label}, rank {rank}): {e}. The shm backend needs every "
                    "rank on the machine of rank 0; across machines use backend 'mpi' (or "
                    "'gloo', which picks it)") from e
        try:
            self._wait(self.g.barrier(self.timeout), "init_process_group")
        finally:
            # Every rank has mapped it (or the group failed, maybe by rank 0's death): drop the
            # name, whichever rank comes first, so /dev/shm keeps nothing of the group.
            self.g.unlink()
            _unlink_at_exit.discard(seg)
        self.slot = slot
        self.g.set_wait_policy(int(os.environ.get("EMBER_SHM_SPIN_US", "50")),
                               int(os.environ.get("EMBER_SHM_YIELD_US", "1000")))

    # ---- bookkeeping ---------------------------------------------------------------------
    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def _fail(self, op: str, message: str) -> None:
        self._broken = message
        self.g.abort(message)
        raise DistBackendError(message)

    def _wait(self, status: int, op: str) -> None:
        """Turns a C++ status into an exception naming the ranks at fault and the collective."""
        if status == _OK:
            return
        where = f"{op} (collective #{self._seq} of group {self.label}) on rank {self._rank}"
        if status == _MISMATCH:  # (every rank finds it at the same barrier: none waits on)
            calls = "; ".join(f"rank {r} called {sig or 'nothing yet'}"
                              for r, sig in self.g.mismatch())
            self._fail(op, f"{where} failed: the ranks called different collectives or "
                           f"disagree on its sizes, dtypes, op or root: {calls}. Every rank "
                           "must make the same collective calls in the same order")
        if status == _ABORTED:
            reason = self.g.abort_reason()
            r, why = reason if reason else (-1, "unknown")
            self._broken = f"rank {r} aborted the group: {why}"
            raise DistBackendError(f"{where} failed: rank {r} aborted the group: {why}")
        missing = self.g.missing()
        dead = [r for r in self.g.dead() if r != self._rank]
        if status == _PEER_DEAD or dead:
            ranks = dead or missing
            detail = ", ".join(f"rank {r} (pid {self.g.pid(r)})" for r in ranks)
            self._fail(op, f"{where} failed: {detail} exited before reaching it")
        states = []
        for r in missing:
            seq, name = self.g.get_op(r)
            states.append(f"rank {r} is at collective #{seq} ({name or 'none'})")
        self._fail(op, f"{where} timed out after {self.timeout:g} s: rank(s) {missing} did not "
                       f"reach it ({'; '.join(states)})")

    def begin(self, op: str, desc: Callable[[], str]) -> None:
        """Marks the start of a collective; with EMBER_DISTRIBUTED_DEBUG=DETAIL checks that every
        rank calls the same collective on the same shapes and dtypes."""
        if self._broken:
            raise DistBackendError(f"{op}: the process group is unusable after an earlier "
                                   f"failure: {self._broken}")
        # A peer that gave up (a timeout) aborted the group: fail now, as a gloo rank whose
        # peer left does, rather than pass a barrier the peer had entered before giving up.
        reason = self.g.abort_reason()
        if reason:
            r, why = reason
            self._broken = f"rank {r} aborted the group: {why}"
            raise DistBackendError(f"{op} (collective #{self._seq + 1} of group {self.label}) "
                                   f"on rank {self._rank} failed: {self._broken}")
        self._seq += 1
        self.g.set_op(self._seq, op)
        if not self._debug:
            return
        mine = f"{op}({desc()})"
        self.g.set_desc(mine.encode()[:1000])
        self._wait(self.g.barrier(self.timeout), op)
        for r in range(self._size):
            other = self.g.get_desc(r).decode(errors="replace")
            if other != mine:
                msg = (f"EMBER_DISTRIBUTED_DEBUG=DETAIL: collective #{self._seq} of group "
                       f"{self.label} differs between ranks: rank {self._rank} called {mine} but "
                       f"rank {r} called {other}")
                self._broken = msg
                raise DistBackendError(msg)

    def close(self) -> None:
        self.g.unmap()

    def abort(self, why: str) -> None:
        self.g.abort(why)

    # ---- collectives (tensors are CPU tensors; ranks are group ranks) ---------------------
    def _xchg(self, op: str, puts: list, gets: list, reduces: list = ()) -> None:
        self._wait(self.g.exchange(puts, gets, list(reduces), self.timeout), op)

    def all_reduce(self, t: Any, op: ReduceOp, dst: int = -1, name: str = "all_reduce") -> None:
        self.g.set_sig(f"{name}({t.numel()}:{_dt(t)}, {getattr(op, 'name', op)}, {dst})")
        if t.is_contiguous():
            self._wait(self.g.all_reduce(t.data_ptr(), t.numel(), dtype_code(t.dtype), int(op),
                                         dst, self.timeout), name)
            return
        with src_buffer(t, writeback=True) as buf:
            self._wait(self.g.all_reduce(buf.data_ptr(), buf.numel(), dtype_code(buf.dtype),
                                         int(op), dst, self.timeout), name)

    def broadcast(self, t: Any, src: int) -> None:
        self.g.set_sig(f"broadcast({t.numel() * t.element_size()} bytes, src={src})")
        with src_buffer(t, writeback=self._rank != src) as buf:
            ptr, nbytes = buf.data_ptr(), buf.numel() * buf.element_size()
            for off in range(0, max(nbytes, 1), self.slot):
                n = min(self.slot, nbytes - off)
                if self._rank == src:
                    self._xchg("broadcast", [(0, ptr + off, n)], [])
                else:
                    self._xchg("broadcast", [], [(src, 0, ptr + off, n)])

    def gather_like(self, name: str, inp: Any, outs: list | None, root: int | None = None) -> None:
        """all_gather (outs on every rank) and gather (outs only on the destination)."""
        with src_buffer(inp) as src:
            nbytes = src.numel() * src.element_size()
            self.g.set_sig(f"{name}({nbytes} bytes, root={root})")
            bufs = [out_buffer(o) for o in outs] if outs is not None else None
            try:
                for off in range(0, max(nbytes, 1), self.slot):
                    n = min(self.slot, nbytes - off)
                    gets = []
                    if bufs is not None:
                        gets = [(j, 0, b.tensor.data_ptr() + off, n) for j, b in enumerate(bufs)]
                    self._xchg(name, [(0, src.data_ptr() + off, n)], gets)
            finally:
                if bufs is not None:
                    for b in bufs:
                        b.finish()

    def scatter(self, out: Any, ins: list | None, src: int) -> None:
        nbytes = out.numel() * out.element_size()
        self.g.set_sig(f"scatter({nbytes} bytes, src={src})")
        ob = out_buffer(out)
        step = (self.slot // self._size) // 64 * 64
        with _Sources(ins) as srcs:
            for off in range(0, max(nbytes, 1), step):
                n = min(step, nbytes - off)
                puts = []
                if srcs is not None:
                    puts = [(j * step, s.data_ptr() + off, n) for j, s in enumerate(srcs)]
                get = (src, self._rank * step, ob.tensor.data_ptr() + off, n)
                self._xchg("scatter", puts, [get])
        ob.finish()

    def all_to_all(self, name: str, outs: list, ins: list) -> None:
        """outs[j] receives ins[j] of rank j; pieces may differ in size between pairs."""
        out_bufs = [out_buffer(o) for o in outs]
        with _Sources(ins) as srcs:
            n = self._size
            in_n = [s.numel() * s.element_size() for s in srcs]
            out_n = [o.numel() * o.element_size() for o in outs]
            # Every rank learns every rank's piece sizes, so that all agree on the number of
            # steps and all find (and refuse, together) a piece whose receiver expects another
            # size: unchecked, a short output silently got a cut piece and a long one kept
            # stale values past it.
            mine = ember.tensor(in_n + out_n, dtype=ember.int64)
            table = ember.zeros((n, 2 * n), dtype=ember.int64)
            self._xchg(name, [(0, mine.data_ptr(), 16 * n)],
                       [(j, 0, table.data_ptr() + 16 * n * j, 16 * n) for j in range(n)])
            rows = table.tolist()
            for r in range(n):
                for j in range(n):
                    sent, expected = rows[j][r], rows[r][n + j]
                    if sent != expected:
                        table_note = (f"; every rank: in bytes {[row[:n] for row in rows]}, "
                                      f"out bytes {[row[n:] for row in rows]}" if n <= 8 else "")
                        raise CollectiveArgError(
                            f"{name}: rank {r} of group {self.label} expects {expected} bytes "
                            f"from rank {j}, which sends it {sent} bytes (input and output "
                            f"pieces must have the same size{table_note})")
            total = max(max(row[:n]) for row in rows) if n else 0
            step = (self.slot // self._size) // 64 * 64
            for off in range(0, max(total, 1), step):
                puts = [(j * step, srcs[j].data_ptr() + off, min(step, in_n[j] - off))
                        for j in range(self._size) if in_n[j] > off]
                gets = [(j, self._rank * step, out_bufs[j].tensor.data_ptr() + off,
                         min(step, out_n[j] - off)) for j in range(self._size) if out_n[j] > off]
                self._xchg(name, puts, gets)
        for b in out_bufs:
            b.finish()

    def reduce_scatter(self, name: str, out: Any, ins: list, op: ReduceOp) -> None:
        check_op_dtype(name, op, out.dtype)
        self.g.set_sig(f"{name}({out.numel()}:{_dt(out)}, {getattr(op, 'name', op)})")
        ob = out_buffer(out)
        isz = out.element_size()
        numel = out.numel()
        step = (self.slot // self._size) // 64 * 64 // isz
        code = dtype_code(out.dtype)
        with _Sources(ins) as srcs:
            for start in range(0, max(numel, 1), step):
                n = min(step, numel - start)
                puts = [(j * step * isz, s.data_ptr() + start * isz, n * isz)
                        for j, s in enumerate(srcs)]
                dst = ob.tensor.data_ptr() + start * isz
                red = [(dst, self._rank * step * isz, n, code, int(op))]
                self._xchg(name, puts, [], red)
        ob.finish()

    def barrier(self, timeout: float | None = None) -> None:
        """timeout: seconds for this barrier (None: the group's)."""
        self._wait(self.g.barrier(self.timeout if timeout is None else timeout), "barrier")

    # ---- point to point (called on per-peer executors) ------------------------------------
    def send(self, t: Any, dst: int, tag: int) -> None:
        with src_buffer(t) as buf:
            status, _, _ = self.g.send(dst, buf.data_ptr(), buf.numel() * buf.element_size(),
                                       tag, self.timeout)
        self._p2p_status(status, "send", dst, t, tag, 0, 0)

    def recv(self, t: Any, src: int, tag: int) -> None:
        """Receives the next message from src with this tag. Messages from src that carry
        other tags and arrive first are set aside for the receives that ask for them (as gloo
        matches by source and tag, not by arrival order)."""
        deadline = time.monotonic() + self.timeout
        with self._src_lock(src):
            while True:
                if self._from_stash(t, src, tag):
                    return
                ob = out_buffer(t)
                nbytes = t.numel() * t.element_size()
                left = max(0.0, deadline - time.monotonic())
                status, got_n, got_tag = self.g.recv(src, ob.tensor.data_ptr(), nbytes, tag,
                                                     left)
                if status == _MISMATCH and got_tag != tag:
                    self._set_aside(src, got_n, got_tag, deadline)
                    continue
                self._p2p_status(status, "recv", src, t, tag, got_n, got_tag)
                ob.finish()
                return

    def recv_any(self, t: Any, tag: int) -> int:
        """Receives the first message with this tag from any peer; returns the peer's rank."""
        deadline = time.monotonic() + self.timeout
        delay = 0.0
        while True:
            for src in range(self._size):
                if src == self._rank:
                    continue
                if self._from_stash(t, src, tag):
                    return src
                lock = self._src_lock(src)
                if not lock.acquire(blocking=False):
                    continue  # a recv from src is reading its mailbox; look again later
                try:
                    waiting, got_n, got_tag = self.g.peek(src)
                    if waiting and got_tag == tag:
                        self.recv(t, src, tag)
                        return src
                    if waiting:
                        self._set_aside(src, got_n, got_tag, deadline)
                finally:
                    lock.release()
            if time.monotonic() > deadline:
                raise DistBackendError(
                    f"recv on rank {self._rank} (any source, tag {tag}, group {self.label}) "
                    f"timed out after {self.timeout:g} s")
            time.sleep(delay)
            delay = min(0.001, delay + 0.00005)

    def _src_lock(self, src: int) -> threading.RLock:
        with self._stash_lock:
            return self._src_locks.setdefault(src, threading.RLock())

    def _set_aside(self, src: int, nbytes: int, tag: int, deadline: float) -> None:
        """Takes the waiting message (src, tag) of nbytes out of the mailbox into the stash."""
        buf = np.empty(nbytes, dtype=np.uint8)
        left = max(0.0, deadline - time.monotonic())
        status, got_n, got_tag = self.g.recv(src, buf.ctypes.data, nbytes, tag, left)
        if status != _OK:
            raise DistBackendError(
                f"recv on rank {self._rank} (peer rank {src}, group {self.label}): setting aside "
                f"a message with tag {tag} failed (status {status}, {got_n} bytes, tag {got_tag})")
        with self._stash_lock:
            self._stash.setdefault((src, tag), collections.deque()).append(buf)

    def _from_stash(self, t: Any, src: int, tag: int) -> bool:
        """Fills t from a message (src, tag) set aside earlier, if there is one."""
        with self._stash_lock:
            queue = self._stash.get((src, tag))
            if not queue:
                return False
            buf = queue[0]
            nbytes = t.numel() * t.element_size()
            if buf.size != nbytes:
                self._p2p_status(_MISMATCH, "recv", src, t, tag, buf.size, tag)
            queue.popleft()
        ob = out_buffer(t)
        if nbytes:
            ctypes.memmove(ob.tensor.data_ptr(), buf.ctypes.data, nbytes)
        ob.finish()
        return True

    def _p2p_status(self, status: int, op: str, peer: int, t: Any, tag: int, got_n: int,
                    got_tag: int) -> None:
        if status == _OK:
            return
        where = f"{op} on rank {self._rank} (peer rank {peer}, tag {tag}, group {self.label})"
        if status == _MISMATCH:
            raise DistBackendError(
                f"{where}: expected a message of {t.numel() * t.element_size()} bytes with tag "
                f"{tag}, but the next message from rank {peer} has {got_n} bytes and tag "
                f"{got_tag} (send and recv must match in order, size and tag)")
        if status == _PEER_DEAD:
            raise DistBackendError(f"{where} failed: rank {peer} (pid {self.g.pid(peer)}) exited")
        if status == _ABORTED:
            r, why = self.g.abort_reason() or (-1, "unknown")
            raise DistBackendError(f"{where} failed: rank {r} aborted the group: {why}")
        raise DistBackendError(f"{where} timed out after {self.timeout:g} s")


def _dt(t: Any) -> str:
    return str(t.dtype).replace("ember.", "")


class _Sources:
    """Contiguous views (or copies) of a list of input tensors for the duration of a call."""

    def __init__(self, tensors: list | None) -> None:
        self.tensors = tensors

    def __enter__(self) -> list | None:
        if self.tensors is None:
            return None
        return [t if t.is_contiguous() else t.contiguous() for t in self.tensors]

    def __exit__(self, *exc: Any) -> None:
        return None
