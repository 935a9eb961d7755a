"""Optimizers: 20-step trajectories equal PyTorch's, bit-exact resume, groups, bad input."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import nn, optim
from nn_helpers import to_np, torch

# (optimizer name, constructor kwargs) covering every option of every optimizer
CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.01, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.2)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.5, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1, betas=(0.8, 0.95))),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.02, etas=(0.3, 1.5), step_sizes=(1e-3, 0.05), maximize=True)),
    ("ASGD", dict(lr=0.01)),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.1)),
    ("ASGD", dict(lr=0.02, t0=0, maximize=True)),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]
TOL = {"float64": dict(rtol=1e-10, atol=1e-12), "float32": dict(rtol=2e-5, atol=2e-6)}


def _problem(dtype: str):
    rng = np.random.default_rng(0)
    return {
        "w": rng.standard_normal((5, 4)).astype(dtype),
        "b": rng.standard_normal(5).astype(dtype),
        "x": rng.standard_normal((8, 4)).astype(dtype),
        "y": rng.standard_normal((8, 5)).astype(dtype),
    }


def _ember_params(p):
    return [nn.Parameter(ember.from_numpy(p["w"].copy())), nn.Parameter(ember.from_numpy(p["b"].copy()))]


def _ember_loss(params, p):
    w, b = params
    x, y = ember.from_numpy(p["x"]), ember.from_numpy(p["y"])
    return ((x.matmul(w.t()) + b - y) ** 2).mean()


def _torch_loss(params, p):
    w, b = params
    x, y = torch.from_numpy(p["x"]), torch.from_numpy(p["y"])
    return ((x @ w.t() + b - y) ** 2).mean()


def _ember_steps(opt, params, p, n):
    for _ in range(n):
        opt.zero_grad()
        _ember_loss(params, p).backward()
        opt.step()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_trajectory_matches_torch(name, kwargs, dtype):
    pytest.importorskip("torch")
    p = _problem(dtype)
    eparams = _ember_params(p)
    tparams = [torch.tensor(p["w"], requires_grad=True), torch.tensor(p["b"], requires_grad=True)]
    eopt = getattr(optim, name)(eparams, **kwargs)
    topt = getattr(torch.optim, name)(tparams, **kwargs)
    for step in range(20):
        eopt.zero_grad()
        topt.zero_grad()
        _ember_loss(eparams, p).backward()
        _torch_loss(tparams, p).backward()
        eopt.step()
        topt.step()
        for e, t in zip(eparams, tparams):
            np.testing.assert_allclose(
                to_np(e), t.detach().numpy(), **TOL[dtype], err_msg=f"{name} step {step}"
            )
    # the same state entries as PyTorch's
    es, ts = eopt.state_dict()["state"], topt.state_dict()["state"]
    assert sorted(es) == sorted(ts)
    for k in ts:
        assert sorted(es[k]) == sorted(ts[k])
        for key, v in ts[k].items():
            if isinstance(v, torch.Tensor) and v.ndim > 0:
                np.testing.assert_allclose(to_np(es[k][key]), v.numpy(), **TOL[dtype])


def _snapshot(sd):
    """A deep copy of an optimizer state dict (what a checkpoint would hold)."""
    def copy(v):
        if isinstance(v, ember.Tensor):
            return v.detach().clone()
        if isinstance(v, dict):
            return {k: copy(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(copy(x) for x in v)
        return v

    return copy(sd)


@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_state_dict_resume_is_bit_exact(name, kwargs):
    p = _problem("float32")
    params = _ember_params(p)
    opt = getattr(optim, name)(params, **kwargs)
    _ember_steps(opt, params, p, 7)
    saved_params = [q.detach().clone() for q in params]
    saved = _snapshot(opt.state_dict())
    _ember_steps(opt, params, p, 8)

    resumed = [nn.Parameter(q.clone()) for q in saved_params]
    opt2 = getattr(optim, name)(resumed, lr=123.0)  # hyper-parameters come from the state dict
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == kwargs.get("lr", opt.defaults["lr"])
    _ember_steps(opt2, resumed, p, 8)
    for a, b in zip(params, resumed):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    # loading copied the tensors: the snapshot is untouched by the resumed steps
    again = _snapshot(saved)
    for k, st in saved["state"].items():
        for key, v in st.items():
            if isinstance(v, ember.Tensor):
                np.testing.assert_array_equal(to_np(v), to_np(again["state"][k][key]))


def test_state_dict_layout():
    a, b = nn.Parameter(ember.ones(2)), nn.Parameter(ember.ones(3))
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.1}], lr=0.01)
    a.grad, b.grad = ember.ones(2), ember.ones(3)
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert [g["lr"] for g in sd["param_groups"]] == [0.01, 0.1]
    assert sorted(sd["state"][1]) == ["exp_avg", "exp_avg_sq", "step"]
    assert sd["state"][1]["step"].item() == 1.0
    with pytest.raises(ValueError, match="parameter groups"):
        optim.Adam([a]).load_state_dict(sd)
    with pytest.raises(ValueError, match="has 1 parameters in the state dict but 2"):
        optim.Adam([{"params": [a, b]}, {"params": [nn.Parameter(ember.ones(1))]}]).load_state_dict(sd)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_param_groups_match_torch(dtype):
    pytest.importorskip("torch")
    p = _problem(dtype)
    w, b = _ember_params(p)
    tw, tb = torch.tensor(p["w"], requires_grad=True), torch.tensor(p["b"], requires_grad=True)
    eopt = optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.01, "momentum": 0.5}], lr=0.1)
    topt = torch.optim.SGD([{"params": [tw]}, {"params": [tb], "lr": 0.01, "momentum": 0.5}], lr=0.1)
    extra = nn.Parameter(ember.zeros(1))
    eopt.add_param_group({"params": extra, "lr": 0.5})
    assert [g["lr"] for g in eopt.param_groups] == [0.1, 0.01, 0.5]
    for _ in range(5):
        for o in (eopt, topt):
            o.zero_grad()
        _ember_loss([w, b], p).backward()
        _torch_loss([tw, tb], p).backward()
        eopt.step()
        topt.step()
    np.testing.assert_allclose(to_np(w), tw.detach().numpy(), **TOL[dtype])
    np.testing.assert_allclose(to_np(b), tb.detach().numpy(), **TOL[dtype])
    assert extra.grad is None and extra.item() == 0.0  # no grad: untouched


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lbfgs_matches_torch(line_search, dtype):
    pytest.importorskip("torch")
    p = _problem(dtype)
    eparams = _ember_params(p)
    tparams = [torch.tensor(p["w"], requires_grad=True), torch.tensor(p["b"], requires_grad=True)]
    kw = dict(lr=0.5, max_iter=6, history_size=4, line_search_fn=line_search)
    eopt, topt = optim.LBFGS(eparams, **kw), torch.optim.LBFGS(tparams, **kw)

    def eclosure():
        eopt.zero_grad()
        loss = _ember_loss(eparams, p)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = _torch_loss(tparams, p)
        loss.backward()
        return loss

    # float32: the first gradients already differ by an ulp (other summation orders) and L-BFGS
    # amplifies that as it converges, so float32 checks two steps loosely; float64 is the tight one
    tol = TOL[dtype] if dtype == "float64" else dict(rtol=1e-3, atol=2e-4)
    for _ in range(4 if dtype == "float64" else 2):
        el, tl = eopt.step(eclosure), topt.step(tclosure)
        np.testing.assert_allclose(el.item(), tl.item(), **tol)
        for e, t in zip(eparams, tparams):
            np.testing.assert_allclose(to_np(e), t.detach().numpy(), **tol)
    es, ts = eopt.state[eparams[0]], topt.state[tparams[0]]
    if dtype == "float64":
        assert es["func_evals"] == ts["func_evals"] and es["n_iter"] == ts["n_iter"]


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_state_dict_resume(line_search):
    # issue 15 (time-series program): L-BFGS keeps flat vectors over all parameters (d,
    # old_dirs, prev_flat_grad) under the first parameter's state; loading them back must not
    # demand that parameter's shape, and the resumed run continues exactly
    p = _problem("float64")
    params = _ember_params(p)
    kw = dict(lr=0.5, max_iter=5, history_size=3, line_search_fn=line_search)
    opt = optim.LBFGS(params, **kw)

    def closure_for(o, ps):
        def closure():
            o.zero_grad()
            loss = _ember_loss(ps, p)
            loss.backward()
            return loss
        return closure

    opt.step(closure_for(opt, params))
    saved_params = [q.detach().clone() for q in params]
    saved = _snapshot(opt.state_dict())
    assert tuple(saved["state"][0]["d"].shape) == (sum(q.numel() for q in params),)
    opt.step(closure_for(opt, params))

    resumed = [nn.Parameter(q.clone()) for q in saved_params]
    opt2 = optim.LBFGS(resumed, **kw)
    opt2.load_state_dict(saved)
    assert opt2.state[resumed[0]]["n_iter"] == saved["state"][0]["n_iter"]
    opt2.step(closure_for(opt2, resumed))
    for a, b in zip(params, resumed):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    # per-parameter optimizers still refuse state of the wrong shape
    sd = optim.Adam(resumed).state_dict()
    sd["state"] = {0: {"step": ember.tensor(1.0), "exp_avg": ember.zeros(7),
                       "exp_avg_sq": ember.zeros(7)}}
    with pytest.raises(ValueError, match="state 'exp_avg' has shape"):
        optim.Adam(resumed).load_state_dict(sd)


def test_lbfgs_rejects_groups_and_needs_closure():
    a, b = nn.Parameter(ember.ones(1)), nn.Parameter(ember.ones(1))
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    with pytest.raises(TypeError):
        optim.LBFGS([a]).step()
    with pytest.raises(ValueError, match="strong_wolfe"):
        optim.LBFGS([a], line_search_fn="armijo")


# ---- bad input --------------------------------------------------------------------------------
def test_rejects_non_leaf_duplicates_and_bad_params():
    w = nn.Parameter(ember.ones(2))
    with pytest.raises(ValueError, match="non-leaf Tensor.*shape \\(2,\\)"):
        optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="same parameter more than once"):
        optim.Adam([w, w])
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.Adam([{"params": [w]}, {"params": [w]}])
    with pytest.raises(TypeError, match="single Tensor"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors.*int"):
        optim.SGD([w, 3], lr=0.1)
    with pytest.raises(TypeError, match="ordered collection"):
        optim.SGD({w}, lr=0.1)


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        ("SGD", dict(lr=-0.1), "invalid learning rate -0.1"),
        ("SGD", dict(lr=0.1, momentum=-1), "momentum"),
        ("SGD", dict(lr=0.1, nesterov=True), "Nesterov"),
        ("Adam", dict(lr=-1.0), "invalid learning rate"),
        ("Adam", dict(betas=(1.0, 0.999)), "beta parameter at index 0: 1.0"),
        ("AdamW", dict(betas=(0.9, -0.1)), "index 1"),
        ("Adam", dict(eps=-1e-8), "eps"),
        ("Adam", dict(weight_decay=-0.1), "weight_decay"),
        ("RMSprop", dict(alpha=-0.5), "alpha"),
        ("Adagrad", dict(lr_decay=-1), "lr_decay"),
        ("Adadelta", dict(rho=1.5), "rho"),
        ("Adamax", dict(betas=(0.9, 1.0)), "index 1"),
        ("NAdam", dict(momentum_decay=-1), "momentum_decay"),
        ("RAdam", dict(betas=(0.9, 2.0)), "index 1"),
        ("LBFGS", dict(lr=-1), "invalid learning rate"),
        ("Rprop", dict(lr=-0.1), "invalid learning rate"),
        ("Rprop", dict(etas=(1.5, 1.2)), "invalid eta values 1.5, 1.2"),
        ("Rprop", dict(etas=(0.5,)), "etas must be a pair"),
        ("Rprop", dict(step_sizes=(1.0, 0.1)), "step_sizes must be a pair 0 <= min <= max"),
        ("ASGD", dict(weight_decay=-1), "weight_decay"),
        ("ASGD", dict(lr=-1), "invalid learning rate"),
    ],
)
def test_invalid_hyperparameters(name, kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        getattr(optim, name)([nn.Parameter(ember.ones(1))], **kwargs)
    assert str(info.value).startswith(name + ":")


def test_invalid_group_hyperparameters_and_required():
    w, b = nn.Parameter(ember.ones(1)), nn.Parameter(ember.ones(1))
    with pytest.raises(ValueError, match="invalid learning rate"):
        optim.SGD([{"params": [w], "lr": -1}], lr=0.1)
    opt = optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="beta"):
        optim.Adam([w]).add_param_group({"params": [b], "betas": (0.9, 1.5)})
    assert len(opt.param_groups) == 1


def test_zero_grad_and_hooks():
    w = nn.Parameter(ember.ones(2))
    opt = optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert w.grad is not None and w.grad.abs().sum().item() == 0.0
    opt.zero_grad()
    assert w.grad is None
    events = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: events.append("pre"))
    h2 = opt.register_step_post_hook(lambda o, a, k: events.append("post"))
    opt.step()
    assert events == ["pre", "post"]
    h1.remove()
    h2.remove()
    opt.step()
    assert events == ["pre", "post"]


def test_step_with_closure_returns_loss():
    w = nn.Parameter(ember.tensor([2.0]))
    opt = optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 4.0
    assert w.item() == 1.0


def test_named_parameters_are_accepted():
    m = nn.Linear(2, 2)
    opt = optim.SGD(m.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]


def _adafactor_run(lib, steps=6, **kw):
    r = np.random.default_rng(0)
    shapes = [(5, 3), (4,), (2, 3, 4), (1,)]
    ps = [lib.nn.Parameter(lib.tensor(r.normal(size=s).astype(np.float32))) for s in shapes]
    opt = lib.optim.Adafactor(ps, **kw)
    for _ in range(steps):
        loss = sum((p.sin() * (i + 1)).pow(2).sum() for i, p in enumerate(ps))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return ps, opt


@pytest.mark.parametrize("kw", [{}, {"lr": 0.1, "weight_decay": 0.1},
                                {"maximize": True, "d": 1.5, "eps": (1e-5, 1e-2)},
                                {"beta2_decay": -0.5, "lr": 0.5}])
def test_adafactor_matches_torch(kw):
    if torch is None or not hasattr(torch.optim, "Adafactor"):
        pytest.skip("torch.optim.Adafactor needed")
    got, opt = _adafactor_run(ember, **kw)
    want, topt = _adafactor_run(torch, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(to_np(g.detach()), w.detach().numpy(), rtol=1e-5, atol=1e-6)
    for i in range(4):  # the factored state: row / column factors for matrices (batched too)
        mine, theirs = opt.state_dict()["state"][i], topt.state_dict()["state"][i]
        assert sorted(mine) == sorted(theirs)
        for k in mine:
            assert tuple(mine[k].shape) == tuple(theirs[k].shape), k


def test_adafactor_state_dict_round_trip_and_bad_arguments():
    ps, opt = _adafactor_run(ember, steps=3)
    clone = [nn.Parameter(p.detach().clone()) for p in ps]
    opt2 = optim.Adafactor(clone)
    opt2.load_state_dict(opt.state_dict())
    for group in (ps, clone):
        for p in group:
            p.grad = p.detach().cos()
    opt.step()
    opt2.step()
    for a, b in zip(ps, clone):
        assert ember.equal(a, b)
    w = [nn.Parameter(ember.ones(2))]
    for kw, msg in [({"lr": -1.0}, "learning rate"), ({"beta2_decay": 0.5}, "beta2_decay"),
                    ({"eps": (None, -1.0)}, "epsilon2"), ({"d": 0.5}, "clipping threshold"),
                    ({"weight_decay": -0.1}, "weight_decay"), ({"eps": 1e-3}, "pair")]:
        with pytest.raises(ValueError, match=msg):
            optim.Adafactor(w, **kw)


def _muon_run(lib, steps=5, **kw):
    r = np.random.default_rng(0)
    ps = [lib.nn.Parameter(lib.tensor(r.normal(size=s).astype(np.float32)))
          for s in [(5, 3), (3, 7), (4, 4)]]
    opt = lib.optim.Muon(ps, **kw)
    for _ in range(steps):
        loss = sum((p.sin() * (i + 1)).pow(2).sum() for i, p in enumerate(ps))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return ps, opt


@pytest.mark.parametrize("kw", [{}, {"lr": 0.02, "weight_decay": 0.0},
                                {"nesterov": False, "momentum": 0.9, "lr": 0.05},
                                {"adjust_lr_fn": "match_rms_adamw", "lr": 0.01},
                                {"ns_steps": 2, "eps": 1e-3}])
def test_muon_matches_torch(kw):
    # bfloat16 Newton-Schulz orthogonalization of the (Nesterov) momentum, shape-adjusted lr
    if torch is None or not hasattr(torch.optim, "Muon"):
        pytest.skip("torch.optim.Muon needed")
    got, opt = _muon_run(ember, **kw)
    want, _ = _muon_run(torch, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(to_np(g.detach()), w.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert sorted(opt.state[got[0]]) == ["momentum_buffer", "step"]


def test_muon_orthogonalizes_and_checks_arguments():
    from ember.optim.muon import _orthogonalize

    g = ember.tensor(np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32))
    o = _orthogonalize(g, (3.4445, -4.775, 2.0315), 5, 1e-7).float()
    s = np.linalg.svd(to_np(o), compute_uv=False)
    assert o.shape == (6, 4) and ((s > 0.5) & (s < 1.5)).all()  # singular values near 1
    with pytest.raises(ValueError, match="only supports 2D parameters"):
        optim.Muon([nn.Parameter(ember.ones(3))])
    w = [nn.Parameter(ember.ones(2, 2))]
    for kw, msg in [({"lr": -1.0}, "learning rate"), ({"momentum": -0.5}, "momentum"),
                    ({"adjust_lr_fn": "x"}, "adjust_lr_fn"), ({"ns_steps": -1}, "ns_steps")]:
        with pytest.raises(ValueError, match=msg):
            optim.Muon(w, **kw)
