"""Export models to ONNX and check them in onnxruntime, as the PyTorch tutorials do: a
character LSTM language model, a GRU classifier, a small CNN and a Transformer encoder. Each is
exported with a dynamic batch axis and run at another batch size; prints RESULT <models> <max
abs error>."""

import argparse
import io

import numpy as np
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.onnx


class CharLM(nn.Module):
    def __init__(self, vocab=40, emb=16, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, batch_first=True, dropout=0.1)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, x):
        out, _ = self.lstm(self.emb(x))
        return F.log_softmax(self.fc(self.drop(out)), dim=-1)


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 12, bidirectional=True)
        self.head = nn.Sequential(nn.Linear(24, 16), nn.Tanh(), nn.Linear(16, 3))

    def forward(self, x):  # (seq, batch, features)
        out, h = self.gru(x)
        return self.head(torch.cat([h[0], h[1]], dim=1))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class TinyEncoder(nn.Module):
    def __init__(self, vocab=50, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(d, vocab)

    def forward(self, x):
        return self.out(self.enc(self.emb(x) * 4.0))


def check(model, example, other, name):
    model.eval()
    f = io.BytesIO()
    torch.onnx.export(model, (example,), f, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}
                      if name != "gru" else {"input": {1: "batch"}, "output": {0: "batch"}},
                      opset_version=17, dynamo=False)
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    worst = 0.0
    for x in (example, other):
        got = sess.run(None, {"input": x.numpy()})[0]
        with torch.no_grad():
            want = model(x).numpy()
        assert got.shape == want.shape, (name, got.shape, want.shape)
        worst = max(worst, float(np.abs(got - want).max()))
    print(f"{name}: exported, onnxruntime max abs error {worst:.2e}")
    return worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    cases = [
        (CharLM(), torch.randint(0, 40, (2, 9)), torch.randint(0, 40, (5, 9)), "char_lm"),
        (GRUClassifier(), torch.randn(7, 2, 6), torch.randn(7, 4, 6), "gru"),
        (SmallCNN(), torch.randn(2, 1, 12, 12), torch.randn(3, 1, 12, 12), "cnn"),
        (TinyEncoder(), torch.randint(0, 50, (2, 6)), torch.randint(0, 50, (4, 6)), "encoder"),
    ]
    worst = max(check(m, a, b, n) for m, a, b, n in cases)
    print(f"RESULT {len(cases)} {worst:.3e}")


if __name__ == "__main__":
    main()
