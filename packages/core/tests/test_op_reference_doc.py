"""docs/ops.md, the op reference, is generated from packages/core/ops/*.yaml and committed so it
can be read without building; this keeps it in step with the YAML."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GEN = ROOT / "tools" / "codegen" / "gen_ops.py"
DOC = ROOT / "docs" / "ops.md"


@pytest.mark.skipif(not (GEN.exists() and DOC.exists()), reason="not run from a repository checkout")
def test_op_reference_is_current(tmp_path):
    pytest.importorskip("yaml")
    out = tmp_path / "ops.md"
    subprocess.run([sys.executable, str(GEN), "--docs", str(out)], check=True, cwd=ROOT)
    assert out.read_text() == DOC.read_text(), (
        "docs/ops.md is out of date with packages/core/ops/*.yaml: run `python3 -m nox -s docs` "
        "(or `python3 tools/codegen/gen_ops.py --docs docs/ops.md`) and commit the result")
