"""The seventh set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a Fourier neural operator with complex parameters, torch.func neural tangent kernels and
ensembles, variational inference with distribution transforms and KL rules, a byte-level
Transformer, learning-rate schedule chains with checkpointing and clipping, a weight-normed
WaveNet, a sparse-gradient factorization machine, state_dict round trips, nn.MultiheadAttention
cross-attention in all its calling conventions, an orthogonal RNN, robust / quantile losses and
a length-bucketing data loader. Each draws its data, initial weights and noise from NumPy, so
ember's output is compared with torch's line by line, numbers to a tolerance."""

from __future__ import annotations

import pytest
from test_compat_programs import _close_text, _on_both, _results

pytest.importorskip("torch")


def _check(script, tmp_path, capsys, rtol=1e-4, atol=1e-5, argv=()):
    ref, got = _on_both(script, list(argv), tmp_path, capsys)
    _close_text(ref, got, rtol=rtol, atol=atol)
    return got.replace("ember.", "torch.")


def test_fno_spectral_tracks_torch(tmp_path, capsys):
    # rfft2 / irfft2(s=), complex nn.Parameters trained by Adam, complex einsum, fftn / ifftn,
    # fftfreq / fftshift, view_as_real / view_as_complex gradients
    got = _check("fno_spectral.py", tmp_path, capsys, rtol=2e-3, atol=1e-4)
    first, last, err = _results(got)
    assert last < 0.8 * first and err < 0.8
    assert "parameters 4593 complex 4096 dtype torch.complex64" in got
    assert "rfft2 shape (16, 9) fftshift zero at 3" in got
    assert "complex grad == real-view grad: True" in got


def test_func_ntk_tracks_torch(tmp_path, capsys):
    # jacrev over functional_call's parameter dict, vmap(jacrev), vjp / jvp, vmap(hessian),
    # jacfwd(jacrev), out_dims / chunk_size / nested vmap, linearize, autograd.functional,
    # forward_ad, an ensemble trained through vmap over stack_module_state
    got = _check("func_ntk.py", tmp_path, capsys, rtol=1e-3, atol=1e-5)
    first, last, _ = _results(got)
    assert last < 0.3 * first
    assert got.count(": True") >= 11 and ": False" not in got
    assert "out_dims (5,) (3, 5)" in got


def test_vi_flows_tracks_torch(tmp_path, capsys):
    # a custom Transform in ComposeTransform / TransformedDistribution, biject_to / transform_to,
    # StickBreaking / Softmax / Independent / Reshape / Cat / Stack / CDF transforms,
    # kl_divergence over many pairs, register_kl
    got = _check("vi_flows.py", tmp_path, capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.7 * first and acc > 0.75
    assert ": False" not in got
    assert "registered kl: 42.0 parent rule for mixed: 0.5" in got
    assert "no kl rule: NotImplementedError" in got


def test_byte_transformer_tracks_torch(tmp_path, capsys):
    # pad_sequence (padding_side="left"), TransformerEncoder(norm_first) with a bool
    # src_key_padding_mask, causal masks with is_causal, TransformerDecoder with
    # memory_key_padding_mask, greedy byte generation
    got = _check("byte_transformer.py", tmp_path, capsys, rtol=2e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.3 * first and acc > 0.6
    assert "padding invariant: True True" in got
    assert "left padded [[256, 256, 116, 104, 101, 32], [108, 97, 32, 109, 97, 105]]" in got
    assert "decoder (2, 8, 32) padding invariant: True" in got


def test_lr_schedule_zoo_prints_what_torch_prints(tmp_path, capsys):
    # OneCycleLR / CyclicLR / CosineAnnealingWarmRestarts / ChainedScheduler / SequentialLR /
    # LambdaLR / MultiplicativeLR / ReduceLROnPlateau traces, checkpoint + clip_grad_norm_
    # norm types, scheduler / optimizer state_dict resume
    got = _check("lr_schedule_zoo.py", tmp_path, capsys, rtol=1e-4, atol=1e-6)
    first, last, lr = _results(got)
    assert last < 0.5 * first and lr == pytest.approx(1e-4)
    assert "checkpointed grads == plain: True" in got
    assert "non-finite norm raises RuntimeError: True" in got
    assert "resumed run ends where the run ended: True True" in got


def test_wavenet_tracks_torch(tmp_path, capsys):
    # weight_norm hooks and parametrizations, spectral_norm, dilated causal Conv1d both ways,
    # ConvTranspose1d conditioning, one_hot, mu-law, fast generation by queues
    got = _check("wavenet.py", tmp_path, capsys, rtol=2e-3, atol=1e-4)
    first, last, _ = _results(got)
    assert last < 0.8 * first
    assert "plain again: True ['bias', 'weight'] same outputs: True" in got
    assert "output 50 depends on inputs 19 .. 50" in got
    assert "fast generation == full forward: True" in got


def test_fm_sparse_recsys_tracks_torch(tmp_path, capsys):
    # EmbeddingBag(sum, sparse, per_sample_weights, include_last_offset), padding_idx, max /
    # mean bags, sparse COO gradients, SparseAdam with Adam, sparse SGD / Adagrad
    got = _check("fm_sparse_recsys.py", tmp_path, capsys, rtol=1e-3, atol=1e-5)
    first, last, auc = _results(got)
    assert last < first and auc > 0.7
    assert "factor grad sparse: True layout torch.sparse_coo shape (60, 8)" in got
    assert "sparse grad == dense grad: True" in got
    assert "sparse SGD == dense SGD: True" in got and "sparse Adagrad == dense Adagrad: True" in got
    assert "SparseAdam on a dense gradient raises RuntimeError: True" in got


def test_state_roundtrip_prints_what_torch_prints(tmp_path, capsys):
    # persistent=False / None buffers, extra state, _load_from_state_dict version migration,
    # strict=False results, assign=True, dtype-keeping loads, hooks, resumed optimizer
    got = _check("state_roundtrip.py", tmp_path, capsys, rtol=1e-4, atol=1e-5)
    assert ": False" not in got.replace("cache persistent: False None buffer listed: False", "")
    assert "load result <All keys matched successfully> missing [] unexpected []" in got
    assert "migrated: True missing ['norm._extra_state'] unexpected []" in got
    assert "hooks saw [13, 13, 0]" in got
    assert "resumed losses equal: True" in got


def test_mha_cross_attention_tracks_torch(tmp_path, capsys):
    # kdim / vdim, bool / float / per-head masks with key_padding_mask, add_bias_kv /
    # add_zero_attn, is_causal, scaled_dot_product_attention masks, scale and enable_gqa
    got = _check("mha_cross_attention.py", tmp_path, capsys, rtol=1e-3, atol=1e-5)
    first, last, _ = _results(got)
    assert last < 0.3 * first
    assert ": False" not in got
    assert "add_bias_kv + add_zero_attn: out (4, 3, 8) weights (3, 4, 9)" in got


def test_orthogonal_rnn_tracks_torch(tmp_path, capsys):
    # parametrizations.orthogonal (three maps, no trivialization, on nn.RNN), a chained custom
    # parametrization with matrix_exp, parametrize.cached(), remove_parametrizations
    got = _check("orthogonal_rnn.py", tmp_path, capsys, rtol=2e-3, atol=1e-4)
    first, last, err = _results(got)
    assert last < 0.1 * first and err < 1e-3
    assert got.count("orthogonal after steps True") == 3
    assert "removed, kept value: True is a Parameter: True parametrized: False" in got


def test_robust_losses_prints_what_torch_prints(tmp_path, capsys):
    # the Huber / NLL / margin / ranking / triplet loss family under every reduction with
    # gradients, clamp with tensor bounds, where with scalars, double-where NaN safety
    got = _check("robust_losses.py", tmp_path, capsys, rtol=1e-4, atol=1e-5)
    first, last, cover = _results(got)
    assert last < 0.4 * first and 0.7 < cover < 0.9
    assert "double-where sqrt grad (no nan): [0.0, 0.5, 0.25]" in got
    assert "crossing False" in got


def test_bucket_loader_tracks_torch(tmp_path, capsys):
    # a batch_sampler yielding lists, a custom collate object, DistributedSampler shards,
    # StackDataset / ChainDataset, workers with worker_init_fn, seeded loader generators
    got = _check("bucket_loader.py", tmp_path, capsys, rtol=1e-3, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.8
    assert "distributed shards [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]" in got
    assert "2 workers, every sample once: True" in got
    assert ": False" not in got
