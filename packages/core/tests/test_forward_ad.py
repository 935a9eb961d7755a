"""Forward-mode AD (ember.autograd.forward_ad): every op with a `tangent:` formula is checked
three ways on float64 inputs -- the forward-mode JVP against the Jacobian built by reverse mode
(J @ v, one backward pass per output element), against central finite differences, and
against torch.autograd.forward_ad where PyTorch is installed -- with contiguous and strided
primals. Then in-place ops, views, indexing, levels and the errors.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import ember
import ember.autograd.forward_ad as fwAD
import numpy as np
import pytest
from core_helpers import torch
from grad_table import lib

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class FwCase:
    name: str  # "<op>: detail"; the op part is matched against the YAML entries with a tangent
    fn: Callable  # ember (or torch) tensors -> tensor or tuple of tensors
    inputs: Callable[[np.random.Generator], list]  # float64 arrays are differentiable
    reverse: bool = True  # compare with reverse mode (the op has a reverse formula)
    noncontig: bool = True
    rtol: float = 1e-7
    atol: float = 1e-9
    fd_eps: float = 1e-6  # finite-difference step
    torch: bool = True  # compare with torch.autograd.forward_ad


def n(*shape):
    return lambda rng: [rng.standard_normal(shape)]


def pos(*shape):
    return lambda rng: [rng.uniform(0.5, 2.0, shape)]


def nn(s1, s2):
    return lambda rng: [rng.standard_normal(s1), rng.standard_normal(s2)]


def fresh(x):
    """A non-leaf copy, so in-place ops are allowed under reverse mode too."""
    return x * 1.0


CASES = [
    # pointwise, unary
    *[FwCase(f"{op}: 3x4", (lambda op: lambda a: getattr(a, op)())(op), n(3, 4))
      for op in ["exp", "exp2", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "neg", "abs",
                 "square", "relu"]],
    *[FwCase(f"{op}: positive", (lambda op: lambda a: getattr(a, op)())(op), pos(2, 3))
      for op in ["log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal"]],
    FwCase("exp: 0-d", lambda a: a.exp(), n()),
    FwCase("exp: empty", lambda a: a.exp(), n(0, 3), reverse=False),
    # pointwise, binary (broadcasting, numbers, alpha)
    FwCase("add: same shape", lambda a, b: a + b, nn((3, 4), (3, 4))),
    FwCase("add: broadcast alpha", lambda a, b: lib(a).add(a, b, alpha=2.5), nn((3, 1), (4,))),
    FwCase("add: number", lambda a: a + 2.0, n(3)),
    FwCase("sub: broadcast", lambda a, b: a - b, nn((2, 3), (3,))),
    FwCase("sub: alpha", lambda a, b: a.sub(b, alpha=-1.5), nn((2, 3), (2, 3))),
    FwCase("rsub: number", lambda a: 3.0 - a, n(4)),
    FwCase("rsub: tensor", lambda a, b: lib(a).rsub(a, b, alpha=2), nn((2, 3), (3,))),
    FwCase("mul: broadcast", lambda a, b: a * b, nn((3, 4), (4,))),
    FwCase("mul: number", lambda a: a * -2.0, n(2, 2)),
    FwCase("mul: 0-d", lambda a, b: a * b, nn((), (3,))),
    FwCase("div: broadcast", lambda a, b: a / b, lambda rng: [rng.standard_normal((2, 3)),
                                                          rng.uniform(1, 2, (3,))]),
    FwCase("div: number", lambda a: a / 4.0, n(3)),
    FwCase("div: floor", lambda a, b: a.div(b, rounding_mode="floor"),
           lambda rng: [rng.uniform(0.1, 0.9, 3) + np.arange(3), rng.uniform(1.2, 1.8, 3)],
           noncontig=False),
    FwCase("true_divide: tensors", lambda a, b: a.true_divide(b),
           lambda rng: [rng.standard_normal(3), rng.uniform(1, 2, 3)]),
    FwCase("pow: tensor exponent", lambda a, b: a ** b,
           lambda rng: [rng.uniform(0.5, 2, (2, 3)), rng.standard_normal((2, 3))]),
    FwCase("pow: number exponent", lambda a: a ** 3, n(2, 3)),
    FwCase("pow: broadcast", lambda a, b: a.pow(b), lambda rng: [rng.uniform(0.5, 2, (2, 3)),
                                                             rng.standard_normal(3)]),
    FwCase("rpow: number base", lambda a: 2.0 ** a, n(3)),
    FwCase("clamp: numbers", lambda a: a.clamp(-0.5, 0.5), n(3, 4)),
    FwCase("clamp: min only", lambda a: a.clamp(min=0.1), n(5)),
    FwCase("clamp: constant tensor bounds",
           lambda a, lo, hi: a.clamp(lo, hi),
           lambda rng: [rng.standard_normal((2, 3)), np.full(3, -0.3, dtype=np.float32),
                        np.full(3, 0.4, dtype=np.float32)]),
    FwCase("clip: numbers", lambda a: a.clip(-0.2, 0.7), n(6)),
    FwCase("where: tensors", lambda c, a, b: lib(a).where(c, a, b),
           lambda rng: [rng.standard_normal((2, 3)) > 0, rng.standard_normal((2, 3)),
                        rng.standard_normal(3)]),
    FwCase("where: number", lambda c, a: lib(a).where(c, a, 0.5),
           lambda rng: [rng.standard_normal(4) > 0, rng.standard_normal(4)]),
    FwCase("addcmul: value", lambda s, a, b: s.addcmul(a, b, value=0.5),
           lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3)),
                        rng.standard_normal(3)]),
    FwCase("addcdiv: value", lambda s, a, b: s.addcdiv(a, b, value=-2),
           lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3)),
                        rng.uniform(1, 2, (2, 3))]),
    # reductions
    FwCase("sum: all", lambda a: a.sum(), n(3, 4)),
    FwCase("sum: dim", lambda a: a.sum(1), n(3, 4)),
    FwCase("sum: dims keepdim", lambda a: a.sum((0, -1), keepdim=True), n(2, 3, 4)),
    FwCase("sum: 0-d", lambda a: a.sum(), n()),
    FwCase("mean: all", lambda a: a.mean(), n(3, 4)),
    FwCase("mean: negative dim", lambda a: a.mean(-1), n(3, 4)),
    FwCase("mean: keepdim", lambda a: a.mean(0, keepdim=True), n(3, 4)),
    # linear algebra
    FwCase("matmul: 2d @ 2d", lambda a, b: a @ b, nn((2, 3), (3, 4))),
    FwCase("matmul: 1d @ 1d", lambda a, b: a @ b, nn((3,), (3,))),
    FwCase("matmul: 2d @ 1d", lambda a, b: a.matmul(b), nn((2, 3), (3,))),
    FwCase("matmul: 1d @ 3d", lambda a, b: a.matmul(b), nn((3,), (2, 3, 2))),
    FwCase("matmul: batch broadcast", lambda a, b: a @ b, nn((2, 1, 2, 3), (3, 3, 2))),
    FwCase("matmul: one constant", lambda a, b: a @ b,
           lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((3, 2)).astype(np.float32)
                        .astype(np.float64).reshape(3, 2)]),
    FwCase("mm: 2d", lambda a, b: a.mm(b), nn((3, 2), (2, 4))),
    FwCase("bmm: 3d", lambda a, b: a.bmm(b), nn((2, 3, 2), (2, 2, 3))),
    # joining and splitting
    FwCase("cat: dim 1", lambda a, b: lib(a).cat([a, b], 1), nn((2, 3), (2, 2))),
    FwCase("cat: three, negative dim", lambda a, b, c: lib(a).cat([a, b, c], -2),
           lambda rng: [rng.standard_normal((1, 3)), rng.standard_normal((2, 3)),
                        rng.standard_normal((1, 3))]),
    FwCase("split: int", lambda a: a.split(2, 1), n(3, 5)),
    FwCase("split: sizes", lambda a: a.split([1, 3], 0), n(4, 2)),
    FwCase("split_with_sizes: dim 1", lambda a: a.split_with_sizes([2, 1], 1), n(2, 3)),
    FwCase("chunk: dim 0", lambda a: a.chunk(2, 0), n(3, 2)),
    FwCase("unbind: dim 1", lambda a: a.unbind(1), n(3, 2)),
    FwCase("unbind: dim 0", lambda a: a.unbind(), n(2, 3)),
    # copies and conversions
    FwCase("clone: strided", lambda a: a.clone(), n(3, 4)),
    FwCase("contiguous: transposed", lambda a: a.t().contiguous(), n(3, 4)),
    FwCase("_to_dtype: float32", lambda a: a.to(ember.float32 if isinstance(a, ember.Tensor)
                                                else torch.float32),
           n(3), rtol=1e-6, atol=1e-6, fd_eps=0.1),  # linear: a large step is exact
    FwCase("copy_: into a fresh tensor", lambda a, b: fresh(a).copy_(b), nn((2, 3), (2, 3))),
    FwCase("copy_: broadcast source", lambda a, b: fresh(a).copy_(b), nn((2, 3), (3,))),
    FwCase("fill_: 0-d tensor value", lambda a, v: fresh(a).fill_(v) * a, nn((2, 3), ())),
    FwCase("zero_: then add", lambda a: fresh(a).zero_() + a * 2, n(3)),
    # views
    FwCase("view: reshape", lambda a: a.view(4, 3), n(3, 4), noncontig=False),
    FwCase("view_as: other", lambda a, b: a.view_as(b), lambda rng: [rng.standard_normal((2, 3)),
                                                                 rng.standard_normal(6)],
           noncontig=False),
    FwCase("reshape: -1", lambda a: a.reshape(-1), n(3, 4)),
    FwCase("reshape_as: other", lambda a, b: a.reshape_as(b), nn((2, 3), (3, 2))),
    FwCase("transpose: 0 2", lambda a: a.transpose(0, 2), n(2, 3, 4)),
    FwCase("t: 2d", lambda a: a.t(), n(2, 3)),
    FwCase("permute: 3d", lambda a: a.permute(2, 0, 1), n(2, 3, 4)),
    FwCase("squeeze: all", lambda a: a.squeeze(), n(1, 3, 1)),
    FwCase("squeeze: dim", lambda a: a.squeeze(0), n(1, 3)),
    FwCase("unsqueeze: -1", lambda a: a.unsqueeze(-1), n(2, 3)),
    FwCase("expand: 2d", lambda a: a.expand(4, 3) * 1.0, n(1, 3)),
    FwCase("expand_as: other", lambda a, b: a.expand_as(b) + b, nn((3, 1), (3, 2))),
    FwCase("broadcast_to: 3d", lambda a: a.broadcast_to((2, 2, 3)) * 1.0, n(3)),
    FwCase("flatten: middle", lambda a: a.flatten(1, 2), n(2, 3, 2)),
    # chains mixing several ops
    FwCase("chain: mlp layer", lambda x, w, b: ((x @ w + b).tanh() ** 2).mean(0),
           lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal((3, 2)),
                        rng.standard_normal(2)]),
    FwCase("chain: softmax-like", lambda x: (x.exp() / x.exp().sum(-1, keepdim=True)).log(),
           n(2, 4)),
    # in-place ops on a dual tensor
    FwCase("mul: in place", lambda a, b: fresh(a).mul_(b), nn((2, 3), (3,))),
    FwCase("add: in place operator", lambda a, b: _iadd(fresh(a), b), nn((2, 3), (2, 3))),
    FwCase("pow: in place (reads the result)", lambda a, b: fresh(a).pow_(b),
           lambda rng: [rng.uniform(0.5, 2, 3), rng.standard_normal(3)]),
    FwCase("sqrt: in place", lambda a: fresh(a).sqrt_(), pos(3)),
    FwCase("relu: in place", lambda a: fresh(a).relu_(), n(5)),
    # PyTorch reads the already-updated tangent of `a` as `other`'s here (its result disagrees
    # with its own reverse mode); ours matches reverse mode and finite differences.
    FwCase("mul: in place by itself", lambda a: _self_mul(fresh(a)), n(4), torch=False),
    FwCase("sigmoid: in place", lambda a: fresh(a).sigmoid_(), n(4)),
]


def _iadd(a, b):
    a += b
    return a


def _self_mul(a):
    return a.mul_(a)


def _tensors(arrays, noncontig: bool):
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype == np.float64 and noncontig and a.size > 1:
            big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
            big[..., ::2] = a
            t = ember.tensor(big)[..., ::2]
            assert not t.is_contiguous()
            out.append(t)
        elif isinstance(a, np.ndarray):
            out.append(ember.tensor(a))
        else:
            out.append(a)
    return out


def _diff_idx(arrays):
    return [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype == np.float64]


def _as_list(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _floating(r):
    return [x for x in _as_list(r) if x.dtype in (ember.float64, ember.float32)]


def forward_jvp(fn, xs, idx, tangents):
    """fn's outputs and their tangents, in forward mode."""
    with fwAD.dual_level():
        full = list(xs)
        for i, v in zip(idx, tangents):
            full[i] = fwAD.make_dual(xs[i], v)
        outs = _floating(fn(*full))
        res = []
        for o in outs:
            p, t = fwAD.unpack_dual(o)
            res.append((p.detach().numpy().copy(),
                        None if t is None else t.detach().numpy().copy()))
    return res


def reverse_jvp(fn, xs, idx, tangents):
    """J @ v from the Jacobian that reverse mode gives, one row per output element."""
    leaves = [xs[i].detach().requires_grad_(True) for i in idx]
    full = list(xs)
    for i, t in zip(idx, leaves):
        full[i] = t
    outs = _floating(fn(*full))
    res = []
    for o in outs:
        jv = np.zeros(int(np.prod(o.shape, dtype=np.int64)))
        if o.requires_grad:
            for k in range(jv.size):
                onehot = np.zeros(jv.size)
                onehot[k] = 1.0
                g = ember.tensor(onehot.reshape(tuple(o.shape))).to(o.dtype)
                rows = ember.autograd.grad(o, leaves, g, retain_graph=True, allow_unused=True)
                jv[k] = sum(float((r.double() * v.double()).sum().item())
                            for r, v in zip(rows, tangents) if r is not None)
        res.append(jv.reshape(tuple(o.shape)))
    return res


def finite_diff_jvp(fn, xs, idx, tangents, eps=1e-6):
    def at(sign):
        full = list(xs)
        for i, v in zip(idx, tangents):
            full[i] = xs[i] + sign * eps * v
        return [o.double().numpy() for o in _floating(fn(*full))]

    return [(p - m) / (2 * eps) for p, m in zip(at(1.0), at(-1.0))]


def _zeros_if_none(t, like):
    return np.zeros(like.shape) if t is None else t


def run_fw_case(case: FwCase, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    arrays = case.inputs(rng)
    idx = _diff_idx(arrays)
    vs = [rng.standard_normal(arrays[i].shape) for i in idx]
    tangents = [ember.tensor(v) for v in vs]
    for nc in ([False, True] if case.noncontig else [False]):
        xs = _tensors(arrays, nc)
        fw = forward_jvp(case.fn, xs, idx, tangents)
        plain = [o.detach().numpy() for o in _floating(case.fn(*xs))]
        assert len(fw) == len(plain), f"{case.name}: {len(fw)} outputs in forward mode"
        for k, ((p, t), q) in enumerate(zip(fw, plain)):
            np.testing.assert_allclose(p, q, err_msg=f"{case.name}: primal {k} (noncontig={nc})")
            assert t is None or t.shape == p.shape, f"{case.name}: tangent {k} shape"
        fd = finite_diff_jvp(case.fn, xs, idx, tangents, case.fd_eps)
        for k, ((p, t), f) in enumerate(zip(fw, fd)):
            np.testing.assert_allclose(_zeros_if_none(t, p), f, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{case.name}: tangent {k} vs finite differences "
                                               f"(noncontig={nc})")
        if case.reverse:
            rv = reverse_jvp(case.fn, xs, idx, tangents)
            for k, ((p, t), r) in enumerate(zip(fw, rv)):
                np.testing.assert_allclose(_zeros_if_none(t, p), r, rtol=case.rtol,
                                           atol=case.atol,
                                           err_msg=f"{case.name}: tangent {k} vs reverse mode "
                                                   f"(noncontig={nc})")
    if torch is None or not case.torch:
        return
    tfw = torch.autograd.forward_ad
    txs = [torch.tensor(a) if isinstance(a, np.ndarray) else a for a in arrays]
    with tfw.dual_level():
        full = list(txs)
        for i, v in zip(idx, vs):
            full[i] = tfw.make_dual(txs[i], torch.tensor(v))
        touts = [o for o in _as_list(case.fn(*full)) if o.is_floating_point()]
        tres = [tfw.unpack_dual(o) for o in touts]
        ours = forward_jvp(case.fn, _tensors(arrays, False), idx, tangents)
        assert len(tres) == len(ours), f"{case.name}: {len(ours)} outputs vs torch's {len(tres)}"
        for k, ((p, t), tp) in enumerate(zip(ours, tres)):
            tt = np.zeros(p.shape) if tp.tangent is None else tp.tangent.double().numpy()
            np.testing.assert_allclose(_zeros_if_none(t, p), tt, rtol=case.rtol, atol=case.atol,
                                       err_msg=f"{case.name}: tangent {k} vs torch")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_tangent(case):
    run_fw_case(case)


def test_every_op_with_a_tangent_has_a_case():
    sys.path.insert(0, str(ROOT / "tools" / "codegen"))
    try:
        from schema import load_ops
    finally:
        sys.path.pop(0)
    ops = {op.name for g in load_ops(ROOT / "packages/core/ops").values() for op in g if op.tangent}
    covered = {c.name.split(":")[0] for c in CASES}
    assert ops - covered == set(), f"ops with a tangent formula but no test case: {ops - covered}"


def test_runner_catches_a_wrong_tangent():
    # A function whose forward mode is right but which differs from torch's on purpose.
    bad = FwCase("bad", lambda a: a * 2.0 if isinstance(a, ember.Tensor) else a * 3.0, n(3),
                 noncontig=False)
    pytest.importorskip("torch")
    with pytest.raises(AssertionError):
        run_fw_case(bad)


# ---- torch.func.jvp -------------------------------------------------------------------------


def test_against_torch_func_jvp():
    torch_ = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x, w, v1, v2 = (rng.standard_normal(s) for s in [(3, 4), (4, 2), (3, 4), (4, 2)])

    def f(a, b):
        return (a @ b).sigmoid().sum(0) * 3 - a.mean()

    _, expected = torch_.func.jvp(f, (torch_.tensor(x), torch_.tensor(w)),
                                  (torch_.tensor(v1), torch_.tensor(v2)))
    with fwAD.dual_level():
        out = f(fwAD.make_dual(ember.tensor(x), ember.tensor(v1)),
                fwAD.make_dual(ember.tensor(w), ember.tensor(v2)))
        got = fwAD.unpack_dual(out).tangent.numpy()
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-10)


# ---- levels, make_dual, unpack_dual ---------------------------------------------------------


def test_levels_and_tangent_lifetime():
    x = ember.tensor([1.0, 2.0])
    assert fwAD.unpack_dual(x) == (x, None)  # no level: (tensor, None)
    with fwAD.dual_level() as level:
        assert level == 0
        d = fwAD.make_dual(x, ember.tensor([1.0, 1.0]))
        y = d * d
        assert fwAD.unpack_dual(y).tangent.tolist() == [2.0, 4.0]
    # Leaving the level drops every tangent of it; the values stay.
    assert fwAD.unpack_dual(d).tangent is None and fwAD.unpack_dual(y).tangent is None
    assert y.tolist() == [1.0, 4.0]
    with fwAD.dual_level():  # levels can be entered again
        assert fwAD.unpack_dual(d).tangent is None
        assert (d * 2).tolist() == [2.0, 4.0]


def test_enter_exit_functions_and_decorator():
    level = fwAD.enter_dual_level()
    try:
        d = fwAD.make_dual(ember.ones(2), ember.ones(2), level=level)
        assert fwAD.unpack_dual(d.sin(), level=level).tangent is not None
    finally:
        fwAD.exit_dual_level(level=level)

    @fwAD.dual_level()
    def jvp_exp(x, v):
        return fwAD.unpack_dual(fwAD.make_dual(x, v).exp()).tangent

    assert jvp_exp(ember.zeros(2), ember.ones(2)).tolist() == [1.0, 1.0]


def test_level_is_exited_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with fwAD.dual_level():
            1 / 0
    with fwAD.dual_level():  # not "nested": the first one was exited
        pass


def test_nested_levels_are_refused():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            with fwAD.dual_level():
                pass
    with pytest.raises(RuntimeError, match="no dual level is live"):
        fwAD.exit_dual_level()


def test_make_dual_errors():
    p = ember.zeros(3)
    with pytest.raises(RuntimeError, match="no dual level is live"):
        fwAD.make_dual(p, ember.zeros(3))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"shape \(4,\) doesn't match the primal's shape \(3,\)"):
            fwAD.make_dual(p, ember.zeros(4))
        with pytest.raises(RuntimeError, match="dtype float64 doesn't match the primal's dtype float32"):
            fwAD.make_dual(p, ember.zeros(3, dtype=ember.float64))
        with pytest.raises(ValueError, match="tangent to be floating point, but got int64"):
            fwAD.make_dual(p, ember.arange(3))
        with pytest.raises(ValueError, match="primal to be floating point"):
            fwAD.make_dual(ember.arange(3), ember.zeros(3))
        d = fwAD.make_dual(p, ember.ones(3))
        with pytest.raises(RuntimeError, match="already has a tangent"):
            fwAD.make_dual(d, ember.ones(3))
        with pytest.raises(RuntimeError, match="is itself a dual Tensor"):
            fwAD.make_dual(ember.ones(3), d)
        with pytest.raises(RuntimeError, match="level 5 is not live"):
            fwAD.make_dual(p, ember.ones(3), level=5)
        with pytest.raises(TypeError, match="expected tensor and tangent to be Tensors"):
            fwAD.make_dual(p, [1.0, 2.0, 3.0])


def test_make_dual_keeps_or_relayouts_the_tangent():
    with fwAD.dual_level():
        t = ember.ones(3)
        d = fwAD.make_dual(ember.zeros(3), t)
        assert fwAD.unpack_dual(d).tangent is t  # same layout: kept as is
        p = ember.zeros(4, 3).t()  # strided primal, contiguous tangent: copied to p's layout
        tan = ember.arange(12.0).reshape(3, 4)
        d2 = fwAD.make_dual(p, tan)
        got = fwAD.unpack_dual(d2).tangent
        assert got.stride() == p.stride()
        assert got.tolist() == tan.tolist()


def test_unpack_dual_primal_is_a_view_without_tangent():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, ember.ones(2))
        primal, tangent = fwAD.unpack_dual(d)
        assert fwAD.unpack_dual(primal).tangent is None
        assert primal.tolist() == [1.0, 2.0]
        # The primal is still connected to x in reverse mode.
        (primal * 3).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]
        assert isinstance(fwAD.unpack_dual(d), fwAD.UnpackedDualTensor)


# ---- in-place ops and views -----------------------------------------------------------------


def test_inplace_on_a_view_updates_the_base_tangent():
    with fwAD.dual_level():
        base = ember.zeros(2, 3)
        row = base[1]
        col = base[:, 0]  # taken before the base has a tangent
        row.copy_(fwAD.make_dual(ember.ones(3), ember.tensor([1.0, 2.0, 3.0])))
        assert fwAD.unpack_dual(base).tangent.tolist() == [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]
        assert fwAD.unpack_dual(col).tangent.tolist() == [0.0, 1.0]
        # In place on a view of a dual tensor writes through to the base's tangent.
        base.t()[2].mul_(10.0)
        assert fwAD.unpack_dual(base).tangent.tolist() == [[0.0, 0.0, 0.0], [1.0, 2.0, 30.0]]


def test_views_share_the_tangent_with_torch():
    torch_ = pytest.importorskip("torch")
    tfw = torch_.autograd.forward_ad
    rng = np.random.default_rng(2)
    p, v, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3)

    def f(mod, fw, x, t, u):
        y = fw.make_dual(x, t) * 1.0
        y.transpose(0, 1)[1].mul_(fw.make_dual(u, u * 2))
        y[:, 2] = 0.5
        y[0, ::2] += y[1, 1:3]
        return y, fw.unpack_dual(y).tangent

    with tfw.dual_level():
        ty, tt = f(torch_, tfw, torch_.tensor(p), torch_.tensor(v), torch_.tensor(w))
        ty, tt = ty.detach().numpy().copy(), tt.numpy().copy()
    with fwAD.dual_level():
        ey, et = f(ember, fwAD, ember.tensor(p), ember.tensor(v), ember.tensor(w))
        ey, et = ey.numpy().copy(), et.numpy().copy()
    np.testing.assert_allclose(ey, ty, rtol=1e-12)
    np.testing.assert_allclose(et, tt, rtol=1e-12)


def test_indexing_basic_and_advanced():
    x = np.arange(12.0).reshape(3, 4)
    v = np.arange(12.0).reshape(3, 4) * 10
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.tensor(x), ember.tensor(v))
        for index in [1, (slice(None), slice(1, 3)), (Ellipsis, slice(None, None, 2)), (None, 2),
                      ember.tensor([2, 0]), ember.tensor([True, False, True]),
                      (ember.tensor([0, 2]), ember.tensor([1, 3]))]:
            r = d[index]
            np_index = tuple(i.numpy() if isinstance(i, ember.Tensor) else i
                             for i in (index if isinstance(index, tuple) else (index,)))
            assert fwAD.unpack_dual(r).tangent.tolist() == v[np_index].tolist(), index


def test_setitem_writes_the_value_tangent():
    with fwAD.dual_level():
        x = ember.zeros(2, 3)
        x[0] = fwAD.make_dual(ember.ones(3), ember.tensor([1.0, 2.0, 3.0]))
        x[1, 1:] = 5.0
        assert fwAD.unpack_dual(x).tangent.tolist() == [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]
        x[:, 0] = 7.0  # a number has a zero tangent
        assert fwAD.unpack_dual(x).tangent.tolist() == [[0.0, 2.0, 3.0], [0.0, 0.0, 0.0]]
        x[ember.tensor([1])] = fwAD.make_dual(ember.ones(3), ember.full((3,), 4.0))
        assert fwAD.unpack_dual(x).tangent.tolist() == [[0.0, 2.0, 3.0], [4.0, 4.0, 4.0]]


def test_results_do_not_share_tangents_with_inputs():
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.zeros(3), ember.ones(3))
        y = d + 1.0  # y's tangent equals d's, but must not be the same memory
        y.mul_(5.0)
        assert fwAD.unpack_dual(d).tangent.tolist() == [1.0, 1.0, 1.0]
        assert fwAD.unpack_dual(y).tangent.tolist() == [5.0, 5.0, 5.0]


# ---- what carries no tangent, and errors ----------------------------------------------------


def test_integer_and_bool_results_carry_no_tangent():
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.tensor([3.0, 1.0, 2.0]), ember.ones(3))
        for r in [d.argmax(), d > 1.5, d.eq(d), d.to(ember.int64), d.nonzero()]:
            assert fwAD.unpack_dual(r).tangent is None


def test_op_without_tangent_formula_raises():
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.ones(2, 3), ember.ones(2, 3))
        with pytest.raises(NotImplementedError, match="forward-mode AD for 'cumsum' is not implemented"):
            d.cumsum(0)
        with pytest.raises(NotImplementedError, match="forward-mode AD for 'max' is not implemented"):
            d.max(1)  # values would need a tangent
        with pytest.raises(NotImplementedError, match="forward-mode AD for 'uniform_'"):
            (d * 1.0).uniform_()
        lo = fwAD.make_dual(ember.zeros(3), ember.ones(3))
        with pytest.raises(NotImplementedError, match="'clamp' with respect to argument 'min'"):
            ember.ones(3).clamp(lo, None)
        # Without a tangent the same ops work inside the level.
        assert ember.ones(2).cumsum(0).tolist() == [1.0, 2.0]


def test_out_argument_with_a_dual_input_raises():
    with fwAD.dual_level():
        d = fwAD.make_dual(ember.ones(3), ember.ones(3))
        with pytest.raises(NotImplementedError, match="add: functions with out=... arguments"):
            ember.add(d, 1.0, out=ember.empty(3))
        # In place through out=self is fine.
        ember.mul(d, 2.0, out=d)
        assert fwAD.unpack_dual(d).tangent.tolist() == [2.0, 2.0, 2.0]


def test_forward_ad_composes_with_reverse_mode():
    # Reverse over forward: the tangent is differentiable, giving a Hessian-vector product.
    x = ember.tensor([0.3, -1.2, 2.0], requires_grad=True)
    v = ember.tensor([1.0, 0.5, -2.0])
    with fwAD.dual_level():
        y = (fwAD.make_dual(x, v).sin() * 2.0).sum()
        tangent = fwAD.unpack_dual(y).tangent
        (hvp,) = ember.autograd.grad(tangent, x)
    expected = -2.0 * np.sin(x.detach().numpy()) * v.numpy()
    np.testing.assert_allclose(hvp.numpy(), expected, rtol=1e-6)
    # And the primal's ordinary gradient is unaffected.
    with fwAD.dual_level():
        y = (fwAD.make_dual(x, v) ** 2).sum()
        y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
