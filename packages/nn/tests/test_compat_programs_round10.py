"""The tenth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a ConvNeXt with channels-last LayerNorm and stochastic depth, a CLIP contrastive loop, mixture and
transformed distributions, batched beam search, sliding-window attention through unfold /
as_strided, a static KV cache with index_copy_, FFT convolution, a Kalman filter on torch.linalg,
feature binning (quantile / bucketize / histogram), a vmapped deep ensemble, ranking and
heteroscedastic losses, a Conformer encoder, bilinear pooling and an MPS tensor network, D4
test-time augmentation, the optimizer-in-backward hooks, a 3-D segmentation network, a 1-D
signal CNN with the less common layers, packed-sequence speaker classification, and FIR filter
design with the window functions.

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_convnext_block(capsys):
    # depthwise 7x7 conv, permute to channels-last LayerNorm, layer scale, DropPath, trunc_normal_
    got = _check("convnext_block.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc == 1.0
    assert ": False" not in got
    assert "DropPath(drop_prob=0.100) | Identity()" in got
    assert "channels_last: True (3072, 1, 96, 3)" in got
    assert "drop_path values: [0.0, 1.3333]" in got


def test_clip_contrastive(capsys):
    # normalized towers, a clamped learned logit scale, symmetric label-smoothed cross-entropy,
    # recall@k, zero-shot prompts, a locked image tower
    got = _check("clip_contrastive.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, r1 = _results(got)
    assert last < 0.3 * first and r1 >= 0.75
    assert "logit_scale 2.6593 exp 14.2857" in got
    assert "inference tensors: True False" in got
    assert "trainable: ['logit_scale', 'token_embedding.weight', 'text_proj.weight']" in got
    assert "visual grads are None: True" in got


def test_mixture_transforms(capsys):
    # MixtureSameFamily fitted by likelihood, TransformedDistribution / ComposeTransform,
    # biject_to / transform_to, closed-form and registered KLs, validation messages
    got = _check("mixture_transforms.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, kl = _results(got)
    assert last < 0.7 * first and abs(kl - 0.50728) < 1e-4
    assert ": False" not in got
    assert "batch/event shapes torch.Size([]) torch.Size([2]) torch.Size([3]) torch.Size([])" in got
    assert "no closed-form mixture KL: NotImplementedError" in got
    assert "registered KL 3.0" in got
    assert ("ValueError: Expected parameter scale (Tensor of shape ()) of distribution "
            "Normal(loc: 0.0, scale: -1.0) to satisfy the constraint GreaterThan(lower_bound=0.0), "
            "but found invalid values: | -1.0") in got


def test_beam_search_decode(capsys):
    # topk over beam * vocab, floor division / remainder, index_select reordering, scatter_ bans
    got = _check("beam_search_decode.py", capsys, rtol=1e-4, atol=2e-4)
    best, mean_len, beam_ok = _results(got)
    assert beam_ok == 1.0 and best < 0
    assert ": False" not in got
    assert "teacher-forced scores equal search scores: True" in got
    assert "no repeated bigram: True" in got


def test_sliding_window_attention(capsys):
    # band masks, Tensor.unfold windows, as_strided chunks with baddbmm, a float sdpa mask,
    # dilated windows, NaN rows, gradients through the unfold path
    got = _check("sliding_window_attention.py", capsys, rtol=1e-3, atol=1e-5)
    first, last, err = _results(got)
    assert last < 0.6 * first and err < 1e-5
    assert ": False" not in got
    assert "unfold shape (2, 10, 8, 5) stride (112, 8, 1, 8) contiguous False" in got
    assert "as_strided (2, 10, 5, 8) (112, 8, 8, 1) offset 0" in got
    assert "dilated window (2, 10, 8, 5) stride (144, 8, 1, 16)" in got


def test_kv_static_cache(capsys):
    # non-persistent cache buffers, index_copy_ / index_put_, ALiBi, left padding, inference_mode
    got = _check("kv_static_cache.py", capsys, rtol=1e-3, atol=2e-5)
    first, last, err = _results(got)
    assert last < 0.01 * first and err < 1e-4
    assert ": False" not in got.replace("cache in it: False", "")
    assert "state_dict keys: 11 cache in it: False buffers: 6" in got
    assert "position ids [[0, 1, 2, 3, 4], [-1, -1, 0, 1, 2]]" in got
    assert "counting continued: True" in got


def test_fft_convolution(capsys):
    # rfft / irfft long convolution against conv1d, fft2 circular convolution against
    # Conv2d(padding_mode="circular"), fftn / norm / shifts / frequencies, a Hyena-style layer
    got = _check("fft_convolution.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, err = _results(got)
    assert last < 0.3 * first and err < 1e-10
    assert ": False" not in got
    assert "fftn shape (8, 6, 5) torch.complex128" in got
    assert "fftshift [3.0, 4.0, 5.0, 0.0, 1.0, 2.0]" in got


def test_kalman_filter(capsys):
    # cholesky_ex / cholesky_solve / solve_triangular(left=False), an RTS smoother, lstsq /
    # pinv / svd system identification, eigvals / eigh / slogdet / cond, LinAlgError, MLE noise
    got = _check("kalman_filter.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, rmse = _results(got)
    assert last < 0.5 * first and rmse < 0.15
    assert ": False" not in got
    assert "indefinite: info 2" in got
    assert ("LinAlgError: linalg.cholesky: The factorization could not be completed because the "
            "input is not positive-definite (the leading minor of order 2 is not "
            "positive-definite).") in got


def test_feature_binning(capsys):
    # quantile interpolation modes, bucketize / searchsorted (sorter, side), histc / histogram /
    # histogramdd, unique, scatter_reduce target encoding, a piecewise-linear encoding, LBFGS
    got = _check("feature_binning.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, acc = _results(got)
    assert last < 0.6 * first and acc > 0.8
    assert ": False" not in got
    assert "bucketize dtype torch.int64 torch.int32 counts [80, 80, 80, 80, 80]" in got
    assert "histogram [98.0, 109.0, 91.0, 102.0] [0.0, 0.25, 0.5, 0.75, 1.0]" in got


def test_ensemble_vmap(capsys):
    # stack_module_state, functional_call on a meta base under vmap (in_dims, chunk_size,
    # out_dims), vmap(grad_and_value) with a hand-written Adam, nested vmap
    got = _check("ensemble_vmap.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.15 * first and acc > 0.9
    assert ": False" not in got
    assert "base on meta: meta" in got
    assert "out_dims=1 (8, 5, 3)" in got


def test_ranking_losses(capsys):
    # margin ranking, multi-margin (p, weight), multi-label margins, hinge / soft-margin /
    # cosine-embedding / triplet losses with their input gradients, NDCG@k and MRR
    got = _check("ranking_losses.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, ndcg = _results(got)
    assert last < 0.5 * first and ndcg > 0.9
    assert ": False" not in got
    assert "MultiLabelMarginLoss                 1.12127" in got


def test_heteroscedastic_regression(capsys):
    # GaussianNLLLoss variance shapes ((N, 1, H, W) broadcast) and messages, beta-NLL,
    # PoissonNLLLoss full, Huber vs SmoothL1, pinball loss, KLDivLoss(log_target)
    got = _check("heteroscedastic_regression.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, cover = _results(got)
    assert last < 0.1 * first and 0.85 < cover < 1.0
    assert ": False" not in got
    assert "ValueError: var is of incorrect size" in got
    assert "ValueError: var has negative entry/entries" in got


def test_conformer_block(capsys):
    # macaron feed-forwards, relative-position MHSA with the pad / view relative shift, the GLU
    # + depthwise-conv module, key padding, SpecAugment masks, padding invariance
    got = _check("conformer_block.py", capsys, rtol=2e-3, atol=2e-3)
    first, last, err = _results(got)
    assert last < 0.05 * first and err < 1e-3
    assert "rel_shift ok: [[[[2.0, 3.0, 4.0], [6.0, 7.0, 8.0], [10.0, 11.0, 12.0]]]]" in got
    assert "padding invariant: True" in got


def test_bilinear_tensor_network(capsys):
    # outer-product and tensor-sketch pooling, nn.Bilinear, tensordot / kron / addr / multi_dot,
    # einsum's sublist form, backends.opt_einsum, a QR-canonicalized MPS classifier
    got = _check("bilinear_tensor_network.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, sk = _results(got)
    assert last < 0.1 * first and sk < 0.5
    assert ": False" not in got.replace("flags(enabled=False): False", "")
    assert "sublist einsum: True" in got
    assert "flags(enabled=False): False same result: True" in got


def test_d4_tta(capsys):
    # rot90 / flip / fliplr / flipud / roll, D4 test-time augmentation, a p4 lifting conv
    got = _check("d4_tta.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, err = _results(got)
    assert last < 0.5 * first and err < 1e-5
    assert ": False" not in got
    assert "rot90 k=1 [[3.0, 7.0, 11.0], [2.0, 6.0, 10.0], [1.0, 5.0, 9.0], [0.0, 4.0, 8.0]]" in got


def test_optimizer_in_backward(capsys):
    # register_post_accumulate_grad_hook optimizers, register_multi_grad_hook, global module
    # hooks, with_kwargs / always_call / prepend hooks, stateless.functional_call, retain_grad
    got = _check("optimizer_in_backward.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, diff = _results(got)
    assert last < 0.7 * first and diff < 1e-5
    assert ": False" not in got
    assert "multi-grad hooks: [('any', (3, 16)), ('all', [True, True])]" in got
    assert "partial backward: [('all', [False, True])]" in got
    assert "raised: RuntimeError True hooks run: [('always', True)]" in got


def test_volumetric_segmentation(capsys):
    # Conv3d padding modes, MaxPool3d(return_indices, ceil_mode) / MaxUnpool3d, ConvTranspose3d,
    # AvgPool3d options, InstanceNorm3d running stats (momentum=None), Dice + CE
    got = _check("volumetric_segmentation.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, dice = _results(got)
    assert last < 0.7 * first
    assert ": False" not in got
    assert "InstanceNorm3d(momentum=None) running stats [0.0, 0.0] [1.0, 1.0] tracked 0" in got
    assert "ceil_mode pooled (1, 2, 3, 3, 3) floor (1, 2, 2, 2, 2)" in got


def test_ecg_signal_cnn(capsys):
    # reflect / circular padding, shrinkage activations, RReLU / AlphaDropout / Dropout1d in
    # eval, LPPool1d, AvgPool1d options, cumulative BatchNorm, PairwiseDistance / CosineSimilarity
    got = _check("ecg_signal_cnn.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.4 * first and acc > 0.8
    assert ": False" not in got
    assert "    (9): RReLU(lower=0.125, upper=0.3333333333333333)" in got
    assert "    (8): BatchNorm1d(16, eps=1e-05, momentum=None, affine=True, bias=True, " \
           "track_running_stats=True)" in got


def test_speaker_gru_packed(capsys):
    # pack_sequence(enforce_sorted=False) and its repr, a bidirectional 2-layer GRU's h_n,
    # pad_packed_sequence(total_length), unpack / unpad, RNN(relu), LSTM(proj_size)
    got = _check("speaker_gru_packed.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.05 * first and acc == 1.0
    assert ": False" not in got
    assert ("PackedSequence(data=tensor([3., 1., 6., 4., 2., 5.]), batch_sizes=tensor([3, 2, 1]), "
            "sorted_indices=tensor([1, 0, 2]), unsorted_indices=tensor([1, 0, 2]))") in got
    assert "lstm proj (45, 6) (2, 5, 3) (2, 5, 8)" in got


def test_fir_filter_design(capsys):
    # torch.*_window and torch.signal.windows, a Kaiser windowed-sinc low-pass (sinc, special.i0,
    # rfft response, angle), strided-conv decimation, conv_transpose1d interpolation, SincNet
    got = _check("fir_filter_design.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, stop = _results(got)
    assert last < 0.3 * first and stop < -60
    assert ": False" not in got
    assert "conv_transpose1d == zero-stuff + filter: True length 598" in got
    assert "hann symmetric == signal.windows.hann: True" in got


def test_scaler_param_groups(capsys):
    # GradScaler("cpu") growth / backoff / skipped steps, unscale_ + clipping, param groups and
    # their default keys, SequentialLR(LinearLR, CosineAnnealingLR), add_param_group, a resumed
    # optimizer and scaler, ReduceLROnPlateau with per-group min_lr
    got = _check("scaler_param_groups.py", capsys, rtol=1e-4, atol=2e-6)
    first, last, scale = _results(got)
    assert last < 0.8 * first and scale == 32768.0
    assert ": False" not in got
    assert "  injected inf: norm inf step skipped True scale now 512.0" in got
    assert ("param_group keys ['amsgrad', 'betas', 'capturable', 'decoupled_weight_decay', "
            "'differentiable', 'eps', 'foreach', 'fused', 'lr', 'maximize', 'params', "
            "'weight_decay']") in got
    assert "state indices [0, 1, 2, 3] ... 10 step tensor(26.) state keys ['exp_avg', " \
           "'exp_avg_sq', 'step']" in got


def test_function_transforms_custom(capsys):
    # autograd.Function in the setup_context style under func.grad / jacrev / jacfwd / vmap /
    # jvp and forward AD, mark_non_differentiable, a vmap staticmethod, set_materialize_grads,
    # once_differentiable, gradcheck, per-sample clipped gradients from vmap(grad)
    got = _check("function_transforms_custom.py", capsys, rtol=1e-6, atol=1e-9)
    first, last, jerr = _results(got)
    assert last < 0.8 * first and jerr < 1e-12
    assert ": False" not in got
    assert "argmax requires_grad: True False torch.int64 needs_input_grad [(True,)]" in got
    assert "materialize_grads(False): a.grad [2.0, 4.0] b.grad None" in got


def test_bayesopt_sobol(capsys):
    # SobolEngine (draw, draw_base2 and its balance error, reset), an exact GP fitted by marginal
    # likelihood, expected improvement (special.ndtr / log_ndtr, logaddexp), projected gradient
    # ascent, solve_ex / inv_ex, cummin, unravel_index, gradient, atleast_2d
    got = _check("bayesopt_sobol.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, grid_min = _results(got)
    assert last <= first and abs(grid_min - 0.40377) < 1e-5
    assert ": False" not in got
    assert "draw_base2 (4, 2) num_generated 8" in got
    assert "solve_ex info 0 finite: True inv_ex of zeros info 1" in got
