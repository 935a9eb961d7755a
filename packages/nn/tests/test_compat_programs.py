"""Small programs in the style of public PyTorch examples, written against `torch`, run
unchanged on torch and on ember through a `torch` -> `ember` import shim (issue 15). They touch
what real programs touch: loss formatting, legacy constructors, sequences, backend flags, seeds,
compile, autocast, GradScaler, module paths, saving whole objects and the weights-only opt-ins."""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent / "compat_programs"
sys.path.insert(0, str(HERE))
from shim import run_script, torch_is_ember  # noqa: E402

sys.path.remove(str(HERE))


def _onnx_checked(out: str) -> None:
    """The program's ONNX step ran and onnxruntime agreed, or it was skipped for want of
    onnx/onnxruntime."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        assert "onnx: skipped" in out
        return
    assert re.search(r"^onnx: exported, onnxruntime max abs error \S+$", out, re.M), out


def _result(out: str) -> tuple[float, float]:
    m = re.search(r"^RESULT (\S+) (\S+)$", out, re.M)
    assert m, out
    return float(m.group(1)), float(m.group(2))


@contextlib.contextmanager
def _restoring_switches():
    """Programs set process-wide switches (use_deterministic_algorithms); the next test gets
    them back as they were."""
    libs = [__import__("ember")]
    try:
        import torch

        libs.append(torch)
    except ImportError:
        pass
    saved = [(lib, lib.are_deterministic_algorithms_enabled(),
              lib.is_deterministic_algorithms_warn_only_enabled()) for lib in libs]
    try:
        yield
    finally:
        for lib, mode, warn_only in saved:
            lib.use_deterministic_algorithms(mode, warn_only=warn_only)


def _run(script: str, argv: list[str], capsys, on_ember: bool) -> str:
    with warnings.catch_warnings(), _restoring_switches():
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
            # one thread: the reference run's speed then does not depend on the machine's load
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                run_script(str(HERE / script), argv)
            finally:
                torch.compile = compile_
                torch.set_num_threads(threads)
    return capsys.readouterr().out


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_char_lstm(tmp_path, capsys, on_ember):
    out = _run("char_lstm.py", ["--steps", "60", "--out", str(tmp_path)], capsys, on_ember)
    first, avg = _result(out)
    assert 2.0 < first < 3.0  # ln(vocab) at the start
    assert avg < 0.5  # and it learned the text
    assert re.search(r"step   0 \| loss \d\.\d{4} \| delta \+0\.00", out)
    assert "sample: h" in out
    _onnx_checked(out)


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_reinforce(capsys, on_ember):
    out = _run("reinforce.py", [], capsys, on_ember)
    early, late = _result(out)
    assert late >= 0.7 and late >= early - 0.1
    _onnx_checked(out)
    assert re.search(r"Episode 0\tLast reward: [+-]\d\.\d\d\tAverage reward: -?\d\.\d\d", out)


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_programs_skip_onnx_without_onnxruntime(monkeypatch, capsys, on_ember):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime -> ImportError
    out = _run("reinforce.py", [], capsys, on_ember)
    assert "onnx: skipped (onnx/onnxruntime not installed)" in out
    assert _result(out)[1] >= 0.7


def test_shim_restores_torch():
    torch = pytest.importorskip("torch")
    with torch_is_ember():
        import torch as inner

        assert inner.__name__ == "ember"
    import torch as outer

    assert outer is torch


def _results(out: str) -> list[float]:
    m = re.search(r"^RESULT (.+)$", out, re.M)
    assert m, out
    return [float(v) for v in m.group(1).split()]


def _lines(out: str, pattern: str) -> list[float]:
    """The numbers the pattern's groups capture, in order, over all matching lines."""
    found = re.findall(pattern, out, re.M)
    return [float(v) for m in found for v in (m if isinstance(m, tuple) else (m,))]


def _both(script: str, argv: list[str], tmp_path, capsys) -> tuple[str, str]:
    """Runs the script on torch, saving its initial weights, then on ember from those weights."""
    pytest.importorskip("torch")
    init = str(tmp_path / "init.npz")
    ref = _run(script, [*argv, "--out", str(tmp_path / "torch"), "--save-init", init], capsys,
               on_ember=False)
    got = _run(script, [*argv, "--out", str(tmp_path / "ember"), "--init-from", init], capsys,
               on_ember=True)
    _onnx_checked(ref)
    _onnx_checked(got)
    return ref, got


def test_min_gpt(tmp_path, capsys):
    out = _run("min_gpt.py", ["--out", str(tmp_path)], capsys, on_ember=True)
    first, last = _results(out)
    assert 3.0 < first < 3.8  # ln(vocab size): uniform predictions at the start
    assert last < first - 0.8
    assert re.search(r"^step 0: train loss \d\.\d{4}, val loss \d\.\d{4}$", out, re.M)
    assert re.search(r"^iter 10: loss \d\.\d{6}, lr \d\.\d\de-03, norm \d+\.\d{4}", out, re.M)
    assert "num decayed parameter tensors: 9, with 25,664 parameters" in out
    assert re.search(r"^sample: 'First", out, re.M)
    assert re.search(r"ema \d\.\d{6} after 60 updates$", out, re.M)
    assert (tmp_path / "ckpt.pt").exists()
    _onnx_checked(out)


def test_min_gpt_tracks_torch(tmp_path, capsys):
    ref, got = _both("min_gpt.py", [], tmp_path, capsys)
    pattern = r"^iter \d+: loss (\S+),"
    np_ref, np_got = _lines(ref, pattern), _lines(got, pattern)
    assert len(np_ref) == len(np_got) == 6
    assert np_got == pytest.approx(np_ref, abs=2e-4)
    pattern = r"^step \d+: train loss (\S+), val loss (\S+)$"
    assert re.findall(pattern, got, re.M) == re.findall(pattern, ref, re.M)
    pattern = r"^resumed val loss (\S+) \(best (\S+)\), ema (\S+) after"
    assert _lines(got, pattern) == pytest.approx(_lines(ref, pattern), abs=2e-4)
    assert _results(got) == pytest.approx(_results(ref), abs=2e-4)


def test_min_gpt_bfloat16_autocast_tracks_torch(tmp_path, capsys):
    # the forward under autocast("cpu", dtype=bfloat16), a disabled GradScaler's full protocol
    ref, got = _both("min_gpt.py", ["--dtype", "bfloat16"], tmp_path, capsys)
    pattern = r"^iter \d+: loss (\S+),"
    r, g = _lines(ref, pattern), _lines(got, pattern)
    assert len(r) == len(g) == 6
    assert g[0] == pytest.approx(r[0], abs=1e-5)  # the same bfloat16 roundings at the start
    assert g == pytest.approx(r, abs=5e-3)
    fp32 = _lines(_run("min_gpt.py", ["--out", str(tmp_path / "fp32"), "--init-from",
                                      str(tmp_path / "init.npz")], capsys, on_ember=True), pattern)
    assert g[0] != fp32[0]  # bfloat16 really computed: the first loss moved


def test_vae(tmp_path, capsys):
    out = _run("vae.py", ["--out", str(tmp_path)], capsys, on_ember=True)
    first, last = _results(out)
    assert 40 < first < 50  # 64 pixels at about ln(2) each
    assert last < 0.8 * first
    assert re.search(r"^Train Epoch: 1 \[128/256 \(50%\)\]\tLoss: \d+\.\d{6}$", out, re.M)
    assert re.search(r"^====> Epoch: 8 Average loss: \d+\.\d{4}$", out, re.M)
    assert re.search(r"^prior samples: \d+\.\d% of the pixels on$", out, re.M)
    nll = _lines(out, r"^validation -log p\(x\) <= (\S+) nats \(44 held-out images\)$")
    assert len(nll) == 1 and nll[0] < 1.1 * last
    _onnx_checked(out)


def test_vae_tracks_torch(tmp_path, capsys):
    ref, got = _both("vae.py", [], tmp_path, capsys)
    (rf, rl), (gf, gl) = _results(ref), _results(got)
    assert gf == pytest.approx(rf, abs=1e-4)  # same weights, deterministic evaluation
    # training draws shuffles and reparameterization noise from each library's own generator:
    # the curves agree in trend, not digit for digit
    assert gl == pytest.approx(rl, rel=0.1)
    pattern = r"^validation -log p\(x\) <= (\S+) nats"
    assert _lines(got, pattern) == pytest.approx(_lines(ref, pattern), rel=0.1)


def test_time_sequence(tmp_path, capsys):
    out = _run("time_sequence.py", ["--out", str(tmp_path)], capsys, on_ember=True)
    first, last, future = _results(out)
    assert first > 10 * last and future < 0.05
    assert out.count("STEP: ") == 4
    assert re.search(r"^test loss: \d\.\d{8}$", out, re.M)
    assert re.search(r"^future slope mse: \d\.\d{3}e-0\d$", out, re.M)
    _onnx_checked(out)


def test_time_sequence_tracks_torch(tmp_path, capsys):
    ref, got = _both("time_sequence.py", [], tmp_path, capsys)
    pattern = r"^(?:test )?loss: (\S+)$"
    r, g = _lines(ref, pattern), _lines(got, pattern)
    assert len(r) == len(g) > 40  # the same number of closure evaluations, in float64
    np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(_results(got), _results(ref), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_gumbel_vae(capsys, on_ember, hard):
    out = _run("gumbel_vae.py", ["--hard"] if hard else [], capsys, on_ember)
    first, last = _results(out)
    assert 30 < first < 40 and last < 0.85 * first  # it learned past the mean image
    assert re.search(r"^epoch 12 \| train +\d+\.\d{3} \| test +\d+\.\d{3} \| kl \d\.\d{3} \| "
                     r"tau 0\.564$", out, re.M)
    assert re.search(r"^\d+ distinct codes for 128 test images; prior samples \d+\.\d% on$",
                     out, re.M)


def test_shim_imports_what_programs_import():
    # `from torch.cuda.amp import ...` needs torch.cuda to be a package to the import system
    with torch_is_ember():
        import torch.special
        from torch.cuda.amp import GradScaler, autocast  # noqa: F401
        from torch.optim.swa_utils import AveragedModel  # noqa: F401
        from torch.testing import assert_close  # noqa: F401
        from torch.utils.data.dataloader import DataLoader  # noqa: F401

        assert torch.special.__name__ == "ember.special"
