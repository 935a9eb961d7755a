"""The nn.Module state_dict machinery that checkpoint utilities and model libraries lean on:
buffers registered with persistent=False, get_extra_state / set_extra_state, a versioned module
(_version and the state_dict's _metadata) whose _load_from_state_dict migrates an old key name,
state_dict pre / post hooks (register_state_dict_pre_hook, register_state_dict_post_hook, the
older _register_state_dict_hook that edits the returned dict), load_state_dict pre / post hooks
(register_load_state_dict_pre_hook, register_load_state_dict_post_hook clearing ignorable
missing keys), load_state_dict(strict=False) and its missing / unexpected keys, the strict error
messages (missing, unexpected, size mismatch), assign=True keeping the loaded tensors, keep_vars
and prefix, named_modules / named_parameters / named_buffers with remove_duplicate=False on tied
weights, get_submodule / get_parameter / get_buffer and their errors, set_submodule, apply for
initialization, and a fine-tuning loop resumed from a migrated checkpoint. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <state keys>."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Normalizer(nn.Module):
    """Running input statistics; version 2 renamed `mu` to `mean`."""
    _version = 2

    def __init__(self, n):
        super().__init__()
        self.register_buffer("mean", torch.zeros(n))
        self.register_buffer("scratch", torch.zeros(n), persistent=False)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x - self.mean

    def get_extra_state(self):
        return {"calls": self.calls}

    def set_extra_state(self, state):
        self.calls = state["calls"]

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and prefix + "mu" in state_dict:
            state_dict[prefix + "mean"] = state_dict.pop(prefix + "mu")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Normalizer(4)
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.head = nn.Linear(8, 4, bias=False)
        self.decoder = nn.Linear(4, 8, bias=False)
        self.decoder.weight = self.head.weight  # tied (transposed use below)
        self.register_buffer("step", torch.tensor(0))

    def forward(self, x):
        h = self.encoder(self.norm(x))
        return self.head(h), F.linear(self.head(h), self.decoder.weight.t())


def init_fn(m):
    if isinstance(m, nn.Linear):
        with torch.no_grad():
            m.weight.copy_(0.3 * torch.sin(torch.arange(m.weight.numel(), dtype=torch.float32)
                                           + m.weight.shape[0]).view_as(m.weight))
            if m.bias is not None:
                m.bias.fill_(0.05)


net = Net()
net.apply(init_fn)
sd = net.state_dict()
print("keys", list(sd.keys()))
print("metadata versions", {k: v.get("version") for k, v in sd._metadata.items()})
print("extra state", sd["norm._extra_state"], "non-persistent kept out:",
      "norm.scratch" not in sd)
print("tied weights share:", sd["head.weight"].data_ptr() == sd["decoder.weight"].data_ptr())
print("prefixed", list(net.encoder.state_dict(prefix="enc.").keys()))
kv = net.state_dict(keep_vars=True)
print("keep_vars", type(kv["head.weight"]).__name__, kv["head.weight"].requires_grad,
      "detached", type(sd["head.weight"]).__name__, sd["head.weight"].requires_grad)

# ---- state_dict hooks ----
seen = []
h1 = net.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: seen.append(("pre", prefix)))


def post_hook(module, state_dict, prefix, local_metadata):
    state_dict[prefix + "tag"] = torch.tensor(7)
    seen.append(("post", prefix))


h2 = net.norm.register_state_dict_post_hook(post_hook)


def old_hook(module, state_dict, prefix, local_metadata):
    # the private hook may return a new dict: keep only floating-point tensors
    return type(state_dict)((k, v) for k, v in state_dict.items()
                            if not (torch.is_tensor(v) and not v.is_floating_point()))


h3 = net._register_state_dict_hook(old_hook)
hooked = net.state_dict()
print("hooked keys", list(hooked.keys()), seen)
for h in (h1, h2, h3):
    h.remove()
print("after removal", list(net.state_dict().keys()) == list(sd.keys()))

# ---- loading: strict, non-strict, migrations ----
fresh = Net()
res = fresh.load_state_dict(sd)
print("strict load:", res, "missing", res.missing_keys, "unexpected", res.unexpected_keys)
partial = {k: v for k, v in sd.items() if not k.startswith("encoder.")}
partial["extra.weight"] = torch.ones(1)
res = fresh.load_state_dict(partial, strict=False)
print("non-strict:", sorted(res.missing_keys), res.unexpected_keys)
try:
    fresh.load_state_dict(partial)
except RuntimeError as e:
    print("strict error:", str(e).replace("\t", "<TAB>").splitlines())
bad = dict(sd)
bad["head.weight"] = torch.zeros(3, 8)
try:
    fresh.load_state_dict(bad)
except RuntimeError as e:
    print("size mismatch:", str(e).replace("\t", "<TAB>").splitlines())

old = dict(sd)
old["norm.mu"] = old.pop("norm.mean") + 1.5
meta_old = dict(sd._metadata)
meta_old["norm"] = {"version": 1}
old = type(sd)(old)
old._metadata = meta_old
migrated = Net()
res = migrated.load_state_dict(old)
print("migrated v1 checkpoint:", res.missing_keys, res.unexpected_keys,
      migrated.norm.mean.tolist(), "calls", migrated.norm.calls)

# ---- load hooks ----
events = []


def load_pre(module, state_dict, prefix, local_metadata, strict, missing_keys,
             unexpected_keys, error_msgs):
    events.append(("pre", prefix))
    if prefix + "legacy_scale" in state_dict:
        state_dict.pop(prefix + "legacy_scale")


def load_post(module, incompatible_keys):
    events.append(("post", len(incompatible_keys.missing_keys)))
    for k in list(incompatible_keys.missing_keys):
        if k.endswith("step"):
            incompatible_keys.missing_keys.remove(k)


lp = migrated.register_load_state_dict_pre_hook(load_pre)
lq = migrated.register_load_state_dict_post_hook(load_post)
ck = dict(sd)
ck["legacy_scale"] = torch.tensor(2.0)
del ck["step"]
res = migrated.load_state_dict(ck)
print("load hooks:", events, "result", res.missing_keys, res.unexpected_keys)
lp.remove()
lq.remove()

# ---- assign=True ----
src = {k: v.clone() for k, v in sd.items() if k != "norm._extra_state"}
src["norm._extra_state"] = {"calls": 3}
target = Net()
before = target.encoder[0].weight
target.load_state_dict(src, assign=True)
print("assign=True:", target.encoder[0].weight is not before,
      target.encoder[0].weight.data_ptr() == src["encoder.0.weight"].data_ptr(),
      type(target.encoder[0].weight).__name__, target.encoder[0].weight.requires_grad,
      "calls", target.norm.calls)

# ---- traversal ----
print("named_modules", [n for n, _ in net.named_modules()])
print("parameters", [n for n, _ in net.named_parameters()])
print("with duplicates", [n for n, _ in net.named_parameters(remove_duplicate=False)])
print("buffers", [n for n, _ in net.named_buffers()],
      [n for n, _ in net.named_buffers(prefix="model", recurse=False)])
net.shared = net.encoder
print("module duplicates", len(list(net.named_modules())),
      len(list(net.named_modules(remove_duplicate=False))))
del net.shared
print("get_submodule", type(net.get_submodule("encoder.1")).__name__,
      tuple(net.get_parameter("encoder.0.bias").shape), net.get_buffer("norm.mean").shape)
for getter, target_name in ((net.get_submodule, "encoder.7"), (net.get_submodule, "head.weight"),
                            (net.get_parameter, "norm.mean"), (net.get_parameter, "head.bias2"),
                            (net.get_buffer, "head.weight")):
    try:
        getter(target_name)
    except AttributeError as e:
        print(getter.__name__, "error:", e)
net.set_submodule("encoder.1", nn.GELU())
for bad_target in ("encoder.5", "norm.mean"):
    try:
        net.set_submodule(bad_target, nn.ReLU(), strict=True)
    except AttributeError as e:
        print("set_submodule strict error:", e)
print("set_submodule", net.encoder)
print("children", [n for n, _ in net.named_children()])

# ---- fine-tune from the migrated checkpoint ----
torch.manual_seed(0)
x = torch.linspace(-1, 1, 64).view(16, 4)
opt = torch.optim.Adam(migrated.parameters(), lr=1e-2)
losses = []
for step in range(50):
    out, recon = migrated(x)
    loss = F.mse_loss(out, x.flip(1)) + 0.1 * F.mse_loss(recon, x.repeat(1, 2).tanh())
    opt.zero_grad()
    loss.backward()
    opt.step()
    migrated.step += 1
    losses.append(loss.item())
print(f"fine-tune {losses[0]:.5f} -> {losses[-1]:.5f}, step buffer {migrated.step.item()}, "
      f"calls {migrated.norm.calls}")
final = migrated.state_dict()
print("final extra state", final["norm._extra_state"])
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {len(final)}")
