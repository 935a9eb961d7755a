"""ember.backends.cpu: what the CPU offers.

>>> import ember
>>> ember.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")
True
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def get_cpu_capability() -> str:
    """The widest vector ISA the CPU has among PyTorch's names: "AVX512", "AVX2" or "DEFAULT"."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        flags = []
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags):
        return "AVX512"
    if "avx2" in flags:
        return "AVX2"
    return "DEFAULT"
