"""Float32 matrix products on conv_gemm's packed AVX-512 kernel (kernels/cpu/packed_gemm.h): matmul
takes it on an AVX-512 CPU while OpenBLAS runs narrower kernels (OPENBLAS_CORETYPE=Haswell, as in
this project's environment). Every operand layout, batches and odd sizes against NumPy; a
subprocess forces the Haswell core so the path runs whatever the environment sets."""

from __future__ import annotations

import os
import subprocess
import sys

import ember
import numpy as np
import pytest

# (M, K, N): above the kernel's thresholds (>= 16 each, M*N*K >= 65536), sizes off its 16-wide
# tiles, and one just below (OpenBLAS)
SIZES = [(16, 256, 16), (37, 61, 53), (130, 17, 300), (256, 256, 200), (15, 256, 64)]


def _operand(rng, rows, cols, transposed):
    """A float32 (rows, cols) tensor, stored transposed (a column-major view) when asked."""
    a = rng.standard_normal((cols, rows) if transposed else (rows, cols)).astype(np.float32)
    t = ember.from_numpy(a)
    return (t.t(), a.T) if transposed else (t, a)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("M,K,N", SIZES)
def test_matmul_layouts_match_numpy(ta, tb, M, K, N):
    rng = np.random.default_rng(M * 7 + N)
    a, an = _operand(rng, M, K, ta)
    b, bn = _operand(rng, K, N, tb)
    ref = an.astype(np.float64) @ bn.astype(np.float64)
    np.testing.assert_allclose(a.matmul(b).numpy(), ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize("shared", [False, True])
def test_batched_matmul_matches_numpy(shared):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 40, 72)).astype(np.float32)
    b = rng.standard_normal((72, 33) if shared else (3, 72, 33)).astype(np.float32)
    got = ember.from_numpy(a).matmul(ember.from_numpy(b)).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_two_threads_match_one():
    rng = np.random.default_rng(4)
    a = ember.from_numpy(rng.standard_normal((200, 128)).astype(np.float32))
    b = ember.from_numpy(rng.standard_normal((300, 128)).astype(np.float32)).t()
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = a.matmul(b).numpy()
        ember.set_num_threads(2)
        two = a.matmul(b).numpy()
    finally:
        ember.set_num_threads(before)
    np.testing.assert_array_equal(one, two)


def test_linear_training_step_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 16, 48)).astype(np.float32)
    w = rng.standard_normal((70, 48)).astype(np.float32)
    results = []
    for fw in (ember, torch):
        xt, wt = fw.tensor(x, requires_grad=True), fw.tensor(w, requires_grad=True)
        out = fw.nn.functional.linear(xt, wt)
        (out * out).sum().backward()
        results.append([t.detach().numpy() for t in (out, xt.grad, wt.grad)])
    for e, t in zip(*results):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-3)


def test_forced_haswell_core_runs_the_packed_kernel():
    """The path itself, in a process whose OpenBLAS is on its AVX2 (Haswell) kernels."""
    code = (
        "import ember, numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.standard_normal((64, 96)).astype(np.float32)\n"
        "b = rng.standard_normal((80, 96)).astype(np.float32)\n"
        "got = ember.from_numpy(a).matmul(ember.from_numpy(b).t()).numpy()\n"
        "np.testing.assert_allclose(got, a.astype(np.float64) @ b.T, rtol=1e-4, atol=1e-3)\n"
        "print('ok')\n"
    )
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
