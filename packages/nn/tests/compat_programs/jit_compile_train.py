"""Training and export with the graph tools used as pass-throughs, in the style of public
training scripts that wrap their model "for speed": torch.compile(model) (the compiled wrapper's
parameters shared with the model, its state_dict keys under ``_orig_mod.``, unwrapped again for
saving), torch.compile on a plain loss function, torch.compiler.disable on a logging helper and
torch.compiler.is_compiling, torch.jit.script of annotated functions (Optional / List / Tuple
arguments, torch.jit.annotate) and of a module with torch.jit.Final constants, @torch.jit.export
and @torch.jit.ignore methods and a torch.jit.is_scripting branch, torch.jit.trace of a module
(sharing the original parameters, so training either trains both) and of a function with a
tuple of example inputs, torch.jit.save / torch.jit.load round trips, torch.jit.freeze and
optimize_for_inference on an eval-mode scripted model, and a small regression trained through
the compiled model. Weights and data from NumPy: the run is the same on both libraries.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <test mse>."""

import io
import os
import tempfile
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(3)


@torch.jit.script
def fused_gelu(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 * (1.0 + torch.erf(x / 1.41421))


@torch.jit.script
def masked_mean(x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    if mask is None:
        return x.mean(0)
    w = mask.to(x.dtype).unsqueeze(-1)
    return (x * w).sum(0) / w.sum(0).clamp(min=1.0)


def split_sizes(n: int, parts: int) -> List[int]:
    out = torch.jit.annotate(List[int], [])
    for i in range(parts):
        out.append(n // parts + (1 if i < n % parts else 0))
    return out


split_sizes_s = torch.jit.script(split_sizes)


def stats(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return x.mean(), x.std()


class Regressor(nn.Module):
    hidden: torch.jit.Final[int]

    def __init__(self, d_in=6, hidden=24):
        super().__init__()
        self.hidden = hidden
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.norm(fused_gelu(self.fc1(x)))
        if not torch.jit.is_scripting():
            h = h * 1.0  # eager-only path
        return self.fc2(h).squeeze(-1)

    @torch.jit.export
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(fused_gelu(self.fc1(x)))

    @torch.jit.ignore
    def describe(self) -> str:
        return f"Regressor(hidden={self.hidden})"


def init_from_numpy(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[1]), p.shape)
                                         .astype(np.float32)))
            elif "norm" not in name:
                p.zero_()


X = torch.from_numpy(rng.normal(size=(160, 6)).astype(np.float32))
w_true = torch.from_numpy(rng.normal(size=6).astype(np.float32))
Y = torch.tanh(X @ w_true) + 0.1 * X[:, 0] ** 2
Xtr, Ytr, Xte, Yte = X[:128], Y[:128], X[128:], Y[128:]

model = Regressor()
init_from_numpy(model)
compiled = torch.compile(model)
loss_fn = torch.compile(F.mse_loss)


@torch.compiler.disable
def log(step, loss):
    print(f"step {step:3d} loss {loss:.5f} compiling {torch.compiler.is_compiling()}")


print("compiled shares parameters:",
      all(a is b for a, b in zip(compiled.parameters(), model.parameters())))
keys = list(compiled.state_dict().keys())
print("compiled keys", [k.replace("_orig_mod.", "") for k in keys][:3])
base = getattr(compiled, "_orig_mod", compiled)
print("unwrapped is model:", base is model)

opt = torch.optim.AdamW(compiled.parameters(), lr=0.02, weight_decay=1e-3)
losses = []
for step in range(60):
    idx = torch.from_numpy(rng.permutation(128)[:32])
    loss = loss_fn(compiled(Xtr[idx]), Ytr[idx])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        log(step, loss.item())

model.eval()
with torch.no_grad():
    ref = model(Xte)
    scripted = torch.jit.script(model)
    traced = torch.jit.trace(model, (Xte[:4],))
    print("scripted == eager:", torch.allclose(scripted(Xte), ref, atol=1e-6))
    print("traced == eager:", torch.allclose(traced(Xte), ref, atol=1e-6))
    print("scripted embed", tuple(scripted.embed(Xte).shape), "describe", model.describe())
    print("scripted shares weight:", scripted.fc1.weight.data_ptr() == model.fc1.weight.data_ptr())
    print("masked_mean", [round(v, 4) for v in masked_mean(
        Xte[:5, :3], torch.tensor([1, 0, 1, 1, 0])).tolist()],
        [round(v, 4) for v in masked_mean(Xte[:5, :3]).tolist()])
    print("split sizes", split_sizes_s(10, 3), split_sizes(7, 4))
    tstats = torch.jit.trace(stats, (Xte,))
    m, s = tstats(Yte)
    print(f"traced stats {m.item():.4f} {s.item():.4f}")

    buf = io.BytesIO()
    torch.jit.save(scripted, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    print("jit.load from buffer == eager:", torch.allclose(loaded(Xte), ref, atol=1e-6))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.pt")
        traced.save(path)
        again = torch.jit.load(path, map_location="cpu")
        print("jit.load from file == eager:", torch.allclose(again(Xte), ref, atol=1e-6))
    frozen = torch.jit.freeze(torch.jit.script(model.eval()))
    print("frozen == eager:", torch.allclose(frozen(Xte), ref, atol=1e-5))
    fast = torch.jit.optimize_for_inference(torch.jit.script(model.eval()))
    print("optimized == eager:", torch.allclose(fast(Xte), ref, atol=1e-5))

# training the traced module trains the model it was traced from
model.train()
traced = torch.jit.trace(model, (Xtr[:4],))
before = model.fc2.bias.detach().clone()
opt2 = torch.optim.SGD(traced.parameters(), lr=0.1)
F.mse_loss(traced(Xtr), Ytr).backward()
opt2.step()
print("traced step moved model bias:", not torch.equal(before, model.fc2.bias.detach()))

torch.save(model.state_dict(), io.BytesIO())
test_mse = F.mse_loss(model(Xte), Yte).item()
print(f"test mse {test_mse:.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {test_mse:.5f}")
