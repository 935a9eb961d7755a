"""The CPU random streams come from Philox4x32-10 computed several counters per vector
(kernels/cpu/nn_vec_random.inc). These tests pin the stream to a plain-Python Philox (a known
answer), check that every ISA copy gives the same bits, and check dropout's fused mask."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ember
import numpy as np
import pytest

M32 = 0xFFFFFFFF


def philox(seed: int, counter: int) -> list[int]:
    """Philox4x32-10 of (key = seed, counter), as core/generator.h computes it."""
    k0, k1 = seed & M32, (seed >> 32) & M32
    c = [counter & M32, (counter >> 32) & M32, 0, 0]
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


def test_rand_is_the_philox_stream():
    # rand (float32): value i is word i % 4 of counter i // 4, its top 24 bits over 2^24; a fresh
    # seed starts at counter 0. 37 values: whole vectors of counters and a scalar tail.
    ember.manual_seed(1234)
    got = ember.rand(37).numpy()
    want = [(philox(1234, i // 4)[i % 4] >> 8) / 2.0**24 for i in range(37)]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))
    # the next call continues after the 10 counters the first one reserved
    got2 = ember.rand(4).numpy()
    want2 = [(philox(1234, 10)[j] >> 8) / 2.0**24 for j in range(4)]
    np.testing.assert_array_equal(got2, np.array(want2, dtype=np.float32))


def test_large_seed_uses_both_key_words():
    seed = 0x123456789ABCDEF
    ember.manual_seed(seed)
    got = ember.rand(8).numpy()
    want = [(philox(seed, i // 4)[i % 4] >> 8) / 2.0**24 for i in range(8)]
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))


_CHILD = """
import json, ember
out = {}
ember.manual_seed(7)
out["rand"] = ember.rand(1001).tolist()
out["randn"] = ember.randn(1001).tolist()
out["bern"] = ember.empty(999).bernoulli_(0.3).tolist()
out["randint"] = ember.randint(0, 1000, (517,)).tolist()
out["rand64"] = ember.rand(333, dtype=ember.float64).tolist()
y = ember.nn.functional.dropout(ember.ones(1003), 0.4, True)
out["dropout"] = y.tolist()
print(json.dumps(out))
"""


def _run(isa: str) -> dict:
    env = dict(os.environ, EMBER_CPU_ISA=isa)
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_every_isa_copy_gives_the_same_numbers():
    ref = _run("avx512")
    for isa in ("avx2", "baseline"):
        assert _run(isa) == ref, isa


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16])
def test_dropout_mask_scale_and_rate(dtype):
    ember.manual_seed(3)
    x = ember.rand(64, 1000, dtype=ember.float32).to(dtype) + 1.0  # no zeros in x
    p = 0.3
    y = ember.nn.functional.dropout(x, p, True)
    xn = x.float().numpy()
    yn = y.float().numpy()
    kept = yn != 0
    assert abs(kept.mean() - (1 - p)) < 0.01  # 64000 draws: 5 standard deviations
    tol = 1e-6 if dtype != ember.bfloat16 else 1e-2
    np.testing.assert_allclose(yn[kept], xn[kept] / (1 - p), rtol=tol)
    # the same seed gives the same mask; the next call a different one
    ember.manual_seed(3)
    x2 = ember.rand(64, 1000, dtype=ember.float32).to(dtype) + 1.0
    y2 = ember.nn.functional.dropout(x2, p, True).float().numpy()
    np.testing.assert_array_equal(y2 != 0, kept)
    y3 = ember.nn.functional.dropout(x2, p, True).float().numpy()
    assert not np.array_equal(y3 != 0, kept)


def test_dropout_gradient_uses_the_same_mask():
    ember.manual_seed(5)
    x = ember.randn(300, 70, requires_grad=True)
    y = ember.nn.functional.dropout(x, 0.5, True)
    y.sum().backward()
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 2.0, 0.0), rtol=0, atol=0)


def test_dropout_edges():
    x = ember.randn(1000)
    np.testing.assert_array_equal(ember.nn.functional.dropout(x, 0.0, True).numpy(), x.numpy())
    assert (ember.nn.functional.dropout(x, 1.0, True).numpy() == 0).all()
    np.testing.assert_array_equal(ember.nn.functional.dropout(x, 0.7, False).numpy(), x.numpy())
    y, mask = ember.native_dropout(x, 0.25, True)
    np.testing.assert_array_equal(y.numpy() != 0, mask.numpy() & (x.numpy() != 0))
