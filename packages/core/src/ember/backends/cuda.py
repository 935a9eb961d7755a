"""ember.backends.cuda: PyTorch's CUDA switches (``matmul.allow_tf32``, the attention kernels'
``enable_*_sdp``). ``matmul.allow_tf32`` reads and writes ``set_float32_matmul_precision``
("high" allows TF32), as in PyTorch.

>>> import ember
>>> ember.backends.cuda.matmul.allow_tf32
False
>>> ember.backends.cuda.is_built() in (True, False)
True
"""

from __future__ import annotations

import contextlib
import enum
import warnings
from typing import Any, Iterator

__all__ = ["is_built", "matmul", "enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp",
           "enable_cudnn_sdp", "flash_sdp_enabled", "mem_efficient_sdp_enabled",
           "math_sdp_enabled", "cudnn_sdp_enabled", "sdp_kernel", "SDPAParams",
           "is_flash_attention_available", "can_use_flash_attention",
           "can_use_efficient_attention", "can_use_cudnn_attention", "preferred_linalg_library",
           "preferred_blas_library", "cufft_plan_cache", "cuFFTPlanCache",
           "cuFFTPlanCacheManager"]


def is_built() -> bool:
    """Whether this ember was built with its CUDA extension."""
    try:
        from ember import _C_cuda  # noqa: F401
    except ImportError:
        return False
    return True


class _MatmulFlags:
    """``ember.backends.cuda.matmul``: TF32 / reduced-precision reduction switches."""

    def __init__(self) -> None:
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        from ember.backends import get_float32_matmul_precision

        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        from ember.backends import set_float32_matmul_precision

        set_float32_matmul_precision("high" if value else "highest")


matmul = _MatmulFlags()

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _push_sdp() -> None:
    """Hands the switches to scaled_dot_product_attention's kernel choice (on every device, as
    PyTorch's): the fused kernel stands in for flash, memory-efficient and cuDNN attention, so it
    runs while any of them is enabled; the math path while math is."""
    from ember import _C

    _C._set_sdp_backends(math=_sdp["math"],
                         fused=_sdp["flash"] or _sdp["mem_efficient"] or _sdp["cudnn"])


def _set_sdp(name: str, enabled: bool) -> None:
    _sdp[name] = bool(enabled)
    _push_sdp()


def enable_flash_sdp(enabled: bool) -> None:
    """Allows (or forbids) the flash-attention kernel of scaled_dot_product_attention.

    >>> import ember
    >>> ember.backends.cuda.enable_flash_sdp(False); ember.backends.cuda.flash_sdp_enabled()
    False
    >>> ember.backends.cuda.enable_flash_sdp(True)
    """
    _set_sdp("flash", enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Allows (or forbids) the memory-efficient attention kernel (ember's fused kernel)."""
    _set_sdp("mem_efficient", enabled)


def enable_math_sdp(enabled: bool) -> None:
    """Allows (or forbids) the math (unfused) path of scaled_dot_product_attention."""
    _set_sdp("math", enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    """Allows (or forbids) the cuDNN attention kernel (ember's fused kernel stands in for it)."""
    _set_sdp("cudnn", enabled)


def flash_sdp_enabled() -> bool:
    """Whether the flash-attention kernel is enabled."""
    return _sdp["flash"]


def mem_efficient_sdp_enabled() -> bool:
    """Whether the memory-efficient attention kernel is enabled."""
    return _sdp["mem_efficient"]


def math_sdp_enabled() -> bool:
    """Whether the math path of scaled_dot_product_attention is enabled."""
    return _sdp["math"]


def cudnn_sdp_enabled() -> bool:
    """Whether the cuDNN attention kernel is enabled."""
    return _sdp["cudnn"]


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True,
               enable_mem_efficient: bool = True, enable_cudnn: bool = True) -> Iterator[None]:
    """Deprecated (as in PyTorch; use ``ember.nn.attention.sdpa_kernel``): sets the four
    ``enable_*_sdp`` switches for the block and restores them after.

    >>> import ember, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with ember.backends.cuda.sdp_kernel(enable_flash=False):
    ...         ember.backends.cuda.flash_sdp_enabled()
    False
    >>> ember.backends.cuda.flash_sdp_enabled()
    True
    """
    warnings.warn(
        "ember.backends.cuda.sdp_kernel() is deprecated; use ember.nn.attention.sdpa_kernel(), "
        "which takes the list of backends to enable", FutureWarning, stacklevel=3)
    previous = dict(_sdp)
    _sdp.update(flash=bool(enable_flash), math=bool(enable_math),
                mem_efficient=bool(enable_mem_efficient), cudnn=bool(enable_cudnn))
    _push_sdp()
    try:
        yield
    finally:
        _sdp.update(previous)
        _push_sdp()


# ---- which attention kernel scaled_dot_product_attention would take ------------------------------
class SDPAParams:
    """The arguments of one ``scaled_dot_product_attention`` call, for the ``can_use_*``
    queries: ``SDPAParams(query, key, value, attn_mask, dropout, is_causal, enable_gqa)``."""

    def __init__(self, query: Any, key: Any, value: Any, attn_mask: Any, dropout: float,
                 is_causal: bool, enable_gqa: bool = False) -> None:
        self.query, self.key, self.value, self.attn_mask = query, key, value, attn_mask
        self.dropout = float(dropout)
        self.is_causal = bool(is_causal)
        self.enable_gqa = bool(enable_gqa)


def _fused_kernel_reasons(params: SDPAParams, *, cuda_only: bool = True) -> list[str]:
    """Why ember's fused attention kernel would not take these inputs (empty: it would). The
    conditions are those scaled_dot_product_attention checks before choosing it (sdpa_fused_ok
    in csrc/ops/nn_ops.cpp)."""
    import ember

    q, k, v, mask = params.query, params.key, params.value, params.attn_mask
    reasons = []
    dev = q.device
    if dev.type != "cuda" and (cuda_only or dev.type != "cpu"):
        reasons.append(f"the query is on {dev.type}; these kernels run on CUDA tensors")
    if params.dropout > 0.0:
        reasons.append(f"dropout_p is {params.dropout}; the fused kernel takes no dropout")
    allowed = (ember.float32, ember.float64) + (
        (ember.float16, ember.bfloat16) if dev.type == "cuda" else ())
    if q.dtype not in allowed:
        reasons.append(f"the query's dtype {q.dtype} is not one of {', '.join(map(str, allowed))}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        reasons.append("query, key and value must have the same dtype")
    if k.device != dev or v.device != dev:
        reasons.append("query, key and value must be on the same device")
    d = q.dim()
    if k.dim() != d or v.dim() != d:
        reasons.append("query, key and value must have the same number of dims")
        return reasons
    k_heads = k.shape[d - 3] if d >= 3 else None
    if params.enable_gqa and d >= 3 and k.shape[d - 3] != q.shape[d - 3] and \
            k.shape[d - 3] > 0 and q.shape[d - 3] % k.shape[d - 3] == 0:
        k_heads = q.shape[d - 3]  # the key/value heads are repeated first
    for i in range(d - 2):
        ks = k_heads if i == d - 3 else k.shape[i]
        vs = k_heads if i == d - 3 else v.shape[i]
        if ks != q.shape[i] or vs != q.shape[i]:
            reasons.append("query, key and value must have the same batch and head sizes")
            break
    if q.numel() == 0 or k.numel() == 0 or v.numel() == 0:
        reasons.append("an input is empty")
    if dev.type == "cuda" and (q.shape[-1] > 256 or v.shape[-1] > 256):
        reasons.append("the head dim is larger than 256")
    if mask is not None:
        if mask.device != dev or mask.requires_grad or mask.grad_fn is not None:
            reasons.append("the attn_mask is on another device or requires grad")
        if mask.dtype != ember.bool and mask.dtype != q.dtype:
            reasons.append("the attn_mask must be bool or of the query's dtype")
        if mask.dim() > d:
            reasons.append("the attn_mask has more dims than the query")
        else:
            for i in range(mask.dim()):
                ms = mask.shape[mask.dim() - 1 - i]
                full = k.shape[d - 2] if i == 0 else q.shape[d - 1 - i]
                if ms not in (full, 1):
                    reasons.append("the attn_mask does not broadcast to (..., L, S)")
                    break
    return reasons


def _can_use(params: SDPAParams, debug: bool, name: str, enabled: bool) -> bool:
    reasons = []
    if not is_built():
        reasons.append("ember was built without its CUDA extension")
    if not enabled:
        reasons.append(f"{name} attention is disabled")
    reasons += _fused_kernel_reasons(params)
    if debug:
        for r in reasons:
            warnings.warn(f"{name} attention (ember's fused kernel) cannot be used: {r}",
                          stacklevel=3)
    return not reasons


def is_flash_attention_available() -> bool:
    """Whether this ember can run flash attention: its CUDA extension, whose fused attention
    kernel stands in for flash attention, is built."""
    return is_built()


def can_use_flash_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether scaled_dot_product_attention would run these inputs with the flash backend
    (ember's fused CUDA kernel). With ``debug``, each reason against it is warned.

    >>> import ember
    >>> q = ember.ones(1, 2, 4, 8)
    >>> p = ember.backends.cuda.SDPAParams(q, q, q, None, 0.0, False, False)
    >>> ember.backends.cuda.can_use_flash_attention(p)  # CPU tensors
    False
    """
    return _can_use(params, debug, "Flash", _sdp["flash"])


def can_use_efficient_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether the memory-efficient backend (ember's fused CUDA kernel) would take these inputs."""
    return _can_use(params, debug, "Memory efficient", _sdp["mem_efficient"])


def can_use_cudnn_attention(params: SDPAParams, debug: bool = False) -> bool:
    """Whether the cuDNN backend (ember's fused CUDA kernel stands in for it) would take these
    inputs."""
    return _can_use(params, debug, "cuDNN", _sdp["cudnn"])


# ---- the libraries behind CUDA linear algebra and matmul ------------------------------------------
class _LinalgBackend(enum.IntEnum):
    Default = 0
    Cusolver = 1
    Magma = 2


class _BlasBackend(enum.IntEnum):
    Default = 0
    Cublas = 1
    Cublaslt = 2
    Ck = 3


_LinalgBackends = {"default": _LinalgBackend.Default, "cusolver": _LinalgBackend.Cusolver,
                   "magma": _LinalgBackend.Magma}
_BlasBackends = {"default": _BlasBackend.Default, "cublas": _BlasBackend.Cublas,
                 "hipblas": _BlasBackend.Cublas, "cublaslt": _BlasBackend.Cublaslt,
                 "hipblaslt": _BlasBackend.Cublaslt, "ck": _BlasBackend.Ck}


def _parse_backend(backend: Any, table: dict, enum_type: type) -> Any:
    if isinstance(backend, str):
        if backend not in table:
            raise RuntimeError(f"Unknown input value. Choose from: {', '.join(table)}.")
        return table[backend]
    if isinstance(backend, enum_type):
        return backend
    raise RuntimeError("Unknown input value type.")


def preferred_linalg_library(backend: None | str | _LinalgBackend = None) -> _LinalgBackend:
    """The library of CUDA linear algebra (decompositions, solvers): ember's own kernels, so
    ``Default``; asking for cuSOLVER or MAGMA raises RuntimeError, since ember uses neither.

    >>> import ember
    >>> ember.backends.cuda.preferred_linalg_library()
    <_LinalgBackend.Default: 0>
    """
    if backend is not None:
        choice = _parse_backend(backend, _LinalgBackends, _LinalgBackend)
        if choice is not _LinalgBackend.Default:
            raise RuntimeError(f"Cannot set preferred backend to {choice.name}: ember's CUDA linear "
                               "algebra runs its own kernels, not cuSOLVER or MAGMA.")
    return _LinalgBackend.Default


def preferred_blas_library(backend: None | str | _BlasBackend = None) -> _BlasBackend:
    """The library of CUDA matrix products: cuBLAS (``Cublas``), the only one ember calls;
    asking for cuBLASLt or CK raises RuntimeError.

    >>> import ember
    >>> ember.backends.cuda.preferred_blas_library()
    <_BlasBackend.Cublas: 1>
    """
    if backend is not None:
        choice = _parse_backend(backend, _BlasBackends, _BlasBackend)
        if choice not in (_BlasBackend.Default, _BlasBackend.Cublas):
            raise RuntimeError(f"Cannot set preferred backend to {choice.name}: ember's CUDA "
                               "matrix products use cuBLAS only.")
    return _BlasBackend.Cublas


# ---- cuFFT plan caches ----------------------------------------------------------------------------
class cuFFTPlanCache:  # noqa: N801  (PyTorch's name)
    """The cuFFT plan cache of one device: ember's CUDA FFTs keep no cuFFT plans, so ``size``
    is always 0 and ``clear()`` has nothing to do; ``max_size`` is kept (default 4096)."""

    def __init__(self, device_index: int) -> None:
        self.device_index = device_index
        self._max_size = 4096

    @property
    def size(self) -> int:
        return 0

    @size.setter
    def size(self, value: int) -> None:
        raise RuntimeError(".size is a read-only property showing the number of plans currently "
                           "in the cache. To change the cache capacity, set "
                           "cufft_plan_cache.max_size.")

    @property
    def max_size(self) -> int:
        return self._max_size

    @max_size.setter
    def max_size(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RuntimeError(f"cuFFT plan cache size must be a non-negative int, got {value!r}")
        self._max_size = value

    def clear(self) -> None:
        pass


class cuFFTPlanCacheManager:  # noqa: N801  (PyTorch's name)
    """``cufft_plan_cache[device]`` is that device's :class:`cuFFTPlanCache`; used directly
    (``cufft_plan_cache.max_size``) it is the current device's."""

    __initialized = False

    def __init__(self) -> None:
        self.caches: list[cuFFTPlanCache] = []
        self.__initialized = True

    def __getitem__(self, device: Any) -> cuFFTPlanCache:
        import ember

        if isinstance(device, str):
            device = ember.device(device)
        index = device.index if hasattr(device, "index") else int(device)
        if index is None:
            index = ember.cuda.current_device()
        count = ember.cuda.device_count()
        if index < 0 or index >= count:
            raise RuntimeError(f"cufft_plan_cache: expected 0 <= device index < {count}, but got "
                               f"device with index {index}")
        if not self.caches:
            self.caches.extend(cuFFTPlanCache(i) for i in range(count))
        return self.caches[index]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # (introspection: doctest, copy, pickle)
            raise AttributeError(name)
        import ember

        return getattr(self[ember.cuda.current_device()], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__initialized:
            import ember

            setattr(self[ember.cuda.current_device()], name, value)
        else:
            super().__setattr__(name, value)


cufft_plan_cache = cuFFTPlanCacheManager()
