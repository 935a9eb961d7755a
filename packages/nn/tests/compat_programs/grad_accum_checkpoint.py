"""Memory-saving training tricks from large-model training scripts: gradient accumulation over
micro-batches (loss / accum_steps), torch.nn.utils.clip_grad_norm_ (its returned total norm) and
clip_grad_value_, activation checkpointing with torch.utils.checkpoint.checkpoint
(use_reentrant=False and True) and checkpoint_sequential, the gradients with and without
checkpointing compared, parameters_to_vector / vector_to_parameters, a warmup + linear-decay
schedule built from SequentialLR(LinearLR, LinearLR), zero_grad(set_to_none=True), and a
dropout model whose checkpointed recomputation replays the same random mask (preserve_rng_state).
Training draws no random numbers (dropout only in the replay check): from the same initial
weights (``--save-init``/``--init-from``) the losses agree with torch's. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

parser = argparse.ArgumentParser()
parser.add_argument("--accum", type=int, default=4)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)


class ResidualMLP(nn.Module):
    def __init__(self, width=48, depth=4, use_checkpoint=False, reentrant=False):
        super().__init__()
        self.inp = nn.Linear(16, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.SiLU(),
                          nn.Linear(2 * width, width)) for _ in range(depth))
        self.out = nn.Linear(width, 1)
        self.use_checkpoint = use_checkpoint
        self.reentrant = reentrant

    def forward(self, x):
        h = self.inp(x)
        for blk in self.blocks:
            if self.use_checkpoint and self.training:
                h = h + checkpoint(blk, h, use_reentrant=self.reentrant)
            else:
                h = h + blk(h)
        return self.out(h).squeeze(-1)


rng = np.random.default_rng(0)
W = rng.normal(0, 1, (16,)).astype(np.float32)
x_all = torch.from_numpy(rng.normal(0, 1, (512, 16)).astype(np.float32))
y_all = torch.sin(x_all @ torch.from_numpy(W)) + 0.1 * x_all[:, 0] ** 2

model = ResidualMLP(use_checkpoint=True)
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})

# checkpointed gradients equal the plain ones, for both checkpoint implementations
plain = ResidualMLP()
plain.load_state_dict(model.state_dict())
for reentrant in (False, True):
    ck = ResidualMLP(use_checkpoint=True, reentrant=reentrant)
    ck.load_state_dict(model.state_dict())
    for m in (plain, ck):
        m.zero_grad()
        F.mse_loss(m(x_all[:64]), y_all[:64]).backward()
    same = all(torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-7)
               for a, b in zip(plain.parameters(), ck.parameters()))
    print(f"checkpoint(use_reentrant={reentrant}) gradients match: {same}")

seq = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.Tanh()) for _ in range(6)])
xin = x_all[:8].clone().requires_grad_(True)
out = checkpoint_sequential(seq, 3, xin, use_reentrant=False)
out.sum().backward()
g_ck = xin.grad.clone()
xin.grad = None
seq(xin).sum().backward()
print(f"checkpoint_sequential matches: {torch.allclose(out, seq(xin))} "
      f"{torch.allclose(g_ck, xin.grad, atol=1e-6)}")

# dropout inside a checkpoint: the recomputation replays the forward's random mask
drop = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5))
xd = x_all[:4].clone().requires_grad_(True)
torch.manual_seed(3)
out = checkpoint(drop, xd, use_reentrant=False, preserve_rng_state=True)
out.backward(torch.ones_like(out))
zeros_fwd = (out == 0)
w_grad_rows = drop[0].weight.grad.abs().sum(1) == 0
print(f"replayed dropout mask consistent: "
      f"{torch.equal(zeros_fwd.all(0), w_grad_rows)}")

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
total_steps = 24
warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=4)
decay = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=0.05,
                                          total_iters=total_steps - 4)
scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warm, decay], milestones=[4])
micro = 16
per_step = micro * args.accum
model.train()
step, norms, losses = 0, [], []
optimizer.zero_grad(set_to_none=True)
for epoch in range(3):
    for i in range(0, len(x_all), micro):
        xb, yb = x_all[i:i + micro], y_all[i:i + micro]
        loss = F.mse_loss(model(xb), yb) / args.accum
        loss.backward()
        losses.append(loss.item() * args.accum)
        if (i + micro) % per_step == 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            norms.append(norm.item())
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % 8 == 0:
                print(f"step {step:3d} | loss {np.mean(losses[-args.accum:]):.5f} | grad norm "
                      f"{norm.item():.4f} | lr {scheduler.get_last_lr()[0]:.6f}")
print(f"grads cleared: {all(p.grad is None for p in model.parameters())}")
print(f"{step} optimizer steps, {len(losses)} micro-batches")

# one accumulated step equals one big-batch step
a, b = ResidualMLP(), ResidualMLP()
b.load_state_dict(a.state_dict())
for k in range(4):
    (F.mse_loss(a(x_all[k * 16:(k + 1) * 16]), y_all[k * 16:(k + 1) * 16]) / 4).backward()
F.mse_loss(b(x_all[:64]), y_all[:64]).backward()
print("accumulated == big batch:",
      all(torch.allclose(p.grad, q.grad, rtol=1e-4, atol=1e-6)
          for p, q in zip(a.parameters(), b.parameters())))
torch.nn.utils.clip_grad_value_(a.parameters(), clip_value=0.01)
print(f"clip_grad_value_: max |grad| {max(p.grad.abs().max().item() for p in a.parameters()):.4f}")
vec = parameters_to_vector(model.parameters())
print(f"parameters as one vector: {vec.numel()} == "
      f"{sum(p.numel() for p in model.parameters())}")
vector_to_parameters(torch.zeros_like(vec), a.parameters())
print(f"vector_to_parameters zeroed: {all(p.abs().sum().item() == 0 for p in a.parameters())}")
model.eval()
with torch.no_grad():
    final = F.mse_loss(model(x_all), y_all).item()
print(f"RESULT {losses[0]:.6f} {final:.6f} {max(norms):.4f}")
