"""What the third set of PyTorch-style programs (packages/nn/tests/compat_programs: U-Net,
tensor idioms, per-sample gradients, ...) found missing or different in ember's core: memory
formats (channels_last and friends), std_mean/var_mean returning plain tuples, cholesky_solve and
cholesky_inverse, torch.func.stack_module_state."""

from __future__ import annotations

import pickle

import ember
import numpy as np
import pytest


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- memory formats ---------------------------------------------------------------------------
def test_memory_format_objects():
    assert repr(ember.channels_last) == "ember.channels_last"
    assert isinstance(ember.contiguous_format, ember.memory_format)
    assert pickle.loads(pickle.dumps(ember.channels_last)) is ember.channels_last
    assert ember.channels_last is not ember.channels_last_3d


@pytest.mark.parametrize("shape,fmt", [((2, 3, 4, 5), "channels_last"),
                                       ((2, 3, 2, 4, 5), "channels_last_3d"),
                                       ((1, 3, 1, 5), "channels_last"),
                                       ((2, 1, 4, 5), "channels_last")])
def test_channels_last_strides_match_torch(shape, fmt):
    torch = pytest.importorskip("torch")
    a = _arr(*shape)
    t = torch.tensor(a).to(memory_format=getattr(torch, fmt))
    e = ember.tensor(a).to(memory_format=getattr(ember, fmt))
    assert e.stride() == t.stride()
    assert e.is_contiguous() == t.is_contiguous()
    assert e.is_contiguous(memory_format=getattr(ember, fmt)) is True
    np.testing.assert_array_equal(e.numpy(), a)
    # contiguous() goes back; clone() keeps the layout, as torch's preserve_format does
    assert e.contiguous().stride() == t.contiguous().stride()
    assert e.clone().stride() == t.clone().stride()
    assert e.clone(memory_format=ember.contiguous_format).stride() == \
        t.clone(memory_format=torch.contiguous_format).stride()
    c = ember.tensor(a).contiguous(memory_format=getattr(ember, fmt))
    assert c.stride() == torch.tensor(a).contiguous(memory_format=getattr(torch, fmt)).stride()
    assert ember.tensor(a).is_contiguous(memory_format=getattr(ember, fmt)) == \
        torch.tensor(a).is_contiguous(memory_format=getattr(torch, fmt))


def test_channels_last_is_differentiable_and_ops_agree():
    x = ember.tensor(_arr(2, 3, 5, 5), requires_grad=True)
    w = ember.tensor(_arr(4, 3, 3, 3, seed=1))
    y = x.to(memory_format=ember.channels_last)
    out = ember.nn.functional.conv2d(y, w, padding=1)
    ref = ember.nn.functional.conv2d(x.detach(), w, padding=1)
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
    (out * out).sum().backward()
    assert x.grad is not None and tuple(x.grad.shape) == (2, 3, 5, 5)


def test_module_to_channels_last_lays_out_4d_tensors_only():
    m = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4))
    x = ember.tensor(_arr(2, 3, 6, 6))
    ref = m(x)
    m.to(memory_format=ember.channels_last)
    assert m[0].weight.is_contiguous(memory_format=ember.channels_last)
    assert not m[0].weight.is_contiguous()
    assert m[0].bias.is_contiguous() and m[1].running_mean.is_contiguous()
    assert isinstance(m[0].weight, ember.nn.Parameter)
    got = m(x.to(memory_format=ember.channels_last))
    np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    m.to(memory_format=ember.contiguous_format)
    assert m[0].weight.is_contiguous()


def test_memory_format_bad_input_names_the_op():
    x = ember.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"contiguous\(\): required rank 4 tensor"):
        x.contiguous(memory_format=ember.channels_last)
    with pytest.raises(RuntimeError, match=r"to\(\): required rank 4"):
        x.to(memory_format=ember.channels_last)
    with pytest.raises(TypeError, match=r"memory_format must be an ember.memory_format"):
        x.contiguous(memory_format="channels_last")
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        x.contiguous(memory_format=ember.preserve_format)
    assert x.is_contiguous(memory_format=ember.channels_last) is False
    with pytest.raises(TypeError, match=r"Module.to\(\): memory_format"):
        ember.nn.Linear(2, 2).to(memory_format=1)


# ---- std_mean / var_mean ------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["std_mean", "var_mean"])
def test_std_mean_returns_plain_tuple_like_torch(op):
    torch = pytest.importorskip("torch")
    a = _arr(3, 4)
    want = getattr(torch, op)(torch.tensor(a), dim=1)
    got = getattr(ember, op)(ember.tensor(a), dim=1)
    assert type(got) is tuple and type(want) is tuple
    assert str(got) == str(want).replace("torch", "ember")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


# ---- cholesky_solve / cholesky_inverse -------------------------------------------------------
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_match_torch(upper):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 4, 4))
    A = a @ a.transpose(0, 2, 1) + 4 * np.eye(4)
    B = np.random.default_rng(1).standard_normal((2, 4, 3))
    tL = torch.linalg.cholesky(torch.tensor(A), upper=upper).requires_grad_(True)
    eL = ember.tensor(tL.detach().numpy(), requires_grad=True)
    tB, eB = torch.tensor(B, requires_grad=True), ember.tensor(B, requires_grad=True)
    want, got = torch.cholesky_solve(tB, tL, upper=upper), ember.cholesky_solve(eB, eL, upper=upper)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    want.square().sum().backward()
    got.square().sum().backward()
    np.testing.assert_allclose(eB.grad.numpy(), tB.grad.numpy(), rtol=1e-8)
    # only the factor's triangle matters for the gradient that torch reports
    tri = np.triu if upper else np.tril
    np.testing.assert_allclose(tri(eL.grad.numpy()), tri(tL.grad.numpy()), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(eL.detach().cholesky_inverse(upper=upper).numpy(),
                               torch.cholesky_inverse(tL.detach(), upper=upper).numpy(),
                               rtol=1e-10)
    assert np.allclose(ember.cholesky_solve(eB, eL, upper).detach().numpy(),
                       np.linalg.solve(A, B))


def test_cholesky_solve_bad_shapes():
    with pytest.raises(RuntimeError, match="Incompatible matrix sizes for cholesky_solve: each A matrix is 2 by 2 but each b "
                       "matrix is 3 by 1"):
        ember.cholesky_solve(ember.zeros(3, 1), ember.eye(2))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ember.cholesky_solve(ember.zeros(2), ember.eye(2))


# ---- torch.func.stack_module_state ------------------------------------------------------------
def test_stack_module_state_runs_an_ensemble():
    from ember.func import functional_call, stack_module_state, vmap

    models = [ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
              for _ in range(3)]
    params, buffers = stack_module_state(models)
    assert tuple(params["0.weight"].shape) == (3, 4, 3)
    assert params["0.weight"].requires_grad and params["0.weight"].is_leaf
    assert tuple(buffers["1.running_mean"].shape) == (3, 4)
    assert not buffers["1.running_mean"].requires_grad
    for m in models:
        m.eval()
    x = ember.tensor(_arr(5, 3))
    out = vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)),
               in_dims=(0, 0, None))(params, buffers, x)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    out.sum().backward()
    assert params["0.weight"].grad is not None


def test_stack_module_state_refuses_mixed_models():
    from ember.func import stack_module_state

    with pytest.raises(RuntimeError, match="at least one model"):
        stack_module_state([])
    a, b = ember.nn.Linear(2, 2), ember.nn.Linear(2, 2)
    b.eval()
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        stack_module_state([a, b])
    with pytest.raises(RuntimeError, match="same class"):
        stack_module_state([a, ember.nn.Sequential()])


# ---- autograd.grad's full signature (WGAN-GP code passes only_inputs=True) --------------------
def test_autograd_grad_takes_torchs_arguments_in_torchs_order():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x ** 2).sum(1)
    # PyTorch's positional order: ..., create_graph, only_inputs, allow_unused
    g, = ember.autograd.grad(y, x, ember.ones_like(y), True, True, True)
    penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
    penalty.backward()  # through the gradient: create_graph=True
    want = 2 * (2 * x.detach().norm(dim=1, keepdim=True) - 1) * 2 * x.detach() / \
        x.detach().norm(dim=1, keepdim=True) / 2
    np.testing.assert_allclose(x.grad.numpy(), want.numpy(), rtol=1e-5)
    z = ember.tensor(1.0, requires_grad=True)
    unused = ember.autograd.grad(x.sum(), [x, z], None, None, False, True, True)
    assert unused[1] is None
    with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
        ember.autograd.grad((x * 2).sum(), x, only_inputs=False)


def test_autograd_grad_is_grads_batched_matches_torch():
    torch = pytest.importorskip("torch")
    a = _arr(3)
    tx, ex = torch.tensor(a, requires_grad=True), ember.tensor(a, requires_grad=True)
    want = torch.autograd.grad(tx.sin() * tx, tx, torch.eye(3), is_grads_batched=True)[0]
    got = ember.autograd.grad(ex.sin() * ex, ex, ember.eye(3), is_grads_batched=True)[0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="is_grads_batched=True needs every grad_output"):
        ember.autograd.grad(ex * 2, ex, None, is_grads_batched=True)


# ---- the random fills PyTorch has that ember lacked ---------------------------------------------
def test_geometric_log_normal_cauchy_fills():
    g = ember.Generator().manual_seed(0)
    x = ember.empty(20000).geometric_(0.25, generator=g)
    assert x.min().item() == 1.0 and (x == x.round()).all()
    assert abs(x.mean().item() - 4.0) < 0.15
    assert ember.empty(5, dtype=ember.int64).geometric_(0.5).dtype == ember.int64
    z = ember.empty(20000).log_normal_(0.5, 0.25, generator=g)
    assert abs(z.log().mean().item() - 0.5) < 0.02 and abs(z.log().std().item() - 0.25) < 0.02
    c = ember.empty(20001).cauchy_(1.0, 2.0, generator=g)
    q1, q3 = ember.quantile(c, ember.tensor([0.25, 0.75])).tolist()
    assert abs(c.median().item() - 1.0) < 0.1 and abs((q3 - q1) / 2 - 2.0) < 0.15
    a = ember.empty(4).cauchy_(generator=ember.Generator().manual_seed(3))
    b = ember.empty(4).cauchy_(generator=ember.Generator().manual_seed(3))
    assert ember.equal(a, b)
    with pytest.raises(RuntimeError, match=r"geometric_ expects p to be in \(0, 1\)"):
        ember.empty(2).geometric_(1.5)
    with pytest.raises(RuntimeError, match="cauchy_: Cauchy distribution is a continuous"):
        ember.empty(2, dtype=ember.int64).cauchy_()
    with pytest.raises(RuntimeError, match="log_normal_ expects std > 0.0"):
        ember.empty(2).log_normal_(0.0, -1.0)


def test_legacy_variable_is_a_detached_leaf():
    from ember.autograd import Variable

    x = ember.ones(2, requires_grad=True) * 2
    v = Variable(x, requires_grad=True)
    assert v.is_leaf and v.requires_grad and v.grad_fn is None
    assert v.data_ptr() == x.data_ptr() and v is not x
    assert isinstance(x, Variable) and not isinstance([1], Variable)
    w = Variable(ember.ones(2))
    assert not w.requires_grad and w.is_leaf
    (v * v).sum().backward()
    assert v.grad.tolist() == [4.0, 4.0]
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1, 2])
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(x, volatile=True)


# ---- special Bessel functions, windows and the smaller spellings ------------------------------
@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_modified_bessel_match_torch(name):
    torch = pytest.importorskip("torch")
    x = np.concatenate([np.linspace(-60, 60, 121), [0.0, 1e-3, 29.99, 30.0, 30.01, 500.0, 800.0]])
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    got = getattr(ember.special, name)(ember.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
    want32 = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float32)).numpy()
    got32 = getattr(ember.special, name)(ember.tensor(x, dtype=ember.float32))
    assert got32.dtype == ember.float32
    np.testing.assert_allclose(got32.numpy(), want32, rtol=2e-6)
    pts = np.array([0.5, -3.0, 40.0])
    tx, ex = torch.tensor(pts, requires_grad=True), ember.tensor(pts, requires_grad=True)
    getattr(torch.special, name)(tx).sum().backward()
    getattr(ember.special, name)(ex).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_i0_mvlgamma_top_level_and_methods():
    torch = pytest.importorskip("torch")
    x = np.array([1.5, 2.0, 3.5])
    np.testing.assert_allclose(ember.i0(ember.tensor(x)).numpy(), torch.i0(torch.tensor(x)).numpy())
    np.testing.assert_allclose(ember.tensor(x).mvlgamma(2).numpy(),
                               torch.tensor(x).mvlgamma(2).numpy(), rtol=1e-12)
    np.testing.assert_allclose(ember.special.multigammaln(ember.tensor(x), 3).numpy(),
                               torch.special.multigammaln(torch.tensor(x), 3).numpy(), rtol=1e-12)
    # outside the domain (x <= (p-1)/2): lgamma's values, no error, as in PyTorch 2.13
    np.testing.assert_allclose(ember.mvlgamma(ember.tensor([0.5, -2.5]), 3).numpy(),
                               torch.mvlgamma(torch.tensor([0.5, -2.5]), 3).numpy(), rtol=1e-12)


@pytest.mark.parametrize("name,args", [("hann_window", ()), ("hamming_window", ()),
                                       ("hamming_window", (True, 0.5, 0.5)),
                                       ("blackman_window", ()), ("bartlett_window", ()),
                                       ("kaiser_window", (True, 5.0)),
                                       ("kaiser_window", (False, 8.0))])
@pytest.mark.parametrize("length", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, args, length, periodic):
    torch = pytest.importorskip("torch")
    args = (periodic, *args[1:]) if args else (periodic,)
    want = getattr(torch, name)(length, *args, dtype=torch.float64)
    got = getattr(ember, name)(length, *args, dtype=ember.float64)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-15)
    assert getattr(ember, name)(4).dtype == ember.float32


def test_window_bad_input():
    with pytest.raises(RuntimeError, match="hann_window requires non-negative window length"):
        ember.hann_window(-1)
    with pytest.raises(RuntimeError, match="hann_window expects floating point dtypes"):
        ember.hann_window(4, dtype=ember.int64)


def test_scatter_variants_match_torch_with_gradients():
    torch = pytest.importorskip("torch")
    x = np.arange(24.0).reshape(2, 3, 4)
    weights = np.random.default_rng(0).standard_normal((2, 3, 4))
    cases = [("slice_scatter", np.zeros((2, 3, 2)), (2, 0, 4, 2)),
             ("slice_scatter", np.ones((1, 3, 4)), (0, 1)),
             ("select_scatter", np.zeros((2, 4)), (1, 2)),
             ("diagonal_scatter", -np.ones((2, 3)), (1, 1, 2)),
             ("diagonal_scatter", -np.ones((3, 2)), (0, 0, 2)),
             ("diagonal_scatter", -np.ones((3, 2)), (-1, 2, 0))]
    for name, src, args in cases:
        xx = x
        tx, ts = torch.tensor(xx, requires_grad=True), torch.tensor(src, requires_grad=True)
        ex, es = ember.tensor(xx, requires_grad=True), ember.tensor(src, requires_grad=True)
        want, got = getattr(torch, name)(tx, ts, *args), getattr(ember, name)(ex, es, *args)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        w = weights[:, :, :].reshape(-1)[:want.numel()].reshape(tuple(want.shape))
        (want * torch.tensor(w)).sum().backward()
        (got * ember.tensor(w)).sum().backward()
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())
        np.testing.assert_array_equal(es.grad.numpy(), ts.grad.numpy())
    with pytest.raises(RuntimeError, match="slice_scatter: expected src to have a size equal"):
        ember.slice_scatter(ember.zeros(4), ember.ones(3), start=0, end=2)


@pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning")  # torch's own deprecation notes
def test_deprecated_linalg_spellings_match_torch():
    torch = pytest.importorskip("torch")
    A = np.array([[4.0, 2.0, 0.5], [2.0, 3.0, 0.1], [0.5, 0.1, 2.0]])
    B = np.arange(6.0).reshape(3, 2)
    for upper in (False, True):
        np.testing.assert_allclose(ember.cholesky(ember.tensor(A), upper=upper).numpy(),
                                   torch.cholesky(torch.tensor(A), upper=upper).numpy(),
                                   rtol=1e-12)
        for transpose in (False, True):
            for unit in (False, True):
                want = torch.triangular_solve(torch.tensor(B), torch.tensor(A), upper, transpose,
                                              unit)
                got = ember.triangular_solve(ember.tensor(B), ember.tensor(A), upper, transpose,
                                             unit)
                np.testing.assert_allclose(got.solution.numpy(), want.solution.numpy(),
                                           rtol=1e-12)
                np.testing.assert_array_equal(got.cloned_coefficient.numpy(), A)
    mats = [np.arange(6.0).reshape(2, 3), np.ones((3, 4)), np.eye(4)[:, :2]]
    np.testing.assert_array_equal(ember.chain_matmul(*map(ember.tensor, mats)).numpy(),
                                  torch.chain_matmul(*map(torch.tensor, mats)).numpy())
    np.testing.assert_array_equal(ember.ldexp(ember.tensor([1.0, -3.0]), ember.tensor([2, 3]))
                                  .numpy(), [4.0, -24.0])
    assert ember.narrow_copy(ember.arange(6).view(2, 3), 1, 1, 2).tolist() == [[1, 2], [4, 5]]
    assert [tuple(t.shape) for t in ember.dsplit(ember.zeros(1, 1, 6), [1, 4])] == \
        [(1, 1, 1), (1, 1, 3), (1, 1, 2)]
    with pytest.raises(RuntimeError, match="dsplit requires a tensor with at least 3 dimension"):
        ember.dsplit(ember.zeros(2, 2), 2)


# ---- loading PyTorch's zip checkpoints ----------------------------------------------------------
def test_load_reads_a_torch_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    import collections

    base = torch.arange(12, dtype=torch.float32)
    obj = {
        "model": collections.OrderedDict([("w", torch.randn(3, 4)), ("b", torch.zeros(4))]),
        "view": base.view(3, 4)[:, 1:3], "same": base,  # two views of one storage
        "half": torch.tensor([1.5, -2.0], dtype=torch.float16),
        "bf16": torch.tensor([3.0, 0.5], dtype=torch.bfloat16),
        "mask": torch.tensor([True, False, True]), "ids": torch.tensor([[1, 2]], dtype=torch.int32),
        "param": torch.nn.Parameter(torch.ones(2)), "frozen": torch.nn.Parameter(
            torch.ones(1), requires_grad=False),
        "meta": ["text", b"bytes", 3, 2.5, None, True, (1, 2), {"nested": torch.ones(1)}],
        "size": torch.Size([2, 3]), "dtype": torch.float64, "dev": torch.device("cpu"),
        "empty": torch.zeros(0, 3), "scalar": torch.tensor(7),
        "np": [np.float64(0.93), np.arange(3, dtype=np.int32), np.int64(4)],
    }
    path = tmp_path / "ckpt.pt"
    torch.save(obj, path)
    got = ember.load(path, map_location="cpu")
    assert list(got) == list(obj)
    assert isinstance(got["model"], collections.OrderedDict)
    for key in ("view", "same", "half", "mask", "ids", "empty", "scalar"):
        assert got[key].dtype == getattr(ember, str(obj[key].dtype).split(".")[-1]), key
        np.testing.assert_array_equal(got[key].numpy(), obj[key].numpy())
    np.testing.assert_array_equal(got["model"]["w"].numpy(), obj["model"]["w"].numpy())
    assert got["bf16"].dtype == ember.bfloat16 and got["bf16"].float().tolist() == [3.0, 0.5]
    got["same"][1] = 100.0  # the views still share their storage
    assert got["view"][0, 0].item() == 100.0
    assert isinstance(got["param"], ember.nn.Parameter) and got["param"].requires_grad
    assert not got["frozen"].requires_grad
    assert got["meta"][:7] == ["text", b"bytes", 3, 2.5, None, True, (1, 2)]
    assert got["meta"][7]["nested"].tolist() == [1.0]
    assert got["size"] == ember.Size([2, 3]) and got["dtype"] is ember.float64
    assert got["dev"] == ember.device("cpu")
    assert got["np"][0] == np.float64(0.93) and got["np"][2] == 4
    np.testing.assert_array_equal(got["np"][1], np.arange(3, dtype=np.int32))
    # a file object and the callable map_location work as well
    with open(path, "rb") as f:
        again = ember.load(f, map_location=lambda storage, loc: storage)
    assert again["ids"].tolist() == [[1, 2]]


def test_load_torch_training_checkpoint_resumes(tmp_path):
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    opt = torch.optim.Adam(tm.parameters(), lr=0.01)
    tm(torch.randn(4, 3)).sum().backward()
    opt.step()
    torch.save({"model": tm.state_dict(), "optimizer": opt.state_dict(), "epoch": 3},
               tmp_path / "run.pth")
    ck = ember.load(str(tmp_path / "run.pth"), weights_only=True)
    em = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.BatchNorm1d(2))
    em.load_state_dict(ck["model"])
    eopt = ember.optim.Adam(em.parameters(), lr=0.5)
    eopt.load_state_dict(ck["optimizer"])
    assert eopt.param_groups[0]["lr"] == 0.01 and ck["epoch"] == 3
    np.testing.assert_array_equal(eopt.state[em[0].weight]["exp_avg"].numpy(),
                                  opt.state[tm[0].weight]["exp_avg"].numpy())
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    tm.eval()
    em.eval()
    np.testing.assert_allclose(em(ember.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_load_refuses_what_a_torch_checkpoint_would_run(tmp_path):
    torch = pytest.importorskip("torch")
    import pickle as pickle_mod

    from ember.serialization import CheckpointError

    torch.save(torch.nn.Linear(2, 2), tmp_path / "whole.pt")  # a pickled module: code
    with pytest.raises(pickle_mod.UnpicklingError, match="needs the global torch.nn"):
        ember.load(tmp_path / "whole.pt", weights_only=False)
    torch.save({"a": torch.ones(2)}, tmp_path / "ok.pt")
    data = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        ember.load(tmp_path / "cut.pt")
    torch.save({"a": torch.ones(2)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert ember.load(tmp_path / "legacy.pt")["a"].tolist() == [1.0, 1.0]  # the legacy format
    data = (tmp_path / "legacy.pt").read_bytes()
    (tmp_path / "legacy_cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt legacy"):
        ember.load(tmp_path / "legacy_cut.pt")


@pytest.mark.parametrize("name,args", [("zeros_like", ()), ("ones_like", ()), ("empty_like", ()),
                                       ("full_like", (2.0,)), ("rand_like", ()),
                                       ("randn_like", ()), ("randint_like", (5,))])
def test_like_factories_take_memory_format(name, args):
    torch = pytest.importorskip("torch")
    a = _arr(2, 3, 4, 5)
    for fmt in ("preserve_format", "contiguous_format", "channels_last"):
        for src_fmt in ("contiguous_format", "channels_last"):
            t = torch.tensor(a).contiguous(memory_format=getattr(torch, src_fmt))
            e = ember.tensor(a).contiguous(memory_format=getattr(ember, src_fmt))
            want = getattr(torch, name)(t, *args, memory_format=getattr(torch, fmt))
            got = getattr(ember, name)(e, *args, memory_format=getattr(ember, fmt))
            assert got.stride() == want.stride() and got.dtype == e.dtype, (fmt, src_fmt)
    p = ember.nn.Parameter(ember.ones(3))
    assert ember.zeros_like(p, memory_format=ember.preserve_format).tolist() == [0.0] * 3
    with pytest.raises(TypeError, match=r"zeros_like\(\): memory_format must be"):
        ember.zeros_like(p, memory_format="channels_last")


def test_where_with_only_a_condition_is_nonzero():
    torch = pytest.importorskip("torch")
    a = np.array([[0, 1, 0], [2, 0, 3]])
    want = torch.where(torch.tensor(a))
    got = ember.where(ember.tensor(a))
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        assert g.tolist() == w.tolist()
    assert ember.where(ember.tensor([True, False]), 1.0, 0.0).tolist() == [1.0, 0.0]
    with pytest.raises(TypeError, match=r"where\(\): expected where\(condition\)"):
        ember.where(ember.tensor([True]), ember.ones(1))


# ---- distributions.LowRankMultivariateNormal ----------------------------------------------------
def test_lowrank_multivariate_normal_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    W, d = rng.normal(size=(2, 4, 2)), rng.uniform(0.5, 2.0, (4,))
    loc, x = rng.normal(size=(4,)), rng.normal(size=(3, 2, 4))
    t = torch.distributions.LowRankMultivariateNormal(torch.tensor(loc), torch.tensor(W),
                                                      torch.tensor(d))
    ew = ember.tensor(W, requires_grad=True)
    e = ember.distributions.LowRankMultivariateNormal(ember.tensor(loc), ew, ember.tensor(d))
    assert tuple(e.batch_shape) == (2,) and tuple(e.event_shape) == (4,)
    for attr in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        np.testing.assert_allclose(getattr(e, attr).detach().numpy(),
                                   getattr(t, attr).numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e.log_prob(ember.tensor(x)).detach().numpy(),
                               t.log_prob(torch.tensor(x)).numpy(), rtol=1e-10)
    np.testing.assert_allclose(e.entropy().detach().numpy(), t.entropy().numpy(), rtol=1e-10)
    full = ember.distributions.MultivariateNormal(ember.tensor(loc),
                                                  covariance_matrix=e.covariance_matrix.detach())
    np.testing.assert_allclose(e.log_prob(ember.tensor(x)).detach().numpy(),
                               full.log_prob(ember.tensor(x)).numpy(), rtol=1e-10)
    assert tuple(e.rsample((5,)).shape) == (5, 2, 4)
    assert tuple(e.expand((3, 2)).log_prob(ember.tensor(x)).shape) == (3, 2)
    e.log_prob(ember.tensor(x)).sum().backward()  # differentiable in the factor
    tw = torch.tensor(W, requires_grad=True)
    torch.distributions.LowRankMultivariateNormal(torch.tensor(loc), tw, torch.tensor(d)) \
        .log_prob(torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-9)
    with pytest.raises(ValueError, match="cov_factor must be a batch of matrices"):
        ember.distributions.LowRankMultivariateNormal(ember.zeros(3), ember.ones(2, 1),
                                                      ember.ones(3))


# ---- ember.hub / ember.utils.model_zoo --------------------------------------------------------
def test_hub_downloads_once_and_loads_a_torch_checkpoint(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import hashlib

    import ember.hub

    src = tmp_path / "src" / "net.pth"
    src.parent.mkdir()
    torch.save(torch.nn.Linear(3, 2).state_dict(), src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    named = src.with_name(f"net-{digest[:8]}.pth")
    src.rename(named)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    assert ember.hub.get_dir() == str(tmp_path / "home" / "hub")
    url = named.as_uri()
    sd = ember.hub.load_state_dict_from_url(url, progress=False, check_hash=True)
    cached = tmp_path / "home" / "hub" / "checkpoints" / named.name
    assert cached.exists() and sorted(sd) == ["bias", "weight"]
    m = ember.nn.Linear(3, 2)
    m.load_state_dict(sd)
    named.unlink()  # cached: no second download
    from ember.utils import model_zoo

    again = model_zoo.load_url(url, progress=False)
    assert ember.equal(again["weight"], sd["weight"])
    bad = tmp_path / "src" / "other-deadbeef.pth"
    torch.save({"a": torch.ones(1)}, bad)
    with pytest.raises(RuntimeError, match="invalid hash value"):
        ember.hub.load_state_dict_from_url(bad.as_uri(), model_dir=str(tmp_path / "m"),
                                           progress=False, check_hash=True)
    assert not (tmp_path / "m" / "other-deadbeef.pth").exists()
    with pytest.raises(NotImplementedError, match="hubconf.py"):
        ember.hub.load("pytorch/vision", "resnet18")
