"""Semi-supervised learning in the style of the public FixMatch / Mean Teacher code on a
two-spirals-like 2-D problem with 8 labelled and 600 unlabelled points (NumPy): weak
augmentation (small jitter) and strong augmentation (larger jitter, random scaling and feature
dropout by a NumPy mask) of the same unlabelled batch concatenated with the labelled batch in
one forward pass (the interleaving-free variant) and split back with torch.split, pseudo-labels
by torch.max of the detached weak-view softmax with a confidence threshold mask, the masked
unlabelled cross entropy (reduction="none" * mask), distribution alignment of the weak
predictions by a running mean of class probabilities, an EMA teacher by
torch.optim.swa_utils.AveragedModel(multi_avg_fn=get_ema_multi_avg_fn(0.99), use_buffers=True)
evaluated alongside the student, a Mean Teacher consistency loss (MSE between softmaxes) as an
alternative, and a cosine decay of the learning rate by LambdaLR as in the paper; float64. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <supervised-only accuracy> <FixMatch accuracy> <EMA accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

torch.set_default_dtype(torch.float64)  # pseudo-label thresholds and argmaxes: keep roundings small
rng = np.random.default_rng(151)


def spirals(n):
    t = np.sqrt(rng.uniform(0.05, 1, n)) * 3 * np.pi
    y = rng.integers(0, 2, n)
    r = t / (3 * np.pi) * 2
    ang = t + np.pi * y
    x = np.stack([r * np.cos(ang), r * np.sin(ang)], 1) + 0.05 * rng.normal(size=(n, 2))
    return torch.from_numpy(x.astype(np.float64)), torch.from_numpy(y)


Xl, Yl = spirals(16)
Xu, _ = spirals(600)
Xte, Yte = spirals(400)


def weak(x):
    return x + torch.from_numpy(0.03 * rng.normal(size=x.shape).astype(np.float64))


def strong(x):
    scale = torch.from_numpy(rng.uniform(0.85, 1.15, (x.shape[0], 1)).astype(np.float64))
    keep = torch.from_numpy((rng.random(x.shape) > 0.1).astype(np.float64))
    return (x * scale + torch.from_numpy(0.12 * rng.normal(size=x.shape).astype(np.float64))) * keep


def make():
    net = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 2))
    with torch.no_grad():
        for p in net.parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(2 / p.shape[1]), p.shape).astype(np.float64)))
            elif p is not net[3].weight:  # biases (the batch norm scale stays 1)
                p.zero_()
    return net


def accuracy(net, nll=False):
    was = net.training
    net.eval()
    with torch.no_grad():
        logits = net(Xte)
        acc = F.cross_entropy(logits, Yte).item() if nll else logits.argmax(1).eq(Yte).float().mean().item()
    net.train(was)
    return acc


def train(mode, steps=300, tau=0.9, lam=1.0):
    net = make()
    ema = AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(0.99), use_buffers=True)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: math.cos(7 * math.pi * s / (16 * steps)))
    p_model = torch.full((2,), 0.5)
    for step in range(steps):
        li = torch.from_numpy(rng.choice(16, 16, replace=False))
        ui = torch.from_numpy(rng.choice(600, 64, replace=False))
        xl, yl = weak(Xl[li]), Yl[li]
        if mode == "supervised":
            loss = F.cross_entropy(net(xl), yl)
            mask_rate = 0.0
        else:
            xw, xs = weak(Xu[ui]), strong(Xu[ui])
            logits = net(torch.cat([xl, xw, xs]))
            ll, lw, ls = torch.split(logits, [16, 64, 64])
            sup = F.cross_entropy(ll, yl)
            probs = torch.softmax(lw.detach(), -1)
            if mode == "fixmatch":
                p_model = 0.999 * p_model + 0.001 * probs.mean(0)
                probs = probs * 0.5 / p_model  # alignment toward the (balanced) labelled prior
                probs = probs / probs.sum(-1, keepdim=True)
                conf, pseudo = torch.max(probs, dim=-1)
                mask = conf.ge(tau).float()
                unsup = (F.cross_entropy(ls, pseudo, reduction="none") * mask).mean()
                mask_rate = mask.mean().item()
            else:  # mean teacher: consistency with the EMA model's weak view
                with torch.no_grad():
                    teacher = torch.softmax(ema.module(xw), -1)
                unsup = F.mse_loss(torch.softmax(ls, -1), teacher)
                mask_rate = 1.0
            loss = sup + lam * unsup
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        ema.update_parameters(net)
        if step % 100 == 0:
            print(f"{mode:10s} step {step:3d} loss {loss.item():.5f} mask {mask_rate:.4f} lr {sched.get_last_lr()[0]:.5f}")
    nll = mode == "meanteacher"  # its boundary passes near test points: report the smooth test loss
    return accuracy(net, nll), accuracy(ema.module, nll), int(ema.n_averaged.item())


sup_acc, _, _ = train("supervised")
fm_acc, fm_ema, n = train("fixmatch")
mt_acc, mt_ema, _ = train("meanteacher", lam=10.0)
print(f"accuracy: supervised {sup_acc:.4f} fixmatch {fm_acc:.4f} (ema {fm_ema:.4f}) mean teacher test nll {mt_acc:.4f} (ema {mt_ema:.4f})")
print(f"ema updates {n}")
print(f"RESULT {sup_acc:.4f} {fm_acc:.4f} {fm_ema:.4f}")
