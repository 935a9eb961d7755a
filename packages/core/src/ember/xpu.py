"""``ember.xpu``: Intel GPUs (PyTorch's ``torch.xpu``), which ember has no backend for.

Device-selection code asks it and moves on: ``is_available()`` is False and ``device_count()``
0; seeding and cache calls do nothing (there is no device state), as on a PyTorch built without
XPU; the calls that need a device raise RuntimeError, and names ember does not have raise
AttributeError (so ``hasattr`` checks work).

>>> import ember
>>> ember.xpu.is_available(), ember.xpu.device_count()
(False, 0)
>>> "xpu" if ember.xpu.is_available() else "cpu"
'cpu'
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "is_available", "device_count", "is_initialized", "is_bf16_supported", "manual_seed",
    "manual_seed_all", "seed", "seed_all", "empty_cache", "memory_allocated", "current_device",
    "set_device", "synchronize", "get_device_name",
]


def is_available() -> bool:
    """False: ember has no XPU backend."""
    return False


def device_count() -> int:
    """0: no XPU devices."""
    return 0


def is_initialized() -> bool:
    """False: there is nothing to initialize."""
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: no XPU device supports anything here."""
    return False


def manual_seed(seed: int) -> None:
    """Nothing to seed (no XPU generators)."""


def manual_seed_all(seed: int) -> None:
    """Nothing to seed (no XPU generators)."""


def seed() -> None:
    """Nothing to seed (no XPU generators)."""


def seed_all() -> None:
    """Nothing to seed (no XPU generators)."""


def empty_cache() -> None:
    """Nothing cached: no XPU allocator."""


def memory_allocated(device: Any = None) -> int:
    """0 bytes: no XPU allocator."""
    return 0


def _unavailable(what: str) -> RuntimeError:
    return RuntimeError(f"ember.xpu.{what}: ember has no XPU backend (ember.xpu.is_available() "
                        "is False)")


def current_device() -> int:
    """Raises: there is no XPU device."""
    raise _unavailable("current_device")


def set_device(device: Any) -> None:
    """Raises: there is no XPU device."""
    raise _unavailable("set_device")


def synchronize(device: Any = None) -> None:
    """Raises: there is no XPU device."""
    raise _unavailable("synchronize")


def get_device_name(device: Any = None) -> str:
    """Raises: there is no XPU device."""
    raise _unavailable("get_device_name")


def __getattr__(name: str) -> Any:
    raise AttributeError(f"module 'ember.xpu' has no attribute {name!r} (ember has no XPU "
                         "backend; ember.xpu.is_available() is False)")
