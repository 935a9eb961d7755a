"""The local agent behind ``python -m ember.distributed.run``: starts one node's workers, watches
them, stops the group when one fails and reports which rank failed with its traceback.

Each worker runs through a small bootstrap (``python -m ember.distributed._launcher --worker
...``) that runs the user's script or module as ``__main__`` and, when it raises, writes the
exception and its traceback to the JSON file named by ``TORCHELASTIC_ERROR_FILE`` (also
``EMBER_ERROR_FILE``) before exiting with code 1; the agent reads those files to report the
failure. ``--no-python`` entry points run without the bootstrap (the exit code is all we get).

>>> from ember.distributed._launcher import LaunchConfig, worker_env
>>> cfg = LaunchConfig(nproc_per_node=2, nnodes=2, node_rank=1)
>>> env = worker_env(cfg, local_rank=1, restart_count=0, error_file="/tmp/e.json")
>>> env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["GROUP_RANK"]
('3', '4', '1', '1')
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LaunchConfig", "WorkerFailure", "launch", "parse_std_spec", "worker_env"]

_LOG_PREFIX = "[emberrun]"


@dataclass
class LaunchConfig:
    """What one node's agent starts: ``nproc_per_node`` workers of a ``nnodes``-node job."""

    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    max_restarts: int = 0
    monitor_interval: float = 0.1
    # Seconds between SIGTERM and SIGKILL when the group is stopped.
    stop_timeout: float = 10.0
    run_id: str = "none"
    # Run the entry point as an executable (``--no-python``) instead of through Python.
    no_python: bool = False
    # Run the entry point as ``python -m <module>``.
    module: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    # Output of the workers, per local rank (-1: every rank) (torchrun's -r/--redirects and
    # -t/--tee): 0 as is,
    # 1 stdout, 2 stderr, 3 both. Redirected streams go to files under ``log_dir`` only, teed
    # ones to the files and to the console, each line prefixed with ``[<role><rank>]:``.
    redirects: dict[int, int] = field(default_factory=dict)
    tee: dict[int, int] = field(default_factory=dict)
    log_dir: str | None = None
    # Local ranks whose output reaches the console (None: all).
    local_ranks_filter: set[int] | None = None
    # The workers' role (torchrun's --role): ROLE_NAME, and the prefix of teed lines.
    role: str = "default"

    def __post_init__(self) -> None:
        if self.nproc_per_node < 1:
            raise ValueError(f"nproc_per_node must be >= 1, got {self.nproc_per_node}")
        if self.nnodes < 1:
            raise ValueError(f"nnodes must be >= 1, got {self.nnodes}")
        if not 0 <= self.node_rank < self.nnodes:
            raise ValueError(
                f"node_rank must be in [0, {self.nnodes - 1}] for nnodes={self.nnodes}, "
                f"got {self.node_rank}"
            )
        if not 0 < self.master_port < 65536:
            raise ValueError(f"master_port must be in [1, 65535], got {self.master_port}")
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if self.no_python and self.module:
            raise ValueError("--no-python and -m/--module cannot be used together")
        for name, spec in (("redirects", self.redirects), ("tee", self.tee)):
            for rank, std in spec.items():
                if std not in (0, 1, 2, 3):
                    who = "every local rank" if rank == -1 else f"local rank {rank}"
                    raise ValueError(
                        f"--{name}: {std} for {who} is not one of 0 "
                        "(none), 1 (stdout), 2 (stderr), 3 (both)"
                    )

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node


@dataclass
class WorkerFailure:
    """One failed worker: its ranks, exit code (negative: killed by that signal) and the error it
    wrote (message and traceback), when it wrote one."""

    rank: int
    local_rank: int
    pid: int
    exitcode: int
    message: str = ""
    traceback: str = ""
    timestamp: float = field(default_factory=time.time)

    def describe(self) -> str:
        if self.exitcode < 0:
            try:
                how = f"was killed by signal {signal.Signals(-self.exitcode).name}"
            except ValueError:
                how = f"was killed by signal {-self.exitcode}"
        else:
            how = f"exited with code {self.exitcode}"
        lines = [f"rank {self.rank} (local_rank {self.local_rank}, pid {self.pid}) {how}"]
        if self.traceback:
            lines.append(self.traceback.rstrip("\n"))
        elif self.message:
            lines.append(self.message)
        else:
            lines.append(
                "(no error file: the worker did not raise a Python exception; see its output)"
            )
        return "\n".join(lines)

    @property
    def launcher_exit_code(self) -> int:
        """The code the launcher exits with: the worker's own, or 128 + signal like a shell."""
        return self.exitcode if self.exitcode > 0 else 128 - self.exitcode


def worker_env(
    cfg: LaunchConfig, local_rank: int, restart_count: int, error_file: str
) -> dict[str, str]:
    """The environment of local worker ``local_rank`` (torchrun's variable names)."""
    env = dict(os.environ)
    env.update(cfg.extra_env)
    rank = cfg.node_rank * cfg.nproc_per_node + local_rank
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(cfg.world_size),
        LOCAL_WORLD_SIZE=str(cfg.nproc_per_node),
        GROUP_RANK=str(cfg.node_rank),
        GROUP_WORLD_SIZE=str(cfg.nnodes),
        ROLE_NAME=cfg.role,
        ROLE_RANK=str(rank),
        ROLE_WORLD_SIZE=str(cfg.world_size),
        MASTER_ADDR=cfg.master_addr,
        MASTER_PORT=str(cfg.master_port),
        TORCHELASTIC_RESTART_COUNT=str(restart_count),
        TORCHELASTIC_MAX_RESTARTS=str(cfg.max_restarts),
        TORCHELASTIC_RUN_ID=cfg.run_id,
        TORCHELASTIC_ERROR_FILE=error_file,
        EMBER_ERROR_FILE=error_file,
    )
    # Several workers on one machine each running a full thread pool oversubscribe its cores.
    if (
        cfg.nproc_per_node > 1
        and "OMP_NUM_THREADS" not in os.environ
        and "OMP_NUM_THREADS" not in cfg.extra_env
    ):
        env["OMP_NUM_THREADS"] = "1"
    return env


def _worker_command(cfg: LaunchConfig, entrypoint: str, args: list[str]) -> list[str]:
    if cfg.no_python:
        return [entrypoint, *args]
    mode = ["-m"] if cfg.module else []
    return [
        sys.executable,
        "-u",
        "-m",
        "ember.distributed._launcher",
        "--worker",
        *mode,
        entrypoint,
        *args,
    ]


def _read_error_file(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    # torch's @record writes {"message": {"message": ..., "extraInfo": {"py_callstack": ...}}}.
    msg = data.get("message")
    if isinstance(msg, dict):
        extra = msg.get("extraInfo", {}) or {}
        return {
            "message": str(msg.get("message", "")),
            "traceback": str(extra.get("py_callstack", "")),
            "timestamp": float(extra.get("timestamp", 0) or 0),
        }
    return {
        "message": str(msg or ""),
        "traceback": str(data.get("traceback", "")),
        "timestamp": float(data.get("timestamp", 0) or 0),
    }


def parse_std_spec(value: str, name: str = "redirects") -> dict[int, int] | int:
    """torchrun's stream spec: ``3`` (every rank) or ``0:1,1:2`` (per local rank)."""
    value = value.strip()
    try:
        if ":" not in value:
            return int(value)
        out = {}
        for part in value.split(","):
            rank, std = part.split(":")
            out[int(rank)] = int(std)
        return out
    except ValueError:
        raise ValueError(
            f"--{name} must be 0-3 or a list like 0:1,1:3 (local rank: streams), got {value!r}"
        ) from None


def _pump(src: Any, log: Any, console: Any, prefix: bytes) -> None:
    """Copies a worker's stream line by line to its log file and/or the console."""
    with src:
        for line in iter(src.readline, b""):
            if log is not None:
                log.write(line)
                log.flush()
            if console is not None:
                console.write(prefix + line)
                console.flush()
    if log is not None:
        log.close()


class _LocalGroup:
    """The node's workers of one attempt."""

    def __init__(
        self,
        cfg: LaunchConfig,
        entrypoint: str,
        args: list[str],
        error_dir: str,
        attempt: int,
        log_dir: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.procs: list[subprocess.Popen] = []
        self.error_files: list[str] = []
        self.pumps: list[threading.Thread] = []
        cmd = _worker_command(cfg, entrypoint, args)
        for local_rank in range(cfg.nproc_per_node):
            err = os.path.join(error_dir, f"attempt_{attempt}_rank_{local_rank}.json")
            self.error_files.append(err)
            env = worker_env(cfg, local_rank, attempt, err)
            streams = self._streams(local_rank, attempt, log_dir)
            try:
                # Own session: stopping the group also reaches processes a worker started.
                p = subprocess.Popen(
                    cmd,
                    env=env,
                    start_new_session=True,
                    stdout=subprocess.PIPE if streams[0] else None,
                    stderr=subprocess.PIPE if streams[1] else None,
                )
            except OSError as e:
                self.stop()
                raise RuntimeError(f"cannot start worker {local_rank}: {' '.join(cmd)}: {e}") from e
            self.procs.append(p)
            rank = cfg.node_rank * cfg.nproc_per_node + local_rank
            for pipe, spec in ((p.stdout, streams[0]), (p.stderr, streams[1])):
                if spec:
                    t = threading.Thread(
                        target=_pump,
                        args=(pipe, *spec, f"[{cfg.role}{rank}]:".encode()),
                        daemon=True,
                    )
                    t.start()
                    self.pumps.append(t)

    def _streams(self, local_rank: int, attempt: int, log_dir: str | None) -> list[Any]:
        """Per stream (stdout, stderr): None (inherit) or (log file or None, console or None)."""
        cfg = self.cfg
        redirect = cfg.redirects.get(local_rank, cfg.redirects.get(-1, 0))
        tee = cfg.tee.get(local_rank, cfg.tee.get(-1, 0))
        hidden = cfg.local_ranks_filter is not None and local_rank not in cfg.local_ranks_filter
        out: list[Any] = []
        for bit, name, console in ((1, "stdout", sys.stdout), (2, "stderr", sys.stderr)):
            to_file = bool((redirect | tee) & bit) and log_dir is not None
            to_console = not (redirect & bit) and not hidden
            if not to_file and not hidden and not (tee & bit):
                out.append(None)
                continue
            log = None
            if to_file:
                d = os.path.join(log_dir, f"attempt_{attempt}", str(local_rank))
                os.makedirs(d, exist_ok=True)
                log = open(os.path.join(d, f"{name}.log"), "wb")  # noqa: SIM115 - the pump closes it
            out.append((log, getattr(console, "buffer", None) if to_console else None))
        return out

    def poll(self) -> tuple[bool, list[WorkerFailure]]:
        """(all finished successfully, failures seen so far)."""
        failures, done = [], True
        for local_rank, p in enumerate(self.procs):
            code = p.poll()
            if code is None:
                done = False
            elif code != 0:
                failures.append(self._failure(local_rank, code))
        return done and not failures, failures

    def _failure(self, local_rank: int, code: int) -> WorkerFailure:
        rank = self.cfg.node_rank * self.cfg.nproc_per_node + local_rank
        f = WorkerFailure(
            rank=rank, local_rank=local_rank, pid=self.procs[local_rank].pid, exitcode=code
        )
        info = _read_error_file(self.error_files[local_rank])
        if info:
            f.message, f.traceback = info["message"], info["traceback"]
            if info["timestamp"]:
                f.timestamp = info["timestamp"]
        return f

    def _signal_all(self, sig: int) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stops every worker still running: ``sig``, then SIGKILL after ``stop_timeout``."""
        self._signal_all(sig)
        deadline = time.monotonic() + self.cfg.stop_timeout
        for p in self.procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self._signal_all(signal.SIGKILL)
        for p in self.procs:
            p.wait()
        for t in self.pumps:
            t.join(timeout=5)
        # A worker's own children (same session) may outlive it: reap the whole session.
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _log(msg: str) -> None:
    print(f"{_LOG_PREFIX} {msg}", file=sys.stderr, flush=True)


def launch(cfg: LaunchConfig, entrypoint: str, args: list[str],
           raise_on_failure: bool = False) -> int:
    """Runs the node's workers until they all succeed (returns 0) or one fails after the last
    allowed restart (returns the failed worker's exit code, 128 + signal for a signal; with
    raise_on_failure, raises ChildFailedError naming every failed rank instead, as torchrun
    does)."""
    error_dir = tempfile.mkdtemp(prefix="emberrun_")
    log_dir = None
    if cfg.redirects or cfg.tee:
        base = cfg.log_dir or tempfile.mkdtemp(prefix="emberrun_logs_")
        os.makedirs(base, exist_ok=True)
        log_dir = tempfile.mkdtemp(prefix=f"{cfg.run_id}_", dir=base)
        _log(f"worker logs in {log_dir}")
    group: _LocalGroup | None = None
    interrupted: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        interrupted.append(signum)

    # Signals reach the launcher only in the main thread (launch() may run in another one).
    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    in_main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in handled} if in_main else {}
    try:
        attempt = 0
        while True:
            group = _LocalGroup(cfg, entrypoint, args, error_dir, attempt, log_dir)
            failures: list[WorkerFailure] = []
            while not interrupted:
                ok, failures = group.poll()
                if ok:
                    return 0
                if failures:
                    break
                time.sleep(cfg.monitor_interval)
            if interrupted:
                sig = interrupted[0]
                _log(
                    f"received {signal.Signals(sig).name}: stopping {cfg.nproc_per_node} worker(s)"
                )
                group.stop(sig)
                return 128 + sig
            group.stop()
            # Workers that failed while the group was stopping count only if they failed first.
            first = min(failures, key=lambda f: (f.timestamp, f.rank))
            if attempt < cfg.max_restarts:
                attempt += 1
                _log(
                    f"worker failure; restarting the local group "
                    f"(restart {attempt} of {cfg.max_restarts}):\n{first.describe()}"
                )
                continue
            if raise_on_failure:
                from .elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

                raise ChildFailedError(entrypoint, {
                    f.rank: ProcessFailure(local_rank=f.local_rank, pid=f.pid,
                                           exitcode=f.exitcode, error_file="",
                                           message=f.message, traceback=f.traceback,
                                           timestamp=f.timestamp)
                    for f in sorted(failures, key=lambda f: f.rank)})
            bar = "=" * 72
            others = sorted({f.rank for f in failures} - {first.rank})
            also = f" (also failed: ranks {others})" if others else ""
            _log(
                f"worker failure\n{bar}\n{entrypoint} FAILED on node {cfg.node_rank}{also}\n{bar}\n"
                f"{first.describe()}\n{bar}"
            )
            return first.launcher_exit_code
    finally:
        if group is not None:
            group.stop(signal.SIGKILL)
        for s, h in previous.items():
            signal.signal(s, h)
        shutil.rmtree(error_dir, ignore_errors=True)


# ---- the worker side -------------------------------------------------------------------------


def _user_traceback(exc: BaseException):  # noqa: ANN202 - a traceback object or None
    """The exception's traceback without the bootstrap's and runpy's frames."""
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if os.path.abspath(name) != os.path.abspath(__file__) and "runpy" not in name:
            break
        tb = tb.tb_next
    return tb or exc.__traceback__


def _write_error_file(exc: BaseException) -> None:
    path = os.environ.get("EMBER_ERROR_FILE") or os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or os.path.exists(path):  # the first error wins (torch's @record may have written)
        return
    data = {
        "message": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(type(exc), exc, _user_traceback(exc))),
        "timestamp": time.time(),
        "rank": os.environ.get("RANK"),
    }
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _run_worker(argv: list[str]) -> int:
    """Runs ``[-m] target args...`` as ``__main__``; an uncaught exception is written to the
    error file, printed, and ends the worker with code 1."""
    import runpy

    module = bool(argv) and argv[0] == "-m"
    if module:
        argv = argv[1:]
    if not argv:
        print(
            "ember.distributed._launcher --worker: missing the script or module to run",
            file=sys.stderr,
        )
        return 2
    target, rest = argv[0], argv[1:]
    try:
        if module:
            sys.argv = [target, *rest]  # runpy puts the module's path in argv[0]
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *rest]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException as e:  # noqa: BLE001 - everything a worker raises is reported
        _write_error_file(e)
        traceback.print_exception(type(e), e, _user_traceback(e))
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "--worker":
        print(
            "usage: python -m ember.distributed.run ... (this module is the launcher's worker bootstrap)",
            file=sys.stderr,
        )
        sys.exit(2)
    sys.stdout.flush()
    code = _run_worker(sys.argv[2:])
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
