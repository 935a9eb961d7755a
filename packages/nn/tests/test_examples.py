"""The paper's listings and the README demo run end to end on a reduced budget."""

from __future__ import annotations

import importlib.util
import os

import ember
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_listing1_custom_layer_trains(capsys):
    mod = _load("listing1_custom_layer")
    first = mod.FullBasicModel()
    assert sorted(n for n, _ in first.named_parameters()) == ["conv.bias", "conv.weight", "fc.b", "fc.w"]
    final = mod.main(["--steps", "15"])
    out = capsys.readouterr().out
    first_loss = float(out.splitlines()[0].split("loss")[1].split()[0])
    assert final < first_loss


def test_listing2_gan_moves_generator_towards_data():
    mod = _load("listing2_gan")
    ember.manual_seed(0)
    before = mod.create_generator()(ember.randn(2000, mod.NOISE)).mean(0)
    after = mod.main(["--steps", "150"])
    target = mod.CENTER
    assert ((after - target) ** 2).sum().item() < ((before.detach() - target) ** 2).sum().item()


def test_demo_trains_saves_and_evaluates(tmp_path, capsys):
    demo = _load("demo")
    ckpt = str(tmp_path / "digits.ember")
    acc = demo.main(["--epochs", "2", "--limit", "600", "--save", ckpt])
    out = capsys.readouterr().out
    assert "epoch  1 [" in out and "test accuracy" in out
    assert acc > 0.6
    assert demo.main(["--eval", ckpt, "--limit", "600"]) == pytest.approx(acc)


def test_demo_reads_mnist_idx(tmp_path):
    demo = _load("demo")
    import gzip
    import struct

    import numpy as np

    rng = np.random.default_rng(0)
    for prefix, n in (("train", 40), ("t10k", 20)):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        with gzip.open(tmp_path / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
            f.write(struct.pack(">I3I", 0x0803, n, 28, 28) + imgs.tobytes())
        with open(tmp_path / f"{prefix}-labels-idx1-ubyte", "wb") as f:
            f.write(struct.pack(">II", 0x0801, n) + labels.tobytes())
    x_tr, y_tr, x_te, y_te = demo.load_mnist(str(tmp_path))
    assert x_tr.shape == (40, 28, 28) and y_te.shape == (20,)
    assert x_tr.max() <= 1.0
    acc = demo.main(["--mnist", str(tmp_path), "--epochs", "1", "--save", str(tmp_path / "m.ember")])
    assert 0.0 <= acc <= 1.0
    with pytest.raises(FileNotFoundError, match="MNIST file not found"):
        demo.load_mnist(str(tmp_path / "missing"))
