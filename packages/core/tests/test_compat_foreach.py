"""ember._foreach_* (issue 15: custom optimizers and EMA code call torch._foreach_lerp_,
_foreach_mul_, _foreach_add_ ...), against torch with every kind of second operand."""

from __future__ import annotations

import ember
import numpy as np
import pytest

SHAPES = [(3,), (2, 4), ()]


def _arrays(seed=0, positive=False):
    rng = np.random.default_rng(seed)
    out = [np.asarray(rng.standard_normal(s)) for s in SHAPES]
    return [np.asarray(np.abs(a) + 0.5) if positive else a for a in out]


def _lib_lists(torch, arrays):
    return [ember.from_numpy(a.copy()) for a in arrays], [torch.from_numpy(a.copy()) for a in arrays]


def _close(es, ts):
    assert len(es) == len(ts)
    for e, t in zip(es, ts):
        np.testing.assert_allclose(np.asarray(e.numpy()), t.numpy(), rtol=1e-12, atol=1e-12)


def _operands(torch, kind):
    b = _arrays(1, positive=True)
    if kind == "scalar":
        return 1.5, 1.5
    if kind == "scalars":
        return [0.5, 2.0, -1.0], [0.5, 2.0, -1.0]
    if kind == "tensor":
        return ember.tensor(2.5, dtype=ember.float64), torch.tensor(2.5, dtype=torch.float64)
    return _lib_lists(torch, b)


@pytest.mark.parametrize("kind", ["scalar", "scalars", "tensor", "list"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "clamp_min", "clamp_max", "maximum",
                                "minimum", "pow"])
def test_binary_matches_torch(op, kind):
    torch = pytest.importorskip("torch")
    if kind == "tensor" and op in ("pow", "sub"):
        pytest.skip(f"torch's _foreach_{op} takes no single tensor")
    positive = op == "pow"
    e_other, t_other = _operands(torch, kind)
    es, ts = _lib_lists(torch, _arrays(positive=positive))
    _close(getattr(ember, f"_foreach_{op}")(es, e_other), getattr(torch, f"_foreach_{op}")(ts, t_other))
    assert getattr(ember, f"_foreach_{op}_")(es, e_other) is None
    getattr(torch, f"_foreach_{op}_")(ts, t_other)
    _close(es, ts)
    if op == "add" and kind in ("list", "tensor") or op == "sub" and kind == "list":
        _close(getattr(ember, f"_foreach_{op}")(es, e_other, alpha=-0.25),
               getattr(torch, f"_foreach_{op}")(ts, t_other, alpha=-0.25))


@pytest.mark.parametrize("op", ["sqrt", "exp", "log", "abs", "neg", "reciprocal", "sign",
                                "sigmoid", "tanh", "log1p", "expm1", "erf", "floor", "frac"])
def test_unary_matches_torch(op):
    torch = pytest.importorskip("torch")
    es, ts = _lib_lists(torch, _arrays(positive=op in ("sqrt", "log")))
    _close(getattr(ember, f"_foreach_{op}")(es), getattr(torch, f"_foreach_{op}")(ts))
    getattr(ember, f"_foreach_{op}_")(es)
    getattr(torch, f"_foreach_{op}_")(ts)
    _close(es, ts)


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("value", [1, -0.5, [0.5, 1.0, 2.0]])
def test_pointwise_matches_torch(op, value):
    torch = pytest.importorskip("torch")
    es, ts = _lib_lists(torch, _arrays())
    e1, t1 = _lib_lists(torch, _arrays(1))
    e2, t2 = _lib_lists(torch, _arrays(2, positive=True))
    _close(getattr(ember, f"_foreach_{op}")(es, e1, e2, value),
           getattr(torch, f"_foreach_{op}")(ts, t1, t2, value))
    getattr(ember, f"_foreach_{op}_")(es, e1, e2, value)
    getattr(torch, f"_foreach_{op}_")(ts, t1, t2, value)
    _close(es, ts)


def test_lerp_norm_zero_copy_match_torch():
    torch = pytest.importorskip("torch")
    es, ts = _lib_lists(torch, _arrays())
    e1, t1 = _lib_lists(torch, _arrays(1))
    _close(ember._foreach_lerp(es, e1, 0.1), torch._foreach_lerp(ts, t1, 0.1))
    ember._foreach_lerp_(es, e1, 0.3)
    torch._foreach_lerp_(ts, t1, 0.3)
    _close(es, ts)
    _close(ember._foreach_norm(es), torch._foreach_norm(ts))
    _close(ember._foreach_norm(es, 1), torch._foreach_norm(ts, 1))
    _close(ember._foreach_norm(es, float("inf")), torch._foreach_norm(ts, float("inf")))
    ember._foreach_copy_(es, e1)
    torch._foreach_copy_(ts, t1)
    _close(es, ts)
    ember._foreach_zero_(es)
    assert all(float(e.abs().sum()) == 0 for e in es)


def test_ema_update_as_custom_code_writes_it():
    # decay * ema + (1 - decay) * param, the two ways EMA helpers write it
    ema = [ember.zeros(2), ember.ones(3)]
    params = [ember.ones(2), ember.zeros(3)]
    other = [t.clone() for t in ema]
    ember._foreach_lerp_(ema, params, 1 - 0.9)
    ember._foreach_mul_(other, 0.9)
    ember._foreach_add_(other, params, alpha=1 - 0.9)
    for a, b in zip(ema, other):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_autograd_flows_through_out_of_place():
    x = [ember.ones(2, requires_grad=True), ember.full((3,), 2.0, requires_grad=True)]
    out = ember._foreach_mul(x, [3.0, 4.0])
    (out[0].sum() + out[1].sum()).backward()
    assert x[0].grad.tolist() == [3.0, 3.0] and x[1].grad.tolist() == [4.0] * 3


def test_errors():
    xs = [ember.ones(2), ember.ones(3)]
    with pytest.raises(RuntimeError, match="same number of tensors, got 2 and 1"):
        ember._foreach_add(xs, [ember.ones(2)])
    with pytest.raises(RuntimeError, match="same number of tensors, got 2 and 3"):
        ember._foreach_lerp_(xs, xs + xs[:1], 0.5)
    with pytest.raises(TypeError, match=r"self must be a list or tuple of Tensors, got Tensor"):
        ember._foreach_sqrt(ember.ones(2))
    with pytest.raises(TypeError, match=r"self\[1\] must be a Tensor, got float"):
        ember._foreach_neg([ember.ones(1), 1.0])
    with pytest.raises(TypeError, match="other must be a number, a Tensor, or a list"):
        ember._foreach_mul_(xs, "2")
