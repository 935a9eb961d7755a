"""The seventeenth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
orthogonal-polynomial spectral methods (torch.special's Chebyshev / Legendre / Hermite /
Laguerre families, Golub-Welsch quadrature, a Chebyshev collocation BVP, a KAN-style layer), a
character LM on nn.TransformerDecoder with top-k / nucleus sampling and a padded copy task,
graph algorithms on COO / CSR / CSC tensors (PageRank, label propagation, min-plus shortest
paths, sparse softmax attention), integer hashing sketches (xorshift, fmix32, CRC32, Bloom
filter, count-min, MinHash, SimHash), evaluation code mixing NumPy arrays and tensors, a D2Q9
lattice Boltzmann solver with stencil PDEs and an inverse problem, option pricing with Greeks
by autograd and Longstaff-Schwartz, DP alignment with soft-DTW as a custom autograd.Function,
classical image morphology / Canny / Harris / Hough, BPE + Kneser-Ney + TF-IDF + EmbeddingBag,
a differentiable sphere ray tracer, portfolio construction and risk, tabular MDPs with exact
policy gradients through a linear solve, SEIR epidemics fitted by a Poisson likelihood, and
low-rank matrix completion with the nuclear norm (Soft-Impute, ALS, torch.norm(p="nuc")).

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_orthopoly_spectral(capsys):
    # recurrences of six polynomial families, tensor-valued degrees, Golub-Welsch by eigh,
    # lstsq Chebyshev fit + Clenshaw, the Chebyshev differentiation matrix solving u'' = e^{4x}
    got = _check("r17_orthopoly_spectral.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, bvp = _results(got)
    assert last < 0.05 * first and bvp < 1e-6
    assert "recurrences agree: True (42 checks)" in got
    assert "exact to degree 15: True" in got
    assert "clenshaw == direct sum True fit error < 1e-9 True" in got
    assert "tensor degrees T_n(0.5) [1.0, 0.5, -0.5, -1.0]" in got
    assert "D applied to x^3 == 3x^2: True" in got


def test_decoder_lm(capsys):
    # TransformerDecoder(norm_first, gelu by name) with a float causal mask and tgt_is_causal,
    # tied embeddings, label smoothing, greedy / top-k / nucleus decoding, key padding masks
    got = _check("r17_decoder_lm.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.3 * first and acc > 0.9
    assert "causal mask dtype torch.float32 row 1 [0.0, 0.0, -inf, -inf]" in got
    assert "tied: True params 26624" in got and "decoder layers 2 norm_first True" in got
    assert "greedy: 'the quick brown fox" in got


def test_sparse_graph_algos(capsys):
    # duplicate COO entries summed by coalesce, CSR degrees from crow_indices, CSC, sparse.mm
    # PageRank with dangling mass, scatter_reduce(amin) components, sparse.softmax attention
    got = _check("r17_sparse_graph_algos.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, acc = _results(got)
    assert last < 0.01 * first and acc > 0.4
    assert "uncoalesced nnz 103 is_coalesced False" in got
    assert "coalesced nnz 102 max value 2.0 (duplicate summed)" in got
    assert "csr @ dense == coo mm == dense: True True" in got
    assert "pagerank sums 1.000000" in got
    assert "components [0, 24] sizes [24, 3]" in got and "min-plus agrees with bfs: True" in got


def test_int_hashing_sketches(capsys):
    # int64 wrap-around hashing with masks, uint8 bytes by frombuffer, table CRC32 == zlib,
    # int8 / uint8 overflow and promotion, floor / trunc / remainder / fmod on negatives
    got = _check("r17_int_hashing_sketches.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, err = _results(got)
    assert last < 0.5 * first and err < 0.05
    assert "crc32 0x414fa339 zlib 0x414fa339" in got
    assert "fmix32 matches python: True" in got
    assert "int8 wrap [-126, -110] uint8 wrap [4] int8+uint8 torch.int16" in got
    assert "floor_divide [-4, -4, 3, 3] // [-4, -4, 3, 3] trunc [-3, -3, 3, 3]" in got
    assert "remainder [1, -1, -1, 1] % [1, -1, -1, 1] fmod [-1, 1, -1, 1]" in got
    assert "gcd [4, 6, 5, 17] lcm [12, 12, 0]" in got and "never under True" in got


def test_numpy_mixed_eval(capsys):
    # round 17's fix: ndarray right operands and NumPy ufuncs give tensors (__array_wrap__),
    # tensor == ndarray compares elementwise, ufuncs refuse tensors that require grad
    got = _check("r17_numpy_mixed_eval.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, auc = _results(got)
    assert last < 0.5 * first and auc > 0.95
    assert "tensor == ndarray: Tensor torch.bool [True, True, False, True, True] accuracy 0.80" in got
    assert "tensor * ndarray: Tensor torch.float64 [0.0, 0.75, 0.25, 0.0, 0.75]" in got
    assert "np.exp(tensor): Tensor torch.float32" in got
    assert "np.greater(tensor, 0): Tensor torch.uint8 [1, 0]" in got
    assert "tensor += ndarray: torch.float64 [1.0, 1.0, 1.0]" in got
    assert "ufunc on a tensor that requires grad: RuntimeError True" in got


def test_lattice_boltzmann(capsys):
    # roll streaming + einsum equilibria with bounce-back, circular-padded conv2d stencils,
    # red-black masked Gauss-Seidel, gradients through 40 unrolled stencil steps
    got = _check("r17_lattice_boltzmann.py", capsys, rtol=1e-3, atol=1e-6)
    rel, kappa, _ = _results(got)
    assert rel < 0.02 and abs(kappa - 0.15) < 1e-3
    assert "mass conserved True max |uy| < 1e-10 True" in got
    assert "shear at the walls antisymmetric True" in got
    assert "mode decay 0.14312879 predicted 0.14312879" in got


def test_option_pricing(capsys):
    # Greeks by grad / create_graph / autograd.functional.hessian, Newton implied vols, antithetic
    # + control-variate Monte Carlo, Longstaff-Schwartz by lstsq, a binomial tree
    got = _check("r17_option_pricing.py", capsys, rtol=1e-4, atol=1e-5)
    bs, mc, amer = _results(got)
    assert abs(mc - bs) < 0.05 and 5.9 < amer < 6.2
    assert "closed-form delta 0.494744 gamma 0.018425" in got
    assert "bs call 7.467460 delta 0.494744 gamma 0.018425" in got
    assert "implied vols recovered True" in got and "lsm within 0.1 True" in got


def test_soft_dtw_alignment(capsys):
    # anti-diagonal Levenshtein, NW traceback, banded DTW, soft-DTW as an autograd.Function
    # (once_differentiable backward == unrolled autograd, gradcheck), LBFGS barycenters
    got = _check("r17_soft_dtw_alignment.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, bary = _results(got)
    assert last < first and bary < 1.0
    assert "levenshtein kitten/sitting 3 flaw/lawn 2 same 0" in got
    assert "grads agree True" in got and "gradcheck soft-dtw True" in got
    assert "once_differentiable gradient requires grad False: RuntimeError True" in got


def test_classic_cv_morphology(capsys):
    # max_pool2d morphology, unfold label propagation, chamfer distances, Sobel + NMS by fancy
    # indexing, Harris by max_pool2d equality, Hough by index_put_(accumulate), Otsu by histc
    got = _check("r17_classic_cv_morphology.py", capsys, rtol=1e-4, atol=1e-5)
    comps, otsu, theta = _results(got)
    assert comps == 4 and 0.4 < otsu < 0.6 and abs(theta - 116.57) < 2
    assert "connected components 4 sizes [1, 45, 100, 113]" in got
    assert "square corners found 4" in got
    assert "integral image box == avg_pool2d: True" in got


def test_bpe_ngram_tfidf(capsys):
    # unique(dim=0, return_counts) BPE merges, bincount bigrams with Kneser-Ney, sparse TF-IDF
    # with sparse.sum / sparse.mm, PPMI + svd, EmbeddingBag(mean) with offsets
    got = _check("r17_bpe_ngram_tfidf.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, ppl = _results(got)
    assert last < 0.1 * first and 1 < ppl < 10
    assert "'lowest' tokenized ['lo', 'we', 'st_']" in got
    assert "kn rows sum to one True" in got
    assert "retrieval top docs [0, 4, 1]" in got and "fasttext train accuracy 1.000" in got


def test_sphere_raytracer(capsys):
    # masked quadratic intersections, min with indices over spheres, shadows, a soft silhouette
    # whose gradient matches central differences, inverse rendering by Adam
    got = _check("r17_sphere_raytracer.py", capsys, rtol=1e-3, atol=1e-5)
    first, last, err = _results(got)
    assert last < 1e-3 * first and err < 0.01
    assert "gradient matches finite differences: True" in got
    assert "hit pixels 125 shadowed hits 12" in got


def test_portfolio_risk(capsys):
    # torch.cov + Ledoit-Wolf, min variance by solve, simplex projection, softmax max-Sharpe,
    # risk parity, quantile VaR / sorted CVaR, cummax drawdowns, unfold rolling windows
    got = _check("r17_portfolio_risk.py", capsys, rtol=1e-3, atol=1e-5)
    vol, sharpe, cvar = _results(got)
    assert 0 < vol < 0.2 and sharpe > 0.5 and 0 < cvar < 0.05
    assert "simplex projection [0.15, 0.85, 0.0, 0.0]" in got
    assert "risk parity contributions equal True" in got and "cvar >= var True" in got


def test_tabular_mdp(capsys):
    # index_put_(accumulate) transition tensors, einsum Bellman backups, exact evaluation by
    # solve, soft values by logsumexp, Q-learning from NumPy uniforms, the policy-gradient
    # theorem against autograd through linalg.solve; Q-learning follows argmax ties: loose
    got = _check("r17_tabular_mdp.py", capsys, rtol=1e-4, atol=1e-6,
                 loose={r"q-learning|expected sarsa|^RESULT": (5e-2, 5e-2)})
    v, _, gap = _results(got)
    assert abs(v - 0.529605) < 1e-5 and gap < 1e-10
    assert "policy iteration converged" in got and "same values True" in got
    assert "occupancy identity d^T r 0.52960450 mu^T V 0.52960450" in got
    assert "policy gradient theorem matches autograd through solve: True" in got


def test_epidemic_sir(capsys):
    # RK4 SEIR, Newton on the final-size relation by autograd, eigvals spectral radius, Poisson
    # log-likelihood fitting through the unrolled solver, a Laplace posterior by hessian,
    # chain-binomial draws by inverse CDF of Binomial.log_prob
    got = _check("r17_epidemic_sir.py", capsys, rtol=1e-3, atol=1e-4)
    final, beta, gamma = _results(got)
    assert 0.85 < final < 0.95 and 0.3 < beta < 0.6 and 0.05 < gamma < 0.25
    assert "population conserved True" in got
    assert "final size newton 0.89264475" in got
    assert "eigvals dtype torch.complex128" in got


def test_matrix_completion(capsys):
    # round 17's fix: torch.norm(W, p='nuc') (three ways, batched dims, keepdim, dtype, bad
    # inputs, its U V^T gradient), Soft-Impute by svd shrinkage, ALS by batched masked solves
    got = _check("r17_matrix_completion.py", capsys, rtol=1e-3, atol=1e-4)
    si, als, gd = _results(got)
    assert si < 1.0 and als < 2.0 and gd < 2.0
    assert "nuclear norm torch.norm 24.364638 method 24.364638 matrix_norm 24.364638 svdvals 24.364638" in got
    assert "batched over dims (1, 2) [24.364638, 62.495085] over (0, 2) shape (3,) keepdim (2, 1, 1)" in got
    assert got.count("nuclear norm of a bad input: RuntimeError") == 2
    assert "d nuc / dW == U V^T: True" in got
