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
