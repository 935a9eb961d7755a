"""Checkpoint plumbing as libraries and training frameworks use it, in the style of the public
model-zoo loaders: buffers registered with persistent=False (absent from state_dict, kept by
.to() and deepcopy), a None buffer, get_extra_state / set_extra_state carrying a Python dict,
_load_from_state_dict overridden to migrate an old checkpoint layout by its _version in the
state-dict metadata, load_state_dict(strict=False) reporting missing / unexpected keys (the
named tuple's fields), the RuntimeError of a strict load and of a size mismatch, assign=True
keeping the loaded tensors' identity, state_dict(prefix=..., keep_vars=True),
register_state_dict_post_hook / register_load_state_dict_post_hook, a float64 model loading a
float32 checkpoint (values copied, dtype kept), torch.save / torch.load with BytesIO and
weights_only=True, a model + optimizer + scheduler checkpoint continued after reload, and
ParameterList / ParameterDict / ModuleDict keys. Weights from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember."""

import copy
import io

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(0)


def arr(*shape):
    return torch.from_numpy(rng.normal(size=shape).astype(np.float32))


class Normalizer(nn.Module):
    _version = 2

    def __init__(self, d):
        super().__init__()
        self.register_buffer("mean", torch.zeros(d))
        self.register_buffer("std", torch.ones(d))
        self.register_buffer("cache", torch.full((d,), 7.0), persistent=False)
        self.register_buffer("maybe", None)
        self.config = {"clip": 3.0, "name": "norm"}

    def forward(self, x):
        return ((x - self.mean) / self.std).clamp(-self.config["clip"], self.config["clip"])

    def get_extra_state(self):
        return dict(self.config)

    def set_extra_state(self, state):
        self.config = dict(state)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        if version is None or version < 2:  # v1 stored the variance under "var"
            var = state_dict.pop(prefix + "var", None)
            if var is not None:
                state_dict[prefix + "std"] = var.sqrt()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Normalizer(4)
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(2))])
        self.extra = nn.ParameterDict({"temp": nn.Parameter(torch.tensor(1.5))})
        self.heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 1, bias=False)})
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(arr(*p.shape))

    def forward(self, x):
        h = self.body(self.norm(x)) * self.scales[0] + self.scales[1]
        return self.heads["a"](h / self.extra["temp"]) + self.heads["b"](h)


m = Model()
sd = m.state_dict()
print("keys", list(sd.keys()))
print("cache persistent:", "norm.cache" in sd, "None buffer listed:", "norm.maybe" in sd,
      "buffers", [n for n, _ in m.named_buffers()])
print("extra state", sd["norm._extra_state"], "metadata version", sd._metadata["norm"]["version"])
m64 = copy.deepcopy(m).double()
print("deepcopy/double keeps the non-persistent buffer:", m64.norm.cache.dtype, m64.norm.cache[0].item())

x = arr(5, 4)
m.norm.mean.copy_(x.mean(0))
m.norm.std.copy_(x.std(0))
m.norm.config["clip"] = 2.0
buf = io.BytesIO()
torch.save(m.state_dict(), buf)
buf.seek(0)
loaded = torch.load(buf, weights_only=True)
m2 = Model()
res = m2.load_state_dict(loaded)
print("load result", res, "missing", res.missing_keys, "unexpected", res.unexpected_keys)
print("same output:", torch.allclose(m(x), m2(x)), "config restored:", m2.norm.config)

# an old (version 1) checkpoint: "var" instead of "std", no extra state
old = {k: v for k, v in loaded.items() if not k.startswith("norm.")}
old["norm.mean"] = loaded["norm.mean"]
old["norm.var"] = loaded["norm.std"] ** 2
old = type(loaded)(old)
old._metadata = {"norm": {"version": 1}}
m3 = Model()
res = m3.load_state_dict(old, strict=False)
print("migrated:", torch.allclose(m3.norm.std, m.norm.std), "missing", res.missing_keys,
      "unexpected", res.unexpected_keys)

partial = {k: v for k, v in loaded.items() if k.startswith("body.")}
partial["body.9.weight"] = torch.zeros(1)
res = Model().load_state_dict(partial, strict=False)
print("partial missing", sorted(res.missing_keys))
print("partial unexpected", res.unexpected_keys)
try:
    Model().load_state_dict(partial)
except RuntimeError as e:
    msg = str(e)
    print("strict load raises:", "Missing key(s)" in msg, "Unexpected key(s)" in msg)
bad = dict(loaded)
bad["body.0.weight"] = torch.zeros(3, 4)
try:
    Model().load_state_dict(bad)
except RuntimeError as e:
    print("size mismatch raises:", "size mismatch for body.0.weight" in str(e))

# assign=True keeps the loaded tensors themselves
src = {k: v.clone() if torch.is_tensor(v) else v for k, v in loaded.items()}
m4 = Model()
m4.load_state_dict(src, assign=True)
print("assign keeps identity:", m4.body[0].weight.data_ptr() == src["body.0.weight"].data_ptr(),
      "still a Parameter:", isinstance(m4.body[0].weight, nn.Parameter),
      "requires_grad:", m4.body[0].weight.requires_grad)

# float64 model loading a float32 checkpoint
m5 = Model().double()
m5.load_state_dict(loaded)
print("float64 model keeps dtype:", m5.body[0].weight.dtype,
      "values:", torch.allclose(m5(x.double()).float(), m(x), atol=1e-5))

# prefixes, keep_vars, hooks
sd2 = m.state_dict(prefix="model.", keep_vars=True)
print("prefixed", list(sd2)[:3], "keep_vars gives Parameters:",
      isinstance(sd2["model.body.0.weight"], nn.Parameter))
seen = []
h1 = m.register_state_dict_post_hook(lambda mod, sd, prefix, local_metadata: seen.append(len(sd)))
h2 = m2.register_load_state_dict_post_hook(lambda mod, keys: seen.append(len(keys.missing_keys)))
m.state_dict()
m2.load_state_dict(m.state_dict())
h1.remove()
h2.remove()
m.state_dict()
print("hooks saw", seen)

# model + optimizer + scheduler checkpoint continued after reload
torch.manual_seed(0)
Y = arr(64, 1)
X = arr(64, 4)


def run(model, opt, sched, steps):
    out = []
    for _ in range(steps):
        loss = nn.functional.mse_loss(model(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        out.append(round(loss.item(), 5))
    return out


def make(model):
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5, centered=True)
    return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)


ma = Model()
oa, sa = make(ma)
first = run(ma, oa, sa, 5)
buf = io.BytesIO()
torch.save({"model": ma.state_dict(), "opt": oa.state_dict(), "sched": sa.state_dict(),
            "step": 5}, buf)
rest = run(ma, oa, sa, 5)
buf.seek(0)
ck = torch.load(buf, weights_only=True)
mb = Model()
ob, sb = make(mb)
mb.load_state_dict(ck["model"])
ob.load_state_dict(ck["opt"])
sb.load_state_dict(ck["sched"])
print("optimizer state keys", sorted(ck["opt"]["state"][0].keys()), "step", ck["step"])
again = run(mb, ob, sb, 5)
print("losses", first, rest)
print("resumed losses equal:", np.allclose(again, rest, atol=1e-5), "lr", sb.get_last_lr())
