"""ember demo: train a logistic-regression classifier with hand-written gradients.

Until autograd and ember.nn land this exercises the tensor engine only: random data, matmul
through OpenBLAS, pointwise ops, reductions and in-place updates.

    python examples/demo.py [--epochs 20] [--samples 20000] [--features 64]
"""

from __future__ import annotations

import argparse
import time

import ember


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--samples", type=int, default=20000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.5)
    args = p.parse_args()

    ember.manual_seed(0)
    n, d = args.samples, args.features
    true_w = ember.randn(d, 1)
    x = ember.randn(n, d)
    y = (x @ true_w + 0.3 * ember.randn(n, 1) > 0).float()
    split = int(0.8 * n)
    x_train, y_train, x_test, y_test = x[:split], y[:split], x[split:], y[split:]

    w = ember.zeros(d, 1)
    b = ember.zeros(1)
    print(f"ember {ember.__version__}: logistic regression on {split} samples, {d} features")
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        prob = ember.sigmoid(x_train @ w + b)
        eps = 1e-7
        loss = -(y_train * ember.log(prob + eps) + (1 - y_train) * ember.log(1 - prob + eps)).mean()
        err = (prob - y_train) / split  # d(loss)/d(logits)
        w -= args.lr * (x_train.T @ err)
        b -= args.lr * err.sum()
        acc = ((prob > 0.5).float() == y_train).float().mean()
        bar = "#" * (epoch * 30 // args.epochs)
        print(f"epoch {epoch:3d} [{bar:<30}] loss {loss.item():.4f}  train acc {acc.item():.3f}")
    test_acc = (((x_test @ w + b) > 0).float() == y_test).float().mean().item()
    print(f"test accuracy {test_acc:.3f}; training took {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
