"""Batch normalization layers with running statistics.

>>> import ember
>>> bn = ember.nn.BatchNorm1d(3)
>>> bn(ember.randn(4, 3)).shape
ember.Size([4, 3])
>>> bn.num_batches_tracked.item()
1
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.lazy import LazyModuleMixin
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter, UninitializedBuffer, UninitializedParameter

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "SyncBatchNorm",
]


class _NormBase(Module):
    """Shared state of the batch and instance norms: affine parameters and running stats."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(ember.empty(num_features, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(ember.empty(num_features, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", ember.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ember.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", ember.tensor(0, dtype=ember.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    _version = 2  # version 2 added num_batches_tracked (PyTorch's numbering)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        # a checkpoint from before version 2 (or one without metadata, as a hand-built dict)
        # has no num_batches_tracked: it loads with the count the model has (0 if none)
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats \
                and key not in state_dict:
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               and self.num_batches_tracked.device.type != "meta"
                               else ember.tensor(0, dtype=ember.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches seen."""
        if self.track_running_stats:
            with ember.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Resets the running statistics; weight 1, bias 0."""
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        # RuntimeError, as torch; with neither running statistics nor affine parameters torch
        # normalizes whatever channel count the input has
        if input.shape[1] != self.num_features and any(
                t is not None for t in (self.running_mean, self.running_var, self.weight, self.bias)):
            raise RuntimeError(
                f"{self._get_name()}: expected input with {self.num_features} channels (dim 1), "
                f"got input of shape {tuple(input.shape)}"
            )
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: cumulative moving average over all batches seen
            factor = 1.0 / float(self.num_batches_tracked.item()) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(
            input, self.running_mean if track else None, self.running_var if track else None,
            self.weight, self.bias, use_batch_stats, factor, self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) input.

    >>> import ember
    >>> ember.nn.BatchNorm1d(4, momentum=None)
    BatchNorm1d(4, eps=1e-05, momentum=None, affine=True, bias=True, track_running_stats=True)
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(
                f"BatchNorm1d: expected 2D or 3D input (N, C) or (N, C, L), got {input.ndim}D "
                f"input of shape {tuple(input.shape)}"
            )


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) input.

    >>> import ember
    >>> ember.nn.BatchNorm2d(8)
    BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 4:
            raise ValueError(
                f"BatchNorm2d: expected 4D input (N, C, H, W), got {input.ndim}D input of shape "
                f"{tuple(input.shape)}"
            )


class BatchNorm3d(_BatchNorm):
    """Batch norm of (N, C, D, H, W) input.

    >>> import ember
    >>> ember.nn.BatchNorm3d(2)(ember.randn(2, 2, 1, 2, 2)).shape
    ember.Size([2, 2, 1, 2, 2])
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 5:
            raise ValueError(
                f"BatchNorm3d: expected 5D input (N, C, D, H, W), got {input.ndim}D input of "
                f"shape {tuple(input.shape)}"
            )


def _sync_world(group: Any) -> int:
    """The size of the process group SyncBatchNorm reduces over (1 without ember.distributed
    or outside an initialized group)."""
    try:
        import ember.distributed as dist
    except ImportError:
        return 1
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return max(dist.get_world_size(group), 1)


class _AllReduceSum(ember.autograd.Function):
    """Sums a tensor over the ranks of a group; the gradient is summed the same way (each
    rank's loss depends on every rank's contribution)."""

    @staticmethod
    def forward(ctx: Any, t: Tensor, group: Any) -> Tensor:
        import ember.distributed as dist

        ctx.group = group
        out = t.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Any:
        import ember.distributed as dist

        g = grad.clone()
        dist.all_reduce(g, group=ctx.group)
        return g, None


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose training statistics (mean and variance per channel) are computed over
    the whole batch of every rank of ``process_group`` (the default group), as
    ``torch.nn.SyncBatchNorm``. In eval mode, or without an initialized process group of more
    than one rank, it is ordinary batch norm. Input (N, C, *).

    >>> import ember
    >>> ember.nn.SyncBatchNorm(4)
    SyncBatchNorm(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Any = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        world = _sync_world(self.process_group) if self.training else 1
        if world <= 1:
            return super().forward(input)
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise RuntimeError(
                f"SyncBatchNorm: expected input with {self.num_features} channels (dim 1), got "
                f"input of shape {tuple(input.shape)}"
            )
        dims = [0] + list(range(2, input.ndim))
        count = input.numel() // max(input.shape[1], 1)
        local = ember.stack([input.sum(dims), (input * input).sum(dims),
                             ember.full((self.num_features,), float(count), dtype=input.dtype,
                                        device=input.device)])
        total = _AllReduceSum.apply(local, self.process_group)
        n = total[2]
        mean = total[0] / n
        var = (total[1] / n - mean * mean).clamp(min=0)
        if self.track_running_stats and self.num_batches_tracked is not None:
            with ember.no_grad():
                self.num_batches_tracked.add_(1)
                m = (1.0 / float(self.num_batches_tracked.item()) if self.momentum is None
                     else self.momentum)
                nn_ = n[0].item()
                unbiased = var * (nn_ / max(nn_ - 1, 1))
                self.running_mean.mul_(1 - m).add_(mean.detach() * m)
                self.running_var.mul_(1 - m).add_(unbiased.detach() * m)
        shape = [1, self.num_features] + [1] * (input.ndim - 2)
        out = (input - mean.reshape(shape)) / (var.reshape(shape) + self.eps).sqrt()
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with every BatchNorm*d layer replaced by a SyncBatchNorm holding the same
        parameters and running statistics (the module itself if it is one).

        >>> import ember
        >>> net = ember.nn.Sequential(ember.nn.Conv2d(1, 2, 3), ember.nn.BatchNorm2d(2))
        >>> type(ember.nn.SyncBatchNorm.convert_sync_batchnorm(net)[1]).__name__
        'SyncBatchNorm'
        """
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            if module.affine:
                with ember.no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return out


class _LazyNormMixin(LazyModuleMixin):
    """num_features from dim 1 of the first input."""

    def __init__(self: Any, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None) -> None:
        # affine/track_running_stats off first: no real tensors are created, shapes come later
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = ember.tensor(0, dtype=ember.int64, device=device)

    def _lazy_num_features(self: Any, input: Tensor) -> int:
        """The feature count the first input gives (its dim 1)."""
        self._check_input_dim(input)
        return int(input.shape[1])

    def reset_parameters(self: Any) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self: Any, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """Materializes weight, bias and the running statistics with input.shape[1]
        features; initialized like the eager batch norm's."""
        if not self.has_uninitialized_params():
            if self.num_features == 0:  # materialized by load_state_dict
                t = self.weight if self.weight is not None else self.running_mean
                self.num_features = int(t.shape[0]) if t is not None else \
                    self._lazy_num_features(input)
            return
        self.num_features = self._lazy_num_features(input)
        with ember.no_grad():
            if self.affine:
                self.weight.materialize((self.num_features,))
                self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self._replace_materialized_buffers()
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormMixin, BatchNorm1d):
    """A ``BatchNorm1d`` whose ``num_features`` comes from its first input.

    >>> import ember
    >>> bn = ember.nn.LazyBatchNorm1d()
    >>> bn(ember.randn(4, 3)).shape
    ember.Size([4, 3])
    >>> bn
    BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    """

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormMixin, BatchNorm2d):
    """A ``BatchNorm2d`` whose ``num_features`` comes from its first input."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormMixin, BatchNorm3d):
    """A ``BatchNorm3d`` whose ``num_features`` comes from its first input."""

    cls_to_become = BatchNorm3d
