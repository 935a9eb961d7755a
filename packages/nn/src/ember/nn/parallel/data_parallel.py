"""DataParallel (torch.nn.DataParallel's API) for single-process programs.

PyTorch's DataParallel replicates the module on several GPUs of one process and splits each
batch among them. ember runs the wrapped module on one device: the CPU when CUDA is not
available (where PyTorch, too, just calls the module), else ``device_ids[0]``, moving the inputs
there. Asking for several GPUs warns once that the batch is not split (use
DistributedDataParallel, one process per GPU, for multi-GPU training). The wrapper's state dict
has the ``module.`` prefix, as in PyTorch, so checkpoints move between the two.

>>> import ember
>>> dp = ember.nn.DataParallel(ember.nn.Linear(2, 3))
>>> dp(ember.ones(4, 2)).shape, list(dp.state_dict())[0]
(ember.Size([4, 3]), 'module.weight')
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import ember
from ember.nn.modules.module import Module

__all__ = ["DataParallel", "data_parallel"]

_warned = [False]


def _device_index(d: Any) -> int:
    if isinstance(d, int):
        return d
    dev = ember.device(d)
    return 0 if dev.index is None else dev.index


def _to(obj: Any, device: Any) -> Any:
    if isinstance(obj, ember.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        moved = [_to(o, device) for o in obj]
        return type(obj)(*moved) if hasattr(obj, "_fields") else type(obj)(moved)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


class DataParallel(Module):
    """Runs ``module`` on one device (see the module docstring); ``.module`` is the wrapped
    module."""

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, dim: int = 0) -> None:
        super().__init__()
        self.module = module
        self.dim = dim
        if not ember.cuda.is_available():
            self.device_ids: list[int] = []
            self.output_device = None
            self.src_device_obj = ember.device("cpu")
            return
        if device_ids is None:
            device_ids = list(range(ember.cuda.device_count()))
        self.device_ids = [_device_index(d) for d in device_ids]
        if not self.device_ids:
            self.output_device = None
            self.src_device_obj = ember.device("cpu")
            return
        self.output_device = _device_index(output_device if output_device is not None
                                           else self.device_ids[0])
        self.src_device_obj = ember.device("cuda", self.device_ids[0])
        if len(self.device_ids) > 1 and not _warned[0]:
            _warned[0] = True
            warnings.warn(
                f"DataParallel: ember runs the module on {self.src_device_obj} only (no "
                f"replication over {len(self.device_ids)} GPUs); use "
                "ember.nn.parallel.DistributedDataParallel, one process per GPU, to train on "
                "several", UserWarning, stacklevel=2)
        for t in list(module.parameters()) + list(module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(
                    f"module must have its parameters and buffers on device "
                    f"{self.src_device_obj} (device_ids[0]) but found one of them on device: "
                    f"{t.device}")

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        out = self.module(*_to(inputs, self.src_device_obj), **_to(kwargs, self.src_device_obj))
        if self.output_device is not None and self.output_device != self.device_ids[0]:
            out = _to(out, ember.device("cuda", self.output_device))
        return out


def data_parallel(module: Module, inputs: Any, device_ids: Sequence[Any] | None = None,
                  output_device: Any = None, dim: int = 0,
                  module_kwargs: dict | None = None) -> Any:
    """The functional form of :class:`DataParallel`: ``module(*inputs)`` on one device."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return DataParallel(module, device_ids, output_device, dim)(*inputs, **(module_kwargs or {}))
