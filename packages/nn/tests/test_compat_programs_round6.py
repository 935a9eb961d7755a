"""The sixth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a PixelCNN with masked convolutions, PointNet / DGCNN point-cloud classification, a capsule
network with dynamic routing, a spectrally normalized hinge GAN with lazy R1, mixup / CutMix
with label smoothing, an STFT-domain speech denoiser, Sinkhorn optimal transport, a tabular
model with early stopping, a mixture density network, hook-based model inspection and surgery,
a selective state-space (Mamba-style) model and hand-written quantization-aware training
with fake quantization. Each draws its data, initial weights and noise
from NumPy, so ember's output is compared with torch's line by line, numbers to a tolerance."""

from __future__ import annotations

import pytest
from test_compat_programs import _close_text, _on_both, _results

pytest.importorskip("torch")


def _check(script, tmp_path, capsys, rtol=1e-4, atol=1e-5, argv=()):
    ref, got = _on_both(script, list(argv), tmp_path, capsys)
    _close_text(ref, got, rtol=rtol, atol=atol)
    return got.replace("ember.", "torch.")


def test_pixelcnn_tracks_torch(tmp_path, capsys):
    # a Conv2d subclass whose registered mask buffer is multiplied into weight.data in forward,
    # cross_entropy over (N, C, H, W) logits, pixel-by-pixel multinomial sampling
    got = _check("pixelcnn.py", tmp_path, capsys, rtol=1e-3, atol=1e-5)
    first, last, bpp = _results(got)
    assert last < 0.3 * first and bpp < 0.3
    assert "causal: True sees the past: True" in got
    assert "mask A row 2: [1.0, 1.0, 0.0, 0.0, 0.0] mask B row 1: [1.0, 1.0, 0.0]" in got
    assert "sample (4, 1, 8, 8) binary: True" in got


def test_pointnet_dgcnn_tracks_torch(tmp_path, capsys):
    # T-Nets applied with bmm, Conv1d(k=1) + BatchNorm1d, knn by topk on pairwise distances,
    # EdgeConv features gathered through a flattened index
    # (training drifts ~0.4 % between CPUs of different SIMD widths: the regularizer's sum)
    got = _check("pointnet_dgcnn.py", tmp_path, capsys, rtol=1e-2, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.3 * first and acc > 0.4  # 4 classes: chance is 0.25
    assert "knn (2, 64, 4) torch.int64 self is nearest: True" in got
    assert "edge features (2, 6, 64, 4)" in got
    assert "permutation invariant: True" in got


def test_capsule_routing_tracks_torch(tmp_path, capsys):
    got = _check("capsule_routing.py", tmp_path, capsys, rtol=1e-3, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.9
    assert "squash lengths [0.96154, 0.0]" in got
    assert "in (0, 1): True coupling sums to 1: True" in got


def test_sngan_hinge_tracks_torch(tmp_path, capsys):
    # parametrizations.spectral_norm (power iteration buffers _u/_v, eval-mode sigma), hinge
    # loss, lazy R1 through autograd.grad(create_graph=True), EMA generator by lerp_
    # (a GAN: the EMA samples' mode fraction drifts ~1 % between CPUs of different SIMD widths)
    got = _check("sngan_hinge.py", tmp_path, capsys, rtol=2e-2, atol=1e-4)
    first, last, modes = _results(got)
    assert 1.5 < first < 2.5 and modes >= 6
    assert "D buffers: ['_u', '_v']" in got
    assert "layer 0: sigma(W_sn) 1.0000" in got and "layer 2: sigma(W_sn) 1.0000" in got


def test_mixup_cutmix_tracks_torch(tmp_path, capsys):
    # Beta's moments / log_prob / entropy, probability-target cross_entropy == label_smoothing,
    # SequentialLR(LinearLR, CosineAnnealingLR), SGD nesterov with per-group weight decay
    got = _check("mixup_cutmix.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < first and acc > 0.5  # 5 classes: chance is 0.2
    assert "Beta(0.4, 0.4): mean 0.5000 var 0.13889 entropy -0.47436" in got
    assert "soft ce 2.16614 prob-target ce 2.16614 label_smoothing 2.16614" in got
    assert "sample (1000,) in [0, 1]: True rsample has grad: True" in got


def test_stft_denoiser_tracks_torch(tmp_path, capsys):
    # stft/istft(length=) round trip, angle, polar with autograd, GLU / nn.GLU mask network
    got = _check("stft_denoiser.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, gain = _results(got)
    assert last < 0.6 * first and gain > 2.0
    assert "stft (2, 65, 65) torch.complex64 window (128,)" in got
    assert "< 1e-5: True" in got and "phase in [-pi, pi]: True" in got


def test_sinkhorn_ot_tracks_torch(tmp_path, capsys):
    # log-domain Sinkhorn (logsumexp), cdist, a particle flow by Adam on the divergence, float64
    got = _check("sinkhorn_ot.py", tmp_path, capsys, rtol=1e-5, atol=1e-7)
    first, last, err = _results(got)
    assert last < 0.05 * first and err < 0.05
    assert "col sums ok True" in got and "divergence(x, x) == 0: True" in got
    import ember

    assert ember.get_default_dtype() == ember.float32  # the program put it back


def test_tabular_mlp_prints_what_torch_prints(tmp_path, capsys):
    # nanmean / nan_to_num / quantile / bucketize preprocessing, weighted cross_entropy and
    # BCEWithLogitsLoss(pos_weight), ReduceLROnPlateau, early stopping, BytesIO checkpoint
    got = _check("tabular_mlp.py", tmp_path, capsys, rtol=1e-4, atol=1e-5)
    _, best, auc = _results(got)
    assert best < 1.1 and auc > 0.85
    assert "bin counts [99, 75, 75, 75, 76]" in got
    assert "class weights [0.6557, 2.1053]" in got


def test_mdn_mixture_tracks_torch(tmp_path, capsys):
    # MixtureSameFamily(Categorical, Independent(Normal)) log_prob / mean / variance / sample,
    # clip_grad_norm_'s returned norm, trapezoid
    got = _check("mdn_mixture.py", tmp_path, capsys, rtol=2e-3, atol=2e-4)
    first, last, integral = _results(got)
    assert last < first - 1.0 and abs(integral - 1) < 1e-3
    assert "batch_shape (3,) event_shape (1,)" in got
    assert "sample (2000, 1, 1) sample mean near mean: True" in got


def test_hooks_surgery_prints_what_torch_prints(tmp_path, capsys):
    # forward / pre (with_kwargs) / full backward / backward-pre hooks, Grad-CAM, setattr
    # surgery, load_state_dict(strict=False) keys, load_state_dict pre-hooks
    got = _check("hooks_surgery.py", tmp_path, capsys, rtol=1e-4, atol=1e-5)
    for line in ("hooks left: 0", "halved grad_input reached conv1: True",
                 "parameters 859 -> 955, GELU count 3",
                 "missing: ['classifier.3.bias', 'classifier.3.weight', 'features.conv1.weight'] "
                 "unexpected: ['extra.running_thing', 'features.conv1.w']",
                 "after rename hook, missing: ['classifier.3.bias', 'classifier.3.weight'] "
                 "unexpected: ['extra.running_thing']",
                 "strict load raises: True True", "conv1 loaded: True", "pre-hook saw [(4, 3)]"):
        assert line in got


def test_ssm_scan_tracks_torch(tmp_path, capsys):
    # depthwise causal Conv1d, softplus step sizes, einsum discretization, a sequential scan
    # against the cumsum / tril / masked_fill(-inf) segment-sum form, RMSNorm
    got = _check("ssm_scan.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.6
    assert "sequential scan == parallel form: True" in got


def test_qat_fake_quant_tracks_torch(tmp_path, capsys):
    # fake_quantize_per_tensor_affine / fake_quantize_per_channel_affine (straight-through
    # gradients), aminmax observers in buffers, an integer matmul reproducing the layer
    got = _check("qat_fake_quant.py", tmp_path, capsys, rtol=2e-3, atol=1e-4)
    acc_float, acc_ptq, acc_qat = _results(got)
    assert acc_float > 0.85 and acc_qat >= acc_ptq - 0.02
    assert "fake quant [-1.0, 0.5, 0.5, 1.0] ste grad [1.0, 1.0, 1.0, 0.0]" in got
    assert "<= scale / 2: True" in got
    assert "integer matmul == fake-quant layer: True torch.int64" in got
