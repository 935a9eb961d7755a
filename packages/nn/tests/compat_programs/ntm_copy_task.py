"""A Neural Turing Machine in the style of the public pytorch-ntm code on the copy task: an LSTMCell
controller, one read and one write head over an N x M memory registered as a buffer, content
addressing by F.cosine_similarity between a key and every memory row (broadcast with
unsqueeze, eps as in the reference code) sharpened by a softplus key strength, interpolation
with the previous weighting by a sigmoid gate, a circular convolutional shift over {-1, 0, +1}
built from torch.roll and a softmax over shift logits, sharpening by w^gamma / sum with
gamma = 1 + softplus, erase / add writes as outer products (torch.bmm of unsqueezed vectors),
reads as weighted sums, F.binary_cross_entropy_with_logits on the recalled bits, RMSprop with
momentum as in the paper, and gradient clipping by value (clip_grad_value_). The memory bias
is initialized from NumPy and reset per batch by expand + clone; float64. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <bit error rate>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)  # sharpening (w ** gamma) amplifies roundings
rng = np.random.default_rng(150)
W, SEQ, NMEM, MDIM, H = 4, 5, 16, 8, 64


def copy_batch(b):
    seq = rng.integers(0, 2, (SEQ, b, W)).astype(np.float64)
    inp = np.zeros((2 * SEQ + 1, b, W + 1), np.float64)
    inp[:SEQ, :, :W] = seq
    inp[SEQ, :, W] = 1.0  # delimiter
    return torch.from_numpy(inp), torch.from_numpy(seq)


def shift(w, s):
    # circular convolution of each row of w with a 3-tap kernel over shifts (-1, 0, +1)
    return s[:, 0:1] * torch.roll(w, -1, dims=1) + s[:, 1:2] * w + s[:, 2:3] * torch.roll(w, 1, dims=1)


class Head(nn.Module):
    def __init__(self, write):
        super().__init__()
        self.write = write
        self.fc = nn.Linear(H, MDIM + 1 + 1 + 3 + 1 + (2 * MDIM if write else 0))

    def address(self, memory, prev_w, h):
        o = self.fc(h)
        k, beta, g, s, gamma = torch.split(o[:, :MDIM + 6], [MDIM, 1, 1, 3, 1], dim=1)
        sim = F.cosine_similarity(memory + 1e-16, k.unsqueeze(1) + 1e-16, dim=-1)
        wc = torch.softmax(F.softplus(beta) * sim, dim=1)
        wg = torch.sigmoid(g) * wc + (1 - torch.sigmoid(g)) * prev_w
        ws = shift(wg, torch.softmax(s, dim=1))
        w = ws ** (1 + F.softplus(gamma))
        w = w / (w.sum(1, keepdim=True) + 1e-16)
        return w, o[:, MDIM + 6:]


class NTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.controller = nn.LSTMCell(W + 1 + MDIM, H)
        self.read_head, self.write_head = Head(False), Head(True)
        self.out = nn.Linear(H + MDIM, W)
        self.register_buffer("mem_bias", torch.from_numpy(rng.uniform(-1, 1, (NMEM, MDIM)).astype(np.float64) / float(np.sqrt(NMEM + MDIM))))
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape).astype(np.float64)))

    def forward(self, inputs):
        b = inputs.shape[1]
        memory = self.mem_bias.expand(b, -1, -1).clone()
        h, c = torch.zeros(b, H), torch.zeros(b, H)
        r = torch.zeros(b, MDIM)
        wr = wwr = torch.zeros(b, NMEM)
        outs = []
        for x in inputs:
            h, c = self.controller(torch.cat([x, r], 1), (h, c))
            wr, _ = self.read_head.address(memory, wr, h)
            wwr, extra = self.write_head.address(memory, wwr, h)
            e, a = torch.sigmoid(extra[:, :MDIM]), torch.tanh(extra[:, MDIM:])
            memory = memory * (1 - torch.bmm(wwr.unsqueeze(2), e.unsqueeze(1))) + torch.bmm(wwr.unsqueeze(2), a.unsqueeze(1))
            r = torch.bmm(wr.unsqueeze(1), memory).squeeze(1)
            outs.append(self.out(torch.cat([h, r], 1)))
        return torch.stack(outs), wr, memory


w = torch.tensor([[0.1, 0.7, 0.2, 0.0]])
print(f"shift +1 {[round(v, 3) for v in shift(w, torch.tensor([[0.0, 0.0, 1.0]])).flatten().tolist()]} "
      f"cosine broadcast {tuple(F.cosine_similarity(torch.ones(2, 5, 3), torch.ones(2, 1, 3), dim=-1).shape)}")

model = NTM()
opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, momentum=0.9, alpha=0.95)
losses = []
for step in range(80):  # the addressing is chaotic: roundings grow ~10x per 10 steps
    inp, target = copy_batch(16)
    out, wr, mem = model(inp)
    loss = F.binary_cross_entropy_with_logits(out[SEQ + 1:], target)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_value_(model.parameters(), 10.0)
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:3d} loss {loss.item():.5f} read weight max {wr.max().item():.4f} memory norm {mem.norm().item():.4f}")

with torch.no_grad():
    inp, target = copy_batch(64)
    out, wr, mem = model(inp)
    errors = ((out[SEQ + 1:] > 0).float() != target).float().mean().item()
print(f"bit error rate {errors:.4f} weights sum to one: {torch.allclose(wr.sum(1), torch.ones(64), atol=1e-5)}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {errors:.4f}")
