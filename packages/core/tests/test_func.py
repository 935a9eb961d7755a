"""ember.func (torch.func-style transforms) and ember.autograd.functional: values checked against
torch.func / torch.autograd.functional when PyTorch is installed, and for self-consistency
(jvp vs vjp, jacrev vs jacfwd, closed forms) always."""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, to_np, torch
from ember import func as EF
from ember.autograd import functional as AF

D = ember.float64


def arr(*shape, lo=-1.5, hi=1.5, seed=0):
    return np.random.default_rng(seed + 7 * len(shape)).uniform(lo, hi, size=shape)


def E(a):
    return ember.tensor(a).to(D)


def T(a):
    return torch.tensor(a, dtype=torch.float64)


def close(a, b, tol=1e-9):
    """Compares (nested tuples / dicts of) ember and torch tensors."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            close(a[k], b[k], tol)
    elif isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, tol)
    elif a is None or b is None:
        assert a is None and b is None
    else:
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(to_np(a), to_np(b), rtol=tol, atol=tol)


# Scalar functions of one tensor, written once for both libraries (m is ember or torch).
SCALAR = {
    "poly": lambda m, x: (x * x * x + 2 * x - x / 3).sum(),
    "transcendental": lambda m, x: (m.exp(x) * m.sin(x) + m.cos(x) * m.tanh(x)).sum(),
    "sigmoid_log": lambda m, x: m.log(m.sigmoid(x) + 1).mean(),
    "pow_div": lambda m, x: ((x ** 2 + 1) / (x.pow(2) + 3) + 2 ** x).sum(),
    "matmul": lambda m, x: m.tanh(x.reshape(2, 3) @ x.reshape(3, 2)).sum(),
    "views": lambda m, x: (x.reshape(2, 3).t().unsqueeze(0).expand(2, 3, 2)
                           * x.view(3, 2).permute(1, 0).flatten().sum()).mean(),
}
# Vector-valued functions of two tensors (shapes (3,) and (2, 3)).
VECTOR = {
    "mul_exp": lambda m, x, y: m.exp(x * y) + x / (y * y + 1),
    "matmul_sin": lambda m, x, y: m.sin(y @ x) * x.sum(),
    "sum_dim": lambda m, x, y: (y * x).sum(1) + (y ** 3).mean(0).sum(),
}


def out_like(fe, x, y):
    """A random cotangent shaped like fe's output."""
    return arr(*tuple(fe(E(x), E(y)).shape), seed=2)


def mods(fn):
    return (lambda *a: fn(ember, *a)), (lambda *a: fn(torch, *a))


# ---- ember.func vs torch.func --------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("name", SCALAR)
def test_grad_and_hessian_match_torch(name):
    fe, ft = mods(SCALAR[name])
    a = arr(6)
    close(EF.grad(fe)(E(a)), torch.func.grad(ft)(T(a)))
    g, v = EF.grad_and_value(fe)(E(a))
    tg, tv = torch.func.grad_and_value(ft)(T(a))
    close((g, v), (tg, tv))
    close(EF.hessian(fe)(E(a)), torch.func.hessian(ft)(T(a)), tol=1e-8)


@needs_torch
@pytest.mark.parametrize("name", VECTOR)
def test_jacobians_vjp_jvp_match_torch(name):
    fe, ft = mods(VECTOR[name])
    x, y, t1, t2 = arr(3), arr(2, 3, seed=1), arr(3, seed=3), arr(2, 3, seed=4)
    u = out_like(fe, x, y)
    for argnums in (0, 1, (0, 1)):
        close(EF.jacrev(fe, argnums)(E(x), E(y)), torch.func.jacrev(ft, argnums)(T(x), T(y)))
        close(EF.jacfwd(fe, argnums)(E(x), E(y)), torch.func.jacfwd(ft, argnums)(T(x), T(y)))
    out, fn = EF.vjp(fe, E(x), E(y))
    tout, tfn = torch.func.vjp(ft, T(x), T(y))
    close(out, tout)
    close(fn(E(u)), tfn(T(u)))
    close(fn(E(u * 2)), tfn(T(u * 2)))  # vjp_fn can be called again
    close(EF.jvp(fe, (E(x), E(y)), (E(t1), E(t2))), torch.func.jvp(ft, (T(x), T(y)), (T(t1), T(t2))))


@needs_torch
def test_argnums_has_aux_and_pytrees_match_torch():
    def f(m, d, s):
        out = (d["a"] * m.sin(d["b"][0]) * s).sum() + (d["b"][1] ** 2).sum()
        return out, {"aux": out * 2}

    a, b0, b1, s = arr(3), arr(3, seed=1), arr(2, seed=2), arr(3, seed=3)
    de = {"a": E(a), "b": (E(b0), E(b1))}
    dt = {"a": T(a), "b": (T(b0), T(b1))}
    g, aux = EF.grad(lambda d, s: f(ember, d, s), argnums=(0, 1), has_aux=True)(de, E(s))
    tg, taux = torch.func.grad(lambda d, s: f(torch, d, s), argnums=(0, 1), has_aux=True)(dt, T(s))
    close(g, tg)
    close(aux["aux"], taux["aux"])
    assert not aux["aux"].requires_grad
    out = EF.vjp(lambda x: (x.exp(), x * 2), E(a))
    tout = torch.func.vjp(lambda x: (x.exp(), x * 2), T(a))
    close(out[0], tout[0])
    close(out[1]((E(s), E(b0))), tout[1]((T(s), T(b0))))
    jo, jt, jaux = EF.jvp(lambda x: (x.sin(), x.sum()), (E(a),), (E(s),), has_aux=True)
    tjo, tjt, tjaux = torch.func.jvp(lambda x: (x.sin(), x.sum()), (T(a),), (T(s),), has_aux=True)
    close((jo, jt, jaux), (tjo, tjt, tjaux))


@needs_torch
def test_nested_transforms_match_torch():
    fe, ft = mods(SCALAR["transcendental"])
    a, v = arr(4), arr(4, seed=9)
    # Hessian-vector product as jvp of grad (forward over reverse).
    he = EF.jvp(EF.grad(fe), (E(a),), (E(v),))[1]
    ht = torch.func.jvp(torch.func.grad(ft), (T(a),), (T(v),))[1]
    close(he, ht)
    close(EF.jacfwd(EF.jacrev(fe))(E(a)), torch.func.jacfwd(torch.func.jacrev(ft))(T(a)))
    g1 = EF.grad(lambda y: (y ** 4).sum())
    g2 = EF.grad(lambda y: g1(y).sum())
    g3 = EF.grad(lambda y: g2(y).sum())
    np.testing.assert_allclose(to_np(g3(E(a))), 24 * a, rtol=1e-12)


# ---- ember.autograd.functional vs torch.autograd.functional -------------------------------------


@needs_torch
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", VECTOR)
def test_functional_vjp_jvp_jacobian_match_torch(name, create_graph):
    fe, ft = mods(VECTOR[name])
    x, y, t1, t2 = arr(3), arr(2, 3, seed=1), arr(3, seed=3), arr(2, 3, seed=4)
    u = out_like(fe, x, y)
    ex, ey = E(x).requires_grad_(), E(y).requires_grad_()
    tx, ty = T(x).requires_grad_(), T(y).requires_grad_()
    kw = dict(create_graph=create_graph)
    r = AF.vjp(fe, (ex, ey), E(u), **kw)
    tr = torch.autograd.functional.vjp(ft, (tx, ty), T(u), **kw)
    close(r, tr)
    assert r[1][0].requires_grad == create_graph == tr[1][0].requires_grad
    close(AF.jvp(fe, (ex, ey), (E(t1), E(t2)), **kw),
          torch.autograd.functional.jvp(ft, (tx, ty), (T(t1), T(t2)), **kw))
    for strategy in ("reverse-mode", "forward-mode"):
        je = AF.jacobian(fe, (ex, ey), strategy=strategy, **kw)
        # (torch has no forward-mode jacobian with create_graph; ember's equals its reverse mode)
        tstrategy = "reverse-mode" if create_graph else strategy
        jt = torch.autograd.functional.jacobian(ft, (tx, ty), vectorize=True, strategy=tstrategy,
                                                **kw)
        close(je, jt)
    if create_graph:  # the results are differentiable with respect to the original inputs
        ge = ember.autograd.grad((r[1][0] * r[1][0]).sum(), (ex, ey), allow_unused=True)
        gt = torch.autograd.grad((tr[1][0] * tr[1][0]).sum(), (tx, ty), allow_unused=True)
        close(ge, gt)


@needs_torch
@pytest.mark.parametrize("name", SCALAR)
def test_functional_hessian_vhp_hvp_match_torch(name):
    fe, ft = mods(SCALAR[name])
    a, v = arr(6), arr(6, seed=3)
    close(AF.hessian(fe, E(a)), torch.autograd.functional.hessian(ft, T(a)), tol=1e-8)
    close(AF.vhp(fe, E(a), E(v)), torch.autograd.functional.vhp(ft, T(a), T(v)))
    close(AF.hvp(fe, E(a), E(v)), torch.autograd.functional.hvp(ft, T(a), T(v)))


@needs_torch
def test_functional_tuple_hessian_and_single_element_vjp_match_torch():
    def f(m, x, y):
        return (m.exp(x) * (y @ x).sum() + y.sum() ** 2).sum()

    fe, ft = mods(f)
    x, y = arr(3), arr(2, 3, seed=1)
    close(AF.hessian(fe, (E(x), E(y))), torch.autograd.functional.hessian(ft, (T(x), T(y))),
          tol=1e-8)
    close(AF.vjp(fe, (E(x), E(y))), torch.autograd.functional.vjp(ft, (T(x), T(y))))
    close(AF.hessian(fe, (E(x), E(y)), outer_jacobian_strategy="forward-mode"),
          torch.autograd.functional.hessian(ft, (T(x), T(y))), tol=1e-8)


# ---- consistency without torch --------------------------------------------------------------------


@pytest.mark.parametrize("name", VECTOR)
def test_jvp_is_transpose_of_vjp(name):
    fe = lambda *a: VECTOR[name](ember, *a)  # noqa: E731
    x, y, t1, t2 = arr(3), arr(2, 3, seed=1), arr(3, seed=3), arr(2, 3, seed=4)
    u = out_like(fe, x, y)
    _, jv = EF.jvp(fe, (E(x), E(y)), (E(t1), E(t2)))
    _, fn = EF.vjp(fe, E(x), E(y))
    gx, gy = fn(E(u))
    # <u, J t> == <Jᵀ u, t>
    lhs = float((to_np(jv) * u).sum())
    rhs = float((to_np(gx) * t1).sum() + (to_np(gy) * t2).sum())
    assert abs(lhs - rhs) < 1e-10
    jr = EF.jacrev(fe, (0, 1))(E(x), E(y))
    jf = EF.jacfwd(fe, (0, 1))(E(x), E(y))
    close(jr, jf)


def test_jvp_through_basic_indexing():
    a, t = arr(4), arr(4, seed=1)
    _, jv = EF.jvp(lambda x: x[1:3] * 2, (E(a),), (E(t),))
    np.testing.assert_allclose(to_np(jv), 2 * t[1:3], rtol=1e-12)


def test_closed_forms():
    a = arr(4)
    g = EF.grad(lambda x: (ember.sin(x) * x).sum())(E(a))
    np.testing.assert_allclose(to_np(g), np.cos(a) * a + np.sin(a), rtol=1e-12)
    h = EF.hessian(lambda x: (x ** 3).sum())(E(a))
    np.testing.assert_allclose(to_np(h), np.diag(6 * a), atol=1e-12)
    assert EF.grad(EF.grad(lambda x: x ** 3))(ember.tensor(2.0, dtype=D)).item() == 12.0
    j = AF.jacobian(lambda x: x.exp(), E(a))
    np.testing.assert_allclose(to_np(j), np.diag(np.exp(a)), rtol=1e-12)
    # functions independent of an input: zeros, not None
    j = AF.jacobian(lambda x, y: x * 2, (E(a), E(a)))
    assert to_np(j[1]).shape == (4, 4) and not to_np(j[1]).any()


def test_results_are_detached_unless_something_outside_needs_the_graph():
    x = E(arr(3))
    g = EF.grad(lambda t: (t * t).sum())(x)
    assert not g.requires_grad
    w = E(arr(3, seed=1)).requires_grad_()
    g = EF.grad(lambda t: (t * w).sum() * t.sum())(x)
    assert g.requires_grad  # depends on the captured w
    (gw,) = ember.autograd.grad(g.sum(), w)
    np.testing.assert_allclose(to_np(gw), np.full(3, to_np(x).sum()) + 3 * to_np(x), rtol=1e-12)
    xr = E(arr(3)).requires_grad_()
    g = EF.grad(lambda t: (t ** 3).sum())(xr)
    (g2,) = ember.autograd.grad(g.sum(), xr)
    np.testing.assert_allclose(to_np(g2), 6 * to_np(xr), rtol=1e-12)
    with ember.no_grad():
        assert not EF.grad(lambda t: (t * w).sum())(x).requires_grad
    out, jv = AF.jvp(lambda t: t * w, E(arr(3)), E(arr(3)))
    assert not out.requires_grad and not jv.requires_grad


def test_bad_input_errors():
    x = E(arr(3))
    with pytest.raises(RuntimeError, match="scalar Tensor.*shape \\(3,\\)"):
        EF.grad(lambda t: t * 2)(x)
    with pytest.raises(RuntimeError, match="argnums=2 but only 1"):
        EF.grad(lambda t: t.sum(), argnums=2)(x)
    with pytest.raises(RuntimeError, match="has_aux is True"):
        EF.grad(lambda t: t.sum(), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="floating point.*int64"):
        EF.grad(lambda t: t.sum())(ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="tangent 0 has shape \\(2,\\)"):
        EF.jvp(lambda t: t, (x,), (E(arr(2)),))
    with pytest.raises(RuntimeError, match="primals to be a tuple"):
        EF.jvp(lambda t: t, x, (x,))
    _, fn = EF.vjp(lambda t: t * 2, x)
    with pytest.raises(RuntimeError, match="cotangent 0 has shape \\(2,\\)"):
        fn(E(arr(2)))
    with pytest.raises(RuntimeError, match="vjp: the vector v can only be None"):
        AF.vjp(lambda t: t * 2, x)
    with pytest.raises(RuntimeError, match="jvp: entry 0 of v has shape \\(2,\\)"):
        AF.jvp(lambda t: t * 2, x, E(arr(2)))
    with pytest.raises(TypeError, match="jacobian: the inputs given must be"):
        AF.jacobian(lambda t: t, [x, 3])
    with pytest.raises(TypeError, match="vjp: the outputs of the user-provided function"):
        AF.vjp(lambda t: 3.0, x, E(arr(3)))
    with pytest.raises(RuntimeError, match="single element, got shape \\(3,\\)"):
        AF.hessian(lambda t: t * 2, x)
    with pytest.raises(RuntimeError, match="independent of input 1.*strict"):
        AF.jacobian(lambda a, b: a * 2, (x, x), strict=True)
    with pytest.raises(RuntimeError, match="does not require gradients.*strict"):
        AF.vjp(lambda t: ember.ones(3, dtype=D), x, x, strict=True)
    with pytest.raises(ValueError, match="strategy"):
        AF.jacobian(lambda t: t, x, strategy="sideways")
