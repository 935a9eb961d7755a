"""Autograd: gradients of every op with a derivative formula checked numerically in float64 (and
against PyTorch when installed), the engine's guarantees, grad modes and error cases."""

import threading

import ember
import numpy as np
import pytest
from core_helpers import torch
from ember.autograd import gradcheck

D = ember.float64


def rnd(*shape, lo=-2.0, hi=2.0, seed=0):
    rng = np.random.default_rng(seed + sum(shape))
    return ember.tensor(rng.uniform(lo, hi, size=shape)).to(D).requires_grad_()


def pos(*shape, seed=0):
    return rnd(*shape, lo=0.5, hi=2.0, seed=seed)


# (name, function of the inputs, input factory): every op with a `derivatives:` entry.
CASES = [
    ("add", lambda a, b: a + b, lambda: (rnd(3, 4), rnd(4))),
    ("add_alpha", lambda a, b: ember.add(a, b, alpha=2.5), lambda: (rnd(2, 3), rnd(2, 3, seed=1))),
    ("add_scalar", lambda a: a + 3, lambda: (rnd(3),)),
    ("sub", lambda a, b: a - b, lambda: (rnd(3, 1), rnd(1, 4))),
    ("rsub", lambda a: 2 - a, lambda: (rnd(3),)),
    ("mul", lambda a, b: a * b, lambda: (rnd(2, 3), rnd(3))),
    ("div", lambda a, b: a / b, lambda: (rnd(2, 3), pos(2, 3))),
    ("rdiv", lambda a: 1 / a, lambda: (pos(4),)),
    ("neg", lambda a: -a, lambda: (rnd(3),)),
    ("exp", ember.exp, lambda: (rnd(3),)),
    ("exp2", ember.exp2, lambda: (rnd(3),)),
    ("expm1", ember.expm1, lambda: (rnd(3),)),
    ("log", ember.log, lambda: (pos(3),)),
    ("log2", ember.log2, lambda: (pos(3),)),
    ("log10", ember.log10, lambda: (pos(3),)),
    ("log1p", ember.log1p, lambda: (pos(3),)),
    ("sqrt", ember.sqrt, lambda: (pos(3),)),
    ("rsqrt", ember.rsqrt, lambda: (pos(3),)),
    ("sin", ember.sin, lambda: (rnd(3),)),
    ("cos", ember.cos, lambda: (rnd(3),)),
    ("tan", ember.tan, lambda: (rnd(3, lo=-1, hi=1),)),
    ("tanh", ember.tanh, lambda: (rnd(3),)),
    ("sigmoid", ember.sigmoid, lambda: (rnd(3),)),
    ("relu", ember.relu, lambda: (rnd(5),)),
    ("abs", ember.abs, lambda: (rnd(5),)),
    ("square", ember.square, lambda: (rnd(3),)),
    ("reciprocal", ember.reciprocal, lambda: (pos(3),)),
    ("pow_scalar", lambda a: a ** 3, lambda: (rnd(3),)),
    ("pow_tensor", lambda a, b: a ** b, lambda: (pos(3), rnd(3, seed=2))),
    ("rpow", lambda a: 2 ** a, lambda: (rnd(3),)),
    ("clamp", lambda a: ember.clamp(a, -0.5, 0.5), lambda: (rnd(6),)),
    ("where", lambda a, b: ember.where(a > 0, a, b), lambda: (rnd(4), rnd(4, seed=3))),
    ("addcmul", lambda a, b, c: ember.addcmul(a, b, c, value=0.5), lambda: (rnd(3), rnd(3, seed=1), rnd(3, seed=2))),
    ("addcdiv", lambda a, b, c: ember.addcdiv(a, b, c, value=0.5), lambda: (rnd(3), rnd(3, seed=1), pos(3, seed=2))),
    ("clone", lambda a: a.clone(), lambda: (rnd(3),)),
    ("contiguous", lambda a: a.t().contiguous(), lambda: (rnd(2, 3),)),
    ("to_dtype", lambda a: a.to(ember.float64, copy=True) * 1.0, lambda: (rnd(3),)),
    ("sum", lambda a: a.sum(), lambda: (rnd(2, 3),)),
    ("sum_dim", lambda a: a.sum(1), lambda: (rnd(2, 3),)),
    ("sum_dims_keepdim", lambda a: a.sum((0, 2), keepdim=True), lambda: (rnd(2, 3, 2),)),
    ("mean", lambda a: a.mean(), lambda: (rnd(2, 3),)),
    ("mean_dim", lambda a: a.mean(-1), lambda: (rnd(2, 3),)),
    ("matmul_2d", lambda a, b: a @ b, lambda: (rnd(2, 3), rnd(3, 4))),
    ("matmul_vec", lambda a, b: a @ b, lambda: (rnd(3), rnd(3, 2))),
    ("matmul_mat_vec", lambda a, b: a @ b, lambda: (rnd(2, 3), rnd(3))),
    ("matmul_dot", lambda a, b: a @ b, lambda: (rnd(3), rnd(3, seed=1))),
    ("matmul_batched_broadcast", lambda a, b: a @ b, lambda: (rnd(2, 2, 3), rnd(3, 2))),
    ("mm", ember.mm, lambda: (rnd(2, 3), rnd(3, 2))),
    ("bmm", ember.bmm, lambda: (rnd(2, 2, 3), rnd(2, 3, 2))),
    ("view", lambda a: a.view(6) * 1.0, lambda: (rnd(2, 3),)),
    ("reshape", lambda a: a.t().reshape(-1), lambda: (rnd(2, 3),)),
    ("flatten", lambda a: a.flatten(), lambda: (rnd(2, 3),)),
    ("transpose", lambda a: a.transpose(0, 1) * 2, lambda: (rnd(2, 3),)),
    ("t", lambda a: a.t() * 2, lambda: (rnd(2, 3),)),
    ("permute", lambda a: a.permute(2, 0, 1) * 2, lambda: (rnd(2, 3, 2),)),
    ("expand", lambda a: a.expand(3, 4) * 1.0, lambda: (rnd(1, 4),)),
    ("unsqueeze", lambda a: a.unsqueeze(1) * 2, lambda: (rnd(3),)),
    ("squeeze", lambda a: a.squeeze() * 2, lambda: (rnd(3, 1),)),
    ("getitem", lambda a: a[1:, ::2] * 2, lambda: (rnd(3, 4),)),
    ("getitem_int", lambda a: a[1] * 2, lambda: (rnd(3, 4),)),
    ("inplace_on_nonleaf", lambda a, b: (a * 1.0).add_(b).mul_(b), lambda: (rnd(3), rnd(3, seed=5))),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(name, fn, make):
    assert gradcheck(fn, make())


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_torch(name, fn, make):
    xs = make()
    out = fn(*xs)
    g = ember.ones(out.shape, dtype=D) * 0.5
    grads = ember.autograd.grad(out, xs, g)
    txs = [torch.tensor(x.detach().numpy(), requires_grad=True) for x in xs]
    tfn = {"to_dtype": lambda a: a.to(torch.float64, copy=True) * 1.0}.get(name)
    tout = (tfn or _torch_version(name, fn))(*txs)
    tgrads = torch.autograd.grad(tout, txs, torch.full(tuple(tout.shape), 0.5, dtype=torch.float64))
    for a, b in zip(grads, tgrads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-9)


def _torch_version(name, fn):
    # The same lambdas work on torch tensors except for module-level functions.
    special = {
        "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log,
        "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt,
        "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
        "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "abs": torch.abs,
        "square": torch.square, "reciprocal": torch.reciprocal, "mm": torch.mm, "bmm": torch.bmm,
        "add_alpha": lambda a, b: torch.add(a, b, alpha=2.5),
        "clamp": lambda a: torch.clamp(a, -0.5, 0.5),
        "where": lambda a, b: torch.where(a > 0, a, b),
        "addcmul": lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
        "addcdiv": lambda a, b, c: torch.addcdiv(a, b, c, value=0.5),
    }
    return special.get(name, fn)


def test_second_derivatives():
    x = rnd(3)
    (g,) = ember.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (g2,) = ember.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), 6 * x.detach().numpy())


def test_graph_structure_and_leaves():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    assert a.is_leaf and not b.is_leaf and b.requires_grad
    assert b.grad_fn.name() == "MulBackward0"
    (fn, nr), _ = b.grad_fn.next_functions
    assert fn.name() == "AccumulateGrad" and nr == 0
    assert (a > 0).grad_fn is None and not (a > 0).requires_grad  # bool outputs
    assert not a.detach().requires_grad and a.detach().data_ptr() == a.data_ptr()


def test_grad_accumulates_and_can_be_reset():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    (a * 3).sum().backward()
    (a * 3).sum().backward()
    assert a.grad.tolist() == [6.0, 6.0]
    a.grad = None
    (a * a).sum().backward()
    assert a.grad.tolist() == [2.0, 4.0]


def test_grad_modes():
    a = ember.ones(2, requires_grad=True)
    with ember.no_grad():
        assert not (a * 2).requires_grad
        with ember.enable_grad():
            assert (a * 2).requires_grad
    assert ember.is_grad_enabled()

    @ember.no_grad()
    def f(x):
        return x * 2

    assert not f(a).requires_grad
    with ember.set_grad_enabled(False):
        assert not (a * 2).requires_grad
    assert ember.is_grad_enabled()
    with ember.inference_mode():
        assert not (a * 2).requires_grad
    seen = []
    t = threading.Thread(target=lambda: seen.append(ember.is_grad_enabled()))
    with ember.no_grad():
        t.start()
        t.join()
    assert seen == [True]  # grad mode is per thread


def test_errors():
    a = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (a * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.ones(2).sum().backward()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a.add_(1)
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype"):
        ember.ones(2, dtype=ember.int64).requires_grad_()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (a * 2).backward(ember.ones(2))
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        ember.add(a, 1, out=ember.empty(3))
    s = (a * a).sum()
    s.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        s.backward()
    b = a.exp()
    c = b.sum() * 1.0
    loss = (b * b).sum()
    b.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*is at version 1; expected version 0"):
        loss.backward()
    del c
    x = rnd(3)
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        ember.autograd.grad((x * 2).sum(), [x, rnd(2)])
    # floor_divide has no derivative (as in PyTorch), so backward through it is refused.
    with pytest.raises(NotImplementedError, match="derivative for 'floor_divide' is not implemented"):
        x.floor_divide(2.0).sum().backward()
    # Indexed assignment into a tensor with history is differentiable (test_grad_inplace_views.py).
    y = x * 1.0
    y[0] = 1.0
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


def test_retain_graph_and_unused():
    x = rnd(3)
    s = (x * x).sum()
    s.backward(retain_graph=True)
    s.backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * x.detach().numpy())
    y = rnd(2)
    g = ember.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
    assert g[1] is None
    g = ember.autograd.grad((x * 2).sum(), [x, y], materialize_grads=True)
    assert g[1].tolist() == [0.0, 0.0]


def test_deep_chain_and_release():
    ember.empty_cache()
    before = ember.memory_allocated()
    x = ember.ones(1, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]
    del y
    x.grad = None
    assert ember.memory_allocated() == before + 8  # only x itself remains (4 bytes, a tiny block)


def test_two_threads_backward():
    errors, grads = [], {}

    def work(i):
        try:
            a = ember.randn(20, 20, dtype=D, requires_grad=True)
            for _ in range(50):
                (a @ a).tanh().sum().backward()
            grads[i] = a.grad.shape
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and len(grads) == 2


def test_factories_take_requires_grad():
    for t in [ember.zeros(2, requires_grad=True), ember.ones(2, 2, requires_grad=True),
              ember.randn(3, requires_grad=True), ember.tensor([1.0], requires_grad=True),
              ember.full((2,), 1.5, requires_grad=True), ember.arange(3.0, requires_grad=True)]:
        assert t.requires_grad and t.is_leaf


def test_grad_of_contiguous_leaf_is_contiguous():
    """PyTorch's layout contract: .grad of a contiguous leaf is contiguous even when the
    gradient arrives transposed (F.linear's weight.t(), a transposed use of the leaf)."""
    w = ember.randn(5, 7, requires_grad=True)
    x = ember.randn(3, 7)
    ember.addmm(ember.zeros(5), x, w.t()).sum().backward()  # mm_like: computed column-major
    assert w.grad.is_contiguous() and w.grad.stride() == (7, 1)
    g1 = w.grad.clone()
    w.grad = None
    (w.t() * ember.ones(7, 5)).sum().backward()  # arrives as a transposed view: copied
    assert w.grad.is_contiguous()
    np.testing.assert_allclose(g1.numpy(), np.tile(x.numpy().sum(0), (5, 1)), rtol=1e-5)
    w.grad = None
    ember.mm(x, w.t()).sum().backward()
    assert w.grad.stride() == (7, 1)
    np.testing.assert_allclose(w.grad.numpy(), g1.numpy(), rtol=1e-6)
