"""The third set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
tensor idioms, a ViT, a U-Net, an nn.Transformer translator, knowledge distillation, gradient
accumulation with checkpointing, parametrizations, SWA/EMA, padded sequences with samplers,
ResNet model surgery, torch.func per-sample gradients, torch.distributions policies, a SimCLR
contrastive loss and bfloat16 autocast training. Where a program draws no random numbers of its
own library, ember's output is compared with torch's line by line or to float rounding."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_compat_programs import _close_text, _lines, _on_both, _results, _run, _same_text

pytest.importorskip("torch")

def _both(script: str, argv: list[str], tmp_path, capsys) -> tuple[str, str]:
    """The script on torch, saving its initial weights, then on ember from those weights."""
    init = str(tmp_path / "init.npz")
    ref = _run(script, [*argv, "--save-init", init], capsys, on_ember=False)
    got = _run(script, [*argv, "--init-from", init], capsys, on_ember=True)
    return ref, got


def test_tensor_idioms_print_what_torch_prints(tmp_path, capsys):
    ref, got = _on_both("tensor_idioms.py", [], tmp_path, capsys)
    assert len(ref.splitlines()) > 100
    _same_text(ref, got)


def test_vit_classifier_tracks_torch(tmp_path, capsys):
    ref, got = _both("vit_classifier.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert 1.2 < first < 3.5 and last < first and acc > 0.4  # 4 classes: chance is 0.25
    assert "ViT: 18180 parameters, 2 blocks, tokens (1, 10, 32)" in got
    assert "attention map (1, 10, 10), rows sum to 1: True" in got


def test_unet_segmentation_tracks_torch(tmp_path, capsys):
    ref, got = _both("unet_segmentation.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=2e-4)
    first, last, iou = _results(got)
    assert last < 0.6 * first and iou > 0.5
    for line in ("channels_last agrees: True", "reloaded (epoch 5) agrees: True",
                 "output (2, 1, 20, 20) from input (2, 1, 20, 20)"):
        assert line in got


def test_unet_bilinear_runs(tmp_path, capsys):
    out = _run("unet_segmentation.py", ["--bilinear", "--epochs", "2"], capsys, on_ember=True)
    first, last, _ = _results(out)
    assert last < first and "channels_last agrees: True" in out


def test_transformer_translation_float64_matches_torch(tmp_path, capsys):
    # float64: the same training run to many digits (float32 drifts apart over the epochs)
    ref, got = _both("transformer_translation.py", ["--double", "--epochs", "4"], tmp_path,
                     capsys)
    pattern = r"^Epoch: \d+, Train loss: (\S+), Val loss: (\S+),"
    assert len(_lines(ref, pattern)) == 8
    assert _lines(got, pattern) == pytest.approx(_lines(ref, pattern), rel=1e-6)
    assert "causal mask row 1: [0.0, 0.0, -inf, -inf]" in got


def test_transformer_translation_learns(tmp_path, capsys):
    import ember

    out = _run("transformer_translation.py", [], capsys, on_ember=True)
    first, last, _ = _results(out)
    assert 2.8 < first < 3.6 and last < first - 1.2  # ln(13 tokens) at the start
    assert re.search(r"^translate \[[\d, ]+\] -> \[[\d, ]*\] \(want \[[\d, ]+\]\)$", out, re.M)
    assert ember.get_default_dtype() == ember.float32


def test_distillation_tracks_torch(tmp_path, capsys):
    ref, got = _both("distillation.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=1e-4)
    teacher, student, baseline, acc = _results(got)
    assert teacher < 0.5 and acc > 0.7
    assert "hook removed: True" in got and "trainable 0" in got


def test_grad_accum_checkpoint_tracks_torch(tmp_path, capsys):
    ref, got = _both("grad_accum_checkpoint.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=1e-4)
    for line in ("checkpoint(use_reentrant=False) gradients match: True",
                 "checkpoint(use_reentrant=True) gradients match: True",
                 "checkpoint_sequential matches: True True",
                 "replayed dropout mask consistent: True", "grads cleared: True",
                 "accumulated == big batch: True", "vector_to_parameters zeroed: True"):
        assert line in got


def test_parametrizations_print_what_torch_prints(tmp_path, capsys):
    ref, got = _on_both("parametrizations.py", [], tmp_path, capsys)
    _same_text(ref, got)
    for line in ("old weight_norm keeps output: True", "output unchanged: True",
                 "doubling g doubles the weight: True", "symmetric: True",
                 "cached() returns the same tensor: True", "orthogonal at init: True",
                 "removed, kept value: True Parameter False", "chained parametrizations: 2"):
        assert line in got
    assert re.search(r"^spectral norm after power iterations: 1\.0000", got, re.M)
    assert re.search(r"^orthogonal after training: True, loss (\S+) -> (\S+)$", got, re.M)


def test_swa_ema_tracks_torch(tmp_path, capsys):
    ref, got = _both("swa_ema.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=1e-4)
    assert "EMA by hand matches: True; n_averaged 80 / swa 4" in got
    assert "running mean is the data mean: True" in got and "custom avg_fn: True" in got


def test_padded_sequences_on_both(tmp_path, capsys):
    ref, got = _on_both("padded_sequences.py", [], tmp_path, capsys)
    for out in (ref, got):
        first, last, acc = _results(out)
        assert last < 0.2 * first and acc > 0.9
        frac = _lines(out, r"^rebalanced: fraction of class 1 drawn (\S+)$")
        assert 0.35 < frac[0] < 0.65  # the sampler rebalanced the 1-in-5 class
    # what does not depend on the libraries' random draws prints the same
    same = [line for line in ref.splitlines()
            if line.startswith(("split sizes", "default_collate", "h_n", "packed ==", "Subset",
                                "BatchSampler", "IterableDataset"))]
    assert len(same) == 7
    assert [line for line in got.splitlines() if line in same] == same


def test_resnet_surgery_prints_what_torch_prints(tmp_path, capsys):
    ref, got = _on_both("resnet_surgery.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-4, atol=1e-5)
    assert "missing keys: ['fc.weight', 'fc.bias']" in got
    assert "stem unchanged: True; hook saw (24, 16) x12; calls 12" in got


def test_per_sample_grads_print_what_torch_prints(tmp_path, capsys):
    ref, got = _on_both("per_sample_grads.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-5, atol=1e-5)
    assert "Newton step recovers w: True" in got and "matches loop: True" in got


def test_policy_distributions_on_both(tmp_path, capsys):
    ref, got = _on_both("policy_distributions.py", [], tmp_path, capsys)
    cut = ref.index("REINFORCE")
    _close_text(ref[:cut], got[:cut], rtol=1e-6, atol=1e-6)  # no random draws before
    for out in (ref, got):
        first, last, best_p, std = _results(out)
        assert last > first + 1.0 and last > -0.05 and best_p > 0.8
        assert "PPO: best arm 2, its probability > 0.8: True, KL from uniform True" in out
        assert "mu [0.6, -0.3]" in out and "std shrinks True" in out


def test_contrastive_simclr_tracks_torch(tmp_path, capsys):
    ref, got = _both("contrastive_simclr.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=2e-4)
    first, last, probe, knn = _results(got)
    assert last < first and probe > 0.6 and knn > 0.6
    assert "two formulations agree: True" in got


def test_bf16_autocast_tracks_torch(tmp_path, capsys):
    ref, got = _both("bf16_autocast.py", [], tmp_path, capsys)
    cut = ref.index("step  0")
    _same_text(ref[:cut], got[:cut])  # the dtypes each op gives under autocast
    pattern = r"^step +\d+ loss (\S+) "
    r, g = _lines(ref, pattern), _lines(got, pattern)
    assert len(r) == len(g) == 4
    assert g[0] == r[0]  # the same bfloat16 roundings in the first forward
    assert g == pytest.approx(r, abs=5e-3)
    tail = lambda out: out[out.index("master weights"):out.index("RESULT")]  # noqa: E731
    _same_text(tail(ref), tail(got))


def test_wgan_gp_tracks_torch(tmp_path, capsys):
    # the gradient penalty's double backward through Conv1d, LayerNorm and LeakyReLU
    ref, got = _both("wgan_gp.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=2e-4)
    assert "critic frozen for the generator step: True / True" in got
    first, last, gp = _results(got)
    assert np.isfinite([first, last, gp]).all() and gp < 1.0


def test_audio_features_track_torch(tmp_path, capsys):
    # window functions, reflect padding, unfold framing, DFT by matmul and by Conv1d, a Kaiser FIR
    ref, got = _both("audio_features.py", [], tmp_path, capsys)
    cut = ref.index("test accuracy")
    _close_text(ref[:cut], got[:cut], rtol=1e-3, atol=2e-4)
    (rf, rl, racc), (gf, gl, gacc) = _results(ref), _results(got)
    assert gf == pytest.approx(rf, abs=1e-4) and gl == pytest.approx(rl, abs=1e-3)
    assert gacc == pytest.approx(racc, abs=0.1)  # one borderline clip may flip
    for line in ("conv1d STFT agrees: True", "low-pass removes high frequencies: True",
                 "empty filters 0"):
        assert line in got


def test_vit_resumes_on_ember_from_a_torch_checkpoint(tmp_path, capsys):
    # torch trains 3 epochs and torch.save's model, optimizer and OneCycleLR states; ember's
    # torch.load reads that file and finishes the run as torch does
    ckpt = str(tmp_path / "ckpt.pt")
    _run("vit_classifier.py", ["--stop-after", "3", "--save", ckpt], capsys, on_ember=False)
    ref = _run("vit_classifier.py", [], capsys, on_ember=False)
    got = _run("vit_classifier.py", ["--resume", ckpt], capsys, on_ember=True)
    assert re.search(r"^resumed at epoch 3: test loss \S+ acc \S+ lr 0\.002134 step 24", got, re.M)
    pattern = r"^epoch [456] train loss (\S+) test loss (\S+) acc (\S+) lr (\S+)$"
    assert len(_lines(got, pattern)) == 12
    assert _lines(got, pattern) == pytest.approx(_lines(ref, pattern), abs=2e-4)
    assert _results(got)[1:] == pytest.approx(_results(ref)[1:], abs=2e-4)


def test_custom_optimizer_tracks_torch(tmp_path, capsys):
    # Optimizer and LRScheduler subclasses, zeros_like(memory_format=preserve_format), closures
    ref, got = _both("custom_optimizer.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-4, atol=2e-5)
    assert "MyAdamW matches AdamW after 5 steps: True" in got
    assert "post hook ran 40 times (MyAdamW)" in got
    first, last, lion = _results(got)
    assert last < 0.6 * first and lion < first


def test_nerf_toy_tracks_torch(tmp_path, capsys):
    # positional encoding, alpha compositing with cumprod, inverse-CDF sampling (searchsorted)
    ref, got = _both("nerf_toy.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=2e-4)
    first, last = _results(got)
    assert last > first + 2.0  # PSNR in dB
    assert "fine samples stay in range: True" in got


def test_density_models_track_torch(tmp_path, capsys):
    # a RealNVP flow (MultivariateNormal base), a MixtureSameFamily MDN, transformed and
    # low-rank distributions; the flow's samples come from each library's generator
    ref, got = _both("density_models.py", [], tmp_path, capsys)
    _close_text(ref, got, rtol=1e-3, atol=5e-4)
    flow_first, flow_last, mdn_last = _results(got)
    assert flow_last < flow_first - 0.2 and mdn_last < 0.0
    assert "validate_args refused a negative scale" in got and "flow inverts: True" in got
