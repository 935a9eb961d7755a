"""The fifteenth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
Glow with an LU-decomposed 1x1 convolution, a complex128 state-vector quantum circuit simulator
with a VQE, matrix product states and an MPS classifier, MLP-Mixer / gMLP / ConvMixer, modern
Hopfield networks with Hopfield pooling, a Decision Transformer, learned image compression with
GDN and an entropy bottleneck, unrolled accelerated-MRI reconstruction, optimization on the
Stiefel manifold and torch.nn.utils.parametrizations.orthogonal, views / in-place / version
counter semantics, sparse COO / CSR solvers and label propagation, differentiable sorting and
ranking, heatmap keypoint detection, DragonNet treatment-effect estimation, a two-tower
retrieval model with EmbeddingBag, T5 relative position buckets and ALiBi, an OptNet-style QP
layer, (2+1)-D video convolutions with a temporal shift, MuZero's value transform and search, and
ensemble active learning with a last-layer Laplace approximation, and parameter-efficient
fine-tuning of a frozen backbone (adapters, BitFit, prefixes).

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_glow_flow(capsys):
    # ActNorm's data-dependent init behind a uint8 buffer, torch.linalg.lu of a rotation, slogdet,
    # squeeze by view + permute, zero-initialized couplings, jacrev of one flow step
    got = _check("glow_flow.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, inverse_bad = _results(got)
    assert last < 0.8 * first and inverse_bad == 0
    assert "1x1 conv log|det| -0.000000 slogdet 0.000000" in got
    assert "squeeze round trip: True shapes (64, 2, 4, 4) (64, 8, 2, 2)" in got
    assert "logdet == slogdet of jacrev: True jac (16, 16)" in got


def test_quantum_circuit_sim(capsys):
    # complex128 tensordot / movedim gate application, rotation gates by torch.stack of complex
    # entries, kron, eigvalsh / eigh, matrix_exp(-iHt), vdot expectations, vmap over inputs
    got = _check("quantum_circuit_sim.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, exact = _results(got)
    assert exact < last < first
    assert "bell probabilities [0.5, 0.0, 0.0, 0.5] norm 1.000000" in got
    assert "pauli algebra XY == iZ: True dtype torch.complex128" in got
    assert "parameter shift -0.216174 autograd -0.216174" in got


def test_mps_tensor_network(capsys):
    # truncated SVD sweeps, QR left-canonicalization, einsum transfer matrices, bmm half-chains
    got = _check("mps_tensor_network.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, acc = _results(got)
    assert last < 0.3 * first and acc > 0.9
    assert "chi 32 bonds [2, 4, 8, 16, 32, 16, 8, 4, 2] error exact" in got
    assert "left-canonical isometries: True same state: True" in got
    assert "two half-chains == one sweep: True" in got


def test_mlp_mixer_gmlp(capsys):
    # token mixing by transposes and by Conv1d (state dicts interchanged), gMLP's spatial gate,
    # ConvMixer with padding="same", unfold patch embeddings, SequentialLR(LinearLR, cosine)
    got = _check("mlp_mixer_gmlp.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.8 * first and acc > 0.8
    assert "conv patchify == unfold + linear: True" in got
    assert "sgu starts as the identity on u: True" in got
    assert "conv1d token mixing == transposed linear: True" in got


def test_modern_hopfield(capsys):
    # logsumexp energies decreasing under the softmax update, the update as grad of lse,
    # MultiheadAttention(kdim, vdim) pooling with key padding masks
    got = _check("modern_hopfield.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.9
    assert "monotone True" in got and "update == grad of lse: True" in got
    assert "padding gets no attention: True rows sum to one: True" in got


def test_decision_transformer(capsys):
    # flip / cumsum / flip returns-to-go, interleaved tokens by stack + reshape, a causal
    # TransformerEncoder with key padding masks; rollouts with the mha fast path switched off
    # (torch's fast path turns fully masked left-padded rows to NaN, pytorch/pytorch#118628)
    got = _check("decision_transformer.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, best = _results(got)
    assert last < first and best >= 5
    assert "discounted loop == toeplitz matmul: True" in got
    assert "returns-to-go[0] [6.0, 6.0, 6.0, 6.0, 6.0, 6.0] first == return: True" in got


def test_learned_compression(capsys):
    # a LowerBound autograd.Function, GDN by conv2d of squares, a factorized entropy model
    # (softplus matrices, tanh factors), uniform noise vs rounding, main / aux optimizers; the
    # rate-distortion loss weighs the MSE by 3251, so late steps drift by ~1e-4
    got = _check("learned_compression.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, bpp = _results(got)
    assert last < 0.1 * first and 0 < bpp < 8
    assert "lower bound [1.0, 1.0, 2.0] grad [0.0, -1.0, 1.0]" in got
    assert "main parameters 20 aux 1 disjoint True" in got


def test_mri_reconstruction(capsys):
    # centered orthonormal fft2 / ifft2 with (i)fftshift over dims, view_as_real / view_as_complex,
    # CG-SENSE with complex vdot, an unrolled network with learned soft data consistency
    got = _check("mri_reconstruction.py", capsys, rtol=1e-3, atol=1e-4)
    first, last, gain = _results(got)
    assert last < 0.6 * first and gain > 2
    assert "ortho fft preserves energy: True round trip True dc at center True" in got
    assert "adjoint test <Ax, y> == <x, A^H y>: True" in got


def test_stiefel_manifold_opt(capsys):
    # tangent projections with QR and Cayley retractions, geqrf + householder_product, Procrustes
    # by SVD, matrix_exp gradients, parametrizations.orthogonal with its three maps; float64
    got = _check("stiefel_manifold_opt.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, sub = _results(got)
    assert last < first and sub == 1e-8
    assert "householder_product == qr's Q: True R on the diagonal True" in got
    assert got.count("start orthogonal True") == 3 and got.count("parametrized True original (5, 5)") == 3


def test_view_inplace_semantics(capsys):
    # which ops return views, writes through views, channels_last strides, version counters,
    # .data vs .detach(), CopySlices, and the errors users meet (torch refuses recorded writes
    # into unbind / split outputs, ember records them: the program writes those under no_grad)
    got = _check("view_inplace_semantics.py", capsys, rtol=1e-6, atol=1e-7)
    assert "arange().reshape() is itself a view: True" in got
    assert "reshape of contiguous is a view: True flatten too: True" in got
    assert "grad_fn CopySlices values [10.0, 4.0, 9.0, 4.0]" in got
    assert "modifying a saved tensor: RuntimeError" in got
    assert "tensor_split with grad: values [4.0, 3.0, 6.0] grad [2.0, 2.0, 6.0]" in got


def test_sparse_cg_solver(capsys):
    # coalesce of duplicates, COO <-> CSR, sparse mm / mv / matmul, sparse.sum, a preconditioned
    # CG against linalg.solve, label propagation, sparse_mask of a sparse tensor, gradients into
    # sparse values through torch.sparse.mm; float64
    got = _check("sparse_cg_solver.py", capsys, rtol=1e-4, atol=1e-7)
    iters, ok, acc = _results(got)
    assert iters < 60 and ok == 1 and acc > 0.9
    assert "coalesced before False nnz 461" in got and "coalesced True nnz 460" in got
    assert "sparse_mask keeps 10 values equal True" in got


def test_differentiable_sorting(capsys):
    # NeuralSort / SoftSort relaxations, pairwise-sigmoid soft ranks, a straight-through
    # permutation, stable sorts with ties, searchsorted(side=, sorter=), bucketize(right=)
    got = _check("differentiable_sorting.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, rho = _results(got)
    assert last < 0.2 * first and rho > 0.9
    assert "stable sort indices [1, 4, 2, 6, 0, 3, 5] descending [0, 3, 5, 2, 6, 1, 4]" in got
    assert "searchsorted left [0, 0, 1, 3, 3, 4] right [0, 1, 3, 3, 4, 4]" in got


def test_keypoint_heatmaps(capsys):
    # meshgrid(indexing="xy") targets, ConvTranspose2d / PixelShuffle heads, argmax decoding with
    # the quarter-pixel shift, soft-argmax, flip testing by index_select; the quarter-pixel shift
    # is sign(neighbour difference), which flips with roundings on flat heatmaps
    got = _check("keypoint_heatmaps.py", capsys, rtol=1e-4, atol=1e-5,
                 loose={r"^argmax|^flip test|^soft-argmax|^RESULT": (0.05, 0.05)})
    first, last, pck = _results(got)
    assert last < 0.1 * first and pck > 0.2
    assert "target peak decodes within a pixel: True" in got
    assert "unshuffle round trip True" in got


def test_tarnet_causal(capsys):
    # where-selected outcome heads, an RBF MMD by cdist, targeted regularization, cov with
    # aweights / fweights, corrcoef, nanmean / nanmedian, bincount with weights, histc,
    # quantile interpolation modes, ReduceLROnPlateau
    got = _check("tarnet_causal.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, pehe = _results(got)
    assert last < 0.3 * first and pehe < 1.0
    assert "group counts [192, 93, 96, 219]" in got


def test_two_tower_retrieval(capsys):
    # EmbeddingBag with offsets / per_sample_weights / padding_idx / max_norm, pad_sequence with
    # padding_side="left", F.embedding_bag, in-batch negatives with a logQ correction written in
    # place into the logits (the division before it keeps its inputs, not its result)
    got = _check("two_tower_retrieval.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, recall = _results(got)
    assert last < 0.7 * first and recall > 0.4
    assert "offsets == padded 2-D == left padded: True" in got
    assert "max_norm renormalized looked-up rows only: True others kept True" in got


def test_t5_relative_bias(capsys):
    # T5 relative position buckets, ALiBi slopes, float and bool masks into
    # scaled_dot_product_attention(scale=); the absolute-position model drifts by ~0.5% over
    # training (its gradients agree to 1e-6 at every early step)
    got = _check("t5_relative_bias.py", capsys, rtol=1e-4, atol=1e-5,
                 loose={r"^absolute": (3e-2, 2e-2)})
    first, last, acc32 = _results(got)
    assert last < first and acc32 > 0.1
    assert "bidirectional buckets [6, 6, 5, 5, 5, 4, 4, 3, 2, 1, 0, 9, 10, 11, 12, 12, 13, 13, 13, 14, 14]" in got
    assert "alibi slopes 6 [0.25, 0.0625, 0.015625, 0.003906, 0.5, 0.125]" in got


def test_optnet_qp_layer(capsys):
    # a KKT-solving autograd.Function against autograd through linalg.solve, gradcheck, a
    # simplex projection with a custom backward, a tril-parametrized QP fit; float64
    got = _check("optnet_qp_layer.py", capsys, rtol=1e-4, atol=1e-7)
    first, last, ok = _results(got)
    assert last < 0.01 * first and ok == 1
    assert "custom backward == autograd through solve: Q True p True A True b True" in got
    assert "simplex projection gradcheck: True" in got


def test_video_2plus1d(capsys):
    # (1,3,3) + (3,1,1) Conv3d factorization, a temporal shift by slicing, MaxPool3d(ceil_mode),
    # trilinear interpolate both ways, SGD(nesterov) with CosineAnnealingWarmRestarts
    got = _check("video_2plus1d.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.5
    assert "maxpool3d ceil_mode (1, 1, 2, 6, 6) floor (1, 1, 2, 5, 5)" in got
    assert "trilinear down [0.5, 2.5, 4.5, 6.5]" in got


def test_muzero_support(capsys):
    # the h / h^-1 value transform, two-hot scatter_ encodings, min-max normalized hidden
    # states, gradient hooks on the unrolled dynamics, a pUCT search
    got = _check("muzero_support.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, ret = _results(got)
    assert last < 0.5 * first and ret > 20
    assert "two-hot rows sum to one True expectation == h(x) True" in got


def test_ensemble_active_learning(capsys):
    # stack_module_state + vmap(functional_call) ensembles, entr / xlogy BALD scores, Subset /
    # ConcatDataset / BatchSampler loaders, autograd.functional hessian / hvp / vhp / jacobian,
    # ndtr / ndtri / log_ndtr
    got = _check("ensemble_active_learning.py", capsys, rtol=1e-4, atol=1e-5)
    acc0, acc, ece = _results(got)
    assert acc > 0.85 and ece < 0.2
    assert "hessian (50, 50) symmetric True hvp == H v True vhp == hvp True jacobian (5, 2, 50)" in got


def test_adapter_frozen_backbone(capsys):
    # requires_grad_(False) backbones, adapters / BitFit / prefix tuning, x += F.linear(x, frozen)
    # and writes into a quotient's output (torch's saved tensors: matmul keeps an input only for
    # its partner's gradient, div keeps the dividend), sums with transposed operands laid out
    # like the first one, the refused x += adapter(x) caught as RuntimeError, inference_mode
    got = _check("adapter_frozen_backbone.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.6 * first and acc > 0.4
    assert "x += F.linear(x, frozen) backward ok, grad [[2.5, 0.5, 4.5]]" in got
    assert "x += adapter(x) with a trainable adapter: RuntimeError (True)" in got
    assert got.count("frozen weights unchanged True frozen grads None True") == 4
