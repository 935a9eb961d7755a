"""A character-level LSTM language model with sampling, in the style of the public PyTorch
examples. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints losses with format specs, sets backend flags, compiles the model,
uses autocast for generation, a disabled GradScaler, and saves/loads whole objects."""

import argparse
import collections
import os
import sys

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.linear import NonDynamicallyQuantizableLinear

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--out", default=".")
args = parser.parse_args(sys.argv[1:])

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
cudnn.benchmark = True
cudnn.deterministic = True
torch.backends.cuda.matmul.allow_tf32 = False
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

text = "hello world, hello model. " * 8
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.LongTensor([stoi[c] for c in text])
assert data.type().endswith("LongTensor")


class CharLSTM(nn.Module):
    def __init__(self, vocab, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.lstm = nn.LSTM(16, hidden, batch_first=True)
        self.head = NonDynamicallyQuantizableLinear(hidden, vocab)

    def forward(self, x, state=None):
        h, state = self.lstm(self.embed(x), state)
        return self.head(h), state


model = torch.compile(CharLSTM(len(chars)).to(device))
opt = torch.optim.Adam(model.parameters(), lr=0.02)
scaler = torch.amp.GradScaler("cpu", enabled=False)
seq = 16
losses = collections.deque(maxlen=10)
first = None
for step in range(args.steps):
    i = (step * 7) % (len(data) - seq - 1)
    x, y = data[i:i + seq][None], data[i + 1:i + seq + 1][None]
    logits, _ = model(x)
    loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
    opt.zero_grad()
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    losses.append(loss.item())
    first = loss if first is None else first
    if step % 20 == 0:
        print(f"step {step:3d} | loss {loss:.4f} | delta {'{:+.2f}'.format(loss - first)}")
avg = torch.tensor(losses).mean()
print(f"final avg loss {avg:.3f} (first {first:.3f})")

# sampling, with the forward in bfloat16
with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
    idx = torch.tensor([[stoi["h"]]])
    state, out = None, ["h"]
    for _ in range(20):
        logits, state = model(idx, state)
        probs = F.softmax(logits[0, -1].float(), dim=-1)
        idx = torch.multinomial(probs, 1)[None]
        out.append(chars[idx.item()])
print("sample:", "".join(out))

# save the whole model and the run's settings; load them back
path = os.path.join(args.out, "char_lstm.pt")
torch.save({"model": model, "args": args, "losses": torch.Tensor(list(losses))}, path)
try:
    torch.load(path)
    raise SystemExit("loading pickled objects must need an opt-in")
except Exception as exc:  # UnpicklingError: weights_only refuses the classes
    assert "weights_only" in str(exc) or "safe_globals" in str(exc), exc
ckpt = torch.load(path, weights_only=False)
again, _ = ckpt["model"](data[:seq][None])
assert again.shape == (1, seq, len(chars))
with torch.serialization.safe_globals([argparse.Namespace]):
    torch.save({"args": args, "state": model.state_dict()}, path)
    state = torch.load(path)
assert state["args"].steps == args.steps

# export to ONNX as a deployment script would, and check the graph in onnxruntime
try:
    import onnx  # noqa: F401
    import onnxruntime as ort
except ImportError:
    ort = None
if ort is None:
    print("onnx: skipped (onnx/onnxruntime not installed)")
else:
    model.eval()
    onnx_path = os.path.join(args.out, "char_lstm.onnx")
    torch.onnx.export(model, (data[:seq][None],), onnx_path, input_names=["tokens"],
                      output_names=["logits", "h", "c"], opset_version=17, dynamo=False,
                      dynamic_axes={"tokens": {0: "batch", 1: "time"},
                                    "logits": {0: "batch", 1: "time"},
                                    "h": {1: "batch"}, "c": {1: "batch"}})
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    x = torch.stack([data[3:3 + 2 * seq], data[40:40 + 2 * seq]])  # another batch and length
    got = sess.run(None, {"tokens": x.numpy()})
    with torch.no_grad():
        want, (h, c) = model(x)
    err = max(float(abs(g - w.numpy()).max()) for g, w in zip(got, (want, h, c)))
    assert err < 1e-4, err
    print(f"onnx: exported, onnxruntime max abs error {err:.1e}")
print(f"RESULT {first.item():.6f} {float(avg):.6f}")
