"""Smoke test of the benchmark harness: `pytest benchmarks/test_bench.py` (needs ember)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parent / "run.py"


def test_quick_run_writes_table_and_json(tmp_path: Path) -> None:
    pytest.importorskip("ember")
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--filter", "tiny/add", "--filter", "tiny/getitem",
         "--json", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "| case | ember | torch | ember/torch | target | met? |" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["meta"]["quick"] is True and doc["meta"]["threads"] == 2
    names = [c["name"] for c in doc["cases"]]
    assert names == ["tiny/add", "tiny/add()", "tiny/getitem"]  # substring match
    for c in doc["cases"]:
        assert c["ember"]["status"] == "ok" and c["ember"]["median_s"] > 0
        assert c["torch"]["status"] in ("ok", "n/a")


def test_missing_op_is_reported_not_raised(tmp_path: Path) -> None:
    pytest.importorskip("ember")
    sys.path.insert(0, str(RUN.parent))
    try:
        import harness
    finally:
        sys.path.pop(0)
    import ember

    c = harness.Case(name="x", setup=lambda fw: harness.Stmt("f(x)", f=fw.no_such_op, x=1))
    fws = {"ember": harness.Framework("ember", ember), "torch": None}
    res = harness.run_case(c, fws, repeats=1, batch_s=0.001, quick=True)
    assert res.sides["ember"].status == "missing"
    assert res.sides["torch"].status == "n/a"
    assert res.ratio is None and harness.fmt_met(res) == "missing"


DDP_CASES = [
    "ddp/mlp 1 proc",
    "ddp/mlp 2 procs",
    "ddp/resnet 1 proc",
    "ddp/resnet 2 procs",
    "ddp/spawn 2 + init_process_group",
]


def test_ddp_filter_lists_exactly_the_ddp_cases() -> None:
    pytest.importorskip("ember")
    proc = subprocess.run(
        [sys.executable, str(RUN), "--list", "--filter", "ddp/"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(DDP_CASES)
    assert all(line.startswith(name + " ") for line, name in zip(lines, DDP_CASES)), lines


def test_ddp_cases_run_ember_only(tmp_path: Path) -> None:
    # The torch-less path (torch's side is "n/a"), two ranks of real ember DDP, the spawn case,
    # and the summary printed at exit.
    pytest.importorskip("ember")
    pytest.importorskip("ember.distributed")
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--no-torch", "--filter", "ddp/mlp",
         "--filter", "ddp/spawn", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [c["name"] for c in doc["cases"]] == [DDP_CASES[0], DDP_CASES[1], DDP_CASES[4]]
    for c in doc["cases"]:
        assert c["ember"]["status"] == "ok", c["ember"]["message"]
        assert c["ember"]["median_s"] > 0
        assert c["torch"]["status"] == "n/a" and c["ratio"] is None
    assert "note: ddp/mlp: ember " in proc.stderr and "scaling efficiency" in proc.stderr


# ---- benchmarks/cuda_train.py: the GPU training benchmark's CPU dry run -------------------------

CUDA_TRAIN = RUN.parent / "cuda_train.py"


def _cuda_train_module():
    # cuda_train puts benchmarks/ and benchmarks/paper/ on sys.path itself (it imports
    # cases_nn_train and models lazily); this only finds it.
    sys.path.insert(0, str(RUN.parent))
    try:
        import cuda_train
    finally:
        sys.path.remove(str(RUN.parent))
    return cuda_train


def test_cuda_train_tiny_cpu_runs_every_case(tmp_path: Path) -> None:
    # Every case of the GPU training benchmark, tiny sizes, on the CPU, in both frameworks: the
    # table, the JSON, and (where no dropout draws differ) the same initial loss, since ember
    # starts from torch's initial weights.
    pytest.importorskip("ember")
    torch = pytest.importorskip("torch")
    del torch
    out = tmp_path / "train.json"
    proc = subprocess.run(
        [sys.executable, str(CUDA_TRAIN), "--device", "cpu", "--tiny", "--budget", "4", "--json",
         str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "| case | batch | ember | torch | ember/torch |" in proc.stdout
    doc = json.loads(out.read_text())
    ct = _cuda_train_module()
    assert [c["case"] for c in doc["cases"]] == [c.name for c in ct.CASES]
    for c in doc["cases"]:
        for side in ("ember", "torch"):
            s = c[side]
            assert s["status"] == "ok", (c["case"], side, s["message"])
            assert s["throughput"] > 0 and s["step_s"] > 0 and s["peak_bytes"] is None
            assert s["loss0"] == pytest.approx(s["loss0"])  # finite
        assert c["ember"]["same_init"], c["case"]
        assert c["met"] is None  # no verdict on dry-run numbers
        assert f"| {c['case']} | {c['batch']} |" in proc.stdout
        # No dropout: the same loss (ResNet's batch norms over 2 samples amplify rounding).
        rel = {"resnet50 fp32": 3e-3, "lstm lm": 1e-4, "ncf": 1e-4}.get(c["case"])
        if rel is not None:
            assert c["ember"]["loss0"] == pytest.approx(c["torch"]["loss0"], rel=rel)


def test_cuda_train_ember_switch_errors(tmp_path: Path) -> None:
    pytest.importorskip("ember")
    ct = _cuda_train_module()
    with pytest.raises(SystemExit):  # argparse: not NAME=0|1
        ct.main(["--device", "cpu", "--tiny", "--ember-switch", "depthwise_native=yes"])
    with pytest.raises(SystemExit, match="no_such_path"):
        ct.main(["--device", "cpu", "--tiny", "--in-process", "--no-torch", "--filter", "ncf",
                 "--ember-switch", "no_such_path=0", "--json", str(tmp_path / "s.json")])


def test_cuda_train_isolated_case_and_failing_case(tmp_path: Path, capsys) -> None:
    pytest.importorskip("ember")
    pytest.importorskip("torch")
    # One case in its own process (the CUDA default), ember only.
    out = tmp_path / "ncf.json"
    proc = subprocess.run(
        [sys.executable, str(CUDA_TRAIN), "--device", "cpu", "--tiny", "--isolate", "--no-torch",
         "--filter", "ncf", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(out.read_text())["cases"]
    assert row["case"] == "ncf" and row["ember"]["status"] == "ok"
    assert row["torch"]["status"] == "n/a" and row["throughput_ratio"] is None

    # A case whose build raises: its row says why, the next case still runs.
    ct = _cuda_train_module()

    def broken(mod, tiny, batch):
        raise NotImplementedError("conv9d: no kernel")

    cases = [ct.Case("broken", "img/s", broken, 2, 2), ct.CASES[-1]]
    old = ct.CASES
    ct.CASES = cases
    try:
        assert ct.main(["--device", "cpu", "--tiny", "--budget", "1",
                        "--json", str(tmp_path / "b.json")]) == 0
    finally:
        ct.CASES = old
    table = capsys.readouterr().out
    assert "| broken | 2 | error: NotImplementedError: conv9d: no kernel |" in table
    rows = json.loads((tmp_path / "b.json").read_text())["cases"]
    assert rows[0]["ember"]["status"] == rows[0]["torch"]["status"] == "error"
    assert rows[1]["case"] == "ncf" and rows[1]["ember"]["status"] == "ok"


def test_gpu_paper_dry_run_on_the_cpu(tmp_path: Path) -> None:
    # benchmarks/paper/gpu_paper.py (the paper's GPU Fig. 1, async ablation and Table 1) on the
    # CPU at tiny size, ember only: the README's tables, the trace, results.json.
    pytest.importorskip("ember")
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"meta": {"gpu": "a test GPU"}, "cases": [
        {"case": "resnet50 fp32", "batch": 64, "ember": {"status": "ok", "throughput": 950.0},
         "torch": {"status": "ok", "throughput": 925.0}}]}))
    out = tmp_path / "gpu"
    proc = subprocess.run(
        [sys.executable, str(RUN.parent / "paper" / "gpu_paper.py"), "--device", "cpu",
         "--image", "32", "--batch", "2", "--steps", "1", "--no-torch", "--out", str(out),
         "--train-json", str(train)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    readme = (out / "README.md").read_text()
    assert "## Fig. 1: one training step, host ops against GPU kernels" in readme
    assert "| ember |" in readme and "| resnet50 fp32 | 64 | 950 | 925 | 1.03 |" in readme
    doc = json.loads((out / "results.json").read_text())
    (fig1,) = doc["fig1"]
    assert fig1["framework"] == "ember" and fig1["ops"] > 0 and fig1["host_ms"] > 0
    assert fig1["kernels"] == 0  # no device on the CPU
    json.loads((out / fig1["trace"]).read_text())  # a valid chrome trace
    (ab,) = doc["async"]
    assert ab["async_s"] > 0 and ab["blocking_s"] > 0, ab
