"""Adafactor (Shazeer & Stern, 2018) with PyTorch's choices: ``lr`` caps the relative step size
and scales the decoupled weight decay, epsilon1 guards the variance estimate and the update
(not the factors), and the factors are means of the squared gradient (not sums)."""

from __future__ import annotations

import math
from typing import Any, Callable

import ember
from ember.optim.optimizer import Optimizer, _grad_of, _init_step

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """``Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
    weight_decay=0.0, *, foreach=None, maximize=False)``.

    A matrix (or a batch of matrices: the last two dims) keeps only a row and a column factor
    of its squared-gradient average (``row_var``, ``col_var``); other parameters keep the full
    ``variance``. Each step, with t the step count: beta2 = 1 - t^beta2_decay, the relative
    step min(lr, 1/sqrt(t)) times max(eps2, RMS(param)), the update grad / sqrt(V) (V at least
    eps1^2, eps1 = the dtype's machine epsilon when None) scaled down to RMS at most ``d``.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.ones(2, 2))
    >>> opt = ember.optim.Adafactor([w])
    >>> w.grad = ember.tensor([[1.0, -1.0], [2.0, 0.5]])
    >>> opt.step()
    >>> sorted(opt.state[w])
    ['col_var', 'row_var', 'step']
    """

    _name = "Adafactor"
    _state_shaped_like_params = False  # the row / column factors are not

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_lr(group)
        eps = group["eps"]
        if group["beta2_decay"] > 0.0:
            self._fail(f"invalid beta2_decay {group['beta2_decay']} (expected <= 0)")
        if not (isinstance(eps, (tuple, list)) and len(eps) == 2):
            self._fail(f"eps must be a pair (epsilon1 or None, epsilon2), got {eps!r}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            self._fail(f"invalid epsilon1 {eps[0]} (expected >= 0)")
        if not 0.0 <= eps[1]:
            self._fail(f"invalid epsilon2 {eps[1]} (expected >= 0)")
        if not 1.0 <= group["d"]:
            self._fail(f"invalid clipping threshold d {group['d']} (expected >= 1)")
        self._check_nonneg(group, "weight_decay")

    def _state_for(self, p: ember.Tensor) -> dict[str, Any]:
        st = self.state[p]
        if not st:
            if p.is_complex():
                raise RuntimeError("Adafactor does not support complex parameters")
            st["step"] = _init_step()
            if p.dim() > 1:
                shape = list(p.shape)
                st["row_var"] = ember.zeros(shape[:-1] + [1], dtype=p.dtype, device=p.device)
                st["col_var"] = ember.zeros(shape[:-2] + [1, shape[-1]], dtype=p.dtype,
                                            device=p.device)
            else:
                st["variance"] = ember.zeros_like(p)
        return st

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            lr = float(group["lr"])
            eps1, eps2 = group["eps"]
            for p in self._params_with_grad(group):
                grad = _grad_of(p, self._name)
                if grad.is_sparse:
                    raise RuntimeError("Adafactor does not support sparse gradients")
                if group["maximize"]:
                    grad = -grad
                st = self._state_for(p)
                st["step"] += 1
                t = float(st["step"])
                one_minus_beta2 = t ** group["beta2_decay"]  # 1 - beta2_t
                rho = min(lr, 1.0 / math.sqrt(t))
                rms = p.norm(2).item() / math.sqrt(p.numel()) if p.numel() else 0.0
                alpha = max(eps2, rms) * rho
                if group["weight_decay"] != 0:
                    p.mul_(1.0 - lr * group["weight_decay"])
                e1 = ember.finfo(p.dtype).eps if eps1 is None else eps1
                sq = grad * grad
                if grad.dim() > 1:
                    row, col = st["row_var"], st["col_var"]
                    row.lerp_(sq.mean(dim=-1, keepdim=True), one_minus_beta2)
                    col.lerp_(sq.mean(dim=-2, keepdim=True), one_minus_beta2)
                    v = (row @ col) / row.mean(dim=-2, keepdim=True).clamp(min=e1)
                else:
                    v = st["variance"].lerp_(sq, one_minus_beta2)
                update = v.clamp(min=e1 * e1).rsqrt() * grad
                u_rms = update.norm(2).item() / math.sqrt(update.numel()) if update.numel() else 0.0
                p.add_(update, alpha=-alpha / max(1.0, u_rms / group["d"]))
        return loss
