"""The sixteenth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
DCNv2 deformable convolution through grid_sample, Autoformer's series decomposition and
Auto-Correlation with FEDformer / Hyena FFT blocks, MCMC (HMC, MALA, SVGD, a checkerboard Ising
model), a SchNet potential with force matching and velocity-Verlet dynamics, Rainbow's C51
projection / NoisyLinear / prioritized replay, spectral clustering with lobpcg and randomized
low-rank SVD, FPN + RoIAlign + DETR's Hungarian matching, DLRM / DCN-v2 with EmbeddingBag and
ROC-AUC, an x-vector speaker model on hand-built MFCCs, homography alignment with SSIM and TV
denoising, FlashAttention's tiled online softmax as an autograd.Function (with GQA and token
merging), GraphSAGE / R-GCN / PNA message passing by scatter_reduce and index_reduce, particle
filtering / UKF / RTS smoothing, dependence measures (MINE, HSIC, MMD, KDE), an FT-Transformer
for tabular data, Tacotron's location-sensitive attention, and statistics with torch.special
(von Mises, Polya, Wishart, Zipf, incomplete gamma, Mills ratios, Bessel functions).

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_deformable_conv(capsys):
    # offsets + sigmoid masks sampled by grid_sample(align_corners=True) per kernel tap, checked
    # against conv2d (stride, dilation), F.unfold / F.fold, torch.roll and a manual bilinear
    got = _check("deformable_conv.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.2 * first and acc > 0.9
    assert "zero offsets == conv2d: True" in got and "unfold im2col == conv2d: True cols (2, 27, 99)" in got
    assert "fold(unfold(x)) == x * counts: True corner count 4 center 9" in got
    assert "offset +1 column == conv2d of rolled input: True first column differs True" in got
    assert "grid_sample == manual bilinear: True" in got


def test_autoformer_autocorr(capsys):
    # AvgPool1d moving averages on replicate-padded series, rfft * conj -> irfft lag correlations,
    # topk delays aggregated by roll and by gather, complex64 einsum over kept modes
    got = _check("autoformer_autocorr.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, test = _results(got)
    assert last < 0.1 * first and test < 0.05
    assert "wiener-khinchin == lag loop: True" in got
    assert "roll aggregation == gather aggregation: True" in got
    assert "fft long conv == causal conv1d: True" in got
    assert "dtype torch.float32 weight dtype torch.complex64 high modes dropped True" in got


def test_mcmc_samplers(capsys):
    # Bernoulli(logits=).log_prob gradients at w = 0 (the softplus at a zero logit), leapfrog
    # O(eps^2) energy error, MALA's proposal correction, SVGD's autograd repulsion, Ising by roll
    got = _check("mcmc_samplers.py", capsys, rtol=1e-3, atol=1e-4, loose={r"ess": (5e-2, 1.0)})
    hmc, mala, svgd = _results(got)
    assert hmc > 0.8 and mala > 0.8 and svgd > 0.85
    assert "leapfrog energy errors ['7.930e-01', '1.955e-01', '4.870e-02'] ratios 4.06 4.01" in got
    assert "reversible: True True" in got and "hmc mean within 2 std: True" in got
    assert "roll neighbours == circular conv2d: True" in got


def test_schnet_md(capsys):
    # minimum-image pair vectors, forces by autograd.grad, velocity Verlet, RBF + cosine cutoff
    # filters aggregated with index_add_, force matching through create_graph=True
    got = _check("schnet_md.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"net force|momentum": (1.0, 1e-12)})
    first, last, mae = _results(got)
    assert last < 0.3 * first and mae < 1.0
    assert "force by autograd -0.245591 by finite differences -0.245591" in got
    assert "invariant to rotation+translation: True permutation: True" in got
    assert "forces rotate with the frame: True" in got


def test_rainbow_c51(capsys):
    # C51 projection by index_add_ on flattened offsets (== a per-sample loop), NoisyLinear with
    # ger noise, a tensor sum tree; prioritized sampling and greedy actions amplify the last bit
    # of a rounding, so the training lines are compared loosely
    got = _check("rainbow_c51.py", capsys, rtol=1e-4, atol=1e-5,
                 loose={r"^t \d+ loss|q\(0\)|^RESULT": (1.0, 5.0)})
    first, last, ret = _results(got)
    assert last < first and ret > 6.0
    assert "projection == loop: True mass [1.0, 1.0, 1.0, 1.0]" in got
    assert "terminal reward -0.37 lands on atoms [6, 7] weights [0.2083, 0.7917]" in got
    assert "sum tree total 10.0 sampling counts [100, 200, 300, 400]" in got
    assert "buffers ['weight_epsilon', 'bias_epsilon']" in got


def test_spectral_clustering(capsys):
    # local-scale kNN affinities by topk + scatter_, eigh vs lobpcg(largest=False, X=...),
    # k-means++ with bincount / index_add_, diffusion maps, svd_lowrank, pca_lowrank, pinv
    got = _check("spectral_clustering.py", capsys, rtol=1e-3, atol=1e-5)
    acc, lob_ok, ny = _results(got)
    assert acc == 1.0 and lob_ok == 1.0 and ny < 0.5
    assert "lobpcg eigenvalues match eigh: True same subspace: True" in got
    assert "top-4 error True rank-4 reconstruction True" in got
    assert "pca_lowrank singular values [49.5829, 28.7824, 9.2176] centered svd [49.5829, 28.7824, 9.2176]" in got


def test_fpn_roi_align(capsys):
    # nearest top-down interpolate with sizes, RoIAlign via grid_sample(align_corners=False) ==
    # manual bilinear and == avg_pool2d on grid-aligned boxes, GIoU / cdist(p=1) matching costs
    got = _check("fpn_roi_align.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, cost = _results(got)
    assert last < 0.7 * first and abs(cost - 6.13387) < 1e-3
    assert "equal True" in got
    assert "two samples per 2x2 bin at pixel centres == avg_pool2d(2): True" in got
    assert "fpn levels for boxes of side 4, 16, 40, 64: [0, 1, 2, 2]" in got
    assert "hungarian cost 0.70547 brute force 0.70547" in got
    assert "unmatched boxes get no grad True" in got


def test_dlrm_dcn(capsys):
    # EmbeddingBag(offsets, per_sample_weights) == F.embedding_bag == a manual sum, padding_idx
    # in mean mode, tril_indices interactions, a low-rank cross network, Adagrad + Adam
    got = _check("dlrm_dcn.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, auc = _results(got)
    assert last < first and auc > 0.65
    assert "embedding_bag module == functional: True == manual: True" in got
    assert "tril_indices(4, 4, -1) [[1, 2, 2, 3, 3, 3], [0, 0, 1, 0, 1, 2]]" in got
    assert "auc of a perfect ranking 1.0000 with ties 0.8750" in got


def test_xvector_mfcc(capsys):
    # stft(return_complex) power -> mel -> log -> a hand-built orthonormal DCT (== an FFT DCT),
    # deltas by conv1d on replicate padding, attentive statistics pooling, ArcFace margins; Adam
    # steps on near-zero gradients amplify roundings, so later training lines are loose
    got = _check("xvector_mfcc.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"^step [1-9]|^trials|^eer|^RESULT": (5e-2, 2e-2)})
    first, last, eer = _results(got)
    assert last < 0.7 * first and eer < 0.4
    assert "dct orthonormal: True first row constant True" in got
    assert "dct by matrix == dct by fft: True" in got
    assert "deltas of a ramp [0.5, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 0.5]" in got


def test_image_alignment(capsys):
    # DLT by svd == linalg.solve, homography warps by grid_sample, separable Gaussian SSIM by
    # grouped conv2d, a coarse-to-fine Adam alignment, TV denoising, fft2 phase correlation
    got = _check("image_alignment.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, psnr = _results(got)
    assert last < 1e-3 * first and psnr > 24
    assert "dlt == linear solve: True maps corners: True" in got
    assert "ssim(x, x) 1.000000" in got and "identity warp: True" in got
    assert "phase correlation shift (5, -7) peak 1.0000" in got


def test_flash_attention_tiled(capsys):
    # online-softmax tiles and a recomputing backward in an autograd.Function == SDPA (causal,
    # boolean masks), gradcheck in float64, enable_gqa, ToMe merging by scatter_reduce(mean)
    got = _check("flash_attention_tiled.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, ok = _results(got)
    assert last < 0.5 * first and ok == 1.0
    assert got.count("output matches sdpa True gradients match True") == 2
    assert "saved lse == logsumexp of scores: True largest block 384 vs full 8214" in got
    assert "gradcheck causal tiled attention: True" in got
    assert "gqa by repeat_interleave == enable_gqa: True" in got
    assert "duplicate merged into its partner True" in got


def test_graphsage_rgcn(capsys):
    # scatter_reduce sum/mean/amax/amin/prod with include_self=False, index_reduce_ amax / mean,
    # basis-decomposed relation weights by einsum, PNA scalers, sampled two-hop blocks
    got = _check("graphsage_rgcn.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.6
    assert "scatter_reduce amax [[-1.0, 4.0], [3.0, 2.0], [0.5, 4.0], [0.0, 0.0], [1.0, -1.0]]" in got
    assert "index_reduce_ amax (untouched rows keep 7) [[-1.0, 4.0], [3.0, 2.0], [0.5, 4.0], [7.0, 7.0], [1.0, -1.0]]" in got
    assert "index_reduce_ mean with include_self [[0.0, 2.5], [1.75, 0.625], [0.1667, 1.8333], [1.0, 1.0], [1.0, 0.0]]" in got


def test_particle_filter_ukf(capsys):
    # logsumexp-normalized weights, systematic / stratified resampling by searchsorted, Merwe
    # sigma points by cholesky, atan2-wrapped residuals, RTS smoother == a tridiagonal solve
    got = _check("particle_filter_ukf.py", capsys, rtol=1e-4, atol=1e-5)
    pf, ukf, smooth_ok = _results(got)
    assert pf < 8 and ukf < 0.7 and smooth_ok == 1.0
    assert "systematic resampling [0, 2, 2, 3, 4] numpy [0, 2, 2, 3, 4] zero-weight particle never drawn True" in got
    assert "sigma points (9, 4) recover mean True covariance True" in got
    assert "rts smoother == batch solve: True tridiagonal True" in got


def test_dependence_measures(capsys):
    # MINE with a bias-corrected EMA gradient, InfoNCE, HSIC by centred Grams, unbiased MMD^2
    # with permutation p-values (counts: loose), leave-one-out KDE bandwidths by logsumexp
    got = _check("dependence_measures.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"p-value|^RESULT": (5e-2, 2e-2)})
    mine, true_mi, p_mmd = _results(got)
    assert 0.6 * true_mi < mine < 1.2 * true_mi and p_mmd < 0.05
    assert "via centring matrix True" in got and "identity permutation agrees True" in got
    assert "kde integrates to 1.0000" in got


def test_ft_transformer(capsys):
    # per-feature tokenizers, PLR periodic embeddings by einsum, a [CLS] token, ReGLU by chunk,
    # MultiheadAttention weights averaged over heads, quantile + bucketize transforms
    got = _check("ft_transformer.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, r2 = _results(got)
    assert last < 0.5 * first and r2 > 0.1
    assert "quantile transform: skew before 3.514 after 0.053 monotone True" in got
    assert "category offsets [0, 3, 8]" in got
    assert "attention maps (2, 200, 8, 8) rows sum to one True" in got


def test_tacotron_attention(capsys):
    # packed bidirectional LSTM encoder, location-sensitive attention (Conv1d over previous and
    # cumulative weights, masked_fill(-inf)), LSTMCell decoding, guided attention loss
    got = _check("tacotron_attention.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, diag = _results(got)
    assert last < 0.7 * first and diag >= 0.75
    assert "attention rows sum to one True padded characters get 0.0" in got
    assert "guided attention weights (2, 6, 4) diagonal small 0.0000 corner 0.9998 masked 18" in got
    assert "monotone True" in got


def test_special_function_stats(capsys):
    # i0e / i1e ratios, digamma / polygamma fixed points, multigammaln, Hurwitz zeta,
    # gammainc / gammaincc, erfcx vs log_ndtr, bessel_j0 / j1, scaled modified Bessel k0 / k1,
    # and finite-difference checks of the special functions' gradients in float64
    got = _check("special_function_stats.py", capsys, rtol=1e-5, atol=1e-6)
    kappa, s_hat, pval = _results(got)
    assert abs(kappa - 4.0) < 0.4 and abs(s_hat - 2.3) < 0.1 and 0 < pval < 1
    assert "A(kappa) == R True" in got
    assert "log-likelihood by hand -0.802857 VonMises.log_prob -0.802857" in got
    assert "mvlgamma 3.895898 by hand 3.895898" in got
    assert "zeta(2) 1.64493407 pi^2/6 1.64493407" in got
    assert "gammainc + gammaincc == 1 True" in got
    assert "wronskian I0 K1 + I1 K0 == 1/x: True" in got
    assert "special-function gradients match finite differences: True []" in got
