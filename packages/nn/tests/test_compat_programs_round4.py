"""The fourth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a DDPM, GCN/GAT node classification, a BiLSTM-CRF tagger, a physics-informed network, a
mixture-of-experts layer, magnitude pruning, MAML, deployment-time BN fusion, an adaptive-softmax
language model, a fractional max-pooling CNN with mixup, neural style transfer, temperature
scaling calibration, Gaussian-process regression and image preprocessing. Each draws its data,
initial weights and noise from NumPy, so ember's output is compared with torch's line by line,
numbers to a tolerance."""

from __future__ import annotations

import pytest
from test_compat_programs import _close_text, _on_both, _results

pytest.importorskip("torch")


def _check(script, tmp_path, capsys, rtol=1e-4, atol=1e-5, argv=()):
    ref, got = _on_both(script, list(argv), tmp_path, capsys)
    _close_text(ref, got, rtol=rtol, atol=atol)
    return got


def test_ddpm_toy_tracks_torch(tmp_path, capsys):
    got = _check("ddpm_toy.py", tmp_path, capsys)
    first, last, radius = _results(got)
    assert 0.8 < first < 1.2 and last < 0.6 * first  # the noise prediction learned something
    assert 1.0 < radius < 3.0  # samples land near the ring of radius 2
    assert "inference tensors: True, requires_grad False" in got


def test_gnn_node_classification_tracks_torch(tmp_path, capsys):
    got = _check("gnn_node_classification.py", tmp_path, capsys)
    gcn, gat = _results(got)
    assert gcn > 0.8 and gat > 0.8
    assert "sparse == dense propagation: True" in got
    assert "attention sums to 1 per node and head: True" in got


def test_bilstm_crf_tracks_torch(tmp_path, capsys):
    got = _check("bilstm_crf.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.3 * first and acc > 0.85
    assert "best path score <= log Z: True" in got and "gold score <= log Z: True" in got


def test_pinn_heat_tracks_torch(tmp_path, capsys):
    import ember

    got = _check("pinn_heat.py", tmp_path, capsys, rtol=1e-3, atol=1e-6)
    first, adam, lbfgs, rel = _results(got)
    assert adam < 0.05 * first and lbfgs < adam and rel < 0.1
    assert "vmap(jacrev) matches autograd.grad: True" in got
    assert ember.get_default_dtype() == ember.float32  # the program put it back


def test_moe_layer_tracks_torch(tmp_path, capsys):
    got = _check("moe_layer.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, aux, dropped = _results(got)
    assert last < 0.3 * first and aux >= 1.0 and 0.0 <= dropped < 0.5


def test_pruning_prints_what_torch_prints(tmp_path, capsys):
    got = _check("pruning.py", tmp_path, capsys)
    dense, pruned, tuned, sparsity = _results(got)
    assert dense > 0.9 and tuned > 0.8 and 0.55 < sparsity < 0.65
    for line in ("fc1 buffers: ['weight_mask']", "iterative container: PruningContainer of 2",
                 "pruned entries still zero: True", "accuracy unchanged by remove: True",
                 "custom: fc2.bias True, is_pruned True / False"):
        assert line in got


def test_maml_sinusoid_tracks_torch(tmp_path, capsys):
    got = _check("maml_sinusoid.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, pre, post = _results(got)
    assert post < pre  # adaptation helps on held-out tasks


def test_inference_deployment_tracks_torch(tmp_path, capsys):
    got = _check("inference_deployment.py", tmp_path, capsys, atol=2e-5)
    train_acc, diff, pruned_acc = _results(got)
    assert train_acc > 0.9 and diff < 1e-4 and pruned_acc > 0.5
    for line in ("after consume_prefix: ['conv1.weight', 'bn1.weight', 'bn1.bias']",
                 "skip_init: Linear (12, 16) on cpu", "reloaded model agrees: True",
                 "fused agrees: True", "channels_last weight: True, stride (72, 1, 24, 8)",
                 "channels_last agrees: True", "isinstance RemovableHandle: True"):
        assert line in got


def test_adaptive_softmax_lm_tracks_torch(tmp_path, capsys):
    got = _check("adaptive_softmax_lm.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, unigram = _results(got)
    assert last < first and last < unigram  # better than the unigram model
    assert "log_prob (60, 120) sums to 1: True" in got
    assert "predict == argmax log_prob: True" in got


def test_fractional_pool_cnn_tracks_torch(tmp_path, capsys):
    got = _check("fractional_pool_cnn.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < first and acc > 0.8
    assert "feature map sizes: [(11, 11), (7, 7), (4, 4)]" in got
    assert "indices pick the maxima: True" in got


def test_style_transfer_tracks_torch(tmp_path, capsys):
    # 30 Adam steps on the image: the trajectory drifts ~0.2 % with the CPU's SIMD width
    got = _check("style_transfer.py", tmp_path, capsys, rtol=5e-3, atol=3e-4)
    s0, s1, c0, c1 = _results(got)
    assert s1 < 0.1 * s0 and c0 == 0.0 and c1 > 0
    assert "image in [0, 1]: True, grad kept: True, cnn frozen: True" in got


def test_calibration_tracks_torch(tmp_path, capsys):
    # torch.histogram, bucketize over linspace bin boundaries (bit-equal to torch's), LBFGS
    got = _check("calibration.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    before, after, temperature = _results(got)
    assert after < before and temperature > 1.0  # the overfit net was overconfident
    assert "accuracy unchanged: True" in got and "density integrates to 1: True" in got


def test_gp_regression_tracks_torch(tmp_path, capsys):
    # cdist, linalg.cholesky, cholesky_solve, solve_triangular, logdet, MultivariateNormal
    got = _check("gp_regression.py", tmp_path, capsys, rtol=1e-6, atol=1e-8)
    first, last, rmse, coverage = _results(got)
    assert last < 0.5 * first and rmse < 0.2 and coverage > 0.9
    assert "MultivariateNormal agrees: True; logdet agrees: True" in got


def test_image_preprocessing_tracks_torch(tmp_path, capsys):
    # antialiased resizes, histogram equalization, index_reduce, torch.utils.dlpack
    got = _check("image_preprocessing.py", tmp_path, capsys, rtol=1e-5, atol=1e-4)
    pixel, eq_std, _ = _results(got)
    assert 0.2 < eq_std < 0.4 and pixel > 0
    assert "dlpack round trip shares memory: True" in got
    assert "image 1: (3, 40, 80) -> resize bicubic (3, 24, 48) -> crop (3, 24, 24)" in got
