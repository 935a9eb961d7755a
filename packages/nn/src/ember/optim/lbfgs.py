"""L-BFGS with an optional strong-Wolfe line search."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember import Tensor
from ember.optim._functional import scalar_div
from ember.optim.optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_minimum(x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any, bounds: Any = None) -> Any:
    """Minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to the bounds
    (default: the interval between x1 and x2); the midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_sq = d1**2 - g1 * g2
    if d2_sq >= 0:
        d2 = d2_sq.sqrt() if isinstance(d2_sq, Tensor) else d2_sq**0.5
        if x1 <= x2:
            xmin = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            xmin = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(xmin, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(
    obj: Callable,
    x: list[Tensor],
    t: Any,
    d: Tensor,
    f: float,
    g: Tensor,
    gtd: Tensor,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> tuple[float, Tensor, Any, int]:
    """Line search along d for a step t satisfying the strong Wolfe conditions.

    Returns (loss, flat gradient, t, number of function evaluations).
    """
    d_norm = d.abs().max()
    g = g.clone()
    f_new, g_new = obj(x, t, d)
    evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    it = 0
    # bracketing phase: find an interval holding a point that satisfies the conditions
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            br, br_f, br_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        # extrapolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.clone(), gtd_new
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        it += 1
    if it == max_ls:
        br, br_f, br_g = [0, t], [f, f_new], [g, g_new]
    # zoom phase: shrink the bracket until a point satisfies the conditions
    insufficient = False
    low, high = (0, 1) if br_f[0] <= br_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(br[1] - br[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1])
        # a point too close to the bracket's ends makes little progress: move it inside
        eps = 0.1 * (max(br) - min(br))
        if min(max(br) - t, t - min(br)) < eps:
            if insufficient or t >= max(br) or t <= min(br):
                t = max(br) - eps if abs(t - max(br)) < abs(t - min(br)) else min(br) + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d)
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= br_f[low]:
            br[high], br_f[high], br_g[high], br_gtd[high] = t, f_new, g_new.clone(), gtd_new
            low, high = (0, 1) if br_f[0] <= br_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[high] - br[low]) >= 0:
                br[high], br_f[high], br_g[high], br_gtd[high] = br[low], br_f[low], br_g[low], br_gtd[low]
            br[low], br_f[low], br_g[low], br_gtd[low] = t, f_new, g_new.clone(), gtd_new
    return br_f[low], br_g[low], br[low], evals


def _num(x: Any) -> float:
    return x.item() if isinstance(x, Tensor) else float(x)



def _real(t: Tensor) -> Tensor:
    """``t`` as reals: a complex tensor's ``view_as_real`` (sharing its memory)."""
    return ember.view_as_real(t) if t.is_complex() else t

class LBFGS(Optimizer):
    """``LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
    tolerance_change=1e-9, history_size=100, line_search_fn=None)``.

    One parameter group only; ``step(closure)`` needs a closure that zeroes the gradients,
    computes the loss, calls ``backward()`` and returns the loss. Keeps the history of all
    parameters flattened into vectors.

    >>> import ember
    >>> w = ember.nn.Parameter(ember.tensor([3.0]))
    >>> opt = ember.optim.LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 1) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> round(w.item(), 4)
    1.0
    """

    _state_shaped_like_params = False  # d, old_dirs, prev_flat_grad: flat over all parameters

    def __init__(
        self,
        params: Any,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(
                f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}"
            )
        defaults = dict(
            lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change, history_size=history_size,
            line_search_fn=line_search_fn,
        )
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache: int | None = None

    def _check_group(self, group: dict[str, Any]) -> None:
        self._check_lr(group)
        for k in ("max_iter", "max_eval", "history_size"):
            if not (isinstance(group[k], int) and group[k] > 0):
                self._fail(f"{k} must be a positive int, got {group[k]!r}")

    def _numel(self) -> int:
        if self._numel_cache is None:
            # a complex parameter takes part as the pair of reals it holds (as in PyTorch)
            self._numel_cache = sum(_real(p).numel() for p in self._params)
        return self._numel_cache

    def _flat_grad(self) -> Tensor:
        views = []
        for p in self._params:
            if p.grad is None:
                views.append(ember.zeros(_real(p).numel(), dtype=_real(p).dtype))
            else:
                # a sparse gradient (an Embedding(sparse=True)) joins the flat vector densely
                g = p.grad.to_dense() if p.grad.is_sparse else p.grad
                views.append(_real(g).reshape(-1))
        return ember.cat(views, 0)

    def _add_grad(self, step_size: Any, update: Tensor) -> None:
        offset = 0
        alpha = _num(step_size)
        for p in self._params:
            r = _real(p)
            n = r.numel()
            r.add_(update[offset:offset + n].view_as(r), alpha=alpha)
            offset += n

    def _clone_params(self) -> list[Tensor]:
        return [p.clone() for p in self._params]

    def _set_params(self, data: list[Tensor]) -> None:
        for p, d in zip(self._params, data):
            p.copy_(d)

    def _directional_evaluate(self, closure: Callable, x: list[Tensor], t: Any, d: Tensor) -> tuple[float, Tensor]:
        self._add_grad(t, d)
        loss = float(closure())
        g = self._flat_grad()
        self._set_params(x)
        return loss, g

    @ember.no_grad()
    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Runs up to ``max_iter`` L-BFGS iterations; returns the loss of the first evaluation."""
        if closure is None:
            raise RuntimeError("LBFGS.step() requires a closure that re-evaluates the loss")
        group = self.param_groups[0]
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]

        def evaluate() -> Any:
            with ember.enable_grad():
                return closure()

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().max() <= tol_grad:
            return orig_loss

        d = state.get("d")
        t = state.get("t")
        old_dirs = state.get("old_dirs")
        old_stps = state.get("old_stps")
        ro = state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad = state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                # update the curvature pairs, then the two-loop recursion for d = -H g
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(scalar_div(1.0, ys))
                    H_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-_num(al[i]))
                d = r = ember.mul(q, H_diag)
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=_num(al[i] - be_i))

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the first step is scaled down by the gradient's size
            if state["n_iter"] == 1:
                t = min(1.0, scalar_div(1.0, flat_grad.abs().sum())) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tol_change:
                break

            ls_evals = 0
            if group["line_search_fn"] is not None:
                x0 = self._clone_params()

                def obj(x: list[Tensor], step: Any, direction: Tensor) -> tuple[float, Tensor]:
                    return self._directional_evaluate(evaluate, x, step, direction)

                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    obj, x0, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals
                )
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max() <= tol_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._flat_grad()
                    opt_cond = flat_grad.abs().max() <= tol_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.mul(t).abs().max() <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return orig_loss
