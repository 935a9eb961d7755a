"""The nineteenth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a Perceiver IO (cross-attention with kdim / vdim, a boolean-masked SDPA decoder), Reformer LSH
attention with reversible layers (a custom autograd.Function recomputing its inputs), a
FastSpeech length regulator with monotonic alignment search, Hawkes point processes (exact
likelihoods, L-BFGS, Hessian standard errors, a neural intensity), GRU-D on irregular series with
AUC by two routes, PCGrad / GradNorm / uncertainty-weighted multi-task learning, a Temporal
Fusion Transformer with quantile loss, partial-convolution inpainting, a variational graph
auto-encoder on sparse adjacencies, SDE solvers and an Ornstein-Uhlenbeck fit, dynamic
convolutions with DropPath and conv-BN folding, multi-label losses (pos_weight, soft margin,
margin, ASL) and their metrics, contrastive predictive coding, a DeepAR negative-binomial
forecaster with ancestral sampling, and a Laplace approximation with the evidence over the prior.

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_perceiver_io(capsys):
    got = _check("r19_perceiver_io.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, r2 = _results(got)
    assert last < 0.4 * first and r2 > 0.6
    assert "buffers ['pos']" in got and "state_dict has pos False" in got
    assert "padded keys get zero weight True pad invariant True" in got


def test_reformer_lsh_reversible(capsys):
    got = _check("r19_reformer_lsh_reversible.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.3 * first and acc > 0.8
    assert "single bucket == full attention True" in got
    assert "param grads equal True 10" in got and "gradcheck True grad_fn RevFnBackward" in got


def test_fastspeech_duration(capsys):
    got = _check("r19_fastspeech_duration.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.4
    assert "MAS durations [3, 1, 3] true [3, 1, 3]" in got
    assert "repeat_interleave [0.0, 0.0, 4.0, 4.0, 4.0] batched equal True total [5]" in got


def test_hawkes_point_process(capsys):
    got = _check("r19_hawkes_point_process.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, mu = _results(got)
    assert last < first and 0.4 < mu < 1.0
    assert "nll recursive 114.780981 pairwise 114.780981 equal True" in got
    assert got.count("trapezoid == cumulative True") == 4


def test_grud_irregular(capsys):
    # a few scores sit near the calibration bins' edges: their counts are compared loosely
    got = _check("r19_grud_irregular.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"^bin": (5e-2, 2.0)})
    first, last, auc = _results(got)
    assert last < 0.2 * first and auc > 0.95
    assert "agree True" in got and "delta max 10.0" in got


def test_multitask_gradient_surgery(capsys):
    got = _check("r19_multitask_gradient_surgery.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.8
    assert "vector round trip True 1449" in got
    assert got.count("unused grad None materialized 0.0") == 4
    # round 19's fixes: step hooks get the optimizer in args; torch.save raises pickle's error
    assert got.count("step hook args (1, True) calls 60") == 4
    assert "checkpoint saved as state_dict (PicklingError caught) restored equal True" in got


def test_temporal_fusion(capsys):
    got = _check("r19_temporal_fusion.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"crossings": (2e-2, 2.0)})
    first, last, cover = _results(got)
    assert last < 0.3 * first and cover > 0.6
    assert "attention causal True rows sum to 1 True" in got


def test_partial_conv_inpainting(capsys):
    got = _check("r19_partial_conv_inpainting.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, psnr = _results(got)
    assert last < 0.5 * first and psnr > 14.0
    assert "full mask == conv2d inside True mask stays full True" in got
    assert "state_dict keys ['bias', 'weight']" in got and "hole content ignored True" in got


def test_vgae_link_prediction(capsys):
    got = _check("r19_vgae_link_prediction.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, auc = _results(got)
    assert last < 0.7 * first and auc > 0.8
    assert "normalized adjacency symmetric True nnz 404" in got
    assert "csr @ x == coo @ x True" in got


def test_neural_sde(capsys):
    got = _check("r19_neural_sde.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, theta = _results(got)
    assert last < first and 1.5 < theta < 2.6
    assert "vmap(grad) == autograd True linear diffusion: derivative has a graph False" in got
    assert "milstein converges faster True" in got


def test_dynamic_conv_droppath(capsys):
    got = _check("r19_dynamic_conv_droppath.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.9
    assert "channels_last True True (144, 1, 12, 1)" in got
    assert "grouped == per-sample loop True" in got and "fused model logits equal True" in got
    assert "weights agree True Parameter False" in got


def test_multilabel_asl(capsys):
    got = _check("r19_multilabel_asl.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"thresholds|macroF1": (2e-2, 5e-2)})
    first, last, macro = _results(got)
    assert last < first and macro > 0.2
    assert "margin targets [[0, 2, -1, -1, -1, -1], [4, -1, -1, -1, -1, -1]" in got


def test_cpc_infonce(capsys):
    got = _check("r19_cpc_infonce.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"acc per k": (2e-2, 7e-2)})
    first, last, acc = _results(got)
    assert last < 0.8 * first and acc > 0.8
    assert "latents (2, 20, 16) context (2, 20, 16)" in got and "encoder frozen True" in got
    # round 19's fix: windows computed in their dtype, as PyTorch rounds them
    assert "window ends tensor([-2.9802e-08,  3.5177e-03]) float64 end 0.0" in got


def test_deepar_negbin(capsys):
    got = _check("r19_deepar_negbin.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, ratio = _results(got)
    assert last < first and ratio < 1.0
    assert "log_prob == closed form True mean 5.22139 variance 13.01078" in got
    assert "sample shape (24, 50, 7) integer samples True" in got


def test_laplace_evidence(capsys):
    got = _check("r19_laplace_evidence.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, log_scale = _results(got)
    assert last < first and -1.0 < log_scale < 1.0
    assert "hessian == closed form True == func.hessian True" in got
    assert "cholesky info 0 covariance agrees True" in got
