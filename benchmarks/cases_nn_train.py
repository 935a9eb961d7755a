"""Training-step throughput: one forward, backward and optimizer step of small models.

Each case builds the same model from the framework's own modules (``nn.Conv2d``,
``nn.BatchNorm2d``, ``nn.MaxPool2d``, ``nn.ReLU``, ``nn.Linear``, ``nn.LSTM``, ``nn.GRU``...) in
ember and in torch (float32, CPU; each framework initializes its weights itself) and times one
full training step (zero_grad, forward, loss, backward, optimizer step) on a fixed batch. The
targets are the issue's (ember-nn, Benchmarks): ember time / torch time, i.e. the inverse of the
throughput ratio.
"""

from __future__ import annotations

import numpy as np
from bench_models import small_resnet
from harness import Stmt, case


def _targets(fw, n, classes, seed=0):
    return fw.mod.tensor(np.random.default_rng(seed).integers(0, classes, n))


def _is_torch(fw):
    return fw.name == "torch"


def _step(fw, model, opt, x, y, loss_fn=None):
    loss_fn = loss_fn or fw.mod.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return Stmt("step()", step=step)


# ---- MLP ------------------------------------------------------------------------------------

@case("train/mlp 784-512-512-10 sgd", unit="ms", check=False, target=1 / 1.1,
      doc="MLP 784-512-512-10 (ReLU), batch 128, cross-entropy, SGD momentum 0.9")
def _mlp(fw):
    nn = fw.mod.nn
    fw.mod.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = fw.mod.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _step(fw, model, opt, fw.randn(128, 784), _targets(fw, 128, 10))


# ---- LeNet-style CNN ------------------------------------------------------------------------

@case("train/cnn lenet 28x28 adam", unit="ms", check=False, target=1.0,
      doc="Conv2d(1→32, 3) ReLU Conv2d(32→64, 3) ReLU MaxPool2d(2) Linear(9216→128) ReLU "
          "Linear(→10), batch 64, Adam")
def _cnn(fw):
    nn = fw.mod.nn
    fw.mod.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = fw.mod.optim.Adam(model.parameters(), lr=1e-3)
    return _step(fw, model, opt, fw.randn(64, 1, 28, 28), _targets(fw, 64, 10))


# ---- small ResNet ---------------------------------------------------------------------------

@case("train/resnet small 32x32 sgd", unit="ms", check=False, target=1 / 0.9,
      doc="Conv2d-BatchNorm2d-ReLU stem (3→32), two residual blocks of 32 channels, "
          "AdaptiveAvgPool2d(1), Linear; batch 32, SGD momentum 0.9")
def _resnet(fw):
    fw.mod.manual_seed(0)
    model = small_resnet(fw.mod.nn, 32)
    opt = fw.mod.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return _step(fw, model, opt, fw.randn(32, 3, 32, 32), _targets(fw, 32, 10))


# ---- LSTM language model --------------------------------------------------------------------

VOCAB = 1000


def _rnn_lm(fw, kind):
    """Embedding(1000, 256) → 2-layer `kind` (LSTM or GRU) 256 → Linear(→1000), SGD."""
    nn = fw.mod.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 256)
            self.rnn = getattr(nn, kind)(256, 256, num_layers=2)
            self.out = nn.Linear(256, VOCAB)

        def forward(self, tokens):
            y, _ = self.rnn(self.emb(tokens))
            return self.out(y.reshape(-1, 256))

    fw.mod.manual_seed(0)
    model = LM()
    opt = fw.mod.optim.SGD(model.parameters(), lr=0.1)
    tokens = fw.mod.tensor(np.random.default_rng(1).integers(0, VOCAB, (35, 32)))
    return _step(fw, model, opt, tokens, _targets(fw, 35 * 32, VOCAB))


@case("train/lstm lm 2x256 seq35", unit="ms", check=False, target=1 / 0.9,
      doc="Embedding(1000, 256) → 2-layer LSTM 256 → Linear(→1000), seq 35, batch 32, SGD")
def _lstm(fw):
    return _rnn_lm(fw, "LSTM")


@case("train/gru lm 2x256 seq35", unit="ms", check=False,
      doc="Embedding(1000, 256) → 2-layer GRU 256 → Linear(→1000), seq 35, batch 32, SGD")
def _gru(fw):
    return _rnn_lm(fw, "GRU")


# ---- Transformer encoder --------------------------------------------------------------------

@case("train/transformer enc 2x128 seq64", unit="ms", check=False, target=1 / 0.9,
      doc="2-layer TransformerEncoder d_model 128, 4 heads, ff 512, seq 64, batch 32, Adam")
def _transformer(fw):
    nn = fw.mod.nn

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True)
            kw = {"enable_nested_tensor": False} if _is_torch(fw) else {}
            self.enc = nn.TransformerEncoder(layer, 2, **kw)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.enc(x).mean(1))

    fw.mod.manual_seed(0)
    model = Enc()
    opt = fw.mod.optim.Adam(model.parameters(), lr=1e-3)
    return _step(fw, model, opt, fw.randn(32, 64, 128), _targets(fw, 32, 10))


# ---- optimizer step alone -------------------------------------------------------------------

@case("train/adam step 100x10k", unit="ms", check=False, target=1 / 1.5,
      doc="optim.Adam.step() over 100 params of 10k float32 elements (default per-parameter path)")
def _adam(fw):
    nn = fw.mod.nn
    params = [nn.Parameter(fw.randn(10_000, seed=i)) for i in range(100)]
    for i, p in enumerate(params):
        p.grad = fw.randn(10_000, seed=1000 + i)
    opt = fw.mod.optim.Adam(params, lr=1e-3)
    return Stmt("opt.step()", opt=opt)


# ---- GPT-style decoder-only language model --------------------------------------------------

GPT_VOCAB, GPT_D, GPT_HEADS, GPT_LAYERS, GPT_SEQ, GPT_BATCH = 2000, 128, 4, 2, 128, 8


def _gpt(fw, attn_dropout):
    """A small GPT: token + learned position embeddings, pre-LayerNorm blocks of causal
    self-attention (``F.scaled_dot_product_attention(is_causal=True)``, ``dropout_p`` =
    attn_dropout while training) and a GELU MLP (4x), dropout 0.1 on the embeddings and residual
    branches, final LayerNorm and an untied output head over the vocabulary."""
    nn, F = fw.mod.nn, fw.mod.nn.functional
    d, heads = GPT_D, GPT_HEADS

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.fc_out = nn.Linear(4 * d, d)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=attn_dropout if self.training else 0.0,
                                               is_causal=True)
            x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))
            return x + self.drop(self.fc_out(F.gelu(self.fc(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(GPT_VOCAB, d)
            self.pos = nn.Embedding(GPT_SEQ, d)
            self.drop = nn.Dropout(0.1)
            self.blocks = nn.ModuleList([Block() for _ in range(GPT_LAYERS)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, GPT_VOCAB, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.drop(self.tok(idx) + self.pos(fw.mod.arange(t)))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x)).view(-1, GPT_VOCAB)

    return GPT


def _gpt_setup(fw, attn_dropout):
    fw.mod.manual_seed(0)
    model = _gpt(fw, attn_dropout)()
    opt = fw.mod.optim.AdamW(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(2)
    tokens = fw.mod.tensor(rng.integers(0, GPT_VOCAB, (GPT_BATCH, GPT_SEQ)))
    return _step(fw, model, opt, tokens, _targets(fw, GPT_BATCH * GPT_SEQ, GPT_VOCAB, seed=3))


@case("train/gpt 2x128 seq128", unit="ms", check=False, target=1 / 0.9,
      doc="GPT decoder: token+position Embedding(2000, 128), 2 pre-LayerNorm blocks of causal "
          "SDPA (4 heads of 32, no attention dropout: torch runs its fused CPU kernel) and GELU "
          "MLP 4x, dropout 0.1 on embeddings and residual branches, Linear head over 2000 "
          "tokens; batch 8, seq 128, cross-entropy, AdamW")
def _gpt_train(fw):
    return _gpt_setup(fw, 0.0)


@case("train/gpt 2x128 seq128 attn-dropout", unit="ms", check=False, target=1 / 0.9,
      doc="train/gpt 2x128 seq128 with dropout_p=0.1 inside the attention too (torch then runs "
          "its unfused math path on the CPU)")
def _gpt_train_attn_dropout(fw):
    return _gpt_setup(fw, 0.1)
