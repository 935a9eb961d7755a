"""A toy translation model with nn.Transformer, in the style of the public "language translation
with nn.Transformer" tutorial: token and sinusoidal positional embeddings, padded batches with
src/tgt key_padding_mask and generate_square_subsequent_mask, teacher forcing with shifted
targets, CrossEntropyLoss(ignore_index=PAD), Adam with a Noam-style LambdaLR warmup, greedy
decoding through model.encoder / model.decoder, and a sequence accuracy. The task: "translate" a
digit sequence into its reversal with every digit +1. No dropout and no shuffling: from the same
initial weights (``--save-init``/``--init-from``) the losses agree with torch's to float32
rounding. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=14)
parser.add_argument("--double", action="store_true", help="float64 throughout")
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
if args.double:
    torch.set_default_dtype(torch.float64)

PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2
VOCAB = 3 + 10  # specials, then the digits 0..9 as 3..12


def make_pairs(n, rng):
    pairs = []
    for _ in range(n):
        src = rng.integers(0, 9, rng.integers(2, 6))
        tgt = (src[::-1] + 1)
        pairs.append((torch.tensor(src + 3), torch.tensor(tgt + 3)))
    return pairs


def collate_fn(batch):
    src_batch, tgt_batch = [], []
    for src, tgt in batch:
        src_batch.append(torch.cat([torch.tensor([BOS_IDX]), src, torch.tensor([EOS_IDX])]))
        tgt_batch.append(torch.cat([torch.tensor([BOS_IDX]), tgt, torch.tensor([EOS_IDX])]))
    return (pad_sequence(src_batch, padding_value=PAD_IDX),
            pad_sequence(tgt_batch, padding_value=PAD_IDX))  # (seq, batch)


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 64):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding)

    def forward(self, token_embedding: Tensor):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=PAD_IDX)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, num_encoder_layers, num_decoder_layers, emb_size, nhead, vocab,
                 dim_feedforward=64, dropout=0.0):
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead,
                                          num_encoder_layers=num_encoder_layers,
                                          num_decoder_layers=num_decoder_layers,
                                          dim_feedforward=dim_feedforward, dropout=dropout)
        self.generator = nn.Linear(emb_size, vocab)
        self.src_tok_emb = TokenEmbedding(vocab, emb_size)
        self.tgt_tok_emb = TokenEmbedding(vocab, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                memory_key_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask,
                                tgt_padding_mask, memory_key_padding_mask)
        return self.generator(outs)

    def encode(self, src: Tensor, src_mask: Tensor):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory,
                                        tgt_mask)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))


def create_mask(src, tgt):
    src_seq_len, tgt_seq_len = src.shape[0], tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


rng = np.random.default_rng(0)
train_pairs, test_pairs = make_pairs(256, rng), make_pairs(64, rng)
model = Seq2SeqTransformer(2, 2, 32, 4, VOCAB)
for p in model.parameters():
    if p.dim() > 1:
        nn.init.xavier_uniform_(p)
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
mask4 = nn.Transformer.generate_square_subsequent_mask(4)
assert torch.equal(mask4, generate_square_subsequent_mask(4))
print(f"causal mask row 1: {mask4[1].tolist()}")

loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
warmup = 40
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: 32 ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup ** -1.5))
BATCH = 32


def run_epoch(pairs, train):
    model.train(train)
    losses = 0.0
    with torch.set_grad_enabled(train):
        for i in range(0, len(pairs), BATCH):
            src, tgt = collate_fn(pairs[i:i + BATCH])
            tgt_input = tgt[:-1, :]
            src_mask, tgt_mask, src_pad, tgt_pad = create_mask(src, tgt_input)
            logits = model(src, tgt_input, src_mask, tgt_mask, src_pad, tgt_pad, src_pad)
            tgt_out = tgt[1:, :]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            if train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
            losses += loss.item()
    return losses / math.ceil(len(pairs) / BATCH)


def greedy_decode(src, max_len, start_symbol=BOS_IDX):
    src_mask = torch.zeros(src.shape[0], src.shape[0]).type(torch.bool)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
    for _ in range(max_len - 1):
        tgt_mask = generate_square_subsequent_mask(ys.size(0)).type(torch.bool)
        out = model.decode(ys, memory, tgt_mask).transpose(0, 1)
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == EOS_IDX:
            break
    return ys


first = run_epoch(test_pairs, train=False)
print(f"initial val loss {first:.4f}")
for epoch in range(1, args.epochs + 1):
    train_loss = run_epoch(train_pairs, train=True)
    val_loss = run_epoch(test_pairs, train=False)
    if epoch % 2 == 0 or args.double:
        print(f"Epoch: {epoch}, Train loss: {train_loss:.6f}, Val loss: {val_loss:.6f}, "
              f"lr {scheduler.get_last_lr()[0]:.5f}")

model.eval()
exact = 0
with torch.no_grad():
    for src, tgt in test_pairs[:32]:
        src_in = torch.cat([torch.tensor([BOS_IDX]), src, torch.tensor([EOS_IDX])]).view(-1, 1)
        out = greedy_decode(src_in, max_len=len(src) + 3).flatten()
        exact += out[1:-1].tolist() == tgt.tolist()
    src, tgt = test_pairs[0]
    src_in = torch.cat([torch.tensor([BOS_IDX]), src, torch.tensor([EOS_IDX])]).view(-1, 1)
    out = greedy_decode(src_in, max_len=len(src) + 3).flatten()
print(f"translate {(src - 3).tolist()} -> {(out[1:-1] - 3).tolist()} (want {(tgt - 3).tolist()})")
print(f"RESULT {first:.6f} {val_loss:.6f} {exact / 32:.4f}")
torch.set_default_dtype(torch.float32)  # the process-wide default back as it was
