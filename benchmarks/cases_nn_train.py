"""Training-step throughput: one forward, backward and optimizer step of small models.

Each case builds the same model from the framework's own modules (``nn.Conv2d``,
``nn.BatchNorm2d``, ``nn.MaxPool2d``, ``nn.ReLU``, ``nn.Linear``, ``nn.LSTM``, ``nn.GRU``...) in
ember and in torch (float32, CPU; each framework initializes its weights itself) and times one
full training step (zero_grad, forward, loss, backward, optimizer step) on a fixed batch. The
targets are the issue's (ember-nn, Benchmarks): ember time / torch time, i.e. the inverse of the
throughput ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from bench_models import small_resnet
from harness import Stmt, case


def _targets(mod, n, classes, seed=0):
    return mod.tensor(np.random.default_rng(seed).integers(0, classes, n))


def _randn(mod, *shape, seed=0):
    """float32 normal samples (the values of harness.Framework.randn for the same seed)."""
    return mod.tensor(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


@dataclass
class TrainSetup:
    """One training case, built in one framework: ``model`` (on the CPU), ``make_opt(params)``
    (its optimizer), a fixed batch ``(x, y)`` and ``loss_fn``. benchmarks/cuda_train.py and
    packages/nn/tests/test_cuda_training.py build the same cases for the GPU."""

    model: Any
    make_opt: Callable[[Any], Any]
    x: Any
    y: Any
    loss_fn: Any


def _step(fw, s: TrainSetup):
    model, x, y, loss_fn = s.model, s.x, s.y, s.loss_fn
    opt = s.make_opt(model.parameters())

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return Stmt("step()", step=step)


# ---- MLP ------------------------------------------------------------------------------------

def build_mlp(mod) -> TrainSetup:
    """MLP 784-512-512-10 (ReLU), batch 128, cross-entropy, SGD momentum 0.9."""
    nn = mod.nn
    mod.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    return TrainSetup(model, lambda p: mod.optim.SGD(p, lr=0.01, momentum=0.9),
                      _randn(mod, 128, 784), _targets(mod, 128, 10), nn.CrossEntropyLoss())


@case("train/mlp 784-512-512-10 sgd", unit="ms", check=False, target=1 / 1.1,
      doc="MLP 784-512-512-10 (ReLU), batch 128, cross-entropy, SGD momentum 0.9")
def _mlp(fw):
    return _step(fw, build_mlp(fw.mod))


# ---- LeNet-style CNN ------------------------------------------------------------------------

def build_cnn(mod) -> TrainSetup:
    """LeNet-style CNN on 28x28, batch 64, Adam."""
    nn = mod.nn
    mod.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Linear(128, 10))
    return TrainSetup(model, lambda p: mod.optim.Adam(p, lr=1e-3), _randn(mod, 64, 1, 28, 28),
                      _targets(mod, 64, 10), nn.CrossEntropyLoss())


@case("train/cnn lenet 28x28 adam", unit="ms", check=False, target=1.0,
      doc="Conv2d(1→32, 3) ReLU Conv2d(32→64, 3) ReLU MaxPool2d(2) Linear(9216→128) ReLU "
          "Linear(→10), batch 64, Adam")
def _cnn(fw):
    return _step(fw, build_cnn(fw.mod))


# ---- small ResNet ---------------------------------------------------------------------------

def build_resnet(mod) -> TrainSetup:
    """small_resnet(32) on 32x32, batch 32, SGD momentum 0.9."""
    mod.manual_seed(0)
    model = small_resnet(mod.nn, 32)
    return TrainSetup(model, lambda p: mod.optim.SGD(p, lr=0.1, momentum=0.9),
                      _randn(mod, 32, 3, 32, 32), _targets(mod, 32, 10),
                      mod.nn.CrossEntropyLoss())


@case("train/resnet small 32x32 sgd", unit="ms", check=False, target=1 / 0.9,
      doc="Conv2d-BatchNorm2d-ReLU stem (3→32), two residual blocks of 32 channels, "
          "AdaptiveAvgPool2d(1), Linear; batch 32, SGD momentum 0.9")
def _resnet(fw):
    return _step(fw, build_resnet(fw.mod))


# ---- LSTM language model --------------------------------------------------------------------

VOCAB = 1000


def rnn_lm(mod, kind: str, vocab: int = VOCAB, d: int = 256, layers: int = 2):
    """Embedding(vocab, d) → ``layers``-layer ``kind`` (LSTM or GRU) of width d, sequence-first
    → Linear(d → vocab), flattened to (seq * batch, vocab) logits."""
    nn = mod.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.rnn = getattr(nn, kind)(d, d, num_layers=layers)
            self.out = nn.Linear(d, vocab)

        def forward(self, tokens):
            y, _ = self.rnn(self.emb(tokens))
            return self.out(y.reshape(-1, d))

    return LM()


def build_rnn_lm(mod, kind: str) -> TrainSetup:
    """Embedding(1000, 256) → 2-layer `kind` (LSTM or GRU) 256 → Linear(→1000), seq 35,
    batch 32, SGD."""
    mod.manual_seed(0)
    model = rnn_lm(mod, kind)
    tokens = mod.tensor(np.random.default_rng(1).integers(0, VOCAB, (35, 32)))
    return TrainSetup(model, lambda p: mod.optim.SGD(p, lr=0.1), tokens,
                      _targets(mod, 35 * 32, VOCAB), mod.nn.CrossEntropyLoss())


@case("train/lstm lm 2x256 seq35", unit="ms", check=False, target=1 / 0.9,
      doc="Embedding(1000, 256) → 2-layer LSTM 256 → Linear(→1000), seq 35, batch 32, SGD")
def _lstm(fw):
    return _step(fw, build_rnn_lm(fw.mod, "LSTM"))


@case("train/gru lm 2x256 seq35", unit="ms", check=False,
      doc="Embedding(1000, 256) → 2-layer GRU 256 → Linear(→1000), seq 35, batch 32, SGD")
def _gru(fw):
    return _step(fw, build_rnn_lm(fw.mod, "GRU"))


# ---- Transformer encoder --------------------------------------------------------------------

def build_transformer(mod) -> TrainSetup:
    """2-layer TransformerEncoder d_model 128, 4 heads, ff 512, seq 64, batch 32, Adam."""
    nn = mod.nn

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True)
            kw = {"enable_nested_tensor": False} if mod.__name__ == "torch" else {}
            self.enc = nn.TransformerEncoder(layer, 2, **kw)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.enc(x).mean(1))

    mod.manual_seed(0)
    model = Enc()
    return TrainSetup(model, lambda p: mod.optim.Adam(p, lr=1e-3), _randn(mod, 32, 64, 128),
                      _targets(mod, 32, 10), nn.CrossEntropyLoss())


@case("train/transformer enc 2x128 seq64", unit="ms", check=False, target=1 / 0.9,
      doc="2-layer TransformerEncoder d_model 128, 4 heads, ff 512, seq 64, batch 32, Adam")
def _transformer(fw):
    return _step(fw, build_transformer(fw.mod))


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


def gpt_model(mod, attn_dropout: float = 0.0, *, vocab: int = GPT_VOCAB, d: int = GPT_D,
              heads: int = GPT_HEADS, layers: int = GPT_LAYERS, seq: int = GPT_SEQ,
              dropout: float = 0.1):
    """A GPT in ``mod`` (ember or torch): token + learned position embeddings, pre-LayerNorm
    blocks of causal self-attention (``F.scaled_dot_product_attention(is_causal=True)``,
    ``dropout_p`` = attn_dropout while training) and a GELU MLP (4x), ``dropout`` on the
    embeddings and residual branches, final LayerNorm and an untied output head over the
    vocabulary; logits come flattened to (batch * seq, vocab)."""
    nn, F = mod.nn, mod.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.fc_out = nn.Linear(4 * d, d)
            self.drop = nn.Dropout(dropout)

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
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.drop(self.tok(idx) + self.pos(mod.arange(t, device=idx.device)))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x)).view(-1, vocab)

    return GPT()


def build_gpt(mod, attn_dropout: float = 0.0) -> TrainSetup:
    """gpt_model at the CPU case's size (2 x 128, seq 128, batch 8), AdamW."""
    mod.manual_seed(0)
    model = gpt_model(mod, attn_dropout)
    tokens = mod.tensor(np.random.default_rng(2).integers(0, GPT_VOCAB, (GPT_BATCH, GPT_SEQ)))
    return TrainSetup(model, lambda p: mod.optim.AdamW(p, lr=3e-4), tokens,
                      _targets(mod, GPT_BATCH * GPT_SEQ, GPT_VOCAB, seed=3),
                      mod.nn.CrossEntropyLoss())


@case("train/gpt 2x128 seq128", unit="ms", check=False, target=1 / 0.9,
      doc="GPT decoder: token+position Embedding(2000, 128), 2 pre-LayerNorm blocks of causal "
          "SDPA (4 heads of 32, no attention dropout: torch runs its fused CPU kernel) and GELU "
          "MLP 4x, dropout 0.1 on embeddings and residual branches, Linear head over 2000 "
          "tokens; batch 8, seq 128, cross-entropy, AdamW")
def _gpt_train(fw):
    return _step(fw, build_gpt(fw.mod, 0.0))


@case("train/gpt 2x128 seq128 attn-dropout", unit="ms", check=False, target=1 / 0.9,
      doc="train/gpt 2x128 seq128 with dropout_p=0.1 inside the attention too (torch then runs "
          "its unfused math path on the CPU)")
def _gpt_train_attn_dropout(fw):
    return _step(fw, build_gpt(fw.mod, 0.1))


# The model cases above, by name (each builder takes the framework module): the GPU loss tests
# build every one of them.
TRAIN_BUILDERS: dict[str, Callable[[Any], TrainSetup]] = {
    "mlp": build_mlp,
    "cnn": build_cnn,
    "resnet": build_resnet,
    "lstm": lambda mod: build_rnn_lm(mod, "LSTM"),
    "gru": lambda mod: build_rnn_lm(mod, "GRU"),
    "transformer": build_transformer,
    "gpt": build_gpt,
}
