"""Weight and spectral normalization as parametrizations (``ember.nn.utils.parametrize``).

>>> import ember
>>> from ember.nn.utils import parametrizations
>>> m = parametrizations.weight_norm(ember.nn.Linear(20, 40))
>>> sorted(n for n, _ in m.named_parameters())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
>>> m = parametrizations.spectral_norm(ember.nn.Linear(20, 40))
>>> m.parametrizations.weight[0]._u.shape
ember.Size([40])
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.conv import ConvTranspose1d, ConvTranspose2d
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.nn.utils.weight_norm import _norm_except_dim, _weight_norm

__all__ = ["weight_norm", "spectral_norm"]


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
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

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
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module
