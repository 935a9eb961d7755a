"""Fixes from the twelfth drop-in compatibility round: third and higher derivatives of the
smooth activations (sliced score matching and PINNs differentiate f'' once more, for the
parameters), and Tensor.index_reduce_ under autograd. Each is pinned with explicit values and,
where torch is installed, against it."""

from __future__ import annotations

import math

import ember
import ember.nn.functional as F
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

XS = [0.3, -0.7, 1.2, -2.5, 0.9]


def _sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _silu3(x: float) -> float:
    s = _sig(x)
    q, r = s * (1 - s), 1 - 2 * s
    return q * (r * (3 + x * r) - 2 * x * q)


def _gelu3(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) * x * (x * x - 4)


def _softplus3(x: float, beta: float = 1.0, threshold: float = 20.0) -> float:
    if beta * x > threshold:
        return 0.0
    s = _sig(beta * x)
    return beta * beta * s * (1 - s) * (1 - 2 * s)


def _elu3(x: float, alpha: float = 1.0) -> float:
    return 0.0 if x > 0 else alpha * math.exp(x)


# (name, the activation on a module, the closed-form third derivative or None)
ACTIVATIONS = [
    ("silu", lambda m, x: m.nn.functional.silu(x), _silu3),
    ("gelu", lambda m, x: m.nn.functional.gelu(x), _gelu3),
    ("gelu_tanh", lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), None),
    ("softplus", lambda m, x: m.nn.functional.softplus(x), _softplus3),
    ("softplus_b2_t1", lambda m, x: m.nn.functional.softplus(x, beta=2.0, threshold=1.0),
     lambda x: _softplus3(x, 2.0, 1.0)),
    ("elu", lambda m, x: m.nn.functional.elu(x, alpha=0.5), lambda x: _elu3(x, 0.5)),
    ("selu", lambda m, x: m.nn.functional.selu(x), None),
    ("celu", lambda m, x: m.nn.functional.celu(x), None),
    ("mish", lambda m, x: m.nn.functional.mish(x), None),
    ("softsign", lambda m, x: m.nn.functional.softsign(x), lambda x: 6 / (1 + abs(x)) ** 4),
    ("logsigmoid", lambda m, x: m.nn.functional.logsigmoid(x),
     lambda x: -_sig(x) * (1 - _sig(x)) * (1 - 2 * _sig(x))),
]


def _third_and_fourth(m, f):
    x = m.tensor(XS, dtype=m.float64, requires_grad=True)
    g1, = m.autograd.grad(f(m, x).sum(), x, create_graph=True)
    g2, = m.autograd.grad(g1.sum(), x, create_graph=True)
    g3, = m.autograd.grad(g2.sum(), x, create_graph=True)
    g4, = m.autograd.grad(g3.sum(), x)
    return g3.tolist(), g4.tolist()


def _finite_difference(f, xs, h=1e-3):
    """The derivative of f by a central difference (f is a list -> list function)."""
    up, down = f([x + h for x in xs]), f([x - h for x in xs])
    return [(u - d) / (2 * h) for u, d in zip(up, down)]


@pytest.mark.parametrize("name,act,closed", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_third_and_fourth_derivatives(name, act, closed):
    g3, g4 = _third_and_fourth(ember, act)
    if closed is not None:
        assert g3 == pytest.approx([closed(x) for x in XS], rel=1e-9, abs=1e-12)
    # the fourth derivative is the third's slope
    fd = _finite_difference(lambda xs: _third_at(act, xs), XS)
    assert g4 == pytest.approx(fd, rel=1e-5, abs=1e-6)


def _third_at(act, xs):
    x = ember.tensor(xs, dtype=ember.float64, requires_grad=True)
    g1, = ember.autograd.grad(act(ember, x).sum(), x, create_graph=True)
    g2, = ember.autograd.grad(g1.sum(), x, create_graph=True)
    return ember.autograd.grad(g2.sum(), x)[0].tolist()


@needs_torch
@pytest.mark.parametrize("name,act,closed", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_higher_derivatives_match_torch(name, act, closed):
    got, want = _third_and_fourth(ember, act), _third_and_fourth(torch, act)
    assert got[0] == pytest.approx(want[0], rel=1e-9, abs=1e-12)
    assert got[1] == pytest.approx(want[1], rel=1e-9, abs=1e-12)


def test_sliced_score_matching_reaches_the_parameters():
    # the loss holds d2E/dx2 (SiLU'' and Softplus''); its parameter gradient needs f'''
    lin1, lin2 = ember.nn.Linear(2, 8), ember.nn.Linear(8, 1)
    with ember.no_grad():
        lin1.weight.copy_(ember.linspace(-1, 1, 16).view(8, 2))
        lin1.bias.fill_(0.1)
        lin2.weight.copy_(ember.linspace(-0.5, 0.5, 8).view(1, 8))
    x = ember.tensor([[0.2, -0.4], [1.0, 0.5]], requires_grad=True)
    e = lin2(F.softplus(F.silu(lin1(x)), beta=2.0)).sum()
    s, = ember.autograd.grad(e, x, create_graph=True)
    v = ember.tensor([[1.0, -1.0], [-1.0, 1.0]])
    vjv, = ember.autograd.grad((s * v).sum(), x, create_graph=True)
    ((vjv * v).sum() + 0.5 * (s ** 2).sum()).backward()
    assert lin1.weight.grad is not None and bool(ember.isfinite(lin1.weight.grad).all())
    assert float(lin1.weight.grad.abs().sum()) > 0
    if torch is not None:
        t1, t2 = torch.nn.Linear(2, 8), torch.nn.Linear(8, 1)
        with torch.no_grad():
            t1.weight.copy_(torch.linspace(-1, 1, 16).view(8, 2))
            t1.bias.fill_(0.1)
            t2.weight.copy_(torch.linspace(-0.5, 0.5, 8).view(1, 8))
            t2.bias.copy_(torch.tensor(lin2.bias.tolist()))
        tx = torch.tensor(x.tolist(), requires_grad=True)
        te = t2(torch.nn.functional.softplus(torch.nn.functional.silu(t1(tx)), beta=2.0)).sum()
        ts, = torch.autograd.grad(te, tx, create_graph=True)
        tv = torch.tensor(v.tolist())
        tvjv, = torch.autograd.grad((ts * tv).sum(), tx, create_graph=True)
        ((tvjv * tv).sum() + 0.5 * (ts ** 2).sum()).backward()
        assert sum(lin1.weight.grad.tolist(), []) == pytest.approx(
            sum(t1.weight.grad.tolist(), []), rel=1e-4, abs=1e-6)


def test_forward_over_reverse_third_derivative():
    # jacfwd of a Hessian runs the third derivative in forward mode
    f = lambda x: F.silu(x).pow(2).sum()  # noqa: E731
    got = ember.func.jacfwd(ember.func.hessian(f))(ember.tensor([0.3, -0.7], dtype=ember.float64))
    assert got.flatten().tolist()[0] == pytest.approx(1.8083928754135328, rel=1e-12)
    assert got.flatten().tolist()[7] == pytest.approx(0.28682294971586675, rel=1e-12)


# ---- Tensor.index_reduce_ under autograd -------------------------------------------------------
def _index_reduce_grads(m, reduce, include_self):
    src = m.tensor([[1.0, 2.0], [1.0, 0.5], [5.0, 6.0]], requires_grad=True)
    base = m.tensor([[0.0, 3.0], [1.0, 1.0], [2.0, 2.0]], requires_grad=True)
    out = base * 1  # not a leaf: in-place ops on it are recorded
    out.index_reduce_(0, m.tensor([0, 0, 1]), src, reduce, include_self=include_self)
    (out * m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    return out.tolist(), src.grad.tolist(), base.grad.tolist()


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce_inplace_backward(reduce, include_self):
    out, g_src, g_base = _index_reduce_grads(ember, reduce, include_self)
    assert g_base[2] == [5.0, 6.0]  # rows no index names pass the gradient through
    if torch is not None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch: "index_reduce() is in beta"
            want = _index_reduce_grads(torch, reduce, include_self)
        for got_rows, want_rows in zip((out, g_src, g_base), want):
            assert sum(got_rows, []) == pytest.approx(sum(want_rows, []))


def test_index_reduce_inplace_amax_ties_share_the_gradient():
    out, g_src, g_base = _index_reduce_grads(ember, "amax", True)
    assert out[0] == [1.0, 3.0]
    assert g_src == [[0.5, 0.0], [0.5, 0.0], [3.0, 4.0]]  # the tie at 1.0 is split
    assert g_base == [[0.0, 2.0], [0.0, 0.0], [5.0, 6.0]]


def test_index_reduce_inplace_without_grad_writes_in_place():
    x = ember.ones(3, 2)
    ptr = x.data_ptr()
    r = x.index_reduce_(0, ember.tensor([0, 2]), ember.tensor([[2.0, 3.0], [4.0, 5.0]]), "prod")
    assert r is x and x.data_ptr() == ptr
    assert x.tolist() == [[2.0, 3.0], [1.0, 1.0], [4.0, 5.0]]


# ---- nn.CrossMapLRN2d -------------------------------------------------------------------------
def test_cross_map_lrn2d_windows_keep_channel_zero():
    # all-ones input: channel c is scaled by the number of channels in its window
    layer = ember.nn.CrossMapLRN2d(3, alpha=0.3, beta=0.5, k=2.0)
    out = layer(ember.ones(1, 5, 1, 1, dtype=ember.float64)).flatten().tolist()
    counts = [2, 3, 4, 4, 3]  # windows {0,1} {0,1,2} {0,1,2,3} {0,2,3,4} {0,3,4}
    assert out == pytest.approx([(2.0 + 0.3 / 3 * n) ** -0.5 for n in counts], rel=1e-12)
    assert repr(layer) == "CrossMapLRN2d(3, alpha=0.3, beta=0.5, k=2.0)"
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D instead"):
        layer(ember.ones(5, 1, 1))


def test_cross_map_lrn2d_gradient_is_exact():
    x = ember.tensor([[[[0.3, -1.2]], [[0.8, 0.1]], [[-0.5, 2.0]], [[1.1, -0.7]]]],
                     dtype=ember.float64, requires_grad=True)
    layer = ember.nn.CrossMapLRN2d(2, alpha=0.4, beta=0.6, k=1.2)
    assert ember.autograd.gradcheck(layer, (x,))


@needs_torch
@pytest.mark.parametrize("channels", [1, 2, 7])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 9])
def test_cross_map_lrn2d_matches_torch(channels, size):
    data = [[[[0.1 * (c + 1) * (h - w) + 0.05 * c for w in range(2)] for h in range(3)]
             for c in range(channels)] for _ in range(2)]
    want = torch.nn.CrossMapLRN2d(size, 0.3, 0.7, 1.5)(torch.tensor(data, dtype=torch.float64))
    got = ember.nn.CrossMapLRN2d(size, 0.3, 0.7, 1.5)(ember.tensor(data, dtype=ember.float64))
    assert got.flatten().tolist() == pytest.approx(want.flatten().tolist(), rel=1e-12)


# ---- F.normalize over several dims ----------------------------------------------------------
@pytest.mark.parametrize("dim", [(1, 2), [2], (-1, 0), (), None])
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_normalize_takes_a_tuple_of_dims(dim, p):
    data = [[[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], [[3.0, 1.0, -2.0], [0.25, 0.5, 4.0]]]
    got = F.normalize(ember.tensor(data, dtype=ember.float64), p=p, dim=dim)
    x = ember.tensor(data, dtype=ember.float64)
    norm_dims = list(range(3)) if dim is None else list(dim)
    want = x / x.norm(p, norm_dims, True).clamp(min=1e-12)
    assert got.tolist() == want.tolist()
    if torch is not None:
        ref = torch.nn.functional.normalize(torch.tensor(data, dtype=torch.float64), p=p, dim=dim)
        assert got.flatten().tolist() == pytest.approx(ref.flatten().tolist(), rel=1e-12)


def test_normalize_over_two_dims_gives_unit_norm():
    x = ember.tensor([[3.0], [4.0]], dtype=ember.float64)
    assert F.normalize(x, dim=(0, 1)).tolist() == [[0.6], [0.8]]


@pytest.mark.parametrize("dim", ["a", 1.5, (1, "x")])
def test_normalize_rejects_non_int_dims_clearly(dim):
    with pytest.raises(TypeError, match="argument 'dim' must be an int or a tuple of ints, not"):
        F.normalize(ember.ones(2, 3), dim=dim)


# ---- copy.deepcopy of plain tensors: grad copied, graph leaves only --------------------------
def test_deepcopy_copies_a_plain_tensors_grad():
    import copy

    t = ember.ones(3, requires_grad=True)
    (t * 2).sum().backward()
    c = copy.deepcopy(t)
    assert c.requires_grad and c.grad is not t.grad and c.grad.tolist() == [2.0, 2.0, 2.0]
    a, b = copy.deepcopy([t, t.grad])  # one memo: the copy's grad is the copied grad
    assert a.grad is b
    u = ember.ones(2)
    u.grad = ember.full((2,), 5.0)
    assert copy.deepcopy(u).grad.tolist() == [5.0, 5.0]
    if torch is not None:
        tt = torch.ones(3, requires_grad=True)
        (tt * 2).sum().backward()
        assert copy.deepcopy(tt).grad.tolist() == c.grad.tolist()


def test_deepcopy_of_a_non_leaf_raises_as_in_pytorch():
    import copy

    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^Only Tensors created explicitly by the user "
                                           r"\(graph leaves\) support the deepcopy protocol"):
        copy.deepcopy(x * 2)
    with ember.no_grad():
        assert copy.deepcopy(x * 2).tolist() == [2.0, 2.0]  # made without a graph: a leaf


# ---- nn.MultiheadAttention.merge_masks ------------------------------------------------------
def _merge_cases(m):
    attn = m.tensor([[False, True, False]] * 3)
    pad = m.tensor([[False, False, True], [True, False, False]])
    fattn = m.zeros(3, 3)
    fattn[0, 1] = float("-inf")
    return [(None, None), (attn, None), (None, pad), (attn, pad), (fattn, pad),
            (m.zeros(4, 3, 3, dtype=m.bool), None)]


def test_mha_merge_masks():
    mha = ember.nn.MultiheadAttention(4, 2, batch_first=True)
    q = ember.ones(2, 3, 4)
    results = [mha.merge_masks(a, k, q) for a, k in _merge_cases(ember)]
    assert results[0] == (None, None)
    assert [r[1] for r in results[1:]] == [2, 1, 2, 2, 2]
    both, kind = results[3]
    assert kind == 2 and tuple(both.shape) == (2, 2, 3, 3) and both.dtype == ember.bool
    assert both[1, 0].tolist() == [[True, True, False]] * 3  # attn or padding of sample 1
    assert results[4][0][1, 0].tolist() == [[1.0, float("-inf"), 0.0], [1.0, 0.0, 0.0],
                                            [1.0, 0.0, 0.0]]  # PyTorch adds True as 1.0
    if torch is not None:
        tm = torch.nn.MultiheadAttention(4, 2, batch_first=True)
        for (got, got_kind), (a, k) in zip(results, _merge_cases(torch)):
            want, want_kind = tm.merge_masks(a, k, torch.ones(2, 3, 4))
            assert got_kind == want_kind
            assert (got is None) == (want is None)
            if got is not None:
                assert got.tolist() == want.tolist()
