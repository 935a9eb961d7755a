"""Checkpoint files the way training scripts and model hubs write and read them: torch.save of
nested dicts / lists / tuples / namedtuples / dataclasses holding tensors, views that share
storage with their base (and keep sharing after a load), a slice saved alone (the whole storage
travels: clone() to save less), io.BytesIO round trips, weights_only=True loading plain state
(the default in torch 2.6+) and refusing a custom class until torch.serialization.add_safe_globals
or the safe_globals context allows it, get_unsafe_globals_in_checkpoint, map_location as a
string, a torch.device, a dict and a callable, mmap=True loading, the legacy
_use_new_zipfile_serialization=False format, pickle_protocol, saving a whole optimizer and
scheduler state, and a model resumed from each kind of file. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <files written>."""

import collections
import dataclasses
import io
import os
import pickle
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

Stats = collections.namedtuple("Stats", ["mean", "std"])


@dataclasses.dataclass
class RunConfig:
    lr: float
    layers: int
    name: str


def make_model():
    model = nn.Sequential(nn.Linear(3, 16), nn.SiLU(), nn.Linear(16, 2))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(0.4 * torch.cos(torch.arange(p.numel(), dtype=torch.float32) * (1.1 + i))
                    .view_as(p))
    return model


def train(model, opt, steps, x, y):
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


x = torch.stack([torch.linspace(-1, 1, 40), torch.linspace(1, -1, 40).pow(2),
                 torch.linspace(0, 3, 40).sin()], dim=1)
y = (x[:, 0] + x[:, 2] > 0.3).long()
model = make_model()
opt = torch.optim.AdamW(model.parameters(), lr=2e-2, weight_decay=1e-2)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
losses = train(model, opt, 10, x, y)
sched.step()

files = 0
with tempfile.TemporaryDirectory() as d:
    # ---- nested containers, shared storage, views ----
    base = torch.arange(12.0)
    view = base[2:8].view(2, 3)
    nested = {"stats": Stats(torch.tensor([0.5, 1.5]), torch.tensor([2.0, 3.0])),
              "list": [base, view, (torch.tensor(1), "text", 3.5)],
              "alias": base, "none": None, "int": 7, "bytes": b"\x00\x01",
              "dtypes": [torch.zeros(2, dtype=dt) for dt in (torch.float16, torch.bfloat16,
                                                             torch.int8, torch.bool,
                                                             torch.complex64)]}
    path = os.path.join(d, "nested.pt")
    torch.save(nested, path)
    files += 1
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as e:
        print("weights_only refuses the namedtuple:", "Stats" in str(e))
    print("unsafe globals in it:", [g.split(".")[-1] for g in
                                    torch.serialization.get_unsafe_globals_in_checkpoint(path)])
    with torch.serialization.safe_globals([Stats]):
        back = torch.load(path, weights_only=True)
    print("namedtuple kept:", type(back["stats"]).__name__, back["stats"].std.tolist())
    print("tuple kept:", type(back["list"][2]).__name__, back["list"][2][1],
          "bytes", back["bytes"], "none", back["none"])
    print("dtypes", [t.dtype for t in back["dtypes"]])
    b0, v0 = back["list"][0], back["list"][1]
    print("alias is the same object:", back["alias"] is b0)
    print("view shares storage after load:", v0.untyped_storage().data_ptr() ==
          b0.untyped_storage().data_ptr(), "offset", v0.storage_offset(), "stride", v0.stride())
    b0[3] = 100.0
    print("write through the base shows in the view:", v0[0, 1].item())

    # a slice saved alone carries its whole storage
    big = torch.zeros(10000)
    torch.save(big[:10], os.path.join(d, "slice.pt"))
    torch.save(big[:10].clone(), os.path.join(d, "clone.pt"))
    files += 2
    s_size = os.path.getsize(os.path.join(d, "slice.pt"))
    c_size = os.path.getsize(os.path.join(d, "clone.pt"))
    print("slice file holds the whole storage:", s_size > 40000, "clone is small:",
          c_size < 4000, "loaded numel", torch.load(os.path.join(d, "slice.pt")).numel(),
          "storage", torch.load(os.path.join(d, "slice.pt")).untyped_storage().nbytes())

    # ---- weights_only and allowlists ----
    cfg = RunConfig(lr=2e-2, layers=2, name="mlp")
    ck_path = os.path.join(d, "ckpt.pt")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "config": cfg, "epoch": 10}, ck_path)
    files += 1
    try:
        torch.load(ck_path, weights_only=True)
    except pickle.UnpicklingError as e:
        msg = str(e)
        print("weights_only refuses RunConfig:", "RunConfig" in msg, "add_safe_globals" in msg)
    print("unsafe globals:", [g.split(".")[-1] for g in
                              torch.serialization.get_unsafe_globals_in_checkpoint(ck_path)])
    with torch.serialization.safe_globals([RunConfig]):
        ok = torch.load(ck_path, weights_only=True)
    print("with safe_globals:", ok["config"], ok["epoch"])
    torch.serialization.add_safe_globals([RunConfig])
    print("allowlisted:", RunConfig in torch.serialization.get_safe_globals(),
          torch.load(ck_path, weights_only=True)["config"].name)
    torch.serialization.clear_safe_globals()
    print("cleared:", RunConfig in torch.serialization.get_safe_globals())
    full = torch.load(ck_path, weights_only=False)
    print("weights_only=False:", full["config"] == cfg)

    # ---- map_location forms ----
    for loc in ("cpu", torch.device("cpu"), {"cpu": "cpu"},
                lambda storage, location: storage):
        sd = torch.load(ck_path, map_location=loc, weights_only=False)["model"]
        print("map_location", type(loc).__name__, sd["0.weight"].device, sd["2.bias"].dtype)
    mm = torch.load(ck_path, mmap=True, weights_only=False)
    print("mmap load equal:", all(torch.equal(a, b) for a, b in
                                  zip(mm["model"].values(), model.state_dict().values())))

    # ---- the legacy format, pickle protocols, BytesIO ----
    legacy = os.path.join(d, "legacy.pt")
    torch.save(model.state_dict(), legacy, _use_new_zipfile_serialization=False)
    files += 1
    leg = torch.load(legacy, weights_only=True)
    print("legacy load equal:", all(torch.equal(a, b) for a, b in
                                    zip(leg.values(), model.state_dict().values())))
    buf = io.BytesIO()
    torch.save({"w": model[0].weight.detach(), "cfg": [1, 2, 3]}, buf, pickle_protocol=2)
    buf.seek(0)
    mem = torch.load(buf, weights_only=True)
    print("BytesIO:", mem["cfg"], torch.equal(mem["w"], model[0].weight),
          "requires_grad", mem["w"].requires_grad)
    p_buf = io.BytesIO()
    torch.save(nn.Parameter(torch.ones(2)), p_buf)
    p_buf.seek(0)
    p_back = torch.load(p_buf, weights_only=True)
    print("parameter round trip:", type(p_back).__name__, p_back.requires_grad)

    # ---- resume from the checkpoint ----
    resumed = make_model()
    opt2 = torch.optim.AdamW(resumed.parameters(), lr=2e-2, weight_decay=1e-2)
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=5, gamma=0.5)
    ck = torch.load(ck_path, weights_only=False)
    resumed.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optimizer"])
    sched2.load_state_dict(ck["scheduler"])
    print("optimizer state", sorted(ck["optimizer"]["state"][0].keys()),
          "scheduler", ck["scheduler"]["last_epoch"], ck["scheduler"]["_last_lr"])
    more_a = train(model, opt, 10, x, y)
    more_b = train(resumed, opt2, 10, x, y)
    print("resumed run matches:", more_a == more_b)
    losses += more_a
print(f"loss {losses[0]:.5f} -> {losses[-1]:.5f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {files}")
