"""Forward-mode AD (ember.autograd.forward_ad): every op with a `tangent:` formula is checked
three ways on float64 inputs -- the forward-mode JVP against the Jacobian built by reverse mode
(J @ v, one backward pass per output element), against central finite differences, and
against torch.autograd.forward_ad where PyTorch is installed -- with contiguous and strided
primals. Then in-place ops, views, indexing, levels and the errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import ember
import ember.autograd.forward_ad as fwAD
import numpy as np
import pytest
from core_helpers import torch
from op_db import DB, lib


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


_RELU_AT = np.random.default_rng(9).standard_normal((3, 4))  # where relu's backward is taken
_SDPA_MASK = np.random.default_rng(10).standard_normal((4, 6))  # an additive attention mask


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
    FwCase("_to_copy: strided, same device", lambda a: (
        ember._C._to_copy(a, dtype=ember.float64) if isinstance(a, ember.Tensor)
        else a.to(torch.float64, copy=True)), n(3, 2)),
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


def F(a):
    """ember.nn.functional or torch.nn.functional, by the tensor's library."""
    if isinstance(a, ember.Tensor):
        import ember.nn.functional as ef
        return ef
    return torch.nn.functional


def _FRAC_SAMPLES(a):
    """Fixed fractional-pooling samples (1, 2, 2) in a's library and dtype."""
    u = np.array([[[0.3, 0.7], [0.9, 0.1]]])
    if isinstance(a, ember.Tensor):
        return ember.from_numpy(u).to(a.dtype)
    return torch.from_numpy(u).to(a.dtype)


def _idx(*values):
    return np.array(values, dtype=np.int64)


def _ties(rng):
    """Rows with repeated extremes (max/min ties share the tangent evenly)."""
    return [np.array([[1.0, 3.0, 3.0, -2.0], [0.5, -1.0, 0.5, -1.0]])]


def _with_zeros(rng):
    x = rng.uniform(0.5, 1.5, (2, 5))
    x[0, 2] = 0.0
    x[1, 1] = 0.0
    x[1, 3] = 0.0
    return [x]


def _dropout(a):
    # The same mask every call, so finite differences and reverse mode see one function.
    ember.manual_seed(3)
    return F(a).dropout(a, 0.4, training=True)


MORE_CASES = [
    # pointwise, unary
    *[FwCase(f"{op}: 3x4", (lambda op: lambda a: getattr(a, op)())(op), n(3, 4))
      for op in ["atan", "sinh", "cosh", "erf", "erfc", "sign", "sgn", "floor", "ceil", "trunc",
                 "frac"]],
    *[FwCase(f"{op}: inside (-1, 1)", (lambda op: lambda a: getattr(a, op)())(op),
             lambda rng: [rng.uniform(-0.9, 0.9, (2, 3))])
      for op in ["asin", "acos", "erfinv", "atanh"]],
    FwCase("asinh: 3x4", lambda a: a.asinh(), n(3, 4)),
    FwCase("acosh: above 1", lambda a: a.acosh(), lambda rng: [rng.uniform(1.2, 4.0, (2, 3))]),
    FwCase("round: decimals", lambda a: a.round(decimals=1), n(5)),
    FwCase("round: in place", lambda a: fresh(a).round_(), n(4)),
    FwCase("nan_to_num: finite", lambda a: a.nan_to_num(posinf=1.0), n(2, 3)),
    FwCase("nan_to_num: with nan and inf", lambda a: a.nan_to_num(0.0, 5.0, -5.0) * 1.0,
           lambda rng: [np.array([1.5, np.nan, np.inf, -np.inf, -0.5])], reverse=False,
           noncontig=False),
    FwCase("asin: in place", lambda a: fresh(a).asin_(), lambda rng: [rng.uniform(-0.9, 0.9, 4)]),
    # pointwise, binary
    FwCase("remainder: tensors", lambda a, b: a.remainder(b),
           lambda rng: [rng.uniform(0.1, 0.9, 4) + np.arange(4), rng.uniform(1.2, 1.8, 4)],
           noncontig=False),
    FwCase("remainder: number", lambda a: a.remainder(1.5), lambda rng: [np.array([0.2, 1.9, -0.7])]),
    FwCase("fmod: broadcast", lambda a, b: a.fmod(b),
           lambda rng: [np.array([[0.3, -2.2, 3.7], [4.1, -0.4, 2.6]]), np.array([1.3, 1.7, 1.1])]),
    FwCase("atan2: broadcast", lambda a, b: a.atan2(b), nn((2, 3), (3,))),
    FwCase("atan2: in place", lambda a, b: fresh(a).atan2_(b), nn((2, 3), (2, 3))),
    FwCase("minimum: broadcast", lambda a, b: lib(a).minimum(a, b), nn((2, 3), (3,))),
    FwCase("maximum: same shape", lambda a, b: a.maximum(b), nn((3, 2), (3, 2))),
    FwCase("maximum: ties", lambda a, b: lib(a).maximum(a, b),
           lambda rng: [np.array([1.0, 2.0, -1.0]), np.array([1.0, 0.5, -1.0])],
           reverse=False, noncontig=False),
    FwCase("lerp: tensor weight", lambda a, b, w: a.lerp(b, w),
           lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal(3),
                        rng.uniform(0, 1, (2, 3))]),
    FwCase("lerp: number weight", lambda a, b: a.lerp(b, 0.3), nn((2, 3), (2, 3))),
    # reductions
    FwCase("nansum: dim", lambda a: a.nansum(1), n(3, 4)),
    FwCase("nansum: with nan", lambda a: a.nansum(0),
           lambda rng: [np.array([[1.0, np.nan], [2.0, 3.0]])], reverse=False, noncontig=False),
    FwCase("nanmean: all", lambda a: a.nanmean(), n(3, 4)),
    FwCase("nanmean: with nan, keepdim", lambda a: a.nanmean(1, keepdim=True),
           lambda rng: [np.array([[1.0, np.nan, 2.0], [2.0, 3.0, -1.0]])], reverse=False,
           noncontig=False),
    FwCase("prod: all", lambda a: a.prod(), n(2, 3)),
    FwCase("prod: dim keepdim", lambda a: a.prod(1, keepdim=True), n(3, 4)),
    FwCase("prod: zeros", lambda a: a.prod(1), _with_zeros),
    FwCase("prod: 0-d", lambda a: a.prod(), n()),
    FwCase("max: all", lambda a: a.max(), n(3, 4)),
    FwCase("max: all with ties", lambda a: a.max(), _ties, noncontig=False),
    FwCase("max: dim", lambda a: a.max(1), n(3, 4)),
    FwCase("max: dim keepdim", lambda a: a.max(-2, keepdim=True), n(3, 4)),
    FwCase("max: 0-d dim", lambda a: a.max(0), n()),
    FwCase("min: all", lambda a: a.min(), n(3, 4)),
    FwCase("min: dim", lambda a: a.min(0), n(3, 4)),
    FwCase("amax: dims", lambda a: a.amax((0, 2)), n(2, 3, 4)),
    FwCase("amax: ties keepdim", lambda a: a.amax(1, keepdim=True), _ties, noncontig=False),
    FwCase("amin: all", lambda a: a.amin(), n(3, 4)),
    FwCase("aminmax: dim", lambda a: lib(a).aminmax(a, dim=1), n(3, 4)),
    FwCase("aminmax: all", lambda a: lib(a).aminmax(a), n(3, 4)),
    FwCase("var: dim", lambda a: a.var(1), n(3, 4)),
    FwCase("var: correction keepdim", lambda a: a.var((0, 1), correction=0, keepdim=True),
           n(2, 3, 2)),
    FwCase("std: all", lambda a: a.std(), n(3, 4)),
    FwCase("std: unbiased false", lambda a: a.std(0, unbiased=False), n(3, 4)),
    FwCase("var_mean: dim", lambda a: lib(a).var_mean(a, 1), n(3, 4)),
    FwCase("std_mean: all", lambda a: lib(a).std_mean(a), n(3, 4)),
    FwCase("norm: 2", lambda a: a.norm(), n(3, 4)),
    FwCase("norm: p=1 dim", lambda a: a.norm(1, dim=1), n(3, 4)),
    FwCase("norm: p=3 keepdim", lambda a: a.norm(3, dim=0, keepdim=True), n(3, 4)),
    FwCase("norm: inf", lambda a: a.norm(float("inf"), dim=1), n(3, 4)),
    FwCase("logsumexp: dim", lambda a: a.logsumexp(1), n(3, 4)),
    FwCase("logsumexp: dims keepdim", lambda a: a.logsumexp((0, 1), keepdim=True), n(2, 3)),
    FwCase("cumsum: dim", lambda a: a.cumsum(1), n(3, 4)),
    FwCase("cumsum: in place", lambda a: fresh(a).cumsum_(0), n(3, 2)),
    FwCase("cumprod: dim", lambda a: a.cumprod(1), n(3, 4)),
    FwCase("cumprod: zeros", lambda a: a.cumprod(-1), _with_zeros),
    FwCase("cummax: dim", lambda a: a.cummax(1), n(3, 4)),
    FwCase("cummin: dim 0", lambda a: a.cummin(0), n(3, 4)),
    FwCase("frexp: 3x4", lambda a: a.frexp(), n(3, 4)),
    # sort family
    FwCase("sort: last dim", lambda a: a.sort(), n(3, 4)),
    FwCase("sort: descending dim 0", lambda a: a.sort(0, descending=True), n(3, 4)),
    FwCase("topk: largest", lambda a: a.topk(2), n(3, 4)),
    FwCase("topk: smallest dim 0", lambda a: a.topk(2, 0, largest=False), n(3, 4)),
    FwCase("kthvalue: keepdim", lambda a: a.kthvalue(2, 1, keepdim=True), n(3, 4)),
    FwCase("kthvalue: dim 0", lambda a: a.kthvalue(1, 0), n(3, 4)),
    FwCase("median: all", lambda a: a.median(), n(3, 3)),
    FwCase("median: dim", lambda a: a.median(1), n(3, 5)),
    FwCase("nanmedian: all", lambda a: a.nanmedian(), n(3, 3)),
    FwCase("nanmedian: dim", lambda a: a.nanmedian(0), n(3, 4)),
    # Without repeated values (ties are not differentiable) the mode is the smallest value.
    FwCase("mode: dim", lambda a: a.mode(1), n(3, 4)),
    FwCase("msort: composite", lambda a: lib(a).msort(a), n(4, 3)),
    # views
    FwCase("adjoint: 3d", lambda a: a.adjoint(), n(2, 3, 4)),
    FwCase("narrow: dim 1", lambda a: a.narrow(1, 1, 2), n(3, 4)),
    FwCase("select: negative", lambda a: a.select(-1, 2), n(3, 4)),
    FwCase("unfold: windows", lambda a: a.unfold(1, 2, 1), n(2, 5)),
    FwCase("ravel: strided", lambda a: a.ravel(), n(3, 4)),
    FwCase("unflatten: dim 1", lambda a: a.unflatten(1, (2, 3)), n(2, 6)),
    FwCase("tensor_split: sections", lambda a: a.tensor_split(3, 1), n(2, 5)),
    FwCase("tensor_split: indices", lambda a: a.tensor_split([1, 3]), n(4, 2)),
    FwCase("hsplit: sections", lambda a: a.hsplit(2), n(3, 4)),
    FwCase("hsplit: indices", lambda a: a.hsplit([1]), n(3, 4)),
    FwCase("vsplit: sections", lambda a: a.vsplit(2), n(4, 3)),
    FwCase("vsplit: indices", lambda a: a.vsplit([3]), n(4, 3)),
    FwCase("diagonal: offset", lambda a: a.diagonal(1), n(3, 4)),
    FwCase("diagonal: dims", lambda a: a.diagonal(0, 2, 0), n(3, 2, 3)),
    FwCase("movedim: two", lambda a: a.movedim((0, 1), (2, 0)), n(2, 3, 4)),
    FwCase("moveaxis: one", lambda a: a.moveaxis(0, -1), n(2, 3)),
    FwCase("broadcast_tensors: two", lambda a, b: lib(a).broadcast_tensors(a, b),
           nn((3, 1), (4,))),
    # shape
    FwCase("concat: dim 0", lambda a, b: lib(a).concat([a, b]), nn((1, 3), (2, 3))),
    FwCase("concatenate: axis 1", lambda a, b: lib(a).concatenate([a, b], axis=1),
           nn((2, 1), (2, 2))),
    FwCase("stack: composite", lambda a, b: lib(a).stack([a, b], 1), nn((2, 3), (2, 3))),
    FwCase("flip: dims", lambda a: a.flip(0, 1), n(2, 3)),
    FwCase("fliplr: 2d", lambda a: a.fliplr(), n(2, 3)),
    FwCase("flipud: 2d", lambda a: a.flipud(), n(2, 3)),
    FwCase("roll: dims", lambda a: a.roll((1, -1), (0, 1)), n(3, 4)),
    FwCase("roll: flat", lambda a: a.roll(2), n(3, 2)),
    FwCase("rot90: k=3", lambda a: a.rot90(3, (0, 1)), n(2, 3)),
    FwCase("repeat: 2d", lambda a: a.repeat(2, 1, 3), n(2, 3)),
    FwCase("tile: short dims", lambda a: a.tile((2,)), n(2, 3)),
    FwCase("repeat_interleave: number", lambda a: a.repeat_interleave(2, dim=1), n(2, 3)),
    FwCase("repeat_interleave: tensor repeats", lambda a, r: a.repeat_interleave(r, dim=0),
           lambda rng: [rng.standard_normal((3, 2)), _idx(1, 0, 2)]),
    FwCase("tril: diagonal", lambda a: a.tril(-1), n(3, 4)),
    FwCase("triu: in place", lambda a: fresh(a).triu_(1), n(3, 4)),
    FwCase("constant_pad_nd: value", lambda a: lib(a).constant_pad_nd(a, [1, 2, 0, 1], 3.5),
           n(2, 3)),
    FwCase("pad: constant", lambda a: F(a).pad(a, (1, 1), value=2.0), n(2, 3)),
    FwCase("pad: reflect", lambda a: F(a).pad(a, (2, 1), mode="reflect"), n(1, 2, 4)),
    # indexing
    FwCase("index_select: dim 1", lambda a, i: a.index_select(1, i),
           lambda rng: [rng.standard_normal((3, 4)), _idx(3, 0, 3)]),
    FwCase("gather: dim 0", lambda a, i: a.gather(0, i),
           lambda rng: [rng.standard_normal((3, 2)), _idx(2, 0, 1, 1).reshape(2, 2)]),
    FwCase("scatter: src", lambda a, i, s: a.scatter(1, i, s),
           lambda rng: [rng.standard_normal((2, 4)), _idx(3, 0, 1, 2).reshape(2, 2),
                        rng.standard_normal((2, 2))]),
    FwCase("scatter: src add", lambda a, i, s: a.scatter(1, i, s, reduce="add"),
           lambda rng: [rng.standard_normal((2, 4)), _idx(3, 3, 1, 1).reshape(2, 2),
                        rng.standard_normal((2, 2))], torch=False),  # torch: not implemented
    FwCase("scatter: value", lambda a, i: a.scatter(0, i, 1.5),
           lambda rng: [rng.standard_normal((3, 2)), _idx(2, 0).reshape(1, 2)]),
    FwCase("scatter: in place", lambda a, i, s: fresh(a).scatter_(0, i, s),
           lambda rng: [rng.standard_normal((3, 2)), _idx(2, 0).reshape(1, 2),
                        rng.standard_normal((1, 2))]),
    FwCase("scatter_add: dim 1", lambda a, i, s: a.scatter_add(1, i, s),
           lambda rng: [rng.standard_normal((2, 3)), _idx(0, 0, 2, 1).reshape(2, 2),
                        rng.standard_normal((2, 2))]),
    FwCase("scatter_reduce: sum", lambda a, i, s: a.scatter_reduce(0, i, s, "sum"),
           lambda rng: [rng.standard_normal(3), _idx(0, 2, 0, 1), rng.standard_normal(4)]),
    FwCase("scatter_reduce: mean no self",
           lambda a, i, s: a.scatter_reduce(0, i, s, "mean", include_self=False),
           lambda rng: [rng.standard_normal(3), _idx(0, 2, 0, 0), rng.standard_normal(4)]),
    FwCase("index_add: alpha", lambda a, i, s: a.index_add(0, i, s, alpha=2.0),
           lambda rng: [rng.standard_normal((3, 2)), _idx(2, 0, 2), rng.standard_normal((3, 2))]),
    FwCase("index_copy: dim 1", lambda a, i, s: a.index_copy(1, i, s),
           lambda rng: [rng.standard_normal((2, 4)), _idx(3, 0), rng.standard_normal((2, 2))]),
    FwCase("index_fill: number", lambda a, i: a.index_fill(1, i, -1.0),
           lambda rng: [rng.standard_normal((2, 4)), _idx(3, 0)]),
    FwCase("index_fill: 0-d tensor value", lambda a, i, v: a.index_fill(0, i, v),
           lambda rng: [rng.standard_normal((3, 2)), _idx(1), rng.standard_normal(())]),
    FwCase("index_fill_: in place", lambda a, i: fresh(a).index_fill_(0, i, 2.0),
           lambda rng: [rng.standard_normal((3, 2)), _idx(0, 2)]),
    FwCase("index_put: values", lambda a, i, v: a.index_put((i,), v),
           lambda rng: [rng.standard_normal((3, 2)), _idx(2, 0), rng.standard_normal((2, 2))]),
    FwCase("index_put: accumulate", lambda a, i, v: a.index_put((i,), v, accumulate=True),
           lambda rng: [rng.standard_normal(4), _idx(1, 1, 3), rng.standard_normal(3)]),
    FwCase("index_put_: in place", lambda a, i, v: fresh(a).index_put_((i,), v),
           lambda rng: [rng.standard_normal((3, 2)), _idx(1), rng.standard_normal(2)]),
    FwCase("_index: advanced", lambda a, i: ember._C._index(a, [None, i])
           if isinstance(a, ember.Tensor) else a[:, i],
           lambda rng: [rng.standard_normal((2, 4)), _idx(3, 1, 3)]),
    FwCase("masked_fill: number", lambda a, m: a.masked_fill(m, 0.5),
           lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal(3) > 0]),
    FwCase("masked_fill: 0-d tensor value", lambda a, m, v: a.masked_fill(m, v),
           lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3)) > 0,
                        rng.standard_normal(())]),
    FwCase("masked_fill_: in place", lambda a, m: fresh(a).masked_fill_(m, 1.0),
           lambda rng: [rng.standard_normal((2, 3)), np.array([True, False, True])]),
    FwCase("masked_scatter: source", lambda a, m, s: a.masked_scatter(m, s),
           lambda rng: [rng.standard_normal((2, 3)), np.array([[True, False, True],
                                                             [False, False, True]]),
                        rng.standard_normal(5)]),
    FwCase("masked_scatter_: in place", lambda a, m, s: fresh(a).masked_scatter_(m, s),
           lambda rng: [rng.standard_normal(4), np.array([True, False, True, False]),
                        rng.standard_normal(3)]),
    FwCase("masked_select: broadcast mask", lambda a, m: a.masked_select(m),
           lambda rng: [rng.standard_normal((2, 3)), np.array([True, False, True])]),
    FwCase("take: flat", lambda a, i: a.take(i),
           lambda rng: [rng.standard_normal((2, 3)), _idx(5, 0, 2, 5).reshape(2, 2)]),
    FwCase("take_along_dim: dim", lambda a, i: lib(a).take_along_dim(a, i, 1),
           lambda rng: [rng.standard_normal((2, 3)), _idx(2, 0, 1, 1).reshape(2, 2)]),
    FwCase("take_along_dim: flat", lambda a, i: lib(a).take_along_dim(a, i),
           lambda rng: [rng.standard_normal((2, 3)), _idx(4, 1)]),
    # linear algebra
    FwCase("mv: both", lambda a, v: a.mv(v), nn((3, 4), (4,))),
    FwCase("dot: both", lambda a, b: a.dot(b), nn((4,), (4,))),
    FwCase("vdot: both", lambda a, b: a.vdot(b), nn((3,), (3,))),
    FwCase("addmm: beta alpha", lambda s, a, b: s.addmm(a, b, beta=0.5, alpha=-2.0),
           lambda rng: [rng.standard_normal(4), rng.standard_normal((3, 2)),
                        rng.standard_normal((2, 4))]),
    FwCase("addmm: in place", lambda s, a, b: fresh(s).addmm_(a, b),
           lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 2)),
                        rng.standard_normal((2, 4))]),
    FwCase("addmv: alpha", lambda s, a, v: s.addmv(a, v, alpha=3.0),
           lambda rng: [rng.standard_normal(3), rng.standard_normal((3, 2)),
                        rng.standard_normal(2)]),
    FwCase("baddbmm: beta", lambda s, a, b: s.baddbmm(a, b, beta=2.0),
           lambda rng: [rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 2)),
                        rng.standard_normal((2, 2, 4))]),
    FwCase("addbmm: alpha", lambda s, a, b: s.addbmm(a, b, alpha=0.5),
           lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((2, 3, 2)),
                        rng.standard_normal((2, 2, 4))]),
    FwCase("outer: both", lambda a, b: a.outer(b), nn((3,), (2,))),
    FwCase("ger: both", lambda a, b: a.ger(b), nn((2,), (3,))),
    FwCase("addr: beta alpha", lambda s, a, b: s.addr(a, b, beta=-1.0, alpha=2.0),
           lambda rng: [rng.standard_normal((3, 2)), rng.standard_normal(3),
                        rng.standard_normal(2)]),
    FwCase("inner: 2d", lambda a, b: a.inner(b), nn((2, 3), (4, 3))),
    FwCase("tensordot: int dims", lambda a, b: lib(a).tensordot(a, b, dims=1),
           nn((2, 3), (3, 4))),
    FwCase("tensordot: dim lists", lambda a, b: lib(a).tensordot(a, b, dims=([0, 2], [1, 0])),
           nn((2, 3, 4), (4, 2, 2))),
    FwCase("einsum: three operands", lambda a, b, c: lib(a).einsum("ij,jk,k->i", a, b, c),
           lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((3, 4)),
                        rng.standard_normal(4)]),
    FwCase("einsum: trace-like", lambda a: lib(a).einsum("ii->", a), n(3, 3)),
    FwCase("kron: 2d", lambda a, b: lib(a).kron(a, b), nn((2, 2), (3, 1))),
    # nn
    FwCase("softmax: dim 1", lambda a: a.softmax(1), n(3, 4)),
    FwCase("softmax: dim 0", lambda a: F(a).softmax(a, dim=0), n(3, 4)),
    FwCase("log_softmax: last", lambda a: a.log_softmax(-1), n(3, 4)),
    *[FwCase(f"{op}: 3x4", (lambda op: lambda a: getattr(F(a), op)(a))(op), n(3, 4))
      for op in ["gelu", "silu", "elu", "leaky_relu", "softplus", "hardtanh", "hardsigmoid",
                 "hardswish", "mish", "softsign", "logsigmoid"]],
    FwCase("gelu: tanh", lambda a: F(a).gelu(a, approximate="tanh"), n(5)),
    FwCase("threshold_backward: relu's backward at a fixed input",
           lambda g: ember.threshold_backward(g, ember.from_numpy(_RELU_AT), 0)
           if isinstance(g, ember.Tensor)
           else torch.ops.aten.threshold_backward(g, torch.from_numpy(_RELU_AT), 0), n(3, 4)),
    FwCase("threshold_backward: self dual too (its tangent adds nothing)",
           lambda g, s: ember.threshold_backward(g, s, 0) if isinstance(g, ember.Tensor)
           else torch.ops.aten.threshold_backward(g, s, 0), nn((3, 4), (3, 4)), reverse=False),
    # softmax's backward ops, reached by forward-over-reverse through the saved softmax result
    FwCase("_softmax_backward_data: both inputs dual",
           lambda g, y: ember._C._softmax_backward_data(g, y, 1) if isinstance(g, ember.Tensor)
           else torch.ops.aten._softmax_backward_data(g, y, 1, y.dtype), nn((3, 4), (3, 4))),
    FwCase("_log_softmax_backward_data: both inputs dual",
           lambda g, y: ember._C._log_softmax_backward_data(g, y, 0) if isinstance(g, ember.Tensor)
           else torch.ops.aten._log_softmax_backward_data(g, y, 0, y.dtype), nn((3, 4), (3, 4))),
    FwCase("sigmoid_backward: both inputs dual",
           lambda g, y: ember.sigmoid_backward(g, y) if isinstance(g, ember.Tensor)
           else torch.ops.aten.sigmoid_backward(g, y), nn((3, 4), (3, 4))),
    FwCase("tanh_backward: both inputs dual",
           lambda g, y: ember.tanh_backward(g, y) if isinstance(g, ember.Tensor)
           else torch.ops.aten.tanh_backward(g, y), nn((3, 4), (3, 4))),
    FwCase("elu: alpha", lambda a: F(a).elu(a, alpha=0.5), n(5)),
    FwCase("elu: in place", lambda a: fresh(a).elu_() if isinstance(a, ember.Tensor)
           else torch.nn.functional.elu_(fresh(a)), n(5)),
    FwCase("_activation_derivative: gelu", lambda a: ember._C._activation_derivative(a, "gelu", 1),
           n(5), torch=False),
    FwCase("elu_: alpha, scale", lambda a: fresh(a).elu_(0.5, 1.5) if isinstance(a, ember.Tensor)
           else torch.ops.aten.elu_(fresh(a), 0.5, 1.5), n(5)),
    FwCase("leaky_relu_: in place", lambda a: fresh(a).leaky_relu_(0.2)
           if isinstance(a, ember.Tensor) else torch.nn.functional.leaky_relu_(fresh(a), 0.2), n(5)),
    FwCase("threshold: 3x4", lambda a: lib(a).threshold(a, 0.1, -2.0), n(3, 4)),
    FwCase("threshold: in place", lambda a: fresh(a).threshold_(0.1, -2.0)
           if isinstance(a, ember.Tensor) else torch.threshold_(fresh(a), 0.1, -2.0), n(5)),
    # the fused activation backwards, grad_output and the input both dual
    *[FwCase(f"{op}: both inputs dual",
             (lambda op, extra: lambda g, x: getattr(ember._C, op)(g, x, *extra)
              if isinstance(g, ember.Tensor) else getattr(torch.ops.aten, op)(g, x, *extra))(
                 op, extra), nn((3, 4), (3, 4)), torch=False)
      for op, extra in [("gelu_backward", ()), ("silu_backward", ()), ("mish_backward", ()),
                        ("hardswish_backward", ()), ("hardsigmoid_backward", ()),
                        ("hardtanh_backward", (-1.0, 1.0)), ("softplus_backward", (2.0, 5.0)),
                        ("leaky_relu_backward", (0.1, False))]],
    FwCase("elu_backward: from the input and from the result",
           lambda g, x: ember._C.elu_backward(g, 0.5, 1.5, 0.8, False, x)
           + ember._C.elu_backward(g, 0.5, 1.5, 0.8, True, x) if isinstance(g, ember.Tensor)
           else torch.ops.aten.elu_backward(g, 0.5, 1.5, 0.8, False, x)
           + torch.ops.aten.elu_backward(g, 0.5, 1.5, 0.8, True, x), nn((3, 4), (3, 4)),
           torch=False),
    FwCase("nll_loss: mean", lambda a, t: F(a).nll_loss(a, t), lambda rng: [
        rng.standard_normal((3, 4)), _idx(0, 3, 1)]),
    FwCase("nll_loss: constant weight, sum",
           lambda a, t: F(a).nll_loss(a, t, lib(a).tensor([0.5, 1.0, 2.0, 1.5], dtype=a.dtype),
                                      reduction="sum"),
           lambda rng: [rng.standard_normal((3, 4)), _idx(0, 3, 1)]),
    FwCase("nll_loss: no reduction, ignore_index",
           lambda a, t: F(a).nll_loss(a, t, reduction="none", ignore_index=3),
           lambda rng: [rng.standard_normal((3, 4)), _idx(0, 3, 1)]),
    FwCase("binary_cross_entropy: mean",
           lambda p, t: F(p).binary_cross_entropy(p, t),
           lambda rng: [rng.uniform(0.1, 0.9, (3, 4)), rng.uniform(0.1, 0.9, (3, 4))]),
    FwCase("binary_cross_entropy: constant weight, none",
           lambda p, t: F(p).binary_cross_entropy(p, t, lib(p).tensor([0.5, 1.0, 2.0, 1.5],
                                                                      dtype=p.dtype),
                                                  reduction="none"),
           lambda rng: [rng.uniform(0.1, 0.9, (3, 4)), rng.uniform(0.1, 0.9, (3, 4))]),
    FwCase("_cross_entropy_loss: mean, label smoothing",
           lambda a, t: F(a).cross_entropy(a, t, label_smoothing=0.2),
           lambda rng: [rng.standard_normal((3, 4)), _idx(0, 3, 1)]),
    FwCase("_cross_entropy_loss: weight, sum, ignore_index",
           lambda a, t: F(a).cross_entropy(a, t, lib(a).tensor([0.5, 1.0, 2.0, 1.5],
                                                               dtype=a.dtype),
                                           reduction="sum", ignore_index=3),
           lambda rng: [rng.standard_normal((3, 4)), _idx(0, 3, 1)]),
    FwCase("_cross_entropy_loss: no reduction, unbatched",
           lambda a, t: F(a).cross_entropy(a, t, reduction="none", label_smoothing=0.1),
           lambda rng: [rng.standard_normal(4), np.array(2)]),
    FwCase("_scaled_dot_product_fused_attention: causal",
           lambda q, k, v: F(q).scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda rng: [rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 3)),
                        rng.standard_normal((2, 5, 4))]),
    FwCase("_scaled_dot_product_fused_attention: float mask, L != S",
           lambda q, k, v: F(q).scaled_dot_product_attention(
               q, k, v, attn_mask=lib(q).tensor(_SDPA_MASK, dtype=q.dtype)),
           lambda rng: [rng.standard_normal((1, 2, 4, 3)), rng.standard_normal((1, 2, 6, 3)),
                        rng.standard_normal((1, 2, 6, 2))]),
    FwCase("im2col: unfold", lambda a: F(a).unfold(a, 2, stride=1), n(1, 2, 3, 3)),
    FwCase("col2im: fold", lambda a: F(a).fold(a, (3, 3), 2), n(1, 8, 4)),
    FwCase("convolution: conv2d with bias", lambda x, w, b: F(x).conv2d(x, w, b, padding=1),
           lambda rng: [rng.standard_normal((2, 2, 4, 4)), rng.standard_normal((3, 2, 3, 3)),
                        rng.standard_normal(3)], noncontig=False, rtol=1e-6),
    FwCase("convolution: conv1d unbatched", lambda x, w: F(x).conv1d(x, w, stride=2),
           nn((2, 7), (3, 2, 3)), rtol=1e-6),
    FwCase("convolution: transposed", lambda x, w, b: F(x).conv_transpose2d(x, w, b, stride=2),
           lambda rng: [rng.standard_normal((1, 2, 3, 3)), rng.standard_normal((2, 3, 2, 2)),
                        rng.standard_normal(3)], noncontig=False, rtol=1e-6),
    FwCase("_max_pool: 2d", lambda a: F(a).max_pool2d(a, 2), n(2, 2, 4, 4), noncontig=False),
    FwCase("_adaptive_max_pool: 2d", lambda a: F(a).adaptive_max_pool2d(a, (2, 1)),
           n(1, 2, 4, 3), noncontig=False),
    FwCase("_fractional_max_pool: 2d", lambda a: F(a).fractional_max_pool2d(
        a, 2, output_size=(2, 3), _random_samples=_FRAC_SAMPLES(a)), n(1, 2, 5, 6),
        noncontig=False),
    FwCase("_avg_pool: 2d padding", lambda a: F(a).avg_pool2d(a, 2, padding=1), n(1, 2, 3, 3)),
    FwCase("_adaptive_avg_pool: 2d", lambda a: F(a).adaptive_avg_pool2d(a, (2, 2)),
           n(1, 2, 5, 3)),
    FwCase("embedding: rows", lambda w, i: F(w).embedding(i, w),
           lambda rng: [rng.standard_normal((4, 3)), _idx(0, 1, 3, 1).reshape(2, 2)]),
    # padding_idx only stops the reverse-mode gradient (by convention); the output still reads
    # that row, so its tangent does too, as in PyTorch.
    FwCase("embedding: padding_idx", lambda w, i: F(w).embedding(i, w, padding_idx=1),
           lambda rng: [rng.standard_normal((4, 3)), _idx(0, 1, 3, 1).reshape(2, 2)],
           reverse=False),
    FwCase("native_dropout: train", _dropout, n(4, 5), torch=False),
    # Normalization (more in test_norm_higher_order.py). torch's mean / rstd of layer and batch
    # norm carry no tangent (not differentiable there); ember's are those of the statistics.
    FwCase("native_layer_norm: affine", lambda x, w, b: F(x).layer_norm(x, (4,), w, b),
           lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(4),
                        rng.standard_normal(4)]),
    FwCase("native_layer_norm: statistics",
           lambda x: lib(x).native_layer_norm(x, (2, 3), None, None, 1e-5), n(2, 2, 3),
           torch=False),
    FwCase("native_group_norm: affine", lambda x, w, b: F(x).group_norm(x, 2, w, b),
           lambda rng: [rng.standard_normal((2, 4, 3)), rng.standard_normal(4),
                        rng.standard_normal(4)]),
    FwCase("native_group_norm: statistics",
           lambda x: (ember.native_group_norm(x, 2, None, None, 1e-5) if lib(x) is ember else
                      torch.native_group_norm(x, None, None, 2, 4, 3, 2, 1e-5)), n(2, 4, 3)),
    FwCase("native_batch_norm: train", lambda x, w, b: F(x).batch_norm(x, None, None, w, b, True),
           lambda rng: [rng.standard_normal((3, 2, 2)), rng.standard_normal(2),
                        rng.standard_normal(2)]),
    FwCase("native_batch_norm: eval", lambda x, w: F(x).batch_norm(
        x, lib(x).tensor([0.1, -0.2], dtype=x.dtype), lib(x).tensor([0.7, 1.3], dtype=x.dtype),
        w, None, False), nn((3, 2, 2), (2,))),
    FwCase("native_batch_norm: statistics", lambda x: lib(x).native_batch_norm(
        x, None, None, None, None, True, 0.1, 1e-5), n(4, 3), torch=False),
    FwCase("_fused_rms_norm: weight", lambda x, w: F(x).rms_norm(x, (2, 3), w, 1e-6),
           nn((2, 2, 3), (2, 3))),
    FwCase("_fused_rms_norm: statistics",
           lambda x, w: (ember._C._fused_rms_norm(x, (3,), w, 1e-6) if lib(x) is ember else
                         torch._fused_rms_norm(x, [3], w, 1e-6)), nn((2, 3), (3,))),
]
CASES = CASES + MORE_CASES


def _well(*shape):
    """Well-conditioned square matrices (and, with spd=True below, positive definite)."""
    k = shape[-1]
    return lambda rng: [rng.standard_normal(shape + (k,)) + 2 * k ** 0.5 * np.eye(k)]


def _spd(k):
    def make(rng):
        a = rng.standard_normal((k, k))
        return [a @ a.T + k * np.eye(k)]
    return make


def _lu_solve(lu, b, adjoint):
    """lu_solve with the LU factors and pivots of a fixed matrix."""
    if isinstance(b, ember.Tensor):
        return ember.linalg.lu_solve(*ember.linalg.lu_factor(ember.tensor(_LU_AT)), b,
                                     adjoint=adjoint)
    return torch.linalg.lu_solve(*torch.linalg.lu_factor(torch.tensor(_LU_AT)), b,
                                 adjoint=adjoint)


_LU_AT = np.random.default_rng(11).standard_normal((3, 3)) + 3 * np.eye(3)
_CROW, _COL = [0, 2, 2, 4], [1, 3, 0, 2]  # a 3x4 CSR pattern with an empty row


def _csr(op):
    """ember's CSR product kernels on the fixed pattern (no torch counterpart: ember only)."""
    def f(*ts):
        return getattr(ember._C, op)(ember.tensor(_CROW), ember.tensor(_COL), *ts)
    return f


SPARSE_CASES = [
    FwCase("_sparse_csr_mm: values and dense", _csr("_sparse_csr_mm"), nn(4, (4, 2)),
           torch=False, noncontig=False),
    FwCase("_sparse_csr_mm_t: values and dense",
           lambda v, d: _csr("_sparse_csr_mm_t")(v, d, 4), nn(4, (3, 2)), torch=False,
           noncontig=False),
    FwCase("_sparse_csr_sddmm: left and right", _csr("_sparse_csr_sddmm"), nn((3, 2), (4, 2)),
           torch=False, noncontig=False),
]
LINALG_CASES = [  # the LAPACK factorizations (ember.linalg)
    FwCase("_linalg_solve_ex: A and B", lambda a, b: lib(a).linalg.solve(a, b),
           lambda rng: _well(2, 3)(rng) + [rng.standard_normal((3, 2))]),
    FwCase("_linalg_solve_ex: inv", lambda a: lib(a).linalg.inv(a), _well(3)),
    FwCase("_linalg_det: batch", lambda a: lib(a).linalg.det(a), _well(2, 3)),
    FwCase("_linalg_slogdet: logabsdet", lambda a: lib(a).linalg.slogdet(a)[1], _well(3)),
    FwCase("_linalg_cholesky_ex: lower", lambda a: lib(a).linalg.cholesky((a + a.mT) / 2),
           _spd(3)),
    FwCase("_linalg_cholesky_ex: upper",
           lambda a: lib(a).linalg.cholesky((a + a.mT) / 2, upper=True), _spd(3)),
    # one triangle is read: only finite differences know (the gradient is the symmetric one)
    FwCase("_linalg_cholesky_ex: one triangle", lambda a: lib(a).linalg.cholesky(a), _spd(3),
           reverse=False, torch=False),
    FwCase("_linalg_solve_triangular: upper", lambda a, b: lib(a).linalg.solve_triangular(
        a, b, upper=True), lambda rng: _well(3)(rng) + [rng.standard_normal((3, 2))]),
    FwCase("_linalg_solve_triangular: right, unit", lambda a, b: lib(a).linalg.solve_triangular(
        a, b, upper=False, left=False, unitriangular=True),
        lambda rng: _well(3)(rng) + [rng.standard_normal((2, 3))]),
    FwCase("_lu_solve: B", lambda b: _lu_solve(None, b, False), n(3, 2)),
    FwCase("_lu_solve: adjoint", lambda b: _lu_solve(None, b, True), n(3, 2)),
]
CASES = CASES + LINALG_CASES + SPARSE_CASES


def _aten(name, *args):
    """ember._C.<name> or torch.ops.aten.<name> applied to a tensor and fixed arguments."""
    def call(a):
        fn = getattr(ember._C, name) if isinstance(a, ember.Tensor) else getattr(torch.ops.aten, name)
        return fn(a, *args)
    return call


_UPSAMPLE = [  # (op, spatial input size, output size, extra args after output_size)
    ("upsample_nearest1d", (5,), [8], [None]),
    ("upsample_nearest2d", (3, 4), [5, 7], [None, None]),
    ("upsample_nearest3d", (2, 3, 2), [3, 5, 4], [None, None, None]),
    ("_upsample_nearest_exact1d", (5,), [7], [None]),
    ("_upsample_nearest_exact2d", (3, 4), [6, 3], [None, None]),
    ("_upsample_nearest_exact3d", (2, 3, 2), [4, 2, 3], [None, None, None]),
    ("upsample_linear1d", (5,), [8], [False, None]),
    ("upsample_bilinear2d", (3, 4), [5, 7], [True, None, None]),
    ("upsample_trilinear3d", (2, 3, 2), [3, 5, 4], [False, None, None, None]),
    ("upsample_bicubic2d", (3, 4), [5, 7], [False, None, None]),
]
UPSAMPLE_CASES = [
    *[FwCase(f"{op}: (1, 2, *{size}) to {out}", _aten(op, out, *extra), n(1, 2, *size))
      for op, size, out, extra in _UPSAMPLE],
    *[FwCase(f"{op}_backward: to {size}", _aten(f"{op}_backward", out, [1, 2, *size], *extra),
             n(1, 2, *out))
      for op, size, out, extra in _UPSAMPLE],
    FwCase("_pad_backward: reflect", lambda g: ember._C._pad_backward(g, [1, 2, 4], [2, 1],
                                                                      "reflect"),
           n(1, 2, 7), torch=False),
    FwCase("_pad_backward: circular 2d",
           lambda g: ember._C._pad_backward(g, [1, 3, 4], [1, 1, 2, 0], "circular"),
           n(1, 5, 6), torch=False),
]
CASES = CASES + UPSAMPLE_CASES


def _lib(a):
    return ember if isinstance(a, ember.Tensor) else torch


# Real inputs through complex intermediates (test_forward_ad_complex.py has complex duals).
COMPLEX_CASES = [
    FwCase("complex: abs of complex(a, b)", lambda a, b: _lib(a).complex(a, b).abs(), nn((3, 4), (3, 4))),
    FwCase("angle: of complex(a, b)", lambda a, b: _lib(a).complex(a, b).angle(), nn((3, 4), (3, 4))),
    FwCase("angle: real input", lambda a: a.angle() + a, n(3)),
    FwCase("real: of a complex product",
           lambda a, b: _lib(a).real(_lib(a).complex(a, b) * (1 + 2j)), nn((3, 4), (3, 4))),
    FwCase("imag: of a complex product",
           lambda a, b: _lib(a).imag(_lib(a).complex(a, b) * _lib(a).complex(b, a)), nn((3, 4), (3, 4))),
    FwCase("conj_physical: imag of it",
           lambda a, b: _lib(a).imag(_lib(a).conj_physical(_lib(a).complex(a, b).exp())),
           nn((3, 4), (3, 4))),
    FwCase("view_as_real: of a complex product",
           lambda a, b: _lib(a).view_as_real(_lib(a).complex(a, b) * _lib(a).complex(b, a)),
           nn((3, 4), (3, 4))),
    FwCase("view_as_complex: abs", lambda a: _lib(a).view_as_complex(a * 1.0).abs(), n(3, 2),
           noncontig=False),
]
CASES = CASES + COMPLEX_CASES


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
    ops = {name for name, info in DB.items() if info.forward_ad}
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
        with pytest.raises(ValueError, match="tangent to be floating point or complex, but got "
                                             "int64"):
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
        import ember.nn.functional as F
        _, mean, rstd = ember.native_layer_norm(ember.ones(2, 3), (3,), None, None, 1e-5)
        with pytest.raises(NotImplementedError, match="forward-mode AD for "
                           "'native_layer_norm_backward' is not implemented"):
            ember.native_layer_norm_backward(d, d, (3,), mean, rstd, None, True, False, False)
        with pytest.raises(NotImplementedError, match="forward-mode AD for 't_' is not implemented"):
            (d * 1.0).t_()  # in-place views keep no tangent
        # Ops whose tangent formula covers only some arguments or modes say which.
        i = ember.tensor([[0, 1, 2]])
        with pytest.raises(NotImplementedError, match=r"'scatter \(reduce='multiply'\)'"):
            d.scatter(1, i, d[:1], reduce="multiply")
        with pytest.raises(NotImplementedError, match=r"'scatter_reduce \(reduce='amax'\)'"):
            d.scatter_reduce(1, i, d[:1], "amax")
        w = fwAD.make_dual(ember.ones(3), ember.ones(3))
        with pytest.raises(NotImplementedError, match="'nll_loss' with respect to argument 'weight'"):
            F.nll_loss(ember.zeros(2, 3), ember.tensor([0, 2]), w)
        with pytest.raises(NotImplementedError, match="forward-mode AD for 'uniform_'"):
            (d * 1.0).uniform_()
        lo = fwAD.make_dual(ember.zeros(3), ember.ones(3))
        with pytest.raises(NotImplementedError, match="'clamp' with respect to argument 'min'"):
            ember.ones(3).clamp(lo, None)
        # Without a tangent the same ops work inside the level.
        assert ember.ones(2).cumsum(0).tolist() == [1.0, 2.0]
        assert F.layer_norm(ember.ones(2, 3), (3,)).shape == (2, 3)


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
