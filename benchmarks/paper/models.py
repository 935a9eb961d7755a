"""The six models of the seed paper's Table 1, written once against a framework's ``nn``.

Every builder takes the framework module (``ember`` or ``torch``) and a :class:`Size`, and
returns ``(model, make_batch, loss_fn, items)``: ``make_batch()`` gives fixed inputs and targets,
``items`` is what one step processes (images, target tokens or samples) for the throughput. The
same code builds both frameworks' models from their own modules (``nn.Conv2d``, ``nn.LSTM``...),
so the architectures are identical; each framework initializes its own weights.

The architectures follow the published ones (AlexNet, VGG-19 with batch norm off, ResNet-50
with bottleneck blocks [3, 4, 6, 3], MobileNetV2's inverted residuals, a GNMT-like LSTM
encoder-decoder, NCF's GMF + MLP), with the channel widths scaled by ``Size.width`` and the
classifier's hidden layer by ``Size.hidden`` so that a CPU can train them in seconds.

Example:
    >>> import ember
    >>> model, batch, loss_fn, items = build("resnet50", ember, Size(image=64, batch=2, width=1 / 16))
    >>> x, y = batch()
    >>> loss_fn(model(x), y).backward()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["Size", "MODELS", "UNITS", "build"]


@dataclass(frozen=True)
class Size:
    """How far the paper's sizes are reduced: image side, batch, channel-width multiplier,
    classifier hidden width, classes; sequence length, vocabulary and LSTM width (seq2seq);
    users, items and the batch of NCF."""

    image: int = 64
    batch: int = 8
    width: float = 0.25
    hidden: int = 512
    classes: int = 10
    seq: int = 16
    vocab: int = 2000
    rnn: int = 256
    rnn_batch: int = 16
    ncf_users: int = 2000
    ncf_items: int = 2000
    ncf_batch: int = 1024

    def describe(self, model: str) -> str:
        if model == "gnmt":
            return (f"batch {self.rnn_batch}, {self.seq}+{self.seq} tokens, vocab {self.vocab}, "
                    f"2+2 LSTM layers of {self.rnn}")
        if model == "ncf":
            return (f"batch {self.ncf_batch}, {self.ncf_users} users x {self.ncf_items} items, "
                    f"factors 32, MLP 128-64-32")
        w = f"widths x{self.width:g}"
        if model in ("alexnet", "vgg19"):
            w += f", classifier {self.hidden}"
        return f"{self.image}x{self.image}, batch {self.batch}, {w}, {self.classes} classes"


MODELS = ["alexnet", "vgg19", "resnet50", "mobilenet_v2", "gnmt", "ncf"]
UNITS = {"alexnet": "img/s", "vgg19": "img/s", "resnet50": "img/s", "mobilenet_v2": "img/s",
         "gnmt": "tok/s", "ncf": "samples/s"}
NAMES = {"alexnet": "AlexNet", "vgg19": "VGG-19", "resnet50": "ResNet-50",
         "mobilenet_v2": "MobileNetV2", "gnmt": "GNMT stand-in (LSTM seq2seq)", "ncf": "NCF"}


def _c(channels: int, size: Size) -> int:
    return max(4, int(round(channels * size.width)))


def _images(fw: Any, size: Size) -> Callable[[], tuple[Any, Any]]:
    rng = np.random.default_rng(0)
    x = fw.tensor(rng.standard_normal((size.batch, 3, size.image, size.image), dtype=np.float32))
    y = fw.tensor(rng.integers(0, size.classes, size.batch))
    return lambda: (x, y)


def _alexnet(fw: Any, size: Size) -> Any:
    nn = fw.nn
    c = [_c(n, size) for n in (64, 192, 384, 256, 256)]
    return nn.Sequential(
        nn.Conv2d(3, c[0], 11, stride=4, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(c[0], c[1], 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Dropout(0.5), nn.Linear(c[4] * 4, size.hidden), nn.ReLU(inplace=True),
        nn.Dropout(0.5), nn.Linear(size.hidden, size.hidden), nn.ReLU(inplace=True),
        nn.Linear(size.hidden, size.classes))


_VGG19 = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
          512, 512, 512, 512, "M"]


def _vgg19(fw: Any, size: Size) -> Any:
    nn = fw.nn
    layers: list[Any] = []
    cin = 3
    for v in _VGG19:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            cout = _c(int(v), size)
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]
            cin = cout
    return nn.Sequential(
        *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(cin, size.hidden), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(size.hidden, size.hidden), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(size.hidden, size.classes))


def _resnet50(fw: Any, size: Size) -> Any:
    nn = fw.nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, mid: int, stride: int) -> None:
            super().__init__()
            cout = mid * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(cout))
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x: Any) -> Any:
            identity = x if self.down is None else self.down(x)
            return self.relu(self.body(x) + identity)

    stem = _c(64, size)
    layers: list[Any] = [nn.Conv2d(3, stem, 7, stride=2, padding=3, bias=False),
                         nn.BatchNorm2d(stem), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = stem
    for i, (blocks, mid) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        m = _c(mid, size)
        for b in range(blocks):
            layers.append(Bottleneck(cin, m, 2 if (b == 0 and i > 0) else 1))
            cin = m * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(cin, size.classes))


# MobileNetV2: (expansion t, output channels c, repeats n, stride s).
_MBV2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
         (6, 160, 3, 2), (6, 320, 1, 1)]


def _mobilenet_v2(fw: Any, size: Size) -> Any:
    nn = fw.nn

    def conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1, act: bool = True) -> list:
        out = [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False),
               nn.BatchNorm2d(cout)]
        return out + [nn.ReLU6(inplace=True)] if act else out

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, t: int) -> None:
            super().__init__()
            mid = cin * t
            layers = conv_bn(cin, mid, 1, 1) if t != 1 else []
            layers += conv_bn(mid, mid, 3, stride, groups=mid)
            layers += conv_bn(mid, cout, 1, 1, act=False)
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            return x + self.body(x) if self.residual else self.body(x)

    cin = _c(32, size)
    layers: list[Any] = conv_bn(3, cin, 3, 2)
    for t, c, n, s in _MBV2:
        cout = _c(c, size)
        for i in range(n):
            layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
            cin = cout
    last = _c(1280, size)
    layers += conv_bn(cin, last, 1, 1)
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                         nn.Linear(last, size.classes))


def _gnmt(fw: Any, size: Size) -> Any:
    """Embedding → 2-layer LSTM encoder; its final state starts a 2-layer LSTM decoder fed the
    (teacher-forced) target tokens → Linear over the vocabulary."""
    nn = fw.nn

    class Seq2Seq(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.src_emb = nn.Embedding(size.vocab, size.rnn)
            self.tgt_emb = nn.Embedding(size.vocab, size.rnn)
            self.encoder = nn.LSTM(size.rnn, size.rnn, num_layers=2, batch_first=True)
            self.decoder = nn.LSTM(size.rnn, size.rnn, num_layers=2, batch_first=True)
            self.out = nn.Linear(size.rnn, size.vocab)

        def forward(self, src_tgt: Any) -> Any:
            src, tgt = src_tgt
            _, state = self.encoder(self.src_emb(src))
            h, _ = self.decoder(self.tgt_emb(tgt), state)
            return self.out(h).reshape(-1, size.vocab)

    return Seq2Seq()


def _ncf(fw: Any, size: Size) -> Any:
    """NeuMF: a GMF branch (elementwise product of user and item factors) and an MLP branch
    (concatenated embeddings through 128-64-32), concatenated into one logit."""
    nn = fw.nn
    f = 32

    class NCF(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gmf_user = nn.Embedding(size.ncf_users, f)
            self.gmf_item = nn.Embedding(size.ncf_items, f)
            self.mlp_user = nn.Embedding(size.ncf_users, 64)
            self.mlp_item = nn.Embedding(size.ncf_items, 64)
            self.mlp = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
            self.head = nn.Linear(f + 32, 1)

        def forward(self, ui: Any) -> Any:
            u, i = ui
            gmf = self.gmf_user(u) * self.gmf_item(i)
            mlp = self.mlp(fw.cat([self.mlp_user(u), self.mlp_item(i)], 1))
            return self.head(fw.cat([gmf, mlp], 1)).reshape(-1)

    return NCF()


def build(name: str, fw: Any, size: Size) -> tuple[Any, Callable[[], tuple[Any, Any]], Any, int]:
    """The model ``name`` (one of MODELS) in framework ``fw``, its fixed batch, its loss and the
    items one step processes."""
    fw.manual_seed(0)
    rng = np.random.default_rng(0)
    if name in ("alexnet", "vgg19", "resnet50", "mobilenet_v2"):
        model = {"alexnet": _alexnet, "vgg19": _vgg19, "resnet50": _resnet50,
                 "mobilenet_v2": _mobilenet_v2}[name](fw, size)
        return model, _images(fw, size), fw.nn.CrossEntropyLoss(), size.batch
    if name == "gnmt":
        shape = (size.rnn_batch, size.seq)
        src = fw.tensor(rng.integers(0, size.vocab, shape))
        tgt = fw.tensor(rng.integers(0, size.vocab, shape))
        y = fw.tensor(rng.integers(0, size.vocab, shape[0] * shape[1]))
        return _gnmt(fw, size), (lambda: ((src, tgt), y)), fw.nn.CrossEntropyLoss(), y.numel()
    if name == "ncf":
        u = fw.tensor(rng.integers(0, size.ncf_users, size.ncf_batch))
        i = fw.tensor(rng.integers(0, size.ncf_items, size.ncf_batch))
        y = fw.tensor(rng.integers(0, 2, size.ncf_batch).astype(np.float32))
        return (_ncf(fw, size), (lambda: ((u, i), y)), fw.nn.BCEWithLogitsLoss(),
                size.ncf_batch)
    raise ValueError(f"build: unknown model {name!r}, expected one of {MODELS}")
