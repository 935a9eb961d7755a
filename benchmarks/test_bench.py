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
