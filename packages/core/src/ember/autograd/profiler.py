"""``torch.autograd.profiler``: the older profiler entry point, on :mod:`ember.profiler`:
``profile(enabled=True, use_cuda=False, record_shapes=False, profile_memory=False, ...)``
(``enabled=False`` records nothing), ``record_function`` and ``emit_nvtx`` (no effect).

>>> import ember
>>> with ember.autograd.profiler.profile() as prof:
...     _ = ember.ones(2).sum()
>>> any(e.key == "aten::sum" for e in prof.key_averages())
True
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ember.profiler import EventList, ProfilerActivity, record_function  # noqa: F401
from ember.profiler import profile as _profile

__all__ = ["profile", "record_function", "emit_nvtx", "EventList"]


class profile(_profile):
    """The profiler with ``torch.autograd.profiler.profile``'s arguments."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 use_device: str | None = None, record_shapes: bool = False,
                 with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False,
                 use_kineto: bool = False, use_cpu: bool = True, **kwargs: Any) -> None:
        acts = set()
        if enabled and use_cpu:
            acts.add(ProfilerActivity.CPU)
        if enabled and (use_cuda or use_device == "cuda"):
            acts.add(ProfilerActivity.CUDA)
        self.enabled = enabled
        super().__init__(activities=acts, record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules)


@contextlib.contextmanager
def emit_nvtx(enabled: bool = True, record_shapes: bool = False) -> Iterator[None]:
    """No effect: ember emits no NVTX ranges."""
    yield
