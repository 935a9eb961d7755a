"""Complex autograd beyond add/sub/mul: PyTorch's conjugate-Wirtinger gradients of div, neg,
exp, log, sqrt, pow, matmul / mm / bmm and angle (and the linear ops that pass complex
gradients through) against torch on complex128 inputs, ember's gradcheck through the real
view, and forward-mode AD refusing complex tensors with a clear error instead of dropping
the tangent."""

import ember
import ember.autograd.forward_ad as fwAD
import numpy as np
import pytest


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def crandn(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


W = crandn(3, 4, seed=7)  # the complex weight of the linear loss (broadcasts to (3, 4) results)


def _losses(m, y):
    """Two real losses of a 2-D complex result: |y|^2 summed, and Re(y * w) summed."""
    w = m.tensor(W[: y.shape[0], : y.shape[1]])
    return [(y.abs() ** 2).sum(), (y * w).real.sum()]


def _check(torch, fn, *arrays, rtol=1e-9, atol=1e-11):
    """fn(module, *tensors) -> complex tensor; its two losses' gradients match torch's."""
    for k in range(2):
        ins_e = [ember.tensor(a, requires_grad=True) for a in arrays]
        ins_t = [torch.tensor(a, requires_grad=True) for a in arrays]
        _losses(ember, fn(ember, *ins_e))[k].backward()
        _losses(torch, fn(torch, *ins_t))[k].backward()
        for e, t in zip(ins_e, ins_t):
            assert e.grad is not None and e.grad.dtype == getattr(ember, str(t.grad.dtype)[6:])
            np.testing.assert_allclose(e.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=rtol, atol=atol)


Z, U = crandn(3, 4), crandn(3, 4, seed=1)
R = np.random.default_rng(2).standard_normal((3, 4))

UNARY = {
    "neg": lambda m, a: -a,
    "exp": lambda m, a: a.exp(),
    "log": lambda m, a: m.log(a),
    "sqrt": lambda m, a: a.sqrt(),
    "pow_scalar": lambda m, a: a ** 3,
    "pow_half": lambda m, a: a.pow(0.5),
    "pow_complex_scalar": lambda m, a: a ** (1.5 - 0.5j),
    "reciprocal_via_div": lambda m, a: 1.0 / a,
    "conj": lambda m, a: a.conj() * 1.0,
    "conj_physical": lambda m, a: m.conj_physical(a),
    "sum": lambda m, a: a.sum(0, keepdim=True) * a,
    "mean": lambda m, a: a.mean(1, keepdim=True) * a,
    "cat": lambda m, a: m.cat([a, a * 2j], 0)[1:4],
    "stack": lambda m, a: m.stack([a, a.exp()], 0).sum(0),
    "reshape": lambda m, a: a.reshape(4, 3).t().reshape(3, 4) * a,
    "transpose_flip": lambda m, a: a.t().t().flip(1),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_grads_match_torch(torch, name):
    _check(torch, UNARY[name], Z)


@pytest.mark.parametrize("name", ["exp", "sqrt", "pow_scalar", "neg", "sum", "cat"])
def test_real_input_into_complex_graph_gets_real_grad(torch, name):
    # a real leaf multiplied into the complex graph receives the real part (as torch)
    _check(torch, lambda m, a: UNARY[name](m, a * (1 + 2j)), R)


BINARY = {
    "div": lambda m, a, b: a / b,
    "div_scalar": lambda m, a, b: a / (2 - 1j) + b,
    "rdiv_scalar": lambda m, a, b: (2 - 1j) / a + b,
    "pow_tensor": lambda m, a, b: a ** b,
    "mul_div_chain": lambda m, a, b: (a * b) / (a + 3),
    "matmul": lambda m, a, b: m.matmul(a, b.t())[:, :3].repeat(1, 2)[:, :4],
    "matmul_batched_broadcast": lambda m, a, b: m.matmul(a.reshape(3, 1, 4),
                                                       b.reshape(3, 4, 1)).reshape(1, 3),
    "matmul_vec": lambda m, a, b: m.matmul(a, b[0]).reshape(3, 1) * a,
    "mm": lambda m, a, b: m.mm(a.t(), b)[:3],
    "bmm": lambda m, a, b: m.bmm(a.reshape(3, 2, 2), b.reshape(3, 2, 2)).reshape(3, 4),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_grads_match_torch(torch, name):
    _check(torch, BINARY[name], Z, U)


def test_mixed_real_complex_binary_grads(torch):
    _check(torch, BINARY["div"], R, Z)
    _check(torch, BINARY["div"], Z, R + 2.0)
    _check(torch, lambda m, a, b: m.mm(a.t() * (1 + 0j), b)[:3], R, Z)  # mm wants one dtype
    _check(torch, lambda m, a, b: a ** b, R + 3.0, Z)  # positive real base, complex exponent


def test_real_valued_results_of_complex_inputs(torch):
    for fn in [lambda m, a: m.angle(a), lambda m, a: a.real * a.imag, lambda m, a: a.abs()]:
        ins_e = [ember.tensor(Z, requires_grad=True)]
        ins_t = [torch.tensor(Z, requires_grad=True)]
        (fn(ember, *ins_e) * ember.tensor(R)).sum().backward()
        (fn(torch, *ins_t) * torch.tensor(R)).sum().backward()
        np.testing.assert_allclose(ins_e[0].grad.numpy(), ins_t[0].grad.numpy(), rtol=1e-9,
                                   atol=1e-11)


def test_abs_and_angle_at_zero(torch):
    z = np.array([0j, 1 + 1j, 0j, -2j])
    for f in ["abs", "angle"]:
        e = ember.tensor(z, requires_grad=True)
        t = torch.tensor(z, requires_grad=True)
        getattr(ember, f)(e).sum().backward()
        getattr(torch, f)(t).sum().backward()
        np.testing.assert_allclose(e.grad.numpy(), t.grad.resolve_conj().numpy(), atol=1e-12)
        assert np.all(np.isfinite(e.grad.numpy()))
        assert e.grad.numpy()[0] == 0 and e.grad.numpy()[2] == 0


def test_angle_of_real_input_has_zero_grad(torch):
    e = ember.tensor(R, requires_grad=True)
    ember.angle(e).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), np.zeros_like(R))


def test_gradcheck_through_the_real_view():
    # ember's gradcheck wants float64 inputs: differentiate through view_as_complex/view_as_real
    rng = np.random.default_rng(3)
    a = ember.tensor(rng.standard_normal((3, 3, 2)) + np.array([2.0, 0.0]), requires_grad=True)
    b = ember.tensor(rng.standard_normal((3, 3, 2)), requires_grad=True)
    fns = [
        lambda x, y: ember.view_as_real(ember.view_as_complex(x).exp() / ember.view_as_complex(y)),
        lambda x, y: ember.view_as_real(ember.view_as_complex(x).log().sqrt()),
        lambda x, y: ember.view_as_real(ember.view_as_complex(x) ** ember.view_as_complex(y)),
        lambda x, y: ember.view_as_real(ember.view_as_complex(x) ** 2.5),
        lambda x, y: ember.view_as_real(ember.matmul(ember.view_as_complex(x),
                                                     ember.view_as_complex(y))),
        lambda x, y: ember.angle(ember.view_as_complex(x)) * ember.view_as_complex(y).abs(),
    ]
    for f in fns:
        assert ember.autograd.gradcheck(f, (a, b), atol=1e-6, rtol=1e-5)


def test_ops_without_complex_formulas_still_refuse():
    z = ember.tensor(Z, requires_grad=True)
    with pytest.raises(NotImplementedError, match="nan_to_num: autograd through complex"):
        ember.nan_to_num(z)


def test_indexing_a_complex_tensor_keeps_its_history(torch):
    _check(torch, lambda m, a: a[1:, ::2] * a[0, :2], Z)
    _check(torch, lambda m, a: a[[0, 2, 2]] * 1j, Z)
    _check(torch, lambda m, a: a[a.real > 0][:4].reshape(1, -1), Z)  # 7 picked


# ---- forward-mode AD ---------------------------------------------------------------------------

def _dual(shape=(3,)):
    x = ember.randn(*shape, dtype=ember.float64)
    return fwAD.make_dual(x, ember.ones_like(x))


@pytest.mark.parametrize("op,fn", [
    ("mul", lambda x: x * 1j),
    ("add", lambda x: x + 1j),
    ("pow", lambda x: x ** (1 + 1j)),
    ("div", lambda x: x / 1j),
    ("cat", lambda x: ember.cat([x * 1.0, x], 0) + ember.zeros(1, dtype=ember.complex128)),
])
def test_forward_ad_complex_result_has_the_tangent(op, fn, torch):
    # before: these raised (forward mode was real-only); now the tangents of the complex
    # results match torch's
    x = ember.tensor([0.5, -1.0, 2.0], dtype=ember.float64)
    with fwAD.dual_level():
        t = fwAD.unpack_dual(fn(fwAD.make_dual(x, ember.ones_like(x)))).tangent
    if op == "pow":
        # torch.func.jvp drops the imaginary part of this tangent (d/dx x^(1+i) = (1+i) x^i is
        # complex); ember gives the derivative, checked by central differences.
        h = 1e-6
        lo, hi = (np.array(fn(x + s * h).tolist()) for s in (-1, 1))
        np.testing.assert_allclose(np.array(t.tolist()), (hi - lo) / (2 * h), rtol=1e-6)
        return
    t_fn = {"cat": lambda a: torch.cat([a * 1.0, a], 0) + torch.zeros(1, dtype=torch.complex128)}
    _, ref = torch.func.jvp(t_fn.get(op, fn), (torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64),),
                            (torch.ones(3, dtype=torch.float64),))
    np.testing.assert_allclose(np.array(t.tolist()), ref.numpy(), rtol=1e-12)


def test_forward_ad_complex_unchecked_op_raises_naming_it():
    with fwAD.dual_level():
        x = _dual()
        with pytest.raises(NotImplementedError, match="forward-mode AD is not supported for "
                                                      "complex tensors in op sgn"):
            ember.sgn(x * 1j)


def test_forward_ad_into_view_as_complex_has_the_tangent():
    with fwAD.dual_level():
        x = fwAD.make_dual(ember.tensor([1.0, 2.0, 3.0, 4.0], dtype=ember.float64),
                           ember.tensor([0.5, -1.0, 2.0, 0.0], dtype=ember.float64))
        t = fwAD.unpack_dual(ember.view_as_complex(x.reshape(2, 2))).tangent
        assert t.tolist() == [0.5 - 1j, 2 + 0j]


def test_forward_ad_inplace_into_complex():
    with fwAD.dual_level():
        x = fwAD.make_dual(ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64),
                           ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64))
        z = ember.zeros(3, dtype=ember.complex128)
        z.add_(x)  # add's tangent holds for complex tensors
        assert fwAD.unpack_dual(z).tangent.tolist() == [1 + 0j, 2 + 0j, 3 + 0j]
        w = ember.zeros(3, dtype=ember.complex128)
        w[1:] = x[1:]  # linear: the written region takes the value's tangent
        assert fwAD.unpack_dual(w).tangent.tolist() == [0j, 2 + 0j, 3 + 0j]


def test_make_dual_takes_complex():
    with fwAD.dual_level():
        z = ember.tensor(Z)
        d = fwAD.make_dual(z, ember.ones_like(z))
        assert fwAD.unpack_dual(d * 2j).tangent.reshape(-1).tolist() == [2j] * z.numel()


def test_forward_ad_real_results_keep_working_next_to_complex_constants():
    # complex tensors without tangents don't disturb real duals
    with fwAD.dual_level():
        x = _dual()
        c = ember.tensor([1j, 2j, 3j])
        y = x.exp() * 2.0
        t = fwAD.unpack_dual(y).tangent
        assert t is not None
        np.testing.assert_allclose(t.numpy(), 2 * np.exp(fwAD.unpack_dual(x).primal.numpy()))
        assert fwAD.unpack_dual(c.abs()).tangent is None


def test_custom_function_with_a_complex_output(torch):
    # A custom autograd.Function's complex output gets a grad_fn (it was dropped silently) and
    # its backward's complex gradient reaches the complex input, as in torch.
    def make(m):
        class Square(m.autograd.Function):
            @staticmethod
            def forward(ctx, z):
                ctx.save_for_backward(z)
                return z * z

            @staticmethod
            def backward(ctx, g):
                (z,) = ctx.saved_tensors
                return g * (2 * z).conj()

        return Square

    sq_e, sq_t = make(ember), make(torch)
    _check(torch, lambda m, a: (sq_e if m is ember else sq_t).apply(a), Z)
    assert sq_e.apply(ember.tensor(Z, requires_grad=True)).grad_fn is not None
