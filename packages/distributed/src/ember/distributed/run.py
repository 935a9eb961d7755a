"""``python -m ember.distributed.run`` (alias ``emberrun``): torchrun's launcher for ember.

Starts ``--nproc-per-node`` workers on this node, each with torchrun's environment (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, ...), so that
``ember.distributed.init_process_group(backend)`` (``env://``) finds its peers. When a worker
fails the others are stopped and, as torchrun, the launcher raises ``ChildFailedError`` whose
report names each failed rank with its exit code and traceback (exit code 1);
``--max-restarts N`` restarts the node's group up to N times.

One machine::

    python -m ember.distributed.run --nproc-per-node 2 train.py --epochs 3
    emberrun --standalone --nproc-per-node auto -m mypkg.train

Worker output: ``--tee 3`` copies every worker's stdout and stderr to log files under
``--log-dir`` and to the console with a ``[default<rank>]:`` prefix; ``--redirects 3`` (or per
local rank, ``0:3``) sends them to the files only; ``--local-ranks-filter 0`` shows only local
rank 0 on the console.

Two machines (run on each, with its own ``--node-rank``; ranks are node_rank * nproc + local)::

    emberrun --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 \\
        --nproc-per-node 4 train.py

>>> from ember.distributed.run import parse_args
>>> a = parse_args(["--nproc-per-node", "2", "train.py", "--lr", "0.1"])
>>> a.nproc_per_node, a.training_script, a.training_script_args
('2', 'train.py', ['--lr', '0.1'])
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import uuid
from argparse import REMAINDER, ArgumentParser

from ember.distributed._launcher import LaunchConfig, launch, parse_std_spec

__all__ = ["get_args_parser", "parse_args", "config_from_args", "run", "main"]


def get_args_parser() -> ArgumentParser:
    """The argument parser with torchrun's flags (each also with underscores: ``--nproc_per_node``)."""
    p = ArgumentParser(
        prog="emberrun",
        description="Start the workers of a distributed ember job on this node (torchrun's flags).",
    )

    def flag(name: str, **kw: object) -> None:
        names = [f"--{name}"]
        if "-" in name:
            names.append(f"--{name.replace('-', '_')}")
        p.add_argument(*names, **kw)

    flag("nnodes", default="1:1", help="number of nodes: N, or MIN:MAX with MIN == MAX (default 1)")
    flag(
        "nproc-per-node",
        default="1",
        help="workers per node: an integer, 'cpu' (one per core), 'gpu' (one per CUDA device) "
        "or 'auto' (gpu when CUDA is available, else cpu)",
    )
    flag("node-rank", type=int, default=0, help="rank of this node, in [0, nnodes) (default 0)")
    flag(
        "master-addr",
        default=None,
        help="address of the node that runs rank 0 (reachable from every node; default the "
        "--rdzv-endpoint host, else 127.0.0.1)",
    )
    flag("master-port", type=int, default=None,
         help="free port on the master node (default the --rdzv-endpoint port, else 29500)")
    # torchrun's rendezvous flags, as its tutorials pass them: the endpoint names the master
    # (host:port; port 0 or none picks a free one on a single node), the id is the run id.
    flag("rdzv-backend", default="static",
         help="'static' or 'c10d' (both rendezvous at the master address and port)")
    flag("rdzv-endpoint", default="", help="HOST[:PORT] of the rendezvous (the master)")
    flag("rdzv-id", default="none", help="job id (the run id; TORCHELASTIC_RUN_ID)")
    flag("rdzv-conf", default="", help="KEY=VALUE,... rendezvous options (accepted, unused)")
    flag("start-method", default="spawn", choices=["spawn", "fork", "forkserver"],
         help="accepted for torchrun's flag; workers are always fresh processes")
    flag(
        "max-restarts",
        type=int,
        default=0,
        help="restart the node's worker group up to this many times after a failure (default 0)",
    )
    flag("monitor-interval", type=float, default=0.1, help="seconds between checks of the workers")
    flag(
        "standalone",
        action="store_true",
        help="single-node job: localhost as master and a free port (ignores --nnodes/--node-rank)",
    )
    flag("run-id", default="none", help="job id, passed to workers as TORCHELASTIC_RUN_ID")
    flag("role", default="default", help="the workers' role: ROLE_NAME, and the prefix of "
         "teed output lines (default 'default')")
    flag("local-addr", default=None, help="accepted for torchrun's flag (this node's address "
         "for a multi-node rendezvous; the master address is used)")
    flag("shutdown-timeout", type=int, default=30, help="accepted for torchrun's flag")
    flag(
        "no-python",
        action="store_true",
        help="run the entry point as an executable instead of through 'python'",
    )
    flag(
        "log-dir",
        default=None,
        help="directory for the workers' log files (with --redirects / --tee)",
    )
    p.add_argument(
        "-r",
        "--redirects",
        default="0",
        help="send workers' streams to log files only: 0 none, 1 stdout, 2 stderr, 3 both; "
        "or per local rank, e.g. 0:1,1:3",
    )
    p.add_argument(
        "-t",
        "--tee",
        default="0",
        help="like --redirects, but to the log files and the console (lines prefixed by rank)",
    )
    flag(
        "local-ranks-filter",
        default="",
        help="comma-separated local ranks whose output reaches the console (default: all)",
    )
    p.add_argument(
        "-m",
        "--module",
        action="store_true",
        help="run the entry point as a module, like 'python -m'",
    )
    p.add_argument("training_script", help="the script (or module with -m) each worker runs")
    p.add_argument("training_script_args", nargs=REMAINDER, help="arguments passed to the script")
    return p


def parse_args(args: list[str] | None = None) -> argparse.Namespace:
    """Parses the command line (``sys.argv[1:]`` when ``args`` is None)."""
    return get_args_parser().parse_args(args)


def _parse_nnodes(value: str) -> int:
    parts = value.split(":")
    try:
        nums = [int(x) for x in parts]
    except ValueError:
        raise ValueError(f"--nnodes must be N or MIN:MAX, got {value!r}") from None
    if len(nums) not in (1, 2) or any(n < 1 for n in nums):
        raise ValueError(f"--nnodes must be N or MIN:MAX with positive integers, got {value!r}")
    if len(nums) == 2 and nums[0] != nums[1]:
        raise ValueError(
            f"--nnodes {value}: elastic node ranges are not supported, "
            "give a fixed count (N or N:N)"
        )
    return nums[0]


def _cuda_device_count() -> int:
    try:
        import ember

        return int(ember.cuda.device_count()) if ember.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no CUDA backend means no GPUs
        return 0


def _parse_nproc(value: str) -> int:
    if value in ("cpu", "auto", "gpu"):
        gpus = _cuda_device_count() if value != "cpu" else 0
        if value == "gpu" and gpus == 0:
            raise ValueError("--nproc-per-node gpu: no CUDA device is available")
        return gpus if gpus > 0 else (os.cpu_count() or 1)
    try:
        n = int(value)
    except ValueError:
        raise ValueError(
            f"--nproc-per-node must be an integer, 'cpu', 'gpu' or 'auto', got {value!r}"
        ) from None
    if n < 1:
        raise ValueError(f"--nproc-per-node must be >= 1, got {n}")
    return n


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_from_args(args: argparse.Namespace) -> LaunchConfig:
    """The agent's configuration from parsed arguments (raises ValueError on bad values)."""
    nnodes, node_rank = _parse_nnodes(args.nnodes), args.node_rank
    master_addr, master_port = args.master_addr, args.master_port
    if args.rdzv_backend not in ("static", "c10d"):
        raise ValueError(f"--rdzv-backend {args.rdzv_backend!r} is not supported; use 'static' "
                         "or 'c10d' (a fixed master address and port)")
    if args.rdzv_endpoint and not args.standalone:
        host, _, port = args.rdzv_endpoint.rpartition(":") if ":" in args.rdzv_endpoint \
            else (args.rdzv_endpoint, "", "")
        host = host.strip("[]")
        if master_addr is None:
            master_addr = host or "127.0.0.1"
        if master_port is None and port:
            try:
                master_port = int(port)
            except ValueError:
                raise ValueError(f"--rdzv-endpoint {args.rdzv_endpoint!r}: the port must be an "
                                 "integer") from None
        if master_port == 0:
            if nnodes != 1:
                raise ValueError(f"--rdzv-endpoint {args.rdzv_endpoint!r}: port 0 (a free "
                                 "port) only works on a single node")
            master_port = _free_port()
    if master_addr is None:
        master_addr = "127.0.0.1"
    if args.standalone:
        nnodes, node_rank, master_addr = 1, 0, "127.0.0.1"
        if master_port is None:
            master_port = _free_port()
    if master_port is None:
        master_port = 29500
    run_id = args.run_id if args.run_id != "none" else args.rdzv_id
    if run_id == "none" and args.standalone:
        run_id = str(uuid.uuid4())
    streams = {}
    for name in ("redirects", "tee"):
        spec = parse_std_spec(str(getattr(args, name)), name)
        streams[name] = ({-1: spec} if spec else {}) if isinstance(spec, int) else spec
    ranks_filter = None
    if args.local_ranks_filter:
        try:
            ranks_filter = {int(x) for x in args.local_ranks_filter.split(",") if x.strip()}
        except ValueError:
            raise ValueError(
                "--local-ranks-filter must be comma-separated local ranks, got "
                f"{args.local_ranks_filter!r}"
            ) from None
    return LaunchConfig(
        redirects=streams["redirects"],
        tee=streams["tee"],
        log_dir=args.log_dir,
        local_ranks_filter=ranks_filter,
        nproc_per_node=_parse_nproc(str(args.nproc_per_node)),
        nnodes=nnodes,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=master_port,
        max_restarts=args.max_restarts,
        monitor_interval=args.monitor_interval,
        run_id=run_id,
        no_python=args.no_python,
        module=args.module,
        role=args.role,
    )


def run(args: argparse.Namespace) -> int:
    """Launches the node's workers for parsed ``args``; returns the launcher's exit code (0, 2
    for a bad command line, 128 + signal when the launcher is stopped by one). Workers that
    failed after the last restart raise ChildFailedError (torchrun's), whose report names
    each failed rank, its exit code and traceback; uncaught, it ends the launcher with code 1."""
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        print(f"emberrun: error: {e}", file=sys.stderr)
        return 2
    if not args.module and not args.no_python and not os.path.exists(args.training_script):
        print(
            f"emberrun: error: training script not found: {args.training_script}", file=sys.stderr
        )
        return 2
    return launch(cfg, args.training_script, list(args.training_script_args),
                  raise_on_failure=True)


def main(args: list[str] | None = None) -> None:
    """Entry point of ``python -m ember.distributed.run`` and of the ``emberrun`` script."""
    sys.exit(run(parse_args(args)))


if __name__ == "__main__":
    main()
