"""Listing 1 of the PyTorch paper (Paszke et al., 2019) in ember: a custom layer as a building block.

A ``LinearLayer`` written from scratch (two Parameters, a matrix product and an addition) is
composed with the library's Conv2d, relu and softmax into a small image classifier, which is
then trained for a few steps on the 8x8 digit images of examples/data/digits.npz.

    python examples/listing1_custom_layer.py [--steps 100]
"""

from __future__ import annotations

import argparse
import os

import ember
import ember.nn as nn
import ember.nn.functional as F
import numpy as np
from ember.nn import Module


class LinearLayer(Module):
    def __init__(self, in_sz: int, out_sz: int) -> None:
        super().__init__()
        t1 = ember.randn(in_sz, out_sz)
        self.w = nn.Parameter(t1)
        t2 = ember.randn(out_sz)
        self.b = nn.Parameter(t2)

    def forward(self, activations: ember.Tensor) -> ember.Tensor:
        t = ember.mm(activations, self.w)
        return t + self.b


class FullBasicModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 128, 3)
        self.fc = LinearLayer(128, 10)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        t1 = self.conv(x)
        t2 = nn.functional.relu(t1)
        # the paper's listing leaves out the reduction from (N, 128, H, W) feature maps to
        # (N, 128) features that the matrix product needs: average over the image
        t3 = self.fc(t2.mean((2, 3)))
        return nn.functional.softmax(t3, dim=1)


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args(argv)
    ember.manual_seed(0)
    with np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.npz")) as d:
        x = ember.from_numpy(d["images"][:512, None].astype(np.float32) / 16.0)
        y = ember.from_numpy(d["labels"][:512].astype(np.int64))
    model = FullBasicModel()
    opt = ember.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(args.steps):
        probs = model(x)
        loss = F.nll_loss(ember.log(probs + 1e-9), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 20 == 0 or step == args.steps - 1:
            acc = (probs.argmax(1) == y).float().mean().item()
            print(f"step {step:3d}  loss {loss.item():.4f}  train accuracy {100 * acc:.1f}%")
    return loss.item()


if __name__ == "__main__":
    main()
