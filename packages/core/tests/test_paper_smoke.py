"""Smoke test of the paper's experiments (benchmarks/paper/run_paper.py --smoke): every figure,
table and ablation runs at tiny sizes and the report names them, so `nox -s paper` cannot rot."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "paper" / "run_paper.py"


def test_paper_smoke_writes_every_table(tmp_path: Path) -> None:
    pytest.importorskip("ember.nn")
    pytest.importorskip("ember.utils.data")
    if not SCRIPT.is_file():
        pytest.skip("benchmarks/paper/run_paper.py is not in this checkout")
    out = tmp_path / "paper"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    readme = (out / "README.md").read_text()
    for heading in ("## Fig. 1", "## Fig. 2", "## Table 1", "### Caching allocator on / off",
                    "### DataLoader workers and pinned memory", "shared memory vs pickled bytes",
                    "### Reference counting vs deferred freeing", "Asynchronous execution"):
        assert heading in readme, heading
    assert "error:" not in readme, readme
    for name in ("AlexNet", "VGG-19", "ResNet-50", "MobileNetV2", "GNMT stand-in", "NCF"):
        assert f"| {name}" in readme
    trace = json.loads((out / "fig1_trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any(e.get("ph") == "X" and "convolution" in e.get("name", "") for e in events)
    res = json.loads((out / "results.json").read_text())
    assert res["meta"]["mode"] == "smoke" and res["meta"]["cores"] >= 1
    on, off = res["fig2"]["runs"]["on"], res["fig2"]["runs"]["off"]
    assert on["caching"] is True and off["caching"] is False
    # Caching off: every allocation is a system allocation, nothing stays reserved beyond use.
    assert sum(off["segment_allocs"]) > sum(on["segment_allocs"])
    assert res["deferred"]["deferred"]["peak_allocated"] > res["deferred"]["refcount"]["peak_allocated"]
    has_mpl = importlib.util.find_spec("matplotlib") is not None
    assert (out / "fig1_timeline.png").is_file() == has_mpl
    assert (out / "fig2_memory.png").is_file() == has_mpl
    assert ("matplotlib is not installed" in readme) == (not has_mpl)


def test_paper_models_match_torch() -> None:
    """Table 1 builds each model once for both frameworks: the same parameter shapes, in order,
    and outputs of the same shape."""
    pytest.importorskip("ember.nn")
    torch = pytest.importorskip("torch")
    import ember

    if not SCRIPT.is_file():
        pytest.skip("benchmarks/paper/ is not in this checkout")
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import models
    finally:
        sys.path.pop(0)
    size = models.Size(image=64, batch=2, width=1 / 16, hidden=16, seq=3, vocab=50, rnn=8,
                       rnn_batch=2, ncf_users=20, ncf_items=20, ncf_batch=8)
    for name in models.MODELS:
        shapes, outs = [], []
        for fw in (ember, torch):
            model, batch, _, items = models.build(name, fw, size)
            shapes.append([tuple(p.shape) for p in model.parameters()])
            outs.append(tuple(model.eval()(batch()[0]).shape))
        assert shapes[0] == shapes[1], name
        assert outs[0] == outs[1], name
        assert items > 0
    with pytest.raises(ValueError, match="unknown model 'lenet'"):
        models.build("lenet", ember, size)
