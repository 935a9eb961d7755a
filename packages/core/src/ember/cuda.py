"""ember.cuda: CUDA device queries. The CUDA backend lives in the optional extension
``ember._C_cuda`` (built with ``EMBER_CUDA=ON``); without it everything here reports no device.

>>> import ember
>>> isinstance(ember.cuda.is_available(), bool)
True
"""

from __future__ import annotations

from types import ModuleType


def _module() -> ModuleType | None:
    try:
        from ember import _C_cuda
    except ImportError:  # CPU-only build, or the CUDA runtime library is missing
        return None
    return _C_cuda


def is_available() -> bool:
    """Whether ember was built with CUDA and a CUDA device is present."""
    m = _module()
    return bool(m and m.is_available())


def device_count() -> int:
    """Number of visible CUDA devices (0 without CUDA support)."""
    m = _module()
    return m.device_count() if m else 0


def _require() -> ModuleType:
    m = _module()
    if m is None or not m.is_available():
        raise RuntimeError(
            "ember.cuda: no CUDA device available (ember was built without EMBER_CUDA=ON, or "
            "no GPU/driver is present)"
        )
    return m


def synchronize() -> None:
    """Waits for all work on the current CUDA device."""
    _require().synchronize()


def current_device() -> int:
    return _require().current_device()


def set_device(device: int) -> None:
    _require().set_device(device)


def get_device_name(device: int = 0) -> str:
    return _require().get_device_name(device)


def memory_allocated() -> int:
    """Bytes held by live CUDA tensors (through ember's caching allocator)."""
    return _require().memory_allocated()


def memory_reserved() -> int:
    """Bytes the CUDA caching allocator holds from the driver."""
    return _require().memory_reserved()


def empty_cache() -> None:
    """Returns cached, unused CUDA memory to the driver."""
    _require().empty_cache()


# ---- random seeds: accepted without a GPU, as PyTorch accepts them (queued for the device) ------

_pending_seed: int | None = None
_SEED_MASK = 0xFFFF_FFFF_FFFF_FFFF


def manual_seed(seed: int) -> None:
    """Seeds the random generator of the current CUDA device. Without CUDA the seed is kept
    and applied if a device appears, so scripts that seed every backend run on the CPU."""
    global _pending_seed
    _pending_seed = int(seed) & _SEED_MASK  # negative seeds wrap, as in PyTorch
    m = _module()
    if m is not None and m.is_available() and hasattr(m, "manual_seed"):
        m.manual_seed(_pending_seed)


def manual_seed_all(seed: int) -> None:
    """Seeds the random generators of all CUDA devices (kept for later without CUDA)."""
    global _pending_seed
    _pending_seed = int(seed) & _SEED_MASK
    m = _module()
    if m is not None and m.is_available():
        fn = getattr(m, "manual_seed_all", None) or getattr(m, "manual_seed", None)
        if fn is not None:
            fn(_pending_seed)


def seed() -> None:
    """Seeds the current CUDA device's generator non-deterministically (nothing without CUDA)."""
    m = _module()
    if m is not None and m.is_available() and hasattr(m, "seed"):
        m.seed()


def seed_all() -> None:
    """Seeds every CUDA device's generator non-deterministically (nothing without CUDA)."""
    m = _module()
    if m is not None and m.is_available():
        fn = getattr(m, "seed_all", None) or getattr(m, "seed", None)
        if fn is not None:
            fn()


def initial_seed() -> int:
    """The current CUDA device's seed; like PyTorch, an error without CUDA."""
    m = _require()
    if hasattr(m, "initial_seed"):
        return int(m.initial_seed())
    if _pending_seed is None:
        raise RuntimeError("ember.cuda.initial_seed: the CUDA generator was never seeded")
    return _pending_seed


def _install_amp() -> None:
    # `import ember.cuda.amp` / `from ember.cuda.amp import autocast, GradScaler`
    import sys

    from ember import _cuda_amp

    sys.modules[__name__ + ".amp"] = _cuda_amp
    globals()["amp"] = _cuda_amp
    # a package to the import system, as torch.cuda is: imports of `<alias>.cuda.amp` through
    # an importer that maps another name onto ember (a torch -> ember shim) then resolve too
    globals()["__path__"] = []


_install_amp()
