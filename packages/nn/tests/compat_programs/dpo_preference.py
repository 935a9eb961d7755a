"""Preference optimization in the style of the public TRL / DPO reference code on a tiny causal
transformer: synthetic prompts with a chosen and a rejected response of varying length (right
padded, labels set to -100 over the prompt and the padding), supervised fine-tuning with
F.cross_entropy(ignore_index=-100), a frozen reference policy made by copy.deepcopy +
requires_grad_(False), per-sequence log-probabilities by log_softmax + gather over shifted
labels with a loss mask, the DPO loss (F.logsigmoid of beta-scaled log-ratio differences, with
label smoothing as in conservative DPO), implicit reward accuracies and margins, a
Bradley-Terry reward model that pools the last non-padded token by gather on
attention_mask.sum(1) - 1, and greedy generation under torch.inference_mode scoring how often
the preferred tokens appear. nn.TransformerEncoderLayer(norm_first=True, batch_first=True) with
a causal mask from nn.Transformer.generate_square_subsequent_mask. Data and weights from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first DPO loss> <last DPO loss> <reward model accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(131)
V, PAD, BOS, SEP = 12, 0, 1, 2
GOOD = [3, 4, 5]
P, R = 4, 5  # prompt and longest response length


def response(good):
    n = int(rng.integers(3, R + 1))
    pool = GOOD if good else list(range(6, V))
    toks = [int(rng.choice(pool)) if rng.random() < 0.8 else int(rng.integers(3, V)) for _ in range(n)]
    return toks


def batch(n):
    ids, labels, masks = [], [], []
    for _ in range(n):
        prompt = [BOS] + [int(t) for t in rng.integers(3, V, P - 1)] + [SEP]
        for good in (True, False):
            r = response(good)
            seq = prompt + r
            pad = (P + 1 + R) - len(seq)
            ids.append(seq + [PAD] * pad)
            labels.append([-100] * len(prompt) + r + [-100] * pad)
            masks.append([1] * len(seq) + [0] * pad)
    return (torch.tensor(a, dtype=torch.long) for a in (ids, labels, masks))  # rows alternate chosen, rejected


class TinyLM(nn.Module):
    def __init__(self, d=32, heads=4, layers=2, T=P + 1 + R):
        super().__init__()
        self.tok = nn.Embedding(V, d, padding_idx=PAD)
        self.pos = nn.Parameter(torch.zeros(1, T, d))
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, V, bias=False)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(T), persistent=False)

    def hidden(self, ids):
        T = ids.shape[1]
        h = self.tok(ids) + self.pos[:, :T]
        return self.norm(self.blocks(h, mask=self.causal[:T, :T], is_causal=True))

    def forward(self, ids):
        return self.head(self.hidden(ids))


def init_(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(rng.normal(0, 0.02 if "pos" in name else 1 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
            elif "bias" in name:
                p.zero_()
    return model


def seq_logps(model, ids, labels):
    logits = model(ids)[:, :-1]
    labels = labels[:, 1:].clone()
    mask = labels != -100
    labels[~mask] = 0
    per_tok = torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2)
    return (per_tok * mask).sum(-1)


torch.manual_seed(0)
policy = init_(TinyLM())
opt = torch.optim.AdamW(policy.parameters(), lr=3e-3, weight_decay=0.01)
for step in range(30):  # SFT on both responses: the policy learns the format, not the preference
    ids, labels, _ = batch(16)
    logits = policy(ids)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"sft step {step:2d} loss {loss.item():.5f}")

reference = copy.deepcopy(policy).requires_grad_(False).eval()
print(f"reference frozen: {not any(p.requires_grad for p in reference.parameters())} "
      f"policy trainable: {sum(p.numel() for p in policy.parameters() if p.requires_grad)}")


def greedy_good_rate(model, n=16):
    prompts = torch.tensor([[BOS] + [int(t) for t in rng.integers(3, V, P - 1)] + [SEP] for _ in range(n)])
    out = prompts
    with torch.inference_mode():
        for _ in range(3):
            nxt = model(out)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt], 1)
    gen = out[:, P + 1:]
    return torch.isin(gen, torch.tensor(GOOD)).float().mean().item()


print(f"good-token rate before DPO {greedy_good_rate(policy):.4f}")
beta, smoothing = 0.5, 0.05
opt = torch.optim.AdamW(policy.parameters(), lr=1e-3, weight_decay=0.0)
dpo_losses = []
for step in range(30):
    ids, labels, _ = batch(16)
    logps = seq_logps(policy, ids, labels)
    with torch.no_grad():
        ref_logps = seq_logps(reference, ids, labels)
    pi_c, pi_r, ref_c, ref_r = logps[0::2], logps[1::2], ref_logps[0::2], ref_logps[1::2]
    logits = (pi_c - pi_r) - (ref_c - ref_r)
    loss = (-F.logsigmoid(beta * logits) * (1 - smoothing) - F.logsigmoid(-beta * logits) * smoothing).mean()
    chosen_r, rejected_r = beta * (pi_c - ref_c).detach(), beta * (pi_r - ref_r).detach()
    opt.zero_grad()
    loss.backward()
    opt.step()
    dpo_losses.append(loss.item())
    if step % 10 == 9:  # at step 0 the policy is the reference: the accuracy is a coin flip of roundings
        print(f"dpo step {step:2d} loss {loss.item():.5f} reward acc {(chosen_r > rejected_r).float().mean().item():.4f} "
              f"margin {(chosen_r - rejected_r).mean().item():.5f}")
print(f"good-token rate after DPO {greedy_good_rate(policy):.4f}")


class RewardModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lm = TinyLM()
        self.score = nn.Linear(32, 1)

    def forward(self, ids, mask):
        h = self.lm.hidden(ids)
        last = mask.sum(1) - 1
        pooled = h.gather(1, last.view(-1, 1, 1).expand(-1, 1, h.shape[-1])).squeeze(1)
        return self.score(pooled).squeeze(-1)


rm = init_(RewardModel())
opt = torch.optim.Adam(rm.parameters(), lr=2e-3)
for step in range(30):
    ids, _, mask = batch(16)
    r = rm(ids, mask)
    loss = -F.logsigmoid(r[0::2] - r[1::2]).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"rm step {step:2d} loss {loss.item():.5f}")
ids, _, mask = batch(64)
with torch.no_grad():
    r = rm(ids, mask)
acc = (r[0::2] > r[1::2]).float().mean().item()
print(f"reward model accuracy {acc:.4f} mean chosen {r[0::2].mean().item():.4f} rejected {r[1::2].mean().item():.4f}")
print(f"RESULT {dpo_losses[0]:.5f} {dpo_losses[-1]:.5f} {acc:.4f}")
