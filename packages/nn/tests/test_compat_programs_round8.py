"""The eighth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
torch.compile / torch.jit as pass-throughs around training and export, the less common
optimizers, lazy modules and printed model reprs, saved-tensor hooks and grad modes, classical
ML with torch.linalg, packed sequences through projected bidirectional LSTMs, voxel scatter
reductions, bit-exact checkpoint resumption with RNG states, a complex-valued equalizer, GLMs
with torch.special and more distributions, dtype promotion rules, and a single-process DDP run.

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance (loose where training amplifies float rounding, which differs
between CPUs of different SIMD widths)."""

from __future__ import annotations

import re

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_jit_compile_train(capsys):
    # torch.compile wrappers (shared parameters, _orig_mod), compiler.disable, jit.script of
    # annotated functions / modules with Final, export and ignore, jit.trace, jit.save / load
    # (ScriptModule.save), freeze / optimize_for_inference
    got = _check("jit_compile_train.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, mse = _results(got)
    assert last < 0.1 * first and mse < 0.2
    assert ": False" not in got.replace("compiling False", "")
    assert "compiled keys ['fc1.weight', 'fc1.bias', 'norm.weight']" in got
    assert "split sizes [4, 3, 3] [2, 2, 2, 1]" in got
    assert "jit.load from file == eager: True" in got


def test_optimizer_zoo(capsys):
    # NAdam / RAdam (decoupled), Adamax, ASGD, Rprop, Adagrad, amsgrad + maximize, nesterov,
    # fused AdamW, reprs, state keys, step hooks, mid-run state_dict resume, add_param_group
    got = _check("optimizer_zoo.py", capsys, rtol=1e-3, atol=2e-4)
    first, best, worst = _results(got)
    assert best < worst < first
    for line in ("fused == loop: True", "same weights: True", "max_exp_avg_sq kept: True",
                 "grad kept as zeros: True", "resumed == uninterrupted: True"):
        assert line in got
    assert "ASGD             loss" in got and "state ['ax', 'eta', 'mu', 'step']" in got
    assert "Rprop            loss" in got and "state ['prev', 'step', 'step_size']" in got
    assert "hooks ['pre', 'post', 'pre', 'post'] 24" in got
    assert "state_dict groups params [[0, 1, 2, 3], [4, 5]]" in got
    assert "    maximize: True" in got


def test_lazy_modules_repr(capsys):
    # LazyConv2d / LazyBatchNorm2d / LazyLinear dry runs and loads, print(model) of many layer
    # types, extra_repr, per-layer parameter tables, shared modules
    got = _check("lazy_modules_repr.py", capsys, rtol=2e-3, atol=2e-4)
    first, last, n_params = _results(got)
    assert last < 0.1 * first and n_params == 2875
    assert "(1): LazyLinear(in_features=0, out_features=16, bias=True)" in got
    assert "after dry run: Conv2d BatchNorm2d Linear (16, 128) -" in got
    assert "(5): Scale(channels=8, init=0.5)" not in got and "Scale(channels=8, init=0.5)" in got
    assert "(gru): GRU(4, 6, num_layers=2, batch_first=True, dropout=0.1, bidirectional=True)" \
        in got
    assert "(conv1): LazyConv1d(0, 4, kernel_size=(3,), stride=(2,), bias=False)" in got
    assert "loaded lazy: LazyLinear (3, 16)" in got and "loaded == trained: True" in got
    assert "modules 3 with duplicates 4 params 2" in got


def test_grad_modes_hooks(capsys):
    # saved_tensors_hooks / save_on_cpu, post-accumulate-grad optimizer steps, tensor hooks,
    # retain_grad, graph walks, nested grad modes, inference tensors, anomaly detection
    got = _check("grad_modes_hooks.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, packed = _results(got)
    assert last < 0.2 * first and packed == 9
    assert "step-in-backward == step: True grads cleared: True" in got
    assert "graph ['SumBackward0', 'MulBackward0', 'SinBackward0', 'MulBackward0'] " \
           "ends at the leaf: True" in got
    assert "enable_grad inside inference_mode: True False None True" in got
    assert "inference tensor saved for backward: RuntimeError True" in got
    assert "anomaly: RuntimeError Function 'MulBackward0'" in got


def test_linalg_classic_ml(capsys):
    # svd / pca_lowrank PCA, cov / corrcoef, ridge three ways, vander + eigvals roots, LDA by
    # cholesky + eigh, spectral clustering, Procrustes, slogdet / cholesky_ex / lu_solve, a
    # Gaussian fitted through slogdet and solve
    got = _check("linalg_classic_ml.py", capsys, rtol=1e-4, atol=2e-4)
    first, last, ridge = _results(got)
    assert last < 0.6 * first and ridge < 0.03
    assert ": False" not in got
    assert "roots [-0.999, -0.501, 1.5]" in got
    assert "rings separated: True" in got
    assert "cholesky_ex on a negative definite matrix: info 1" in got


def test_lstm_proj_packed(capsys):
    # pack_sequence (unsorted), LSTM(proj_size, 2 layers, bidirectional) from (h0, c0),
    # unpack_sequence / unpad_sequence / pad_packed_sequence(total_length), a 3-layer GRU,
    # LSTMCell against LSTM
    got = _check("lstm_proj_packed.py", capsys, rtol=2e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.85
    assert ": False" not in got
    assert "sorted_indices [1, 2, 4, 5, 0, 3] unsorted [4, 0, 1, 5, 2, 3]" in got
    assert "h_n (4, 6, 6) c_n (4, 6, 12) out data (55, 12)" in got


def test_voxel_scatter(capsys):
    # unique(return_inverse / counts / dim=0), unique_consecutive, scatter_reduce_ and
    # index_reduce_ reductions, index_put_(accumulate), index_copy_ / masked_scatter_ canvases,
    # cummax, searchsorted / bucketize / histc / histogramdd, a scatter-max voxel encoder
    got = _check("voxel_scatter.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc == 1.0
    assert ": False" not in got
    assert "searchsorted with sorter [2, 4]" in got
    assert "amax grad goes to the maxima: 9 nonzero 9" in got


def test_rng_resume(capsys):
    # a whole checkpoint with every RNG state (torch, loader generator, NumPy, random), a run
    # resumed from it equal to the uninterrupted run; seeds, fork_rng, Generator states
    got = _check("rng_resume.py", capsys, rtol=1e-6, atol=0)
    equal, steps, saved = _results(got)
    assert equal == 1 and steps == 24 and saved == 4
    assert ": False" not in got
    assert "rng state torch.uint8 1 loader state torch.uint8 step 12" in got


def test_complex_equalizer(capsys):
    # complex nn.Conv1d / nn.Linear (dtype=cfloat), modReLU / CReLU, Adam on complex weights,
    # Wirtinger gradients, polar / angle / conj, complex linalg.solve
    got = _check("complex_equalizer.py", capsys, rtol=2e-3, atol=2e-4)
    first, last, ser = _results(got)
    assert last < 0.1 * first and ser < 0.05
    assert ": False" not in got.replace("resolved: False physical: False", "")
    assert "complex parameters 257 real 8 dtype torch.complex64" in got
    assert "grad of |z|^2 [(2.0, 4.0), (-1.0, 0.5)]" in got


def test_count_glm(capsys):
    # NegativeBinomial / Poisson / Binomial / StudentT / Weibull / VonMises fits by L-BFGS, a
    # zero-inflated likelihood with torch.special, more distributions' moments, torch.special
    got = _check("count_glm.py", capsys, rtol=1e-4, atol=2e-4)
    nb, po, kappa = _results(got)
    assert nb < po and 3.5 < kappa < 5.5
    assert "sample is a correlation factor: True" in got
    assert "multinomial log_prob -2.46452 mean [2.0, 3.0, 5.0]" in got


def test_dtype_semantics(capsys):
    # type promotion, uint8 wrap-around, integer division modes, bitwise hashing, frexp /
    # ldexp / nextafter, integer reductions, half-precision rounding, model.to(dtype)
    got = _check("dtype_semantics.py", capsys, rtol=1e-6, atol=1e-12)
    ok, n, used = _results(got)
    assert n == 7 and used == 10
    got = re.sub(r" {2,}", " ", got)
    assert "uint8 brighten (wraps) torch.uint8 [[44, 200], [130, 99]]" in got
    assert "fmod torch.int64 [1, -1, 1, -1]" in got
    assert "remainder torch.int64 [1, 1, -1, -1]" in got
    assert "div trunc torch.int64 [3, -3, -3, 3]" in got
    assert "model.to(float64): torch.float64 torch.float64 counter kept torch.int64" in got


def test_ddp_single_process(capsys):
    # init_process_group("gloo", file://), DDP with no_sync accumulation, DistributedSampler,
    # collectives on one rank, a prefix-stripped rank-0 checkpoint, destroy_process_group
    got = _check("ddp_single_process.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, same = _results(got)
    assert last < 0.5 * first and same == 1
    assert ": False" not in got.replace("initialized: False", "").replace("destroy: False", "")
    assert "rank 0 world 1 backend gloo" in got
    assert "checkpoint keys ['0.weight', '0.bias', '2.weight', '2.bias']" in got
