"""The default random generator's state as a tensor, as ``torch.random`` offers it.

ember's generator is counter-based (Philox): its whole state is a seed and an offset, which
``get_rng_state`` packs into a 16-byte uint8 tensor.

>>> import ember
>>> state = ember.get_rng_state()
>>> a = ember.rand(2)
>>> ember.set_rng_state(state)
>>> bool((ember.rand(2) == a).all())
True
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any, Iterable, Iterator

from ember import _C
from ember._C import Generator, Tensor, default_generator, initial_seed  # noqa: F401

__all__ = ["get_rng_state", "set_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng",
           "thread_safe_generator"]

_STATE = struct.Struct("<QQ")


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 tensor (pass it to :func:`set_rng_state`)."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restores the default generator to a state returned by :func:`get_rng_state`."""
    if not isinstance(new_state, Tensor) or new_state.dtype is not _C.uint8 or \
            tuple(new_state.shape) != (_STATE.size,):
        got = (f"a {new_state.dtype!r} tensor of shape {tuple(new_state.shape)}"
               if isinstance(new_state, Tensor) else type(new_state).__name__)
        # As torch: not a uint8 tensor at all is a TypeError, one of the wrong size a RuntimeError.
        cls = (RuntimeError if isinstance(new_state, Tensor) and new_state.dtype is _C.uint8
               else TypeError)
        raise cls(f"set_rng_state: expected a uint8 tensor of shape ({_STATE.size},) from "
                  f"get_rng_state(), got {got}")
    default_generator.set_state(new_state)


def manual_seed(seed: int) -> Generator:
    """Seeds the default generator and, as in PyTorch, every CUDA device's generator (kept for
    later when CUDA is not loaded yet); returns the default generator."""
    from ember import cuda

    seed = int(seed)
    # A negative seed wraps modulo 2**64 as in PyTorch; one past that range is refused (as
    # PyTorch's "Overflow when unpacking long long") instead of aliasing a smaller seed's stream.
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"manual_seed: seed {seed} is out of range: expected an int in "
                         "[-2**63, 2**64) (a negative seed wraps modulo 2**64)")
    gen = _C.manual_seed(seed & 0xFFFF_FFFF_FFFF_FFFF)
    cuda.manual_seed_all(seed)
    return gen


def seed() -> int:
    """Seeds the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


@contextlib.contextmanager
def fork_rng(
    devices: Iterable[Any] | None = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str = "cuda",
) -> Iterator[None]:
    """Restores the default generator's state when the block ends.

    ``devices`` and ``device_type`` are PyTorch's (``fork_rng(devices=[])`` is the common call):
    ember's random ops all draw from the one default generator, whatever the device, so forking
    it forks them all; the device list is checked against the devices there are.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> with ember.random.fork_rng(devices=[]):
    ...     inside = ember.rand(3)
    >>> bool((ember.rand(3) == inside).all())  # the draws inside did not advance the generator
    True
    """
    if not isinstance(device_type, str):
        raise TypeError(f"{_caller}: device_type must be a str, got {type(device_type).__name__}")
    if device_type == "meta":
        raise RuntimeError(f"{_caller}: device_type 'meta' has no random state to fork")
    if devices is not None:
        devices = list(devices)
        if devices:
            import ember

            mod = getattr(ember, device_type, None)
            count = mod.device_count() if mod is not None and hasattr(mod, "device_count") else 0
            for d in devices:
                index = d.index if hasattr(d, "index") else d
                if not isinstance(index, int) or not 0 <= index < count:
                    raise RuntimeError(
                        f"{_caller}: {_devices_kw}={devices!r} names {device_type} device {d!r}, "
                        f"but there are {count} {device_type} devices"
                    )
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def thread_safe_generator() -> Generator | None:
    """The generator random code should pass as ``generator=`` to be safe in a DataLoader
    worker thread: the worker's own generator there, None everywhere else (None means the
    default generator). ember's DataLoader workers are processes, whose default generator is
    their own, so this is None in ember's workers too.

    >>> import ember
    >>> ember.random.thread_safe_generator() is None
    True
    """
    try:
        from ember.utils.data import get_worker_info
    except ImportError:
        return None
    info = get_worker_info()
    if info is not None and getattr(info, "worker_method", None) == "thread":
        rng = getattr(info, "rng", None)
        if rng is not None:
            return getattr(rng, "torch_generator", None)
    return None
