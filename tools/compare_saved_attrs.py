"""Compares autograd graph introspection with PyTorch: for ~150 common ops (pointwise,
reductions, shape, indexing, nn.functional, linalg) the grad_fn's type name, name(), the names of
its `_saved_*` attributes and their values, run under both libraries on the same inputs.

    PYTHONPATH=<ember site> python3 tools/compare_saved_attrs.py [-v] [--all-attrs]

Prints one line per op that differs (OK lines with -v) and a summary. Attributes PyTorch saves
only to reshape gradients (`_sym_strides`, `_scalar_type`, `_options`, ...) are left out unless
--all-attrs; ember keeps those as node metadata, not as saved values.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

# PyTorch-only bookkeeping that ember's nodes keep as metadata rather than saved values.
_IGNORED_SUFFIXES = ("_sym_strides", "_scalar_type", "_options", "_sym_numel", "_info",
                     "_sym_storage_offset", "_layout", "_device")
_IGNORED_PARTS = ("_sym_argsize_", "_args_scalartypes", "_args_sizes")

CASES: list[str] = [
    # pointwise, unary
    "a.exp()", "p.log()", "p.log1p()", "p.sqrt()", "p.rsqrt()", "a.sin()",
    "a.cos()", "a.tan()", "a.tanh()", "a.sigmoid()", "a.abs()", "a.neg()", "a.reciprocal()",
    "a.square()", "a.sign()", "a.erf()", "a.expm1()", "p.log2()", "p.log10()", "a.atan()",
    "(a / 4).asin()", "(a / 4).acos()", "a.sinh()", "a.cosh()", "a.asinh()", "a.floor()",
    "a.ceil()", "a.round()", "a.trunc()", "a.frac()", "p.lgamma()", "p.digamma()", "a.relu()",
    "a.clamp(min=0.1)", "a.clamp(-0.5, 0.5)", "a.clamp(max=b)", "p.pow(2)", "p.pow(b)",
    "T.pow(2.0, a)", "a.exp2()", "a.sigmoid().logit()", "a.sgn()",
    "a.nan_to_num()", "a.deg2rad()",
    # pointwise, binary
    "a + b", "a + 2", "a - b", "a - 2", "2 - a", "a * b", "a * 2", "a / b", "a / 2", "2 / a",
    "a.add(b, alpha=2)", "a.sub(b, alpha=3)", "T.maximum(a, b)", "T.minimum(a, b)",
    "T.atan2(a, b)", "T.hypot(a, b)", "T.fmod(a, 0.3)", "T.remainder(a, 0.3)",
    "T.where(a > 0, a, b)", "T.lerp(a, b, 0.3)", "T.addcmul(a, b, b, value=0.5)",
    "T.addcdiv(a, b, p, value=0.5)", "T.xlogy(p, p)", "T.copysign(a, b)", "T.logaddexp(a, b)",
    "a.masked_fill(a > 0, 0.0)",
    # reductions
    "a.sum()", "a.sum(0)", "a.sum(dim=None)", "a.sum((0, 1), keepdim=True)", "a.mean()",
    "a.mean(1)", "a.mean(dim=None)", "a.prod()", "a.prod(1)", "a.max()", "a.max(1)[0]",
    "a.min()", "a.min(0)[0]", "a.amax(1)", "a.amin(0)", "a.var()", "a.var(1)", "a.std()",
    "a.std(0)", "a.norm()", "a.norm(dim=1)", "a.logsumexp(1)", "a.cumsum(1)", "a.cumprod(1)",
    "T.linalg.vector_norm(a, 3)", "a.nansum()", "a.median()", "a.kthvalue(2, 1)[0]",
    "a.sort(1)[0]", "a.topk(2)[0]", "a.cummax(1)[0]", "a.logcumsumexp(1)",
    # shape and views
    "a.view(12)", "a.reshape(4, 3)", "a.t()", "a.transpose(0, 1)", "a.permute(1, 0)",
    "a.unsqueeze(0)", "a.unsqueeze(0).squeeze()", "a.unsqueeze(0).squeeze(0)",
    "a.unsqueeze(0).squeeze((0,))", "a.flatten()", "a.expand(2, 3, 4)", "a.repeat(2, 1)",
    "a.flip(0)", "a.roll(1, 0)", "a.narrow(1, 1, 2)", "a.select(0, 1)", "a[1]", "a[:, 1:3]",
    "a[idx]", "a[a > 0]", "a.chunk(2, 1)[0]", "a.split(2, 1)[1]", "a.unbind(0)[1]",
    "T.cat([a, b])", "T.cat([a, b], 1)", "T.stack([a, b])", "T.stack([a, b], 1)",
    "a.contiguous().diagonal()", "a.tril()", "a.triu(1)", "a.movedim(0, 1)", "a.clone()",
    "a.to(T.float64)", "a.double()", "a.unfold(1, 2, 1)", "a.index_select(0, idx)",
    "a.gather(1, idx2)", "a.take_along_dim(idx2, 1)", "T.take(a, idx)",
    "a.index_add(0, idx, b[:2])", "a.scatter(1, idx2, b)", "a.scatter_add(1, idx2, b)",
    "a.masked_select(a > 0)", "T.einsum('ij,jk->ik', a, m)", "T.einsum('ij->j', a)",
    "T.einsum('ij,ij->ij', a, b)", "a.expand_as(b)", "T.broadcast_to(v, (3, 4))",
    "T.atleast_3d(a)", "a.view_as(b)", "a.swapaxes(0, 1)", "a.mT",
    # linalg
    "a @ m", "T.mm(a, m)", "T.matmul(a, v)", "T.bmm(a.unsqueeze(0), m.unsqueeze(0))",
    "T.addmm(c, a, m)", "T.mv(a, v)", "T.dot(v, v)", "T.outer(v, v)", "T.linalg.inv(s)",
    "T.linalg.det(s)", "T.det(s)", "T.linalg.slogdet(s)[1]", "T.linalg.cholesky(s)",
    "T.linalg.solve(s, m)", "T.trace(s)", "T.linalg.matrix_norm(s)", "T.cross(a[:, :3], b[:, :3], dim=1)",
    "T.kron(v, v)", "T.tensordot(a, m, 1)", "T.baddbmm(c.unsqueeze(0), a.unsqueeze(0), m.unsqueeze(0))",
    # nn.functional
    "F.linear(a, w2)", "F.linear(a, w2, bias)", "F.relu(a)", "F.gelu(a)", "F.gelu(a, approximate='tanh')",
    "F.silu(a)", "F.leaky_relu(a, 0.1)", "F.elu(a)", "F.selu(a)", "F.softplus(a)",
    "F.hardtanh(a)", "F.hardswish(a)", "F.mish(a)", "F.softmax(a, 1)", "F.log_softmax(a, 1)",
    "F.logsigmoid(a)", "F.normalize(a, dim=1)", "F.layer_norm(a, (4,))",
    "F.layer_norm(a, (4,), w4, b4)", "F.mse_loss(a, b)", "F.l1_loss(a, b)",
    "F.smooth_l1_loss(a, b)", "F.huber_loss(a, b)", "F.cross_entropy(a, tgt)",
    "F.nll_loss(F.log_softmax(a, 1), tgt)", "F.binary_cross_entropy(a.sigmoid(), b.sigmoid())",
    "F.binary_cross_entropy_with_logits(a, b.sigmoid())", "F.kl_div(a, b.softmax(1))",
    "F.conv2d(img, wc)", "F.conv2d(img, wc, bc, padding=1)", "F.conv1d(img[:, :, 0], wc[:, :, 0])",
    "F.max_pool2d(img, 2)", "F.avg_pool2d(img, 2)", "F.adaptive_avg_pool2d(img, 1)",
    "F.max_pool1d(img[0], 2)", "F.pad(a, (1, 1))", "F.embedding(idx, a)",
    "F.batch_norm(img, None, None, training=True)", "F.group_norm(img, 1)",
    "F.interpolate(img, scale_factor=2)", "F.interpolate(img, scale_factor=2, mode='bilinear')",
    "F.cosine_similarity(a, b)", "F.pairwise_distance(a, b)", "F.glu(a, 1)",
    "F.dropout(a, 0.5)", "F.dropout(a, 1.0)", "F.softmin(a, 1)", "F.hardsigmoid(a)", "F.celu(a)",
    "F.threshold(a, 0.1, 0.0)", "F.prelu(a, w1)", "F.rrelu(a, training=False)",
]


def make_inputs(T: Any) -> dict[str, Any]:
    rng = np.random.default_rng(0)

    def t(*shape: int, positive: bool = False) -> Any:
        x = rng.standard_normal(shape).astype(np.float32)
        if positive:
            x = np.abs(x) + 0.5
        return T.tensor(x, requires_grad=True)

    a, b = t(3, 4), t(3, 4)
    sq = rng.standard_normal((4, 4)).astype(np.float32)
    spd = sq @ sq.T + 4 * np.eye(4, dtype=np.float32)
    return {
        "a": a, "b": b, "c": t(3, 5), "p": t(3, 4, positive=True), "v": t(4), "m": t(4, 5),
        "s": T.tensor(spd, requires_grad=True), "w2": t(5, 4), "bias": t(5), "w4": t(4),
        "b4": t(4), "w1": t(1), "img": t(1, 2, 5, 5), "wc": t(3, 2, 3, 3), "bc": t(3),
        "idx": T.tensor([0, 2]), "idx2": T.tensor([[0, 1], [2, 3], [1, 1]]),
        "tgt": T.tensor([0, 3, 1]),
    }


def saved_attrs(fn: Any, all_attrs: bool) -> dict[str, Any]:
    out = {}
    for name in dir(fn):
        if not name.startswith("_saved_"):
            continue
        if not all_attrs and (name.endswith(_IGNORED_SUFFIXES)
                              or any(p in name for p in _IGNORED_PARTS)):
            continue
        out[name] = getattr(fn, name)
    return out


def as_plain(v: Any) -> Any:
    """Values in a library-neutral form: tensors as NumPy arrays."""
    if hasattr(v, "detach") and hasattr(v, "shape"):
        return v.detach().cpu().numpy()
    if isinstance(v, (tuple, list)):
        return tuple(as_plain(x) for x in v)
    if type(v).__name__ == "dtype":
        return str(v).split(".")[-1]
    return v


def same_value(x: Any, y: Any) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
            return False
        return x.shape == y.shape and np.allclose(x.astype(np.float64), y.astype(np.float64),
                                                   rtol=1e-4, atol=1e-5, equal_nan=True)
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(same_value(p, q) for p, q in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        try:
            return math.isclose(float(x), float(y), rel_tol=1e-6) or (
                math.isnan(float(x)) and math.isnan(float(y)))
        except TypeError:
            return False
    return x == y


def run_case(lib: str, expr: str, all_attrs: bool) -> tuple[str, str, dict[str, Any]] | str:
    if lib == "torch":
        import torch as T
        import torch.nn.functional as F
    else:
        import ember as T  # type: ignore[no-redef]
        import ember.nn.functional as F  # type: ignore[no-redef]
    env = dict(make_inputs(T), T=T, F=F)
    try:
        y = eval(expr, env)  # noqa: S307 - the cases above
    except Exception as e:  # noqa: BLE001 - reported as a difference
        return f"error: {type(e).__name__}: {e}"
    fn = y.grad_fn
    if fn is None:
        return "no grad_fn"
    attrs = {k: as_plain(v) for k, v in saved_attrs(fn, all_attrs).items()}
    return type(fn).__name__, fn.name(), attrs


def compare(expr: str, all_attrs: bool) -> list[str]:
    t = run_case("torch", expr, all_attrs)
    e = run_case("ember", expr, all_attrs)
    if isinstance(t, str) or isinstance(e, str):
        return [] if t == e else [f"torch: {t if isinstance(t, str) else t[0]}, "
                                  f"ember: {e if isinstance(e, str) else e[0]}"]
    diffs = []
    if t[0] != e[0] or t[1] != e[1]:
        diffs.append(f"name torch {t[0]}/{t[1]} ember {e[0]}/{e[1]}")
        return diffs  # a different node saves different things
    only_t = sorted(set(t[2]) - set(e[2]))
    only_e = sorted(set(e[2]) - set(t[2]))
    if only_t:
        diffs.append(f"only torch {only_t}")
    if only_e:
        diffs.append(f"only ember {only_e}")
    for k in sorted(set(t[2]) & set(e[2])):
        if not same_value(t[2][k], e[2][k]):
            diffs.append(f"{k}: torch {short(t[2][k])} ember {short(e[2][k])}")
    return diffs


def short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}"
    return repr(v)[:60]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", action="store_true", help="print the ops that agree too")
    ap.add_argument("--all-attrs", action="store_true", help="compare every _saved_ attribute")
    ns = ap.parse_args()
    n_name = n_attr = 0
    for expr in CASES:
        diffs = compare(expr, ns.all_attrs)
        if diffs:
            if diffs[0].startswith(("name", "torch:")):
                n_name += 1
            else:
                n_attr += 1
            print(f"DIFF {expr}: " + "; ".join(diffs))
        elif ns.v:
            print(f"OK   {expr}")
    print(f"{len(CASES)} ops: {len(CASES) - n_name - n_attr} agree, {n_name} differ in the "
          f"node (name or error), {n_attr} in saved attributes")


if __name__ == "__main__":
    main()
