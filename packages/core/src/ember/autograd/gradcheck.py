"""Numerical gradient checks: compare autograd's gradients with central finite differences."""

from __future__ import annotations

from typing import Callable, Sequence

from ember._C import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical gradients disagree."""


def _inputs(inputs) -> tuple:
    return (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)


def _numerical(fn: Callable, inputs: tuple, eps: float) -> list[list[list[float]]]:
    """jac[i][j][k]: d output_k / d (input i, element j), by central differences."""
    import ember

    jac = []
    for t in inputs:
        rows = []
        if not (isinstance(t, Tensor) and t.requires_grad):
            jac.append(rows)
            continue
        flat = t.detach().reshape(-1)
        for j in range(t.numel()):
            orig = flat[j].item()
            with ember.no_grad():
                flat[j] = orig + eps
                plus = _flat_outputs(fn(*inputs))
                flat[j] = orig - eps
                minus = _flat_outputs(fn(*inputs))
                flat[j] = orig
            rows.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
        jac.append(rows)
    return jac


def _flat_outputs(out) -> list[float]:
    outs = (out,) if isinstance(out, Tensor) else tuple(out)
    vals: list[float] = []
    for o in outs:
        vals.extend(o.detach().reshape(-1).tolist())
    return vals


def gradcheck(
    func: Callable,
    inputs: Tensor | Sequence[Tensor],
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Checks the gradients of ``func`` at ``inputs`` (float64 tensors that require grad) against
    finite differences; on mismatch raises naming the input and element that disagree.

    >>> import ember
    >>> x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradcheck(lambda t: (t * t).sum(), x)
    True
    """
    import ember

    inputs = _inputs(inputs)
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad and t.dtype is not ember.float64:
            raise GradcheckError(f"gradcheck: input {i} is {t.dtype!r}; use float64 inputs")
    out = func(*inputs)
    outs = (out,) if isinstance(out, Tensor) else tuple(out)
    n_out = sum(o.numel() for o in outs)
    diff_inputs = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    # Analytical Jacobian, one output element at a time (vector-Jacobian products).
    analytical = [[[0.0] * n_out for _ in range(t.numel())] for t in diff_inputs]
    k = 0
    for o in outs:
        for e in range(o.numel()):
            seed = ember.zeros(o.numel(), dtype=o.dtype)
            seed[e] = 1.0
            grads = ember.autograd.grad(o, diff_inputs, seed.reshape(o.shape), retain_graph=True,
                                        allow_unused=True)
            for i, g in enumerate(grads):
                if g is None:
                    continue
                for j, v in enumerate(g.reshape(-1).tolist()):
                    analytical[i][j][k] = v
            k += 1
    del out, outs  # the finite differences below write into the inputs
    numerical = _numerical(func, inputs, eps)
    di = 0
    for idx, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        for j in range(t.numel()):
            for kk in range(n_out):
                a, n = analytical[di][j][kk], numerical[idx][j][kk]
                if abs(a - n) > atol + rtol * abs(n):
                    msg = (f"gradcheck: Jacobian mismatch for output element {kk} with respect to "
                           f"input {idx}, element {j}: analytical {a!r} vs numerical {n!r}")
                    if raise_exception:
                        raise GradcheckError(msg)
                    return False
        di += 1
    return True
