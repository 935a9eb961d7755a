"""ember.cuda.memory: the memory history of the CUDA caching allocators (one per device), in
torch.cuda.memory's format, and the rest of ember.cuda's memory functions.

The allocators are the same CachingAllocator as the CPU's (csrc/core/allocator.h), so the
history, trace actions and snapshot dict are those of ember.memory; ``device_traces[i]`` is
device i's trace. Without CUDA every function raises ember.cuda's clear RuntimeError.

Example:
    >>> import ember
    >>> if ember.cuda.is_available():
    ...     ember.cuda.memory._record_memory_history()
    ...     x = ember.ones(10, device="cuda")
    ...     ember.cuda.memory._dump_snapshot("snapshot.pickle")
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from ember import _C
from ember import memory as _memory

__all__ = ["_record_memory_history", "_snapshot", "_dump_snapshot"]


def _require_cuda(fn: str) -> None:
    from ember import cuda

    try:
        cuda._require()
    except RuntimeError as e:
        raise RuntimeError(f"ember.cuda.memory.{fn}: {e}") from None


def _record_memory_history(enabled: Any = "all", context: Optional[str] = "all",
                           stacks: str = "all", max_entries: int = sys.maxsize,
                           device: Any = None, clear_history: bool = False) -> None:
    """Starts (or with ``enabled=None`` stops) recording the history of every CUDA device's
    caching allocator; the arguments are ember.memory._record_memory_history's."""
    _require_cuda("_record_memory_history")
    _memory._record_history_for("cuda", "ember.cuda.memory._record_memory_history", enabled,
                                context, stacks, max_entries, clear_history)


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The CUDA allocators' segments and traces (``device_traces[i]``: device i's)."""
    _require_cuda("_snapshot")
    return _C._memory_history_snapshot("cuda")


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles ``_snapshot()`` for https://pytorch.org/memory_viz."""
    _memory._write_snapshot(_snapshot(), filename)


def __getattr__(name: str) -> Any:
    # torch.cuda.memory also holds memory_allocated, memory_stats, empty_cache, ...: ember.cuda's.
    from ember import cuda

    if name in cuda.__all__:
        return getattr(cuda, name)
    raise AttributeError(f"module 'ember.cuda.memory' has no attribute {name!r}")
