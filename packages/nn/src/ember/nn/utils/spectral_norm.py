"""Spectral normalization through a forward pre-hook (the original API; see also
``ember.nn.utils.parametrizations.spectral_norm``).

``spectral_norm(module, name)`` keeps the raw weight as ``<name>_orig`` and two buffers
``<name>_u``/``<name>_v`` (estimates of the first left/right singular vectors of the weight
seen as a matrix); before every forward ``module.<name>`` is set to ``<name>_orig / sigma``
with ``sigma = u^T W v``, after ``n_power_iterations`` steps of power iteration in training mode.

>>> import ember
>>> from ember.nn.utils import spectral_norm
>>> m = spectral_norm(ember.nn.Linear(20, 40))
>>> tuple(m.weight_u.shape), tuple(m.weight_v.shape)
((40,), (20,))
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils._weight_hook import attach_checks

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that recomputes ``module.<name>`` (see the module docstring)."""

    # version 1: <name> is not saved in the state dict (only <name>_orig, _u and _v)
    _version: int = 1

    def __init__(
        self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _weight_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            # The buffers are updated in place (so a DataParallel replica would share them);
            # sigma then uses clones, as the next iteration modifies the buffers again.
            with ember.no_grad():
                for _ in range(self.n_power_iterations):
                    F.normalize(ember.mv(mat.t(), u), dim=0, eps=self.eps, out=v)
                    F.normalize(ember.mv(mat, v), dim=0, eps=self.eps, out=u)
                u = u.clone()
                v = v.clone()
        sigma = ember.dot(u, ember.mv(mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with ember.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        fn, weight = attach_checks(
            module, name, SpectralNorm,
            lambda: SpectralNorm(name, n_power_iterations, dim, eps), "spectral_norm", "spectral",
        )
        if weight.ndim == 0:
            raise ValueError(f"spectral_norm: the weight '{name}' must not be 0-dimensional")
        with ember.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            opts = {"dtype": weight.dtype, "device": weight.device}
            u = F.normalize(ember.randn(h, **opts), dim=0, eps=fn.eps)
            v = F.normalize(ember.randn(w, **opts), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        # <name> stays reachable (code may read it before the first forward) as a plain
        # attribute holding the weight's data, not as a parameter.
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        module.register_state_dict_post_hook(SpectralNormStateDictHook(fn))
        module.register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


class SpectralNormStateDictHook:
    """Records the spectral-norm format version in the state dict's metadata."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, module: Module, state_dict: dict, prefix: str, local_metadata: dict) -> None:
        versions = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in versions:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        versions[key] = self.fn._version


class SpectralNormLoadStateDictPreHook:
    """Refuses state dicts of the pre-version-1 format (which stored ``<name>`` instead of
    ``<name>_v``); those would need a pseudo-inverse to convert."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(
        self,
        module: Module,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        version = local_metadata.get("spectral_norm", {}).get(self.fn.name + ".version")
        name = self.fn.name
        if version is None and prefix + name + "_orig" in state_dict and prefix + name + "_v" not in state_dict:
            error_msgs.append(
                f"'{prefix}{name}_v' is missing: the state dict is in the spectral norm format of "
                "PyTorch < 0.4.1, which ember does not convert"
            )


def _weight_matrix(weight: Tensor, dim: int) -> Tensor:
    """The weight as a (size of dim, everything else) matrix, as both spectral norms see it."""
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.ndim) if d != dim])
    return weight.reshape(weight.shape[0], -1)


def _output_dim(module: Module, dim: int | None) -> int:
    """spectral_norm's dim: as given, else 1 for a transposed convolution (its weight is
    (C_in, C_out / groups, ...)) and 0 for everything else."""
    if dim is not None:
        return dim
    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Spectrally normalizes ``module.<name>`` (see the module docstring); ``dim`` is the
    output dimension (1 for transposed convolutions, else 0, by default). Returns the module."""
    dim = _output_dim(module, dim)
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undoes ``spectral_norm``: ``<name>`` is a plain parameter again (the current normalized
    value)."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            break
    else:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    for store, kind in (
        (module._state_dict_hooks, SpectralNormStateDictHook),
        (module._load_state_dict_pre_hooks, SpectralNormLoadStateDictPreHook),
    ):
        for k, hook in list(store.items()):
            if isinstance(hook, kind) and hook.fn.name == name:
                del store[k]
                break
    return module
