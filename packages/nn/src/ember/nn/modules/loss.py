"""Loss modules: each holds its options and calls the matching ``F.*`` loss.

>>> import ember
>>> loss = ember.nn.CrossEntropyLoss()
>>> round(loss(ember.zeros(2, 4), ember.tensor([0, 3])).item(), 4)
1.3863
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.linear import Linear
from ember.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions
from ember.nn.modules.module import Module

__all__ = [
    "L1Loss", "MSELoss", "CrossEntropyLoss", "NLLLoss", "SmoothL1Loss", "HuberLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss", "CosineEmbeddingLoss",
    "MarginRankingLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss",
    "HingeEmbeddingLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss",
    "MultiLabelMarginLoss", "CTCLoss", "LinearCrossEntropyLoss",
]


class _Loss(Module):
    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean absolute error.

    >>> import ember
    >>> ember.nn.L1Loss()(ember.tensor([1.0]), ember.tensor([3.0])).item()
    2.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error.

    >>> import ember
    >>> ember.nn.MSELoss()(ember.tensor([1.0]), ember.tensor([3.0])).item()
    4.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """log_softmax + nll_loss; class indices or probabilities; label smoothing.

    >>> import ember
    >>> ember.nn.CrossEntropyLoss(label_smoothing=0.1).label_smoothing
    0.1
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class LinearCrossEntropyLoss(_WeightedLoss):
    """A classifier head and its cross entropy in one module: a ``Linear(in_features,
    num_classes * prod(out_features))`` (flat storage) whose logits, viewed as
    ``(N, C, *out_features)``, go through :func:`F.linear_cross_entropy`.

    >>> import ember
    >>> loss = ember.nn.LinearCrossEntropyLoss(3, 4, bias=True)
    >>> tuple(loss.linear.weight.shape), loss(ember.ones(2, 3), ember.tensor([0, 1])).dim()
    ((4, 3), 0)
    """

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple[int, ...] = (),
                 bias: bool = False, device: Any = None, dtype: Any = None, reduction: str = "mean",
                 weight: Tensor | None = None, ignore_index: int | None = None,
                 label_smoothing: float = 0.0, options: LinearCrossEntropyOptions | None = None) -> None:
        super().__init__(weight, None, None, reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.options = options
        n_out = num_classes
        for d in self.out_features:
            n_out *= d
        self.linear = Linear(in_features, n_out, bias=bias, device=device, dtype=dtype)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        w = self.linear.weight.view(self.num_classes, *self.out_features, self.linear.in_features)
        b = self.linear.bias
        if b is not None:
            b = b.view(self.num_classes, *self.out_features)
        return F.linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self) -> str:
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities.

    >>> import ember
    >>> ember.nn.NLLLoss()(ember.tensor([[-1.0, -2.0]]), ember.tensor([0])).item()
    1.0
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """The old name of :class:`NLLLoss` for image-shaped inputs (deprecated: NLLLoss takes any
    number of trailing dims); constructing one warns with a FutureWarning, as PyTorch does."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a "
                      "drop-in replacement.", FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below beta, linear above.

    >>> import ember
    >>> ember.nn.SmoothL1Loss()(ember.tensor([0.5]), ember.tensor([0.0])).item()
    0.125
    """

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below delta, delta-scaled linear above.

    >>> import ember
    >>> ember.nn.HuberLoss(delta=2.0)(ember.tensor([3.0]), ember.tensor([0.0])).item()
    4.0
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities.

    >>> import ember
    >>> round(ember.nn.BCELoss()(ember.tensor([0.5]), ember.tensor([0.0])).item(), 4)
    0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of logits, with per-class pos_weight.

    >>> import ember
    >>> round(ember.nn.BCEWithLogitsLoss()(ember.tensor([0.0]), ember.tensor([0.0])).item(), 4)
    0.6931
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class KLDivLoss(_Loss):
    """KL divergence of log-probabilities input from target.

    >>> import ember
    >>> ember.nn.KLDivLoss(reduction="batchmean", log_target=True).log_target
    True
    """

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class PoissonNLLLoss(_Loss):
    """Poisson negative log likelihood.

    >>> import ember
    >>> ember.nn.PoissonNLLLoss()(ember.tensor([0.0]), ember.tensor([0.0])).item()
    1.0
    """

    def __init__(self, log_input: bool = True, full: bool = False,
                 size_average: bool | None = None, eps: float = 1e-8, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log likelihood with predicted variance.

    >>> import ember
    >>> ember.nn.GaussianNLLLoss(full=True).full
    True
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos`` for similar pairs (target 1), ``max(0, cos - margin)`` for dissimilar ones.

    >>> import ember
    >>> ember.nn.CosineEmbeddingLoss(margin=0.5).margin
    0.5
    """

    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -y (x1 - x2) + margin)``.

    >>> import ember
    >>> ember.nn.MarginRankingLoss()(ember.tensor([2.0]), ember.tensor([1.0]),
    ...                              ember.tensor([1.0])).item()
    0.0
    """

    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(d(a, p) - d(a, n) + margin, 0)``.

    >>> import ember
    >>> ember.nn.TripletMarginLoss(margin=2.0).margin
    2.0
    """

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet loss with a custom distance function.

    >>> import ember
    >>> ember.nn.TripletMarginWithDistanceLoss().margin
    1.0
    """

    def __init__(self, *, distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
                 margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if not margin > 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than "
                             f"0, got {margin} instead")
        # the default distance is a PairwiseDistance submodule, as in PyTorch (and its repr)
        from ember.nn.modules.distance import PairwiseDistance

        self.distance_function = (distance_function if distance_function is not None
                                  else PairwiseDistance())
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` for target 1, ``max(0, margin - x)`` for target -1.

    >>> import ember
    >>> ember.nn.HingeEmbeddingLoss()(ember.tensor([2.0]), ember.tensor([-1.0])).item()
    0.0
    """

    def __init__(self, margin: float = 1.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``log(1 + exp(-y x))``.

    >>> import ember
    >>> round(ember.nn.SoftMarginLoss()(ember.tensor([0.0]), ember.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-class logistic loss averaged over classes.

    >>> import ember
    >>> ember.nn.MultiLabelSoftMarginLoss().reduction
    'mean'
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss.

    >>> import ember
    >>> ember.nn.MultiMarginLoss(p=2).p
    2
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p}")
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss over class-index targets.

    >>> import ember
    >>> ember.nn.MultiLabelMarginLoss().reduction
    'mean'
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class CTCLoss(_Loss):
    """Connectionist temporal classification loss.

    >>> import ember
    >>> ember.nn.CTCLoss(blank=0).blank
    0
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Any,
                target_lengths: Any) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)
