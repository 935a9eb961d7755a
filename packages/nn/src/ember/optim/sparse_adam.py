"""SparseAdam: Adam for sparse gradients (``nn.Embedding(sparse=True)``)."""

from __future__ import annotations

import math
from typing import Any, Callable

import ember
from ember.optim.optimizer import Optimizer

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """``SparseAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False)``.

    Lazy Adam for sparse gradients: only the rows present in a step's gradient update their
    moments and their parameter; the bias corrections use the parameter's step count. Dense
    gradients are refused, as in PyTorch.

    >>> import ember
    >>> emb = ember.nn.Embedding(10, 3, sparse=True)
    >>> opt = ember.optim.SparseAdam(emb.parameters(), lr=0.1)
    >>> emb(ember.tensor([1, 2])).sum().backward()
    >>> opt.step()
    """

    _name = "SparseAdam"
    _nonneg = ("eps",)
    _has_betas = True

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        super()._check_group(group)
        if not 0.0 < group["eps"]:
            self._fail(f"invalid epsilon value: {group['eps']} (expected eps > 0)")
        complex_at = [i for i, p in enumerate(group["params"]) if p.is_complex()]
        if complex_at:
            raise ValueError(f"SparseAdam does not support complex parameters (those at indices "
                             f"{complex_at} of the group)")

    @ember.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of the rows of every parameter that has a (sparse) gradient."""
        loss = self._eval_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps = group["lr"], group["eps"]
            for p in self._params_with_grad(group):
                g = p.grad
                if isinstance(g, ember.Tensor):
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
                g = g.to_sparse_coo().coalesce()
                if g.sparse_dim() != 1:
                    raise NotImplementedError("SparseAdam: only gradients with one sparse dim "
                                              "(rows, as nn.Embedding's) are supported, got "
                                              f"sparse_dim {g.sparse_dim()}")
                rows, vals = g._indices()[0], g._values()
                if group["maximize"]:
                    vals = -vals
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = ember.zeros_like(p)
                    st["exp_avg_sq"] = ember.zeros_like(p)
                st["step"] += 1
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m_rows = m[rows] * beta1 + vals * (1 - beta1)
                v_rows = v[rows] * beta2 + vals * vals * (1 - beta2)
                m[rows] = m_rows
                v[rows] = v_rows
                step = st["step"]
                step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
                p.index_add_(0, rows, m_rows / (v_rows.sqrt() + eps), alpha=-step_size)
        return loss
