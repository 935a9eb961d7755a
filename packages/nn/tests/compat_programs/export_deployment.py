"""Ahead-of-time export for deployment in the style of the PyTorch torch.export tutorial: a small
two-input classifier (an image branch with Conv2d / BatchNorm2d / pooling and a tabular branch
with LayerNorm / GELU, fused by concatenation) trained briefly on NumPy data, put in eval mode
and captured by torch.export.export with a dynamic batch dimension shared by both inputs
(torch.export.Dim("batch", min=1, max=256) keyed by the forward's argument names), the
exported module checked against eager at several batch sizes, the shape guard rejecting a
wrong channel count, ExportedProgram.__call__ and module().eval() refusing as torch does,
graph_signature.user_inputs / parameters / buffers and state_dict keys, run_decompositions,
and a round trip through torch.export.save / torch.export.load on an in-memory buffer,
an exported nanoGPT-style causal self-attention block that unpacks x.size() in Python (run at
another batch size, its fixed sequence length guarded), followed by a state_dict round trip of the eager model with torch.save / torch.load
(weights_only=True). Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <max abs export
error>."""

import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

rng = np.random.default_rng(146)
N = 256
imgs = rng.normal(size=(N, 1, 8, 8)).astype(np.float32)
tab = rng.normal(size=(N, 5)).astype(np.float32)
labels = ((imgs[:, 0, :4].mean((1, 2)) + tab[:, 0]) > 0).astype(np.int64)
Xi, Xt, Y = torch.from_numpy(imgs), torch.from_numpy(tab), torch.from_numpy(labels)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.tab = nn.Sequential(nn.Linear(5, 16), nn.LayerNorm(16), nn.GELU())
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(32, 2)

    def forward(self, image, features):
        h = torch.cat([self.conv(image).flatten(1), self.tab(features)], dim=1)
        return F.log_softmax(self.head(self.drop(h)), dim=-1)


model = Classifier()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p[0].numel()), p.shape).astype(np.float32)))
        elif "bias" in name:
            p.zero_()
model.drop.p = 0.0  # dropout draws from the library's own generator; keep the runs comparable
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(40):
    idx = torch.from_numpy(rng.choice(N, 32, replace=False))
    loss = F.nll_loss(model(Xi[idx], Xt[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")
model.eval()

batch = Dim("batch", min=1, max=256)
example = (Xi[:4], Xt[:4])
ep = torch.export.export(model, example, dynamic_shapes={"image": {0: batch}, "features": {0: batch}})
sig = ep.graph_signature
print(f"user inputs {list(sig.user_inputs)} parameters {len(sig.parameters)} buffers {len(sig.buffers)}")
print(f"state_dict keys {sorted(ep.state_dict)[:4]}")
exported = ep.module()
err = 0.0
with torch.no_grad():
    for b in (1, 4, 37, 256):
        err = max(err, (exported(Xi[:b], Xt[:b]) - model(Xi[:b], Xt[:b])).abs().max().item())
print(f"export matches eager at batch 1, 4, 37, 256: {err < 1e-5}")

try:
    exported(torch.zeros(2, 3, 8, 8), Xt[:2])
except (AssertionError, RuntimeError):
    print("guard rejects 3 channels")
try:
    ep(*example)
except RuntimeError as e:
    print(f"direct call refused: {'module()' in str(e)}")
try:
    exported.eval()
except NotImplementedError:
    print("eval() on the exported module: not supported")

decomposed = ep.run_decompositions()
with torch.no_grad():
    same = torch.allclose(decomposed.module()(Xi[:8], Xt[:8]), model(Xi[:8], Xt[:8]), atol=1e-5)
print(f"run_decompositions keeps results: {same}")

buf = io.BytesIO()
torch.export.save(ep, buf)
buf.seek(0)
loaded = torch.export.load(buf)
with torch.no_grad():
    out = loaded.module()(Xi, Xt)
acc = out.argmax(1).eq(Y).float().mean().item()
print(f"loaded program accuracy {acc:.4f} matches eager: {torch.allclose(out, model(Xi, Xt), atol=1e-5)}")



class CausalSelfAttention(nn.Module):  # nanoGPT style: the sizes are unpacked in Python
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


attn = CausalSelfAttention()
with torch.no_grad():
    for p in attn.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
seq = torch.from_numpy(rng.normal(size=(3, 6, 16)).astype(np.float32))
ep_attn = torch.export.export(attn, (seq,), dynamic_shapes={"x": {0: Dim("batch")}})
with torch.no_grad():
    wide = torch.from_numpy(rng.normal(size=(5, 6, 16)).astype(np.float32))
    attn_err = (ep_attn.module()(wide) - attn(wide)).abs().max().item()
try:
    ep_attn.module()(torch.zeros(3, 7, 16))
except (AssertionError, RuntimeError):
    print(f"attention export: batch 5 matches eager {attn_err < 1e-5}, sequence length 7 rejected")

buf = io.BytesIO()
torch.save(model.state_dict(), buf)
buf.seek(0)
fresh = Classifier()
missing = fresh.load_state_dict(torch.load(buf, weights_only=True))
fresh.eval()
with torch.no_grad():
    print(f"state_dict round trip: {missing} equal: {torch.equal(fresh(Xi[:16], Xt[:16]), model(Xi[:16], Xt[:16]))}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {err:.1e}")
