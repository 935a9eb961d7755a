"""Weight and spectral normalization as parametrizations (``ember.nn.utils.parametrize``).

>>> import ember
>>> from ember.nn.utils import parametrizations
>>> m = parametrizations.weight_norm(ember.nn.Linear(20, 40))
>>> sorted(n for n, _ in m.named_parameters())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
>>> m = parametrizations.spectral_norm(ember.nn.Linear(20, 40))
>>> m.parametrizations.weight[0]._u.shape
ember.Size([40])
>>> q = parametrizations.orthogonal(ember.nn.Linear(3, 3)).weight
>>> bool(ember.allclose(q @ q.T, ember.eye(3), atol=1e-5))
True
"""

from __future__ import annotations

import math
from typing import Any

import ember
import numpy as np
from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.nn.utils.spectral_norm import _output_dim, _weight_matrix
from ember.nn.utils.weight_norm import _norm_except_dim, _weight_norm

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    """weight = g * v / ||v|| (norm over every dim but ``dim``; ``dim=None``: whole tensor)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return _norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Parametrizes ``module.<name>`` as ``g * v / ||v||``: ``original0`` is the magnitude g,
    ``original1`` the direction v (both new parameters: add them to the optimizer). The norm
    is over every dimension but ``dim`` (the whole tensor with ``dim=None``). State dicts of
    the hook-based ``nn.utils.weight_norm`` (``<name>_g``/``<name>_v``) load into it."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _compat_hook(
        mod: Module, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
        missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str],
    ) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module.register_load_state_dict_pre_hook(_compat_hook)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma the largest singular value of the weight seen as a matrix
    (estimated by power iteration, one step per forward in training mode)."""

    def __init__(
        self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                f"spectral_norm: dimension out of range (expected to be in range of [{-ndim}, "
                f"{ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            # a 1-D weight is normalized exactly (no estimate needed, see forward)
            self.n_power_iterations = n_power_iterations
            mat = self._reshape_weight_to_matrix(weight)
            h, w = mat.shape
            opts: dict[str, Any] = {"dtype": weight.dtype, "device": weight.device}
            self.register_buffer("_u", F.normalize(ember.randn(h, **opts), dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(ember.randn(w, **opts), dim=0, eps=self.eps))
            # start from reasonable singular vectors
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _weight_matrix(weight, self.dim)

    def _power_method(self, mat: Tensor, n_power_iterations: int) -> None:
        # u and v are updated in place: they are buffers (shared with replicas)
        with ember.no_grad():
            mat = mat.detach()
            for _ in range(n_power_iterations):
                F.normalize(ember.mv(mat, self._v), dim=0, eps=self.eps, out=self._u)
                F.normalize(ember.mv(mat.mH, self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        # clones: the next power iteration modifies the buffers that sigma's graph would keep
        u = self._u.clone()
        v = self._v.clone()
        sigma = ember.vdot(u, ember.mv(mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Parametrizes ``module.<name>`` as itself divided by its spectral norm (largest
    singular value), estimated by power iteration with the vectors kept as buffers
    ``parametrizations.<name>[0]._u``/``_v``; ``dim`` is the output dimension (1 for
    transposed convolutions, else 0, by default). Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    dim = _output_dim(module, dim)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module


# ---- orthogonal ----------------------------------------------------------------------------------
def _eye_like(a: Tensor, n: int) -> Tensor:
    eye = ember.eye(n, dtype=a.dtype, device=a.device)
    return eye.expand(*a.shape[:-2], n, n) if a.ndim > 2 else eye


def _matrix_exp(a: Tensor) -> Tensor:
    """exp of a batch of square matrices, differentiable: scaling and squaring around a Taylor
    series (degree 18 on a matrix of 1-norm <= 1/2: accurate to double precision)."""
    n = a.shape[-1]
    with ember.no_grad():
        norm = float(a.detach().abs().sum(-2).max().item()) if a.numel() else 0.0
    squarings = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    x = a / (2.0**squarings)
    eye = _eye_like(a, n)
    e = eye
    for k in range(18, 0, -1):  # Horner: I + x/1 (I + x/2 (I + ...))
        e = eye + (x @ e) / k
    for _ in range(squarings):
        e = e @ e
    return e


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """The first k columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i = (0, ..., 0, 1,
    a[i+1:, i]) (what LAPACK's orgqr computes), differentiable in a and tau."""
    m, k = a.shape[-2], a.shape[-1]
    q = _eye_like(a, m)
    rows = ember.arange(m, device=a.device)
    for i in range(k):
        below = (rows > i).to(a.dtype)
        unit = (rows == i).to(a.dtype)
        v = a[..., :, i] * below + unit  # (..., m)
        qv = (q @ v.unsqueeze(-1))  # (..., m, 1)
        q = q - tau[..., i, None, None] * qv * v.unsqueeze(-2)
    return q[..., :, :k]


def _geqrf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR in LAPACK's storage (R on and above the diagonal, the reflectors' tails
    below it, and their tau), for one tall real matrix."""
    r = np.array(a, dtype=np.float64, copy=True)
    m, n = r.shape
    tau = np.zeros(min(m, n))
    for j in range(min(m, n)):
        alpha, tail = r[j, j], r[j + 1:, j]
        xnorm = float(np.linalg.norm(tail))
        if xnorm == 0.0:
            continue  # H = I: tau 0
        beta = -math.copysign(math.hypot(alpha, xnorm), alpha)
        tau[j] = (beta - alpha) / beta
        v = np.concatenate(([1.0], tail / (alpha - beta)))
        r[j:, j:] -= tau[j] * np.outer(v, v @ r[j:, j:])
        r[j, j] = beta
        r[j + 1:, j] = v[1:]
    return r, tau


def _to_numpy(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _from_numpy(a: np.ndarray, like: Tensor) -> Tensor:
    return ember.from_numpy(np.ascontiguousarray(a)).to(dtype=like.dtype, device=like.device)


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of A = QR with diag(R) >= 0 (A tall, batched), computed without autograd."""
    arr = _to_numpy(a).astype(np.complex128 if a.is_complex() else np.float64)
    q, r = np.linalg.qr(arr)
    d = np.diagonal(r, axis1=-2, axis2=-1)
    # the sign (complex: the phase) of diag(R) moved into Q; a zero counts as +1
    signs = np.where(d == 0, 1.0, d / np.where(d == 0, 1.0, np.abs(d)))
    return _from_numpy(q * signs[..., None, :], a)


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * ember.finfo(q.dtype).eps
    return bool(ember.allclose(q.mH @ q, _eye_like(q, k), atol=eps))


_ORTH_MAPS = ("matrix_exp", "cayley", "householder")


class _Orthogonal(Module):
    """Maps an unconstrained matrix to an orthogonal one (``orthogonal_map``); with
    ``use_trivialization`` the result is multiplied by a ``base`` buffer, the orthogonal matrix
    that assignments (``right_inverse``) store."""

    base: Tensor

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        # x is tall: n x k, of which n*k - k(k-1)/2 entries are used
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:  # embed into a square matrix
                pad = x.new_zeros(*x.shape[:-2], n, n - k)
                x = ember.cat([x, pad], dim=-1)
            a = x - x.mH  # skew-symmetric
            if self.orthogonal_map == "matrix_exp":
                q = _matrix_exp(a)
            else:
                q = _cayley(a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(dim=-2))
            q = _householder_product(a, tau)
            # the diagonal of x holds the signs (+-1) of the reflections; not differentiated
            q = q * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if "base" in self._buffers:
            q = self.base @ q
        if transposed:
            q = q.mT
        return q

    def right_inverse(self, q: Tensor) -> Tensor:
        with ember.no_grad():
            if tuple(q.shape) != self.shape:
                raise ValueError(
                    f"Expected a matrix or batch of matrices of shape {self.shape}. "
                    f"Got a tensor of shape {tuple(q.shape)}."
                )
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            transpose = n < k
            if transpose:
                q = q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley "
                        "parametrizations when use_trivialization=False."
                    )
                # the Householder reflectors of q's QR, with the signs of diag(R) on the diagonal
                arr = _to_numpy(q).astype(np.float64)
                flat = arr.reshape(-1, n, k)
                out = np.empty_like(flat)
                for b in range(flat.shape[0]):
                    r, tau = _geqrf(flat[b])
                    d = np.sign(np.diagonal(r)).copy()
                    d[tau == 0.0] *= -1
                    np.fill_diagonal(r, d)
                    out[b] = r
                a = _from_numpy(out.reshape(arr.shape), q)
                return a.mT if transpose else a
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:  # complete q into an n x n orthogonal matrix
                extra = ember.randn(*q.shape[:-2], n, n - k, dtype=q.dtype, device=q.device)
                q = _make_orthogonal(ember.cat([q, extra], dim=-1))
            self.base = q
            # -Id: householder(zeros) would give eye, and the diagonal carries the signs
            neg_id = ember.zeros_like(q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def _cayley(a: Tensor) -> Tensor:
    """(I - A/2)^-1 (I + A/2), differentiable (Gauss-Jordan elimination with partial pivoting
    chosen on the detached values)."""
    n = a.shape[-1]
    eye = _eye_like(a, n)
    return _solve(eye - a * 0.5, eye + a * 0.5)


def _solve(lhs: Tensor, rhs: Tensor) -> Tensor:
    """X with lhs @ X = rhs for batches of small square systems, built from differentiable
    ops; row swaps follow partial pivoting on the detached values."""
    n = lhs.shape[-1]
    batch = tuple(lhs.shape[:-2])
    aug = ember.cat([lhs, rhs], dim=-1).reshape(-1, n, n + rhs.shape[-1])
    rows_out = []
    for b in range(aug.shape[0]):
        m = aug[b]
        for col in range(n):
            with ember.no_grad():
                pivot = col + int(m.detach()[col:, col].abs().argmax().item())
            if pivot != col:
                order = list(range(n))
                order[col], order[pivot] = order[pivot], order[col]
                m = m[ember.tensor(order, device=m.device)]
            m = ember.cat([m[:col], (m[col] / m[col, col]).unsqueeze(0), m[col + 1:]], dim=0)
            factors = m[:, col].clone()
            mask = ember.ones(n, dtype=m.dtype, device=m.device)
            mask[col] = 0.0
            m = m - (factors * mask).unsqueeze(-1) * m[col].unsqueeze(0)
        rows_out.append(m[:, n:])
    return ember.stack(rows_out).reshape(*batch, n, rhs.shape[-1])


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Parametrizes the matrix (or batch of matrices) ``module.<name>`` to be orthogonal:
    orthonormal columns if it is tall, rows if it is wide.

    ``orthogonal_map``: ``"matrix_exp"`` (the default for square matrices), ``"cayley"``, or
    ``"householder"`` (the default otherwise). With ``use_trivialization`` (default) the
    parametrization is relative to a ``base`` orthogonal buffer, which assignments to
    ``module.<name>`` replace. The initial value is the orthogonal Q of the weight's QR.

    >>> import ember
    >>> from ember.nn.utils.parametrizations import orthogonal
    >>> w = orthogonal(ember.nn.Linear(5, 3)).weight  # 3 x 5: orthonormal rows
    >>> bool(ember.allclose(w @ w.T, ember.eye(3), atol=1e-5))
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square else "householder"
    if orthogonal_map not in _ORTH_MAPS:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
