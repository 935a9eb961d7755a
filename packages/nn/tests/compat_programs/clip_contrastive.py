"""CLIP-style contrastive image-text training, in the style of the public CLIP / open_clip
training loops: two towers (a small MLP "image" encoder and an nn.EmbeddingBag "text" encoder
with mode="mean" and offsets), projections without bias, F.normalize(dim=-1), a learned
logit_scale initialized to log(1 / 0.07), exponentiated and clamped to 100 after each step
(clamp_ on .data), the symmetric cross-entropy over the logits and their transpose with
label_smoothing, in-batch accuracy and recall@k from torch.topk, zero-shot classification with
prompt embeddings averaged then renormalized, a frozen tower (requires_grad_(False)) for a
locked-image tuning phase, a cosine learning-rate schedule with warmup through LambdaLR, and
torch.no_grad / torch.inference_mode evaluation. Weights and data from NumPy: the run is the same
on both libraries. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <recall@1>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1)
n_concepts, vocab, img_dim, embed = 8, 40, 24, 16

# each concept: an image prototype and a bag of word ids
protos = rng.normal(0, 1, (n_concepts, img_dim)).astype(np.float32)
words = [rng.choice(vocab, 5, replace=False) for _ in range(n_concepts)]


def batch(idx):
    imgs = protos[idx] + rng.normal(0, 0.5, (len(idx), img_dim)).astype(np.float32)
    toks, offsets = [], []
    for c in idx:
        offsets.append(len(toks))
        toks.extend(rng.choice(words[c], 3, replace=False).tolist())
    return (torch.from_numpy(imgs), torch.tensor(toks), torch.tensor(offsets))


class CLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = nn.Sequential(nn.Linear(img_dim, 32), nn.GELU(), nn.Linear(32, 32))
        self.token_embedding = nn.EmbeddingBag(vocab, 32, mode="mean")
        self.visual_proj = nn.Linear(32, embed, bias=False)
        self.text_proj = nn.Linear(32, embed, bias=False)
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

    def encode_image(self, x, normalize=True):
        f = self.visual_proj(self.visual(x))
        return F.normalize(f, dim=-1) if normalize else f

    def encode_text(self, toks, offsets, normalize=True):
        f = self.text_proj(self.token_embedding(toks, offsets))
        return F.normalize(f, dim=-1) if normalize else f

    def forward(self, x, toks, offsets):
        return self.encode_image(x), self.encode_text(toks, offsets), self.logit_scale.exp()


def clip_loss(img, txt, scale, smoothing=0.1):
    logits_per_image = scale * img @ txt.T
    logits_per_text = logits_per_image.T
    labels = torch.arange(img.shape[0], dtype=torch.long)
    return (F.cross_entropy(logits_per_image, labels, label_smoothing=smoothing)
            + F.cross_entropy(logits_per_text, labels, label_smoothing=smoothing)) / 2, logits_per_image


model = CLIP()
with torch.no_grad():
    for name, p in model.named_parameters():
        if name != "logit_scale":
            p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
print(f"logit_scale {model.logit_scale.item():.4f} exp {model.logit_scale.exp().item():.4f}")

steps, warmup = 60, 6


def lr_lambda(step):
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))


opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1, betas=(0.9, 0.98), eps=1e-6)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
losses = []
for step in range(steps):
    idx = np.array([(step + k) % n_concepts for k in range(n_concepts)])
    img, toks, offs = batch(idx)
    i_f, t_f, scale = model(img, toks, offs)
    loss, logits = clip_loss(i_f, t_f, scale)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    with torch.no_grad():
        model.logit_scale.data.clamp_(0, math.log(100))
    losses.append(loss.item())
    if step % 15 == 0:
        acc = (logits.argmax(-1) == torch.arange(len(idx))).float().mean().item()
        print(f"step {step:2d} loss {loss.item():.4f} acc {acc:.3f} scale {scale.item():.3f} "
              f"lr {sched.get_last_lr()[0]:.5f}")

# retrieval recall@k on a fresh batch
with torch.inference_mode():
    img, toks, offs = batch(np.arange(n_concepts).repeat(2))
    i_f, t_f, _ = model(img, toks, offs)
    sims = i_f @ t_f.T
    top = sims.topk(3, dim=1).indices
    # a text counts if it is of the same concept
    concept = torch.arange(n_concepts).repeat_interleave(2)
    hit = concept[top] == concept[:, None]
    r1, r3 = hit[:, :1].any(1).float().mean().item(), hit.any(1).float().mean().item()
    print(f"recall@1 {r1:.3f} recall@3 {r3:.3f} sims in [-1, 1]: {bool(sims.abs().max() <= 1.0001)}")
    print("inference tensors:", i_f.is_inference(), i_f.requires_grad)

# zero-shot: class embedding = mean over 3 prompts, renormalized
with torch.no_grad():
    cls = []
    for c in range(n_concepts):
        toks = torch.tensor(np.stack([words[c][k:k + 3] for k in range(3)]))
        e = model.encode_text(toks, None)  # a 2-d input: each row a bag
        cls.append(F.normalize(e.mean(0), dim=0))
    cls = torch.stack(cls)
    img, _, _ = batch(np.arange(n_concepts))
    probs = (100.0 * model.encode_image(img) @ cls.T).softmax(dim=-1)
    print("zero-shot top-1", (probs.argmax(-1) == torch.arange(n_concepts)).float().mean().item(),
          "probs sum", [round(v, 4) for v in probs.sum(-1)[:3].tolist()])

# locked-image tuning: only the text tower trains
opt.zero_grad()  # set_to_none=True by default
model.visual.requires_grad_(False)
model.visual_proj.requires_grad_(False)
trainable = [n for n, p in model.named_parameters() if p.requires_grad]
print("trainable:", trainable)
opt2 = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
for step in range(10):
    img, toks, offs = batch(np.arange(n_concepts))
    loss, _ = clip_loss(*model(img, toks, offs))
    opt2.zero_grad()
    loss.backward()
    opt2.step()
print("visual grads are None:", all(p.grad is None for p in model.visual.parameters()),
      f"loss {loss.item():.4f}")
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {r1:.4f}")
