"""The fifth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a LLaMA-style decoder with complex rotary embeddings and KV-cache sampling, CTC speech
recognition, a VQ-VAE, a single-stage detector with focal loss and NMS, quantile forecasting
with a TCN, Hamiltonian networks and a neural ODE through RK4, LoRA fine-tuning, PPO with GAE,
BERT-style masked-LM pretraining, BPR / NCF recommendation, a U-Net DDPM with the optimizer
stepped inside backward, VoxelMorph-style 3-D registration, a GPT trained with Muon + AdamW and
Bayesian / extreme-value statistics. Each draws its data, initial weights and noise from NumPy,
so ember's output is compared with torch's line by line, numbers to a tolerance."""

from __future__ import annotations

import pytest
from test_compat_programs import _close_text, _on_both, _results

pytest.importorskip("torch")


def _check(script, tmp_path, capsys, rtol=1e-4, atol=1e-5, argv=()):
    ref, got = _on_both(script, list(argv), tmp_path, capsys)
    _close_text(ref, got, rtol=rtol, atol=atol)
    return got.replace("ember.", "torch.")


def test_llama_generate_tracks_torch(tmp_path, capsys):
    # rotary embeddings through complex multiplication (autograd), RMSNorm, GQA, KV cache
    got = _check("llama_generate.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert 3.0 < first < 3.4 and last < first - 0.8 and acc > 0.5
    assert "cached == recomputed: True" in got
    assert "multinomial (6, 5) torch.int64, within top-3: True" in got
    assert "freqs_cis (64, 4) torch.complex64" in got


def test_ctc_speech_tracks_torch(tmp_path, capsys):
    got = _check("ctc_speech.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, cer = _results(got)
    assert last < 0.2 * first and cer < 0.2
    assert "padded targets agree: True" in got
    assert "mean = mean(per utterance / target length): True" in got
    assert "input grad finite: True, nonzero True" in got


def test_vq_vae_tracks_torch(tmp_path, capsys):
    got = _check("vq_vae.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, perplexity = _results(got)
    assert last < 0.6 * first and perplexity > 4
    for line in ("cdist argmin == expanded-distance argmin: True",
                 "straight-through gradient reaches the encoder: True",
                 "decode(indices) == reconstruction: True",
                 "codebook requires_grad False"):
        assert line in got


def test_detection_head_tracks_torch(tmp_path, capsys):
    # AdamW on a focal loss amplifies float rounding over the run: the first 40 steps are
    # compared closely, the end by what it achieved
    ref, got = _on_both("detection_head.py", [], tmp_path, capsys)
    head = [i for i, line in enumerate(ref.splitlines()) if line.startswith("step 40")][0]
    _close_text("\n".join(ref.splitlines()[:head]), "\n".join(got.splitlines()[:head]),
                rtol=1e-3, atol=1e-4)
    for out in (ref, got):
        first, last, recall = _results(out)
        assert last < 0.2 * first and recall > 0.8
    assert "decode(encode(gt)) == gt: True" in got


def test_quantile_forecast_prints_what_torch_prints(tmp_path, capsys):
    # quantile's five interpolations, nanquantile / nanmedian, kthvalue, mode, median indices
    got = _check("quantile_forecast.py", tmp_path, capsys, rtol=1e-4, atol=1e-5)
    first, last, coverage = _results(got)
    assert last < 0.2 * first and 0.7 < coverage < 1.0
    assert "quantile of nan series: nan" in got
    assert "point at them: True" in got


def test_hamiltonian_ode_tracks_torch(tmp_path, capsys):
    import ember

    got = _check("hamiltonian_ode.py", tmp_path, capsys, rtol=1e-6, atol=1e-8)
    first, last, hnn_drift, mlp_drift = _results(got)
    assert last < 0.01 * first and hnn_drift < mlp_drift
    assert "torch.func field == autograd field: True" in got
    assert "divergence free: jacobian trace True, vmap(jacrev) traces True" in got
    assert ember.get_default_dtype() == ember.float32  # the program put it back


def test_lora_finetune_prints_what_torch_prints(tmp_path, capsys):
    got = _check("lora_finetune.py", tmp_path, capsys, rtol=1e-4, atol=1e-5)
    pre, before, after = _results(got)
    assert pre > 0.85 and after > before + 0.2
    for line in ("adapted == base before training (B = 0): True", "base weights untouched: True",
                 "missing keys: 34, unexpected: []", "reloaded adapters agree: True",
                 "merged agrees: True, unmerged agrees: True",
                 "removed (leave_parametrized): Parameter, agrees True"):
        assert line in got


def test_ppo_gae_tracks_torch(tmp_path, capsys):
    got = _check("ppo_gae.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, kl = _results(got)
    assert last > first and 0 <= kl < 0.05
    assert "orthogonal rows: True" in got


def test_bert_mlm_tracks_torch(tmp_path, capsys):
    # nn.MultiheadAttention with a float key_padding_mask and a per-head float attn_mask
    got = _check("bert_mlm.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, mlm_acc, _ = _results(got)
    assert last < 0.5 * first and mlm_acc > 0.2
    assert "zero on padding: True, rows sum to 1: True" in got
    assert "zero on tokens: True" in got


def test_recsys_bpr_prints_what_torch_prints(tmp_path, capsys):
    # Embedding(max_norm) renormalization, EmbeddingBag with offsets and per_sample_weights
    got = _check("recsys_bpr.py", tmp_path, capsys, rtol=1e-4, atol=1e-5)
    first, last, hr, ndcg = _results(got)
    assert last < 0.6 * first and hr > 0.3 and 0 < ndcg < hr
    assert "per_sample_weights sum bag agrees: True" in got
    assert "item rows looked up stay within max_norm: True" in got
    assert "seen in top: False" in got


def test_unet_diffusion_tracks_torch(tmp_path, capsys):
    # model.compile(), sdpa_kernel, GroupNorm/SiLU U-Net, Adafactor stepped inside backward by
    # post-accumulate-grad hooks, _foreach_lerp_ EMA, weights_only reload, DDIM sampling
    got = _check("unet_diffusion.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, _ = _results(got)
    assert 0.8 < first < 1.3 and last < 0.7 * first
    assert "optimizer in backward == ordinary step: True; grads freed: True" in got
    assert "ema weights reloaded (weights_only): <All keys matched successfully>" in got
    assert "inference tensor True" in got


def test_voxel_registration_tracks_torch(tmp_path, capsys):
    # 3-D affine_grid / grid_sample (trilinear), Conv3d, trilinear interpolate, meshgrid buffer
    got = _check("voxel_registration.py", tmp_path, capsys, rtol=1e-3, atol=1e-5)
    first, last, before, after = _results(got)
    assert last < 0.8 * first and after > before
    assert "near-identity warp changes little: True" in got
    assert "theta grad finite True" in got


def test_bayesian_stats_tracks_torch(tmp_path, capsys):
    # HalfCauchy priors in SVI, a GeneralizedPareto tail fitted by L-BFGS, an F-test with
    # FisherSnedecor
    got = _check("bayesian_stats.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, shape, p_value = _results(got)
    assert last > first + 100 and 0.2 < shape < 0.45 and p_value < 0.05
    assert "shrunk [False, True, True, False, True, False]" in got


def test_gpt_muon_tracks_torch(tmp_path, capsys):
    # Muon (bfloat16 Newton-Schulz) for hidden matrices + AdamW for the rest, F.rms_norm
    # QK-norm, soft-capped logits, LambdaLR on both optimizers, momentum warmup
    got = _check("gpt_muon.py", tmp_path, capsys, rtol=2e-3, atol=1e-4)
    first, last, val = _results(got)
    assert 3.3 < first < 3.6 and last < 0.5 * first and val < 0.5 * first
    assert "muon tensors 8" in got and "muon buffers 8" in got
