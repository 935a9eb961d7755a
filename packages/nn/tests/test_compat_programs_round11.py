"""The eleventh set of programs in the style of common public PyTorch code (issue: drop-in
compatibility), run unchanged on torch and on ember through the `torch` -> `ember` import shim:
a Swin Transformer's shifted windows, ShuffleNet / MobileNetV3 / AlexNet blocks, device-agnostic
training boilerplate, distribution fits written with torch.special, saved-tensor hooks and
activation checkpointing, a worker-sharded streaming loader, 3-D rotations and Kabsch alignment,
LQR control, classic clustering, hashed embeddings with bit tricks, FLOP counting with
__torch_dispatch__ and torch.utils.flop_counter, worker processes sharing tensors, array
beamforming with complex tensors, survival analysis, an RNN-Transducer loss, CP / Tucker
decompositions, a functional PDE solver, N-BEATS with conformal intervals, an adaptive ODE
solver under a neural ODE, and product quantization.

Each program runs on ember and its output is checked on its own (the self-checks hold without
torch); where torch is installed it runs there too and ember's output must print the same lines
with numbers equal to a tolerance."""

from __future__ import annotations

from test_compat_programs import _check_program as _check
from test_compat_programs import _results


def test_swin_window_attention(capsys):
    # window partition / reverse, torch.roll shifts with a slice-built mask, relative position
    # bias through a non-persistent index buffer, patch merging, movedim / swapaxes / narrow
    got = _check("swin_window_attention.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.6 * first and acc == 1.0
    assert "state_dict has the index: False" in got
    assert "index corners [24, 23, 22, 21] 48 torch.int64" in got
    assert "mask (4, 16, 16) masked per window [0, 128, 128, 192]" in got
    assert "partition round trip: True" in got


def test_mobile_blocks(capsys):
    # channel shuffle three ways, LocalResponseNorm by hand, SE with Hardsigmoid, Softmax2d,
    # MAC counting by hooks, nesterov SGD with BatchNorm
    got = _check("mobile_blocks.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.1 * first and acc > 0.7
    assert ": False" not in got
    assert "divisible: [112, 16, 32, 8, 128]" in got
    assert "shuffle agrees: True True ChannelShuffle(groups=4)" in got
    assert "MACs per image: 453120 layers hooked: 15" in got


def test_device_agnostic(capsys):
    # device selection idioms, cuda memory logging and empty_cache without a GPU, autocast and
    # GradScaler disabled off CUDA, non_blocking moves, map_location
    got = _check("device_agnostic.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, acc = _results(got)
    assert last < 0.5 * first and acc > 0.75
    assert "[end] allocated 0.0 MB, peak 0.0 MB, reserved 0.0 MB" in got
    assert "parsed: cuda 1 True 0 cuda:0" in got
    assert "scaler enabled: False scale: 1.0" in got
    assert "same predictions after reload: True" in got


def test_special_mle(capsys):
    # Dirichlet (Minka), Gamma (Newton with polygamma), von Mises (i1e / i0e), chi-square
    # p-values (gammaincc), probit with log_ndtr and L-BFGS, multigammaln / zeta / entr / xlogy
    got = _check("special_mle.py", capsys, rtol=1e-5, atol=1e-6)
    first, last, alpha0 = _results(got)
    assert last < first and abs(alpha0 - 9.5779) < 1e-3
    assert ": False" not in got
    assert "ndtri [-1.959964, 0.0, 1.959964] erfinv form: True logit/expit True" in got
    assert "zipf normalizer 1.34148726 hurwitz 0.2020569" in got


def test_saved_tensor_hooks(capsys):
    # saved_tensors_hooks (bf16 packing, a dict store), save_on_cpu, checkpoint both ways and
    # checkpoint_sequential, graph walking, node hooks, detect_anomaly, forward-mode AD
    got = _check("saved_tensor_hooks.py", capsys, rtol=1e-4, atol=2e-6)
    first, last, diff = _results(got)
    assert last < 0.2 * first and diff < 1e-6
    assert ": False" not in got.replace("anomaly mode off again: False", "")
    assert "node hooks: [('pre', [1.0, 2.0, 3.0])] rescaled grad: [20.0, 40.0, 60.0]" in got
    assert "anomaly: Function 'SqrtBackward0' returned nan values in its 0th output" in got


def test_sharded_stream_loader(capsys):
    # IterableDataset sharded by get_worker_info over 2 persistent workers, default / custom
    # collate, a length-grouping sampler, random_split, WeightedRandomSampler, ConcatDataset
    got = _check("sharded_stream_loader.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, blocks = _results(got)
    assert last < first and blocks == 34
    assert ": False" not in got
    assert "workers seen: [0, 1] main-process info: None" in got
    assert "length groups: [[0, 4, 8], [1, 5, 9], [2, 6, 3], [7]] len 4" in got
    assert "padded batch shapes: [(3, 2), (3, 3), (3, 5), (1, 5)]" in got


def test_pose_geometry(capsys):
    # Rodrigues vs matrix_exp, quaternions (argmax / gather branch, signbit), 6-D rotations with
    # linalg.cross, geodesic angles, Kabsch by SVD, slerp, heaviside, pose refinement
    got = _check("pose_geometry.py", capsys, rtol=1e-5, atol=1e-6)
    first, last, err = _results(got)
    assert last < 1e-3 * first and err < 0.1
    assert ": False" not in got
    assert "copysign: [-1.0, 2.0] signbit: [True, False, True]" in got


def test_lqr_control(capsys):
    # Van Loan matrix_exp, complex eig, matrix_power / matrix_rank, a Riccati fixed point, a
    # kron Lyapunov solve, ldl_factor / ldl_solve, trapezoid integrals, a learned LQR weight
    got = _check("lqr_control.py", capsys, rtol=1e-5, atol=1e-6)
    first, last, rho = _results(got)
    assert last < 0.05 * first and rho < 1
    assert ": False" not in got
    assert "controllability rank 4" in got
    assert "ldl == solve: True constraint 0.3 pivots [3, 2, 3, 4, 5]" in got


def test_clustering_toolkit(capsys):
    # k-means++ / Lloyd with index_add_, pdist + triu_indices silhouette, k-medoids, nanmedian /
    # kthvalue / mode / aminmax, spectral clustering, single linkage, a GMM E-step
    got = _check("clustering_toolkit.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, sil = _results(got)
    assert last < 0.3 * first and sil > 0.7
    assert ": False" not in got
    assert "contingency rows sorted [[0, 0, 40], [0, 40, 0], [40, 0, 0]] spectral purity 1.0000" in got
    assert "cluster sizes [40, 40, 40] mode label 0" in got


def test_hashing_embeddings(capsys):
    # wrapping int64 hashes and shifts, count-min sketch, Bloom filter, searchsorted pruning,
    # bf16 rounding through view(int32), QR embeddings, EmbeddingBag weights, SparseAdam
    got = _check("hashing_embeddings.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, auc = _results(got)
    assert last < 0.5 * first and auc > 0.9
    assert ": False" not in got
    assert ("hashes [-2334855658787354566, -4534774321571632685, 5393363834179572082, "
            "-5362819460573149796, -2368012742733033509, 8239446917798637049]") in got
    assert "arith shift of negatives [-4, -4] [-1] wrap [-9223372036854775808] [0]" in got
    assert "bf16 by bits == .to(bfloat16): True torch.int32 (1,) torch.Size([32])" in got


def test_flop_counter_mode(capsys):
    # a __torch_dispatch__ FLOP counter keyed by aten packets with a module stack, and
    # torch.utils.flop_counter.FlopCounterMode with per-module counts and a custom formula
    got = _check("flop_counter_mode.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, gflops = _results(got)
    assert last < 0.2 * first and gflops == 0.002228
    assert ": False" not in got
    assert ("Global    {'aten.addmm': 1572864, 'aten.bmm': 131072, 'aten.convolution': 393216, "
            "'aten.mm': 131072, 'mm calls': 1}") in got
    assert "FlopCounterMode total 2228224 == ours: True" in got
    assert "  TinyLM.head      [('aten.mm', 131072)]" in got


def test_shared_memory_workers(capsys):
    # share_memory / share_memory_, fork workers writing gradients into a shared buffer, a
    # tensor Queue, Events, frombuffer / asarray / NumPy and DLPack views
    got = _check("shared_memory_workers.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, acc = _results(got)
    assert last < 0.7 * first and acc > 0.7
    assert ": False" not in got.replace("plain tensor shared: False", "").replace("alive: False", "")
    assert "exit codes: [0, 0] alive: False" in got
    assert "frombuffer shares memory: True torch.Size([6]) offset view [2.0, 3.0]" in got


def test_array_beamforming(capsys):
    # polar steering vectors, complex covariance, complex eigh, MUSIC / delay-and-sum / MVDR
    # with complex solve, vdot / inner / conj_physical / view_as_real, a Wirtinger-trained beam
    got = _check("array_beamforming.py", capsys, rtol=1e-5, atol=1e-6)
    first, last, err = _results(got)
    assert last < 0.5 * first and err < 1.0
    assert "music          peaks [-20.0, 15.0]" in got
    assert "grad dtype: torch.complex128" in got


def test_survival_analysis(capsys):
    # Cox partial likelihood with logcumsumexp and Breslow ties, concordance, Kaplan-Meier,
    # Breslow baseline hazard, discrete-time hazards with bucketize and cumprod
    got = _check("survival_analysis.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, ci = _results(got)
    assert last < first and ci > 0.7
    assert ": False" not in got
    assert "bin counts [51, 34, 15, 28, 31, 30, 23, 30, 28, 30]" in got


def test_rnnt_transducer(capsys):
    # the transducer lattice by anti-diagonals with logaddexp against a double loop, its
    # gradient against finite differences, an LSTM / GRU transducer, greedy decoding
    got = _check("rnnt_transducer.py", capsys, rtol=1e-3, atol=2e-4)
    first, last, ter = _results(got)
    assert last < 0.2 * first and ter < 0.5
    assert "diagonal == loop: True" in got
    assert "grad vs finite difference: -0.385168 -0.385168" in got


def test_tensor_decomposition(capsys):
    # unfold / fold by movedim, Khatri-Rao by einsum vs kron, CP-ALS (pinv, lstsq gelsd),
    # Tucker (HOSVD, HOOI by tensordot), a CP-compressed layer
    got = _check("tensor_decomposition.py", capsys, rtol=1e-4, atol=1e-7)
    first, last, err = _results(got)
    assert last <= first and err < 0.01
    assert ": False" not in got
    assert "multilinear rank: [3, 3, 3]" in got


def test_functional_pde_solver(capsys):
    # select_scatter / slice_scatter boundaries, roll vs conv2d Laplacians, index_put / take /
    # put_, func.grad through 40 steps, vmap over initial conditions, diag_embed and
    # diagonal_scatter for Crank-Nicolson
    got = _check("functional_pde_solver.py", capsys, rtol=1e-4, atol=1e-8)
    first, last, rel = _results(got)
    assert last < 0.01 * first and rel < 0.1
    assert ": False" not in got
    assert "boundaries: 0.0 16.0 True True" in got


def test_nbeats_conformal(capsys):
    # Tensor.unfold windows, vander / Fourier bases, doubly residual stacks, diff with prepend,
    # conformal quantiles (interpolation modes, nanquantile), isotonic PAVA, histc
    got = _check("nbeats_conformal.py", capsys, rtol=1e-5, atol=1e-6)
    first, last, coverage = _results(got)
    assert last < 0.2 * first and coverage > 0.85
    assert ": False" not in got
    assert "vander [[1.0, 1.0, 1.0], [4.0, 2.0, 1.0], [9.0, 3.0, 1.0]] [[1, 2], [1, 3]]" in got


def test_adaptive_ode_solver(capsys):
    # a Dormand-Prince tableau with tensordot stages, error control, dense output, evaluation
    # counting, matrix_exp ground truth, a neural ODE trained through the accepted steps
    got = _check("adaptive_ode_solver.py", capsys, rtol=1e-5, atol=1e-7)
    first, last, steps = _results(got)
    assert last < first and steps > 5
    assert ": False" not in got
    assert "linear system: 50 accepted, 7 rejected, 343 evaluations" in got


def test_product_quantization(capsys):
    # batched k-means codebooks, uint8 codes, asymmetric distance tables, an inverted file with
    # isin, recall against brute force, a QR-parametrized rotation with straight-through codes
    got = _check("product_quantization.py", capsys, rtol=1e-4, atol=2e-5)
    first, last, rec = _results(got)
    assert last < first and rec > 0.5
    assert ": False" not in got
    assert "codes torch.uint8 (4, 1200) compression x16" in got
