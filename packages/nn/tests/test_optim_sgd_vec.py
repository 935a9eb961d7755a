"""The vectorized fused SGD kernel (_fused_sgd_) gives the same bits as the per-parameter
tensor-op path for every option, on one and two threads, and ember.optim.SGD uses it by
default."""

import ember
import ember.nn
import ember.optim
import numpy as np
import pytest
from ember.optim import _functional as OF


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old = ember.get_num_threads()
    ember.set_num_threads(request.param)
    yield request.param
    ember.set_num_threads(old)


# ---- fused SGD ------------------------------------------------------------------------------

SGD_OPTIONS = [
    dict(momentum=0.0, weight_decay=0.0),
    dict(momentum=0.0, weight_decay=0.1, maximize=True),
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(momentum=0.8, nesterov=True, weight_decay=0.05, maximize=True),
    dict(momentum=0.5, nesterov=True),
]


@pytest.mark.parametrize("kw", SGD_OPTIONS, ids=str)
def test_fused_sgd_bit_equal_to_per_parameter_ops(kw, threads):
    sizes = [1, 7, 33, 70_001, 5, 130_000]  # odd sizes: vector tails; large: split in chunks
    rng = np.random.default_rng(0)
    data = [rng.standard_normal(n).astype("float32") for n in sizes]
    grads = [[rng.standard_normal(n).astype("float32") for n in sizes] for _ in range(3)]
    opts = dict(lr=0.05, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                maximize=False)
    opts.update(kw)

    def run(update):
        ps = [ember.tensor(d) for d in data]
        bufs = [None] * len(ps)
        for step in range(3):  # the first step seeds the momentum buffers
            update(ps, [ember.tensor(g) for g in grads[step]], bufs, **opts)
        return ps, bufs

    fused, fbufs = run(OF.fused_sgd)
    ref, rbufs = run(OF.sgd)
    for a, b in zip(fused, ref):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(fbufs, rbufs):
        if b is not None:
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_sgd_uses_the_fused_kernel_by_default(monkeypatch):
    calls = []
    real = ember._C._fused_sgd_
    monkeypatch.setattr(ember._C, "_fused_sgd_", lambda *a, **k: (calls.append(1), real(*a, **k)))
    w = ember.nn.Parameter(ember.ones(10))
    opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = ember.ones(10)
    opt.step()
    assert calls and np.allclose(w.detach().numpy(), 0.9)
    calls.clear()
    opt = ember.optim.SGD([w], lr=0.1, foreach=False)  # the per-parameter reference loop
    opt.step()
    assert not calls
