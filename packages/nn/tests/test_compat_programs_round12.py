"""The twelfth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a deep equilibrium model with Anderson acceleration and an implicit backward hook, energy-based
models with Langevin sampling and sliced / denoising score matching, a discrete-latent world
model (RSSM), K-FAC and Shampoo built from module hooks, knowledge-graph embeddings (TransE /
RotatE / ComplEx), a spiking network with surrogate gradients, Poincare embeddings, a Set
Transformer, growing neural cellular automata, TabNet with sparsemax / entmax, a Hessian
spectrum (power iteration, Hutchinson, Lanczos), a GIN on batched molecule-like graphs,
rectified flow with a foreach EMA, word2vec with sparse gradients, adversarial training
(PGD / TRADES), a latent neural process with distribution-heavy evaluation, an RBM with exact
and AIS partition functions, Performer attention, Slot Attention, and continual learning with
EWC / SI.

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_deq_anderson(capsys):
    # Anderson acceleration with batched solve_ex, an implicit backward through register_hook
    # (adjoint fixed point by autograd.grad), matrix_norm(ord=2) kept below 1
    got = _check("deq_anderson.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, rel = _results(got)
    assert last < 0.3 * first and rel < 1e-6
    assert ": False" not in got
    assert "losses agree: True" in got and "hooks left 0" in got


def test_ebm_score_matching(capsys):
    # SGLD with autograd.grad on samples, a replay buffer, exact score matching by
    # vmap(jacrev), sliced score matching (a third derivative of SiLU / Softplus nets)
    got = _check("ebm_score_matching.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, cos = _results(got)
    assert last < first and cos > 0.5
    assert "buffer inside box: True params 4417" in got
    assert "jacobian (128, 2, 2)" in got


def test_rssm_world_model(capsys):
    # Independent(OneHotCategoricalStraightThrough), KL balancing with free nats, Bernoulli /
    # Normal heads, imagination with the mode, OneHotCategorical.enumerate_support
    got = _check("rssm_world_model.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, kl = _results(got)
    assert last < 0.6 * first and kl > 0
    assert ": False" not in got
    assert "support [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]] entropy ok: True mode [0.0, 0.0, 1.0]" in got
    assert "imagined one-hot rows: True" in got


def test_kfac_shampoo(capsys):
    # forward pre-hooks, full backward hooks and pre-hooks, Kronecker factors with lerp_,
    # eigh preconditioning, post-accumulate-grad hooks, a global module forward hook
    got = _check("kfac_shampoo.py", capsys, rtol=1e-4, atol=1e-5)
    sgd, kfac, shampoo = _results(got)
    assert kfac < sgd and shampoo < 1.0
    assert "kfac: backward pre-hook calls 60 last nu 1.0000 A factor (9, 9) hooks left 0" in got
    assert "module calls 120 (['Linear', 'Tanh', 'Linear']) grad accumulations 120" in got


def test_kg_embeddings(capsys):
    # Embedding(max_norm), torch.polar / view_as_complex rotations, conj, renorm_,
    # index_put_ filtering of known triples
    got = _check("kg_embeddings.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, mrr = _results(got)
    assert last < 0.5 * first and mrr > 0.8
    assert "max_norm respected: True" in got


def test_spiking_snn(capsys):
    # an autograd.Function with once_differentiable, torch.heaviside, a surrogate gradient,
    # van Rossum distances by conv1d, gradcheck
    got = _check("spiking_snn.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.9
    assert "gradcheck: True" in got
    assert "heaviside at 0 -> [0.0, 0.0, 1.0] surrogate grad [0.02778, 1.0, 0.02778]" in got


def test_poincare_embeddings(capsys):
    # acosh / atanh / arccosh, finfo eps, nextafter, renorm retraction, the Lorentz model
    got = _check("poincare_embeddings.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, rho = _results(got)
    assert last < 0.5 * first and rho > 0.3
    assert ": False" not in got
    assert "boundary 0.99999000" in got


def test_set_transformer(capsys):
    # key_padding_mask, need_weights per head, masked pooling, sdpa with a bool mask and scale,
    # permutation invariance by gather
    got = _check("set_transformer.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, inv = _results(got)
    assert last < 0.2 * first and inv < 1e-4
    assert ": False" not in got
    assert "per-head weights (48, 4, 6, 12) padded keys weight 0.0 rows sum to 1: True" in got


def test_neural_ca(capsys):
    # depthwise Sobel perception with circular padding, max_pool2d alive masks, a sample pool
    # with index_copy_, per-parameter gradient normalization, MultiStepLR
    got = _check("neural_ca.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, alive = _results(got)
    assert last < 0.6 * first and alive > 0
    assert "perception channels 48 sobel sums 0.0 1.00" in got


def test_tabnet_sparsemax(capsys):
    # sparsemax / entmax autograd Functions (gradcheck), ghost batch norm, F.glu, einsum
    # importances; float64 (sparsemax supports flip with rounding)
    got = _check("tabnet_sparsemax.py", capsys, rtol=1e-3, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.2 * first and acc > 0.6
    assert "sparsemax [[0.65, 0.35, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]" in got
    assert "gradcheck sparsemax True entmax True" in got
    assert "batches tracked 40" in got


def test_hessian_spectrum(capsys):
    # Hessian-vector products by double backward, power iteration, Hutchinson, Lanczos,
    # autograd.functional.hessian / hvp / vhp, func.hessian, materialize_grads
    got = _check("hessian_spectrum.py", capsys, rtol=1e-4, atol=1e-6)
    top, est, exact = _results(got)
    assert abs(est - exact) < 0.1 * exact and top > 0
    assert ": False" not in got
    assert "func.hessian [[12.0, 3.0], [3.0, -0.9093]]" in got
    assert "unused parameter grad materialized: torch.Size([1, 1]) 0.0" in got


def test_gin_molecules(capsys):
    # scatter_reduce_(amax, include_self=False), index_reduce_ (mean, and amax with autograd),
    # segment_reduce with lengths, repeat_interleave batch vectors, a virtual node
    got = _check("gin_molecules.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, mae = _results(got)
    assert last < 0.01 * first and mae < 0.2
    assert "degree histogram [0, 100, 286, 96, 9]" in got
    assert "index_reduce_ amax ties share the gradient: [[0.5, 1.0], [0.5, 0.0], [1.0, 1.0]]" in got
    assert "segment_reduce max == scatter amax: True mean: True" in got


def test_rectified_flow(capsys):
    # TransformedDistribution(Normal, SigmoidTransform), _foreach_lerp_ EMA, SequentialLR,
    # Euler / Heun sampling under inference_mode, reflow, sliced Wasserstein
    got = _check("rectified_flow.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, sw = _results(got)
    assert last < first and sw < 1.0
    assert "logit-normal density at 0.5 1.59577 at 0.9 0.39657" in got
    assert "foreach lerp == mul+add: True" in got


def test_word2vec_sgns(capsys):
    # Embedding(sparse=True) + SparseAdam, coalesced sparse grads, from_pretrained (Embedding
    # and EmbeddingBag), padding_idx
    got = _check("word2vec_sgns.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, purity = _results(got)
    assert last < 0.7 * first and purity > 0.4
    assert "sparse grad: True nnz rows 32 values (32, 16)" in got
    assert "padding_idx grad rows [0.0, 3.0, 3.0, 0.0]" in got


def test_adversarial_training(capsys):
    # input gradients, FGSM, L-inf / L2 PGD with tensor clamp bounds, enable_grad under
    # no_grad, TRADES with kl_div(log_target=True)
    got = _check("adversarial_training.py", capsys, rtol=1e-4, atol=1e-5)
    clean, before, after = _results(got)
    assert clean > 0.95 and after > before
    assert "within budget: True" in got and "pgd loss rises: True" in got


def test_neural_process(capsys):
    # Independent Normal latents and kl_divergence, MixtureSameFamily predictive, StudentT by
    # L-BFGS, LowRankMultivariateNormal, register_kl for a Distribution subclass, icdf / cdf
    got = _check("neural_process.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, coverage = _results(got)
    assert last < 0.5 * first and coverage > 0.7
    assert "low-rank == full: True" in got
    assert "custom KL [0.0, inf] constraints: [False, True] True" in got


def test_rbm_contrastive(capsys):
    # CD-1 / PCD with addmm_, the exact partition function by cartesian_prod + logsumexp, AIS,
    # pseudo-likelihood, combinations
    got = _check("rbm_contrastive.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, err = _results(got)
    assert last < first and err < 0.05
    assert "hand gradient == autograd: True hidden states enumerated 64" in got
    assert "hidden pairs 15" in got


def test_performer_attention(capsys):
    # orthogonal random features by linalg.qr, FAVOR+ bidirectional and causal (cumsum of
    # outer products), elu + 1 features, against scaled_dot_product_attention
    got = _check("performer_attention.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, rel = _results(got)
    assert last < first and rel < 0.2
    assert "cumsum == recurrent: True orthogonal block: True" in got


def test_slot_attention(capsys):
    # softmax over slots, GRUCell on flattened slots, spatial broadcast decoding,
    # Tensor.unflatten, soft-IoU matching over permutations
    got = _check("slot_attention.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, iou = _results(got)
    assert last < 0.1 * first and iou > 0
    assert "alpha sums to one: True attention (64, 3, 8, 8)" in got


def test_continual_ewc(capsys):
    # Fisher by vmap(grad) over functional_call, add_param_group, ModuleDict heads, online EWC,
    # SI path integrals, an optimizer state_dict round trip
    got = _check("continual_ewc.py", capsys, rtol=1e-4, atol=1e-5)
    naive, ewc, si = _results(got)
    assert ewc > naive
    assert "vmap fisher == loop: True keys ['body.0.bias', 'body.0.weight']" in got
    assert got.count("param groups 4 lr 0.05") == 3


def test_image_retrieval(capsys):
    # a frozen stem with the legacy nn.CrossMapLRN2d, GeM / R-MAC / NetVLAD with F.normalize
    # over dims (1, 2), eigh whitening, hardest-triplet mining, deepcopy of a tensor's grad;
    # mAP rankings make the tolerance looser
    got = _check("image_retrieval.py", capsys, rtol=2e-3, atol=1e-4)
    first, last, m_ap = _results(got)
    assert last < 0.8 * first and m_ap > 0.9
    assert "deepcopy keeps grad: [2.0, 2.0, 2.0]" in got
    assert "descriptor norms 1.0000 1.0000 lrn CrossMapLRN2d(5, alpha=0.001, beta=0.75, k=1.0)" in got
