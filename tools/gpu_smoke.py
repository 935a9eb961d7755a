"""A quick smoke test of ember's CUDA backend outside pytest (run by tools/gpu_check.sh):
tensors to and from the GPU, a few ops, then many engine errors raised after GPU work (a crash
while raising one would point at host memory written by the device). `--torch` imports torch
first, as the tests' comparisons do.

    python3 tools/gpu_smoke.py [--torch]
"""

from __future__ import annotations

import sys

if "--torch" in sys.argv:
    import torch  # noqa: F401

import ember
import numpy as np


def main() -> None:
    x = ember.randn(1000, 1000).cuda()
    y = (x * 2 + 1).sum(1)
    assert np.allclose(y.cpu().numpy(), (x.cpu().numpy() * 2 + 1).sum(1), rtol=1e-4, atol=1e-3)
    z = x @ x.t()
    assert z.shape == (1000, 1000)
    idx = ember.tensor([3, 1, 2]).cuda()
    assert x[idx].shape == (3, 1000)
    a = ember.ones(3, dtype=ember.int8)
    errors = 0
    for _ in range(500):
        for fn in (lambda: ember.add(a, a, alpha=1.5),
                   lambda: ember.ones(2, 3).cuda() + ember.ones(4).cuda(),
                   lambda: x[ember.tensor([5000]).cuda()]):
            try:
                fn()
            except Exception:  # noqa: BLE001 - each is expected to raise
                errors += 1
    ember.cuda.synchronize()
    print(f"smoke ok: {errors} errors raised and caught, torch imported: {'--torch' in sys.argv}")


if __name__ == "__main__":
    main()
