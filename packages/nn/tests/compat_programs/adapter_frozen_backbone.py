"""Parameter-efficient fine-tuning of a frozen backbone in the style of the public adapter /
BitFit / prefix-tuning code: a small pre-trained transformer-ish MLP backbone frozen with
requires_grad_(False), bottleneck adapters on the residual stream
(x = x + adapter(x); the in-place x += adapter(x) is refused by autograd, the adapter having
saved x, and the program reports it), the frozen blocks' F.linear products followed by in-place
updates of their inputs (fine in torch, whose products keep an input only for the other
operand's gradient), element-wise sums with transposed token-mixing outputs (laid out like
their first operand), BitFit (only biases trainable, selected by named_parameters), learned
prefix vectors concatenated to the sequence, optimizers over filter(requires_grad) parameters,
parameters_to_vector counts, features extracted under torch.inference_mode, a check that the
frozen weights never changed, and saving only the trainable state. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <adapter accuracy>."""

import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector

rng = np.random.default_rng(1521)
D, L, C = 16, 6, 3


def t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float32))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 2 * D)
        self.fc2 = nn.Linear(2 * D, D)
        self.mix = nn.Linear(L, L, bias=False)  # token mixing over the sequence axis
        self.adapter = None
        self.adapter_in_place = False

    def forward(self, x):
        h = self.mix(self.norm(x).transpose(1, 2)).transpose(1, 2)
        x = x + h
        h = self.fc2(F.gelu(self.fc1(self.norm(x))))
        x = x + h
        if self.adapter is not None:
            if self.adapter_in_place:
                x += self.adapter(x)  # refused in backward: the adapter's down-projection saved x
            else:
                x = x + self.adapter(x)
        return x


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, D)
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.head = nn.Linear(D, C)
        self.prefix = None

    def forward(self, x):
        h = self.embed(x)
        if self.prefix is not None:
            h = torch.cat([self.prefix.expand(h.shape[0], -1, -1), h[:, self.prefix.shape[0]:]], 1)
        for b in self.blocks:
            h = b(h)
        return self.head(h.mean(1))


class Adapter(nn.Module):
    def __init__(self, d, r=4):
        super().__init__()
        self.down = nn.Linear(d, r)
        self.up = nn.Linear(r, d)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x):
        return self.up(F.relu(self.down(x)))


def data(n, task):
    x = rng.normal(size=(n, L, 4))
    score = x[:, :, 0].sum(1) if task == 0 else (x[:, :, 1] * x[:, :, 2]).sum(1)
    y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]) if n > 50 else [-1.0, 1.0])
    return t(x), torch.from_numpy(y)


def numpy_init(m):
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name:
                continue
            p.copy_(t(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.05, p.shape)))


# the frozen-product idiom on its own
w = torch.tensor([[1.0, 0.0, 2.0], [0.0, -1.0, 1.0], [0.5, 0.5, 0.5]])
x0 = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
x = x0 * 1
x += F.linear(x, w)
x.sum().backward()
print(f"x += F.linear(x, frozen) backward ok, grad {x0.grad.tolist()}")
a0 = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
a = a0 * 1
logits = a @ torch.tensor([[1.0, -1.0], [0.5, 2.0]]) / torch.tensor(0.5, requires_grad=True)
logits[:, 0] -= 1.0  # written after a division by a learned temperature
a.mul_(2)
logits.sum().backward()
print(f"division and product inputs written in place, grad {a0.grad.tolist()}")

# pre-train on task 0
model = Backbone()
numpy_init(model)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
for step in range(60):
    xb, yb = data(64, 0)
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
xt, yt = data(300, 0)
with torch.inference_mode():
    acc0 = (model(xt).argmax(1) == yt).float().mean().item()
    feats = model.embed(xt)
print(f"pre-trained task-0 accuracy {acc0:.4f} inference-mode features {feats.is_inference()} requires_grad {feats.requires_grad}")

base_state = {k: v.clone() for k, v in model.state_dict().items()}
results = {}
for method in ("adapter", "bitfit", "prefix", "head"):
    m = Backbone()
    m.load_state_dict(base_state)
    m.requires_grad_(False)
    if method == "adapter":
        for b in m.blocks:
            b.adapter = Adapter(D)
            with torch.no_grad():
                b.adapter.down.weight.copy_(t(rng.normal(0, 0.3, (4, D))))
                b.adapter.down.bias.zero_()
        m.head.requires_grad_(True)
    elif method == "bitfit":
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.requires_grad_(True)
    elif method == "prefix":
        m.prefix = nn.Parameter(t(rng.normal(0, 0.5, (2, D))))
        m.head.requires_grad_(True)
    else:
        m.head.requires_grad_(True)
    if method == "adapter":
        m.blocks[0].adapter_in_place = True
        xb, yb = data(8, 1)
        try:
            F.cross_entropy(m(xb), yb).backward()
            outcome = "no error"
        except RuntimeError as e:
            outcome = f"RuntimeError ({'modified by an inplace operation' in str(e)})"
        m.blocks[0].adapter_in_place = False
        m.zero_grad(set_to_none=True)
        print(f"x += adapter(x) with a trainable adapter: {outcome}")
    trainable = [p for p in m.parameters() if p.requires_grad]
    n_train = parameters_to_vector(trainable).numel()
    n_total = sum(p.numel() for p in m.parameters())
    opt = torch.optim.Adam(filter(lambda p: p.requires_grad, m.parameters()), lr=1e-2)
    losses = []
    for step in range(60):
        xb, yb = data(64, 1)
        loss = F.cross_entropy(m(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    xt, yt = data(300, 1)
    with torch.no_grad():
        acc = (m(xt).argmax(1) == yt).float().mean().item()
    frozen_same = all(torch.equal(v, base_state[k]) for k, v in m.state_dict().items()
                      if k in base_state and not k.endswith("bias") and not k.startswith("head"))
    grads_none = all(p.grad is None for p in m.parameters() if not p.requires_grad)
    results[method] = (losses, acc)
    print(f"{method:7s} trainable {n_train:4d} / {n_total} loss {np.mean(losses[:3]):.4f} -> {np.mean(losses[-3:]):.4f} "
          f"accuracy {acc:.4f} frozen weights unchanged {frozen_same} frozen grads None {grads_none}")
    if method == "adapter":
        buf = io.BytesIO()
        torch.save({k: v for k, v in m.state_dict().items() if "adapter" in k or k.startswith("head")}, buf)
        buf.seek(0)
        sd = torch.load(buf, weights_only=True)
        print(f"saved trainable state: {len(sd)} tensors, keys {sorted(sd)[:2]}")
losses, acc = results["adapter"]
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-3:]):.4f} {acc:.4f}")
