"""The fourteenth set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a class-conditional diffusion sampler with classifier-free guidance (DDIM), a masked
autoencoder, SAM / ASAM / Lookahead optimizer wrappers, a learning-rate range test, StyleGAN2's
modulated convolutions and path-length regularizer, DARTS architecture search, retentive
networks (parallel / recurrent / chunkwise), RWKV (GPT and RNN modes), Kolmogorov-Arnold
networks with B-splines, a SIREN signed distance function with an eikonal loss, an
E(n)-equivariant GNN, Grad-CAM / guided backprop / integrated gradients, Lagrangian neural
networks through torch.func, RepVGG re-parameterization and the library's conv-bn fusions, DINO
self-distillation, ProdLDA topic models with the Dirichlet machinery of torch.distributions, an
echo state network, Transformer-XL memories with relative positions, a GFlowNet with trajectory
balance, evolution strategies / CMA-ES over vmapped functional_call populations, CycleGAN with
its image pool, differentiable 2-D Gaussian splatting, and binary networks with a straight-through
estimator checked by gradcheck's forward-mode options.

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_cfg_diffusion_sampler(capsys):
    # cosine schedule by cumprod, conditioning dropout by torch.where to a null class, EMA by
    # lerp_, DDIM with the conditional / unconditional branches in one batch (cat + chunk)
    got = _check("cfg_diffusion_sampler.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, err = _results(got)
    assert last < 0.5 * first and err < 0.3
    assert "monotone True" in got and "ddim deterministic: True" in got


def test_mae_masking(capsys):
    # einsum patchify / unpatchify, argsort masking with ids_restore, gather unshuffling, a
    # frozen sin-cos position embedding, the normalized-pixel loss, an LBFGS linear probe
    got = _check("mae_masking.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, probe = _results(got)
    assert last < 0.6 * first and probe > 0.8
    assert "unpatchify(patchify(x)) == x: True patches (4, 16, 16)" in got
    assert "kept 4 of 16, masked per row [12.0, 12.0], restore is a permutation: True" in got
    assert "frozen pos_embed unchanged by training: True" in got


def test_sam_lookahead(capsys):
    # an Optimizer subclass wrapping a base optimizer over shared param_groups, state["old_p"],
    # BatchNorm momentum switched through model.apply, Lookahead slow weights; the sharpness
    # probe is a difference of two losses, so it is judged in absolute terms
    got = _check("sam_lookahead.py", capsys, rtol=1e-3, atol=5e-5)
    sgd, sam, acc = _results(got)
    assert sgd > 0 and sam > 0 and acc > 0.75
    assert "closure step ok, groups share base: True state keys ['old_p'] rho 0.1" in got
    assert "bn momentum restored: 0.1" in got


def test_lr_finder(capsys):
    # an LRScheduler subclass with get_lr, deepcopy'd state_dicts restored, a cycling
    # DataLoader iterator, np.gradient suggestion, OneCycleLR at the suggested rate
    got = _check("lr_finder.py", capsys, rtol=1e-4, atol=1e-5)
    lr, last, acc = _results(got)
    assert 1e-4 < lr < 1.0 and last < 0.3 and acc > 0.9
    assert "weights restored: True optimizer lr restored: 1e-05 momentum buffers: 0" in got
    assert "diverges True" in got


def test_stylegan_modconv(capsys):
    # modulated / demodulated weights as one grouped conv over the folded batch, equalized-lr
    # linears, the truncation trick, style mixing, path-length regularization (create_graph)
    got = _check("stylegan_modconv.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, pl = _results(got)
    assert last < 0.5 * first and pl > 0
    assert "grouped == per-sample loop: True demodulated unit norms: True" in got
    assert "truncation shrinks spread: True latent input == z input: True" in got
    assert "first half from z True second from flipped True" in got


def test_darts_nas(capsys):
    # MixedOp softmax over candidate ops, separate architecture / weight optimizers, first-order
    # alternating updates, clip_grad_norm_, a genotype by argmax outside "none"
    got = _check("darts_nas.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.8 * first and acc > 0.5
    assert "weights 1795 arch 42 edges 6 ops/edge 7" in got and "alpha rows sum to one: True" in got


def test_retnet_retention(capsys):
    # polar / view_as_complex rotations, a decay mask by masked_fill of tril, the parallel,
    # recurrent and chunkwise forms agreeing, recurrent greedy generation
    got = _check("retnet_retention.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc == 1.0
    assert "parallel == recurrent: True parallel == chunkwise: True max diff True" in got
    assert "recurrent generation == parallel argmax: True" in got


def test_rwkv_timemix(capsys):
    # ZeroPad2d token shift, the stable WKV recurrence == a softmax formula, RNN mode == GPT mode
    got = _check("rwkv_timemix.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.9
    assert "stable wkv == naive softmax wkv: True" in got
    assert "token shift [[[0.0, 0.0], [0.0, 1.0], [2.0, 3.0]]]" in got
    assert "rnn mode == gpt mode: True naive wkv model agrees: True" in got


def test_kan_splines(capsys):
    # Cox-de Boor bases on broadcast comparisons, batched lstsq (curve2coeff), grid updates
    # from sorted samples, Adam then LBFGS(strong_wolfe); float64
    got = _check("kan_splines.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, rmse = _results(got)
    assert last < 1e-2 * first and rmse < 0.2
    assert "partition of unity: True nonnegative: True" in got
    assert "curve2coeff recovers scaled weights: True" in got


def test_siren_sdf(capsys):
    # gradients w.r.t. inputs with create_graph for an eikonal loss, a Laplacian by a loop of
    # second derivatives, cosine-similarity normal alignment, Fourier features
    got = _check("siren_sdf.py", capsys, rtol=1e-4, atol=1e-4)
    first, last, err = _results(got)
    assert last < 0.5 * first and err < 0.3
    assert "gradient [[4.0, 1.0], [-1.0, 0.25]] laplacian [4.0, -2.0]" in got


def test_egnn_equivariant(capsys):
    # combinations + cumsum offsets for batched complete graphs, index_add_ / scatter_add_
    # messages, scatter_reduce("mean") readout, E(3) and permutation equivariance
    got = _check("egnn_equivariant.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, mae = _results(got)
    assert last < 0.5 * first and mae < 0.3
    assert "invariant output: True equivariant coordinates: True coordinates moved: True" in got
    assert "permutation equivariant: True graph outputs equal: True" in got


def test_gradcam_attribution(capsys):
    # forward hooks and full backward hooks (one replacing grad_input), integrated gradients,
    # SmoothGrad, occlusion, the global module forward hook and forward pre-hooks; the training
    # sits on a plateau where Adam amplifies roundings, so the model outputs drift by ~0.2%
    got = _check("gradcam_attribution.py", capsys, rtol=1e-4, atol=1e-5,
                 loose={r"^integrated gradients": (1e-2, 1e-3)})
    first, last, inside = _results(got)
    assert last < first and inside > 0.7
    assert "guided grads differ from vanilla: True" in got and "close True" in got
    assert "global hook saw 14 calls, first ['Conv2d', 'ReLU', 'Conv2d']; pre-hook zeroed the input: True" in got


def test_lagrangian_nn(capsys):
    # torch.func hessian / grad / vmap / functional_call, pinv, jvp == forward_ad dual numbers,
    # jacrev == jacfwd; float64
    got = _check("lagrangian_nn.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, drift = _results(got)
    assert last < first and drift < 1e-5
    assert "euler-lagrange of the analytic lagrangian == closed form: True" in got
    assert "jvp == forward-mode dual == grad . v: True jacrev == jacfwd: True" in got


def test_repvgg_reparam(capsys):
    # BN folding, F.pad of 1x1 kernels, dirac_ identities with groups, __delattr__ of branches,
    # torch.nn.utils.fusion.fuse_conv_bn_eval / fuse_linear_bn_eval / fuse_conv_bn_weights
    got = _check("repvgg_reparam.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.9
    assert "train-time params 5716 deploy params 4948" in got
    assert "deploy == train-time: True same predictions True" in got
    assert "fuse_conv_bn_eval / fuse_linear_bn_eval agree: True weights are parameters: True equal True" in got


def test_dino_selfdistill(capsys):
    # multi-crop by interpolate, parametrizations.weight_norm with a frozen magnitude, param
    # groups without decay, schedules indexed per iteration, a centered / sharpened teacher,
    # cancelled last-layer grads, _foreach EMA teacher
    got = _check("dino_selfdistill.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, acc = _results(got)
    assert last < first and acc > 0.7
    assert "last layer parametrized: True magnitude frozen: True unit-norm rows: True" in got
    assert "param groups: 5 decayed, 6 not" in got


def test_prodlda_topics(capsys):
    # a Laplace-approximated Dirichlet prior, BatchNorm1d(affine=False) decoders, the KL of
    # Independent Normals, Dirichlet log_prob / kl / entropy, StickBreakingTransform, biject_to
    got = _check("prodlda_topics.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, score = _results(got)
    assert last < first and score > 0.4
    assert "closed-form kl == kl_divergence(Independent Normals): True event shape (4,) batch shape (8,)" in got
    assert "dirichlet log_prob [2.51179, 1.79176] matches: True" in got
    assert "dirichlet kl [1.37312, 0.89862] matches: True" in got
    assert "support check [True, True] False" in got
    assert "biject_to(simplex) is stick breaking: StickBreakingTransform round trip True" in got


def test_esn_reservoir(capsys):
    # eigvals spectral radius, solve / cholesky_solve / lstsq ridge readouts, closed-loop
    # forecasting; float64
    got = _check("esn_reservoir.py", capsys, rtol=1e-4, atol=1e-6)
    one_step, horizon, adam = _results(got)
    assert one_step < 0.05 and horizon >= 50 and adam < 0.5
    assert "after 0.90000 eigvals dtype torch.complex128" in got
    assert "fits agree: solve == cholesky_solve True solve == lstsq True" in got


def test_transformer_xl_memory(capsys):
    # the rel_shift view trick, einsum AC + BD scores, triu(diagonal=1 + mlen) masks, memories
    # cut to mem_len under no_grad; segments with memory == one pass over the context
    got = _check("transformer_xl_memory.py", capsys, rtol=1e-4, atol=1e-6)
    first, last, gain = _results(got)
    assert last < 0.7 * first and gain > 0.5
    assert "rel_shift == explicit gather on visible entries: True" in got
    assert "segments with memory == one pass over the last 24 tokens: True" in got


def test_gflownet_hypergrid(capsys):
    # cartesian_prod states, masked_fill(-inf) logits into Categorical, searchsorted sampling,
    # index_add of per-step log-probabilities, a learned log Z in its own param group
    got = _check("gflownet_hypergrid.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, l1 = _results(got)
    assert last < 0.5 * first and l1 < 1.0
    assert "states 64 reward levels [0.1, 0.6, 2.6] log Z 3.10906" in got
    assert "terminating distribution sums to 1.00000" in got


def test_evolution_strategies(capsys):
    # parameters_to_vector / vector_to_parameters, vmap over functional_call populations,
    # stack_module_state, centered ranks, an ES gradient through .grad into Adam, CMA-ES with
    # eigh; 150 CMA-ES generations of sorting let roundings pick other samples near the end
    got = _check("evolution_strategies.py", capsys, rtol=1e-4, atol=1e-6,
                 loose={r"^cma-es|^RESULT": (1.0, 0.2)})
    first, last, rosen = _results(got)
    assert last > 0.9 * first and rosen < 1.0
    assert "stack_module_state == flat unflatten: True keys ['0.bias', '0.weight', '2.bias', '2.weight']" in got
    assert "written-back policy mse" in got and "== -fitness: True" in got


def test_cyclegan_pool(capsys):
    # ReflectionPad2d / InstanceNorm2d ResNet generators, ConvTranspose2d(output_padding=1),
    # PatchGAN, LSGAN targets by expand_as of buffers, the ImagePool, requires_grad toggling,
    # itertools.chain parameters, linear-decay LambdaLR; adversarial training drifts with
    # roundings by ~1e-5 per epoch late in the run
    got = _check("cyclegan_pool.py", capsys, rtol=1e-3, atol=1e-4,
                 loose={r"^cycle reconstruction|^RESULT": (1e-2, 1e-3)})
    first, last, cyc = _results(got)
    assert last < 0.6 * first and cyc < 0.5
    assert "generator keeps the size: (2, 1, 16, 16) patch map (2, 1, 3, 3) reflection pad [3.0, 2.0, 3.0, 2.0]" in got
    assert "pool holds 8 images; final lr 0.000000" in got


def test_gaussian_splat_2d(capsys):
    # R S S^T R^T covariances from stacked rotations, a three-operand einsum Mahalanobis
    # falloff, exclusive cumprod transmittance, avg_pool2d D-SSIM, per-group Adam rates and a
    # densify step that re-creates parameters and the optimizer; float64
    got = _check("gaussian_splat_2d.py", capsys, rtol=1e-4, atol=1e-5)
    first, last, psnr = _results(got)
    assert last < 0.2 * first and psnr > 18
    assert "covariances symmetric True positive definite True" in got
    assert "accumulated alpha in [0, 1]: True" in got and "densified to 56 splats" in got


def test_binary_nets_ste(capsys):
    # a forward / setup_context sign STE with jvp and generate_vmap_rule, XNOR weight scaling,
    # Bi-Real shortcuts, latent weight clamping, gradcheck(check_forward_ad, check_batched_grad)
    # and gradgradcheck(check_fwd_over_rev); the binary net's sign() of near-zero activations
    # flips with the last bit of a rounding, so its training curve is compared loosely (the
    # full-precision twin, fed the same batches, must agree closely)
    got = _check("binary_nets_ste.py", capsys, rtol=1e-4, atol=1e-5,
                 loose={r"^binary:|^accuracy|^RESULT": (0.2, 0.1)})
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.6
    assert "sign [-1.0, -1.0, 1.0, 1.0, 1.0] ste grad [0.0, 1.0, 1.0, 1.0, 0.0]" in got
    assert "gradcheck xnor scaling (forward + batched): True ste is no true derivative: True " \
           "gradgradcheck fwd-over-rev: True" in got
    assert "latent weights in [-1, 1]: True" in got and "predicts the same: True" in got
