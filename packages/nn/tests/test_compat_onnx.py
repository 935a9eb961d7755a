"""A PyTorch-style ONNX export program (compat_programs/onnx_export.py: `import torch.onnx`,
`torch.onnx.export(..., dynamic_axes=...)`, onnxruntime at another batch size), run unchanged on
torch and on ember through the `torch` -> `ember` import shim (issue 15)."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

HERE = Path(__file__).resolve().parent / "compat_programs"
sys.path.insert(0, str(HERE))
from shim import run_script, torch_is_ember  # noqa: E402

sys.path.remove(str(HERE))


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_onnx_export_program(capsys, on_ember):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if on_ember:
            with torch_is_ember():
                g = run_script(str(HERE / "onnx_export.py"), [])
            assert g["torch"].__name__ == "ember"
        else:
            pytest.importorskip("torch")
            try:
                run_script(str(HERE / "onnx_export.py"), [])
            except (ImportError, ModuleNotFoundError) as e:  # torch.onnx's own optional deps
                pytest.skip(f"torch.onnx.export unavailable here: {e}")
    out = capsys.readouterr().out
    m = re.search(r"^RESULT (\d+) (\S+)$", out, re.M)
    assert m, out
    assert int(m.group(1)) == 4
    assert float(m.group(2)) < 1e-4
    for name in ("char_lm", "gru", "cnn", "encoder"):
        assert re.search(rf"^{name}: exported, onnxruntime max abs error", out, re.M)
