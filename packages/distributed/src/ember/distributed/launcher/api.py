"""``elastic_launch``: torchrun from Python (torch.distributed.launcher.api).

``elastic_launch(config, entrypoint)(*args)`` starts ``config.nproc_per_node`` workers on this
machine with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...), so that
``init_process_group()`` (env://) finds its peers, and returns ``{global rank: return value}``.
The entry point is a function (run as ``entrypoint(*args)`` in each worker, started with the
"spawn" method: it must be importable, e.g. defined at a module's top level) or a command
(``entrypoint`` an executable and ``args`` its arguments; every return value is None). When a
worker fails the others are stopped and the group restarts, up to ``max_restarts`` times; after
the last, ``ChildFailedError`` names each failed rank with its exit code and error.

Only one node is supported (``min_nodes == max_nodes == 1``); ``rdzv_endpoint`` ("host:port",
port 0 or none: a free one) is where the workers meet.

Example::

    >>> def train(lr):  # doctest: +SKIP
    ...     dist.init_process_group("gloo"); ...; return dist.get_rank()
    >>> config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2)  # doctest: +SKIP
    >>> elastic_launch(config, train)(0.1)  # doctest: +SKIP
    {0: 0, 1: 1}
"""

from __future__ import annotations

import multiprocessing as _mp
import os
import socket
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from .._launcher import LaunchConfig as _NodeConfig
from .._launcher import launch as _launch_command
from .._launcher import worker_env
from ..elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]


@dataclass
class LaunchConfig:
    """torch's launch configuration; the fields a single-node launch uses are
    ``nproc_per_node``, ``run_id``, ``role``, ``rdzv_endpoint``, ``max_restarts`` and
    ``monitor_interval`` (the others are accepted for torch's signature)."""

    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    logs_specs: Any = None
    run_id: str = ""
    role: str = "default_role"
    rdzv_endpoint: str = ""
    rdzv_backend: str = "etcd"
    rdzv_configs: dict[str, Any] = field(default_factory=dict)
    rdzv_timeout: int = -1
    max_restarts: int = 3
    monitor_interval: float = 0.1
    start_method: str = "spawn"
    log_line_prefix_template: str | None = None
    metrics_cfg: dict[str, str] = field(default_factory=dict)
    local_addr: str | None = None
    event_log_handler: str = "null"
    numa_options: Any = None
    signals_to_handle: str = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"
    duplicate_stdout_filters: list[str] | None = None
    duplicate_stderr_filters: list[str] | None = None
    virtual_local_rank: bool = False
    shutdown_timeout: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ValueError(f"LaunchConfig: need 1 <= min_nodes <= max_nodes, got "
                             f"min_nodes={self.min_nodes}, max_nodes={self.max_nodes}")
        if self.nproc_per_node < 1:
            raise ValueError(f"LaunchConfig: nproc_per_node must be >= 1, got "
                             f"{self.nproc_per_node}")
        if self.max_restarts < 0:
            raise ValueError(f"LaunchConfig: max_restarts must be >= 0, got {self.max_restarts}")


class elastic_launch:  # noqa: N801  (torch's name)
    """``elastic_launch(config, entrypoint)(*args)``: runs the entry point on the node's
    workers and returns ``{global rank: return value}`` (see the module doc)."""

    def __init__(self, config: LaunchConfig, entrypoint: Callable | str | None,
                 health_check_server: Any = None) -> None:
        self._config = config
        self._entrypoint = entrypoint

    def __call__(self, *args: Any) -> dict[int, Any]:
        return launch_agent(self._config, self._entrypoint, list(args))


def _endpoint(config: LaunchConfig) -> tuple[str, int]:
    host, _, port = (config.rdzv_endpoint or "127.0.0.1:0").rpartition(":")
    if not host:  # "host" alone
        host, port = port, "0"
    host = "127.0.0.1" if host in ("", "localhost") else host
    try:
        number = int(port or 0)
    except ValueError:
        raise ValueError(f"LaunchConfig: rdzv_endpoint must be host[:port], got "
                         f"{config.rdzv_endpoint!r}") from None
    if number == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            number = s.getsockname()[1]
    return host, number


def _node_config(config: LaunchConfig) -> _NodeConfig:
    if config.max_nodes != 1:
        raise NotImplementedError(f"elastic_launch: only one node is supported, got "
                                  f"max_nodes={config.max_nodes}; start each node with "
                                  "python -m ember.distributed.run --nnodes ...")
    host, port = _endpoint(config)
    return _NodeConfig(nproc_per_node=config.nproc_per_node, master_addr=host,
                       master_port=port, max_restarts=config.max_restarts,
                       monitor_interval=config.monitor_interval,
                       run_id=config.run_id or uuid.uuid4().hex[:8], role=config.role)


def _run_worker(fn: Callable, args: list, env: dict[str, str], conn: Any) -> None:
    """A worker process: torchrun's environment, then fn(*args); its result (or its error)
    goes back on conn."""
    os.environ.update(env)
    try:
        result = fn(*args)
    except BaseException as e:  # noqa: BLE001  (reported to the agent, then exit 1)
        conn.send(("err", f"{type(e).__name__}: {e}", traceback.format_exc(), time.time()))
        conn.close()
        sys.exit(1)
    conn.send(("ok", result))
    conn.close()


def _launch_function(config: LaunchConfig, fn: Callable, args: list) -> dict[int, Any]:
    ctx = _mp.get_context(config.start_method or "spawn")
    attempt = 0
    while True:
        node = _node_config(config)  # a fresh port for each attempt
        procs, conns = [], []
        for local_rank in range(node.nproc_per_node):
            env = {k: v for k, v in worker_env(node, local_rank, attempt, "").items()
                   if k not in ("TORCHELASTIC_ERROR_FILE", "EMBER_ERROR_FILE")}
            env = {k: v for k, v in env.items() if os.environ.get(k) != v}
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_run_worker, args=(fn, args, env, child), daemon=False)
            p.start()
            child.close()
            procs.append(p)
            conns.append(parent)
        results: dict[int, Any] = {}
        errors: dict[int, tuple[str, str, float]] = {}
        failed: list[int] = []
        while len(results) < len(procs) and not failed:
            for rank, (p, c) in enumerate(zip(procs, conns)):
                if rank in results:
                    continue
                if c.poll():
                    try:
                        msg = c.recv()
                    except EOFError:
                        msg = None
                    if msg and msg[0] == "ok":
                        results[rank] = msg[1]
                        continue
                    if msg:
                        errors[rank] = (msg[1], msg[2], msg[3])
                    p.join(10)
                    failed.append(rank)
                elif p.exitcode is not None and p.exitcode != 0:
                    failed.append(rank)
            if not failed:
                time.sleep(config.monitor_interval)
        for p in procs:
            if failed and p.is_alive():
                p.terminate()
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
        for c in conns:
            c.close()
        if not failed:
            return dict(sorted(results.items()))
        if attempt < config.max_restarts:
            attempt += 1
            continue
        failures = {}
        for rank in failed:
            message, tb, when = errors.get(rank, ("", "", time.time()))
            failures[rank] = ProcessFailure(local_rank=rank, pid=procs[rank].pid or -1,
                                            exitcode=procs[rank].exitcode or 1, error_file="",
                                            message=message, traceback=tb, timestamp=when)
        raise ChildFailedError(getattr(fn, "__qualname__", repr(fn)), failures)


def launch_agent(config: LaunchConfig, entrypoint: Callable | str | None, args: list[Any],
                 health_check_server: Any = None) -> dict[int, Any]:
    """Runs entrypoint on the node's workers (see the module doc); ``{global rank: return
    value}``, or ChildFailedError after the last restart."""
    if entrypoint is None:
        raise ValueError("elastic_launch: entrypoint must be a function or a command, got None")
    if callable(entrypoint):
        return _launch_function(config, entrypoint, list(args))
    if not isinstance(entrypoint, str):
        raise TypeError(f"elastic_launch: entrypoint must be a function or a command string, "
                        f"got {type(entrypoint).__name__}")
    node = _node_config(config)
    node.no_python = True
    node.role = config.role
    _launch_command(node, entrypoint, [str(a) for a in args], raise_on_failure=True)
    return dict.fromkeys(range(node.nproc_per_node))
