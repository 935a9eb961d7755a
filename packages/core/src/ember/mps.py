"""``ember.mps``: Apple GPUs through Metal (PyTorch's ``torch.mps``), which ember has no backend
for.

Scripts pick their device with ``torch.backends.mps.is_available()`` and sometimes seed or sync
through ``torch.mps``; here, as on a PyTorch built without MPS, ``is_available()`` is False,
``device_count()`` 0 and ``manual_seed`` does nothing, while the calls that need the device
raise RuntimeError naming it.

>>> import ember
>>> ember.mps.is_available(), ember.mps.device_count()
(False, 0)
>>> ember.mps.manual_seed(0)  # nothing to seed
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "is_available", "device_count", "manual_seed", "seed", "get_rng_state", "set_rng_state",
    "synchronize", "empty_cache", "set_per_process_memory_fraction", "current_allocated_memory",
    "driver_allocated_memory", "recommended_max_memory",
]


def is_available() -> bool:
    """False: ember has no MPS backend."""
    return False


def device_count() -> int:
    """0: no MPS devices."""
    return 0


def manual_seed(seed: int) -> None:
    """Nothing to seed (no MPS generator), as on a PyTorch built without MPS."""


def _no_backend(what: str) -> RuntimeError:
    return RuntimeError(f"ember.mps.{what}: ember has no MPS backend (ember.mps.is_available() "
                        "is False)")


def seed() -> None:
    """Raises: there is no MPS generator."""
    raise _no_backend("seed")


def get_rng_state(device: Any = "mps") -> Any:
    """Raises: there is no MPS generator."""
    raise _no_backend("get_rng_state")


def set_rng_state(new_state: Any, device: Any = "mps") -> None:
    """Raises: there is no MPS generator."""
    raise _no_backend("set_rng_state")


def synchronize() -> None:
    """Raises: there is no MPS device."""
    raise _no_backend("synchronize")


def empty_cache() -> None:
    """Raises: there is no MPS allocator."""
    raise _no_backend("empty_cache")


def set_per_process_memory_fraction(fraction: float) -> None:
    """Raises: there is no MPS allocator."""
    raise _no_backend("set_per_process_memory_fraction")


def current_allocated_memory() -> int:
    """Raises: there is no MPS allocator."""
    raise _no_backend("current_allocated_memory")


def driver_allocated_memory() -> int:
    """Raises: there is no MPS allocator."""
    raise _no_backend("driver_allocated_memory")


def recommended_max_memory() -> int:
    """Raises: there is no MPS device."""
    raise _no_backend("recommended_max_memory")


def __getattr__(name: str) -> Any:
    raise AttributeError(f"module 'ember.mps' has no attribute {name!r} (ember has no MPS "
                         "backend; ember.mps.is_available() is False)")
