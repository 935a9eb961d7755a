"""Small programs in the style of public PyTorch examples, written against `torch`, run
unchanged on torch and on ember through a `torch` -> `ember` import shim (issue 15). They touch
what real programs touch: loss formatting, legacy constructors, sequences, backend flags, seeds,
compile, autocast, GradScaler, module paths, saving whole objects and the weights-only opt-ins."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
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
    """Programs set process-wide switches (use_deterministic_algorithms, set_default_dtype);
    the next test gets them back as they were."""
    libs = [__import__("ember")]
    try:
        import torch

        libs.append(torch)
    except ImportError:
        pass
    saved = [(lib, lib.are_deterministic_algorithms_enabled(),
              lib.is_deterministic_algorithms_warn_only_enabled(), lib.get_default_dtype()) for lib in libs]
    try:
        yield
    finally:
        for lib, mode, warn_only, dtype in saved:
            lib.use_deterministic_algorithms(mode, warn_only=warn_only)
            lib.set_default_dtype(dtype)


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


NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")
ANY_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _close_text(ref: str, got: str, rtol: float, atol: float,
                loose: dict[str, tuple[float, float]] | None = None) -> None:
    """The outputs print the same lines with numbers equal to the tolerances. `loose` maps a
    regex to the (rtol, atol) of the lines it matches: counts and accuracies over a finite set,
    where one near-tie sample flips with the last bit of a rounding."""
    ref_lines, got_lines = ref.splitlines(), got.replace("ember.", "torch.").splitlines()
    assert len(got_lines) == len(ref_lines), (ref, got)
    for r, g in zip(ref_lines, got_lines):
        tol = next((t for pat, t in (loose or {}).items() if re.search(pat, r)), None)
        num = NUMBER if tol is None else ANY_NUMBER  # a loose line's integer counts are numbers too
        assert num.sub("#", r) == num.sub("#", g), (r, g)
        rt, at = tol or (rtol, atol)
        np.testing.assert_allclose([float(v) for v in num.findall(g)],
                                   [float(v) for v in num.findall(r)], rtol=rt, atol=at,
                                   err_msg=f"torch: {r}\nember: {g}")


def _check_program(script: str, capsys, rtol: float, atol: float,
                   loose: dict[str, tuple[float, float]] | None = None) -> str:
    """The script's output on ember (module names as torch prints them), compared with its
    output on torch where torch is installed (`loose`: see _close_text)."""
    got = _run(script, [], capsys, on_ember=True).replace("ember.", "torch.")
    ref = _torch_output(script, [], capsys)
    if ref is not None:
        _close_text(ref, got, rtol=rtol, atol=atol, loose=loose)
    return got


REFERENCE = HERE / "reference"


def _installed_torch() -> str | None:
    """The installed torch's version, read without importing it (importing takes seconds)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_output(script: str, argv: list[str], capsys, out_dir: str | None = None) -> str | None:
    """The script's output on torch. torch's output for a given version is fixed (seeded, one
    thread), so it is stored in compat_programs/reference/ with the version that wrote it and
    read back while that version (or no torch) is installed: the torch half of every comparison
    then costs nothing. A different torch, a missing file or EMBER_COMPAT_TORCH=1 runs torch
    live; EMBER_COMPAT_REGEN=1 also (re)writes the file. None: no torch and nothing stored.
    `out_dir`: passed as --out to a live run (where the program writes its files)."""
    key = Path(script).stem
    if argv:
        key += "__" + hashlib.sha1(" ".join(argv).encode()).hexdigest()[:10]
    path = REFERENCE / f"{key}.txt"
    installed = _installed_torch()
    if os.environ.get("EMBER_COMPAT_TORCH") != "1" and path.exists():
        header, _, text = path.read_text().partition("\n")
        if installed is None or header == f"# torch {installed}":
            return text
    if installed is None:
        return None
    text = _run(script, argv + (["--out", out_dir] if out_dir else []), capsys, on_ember=False)
    if os.environ.get("EMBER_COMPAT_REGEN") == "1":
        REFERENCE.mkdir(exist_ok=True)
        path.write_text(f"# torch {installed}\n{text}")
    return text


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


# ---- the second set: DCGAN, MNIST CNN, seq2seq attention, triplet embeddings,
# super-resolution, custom autograd Functions, a word-level Transformer LM, actor-critic --------
def _on_both(script: str, argv: list[str], tmp_path, capsys) -> tuple[str, str]:
    """The script's output on torch, then on ember (each with its own --out where it takes
    one)."""
    rest = [a for i, a in enumerate(argv) if a != "--out" and (i == 0 or argv[i - 1] != "--out")]
    ref = _torch_output(script, rest, capsys,
                        out_dir=str(tmp_path / "torch") if "--out" in argv else None)
    if ref is None:
        pytest.skip("torch is not installed and no reference output is stored")
    out = ["--out", str(tmp_path / "ember")] if "--out" in argv else []
    got = _run(script, rest + out, capsys, on_ember=True)
    return ref, got


def _same_text(ref: str, got: str) -> None:
    """The two outputs print alike, torch's module name aside."""
    assert got.replace("ember.", "torch.") == ref


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_dcgan(tmp_path, capsys, on_ember):
    out = _run("dcgan.py", ["--outf", str(tmp_path)], capsys, on_ember)
    d_x, gap, g_first, g_last = _results(out)
    assert 0 < d_x < 1 and np.isfinite([gap, g_first, g_last]).all()
    assert 0.6 < g_first < 0.9  # log 2 for a discriminator that cannot tell yet
    assert "generator: 12640 parameters; discriminator: 2464 parameters" in out
    assert "ConvTranspose2d(8, 32, kernel_size=(4, 4), stride=(1, 1), bias=False)" in out
    lines = re.findall(r"^\[(\d)/3\]\[(\d)/8\] Loss_D: (\d\.\d{4}) Loss_G: (\d\.\d{4}) "
                       r"D\(x\): (\d\.\d{4}) D\(G\(z\)\): (\d\.\d{4}) / (\d\.\d{4})$", out, re.M)
    assert len(lines) == 6
    assert (tmp_path / "netG_epoch_2.pth").exists() and (tmp_path / "netD_epoch_2.pth").exists()


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_mnist_cnn(tmp_path, capsys, on_ember):
    out = _run("mnist_cnn.py", ["--out", str(tmp_path)], capsys, on_ember)
    first, last, acc = _results(out)
    assert 1.2 < first < 1.5 and last < 0.9 * first and acc > 0.4  # 4 classes: chance is 0.25
    assert re.search(r"^batch: \(32, 1, 12, 12\) (torch|ember)\.float32, targets \(32,\) "
                     r"(torch|ember)\.int64$", out, re.M)
    assert re.search(r"^Train Epoch: 4 \[160/300 \(50%\)\]\tLoss: \d\.\d{6}$", out, re.M)
    assert re.search(r"^Test set: Average loss: \d\.\d{4}, Accuracy: \d+/100 \(\d+%\)$", out,
                     re.M)
    assert re.findall(r"^lr now (\S+)$", out, re.M) == ["0.7000", "0.4900", "0.3430", "0.2401"]
    resumed = _lines(out, r"^resumed: loss (\S+), lr 0\.1681$")
    assert len(resumed) == 1 and resumed[0] < first


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_seq2seq_attention(capsys, on_ember):
    out = _run("seq2seq_attention.py", [], capsys, on_ember)
    first, last, exact = _results(out)
    assert 2.0 < first < 2.4  # ln(9 tokens) at the start
    assert last < 0.3 and exact > 0.5
    assert re.findall(r"^(\d+) \((\d+)%\) \d\.\d{4}$", out, re.M) == [
        ("50", "33"), ("100", "66"), ("150", "100")]
    src, want = re.search(r"^> (.+)\n= (.+)\n< ", out, re.M).groups()
    assert want.split() == src.split()[::-1]


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_triplet_embedding(capsys, on_ember):
    out = _run("triplet_embedding.py", [], capsys, on_ember)
    first, last, recall1 = _results(out)
    assert last < 0.2 * first and recall1 > 0.8
    assert re.findall(r"^step +\d+ +loss \d\.\d{4} +lr (\S+)$", out, re.M) == [
        "0.1", "0.1", "0.01", "0.01"]


def test_super_resolution_on_both(tmp_path, capsys):
    ref, got = _on_both("super_resolution.py", ["--out", "x"], tmp_path, capsys)
    (rb, rf, rl), (gb, gf, gl) = _results(ref), _results(got)
    # the same images (NumPy-made): the interpolation baselines agree to the digit
    assert re.search(r"^baselines: .*$", got, re.M).group(0) == \
        re.search(r"^baselines: .*$", ref, re.M).group(0)
    assert gb == pytest.approx(rb, abs=1e-3)
    for first, last in ((rf, rl), (gf, gl)):
        assert last > first + 5  # PSNR in dB: the network learned to upsample
    assert gl == pytest.approx(rl, abs=2.0)
    assert "Checkpoint saved to model_epoch_6.pth" in got
    assert (tmp_path / "ember" / "model_epoch_6.pth").exists()


def test_custom_autograd_on_both(capsys, tmp_path):
    ref, got = _on_both("custom_autograd.py", [], tmp_path, capsys)
    # the same float32 arithmetic from the same start: the fitted coefficients agree
    assert _results(got) == pytest.approx(_results(ref), rel=1e-4, abs=1e-6)
    tail = lambda out: out[out.index("Linear(input_features"):out.index("RESULT")]  # noqa: E731
    _same_text(tail(ref), tail(got))
    assert "gradcheck LinearFunction: True" in got and "gradgradcheck Cube: True" in got
    assert "sorted [1.0, 2.0, 3.0] [1, 2, 0] grad [100.0, 1.0, 10.0]" in got


def test_word_transformer(tmp_path, capsys):
    out = _run("word_transformer.py", ["--out", str(tmp_path)], capsys, on_ember=True)
    first, last, test_loss = _results(out)
    assert 2.8 < first < 3.4 and last < 1.2 and test_loss < 1.3  # ln(20 words) at the start
    assert "vocabulary 20 words, train data (131, 16)" in out
    assert "causal mask: [0.0, 0.0, -inf, -inf]" in out
    assert re.search(r"^\| epoch   1 \|    10/   10 batches \| lr 1\.00 \| ms/batch +\d+\.\d\d \| "
                     r"loss +\d\.\d\d \| ppl +\d+\.\d\d$", out, re.M)
    assert re.search(r"^generated: the cat \w+ \w+ \w+$", out, re.M)


def test_word_transformer_tracks_torch(tmp_path, capsys):
    pytest.importorskip("torch")
    init = str(tmp_path / "init.npz")
    ref = _run("word_transformer.py", ["--out", str(tmp_path / "t"), "--save-init", init],
               capsys, on_ember=False)
    got = _run("word_transformer.py", ["--out", str(tmp_path / "e"), "--init-from", init],
               capsys, on_ember=True)
    # no dropout, batches in order: the same training run to float32 rounding
    pattern = r"valid loss +(\S+) \|"
    assert len(_lines(ref, pattern)) == 3
    assert _lines(got, pattern) == pytest.approx(_lines(ref, pattern), abs=2e-3)
    assert _results(got) == pytest.approx(_results(ref), abs=2e-3)


def test_actor_critic_on_both(tmp_path, capsys):
    ref, got = _on_both("actor_critic.py", [], tmp_path, capsys)
    for out in (ref, got):
        early, late, success = _results(out)
        assert late > 0.5 and late > early and success >= 0.75
        assert re.search(r"^Episode 100\tLast reward: -?\d\.\d\d\tAverage reward: -?\d\.\d\d$",
                         out, re.M)
    # tensors print alike
    printed = lambda out: out[out.index("tensor([[ 5.0000e-01"):out.index("greedy")]  # noqa: E731
    _same_text(printed(ref), printed(got))


def test_basics_tour_prints_what_torch_prints(tmp_path, capsys):
    ref, got = _on_both("basics_tour.py", [], tmp_path, capsys)
    ref_lines, got_lines = ref.splitlines(), got.replace("ember.", "torch.").splitlines()
    assert len(got_lines) == len(ref_lines) > 150
    cut = ref_lines.index("Epoch 1")
    # tensors, modules, return types and gradients print exactly as on torch
    assert got_lines[:cut] == ref_lines[:cut]
    # the training run from the same weights: the same numbers to float32 rounding
    number = re.compile(r"-?\d+\.\d+")
    for r, g in zip(ref_lines[cut:], got_lines[cut:]):
        assert number.sub("#", r) == number.sub("#", g)
        np.testing.assert_allclose([float(v) for v in number.findall(g)],
                                   [float(v) for v in number.findall(r)], rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_text_classification(capsys, on_ember):
    out = _run("text_classification.py", [], capsys, on_ember)
    first, last, test_acc = _results(out)
    assert first > 0.5 and last > 0.9 and test_acc > 0.9  # 4 topics: chance is 0.25
    assert re.search(r"^vocab size \d+; ids of 'the market xyzzy': \[\d+, \d+, 0\]$", out, re.M)
    assert re.search(r"^\| end of epoch   6 \| valid accuracy +\d\.\d{3} \| lr \d\.\d{4}$", out,
                     re.M)
    assert "This is a Sports news" in out


def test_finetuning_on_both(tmp_path, capsys):
    ref, got = _on_both("finetuning.py", [], tmp_path, capsys)
    for out in (ref, got):
        pre, head, final = _results(out)
        assert pre > 0.8 and head > 0.8 and final > 0.9
    # what does not depend on the random draws prints the same
    same = [line for line in ref.splitlines()
            if line.startswith(("missing keys", "unexpected keys", "strict load", "trainable",
                                "modules:", "children:", "group lrs"))]
    assert len(same) == 7 and "strict load refused: True" in same
    assert [line for line in got.splitlines() if line in same] == same
    lrs = r"^epoch \d: accuracy \d\.\d{3}, lrs (.+)$"
    assert re.findall(lrs, got, re.M) == re.findall(lrs, ref, re.M)


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_spatial_transformer(capsys, on_ember):
    out = _run("spatial_transformer.py", [], capsys, on_ember)
    first, last, acc = _results(out)
    assert 1.3 < first < 1.45  # ln 4 at the identity transform
    assert last < 0.8 * first and acc > 0.6
    assert re.search(r"^Test set: Average loss: \d\.\d{4}, Accuracy: \d+/256 \(\d+%\)$", out,
                     re.M)
    assert re.search(r"^warped batch \(4, 1, 16, 16\) theta\[0\] (torch|ember)\.Size\(\[2, 3\]\)$",
                     out, re.M)


@pytest.mark.parametrize("on_ember", [True, False], ids=["ember", "torch"])
def test_dqn(capsys, on_ember):
    out = _run("dqn.py", [], capsys, on_ember)
    early, late, greedy = _results(out)
    assert late > 0.8 and greedy == pytest.approx(0.99)  # three steps right: 2 x -0.01 + 1
    assert "greedy actions: [1, 1, 1, 1]" in out
    assert re.findall(r"^episode +(\d+) +return [+-]\d\.\d\d +memory \d+$", out, re.M) == [
        "0", "20", "40"]


def test_data_pipeline_prints_what_torch_prints(tmp_path, capsys):
    ref, got = _on_both("data_pipeline.py", [], tmp_path, capsys)
    assert len(ref.splitlines()) == 29
    _same_text(ref, got)
