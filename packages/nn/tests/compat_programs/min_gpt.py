"""A minGPT-style character-level Transformer, in the style of the public GPT training scripts:
causal self-attention with a registered mask buffer, LayerNorm, a GELU MLP, tied input/output
embeddings, AdamW with weight-decay groups, gradient clipping, a warmup + cosine LR schedule,
top-k sampling with torch.multinomial, and a checkpoint dict saved, loaded and resumed.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. ``--save-init``/``--init-from`` move the initial weights through a NumPy .npz file, so
two runs can start from the same weights."""

import argparse
import contextlib
import dataclasses
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=60)
parser.add_argument("--out", default=".")
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
args = parser.parse_args(sys.argv[1:])


@dataclasses.dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 32
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True
    flash: bool = False  # F.scaled_dot_product_attention instead of the masked softmax


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = config.flash and hasattr(torch.nn.functional, "scaled_dot_product_attention")
        if not self.flash:
            # the causal mask: ones on and below the diagonal, a buffer so .to() moves it
            mask = torch.tril(torch.ones(config.block_size, config.block_size))
            self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def get_num_params(self, non_embedding=True):
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def crop_block_size(self, block_size):
        # model surgery: a smaller context than the model was built with
        assert block_size <= self.config.block_size
        self.config.block_size = block_size
        self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])
        for block in self.transformer.h:
            if hasattr(block.attn, "bias"):
                block.attn.bias = block.attn.bias[:, :, :block_size, :block_size]

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"sequence of {t} > block size {self.config.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])  # only the last position
            loss = None
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        # weights of Linear layers decay; biases, LayerNorm and Embedding weights don't
        decay, no_decay = set(), set()
        whitelist = (torch.nn.Linear,)
        blacklist = (torch.nn.LayerNorm, torch.nn.Embedding)
        for mn, m in self.named_modules():
            for pn, p in m.named_parameters(recurse=False):
                fpn = f"{mn}.{pn}" if mn else pn
                if pn.endswith("bias"):
                    no_decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, whitelist):
                    decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, blacklist):
                    no_decay.add(fpn)
        param_dict = {pn: p for pn, p in self.named_parameters()}
        if self.config.tie_weights:
            # the tied weight is named once, after the embedding that holds it first
            decay.discard("lm_head.weight")
            no_decay.discard("transformer.wte.weight")
            decay.add("transformer.wte.weight")
        inter_params = decay & no_decay
        union_params = decay | no_decay
        assert len(inter_params) == 0, f"in both sets: {inter_params}"
        assert len(param_dict.keys() - union_params) == 0, \
            f"in neither set: {param_dict.keys() - union_params}"
        optim_groups = [
            {"params": [param_dict[pn] for pn in sorted(decay)], "weight_decay": weight_decay},
            {"params": [param_dict[pn] for pn in sorted(no_decay)], "weight_decay": 0.0},
        ]
        print(f"num decayed parameter tensors: {len(decay)}, "
              f"with {sum(param_dict[pn].numel() for pn in decay):,} parameters")
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size \
                else idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


# -- data: a tiny corpus, encoded with a character table ---------------------------------------
text = ("First Citizen: Before we proceed any further, hear me speak.\n"
        "All: Speak, speak.\n"
        "First Citizen: You are all resolved rather to die than to famish?\n"
        "All: Resolved. resolved.\n") * 4
chars = sorted(list(set(text)))
vocab_size = len(chars)
stoi = {ch: i for i, ch in enumerate(chars)}
itos = {i: ch for i, ch in enumerate(chars)}


def encode(s):
    return [stoi[c] for c in s]


def decode(ids):
    return "".join(itos[i] for i in ids)


data = np.array(encode(text), dtype=np.uint16)
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]

torch.manual_seed(args.seed)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")
device = "cuda" if torch.cuda.is_available() else "cpu"
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
ctx = contextlib.nullcontext() if args.dtype == "float32" else \
    torch.amp.autocast(device_type=device_type, dtype=ptdtype)
# a loss scaler only matters for float16; with bfloat16/float32 it is a no-op
scaler = torch.amp.GradScaler(device_type, enabled=(args.dtype == "float16"))

batch_size, block_size = 8, 16
rng = np.random.default_rng(args.seed)  # batches from NumPy, the same on every framework


def get_batch(split):
    d = train_data if split == "train" else val_data
    ix = rng.integers(0, len(d) - block_size, size=batch_size)
    x = torch.stack([torch.from_numpy((d[i:i + block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((d[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)


model_args = dict(n_layer=2, n_head=2, n_embd=32, block_size=block_size, bias=True,
                  vocab_size=vocab_size, dropout=0.0)
gptconf = GPTConfig(**model_args)
model = GPT(gptconf).to(device)
print(f"number of parameters: {model.get_num_params() / 1e6:.2f}M")
assert model.transformer.wte.weight is model.lm_head.weight
assert "bias" in dict(model.transformer.h[0].attn.named_buffers())

if args.save_init:
    np.savez(args.save_init, **{k: v.cpu().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
    assert model.transformer.wte.weight is model.lm_head.weight  # still tied

learning_rate, warmup_iters = 3e-3, 6
optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=learning_rate,
                                       betas=(0.9, 0.95))
# an exponential moving average of the weights, evaluated next to the model
ema = torch.optim.swa_utils.AveragedModel(
    model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
# the same average the way hand-written EMA helpers keep it: a detached copy of the weights
# updated with the multi-tensor lerp
ema_weights = [p.detach().clone() for p in model.parameters()]
scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, schedulers=[
    torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=warmup_iters),
    torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.iters - warmup_iters,
                                               eta_min=learning_rate / 10),
], milestones=[warmup_iters])

eval_iters = 4
eval_batches = {s: [get_batch(s) for _ in range(eval_iters)] for s in ("train", "val")}


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k, (X, Y) in enumerate(eval_batches[split]):
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


os.makedirs(args.out, exist_ok=True)
ckpt_path = os.path.join(args.out, "ckpt.pt")
best_val_loss = 1e9
always_save_checkpoint = True
first_loss = None
X, Y = get_batch("train")
t0 = time.time()
for iter_num in range(args.iters + 1):
    if iter_num % 20 == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if losses["val"] < best_val_loss or always_save_checkpoint:
            best_val_loss = min(losses["val"], best_val_loss)
            checkpoint = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "ema": ema.state_dict(),
                "model_args": model_args,
                "iter_num": iter_num,
                "best_val_loss": best_val_loss,
                "config": vars(args),
            }
            print(f"saving checkpoint to {args.out}")
            torch.save(checkpoint, ckpt_path)
    if iter_num == args.iters:
        break
    with ctx:
        logits, loss = model(X, Y)
    X, Y = get_batch("train")  # prefetch the next batch
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
    ema.update_parameters(model)
    with torch.no_grad():
        if iter_num > 0:  # AveragedModel's first update copies
            torch._foreach_lerp_(ema_weights, list(model.parameters()), 1 - 0.9)
        else:
            torch._foreach_copy_(ema_weights, [p.detach() for p in model.parameters()])
    lossf = loss.item()
    first_loss = lossf if first_loss is None else first_loss
    if iter_num % 10 == 0:
        dt = time.time() - t0
        t0 = time.time()
        lr = scheduler.get_last_lr()[0]
        print(f"iter {iter_num}: loss {lossf:.6f}, lr {lr:.2e}, norm {norm:.4f}, "
              f"time {dt * 1000:.2f}ms")

# -- resume from the checkpoint: the same weights, optimizer moments and schedule -------------
checkpoint = torch.load(ckpt_path, map_location=device)
assert checkpoint["iter_num"] == args.iters and checkpoint["config"]["iters"] == args.iters
resumed = GPT(GPTConfig(**checkpoint["model_args"]))
state_dict = checkpoint["model"]
unwanted_prefix = "_orig_mod."
for k, v in list(state_dict.items()):
    if k.startswith(unwanted_prefix):
        state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
resumed.load_state_dict(state_dict)
resumed.to(device)
resumed_opt = resumed.configure_optimizers(0.1, learning_rate, (0.9, 0.95))
resumed_opt.load_state_dict(checkpoint["optimizer"])
model.eval()
resumed.eval()
with torch.no_grad():
    xb, yb = eval_batches["val"][0]
    _, l_model = model(xb, yb)
    _, l_resumed = resumed(xb, yb)
    ema.eval()
    _, l_ema = ema(xb, yb)
print(f"resumed val loss {l_resumed.item():.6f} (best {checkpoint['best_val_loss']:.6f}), "
      f"ema {l_ema.item():.6f} after {int(checkpoint['ema']['n_averaged'])} updates")
assert ema.module.transformer.wte.weight is ema.module.lm_head.weight
for a, b in zip(ema.module.parameters(), ema_weights):
    assert torch.allclose(a, b, atol=1e-6)
assert torch.allclose(l_model, l_resumed)
# one more step on both: the restored AdamW state gives the same update
model.train()
resumed.train()
for m, o in ((model, optimizer), (resumed, resumed_opt)):
    o.zero_grad()
    m(xb, yb)[1].backward()
    o.step()
torch.testing.assert_close(dict(resumed.named_parameters()), dict(model.named_parameters()),
                           rtol=1e-5, atol=1e-6)

# -- the same weights in a model with fused attention (no mask buffers), then cropped ----------
flash_model = GPT(GPTConfig(**dict(checkpoint["model_args"], flash=True))).to(device)
missing, unexpected = flash_model.load_state_dict(model.state_dict(), strict=False)
assert not missing and sorted(unexpected) == [f"transformer.h.{i}.attn.bias" for i in range(2)]
flash_model.eval()
with torch.inference_mode():
    ref, _ = model(xb, yb)
    got, _ = flash_model(xb, yb)
err = (ref - got).abs().max()
print(f"fused attention max diff {err:.2e}")
assert err < 1e-4
model.crop_block_size(8)
assert model.transformer.h[0].attn.bias.shape == (1, 1, 8, 8)
assert model.transformer.wpe.weight.shape == (8, model_args["n_embd"])
assert "transformer.h.0.attn.bias" in model.state_dict()

# -- sampling: top-k, with the model in eval mode ----------------------------------------------
model.eval()
start_ids = encode("First")
x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]
with torch.no_grad():
    with ctx:
        y = model.generate(x, 40, temperature=0.8, top_k=5)
sample = decode(y[0].tolist())
print("sample:", repr(sample))
assert y.shape == (1, len(start_ids) + 40) and sample.startswith("First")

# -- export the next-token model on a fixed-length context to ONNX; check it in onnxruntime --
try:
    import onnx  # noqa: F401
    import onnxruntime as ort
except ImportError:
    ort = None
if ort is None:
    print("onnx: skipped (onnx/onnxruntime not installed)")
else:
    context = y[:, -model.config.block_size:]
    onnx_path = os.path.join(args.out, "min_gpt.onnx")
    torch.onnx.export(model, (context,), onnx_path, input_names=["idx"], output_names=["logits"],
                      dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=17, dynamo=False)
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    batch = torch.cat([context, y[:, :model.config.block_size]])  # another batch size
    with torch.no_grad():
        want, _ = model(batch)
    err = float(np.abs(sess.run(None, {"idx": batch.numpy()})[0] - want.numpy()).max())
    assert err < 1e-4, err
    print(f"onnx: exported, onnxruntime max abs error {err:.1e}")
print(f"RESULT {first_loss:.6f} {lossf:.6f}")
