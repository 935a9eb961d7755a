"""Knowledge distillation from a trained teacher into a smaller student, in the style of the
public knowledge-distillation tutorials: the teacher trained first and frozen
(requires_grad_(False), eval()), a soft-target loss of KLDivLoss on temperature-scaled
log-probabilities (reduction="batchmean", with log_target=True and its probability form agreeing),
scaled by T^2 and mixed with hard-label cross-entropy, a cosine-similarity hidden-state loss
through a forward hook, SGD with momentum and nesterov, MultiStepLR, and the student compared with
one trained without the teacher. No random draws during training: from the same initial weights
(``--save-init``/``--init-from``) the losses agree with torch's. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--T", type=float, default=4.0)
parser.add_argument("--alpha", type=float, default=0.7)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)

rng = np.random.default_rng(0)
CENTERS = rng.normal(0, 1.0, (6, 10)).astype(np.float32)


def make(n):
    y = rng.integers(0, 6, n)
    x = CENTERS[y] + rng.normal(0, 0.9, (n, 10)).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y)


x_train, y_train = make(384)
x_test, y_test = make(256)


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.classifier = nn.Linear(32, 6)

    def forward(self, x):
        return self.classifier(self.features(x))


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(10, 32), nn.Tanh())
        self.classifier = nn.Linear(32, 6)

    def forward(self, x):
        return self.classifier(self.features(x))


teacher, student, baseline = Teacher(), Student(), Student()
baseline.load_state_dict(student.state_dict())
models = {"teacher": teacher, "student": student, "baseline": baseline}
if args.save_init:
    np.savez(args.save_init, **{f"{n}.{k}": v.detach().numpy() for n, m in models.items()
                                for k, v in m.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        for n, m in models.items():
            m.load_state_dict({k[len(n) + 1:]: torch.from_numpy(f[k]) for k in f.files
                               if k.startswith(n + ".")})


def accuracy(model):
    model.eval()
    with torch.no_grad():
        return (model(x_test).argmax(1) == y_test).float().mean().item()


def train(model, epochs, loss_fn, lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[epochs // 2], gamma=0.2)
    losses = []
    for _ in range(epochs):
        model.train()
        total = 0.0
        for i in range(0, len(x_train), 64):
            xb, yb = x_train[i:i + 64], y_train[i:i + 64]
            opt.zero_grad()
            loss = loss_fn(model, xb, yb)
            loss.backward()
            opt.step()
            total += loss.item()
        sched.step()
        losses.append(total / (len(x_train) // 64))
    return losses


ce = nn.CrossEntropyLoss()
t_losses = train(teacher, 10, lambda m, x, y: ce(m(x), y))
teacher.requires_grad_(False)
teacher.eval()
print(f"teacher: loss {t_losses[0]:.4f} -> {t_losses[-1]:.4f}, accuracy {accuracy(teacher):.3f}, "
      f"trainable {sum(p.requires_grad for p in teacher.parameters())}")

# the teacher's penultimate features, caught by a forward hook
captured = {}
handle = teacher.features.register_forward_hook(lambda mod, inp, out: captured.update(t=out))
project = nn.Linear(32, 32, bias=False)
with torch.no_grad():
    project.weight.copy_(torch.eye(32))
student.add_module("project", project)
kl_log = nn.KLDivLoss(reduction="batchmean", log_target=True)
kl = nn.KLDivLoss(reduction="batchmean")
T = args.T


def distill_loss(m, x, y):
    with torch.no_grad():
        t_logits = teacher(x)
    s_feat = m.features(x)
    s_logits = m.classifier(s_feat)
    soft_s = F.log_softmax(s_logits / T, dim=-1)
    soft_t = F.log_softmax(t_logits / T, dim=-1)
    soft = kl_log(soft_s, soft_t) * T * T
    # the same divergence from probabilities: log_target=False
    assert torch.allclose(soft, kl(soft_s, soft_t.exp()) * T * T, rtol=1e-4, atol=1e-6)
    hidden = 1 - F.cosine_similarity(m.project(s_feat), captured["t"], dim=1).mean()
    return args.alpha * soft + (1 - args.alpha) * ce(s_logits, y) + 0.1 * hidden


s_losses = train(student, 8, distill_loss)
handle.remove()
b_losses = train(baseline, 8, lambda m, x, y: ce(m(x), y))
print(f"student (distilled): loss {s_losses[0]:.4f} -> {s_losses[-1]:.4f}, "
      f"accuracy {accuracy(student):.3f}")
print(f"student (labels only): loss {b_losses[0]:.4f} -> {b_losses[-1]:.4f}, "
      f"accuracy {accuracy(baseline):.3f}")
print(f"hook removed: {len(teacher.features._forward_hooks) == 0}")
with torch.no_grad():
    agree = (student(x_test).argmax(1) == teacher(x_test).argmax(1)).float().mean().item()
print(f"student agrees with teacher on {agree:.3f} of the test set")
# the functional forms agree with the modules
a, b = torch.randn(4, 6).log_softmax(-1), torch.randn(4, 6).log_softmax(-1)
assert torch.allclose(F.kl_div(a, b, reduction="batchmean", log_target=True),
                      (b.exp() * (b - a)).sum() / 4, atol=1e-6)
assert torch.allclose(F.kl_div(a, b.exp(), reduction="sum"), (b.exp() * (b - a)).sum(), atol=1e-5)
print(f"RESULT {t_losses[-1]:.6f} {s_losses[-1]:.6f} {b_losses[-1]:.6f} {accuracy(student):.4f}")
