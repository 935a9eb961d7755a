"""Adagrad."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.optim import _functional as F
from ember.optim.optimizer import Optimizer, _grad_of, _init_step, _real_views

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, *, maximize=False)``.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([1.0]))
    >>> opt = ember.optim.Adagrad([w], lr=0.5)
    >>> w.grad = ember.tensor([2.0])
    >>> opt.step()
    >>> round(w.item(), 4)
    0.5
    """

    _name = "Adagrad"
    _nonneg = ("lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        defaults = dict(  # PyTorch's key order: param_groups print the same
            lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value, foreach=foreach,
            maximize=maximize, differentiable=differentiable, fused=fused,
        )
        super().__init__(params, defaults)
        # the accumulators exist from the start (so that share_memory() can see them)
        for group in self.param_groups:
            self._init_state(group)

    def _init_state(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            st = self.state[p]
            if not st:
                st["step"] = _init_step()
                v = group["initial_accumulator_value"]
                # a complex parameter's real and imaginary parts each start at v (PyTorch's)
                st["sum"] = ember.full_like(p, complex(v, v) if p.is_complex() else v)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        if hasattr(self, "state"):
            self._init_state(self.param_groups[-1])

    def share_memory(self) -> None:
        """Moves the accumulators to shared memory (for Hogwild-style training)."""
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"].share_memory_()

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            self._init_state(group)
            params = self._params_with_grad(group)
            grads = [_grad_of(p, self._name, group["weight_decay"]) for p in params]
            sums = [self.state[p]["sum"] for p in params]
            steps = [self.state[p]["step"] for p in params]
            if any(p.is_complex() for p in params):  # updated as pairs of reals, as Adam's
                params, grads, sums = _real_views(params), _real_views(grads), _real_views(sums)
            F.adagrad(
                params, grads, sums, steps, lr=group["lr"], weight_decay=group["weight_decay"],
                lr_decay=group["lr_decay"], eps=group["eps"], maximize=group["maximize"],
            )
        return loss
