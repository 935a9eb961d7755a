"""ember demo: train a small CNN to recognize handwritten digits, save it, evaluate it.

By default it uses the 1,797 8x8 digit images of the UCI "Optical Recognition of Handwritten
Digits" data set shipped in examples/data/digits.npz (CC BY 4.0, see examples/data/README.md);
``--mnist DIR`` trains on real MNIST IDX files instead (train-images-idx3-ubyte[.gz], ...).

    python examples/demo.py                       # train, print progress, save checkpoint.ember
    python examples/demo.py --eval checkpoint.ember
    python examples/demo.py --mnist ~/data/mnist --epochs 2

The model's layers are written here in a few lines each over ember's core ops (conv2d,
max_pool2d, relu, cross_entropy) to show how a custom nn.Module is built; ember.data's
DataLoader feeds the batches and ember.optim.Adam trains it.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import struct
import sys
import time

import ember
import numpy as np
from ember import nn
from ember.data import DataLoader, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "data", "digits.npz")


class Conv2d(nn.Module):
    """A 2-D convolution with PyTorch's default (Kaiming-uniform) initialization."""

    def __init__(self, in_ch: int, out_ch: int, k: int, padding: int = 0) -> None:
        super().__init__()
        bound = 1 / math.sqrt(in_ch * k * k)
        self.weight = nn.Parameter(ember.empty(out_ch, in_ch, k, k).uniform_(-bound, bound))
        self.bias = nn.Parameter(ember.empty(out_ch).uniform_(-bound, bound))
        self.padding = padding

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        return ember.conv2d(x, self.weight, self.bias, 1, self.padding)


class DigitNet(nn.Module):
    """conv(1→16) → relu → conv(16→32) → relu → max-pool 2 → linear(→64) → relu → linear(→10)."""

    def __init__(self, image_size: int = 8, num_classes: int = 10) -> None:
        super().__init__()
        self.image_size = image_size
        self.conv1 = Conv2d(1, 16, 3, padding=1)
        self.conv2 = Conv2d(16, 32, 3, padding=1)
        pooled = image_size // 2 if image_size <= 8 else image_size // 4
        self.fc1 = nn.Linear(32 * pooled * pooled, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        x = ember.relu(self.conv1(x))
        if self.image_size > 8:  # MNIST: pool once more to keep the classifier small
            x = ember.max_pool2d(x, [2, 2])
        x = ember.max_pool2d(ember.relu(self.conv2(x)), [2, 2])
        x = ember.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def load_digits(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 8x8 digits scaled to [0, 1], split 80/20 into train and test with a fixed shuffle."""
    with np.load(DIGITS) as d:
        images = d["images"].astype(np.float32) / 16.0
        labels = d["labels"].astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    images, labels = images[order], labels[order]
    split = int(0.8 * len(labels))
    return images[:split], labels[:split], images[split:], labels[split:]


def _read_idx(path: str) -> np.ndarray:
    for candidate in (path, path + ".gz"):
        if os.path.exists(candidate):
            opener = gzip.open if candidate.endswith(".gz") else open
            with opener(candidate, "rb") as f:
                raw = f.read()
            break
    else:
        raise FileNotFoundError(f"MNIST file not found: {path}[.gz]")
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist(root: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """MNIST from the four IDX files in ``root`` (optionally gzip-compressed), scaled to [0, 1]."""
    def part(name: str) -> np.ndarray:
        return _read_idx(os.path.join(root, name))

    x_tr = part("train-images-idx3-ubyte").astype(np.float32) / 255.0
    y_tr = part("train-labels-idx1-ubyte").astype(np.int64)
    x_te = part("t10k-images-idx3-ubyte").astype(np.float32) / 255.0
    y_te = part("t10k-labels-idx1-ubyte").astype(np.int64)
    return x_tr, y_tr, x_te, y_te


def make_loader(x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool) -> DataLoader:
    images = ember.from_numpy(np.ascontiguousarray(x[:, None]))  # (N, 1, H, W)
    return DataLoader(TensorDataset(images, ember.from_numpy(y)), batch_size=batch_size, shuffle=shuffle)


def progress(epoch: int, done: int, total: int, loss: float, width: int = 30) -> None:
    filled = int(width * done / total)
    bar = "#" * filled + "-" * (width - filled)
    sys.stdout.write(f"\repoch {epoch:2d} [{bar}] {done}/{total} loss {loss:.4f}")
    sys.stdout.flush()


def evaluate(model: nn.Module, loader: DataLoader) -> tuple[float, float]:
    """(mean loss, accuracy) of ``model`` over ``loader``."""
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with ember.no_grad():
        for x, y in loader:
            logits = model(x)
            total_loss += ember.cross_entropy(logits, y, reduction="sum").item()
            correct += int((logits.argmax(1) == y).sum().item())
            count += y.shape[0]
    return total_loss / count, correct / count


def train(args: argparse.Namespace) -> float:
    data = load_mnist(args.mnist) if args.mnist else load_digits(args.seed)
    x_tr, y_tr, x_te, y_te = data
    if args.limit:
        x_tr, y_tr = x_tr[: args.limit], y_tr[: args.limit]
        x_te, y_te = x_te[: args.limit], y_te[: args.limit]
    ember.manual_seed(args.seed)
    train_loader = make_loader(x_tr, y_tr, args.batch_size, shuffle=True)
    test_loader = make_loader(x_te, y_te, 256, shuffle=False)
    model = DigitNet(image_size=x_tr.shape[-1])
    opt = ember.optim.Adam(model.parameters(), lr=args.lr)
    print(f"training on {len(y_tr)} images of {x_tr.shape[1]}x{x_tr.shape[2]}, testing on {len(y_te)}")
    start = time.perf_counter()
    acc = 0.0
    for epoch in range(1, args.epochs + 1):
        model.train()
        running, seen = 0.0, 0
        for i, (x, y) in enumerate(train_loader, 1):
            opt.zero_grad()
            loss = ember.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            running += loss.item() * y.shape[0]
            seen += y.shape[0]
            progress(epoch, i, len(train_loader), running / seen)
        test_loss, acc = evaluate(model, test_loader)
        print(
            f" | test loss {test_loss:.4f}  test accuracy {100 * acc:.2f}%  "
            f"({time.perf_counter() - start:.1f}s)"
        )
    ember.save(
        {"model": model.state_dict(), "image_size": int(x_tr.shape[-1]), "mnist": args.mnist or ""},
        args.save,
    )
    print(f"saved checkpoint to {args.save}; evaluate it with: python examples/demo.py --eval {args.save}")
    return acc


def evaluate_checkpoint(args: argparse.Namespace) -> float:
    ckpt = ember.load(args.eval)
    model = DigitNet(image_size=int(ckpt["image_size"]))
    model.load_state_dict(ckpt["model"])
    root = args.mnist or ckpt.get("mnist") or ""
    _, _, x_te, y_te = load_mnist(root) if root else load_digits(args.seed)
    if args.limit:
        x_te, y_te = x_te[: args.limit], y_te[: args.limit]
    loss, acc = evaluate(model, make_loader(x_te, y_te, 256, shuffle=False))
    print(f"checkpoint {args.eval}: test loss {loss:.4f}  test accuracy {100 * acc:.2f}% on {len(y_te)} images")
    return acc


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", default="checkpoint.ember", help="where to write the trained model")
    p.add_argument("--eval", metavar="CHECKPOINT", help="evaluate a saved checkpoint instead of training")
    p.add_argument("--mnist", metavar="DIR", help="train on the MNIST IDX files in DIR")
    p.add_argument("--limit", type=int, default=0, help="use only the first N train/test images")
    args = p.parse_args(argv)
    return evaluate_checkpoint(args) if args.eval else train(args)


if __name__ == "__main__":
    main()
