"""The one runner behind the gradient tables (test_grad_*.py): a case is an ember function, the
same function for torch, and float64 inputs; the runner checks it four ways.

1. gradcheck: autograd's gradients against central finite differences;
2. the same with non-contiguous inputs (every-other-element views of larger buffers);
3. gradients equal to torch's for a random upstream gradient (where torch is installed);
4. optionally second derivatives (create_graph=True) equal to torch's double backward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import ember
import numpy as np
from core_helpers import torch
from ember.autograd import gradcheck


def lib(x):
    """The module (ember or torch) a tensor belongs to, for cases like lib(a).cat([a, b])."""
    return torch if torch is not None and isinstance(x, torch.Tensor) else ember


@dataclass
class GradCase:
    name: str
    fn: Callable  # ember tensors -> tensor (or tuple of tensors)
    inputs: Callable[[np.random.Generator], list]  # NumPy arrays (differentiable) or other args
    torch_fn: Callable | None = None  # defaults to fn (method calls work on both libraries)
    gradgrad: bool = True  # check second derivatives against torch
    noncontig: bool = True
    rtol: float = 1e-6
    atol: float = 1e-9
    marks: list = field(default_factory=list)


def _ember_inputs(arrays, noncontig: bool = False):
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype == np.float64:
            if noncontig and a.ndim > 0 and a.size > 1:
                big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
                big[..., ::2] = a
                t = ember.tensor(big)[..., ::2]
                assert not t.is_contiguous()
                t.requires_grad_(True)
            else:
                t = ember.tensor(a, requires_grad=True)
            out.append(t)
        elif isinstance(a, np.ndarray):
            out.append(ember.tensor(a))
        else:
            out.append(a)
    return out


def _torch_inputs(arrays):
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype == np.float64:
            out.append(torch.tensor(a, requires_grad=True))
        elif isinstance(a, np.ndarray):
            out.append(torch.tensor(a))
        else:
            out.append(a)
    return out


def _outputs(r) -> list:
    rs = list(r) if isinstance(r, (tuple, list)) else [r]
    return [x for x in rs if x.dtype in (ember.float64, ember.float32) or
            (torch is not None and isinstance(x, torch.Tensor) and x.is_floating_point())]


def _diff(xs) -> list:
    return [x for x in xs if hasattr(x, "requires_grad") and x.requires_grad]


def run_case(case: GradCase, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    arrays = case.inputs(rng)
    # 1 and 2: finite differences, contiguous and strided inputs.
    variants = [False, True] if case.noncontig else [False]
    for nc in variants:
        xs = _ember_inputs(arrays, nc)
        diff_idx = [i for i, x in enumerate(xs) if hasattr(x, "requires_grad") and x.requires_grad]

        def f(*d, xs=xs, diff_idx=diff_idx):
            full = list(xs)
            for i, t in zip(diff_idx, d):
                full[i] = t
            return tuple(_outputs(case.fn(*full)))

        assert gradcheck(f, [xs[i] for i in diff_idx]), f"{case.name}: gradcheck (noncontig={nc})"
    if torch is None:
        return
    # 3: first derivatives against torch, with the same random upstream gradients.
    xs = _ember_inputs(arrays)
    txs = _torch_inputs(arrays)
    outs = _outputs(case.fn(*xs))
    touts = _outputs((case.torch_fn or case.fn)(*txs))
    assert len(outs) == len(touts), f"{case.name}: {len(outs)} outputs vs torch's {len(touts)}"
    ups = [rng.standard_normal(tuple(o.shape)) for o in outs]
    grads = ember.autograd.grad(outs, _diff(xs), [ember.tensor(u) for u in ups],
                                create_graph=case.gradgrad, allow_unused=True)
    tgrads = torch.autograd.grad(touts, _diff(txs), [torch.tensor(u) for u in ups],
                                 create_graph=case.gradgrad, allow_unused=True)
    for k, (g, tg) in enumerate(zip(grads, tgrads)):
        if tg is None:
            assert g is None or not np.any(g.detach().numpy()), f"{case.name}: grad {k}"
            continue
        assert g is not None, f"{case.name}: no gradient for input {k} (torch has one)"
        np.testing.assert_allclose(g.detach().numpy(), _torch_np(tg), rtol=case.rtol,
                                   atol=case.atol, err_msg=f"{case.name}: gradient {k}")
    if not case.gradgrad:
        return
    # 4: second derivatives, through a random projection of the first ones. A first derivative
    # that does not require grad (on either side) is constant: its second derivative is zero.
    pairs = [(g, tg) for g, tg in zip(grads, tgrads) if g is not None and tg is not None]
    if not pairs:
        return
    vs = [rng.standard_normal(tuple(g.shape)) for g, _ in pairs]
    terms = [(g * ember.tensor(v)).sum() for (g, _), v in zip(pairs, vs) if g.requires_grad]
    tterms = [(tg * torch.tensor(v)).sum() for (_, tg), v in zip(pairs, vs) if tg.requires_grad]
    n = len(_diff(xs))
    gg = ember.autograd.grad(sum(terms), _diff(xs), allow_unused=True) if terms else [None] * n
    tgg = torch.autograd.grad(sum(tterms), _diff(txs), allow_unused=True) if tterms else [None] * n
    for k, (g, tg, x) in enumerate(zip(gg, tgg, _diff(xs))):
        want = np.zeros(tuple(x.shape)) if tg is None else _torch_np(tg)
        got = np.zeros(tuple(x.shape)) if g is None else g.detach().numpy()
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: second derivative {k}")


def _torch_np(t) -> np.ndarray:
    """A torch tensor's values, including torch's ZeroTensor (an all-zero gradient without
    memory, which .numpy() refuses)."""
    t = t.detach()
    if t._is_zerotensor():
        return np.zeros(tuple(t.shape))
    return t.numpy(force=True)
