"""Bit-exact resumption of an interrupted training run, in the style of the public
checkpoint / "resume from where you left off" utilities of training frameworks: a model with
dropout and in-loop noise augmentation drawn from the global generator, a DataLoader shuffling
with its own seeded torch.Generator, AdamW with a OneCycleLR schedule and a (disabled)
GradScaler; every few steps a whole checkpoint is written with torch.save to a file: model,
optimizer, scheduler and scaler state_dicts, torch.get_rng_state(), the loader generator's
get_state(), NumPy's and Python's random states, the epoch and step. A second run stops half
way, a fresh process-like setup loads the checkpoint (torch.load(weights_only=False),
map_location="cpu"), restores all of it with set_rng_state / Generator.set_state, and finishes:
its losses and final weights equal the uninterrupted run's exactly. Also torch.manual_seed
reproducibility, torch.random.fork_rng isolating a block's draws, torch.initial_seed and
Generator.seed / manual_seed / initial_seed, and the ByteTensor RNG state round-tripping through
a weights_only load. The random streams are each library's own, so only what must agree with
itself is printed. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <resumed equal> <steps> <checkpoints>."""

import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.linspace(-2, 2, 96).unsqueeze(1),
                     torch.sin(torch.linspace(-2, 2, 96) * 2).unsqueeze(1))
EPOCHS, STEPS_PER_EPOCH = 4, 6


def setup():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Dropout(0.2), nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-2,
                                                total_steps=EPOCHS * STEPS_PER_EPOCH)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    gen = torch.Generator().manual_seed(123)
    loader = DataLoader(data, batch_size=16, shuffle=True, generator=gen)
    return model, opt, sched, scaler, gen, loader


def save_checkpoint(path, model, opt, sched, scaler, gen, epoch, step):
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "scaler": scaler.state_dict(),
                "torch_rng": torch.get_rng_state(), "loader_rng": gen.get_state(),
                "numpy_rng": np.random.get_state(), "python_rng": random.getstate(),
                "epoch": epoch, "step": step}, path)


def train(stop_after=None, resume=None, ckpt_dir=None):
    model, opt, sched, scaler, gen, loader = setup()
    start_epoch, losses = 0, []
    np.random.seed(7)
    random.seed(7)
    if resume is not None:
        ck = torch.load(resume, map_location="cpu", weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        scaler.load_state_dict(ck["scaler"])
        torch.set_rng_state(ck["torch_rng"])
        gen.set_state(ck["loader_rng"])
        np.random.set_state(ck["numpy_rng"])
        random.setstate(ck["python_rng"])
        start_epoch = ck["epoch"] + 1
    saved = 0
    for epoch in range(start_epoch, EPOCHS):
        model.train()
        for x, y in loader:
            noise = 0.05 * torch.randn_like(x)  # augmentation from the global generator
            jitter = np.random.uniform(0.9, 1.1) * random.choice([1.0, 1.0])
            loss = F.mse_loss(model(x + noise) * jitter, y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            losses.append(loss.item())
        if ckpt_dir is not None:
            save_checkpoint(os.path.join(ckpt_dir, f"epoch{epoch}.pt"), model, opt, sched,
                            scaler, gen, epoch, len(losses))
            saved += 1
        if stop_after is not None and epoch == stop_after:
            break
    return model, losses, saved, opt


with tempfile.TemporaryDirectory() as d:
    full_model, full_losses, saved, full_opt = train(ckpt_dir=d)
    os.makedirs(os.path.join(d, "part"))
    part_model, part_losses, _, _ = train(stop_after=1, ckpt_dir=os.path.join(d, "part"))
    res_model, res_losses, _, res_opt = train(resume=os.path.join(d, "part", "epoch1.pt"))
    ck = torch.load(os.path.join(d, "epoch1.pt"), weights_only=False)
    print("checkpoint keys", sorted(ck.keys()))
    print("rng state", ck["torch_rng"].dtype, ck["torch_rng"].dim(), "loader state",
          ck["loader_rng"].dtype, "step", ck["step"])
    state_only = os.path.join(d, "rng.pt")
    torch.save({"torch_rng": ck["torch_rng"], "step": ck["step"]}, state_only)
    back = torch.load(state_only, weights_only=True)
    print("rng state through a weights_only load:", torch.equal(back["torch_rng"],
                                                                 ck["torch_rng"]))

steps = len(full_losses)
print("steps", steps, "checkpoints", saved, "first half equal:",
      part_losses == full_losses[:len(part_losses)])
equal = (part_losses + res_losses == full_losses and
         all(torch.equal(a, b) for a, b in zip(full_model.parameters(), res_model.parameters())))
print("resumed run == uninterrupted run:", equal)
print("optimizer step counters", int(full_opt.state[next(iter(full_model.parameters()))]["step"]),
      int(res_opt.state[next(iter(res_model.parameters()))]["step"]))
print("final lr equal:", full_opt.param_groups[0]["lr"] == res_opt.param_groups[0]["lr"])

# seeds, generators and fork_rng
torch.manual_seed(42)
a = torch.rand(3)
torch.manual_seed(42)
b = torch.rand(3)
print("manual_seed repeats:", torch.equal(a, b), "initial_seed", torch.initial_seed())
state = torch.get_rng_state()
with torch.random.fork_rng():
    torch.manual_seed(999)
    torch.rand(100)
print("fork_rng leaves the stream alone:", torch.equal(torch.get_rng_state(), state))
g = torch.Generator()
g.manual_seed(5)
print("generator initial_seed", g.initial_seed())
s = g.get_state()
x1 = torch.randn(4, generator=g)
g.set_state(s)
x2 = torch.randn(4, generator=g)
print("generator set_state replays:", torch.equal(x1, x2))
perm1 = torch.randperm(10, generator=torch.Generator().manual_seed(1))
perm2 = torch.randperm(10, generator=torch.Generator().manual_seed(1))
print("randperm with equal seeds:", torch.equal(perm1, perm2), sorted(perm1.tolist()) ==
      list(range(10)))
print(f"RESULT {int(equal)} {steps} {saved}")
