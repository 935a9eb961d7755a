"""Regression tests for what the seventh round of compat programs found: complex parameters
(nn.Parameter of a complex tensor, and the optimizers updating one as the pair of reals it
holds, as PyTorch does), each compared with torch."""

from __future__ import annotations

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_parameter_accepts_complex_tensors():
    p = ember.nn.Parameter(ember.zeros(3, dtype=ember.complex64))
    assert p.requires_grad and p.dtype == ember.complex64
    with pytest.raises(RuntimeError, match="floating point and complex"):
        ember.nn.Parameter(ember.zeros(3, dtype=ember.int64))
    assert not ember.nn.Parameter(ember.zeros(3, dtype=ember.int64), requires_grad=False).requires_grad


_OPTIMIZERS = [
    ("Adam", {}), ("AdamW", {"weight_decay": 0.1}), ("Adam", {"amsgrad": True}),
    ("RMSprop", {"centered": True, "momentum": 0.5}), ("Adagrad", {"initial_accumulator_value": 0.3}),
    ("Adadelta", {}), ("Adamax", {}), ("NAdam", {}), ("RAdam", {}), ("Rprop", {}), ("ASGD", {}),
    ("SGD", {"momentum": 0.9, "nesterov": True}),
]


def _run_complex(lib, name: str, kw: dict) -> tuple[np.ndarray, dict]:
    r = np.random.default_rng(0)
    start = (r.normal(size=4) + 1j * r.normal(size=4)).astype(np.complex64)
    p = lib.nn.Parameter(lib.tensor(start))
    opt = getattr(lib.optim, name)([p], lr=0.1, **kw)
    for _ in range(5):
        t = lib.tensor((r.normal(size=4) + 1j * r.normal(size=4)).astype(np.complex64))
        opt.zero_grad()
        ((p - t).abs() ** 2).sum().backward()
        opt.step()
    state = {k: v for k, v in opt.state[p].items() if isinstance(v, lib.Tensor) and v.dim() > 0}
    return p.detach().numpy(), {k: v.numpy() for k, v in state.items()}


@pytest.mark.parametrize("name,kw", _OPTIMIZERS, ids=[f"{n}{i}" for i, (n, _) in enumerate(_OPTIMIZERS)])
def test_optimizers_update_complex_parameters_as_torch(name, kw):
    # before: Adam & co. squared the complex gradient (g * g, not |g|^2 per part) and took
    # complex square roots, silently off; Adagrad / Rprop started the imaginary parts at 0
    got, got_state = _run_complex(ember, name, kw)
    ref, ref_state = _run_complex(torch, name, kw)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    assert sorted(got_state) == sorted(ref_state)
    for k in ref_state:  # the state stays complex, shaped like the parameter
        assert got_state[k].dtype == ref_state[k].dtype, k
        np.testing.assert_allclose(got_state[k], ref_state[k], rtol=1e-5, atol=1e-6, err_msg=k)
