"""Adam and AdamW (with amsgrad)."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim import _functional as F
from ember.optim.optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
    maximize=False, decoupled_weight_decay=False)``.

    ``weight_decay`` adds ``weight_decay * param`` to the gradient (L2); with
    ``decoupled_weight_decay=True`` it shrinks the parameter directly (AdamW).

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    _decoupled_default = False
    _name = "Adam"
    _nonneg = ("eps", "weight_decay")
    _has_betas = True

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool | None = None,
    ) -> None:
        if decoupled_weight_decay is None:
            decoupled_weight_decay = self._decoupled_default
        defaults = dict(  # PyTorch's key order: param_groups print the same
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
            maximize=maximize, foreach=foreach, capturable=capturable,
            differentiable=differentiable, fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            keys = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])
            params, grads, steps, st = self._gather(group, keys)
            beta1, beta2 = group["betas"]
            update = F.fused_adam if F.use_fused(self._name, group, params) else F.adam
            update(
                params, grads, st["exp_avg"], st["exp_avg_sq"], st.get("max_exp_avg_sq", []),
                steps, amsgrad=group["amsgrad"], beta1=beta1,
                beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"], eps=group["eps"],
                maximize=group["maximize"],
                decoupled_weight_decay=group["decoupled_weight_decay"],
            )
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay: ``AdamW(params, lr=1e-3, betas=(0.9, 0.999),
    eps=1e-8, weight_decay=1e-2, amsgrad=False, *, maximize=False)``.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> w.grad = ember.zeros(1)
    >>> opt.step()
    >>> round(w.item(), 4)
    0.95
    """

    _decoupled_default = True
    _name = "AdamW"

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
            fused=fused, decoupled_weight_decay=True,
            differentiable=differentiable, capturable=capturable,
        )
