"""The launcher (``python -m ember.distributed.run``): environment, failures, restarts, modules,
and multi-node runs, including two "machines" made from network namespaces (as root), launched
by two launchers and by ``mpirun``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TIMEOUT = 120  # generous: the machine is shared and loaded

# A worker that records its environment and arguments in OUT/rank_<RANK>.json.
ENV_WORKER = textwrap.dedent(
    """
    import json, os, sys
    keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "OMP_NUM_THREADS"]
    out = sys.argv[1]
    rec = {k: os.environ.get(k) for k in keys}
    rec["argv"] = sys.argv[2:]
    rec["name"] = __name__
    with open(os.path.join(out, "rank_%s.json" % os.environ["RANK"]), "w") as f:
        json.dump(rec, f)
    """
)

# Every rank sends (rank + 1) to rank 0 over TCP at MASTER_ADDR:MASTER_PORT; rank 0 sends the
# sum back to all; each rank records what it got and the local address it used.
SOCKET_WORKER = textwrap.dedent(
    """
    import json, os, socket, sys, time
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    out = sys.argv[1]
    if rank == 0:
        srv = socket.create_server((addr, port))
        srv.settimeout(90)
        peers, total = [], 1
        for _ in range(world - 1):
            conn, _ = srv.accept()
            total += int(conn.recv(64).decode())
            peers.append(conn)
        for conn in peers:
            conn.sendall(str(total).encode())
            conn.close()
        local = addr
    else:
        deadline = time.time() + 90
        while True:
            try:
                s = socket.create_connection((addr, port), timeout=5)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        local = s.getsockname()[0]
        s.sendall(str(rank + 1).encode())
        total = int(s.recv(64).decode())
    rec = {k: os.environ[k] for k in ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                       "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"]}
    rec.update(total=total, local_addr=local)
    with open(os.path.join(out, "rank_%d.json" % rank), "w") as f:
        json.dump(rec, f)
    """
)


def _site_env() -> dict[str, str]:
    """The environment for child Pythons: this test's ember on their path."""
    import ember

    env = dict(os.environ)
    roots = {str(Path(p).parent) for p in ember.__path__}
    env["PYTHONPATH"] = os.pathsep.join([*roots, env.get("PYTHONPATH", "")])
    env.pop("OMP_NUM_THREADS", None)
    return env


def _launch(
    args: list[str],
    cwd: str | None = None,
    timeout: float = TIMEOUT,
    prefix: list[str] | None = None,
):
    cmd = [*(prefix or []), sys.executable, "-m", "ember.distributed.run", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=_site_env(), cwd=cwd
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _records(out: Path) -> dict[int, dict]:
    return {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_*.json")}


@pytest.fixture
def script(tmp_path: Path):
    def write(source: str, name: str = "worker.py") -> str:
        path = tmp_path / name
        path.write_text(source)
        return str(path)

    return write


def test_worker_environment_and_args(tmp_path, script):
    out = tmp_path / "out"
    out.mkdir()
    r = _launch(
        [
            "--nproc-per-node",
            "3",
            "--master-port",
            "29911",
            script(ENV_WORKER),
            str(out),
            "--lr",
            "0.5",
        ]
    )
    assert r.returncode == 0, r.stderr
    recs = _records(out)
    assert sorted(recs) == [0, 1, 2]
    for rank, rec in recs.items():
        assert rec["RANK"] == str(rank) and rec["LOCAL_RANK"] == str(rank)
        assert (
            rec["WORLD_SIZE"] == "3" and rec["LOCAL_WORLD_SIZE"] == "3" and rec["GROUP_RANK"] == "0"
        )
        assert rec["MASTER_ADDR"] == "127.0.0.1" and rec["MASTER_PORT"] == "29911"
        assert rec["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert rec["OMP_NUM_THREADS"] == "1"  # several workers: one thread each, as torchrun does
        assert rec["argv"] == ["--lr", "0.5"] and rec["name"] == "__main__"


def test_node_rank_gives_global_ranks(tmp_path, script):
    out = tmp_path / "out"
    out.mkdir()
    r = _launch(
        [
            "--nnodes",
            "3:3",
            "--node_rank",
            "2",
            "--nproc_per_node",
            "2",
            "--master_addr",
            "10.1.2.3",
            script(ENV_WORKER),
            str(out),
        ]
    )
    assert r.returncode == 0, r.stderr
    recs = _records(out)
    assert sorted(recs) == [4, 5]
    assert [recs[4]["LOCAL_RANK"], recs[5]["LOCAL_RANK"]] == ["0", "1"]
    assert all(
        x["WORLD_SIZE"] == "6"
        and x["GROUP_RANK"] == "2"
        and x["MASTER_ADDR"] == "10.1.2.3"
        and x["MASTER_PORT"] == "29500"
        for x in recs.values()
    )


def test_standalone_picks_a_port(tmp_path, script):
    out = tmp_path / "out"
    out.mkdir()
    r = _launch(["--standalone", "--nproc-per-node", "2", script(ENV_WORKER), str(out)])
    assert r.returncode == 0, r.stderr
    recs = _records(out)
    assert recs[0]["MASTER_PORT"] == recs[1]["MASTER_PORT"]
    assert 0 < int(recs[0]["MASTER_PORT"]) < 65536 and recs[0]["MASTER_ADDR"] == "127.0.0.1"


def test_module_entry_point(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(ENV_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    r = _launch(["--nproc-per-node", "2", "-m", "mypkg.train", str(out), "x"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    recs = _records(out)
    assert sorted(recs) == [0, 1] and recs[1]["argv"] == ["x"] and recs[1]["name"] == "__main__"


def test_failure_stops_the_others_and_reports_rank_and_traceback(tmp_path, script):
    # Rank 2 fails; the others would sleep for minutes if they were not stopped.
    pids = tmp_path / "pids"
    pids.mkdir()
    src = textwrap.dedent(
        f"""
        import os, time
        open(os.path.join({str(pids)!r}, os.environ["RANK"]), "w").write(str(os.getpid()))
        def inner():
            raise ValueError("bad batch on rank " + os.environ["RANK"])
        if os.environ["RANK"] == "2":
            time.sleep(0.5)
            inner()
        time.sleep(600)
        """
    )
    r = _launch(["--nproc-per-node", "3", script(src)])
    assert r.returncode == 1
    assert "ChildFailedError" in r.stderr
    assert "rank      : 2 (local_rank: 2)" in r.stderr and "exitcode  : 1 (pid:" in r.stderr
    report = r.stderr[r.stderr.index("FAILED") :]
    assert "ValueError: bad batch on rank 2" in report and "in inner" in report
    assert "_launcher.py" not in report  # the bootstrap's frames are not shown
    for p in pids.iterdir():
        pid = int(p.read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_exit_code_and_signal_of_the_failed_worker(script):
    r = _launch(
        [
            "--nproc-per-node",
            "2",
            script("import os, sys\nif os.environ['RANK'] == '1': sys.exit(7)\n"),
        ]
    )
    # torchrun's exit code is 1 (its ChildFailedError); the report names the worker's own code
    assert r.returncode == 1 and "ChildFailedError" in r.stderr
    assert "rank      : 1 (local_rank: 1)" in r.stderr and "exitcode  : 7 (pid:" in r.stderr
    r = _launch(
        [
            "--nproc-per-node",
            "2",
            script(
                "import os, signal\nif os.environ['RANK'] == '0': os.kill(os.getpid(), signal.SIGKILL)\n"
            ),
        ]
    )
    assert r.returncode == 1
    assert "rank      : 0 (local_rank: 0)" in r.stderr and "(SIGKILL)" in r.stderr


def test_max_restarts_restarts_the_group(tmp_path, script):
    log = tmp_path / "attempts.txt"
    src = textwrap.dedent(
        f"""
        import os
        n = os.environ["TORCHELASTIC_RESTART_COUNT"]
        with open({str(log)!r}, "a") as f:
            f.write(os.environ["RANK"] + ":" + n + "\\n")
        if int(n) < 2 and os.environ["RANK"] == "1":
            raise RuntimeError("flaky " + n)
        """
    )
    r = _launch(["--nproc-per-node", "2", "--max-restarts", "3", script(src)])
    assert r.returncode == 0, r.stderr
    assert "restart 1 of 3" in r.stderr and "restart 2 of 3" in r.stderr
    seen = set(log.read_text().split())
    # rank 1 ran every attempt; rank 0 surely the last (the launcher may stop it in the failed
    # attempts before it writes its line)
    assert {"1:0", "1:1", "1:2", "0:2"} <= seen, seen
    assert seen <= {f"{rank}:{n}" for rank in "01" for n in "012"}, seen
    # Out of restarts: the last failure is reported.
    r = _launch(["--nproc-per-node", "2", "--max-restarts", "1", script(src)])
    assert r.returncode == 1 and "RuntimeError: flaky 1" in r.stderr


def test_sigterm_to_the_launcher_stops_the_workers(tmp_path, script):
    pids = tmp_path / "pids"
    pids.mkdir()
    src = f"import os, time\nopen(os.path.join({str(pids)!r}, os.environ['RANK']), 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", script(src)]
    p = subprocess.Popen(
        cmd, env=_site_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + TIMEOUT
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 128 + signal.SIGTERM and "SIGTERM" in err
    for f in pids.iterdir():
        with pytest.raises(ProcessLookupError):
            os.kill(int(f.read_text()), 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nnodes", "1:4"], "elastic node ranges are not supported"),
        (["--nnodes", "two"], "--nnodes must be N or MIN:MAX"),
        (["--nproc-per-node", "0"], "--nproc-per-node must be >= 1"),
        (["--nproc-per-node", "many"], "--nproc-per-node must be an integer"),
        (["--nnodes", "2", "--node-rank", "2"], "node_rank must be in [0, 1]"),
        (["--master-port", "70000"], "master_port must be in [1, 65535]"),
    ],
)
def test_bad_arguments(args, message, script):
    r = _launch([*args, script("pass\n")])
    assert r.returncode == 2 and message in r.stderr


def test_missing_script(tmp_path):
    r = _launch([str(tmp_path / "nope.py")])
    assert r.returncode == 2 and "training script not found" in r.stderr


def test_nproc_auto_and_console_script():
    from ember.distributed.run import config_from_args, parse_args

    cfg = config_from_args(parse_args(["--nproc-per-node", "auto", "x.py"]))
    assert cfg.nproc_per_node >= 1
    assert config_from_args(parse_args(["--nproc-per-node", "cpu", "x.py"])).nproc_per_node == (
        os.cpu_count() or 1
    )
    try:
        import tomllib
    except ImportError:  # Python 3.10
        pytest.skip("tomllib needs Python 3.11")
    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    target = meta["project"]["scripts"]["emberrun"]
    module, func = target.split(":")
    import importlib

    assert callable(getattr(importlib.import_module(module), func))


def test_two_nodes_on_localhost(tmp_path, script):
    """Two launchers (node ranks 0 and 1) of one job: four workers meet at MASTER_ADDR:PORT."""
    out = tmp_path / "out"
    out.mkdir()
    worker = script(SOCKET_WORKER)
    base = [
        sys.executable,
        "-m",
        "ember.distributed.run",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_free_port()),
    ]
    procs = [
        subprocess.Popen(
            [*base, "--node-rank", str(n), worker, str(out)],
            env=_site_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in (1, 0)
    ]
    for p in procs:
        _, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 0, err
    recs = _records(out)
    assert sorted(recs) == [0, 1, 2, 3]
    assert all(r["total"] == 1 + 2 + 3 + 4 and r["WORLD_SIZE"] == "4" for r in recs.values())
    assert [recs[r]["GROUP_RANK"] for r in range(4)] == ["0", "0", "1", "1"]
    assert [recs[r]["LOCAL_RANK"] for r in range(4)] == ["0", "1", "0", "1"]


# ---- two hosts from network namespaces ---------------------------------------------------------


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture(scope="module")
def two_hosts():
    """Two network namespaces joined by a veth pair: {"ns": [ns0, ns1], "addr": [ip0, ip1]}."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("needs root and iproute2 (ip netns)")
    tag = os.getpid() % 100000
    ns = [f"ember-t{tag}-0", f"ember-t{tag}-1"]  # also valid host names
    veth = [f"emv{tag}a", f"emv{tag}b"]
    subnet = 100 + tag % 150
    addr = [f"10.{subnet}.0.1", f"10.{subnet}.0.2"]
    steps = [
        ("netns", "add", ns[0]),
        ("netns", "add", ns[1]),
        ("link", "add", veth[0], "type", "veth", "peer", "name", veth[1]),
        ("link", "set", veth[0], "netns", ns[0]),
        ("link", "set", veth[1], "netns", ns[1]),
    ]
    for i in (0, 1):
        steps += [
            ("-n", ns[i], "addr", "add", f"{addr[i]}/24", "dev", veth[i]),
            ("-n", ns[i], "link", "set", veth[i], "up"),
            ("-n", ns[i], "link", "set", "lo", "up"),
        ]
    try:
        for i, step in enumerate(steps):
            r = _ip(*step)
            if r.returncode != 0:
                if i == 0:
                    pytest.skip(f"ip netns is not available here: {r.stderr.strip()}")
                raise RuntimeError(f"ip {' '.join(step)} failed: {r.stderr.strip()}")
        yield {"ns": ns, "addr": addr}
    finally:
        for name in ns:
            pids = _ip("netns", "pids", name).stdout.split()
            for pid in pids:  # processes this test started inside the namespace
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", name)  # removes the veth end inside it too
        _ip("link", "del", veth[0])


def test_two_hosts_with_the_launcher(tmp_path, script, two_hosts):
    ns, addr = two_hosts["ns"], two_hosts["addr"]
    out = tmp_path / "out"
    out.mkdir()
    worker = script(SOCKET_WORKER)
    procs = []
    for node in (1, 0):
        cmd = [
            "ip",
            "netns",
            "exec",
            ns[node],
            sys.executable,
            "-m",
            "ember.distributed.run",
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--nproc-per-node",
            "2",
            "--master-addr",
            addr[0],
            "--master-port",
            "29931",
            worker,
            str(out),
        ]
        procs.append(
            subprocess.Popen(
                cmd, env=_site_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    try:
        for p in procs:
            _, err = p.communicate(timeout=TIMEOUT)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    recs = _records(out)
    assert sorted(recs) == [0, 1, 2, 3]
    assert all(r["total"] == 10 and r["MASTER_ADDR"] == addr[0] for r in recs.values())
    # Node 1's workers reached the master from the other "machine".
    assert recs[2]["local_addr"] == addr[1] and recs[3]["local_addr"] == addr[1]
    assert recs[1]["local_addr"] == addr[0]


MPI_WORKER = textwrap.dedent(
    """
    import json, os, socket, sys
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    total = comm.allreduce(comm.rank + 1)
    names = comm.allgather(socket.gethostname())
    with open(os.path.join(sys.argv[1], "rank_%d.json" % comm.rank), "w") as f:
        json.dump({"total": total, "size": comm.size, "hosts": names}, f)
    """
)


def test_two_hosts_with_mpirun(tmp_path, script, two_hosts):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not installed")
    version = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30)
    if "Open MPI" not in version.stdout + version.stderr:
        pytest.skip("the rsh-agent setup here is Open MPI's (mpirun is another MPI)")
    pytest.importorskip("mpi4py")
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) to give each namespace its own host name")
    ns, addr = two_hosts["ns"], two_hosts["addr"]
    out = tmp_path / "out"
    out.mkdir()
    # The rsh agent enters the namespace of the "host" it is asked for. Each namespace also gets
    # its own host name (a UTS namespace): Open MPI tells nodes apart by name.
    agent = tmp_path / "agent.sh"
    agent.write_text(
        textwrap.dedent(
            f"""\
        #!/bin/sh
        host=$1; shift
        case "$host" in
          {addr[0]}) ns={ns[0]} ;;
          {addr[1]}) ns={ns[1]} ;;
          *) echo "agent: unknown host $host" >&2; exit 1 ;;
        esac
        exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns || exit 1; $*"
        """
        )
    )
    agent.chmod(0o755)
    subnet = addr[0].rsplit(".", 1)[0] + ".0/24"
    inner = (
        f"hostname {ns[0]} || exit 1; exec {mpirun} --host {addr[0]}:1,{addr[1]}:1 -np 2 "
        f"--mca plm_rsh_agent {agent} --mca btl tcp,self --mca btl_tcp_if_include {subnet} "
        f"--prtemca oob_tcp_if_include {subnet} {sys.executable} {script(MPI_WORKER)} {out}"
    )
    env = _site_env()
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    try:
        r = subprocess.run(
            ["ip", "netns", "exec", ns[0], "unshare", "--uts", "sh", "-c", inner],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("mpirun across the two namespaces did not finish")
    assert r.returncode == 0, r.stdout + r.stderr
    recs = _records(out)
    assert sorted(recs) == [0, 1]
    assert all(x["total"] == 3 and x["size"] == 2 and x["hosts"] == ns for x in recs.values())


def test_ddp_example_through_the_launcher(tmp_path):
    """examples/ddp_train.py on 2 processes (needs ember.distributed's process group)."""
    import ember.distributed as dist

    if not hasattr(dist, "init_process_group"):
        pytest.skip("ember.distributed has no process group yet")
    example = Path(__file__).parents[3] / "examples" / "ddp_train.py"
    if not example.exists():
        pytest.skip("examples/ is not part of this installation")
    ckpt = tmp_path / "ddp.ember"
    r = _launch(
        [
            "--standalone",
            "--nproc-per-node",
            "2",
            str(example),
            "--epochs",
            "2",
            "--save",
            str(ckpt),
        ],
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 process(es)" in r.stdout and "epoch  2" in r.stdout
    acc = float(r.stdout.rsplit("test accuracy", 1)[1].split("%")[0])
    assert acc > 80.0
    assert ckpt.exists()


PRINT_WORKER = (
    "import os, sys\n"
    "print('out', os.environ['RANK'], flush=True)\n"
    "print('err', os.environ['RANK'], file=sys.stderr, flush=True)\n"
)


def test_tee_redirects_log_dir_and_ranks_filter(tmp_path, script):
    worker = script(PRINT_WORKER)
    logs = tmp_path / "logs"
    r = _launch(["--nproc-per-node", "2", "--tee", "3", "--log-dir", str(logs), worker])
    assert r.returncode == 0, r.stderr
    assert "[default0]:out 0" in r.stdout and "[default1]:out 1" in r.stdout
    assert "[default1]:err 1" in r.stderr
    files = {str(p.relative_to(logs)).split("/", 1)[1]: p.read_text() for p in logs.rglob("*.log")}
    assert files == {
        "attempt_0/0/stdout.log": "out 0\n",
        "attempt_0/0/stderr.log": "err 0\n",
        "attempt_0/1/stdout.log": "out 1\n",
        "attempt_0/1/stderr.log": "err 1\n",
    }
    # Rank 0's stdout and stderr to files only; rank 1 untouched.
    logs2 = tmp_path / "logs2"
    r = _launch(["--nproc-per-node", "2", "-r", "0:3", "--log_dir", str(logs2), worker])
    assert r.returncode == 0, r.stderr
    assert "out 0" not in r.stdout and "out 1" in r.stdout and "err 0" not in r.stderr
    assert sorted(p.name for p in logs2.rglob("*.log")) == ["stderr.log", "stdout.log"]
    # Only local rank 2 reaches the console.
    r = _launch(["--nproc-per-node", "3", "--local-ranks-filter", "2", worker])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["out", "2"] and "err 0" not in r.stderr and "err 2" in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-r", "5"], "5 for every local rank is not one of 0"),
        (["--tee", "0:x"], "--tee must be 0-3 or a list like 0:1,1:3"),
        (["--local-ranks-filter", "a"], "--local-ranks-filter must be comma-separated"),
    ],
)
def test_bad_stream_arguments(args, message, script):
    r = _launch([*args, script("pass\n")])
    assert r.returncode == 2 and message in r.stderr
