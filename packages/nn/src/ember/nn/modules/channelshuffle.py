"""ChannelShuffle: interleaves channel groups (ShuffleNet).

>>> import ember
>>> ember.nn.ChannelShuffle(2)(ember.arange(4.0).reshape(1, 4, 1)).flatten().tolist()
[0.0, 2.0, 1.0, 3.0]
"""

from __future__ import annotations

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Interleaves the channels of (N, C, *) across ``groups`` groups (ShuffleNet).

    >>> import ember
    >>> ember.nn.ChannelShuffle(2)
    ChannelShuffle(groups=2)
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
