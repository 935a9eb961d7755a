"""Small programs in the style of public PyTorch examples, written against `torch`, run
unchanged on torch and on ember through a `torch` -> `ember` import shim (issue 15). They touch
what real programs touch: loss formatting, legacy constructors, sequences, backend flags, seeds,
compile, autocast, GradScaler, module paths, saving whole objects and the weights-only opt-ins."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "compat_programs"
sys.path.insert(0, str(HERE))
from shim import run_script, torch_is_ember  # noqa: E402

sys.path.remove(str(HERE))


def _result(out: str) -> tuple[float, float]:
    m = re.search(r"^RESULT (\S+) (\S+)$", out, re.M)
    assert m, out
    return float(m.group(1)), float(m.group(2))


def _run(script: str, argv: list[str], capsys, on_ember: bool) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ember.compile's one-time note
        if on_ember:
            with torch_is_ember():
                g = run_script(str(HERE / script), argv)
                assert g["torch"].__name__ == "ember"
        else:
            torch = pytest.importorskip("torch")
            # the reference run needs no graph compiler: torch.compile as the identity
            compile_ = torch.compile
            torch.compile = lambda model=None, **kw: model
            try:
                run_script(str(HERE / script), argv)
            finally:
                torch.compile = compile_
    return capsys.readouterr().out


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_char_lstm(tmp_path, capsys, on_ember):
    out = _run("char_lstm.py", ["--steps", "60", "--out", str(tmp_path)], capsys, on_ember)
    first, avg = _result(out)
    assert 2.0 < first < 3.0  # ln(vocab) at the start
    assert avg < 0.5  # and it learned the text
    assert re.search(r"step   0 \| loss \d\.\d{4} \| delta \+0\.00", out)
    assert "sample: h" in out


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_reinforce(capsys, on_ember):
    out = _run("reinforce.py", [], capsys, on_ember)
    early, late = _result(out)
    assert late >= 0.7 and late >= early - 0.1
    assert re.search(r"Episode 0\tLast reward: [+-]\d\.\d\d\tAverage reward: -?\d\.\d\d", out)


def test_shim_restores_torch():
    torch = pytest.importorskip("torch")
    with torch_is_ember():
        import torch as inner

        assert inner.__name__ == "ember"
    import torch as outer

    assert outer is torch
