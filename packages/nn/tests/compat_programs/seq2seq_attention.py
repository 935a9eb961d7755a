"""A GRU encoder-decoder with attention learning to reverse digit sequences, in the style of the
public PyTorch seq2seq translation tutorial: variable-length source batches packed with
pack_padded_sequence and unpacked with pad_packed_sequence, a bidirectional GRU encoder, Bahdanau
(additive) attention computed with bmm and a padding mask through masked_fill, a GRU decoder
with teacher forcing, NLLLoss with ignore_index, and greedy decoding under torch.no_grad.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <exact-match accuracy>."""

import argparse
import random
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=150)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args(sys.argv[1:])

PAD, SOS, EOS = 0, 1, 2
N_DIGITS = 6  # tokens 3..8
VOCAB = 3 + N_DIGITS
MAX_LEN = 6
random.seed(args.seed)
torch.manual_seed(args.seed)


def random_pair():
    n = random.randint(2, MAX_LEN)
    src = [random.randrange(3, VOCAB) for _ in range(n)]
    return src, src[::-1]


def batch(pairs):
    """Sorted by source length (descending), padded source/target tensors, source lengths."""
    pairs = sorted(pairs, key=lambda p: len(p[0]), reverse=True)
    src = [torch.tensor(s + [EOS]) for s, _ in pairs]
    tgt = [torch.tensor(t + [EOS]) for _, t in pairs]
    lengths = torch.tensor([len(s) for s in src])
    return pad_sequence(src, batch_first=True, padding_value=PAD), lengths, \
        pad_sequence(tgt, batch_first=True, padding_value=PAD)


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super(EncoderRNN, self).__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size, padding_idx=PAD)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden_size, hidden_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input, lengths):
        embedded = self.dropout(self.embedding(input))
        packed = pack_padded_sequence(embedded, lengths, batch_first=True)
        output, hidden = self.gru(packed)
        output, out_lengths = pad_packed_sequence(output, batch_first=True,
                                                  total_length=input.size(1))
        assert torch.equal(out_lengths, lengths)
        output = self.fc(output)
        # the two directions' last states, summed, start the decoder
        hidden = (hidden[0] + hidden[1]).unsqueeze(0)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super(BahdanauAttention, self).__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys, mask):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))  # (B, S, 1)
        scores = scores.squeeze(2).unsqueeze(1)  # (B, 1, S)
        scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)  # (B, 1, H)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super(AttnDecoderRNN, self).__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward_step(self, input, hidden, encoder_outputs, mask):
        embedded = self.dropout(self.embedding(input))  # (B, 1, H)
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs, mask)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        return self.out(output), hidden, attn_weights

    def forward(self, encoder_outputs, encoder_hidden, mask, target_tensor=None, max_len=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS)
        decoder_hidden = encoder_hidden
        decoder_outputs, attentions = [], []
        steps = target_tensor.size(1) if target_tensor is not None else max_len
        for i in range(steps):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs, mask)
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        return F.log_softmax(decoder_outputs, dim=-1), decoder_hidden, torch.cat(attentions, 1)


hidden_size = 32
encoder = EncoderRNN(VOCAB, hidden_size)
decoder = AttnDecoderRNN(hidden_size, VOCAB)
enc_opt = optim.Adam(encoder.parameters(), lr=0.01)
dec_opt = optim.Adam(decoder.parameters(), lr=0.01)
criterion = nn.NLLLoss(ignore_index=PAD)

losses = []
for it in range(1, args.iters + 1):
    src, lengths, tgt = batch([random_pair() for _ in range(32)])
    mask = src == PAD
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    enc_out, enc_hidden = encoder(src, lengths)
    dec_out, _, _ = decoder(enc_out, enc_hidden, mask, tgt)
    loss = criterion(dec_out.view(-1, dec_out.size(-1)), tgt.view(-1))
    loss.backward()
    nn.utils.clip_grad_norm_(encoder.parameters(), 1.0)
    nn.utils.clip_grad_norm_(decoder.parameters(), 1.0)
    enc_opt.step()
    dec_opt.step()
    losses.append(loss.item())
    if it % 50 == 0:
        print("%d (%d%%) %.4f" % (it, it / args.iters * 100, sum(losses[-50:]) / 50))

encoder.eval()
decoder.eval()
with torch.no_grad():
    src, lengths, tgt = batch([random_pair() for _ in range(64)])
    mask = src == PAD
    enc_out, enc_hidden = encoder(src, lengths)
    dec_out, _, attn = decoder(enc_out, enc_hidden, mask, max_len=tgt.size(1))
    pred = dec_out.argmax(-1)
    keep = tgt != PAD
    exact = ((pred == tgt) | ~keep).all(dim=1).float().mean().item()
    # no attention lands on padding
    assert attn.shape == (64, tgt.size(1), src.size(1))
    assert attn.masked_select(mask.unsqueeze(1).expand_as(attn)).abs().max() == 0
    assert torch.allclose(attn.sum(-1), torch.ones(64, tgt.size(1)))
words = lambda ids: " ".join(str(i - 3) for i in ids if i > 2)  # noqa: E731
print("> " + words(src[0].tolist()))
print("= " + words(tgt[0].tolist()))
print("< " + words(pred[0].tolist()))
print(f"RESULT {losses[0]:.4f} {sum(losses[-20:]) / 20:.4f} {exact:.4f}")
