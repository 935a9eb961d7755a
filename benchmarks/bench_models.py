"""Small models shared by benchmark cases and the paper's experiments, written once against a
framework's ``nn`` module (``ember.nn`` or ``torch.nn``), so both frameworks build the same
architecture.

Example:
    >>> import ember
    >>> model = small_resnet(ember.nn, 32)
    >>> model(ember.randn(2, 3, 32, 32)).shape
    ember.Size([2, 10])
"""

from __future__ import annotations

from typing import Any

__all__ = ["small_resnet"]


def small_resnet(nn: Any, width: int) -> Any:
    """Conv-BN-ReLU stem (3 -> ``width`` channels), two residual blocks of ``width`` channels,
    global average pooling, Flatten and Linear(width, 10). Seed the framework before calling it
    for reproducible weights."""

    class Block(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return self.relu(x + self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))))

    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                         nn.ReLU(), Block(width), Block(width), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(width, 10))
