"""Regression tests for what the seventh round of compat programs found in ember core:
kl_divergence rules PyTorch registers that ember lacked (low-rank Gaussians against full ones,
Pareto against Pareto and other families, ContinuousBernoulli against other families), each
compared with torch."""

from __future__ import annotations

import itertools

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _families(lib):
    D, t = lib.distributions, lib.tensor
    return {
        "Beta": D.Beta(t([2.0, 0.5]), t([3.0, 1.5])),
        "CB": D.ContinuousBernoulli(t([0.3, 0.7])),
        "Exponential": D.Exponential(t([1.5, 0.5])),
        "Gamma": D.Gamma(t([2.0, 0.7]), t([1.0, 3.0])),
        "Gumbel": D.Gumbel(t([0.0, 1.0]), t([1.0, 2.0])),
        "Laplace": D.Laplace(t([0.0, 1.0]), t([1.0, 2.0])),
        "Normal": D.Normal(t([0.0, 1.0]), t([1.0, 2.0])),
        "Pareto": D.Pareto(t([1.0, 2.0]), t([3.0, 1.5])),  # one finite mean, one finite variance
        "Pareto-low": D.Pareto(t([0.5, 1.0]), t([0.8, 2.5])),
        "Uniform": D.Uniform(t([1.5, 0.2]), t([3.0, 0.9])),
        "Uniform-wide": D.Uniform(t([-1.0, 0.0]), t([2.0, 1.0])),
    }


_PAIRS = [(a, b) for a, b in itertools.product(_families(torch), repeat=2)
          if "Pareto" in a + b or "CB" in a + b]


@pytest.mark.parametrize("a,b", _PAIRS, ids=[f"{a}|{b}" for a, b in _PAIRS])
def test_kl_pareto_and_continuous_bernoulli_pairs_match_torch(a, b):
    # before: NotImplementedError for every pair but Pareto/Pareto of equal scales
    try:
        ref = torch.distributions.kl_divergence(_families(torch)[a], _families(torch)[b])
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            ember.distributions.kl_divergence(_families(ember)[a], _families(ember)[b])
        return
    got = ember.distributions.kl_divergence(_families(ember)[a], _families(ember)[b])
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def _lowrank(lib, batch=()):
    r = np.random.default_rng(0)
    W = r.normal(size=(*batch, 3, 2)).astype(np.float32)
    return lib.distributions.LowRankMultivariateNormal(
        lib.tensor(r.normal(size=(*batch, 3)).astype(np.float32)), lib.tensor(W),
        lib.tensor(r.uniform(0.5, 2.0, (*batch, 3)).astype(np.float32)))


def _full(lib):
    r = np.random.default_rng(1)
    A = r.normal(size=(3, 3))
    cov = (A @ A.T + 3 * np.eye(3)).astype(np.float32)
    return lib.distributions.MultivariateNormal(lib.tensor(r.normal(size=3).astype(np.float32)),
                                                covariance_matrix=lib.tensor(cov))


@pytest.mark.parametrize("pair", ["lowrank|full", "full|lowrank", "lowrank|lowrank"])
def test_kl_low_rank_gaussians_match_torch(pair):
    # before: NotImplementedError (VI posteriors with a low-rank covariance)
    def make(lib, which, batch=()):
        return _lowrank(lib, batch) if which == "lowrank" else _full(lib)
    a, b = pair.split("|")
    got = ember.distributions.kl_divergence(make(ember, a), make(ember, b, (2,)))
    ref = torch.distributions.kl_divergence(make(torch, a), make(torch, b, (2,)))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-5)


def test_kl_low_rank_gaussian_gradient_and_shape_check():
    def run(lib):
        w = lib.tensor([[1.0], [0.5]], requires_grad=True)
        p = lib.distributions.LowRankMultivariateNormal(lib.zeros(2), w, lib.ones(2))
        q = lib.distributions.MultivariateNormal(lib.ones(2), 2 * lib.eye(2))
        lib.distributions.kl_divergence(p, q).backward()
        return w.grad.numpy()
    np.testing.assert_allclose(run(ember), run(torch), rtol=1e-5, atol=1e-6)
    p = ember.distributions.LowRankMultivariateNormal(ember.zeros(3), ember.ones(3, 1), ember.ones(3))
    with pytest.raises(ValueError, match="different event shapes"):
        ember.distributions.kl_divergence(p, ember.distributions.MultivariateNormal(
            ember.zeros(2), ember.eye(2)))


# ---- torch.func -----------------------------------------------------------------------------------
def test_func_grad_of_complex_inputs_matches_torch():
    # before: "only floating point tensors can be differentiated" for a complex argument
    z = np.array([1 + 2j, 3 - 1j], np.complex64)
    got = ember.func.grad(lambda x, y: (x.abs() * y).sum(), argnums=(0, 1))(
        ember.tensor(z), ember.ones(2))
    ref = torch.func.grad(lambda x, y: (x.abs() * y).sum(), argnums=(0, 1))(
        torch.tensor(z), torch.ones(2))
    for g, r in zip(got, ref):
        assert str(g.dtype).split(".")[-1] == str(r.dtype).split(".")[-1]
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        ember.func.grad(lambda x: (x ** 2).sum())(ember.ones(3, dtype=ember.complex64))


def test_functional_call_with_a_name_that_is_not_a_parameter():
    # torch sets such a name as a plain attribute for the call; before: AttributeError
    m = ember.nn.Linear(2, 1)
    out = ember.func.functional_call(m, {"weight": ember.ones(1, 2), "bias": ember.zeros(1),
                                         "extra": ember.ones(1)}, (ember.ones(1, 2),))
    assert out.tolist() == [[2.0]] and not hasattr(m, "extra")
    with pytest.raises(RuntimeError, match="unexpected keys"):
        ember.func.functional_call(m, {"weight": ember.ones(1, 2), "bias": ember.zeros(1),
                                       "extra": ember.ones(1)}, (ember.ones(1, 2),), strict=True)


def test_jacfwd_checks_randomness():
    with pytest.raises(RuntimeError, match="randomness"):
        ember.func.jacfwd(lambda x: x ** 2, randomness="bogus")


# ---- torch and ember tensors in one expression ---------------------------------------------------
def test_mixing_torch_and_ember_tensors_is_a_type_error_not_a_recursion():
    # before: RecursionError (each library's __torch_function__ handing the call back)
    a, b = torch.ones(2), ember.ones(2)
    with pytest.raises(TypeError, match="ember and torch tensors do not mix"):
        torch.add(a, b)
    with pytest.raises(TypeError, match="ember and torch tensors do not mix"):
        torch.nn.functional.relu(b)
    with pytest.raises(TypeError):
        a + b
    assert (a == b) is False  # as torch against any foreign object
    assert (b + 1).tolist() == [2.0, 2.0]


# ---- fft arguments --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_one_dim_fft_refuses_n_minus_one(name):
    # before: n=-1 meant "the input's size", which only the n-D s= allows
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(-1\)"):
        getattr(ember.fft, name)(ember.ones(4), n=-1)
    with pytest.raises(RuntimeError):
        getattr(torch.fft, name)(torch.ones(4), n=-1)


def test_fftn_over_no_axis_is_the_input_as_complex():
    # before: a RuntimeError from the kernel ("expected at least one dim")
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    for f in (ember.fft.fftn, ember.fft.ifftn, ember.fft.fft2):
        out = f(x, dim=())
        assert out.dtype == ember.complex64 and out.real.tolist() == x.tolist()
    z = x.to(ember.complex64)
    assert ember.fft.fftn(z, dim=()).data_ptr() != z.data_ptr()
    for f in (ember.fft.rfftn, ember.fft.irfftn, ember.fft.hfftn):
        with pytest.raises(RuntimeError, match="must transform at least one axis"):
            f(x, dim=())


# ---- checkpoint's keyword arguments ---------------------------------------------------------------
def test_checkpoint_takes_context_fn_determinism_check_and_debug():
    # before: these went on to the checkpointed function as its own keyword arguments
    import contextlib

    from ember.utils.checkpoint import checkpoint, noop_context_fn

    log = []

    @contextlib.contextmanager
    def tag(name):
        log.append(name)
        yield

    x = ember.arange(3.0, requires_grad=True)
    out = checkpoint(lambda y: (y.sin() * y).sum(), x, use_reentrant=False,
                     context_fn=lambda: (tag("forward"), tag("recompute")),
                     determinism_check="none", debug=False, early_stop=True)
    out.backward()
    assert log == ["forward", "recompute"]
    t = torch.arange(3.0, requires_grad=True)
    (t.sin() * t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    assert noop_context_fn is not None
    with pytest.raises(ValueError, match="determinism_check"):
        checkpoint(lambda y: y * 2, x, use_reentrant=False, determinism_check="sometimes")
    with pytest.raises(ValueError, match="use_reentrant=False"):
        checkpoint(lambda y: y * 2, x, use_reentrant=True, context_fn=lambda: (tag("a"), tag("b")))


# ---- eye of complex dtypes (C++: ops/creation_ops.cpp) -------------------------------------------
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_eye_of_complex_dtypes(dtype):
    # before: "eye: not implemented for dtype complex64"; parametrizations.orthogonal of a
    # complex weight builds its identity with it
    got = ember.eye(2, 3, dtype=getattr(ember, dtype))
    ref = torch.eye(2, 3, dtype=getattr(torch, dtype))
    assert str(got.dtype).split(".")[-1] == dtype
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    assert ember.eye(0, dtype=getattr(ember, dtype)).shape == (0, 0)


def test_orthogonal_parametrization_of_a_complex_weight():
    m = ember.nn.Linear(3, 3, bias=False)
    r = np.random.default_rng(0)
    w = (r.normal(size=(3, 3)) + 1j * r.normal(size=(3, 3))).astype(np.complex64)
    m.weight = ember.nn.Parameter(ember.tensor(w))
    ember.nn.utils.parametrizations.orthogonal(m)
    W = m.weight.detach()
    np.testing.assert_allclose((W.conj().T @ W).numpy(), np.eye(3), atol=1e-5)


def test_distribution_reprs_print_as_torch():
    # a program printing its distributions / transforms / constraints prints what torch does
    D, C, T = ember.distributions, ember.distributions.constraints, ember.distributions.transforms
    tD, tC, tT = torch.distributions, torch.distributions.constraints, torch.distributions.transforms
    pairs = [(T.PowerTransform(2.0), tT.PowerTransform(2.0)), (D.Beta(1.0, 2.0), tD.Beta(1.0, 2.0)),
             (C.multinomial(3), tC.multinomial(3)), (D.Normal(0.0, 1.0), tD.Normal(0.0, 1.0)),
             (C.interval(0.0, 1.0), tC.interval(0.0, 1.0))]
    for e, t in pairs:
        assert repr(e).replace("ember.", "torch.") == repr(t)
