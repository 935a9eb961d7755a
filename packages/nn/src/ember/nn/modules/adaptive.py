"""``nn.AdaptiveLogSoftmaxWithLoss``: the adaptive softmax of Grave et al. (2017) for large
vocabularies. The frequent classes (below ``cutoffs[0]``) get their own logits in a head layer
beside one logit per tail cluster; each rarer cluster's classes are scored by a two-layer
bottleneck (its width ``in_features // div_value ** (i + 1)``), their log-probabilities
offset by the head's log-probability of the cluster.

>>> import ember
>>> asm = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs=[4, 8])
>>> out = asm(ember.randn(3, 16), ember.tensor([0, 5, 9]))
>>> tuple(out.output.shape), tuple(asm.log_prob(ember.randn(3, 16)).shape)
((3,), (3, 10))
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Sequence

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.container import ModuleList, Sequential
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive log-softmax over ``n_classes`` classes split at ``cutoffs`` (classes sorted by
    frequency, most frequent first). ``forward(input, target)`` returns ``(output, loss)``: the
    log-probability of each target (N,) and their mean negative; ``log_prob(input)`` gives all
    (N, n_classes) log-probabilities and ``predict(input)`` the most likely class.

    >>> import ember
    >>> asm = ember.nn.AdaptiveLogSoftmaxWithLoss(16, 100, [10, 40], div_value=2.0)
    >>> [tuple(m[0].weight.shape) for m in asm.tail]
    [(8, 16), (4, 16)]
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int],
                 div_value: float = 4.0, head_bias: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = [int(c) for c in cutoffs] + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        tails = []
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            tails.append(Sequential(Linear(in_features, hidden, bias=False, **kw),
                                    Linear(hidden, size, bias=False, **kw)))
        self.tail = ModuleList(tails)

    def reset_parameters(self) -> None:
        """Re-initializes the head and every tail projection."""
        self.head.reset_parameters()
        for proj, out in self.tail:
            proj.reset_parameters()
            out.reset_parameters()

    def _batched(self, input: Tensor, what: str) -> tuple[Tensor, bool]:
        if input.dim() not in (1, 2) or input.shape[-1] != self.in_features:
            raise RuntimeError(f"AdaptiveLogSoftmaxWithLoss.{what}: expected input of shape "
                               f"(N, {self.in_features}) or ({self.in_features},), got "
                               f"{tuple(input.shape)}")
        return (input, True) if input.dim() == 2 else (input.unsqueeze(0), False)

    def forward(self, input: Tensor, target: Tensor) -> Any:
        if target.dim() == 1:
            if input.dim() != 2:
                raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs "
                                   f"with size {tuple(input.shape)}")
            if input.shape[0] != target.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
        elif target.dim() == 0:
            if input.dim() != 1:
                raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs "
                                   f"with size {tuple(input.shape)}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        x, batched = self._batched(input, "forward")
        t = target if batched else target.unsqueeze(0)
        n = t.shape[0]
        if n and (bool((t < 0).any()) or bool((t >= self.n_classes).any())):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{t.min().item()}, {t.max().item()}] were "
                               "found. ")
        # the head's column for each row: the class itself in the shortlist, else its cluster
        head_col = t.clone()
        output = x.new_zeros(n)
        for i in range(self.n_clusters):
            lo, hi = self.cutoffs[i], self.cutoffs[i + 1]
            rows = ((t >= lo) & (t < hi)).nonzero().flatten()
            if rows.numel() == 0:
                continue
            head_col.index_fill_(0, rows, self.shortlist_size + i)
            logp = F.log_softmax(self.tail[i](x.index_select(0, rows)), dim=1)
            picked = logp.gather(1, (t.index_select(0, rows) - lo).unsqueeze(1)).squeeze(1)
            output = output.index_copy(0, rows, picked)
        head_logp = F.log_softmax(self.head(x), dim=1)
        output = output + head_logp.gather(1, head_col.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, x: Tensor) -> Tensor:
        head_logp = F.log_softmax(self.head(x), dim=1)
        parts = [head_logp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](x), dim=1)
            parts.append(cluster + head_logp[:, self.shortlist_size + i].unsqueeze(1))
        return ember.cat(parts, dim=1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of all classes: (N, n_classes), or (n_classes,) for an
        unbatched input."""
        x, batched = self._batched(input, "log_prob")
        out = self._full_log_prob(x)
        return out if batched else out.squeeze(0)

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each row (the argmax of :meth:`log_prob`)."""
        x, batched = self._batched(input, "predict")
        out = self._full_log_prob(x).argmax(dim=1)
        return out if batched else out.squeeze(0)
