"""Training-step throughput: one forward, backward and optimizer step of small models.

Each case builds the same model in ember and in torch (float32, CPU) and times one full
training step (zero_grad, forward, loss, backward, optimizer step) on a fixed batch. Layers that
are not modules on every branch yet (conv, batch norm, pooling) are written here over the core
ops (``ember.conv2d``, ``ember.batch_norm``...), the same math torch's modules run.
"""

from __future__ import annotations

import math

import numpy as np
from harness import Stmt, case


def _targets(fw, n, classes, seed=0):
    return fw.mod.tensor(np.random.default_rng(seed).integers(0, classes, n))


def _is_torch(fw):
    return fw.name == "torch"


def _ops(fw):
    """(conv2d, max_pool2d, batch_norm, relu, cross_entropy) of the framework."""
    m = fw.mod
    if _is_torch(fw):
        F = m.nn.functional
        return F.conv2d, F.max_pool2d, F.batch_norm, F.relu, F.cross_entropy
    return m.conv2d, m.max_pool2d, m.batch_norm, m.relu, m.cross_entropy


def _conv_module(fw, cin, cout, k, padding=0, bias=True):
    nn = fw.mod.nn
    conv2d = _ops(fw)[0]

    class Conv(nn.Module):
        def __init__(self):
            super().__init__()
            bound = 1 / math.sqrt(cin * k * k)
            self.weight = nn.Parameter(fw.mod.empty(cout, cin, k, k).uniform_(-bound, bound))
            self.bias = nn.Parameter(fw.mod.empty(cout).uniform_(-bound, bound)) if bias else None

        def forward(self, x):
            return conv2d(x, self.weight, self.bias, 1, padding)

    return Conv()


def _bn_module(fw, c):
    nn = fw.mod.nn
    bn = _ops(fw)[2]

    class BN(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(fw.mod.ones(c))
            self.bias = nn.Parameter(fw.mod.zeros(c))
            self.register_buffer("running_mean", fw.mod.zeros(c))
            self.register_buffer("running_var", fw.mod.ones(c))

        def forward(self, x):
            return bn(x, self.running_mean, self.running_var, self.weight, self.bias, True, 0.1, 1e-5) \
                if _is_torch(fw) else \
                bn(x, self.weight, self.bias, self.running_mean, self.running_var, True, 0.1, 1e-5)

    return BN()


def _step(fw, model, opt, x, y, loss_fn):
    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return Stmt("step()", step=step)


# ---- MLP ------------------------------------------------------------------------------------

@case("train/mlp 784-512-512-10 sgd", unit="ms", check=False,
      doc="MLP 784-512-512-10 (relu), batch 128, cross-entropy, SGD momentum 0.9")
def _mlp(fw):
    nn, relu, ce = fw.mod.nn, _ops(fw)[3], _ops(fw)[4]

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

        def forward(self, x):
            return self.fc3(relu(self.fc2(relu(self.fc1(x)))))

    fw.mod.manual_seed(0)
    model = MLP()
    opt = fw.mod.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _step(fw, model, opt, fw.randn(128, 784), _targets(fw, 128, 10), ce)


# ---- LeNet-style CNN ------------------------------------------------------------------------

@case("train/cnn lenet 28x28 adam", unit="ms", check=False,
      doc="conv3x3(1→32) relu conv3x3(32→64) relu maxpool2 fc(9216→128) relu fc(→10), batch 64, Adam")
def _cnn(fw):
    nn = fw.mod.nn
    _, pool, _, relu, ce = _ops(fw)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = _conv_module(fw, 1, 32, 3), _conv_module(fw, 32, 64, 3)
            self.fc1, self.fc2 = nn.Linear(64 * 12 * 12, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = pool(relu(self.conv2(relu(self.conv1(x)))), 2)
            return self.fc2(relu(self.fc1(x.flatten(1))))

    fw.mod.manual_seed(0)
    model = Net()
    opt = fw.mod.optim.Adam(model.parameters(), lr=1e-3)
    return _step(fw, model, opt, fw.randn(64, 1, 28, 28), _targets(fw, 64, 10), ce)


# ---- small ResNet ---------------------------------------------------------------------------

@case("train/resnet small 32x32 sgd", unit="ms", check=False,
      doc="conv-BN-ReLU stem (3→32), two residual blocks of 32 channels, global avg pool, fc; batch 32, SGD")
def _resnet(fw):
    nn = fw.mod.nn
    _, _, _, relu, ce = _ops(fw)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = _conv_module(fw, 32, 32, 3, 1, bias=False), _bn_module(fw, 32)
            self.c2, self.b2 = _conv_module(fw, 32, 32, 3, 1, bias=False), _bn_module(fw, 32)

        def forward(self, x):
            return relu(x + self.b2(self.c2(relu(self.b1(self.c1(x))))))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = _conv_module(fw, 3, 32, 3, 1, bias=False), _bn_module(fw, 32)
            self.blocks = nn.Sequential(Block(), Block())
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = self.blocks(relu(self.bn(self.stem(x))))
            return self.fc(x.mean((2, 3)))

    fw.mod.manual_seed(0)
    model = ResNet()
    opt = fw.mod.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return _step(fw, model, opt, fw.randn(32, 3, 32, 32), _targets(fw, 32, 10), ce)


# ---- LSTM language model --------------------------------------------------------------------

VOCAB = 1000


@case("train/lstm lm 2x256 seq35", unit="ms", check=False,
      doc="embedding(1000, 256) → 2-layer LSTM 256 → linear(→1000), seq 35, batch 32, SGD")
def _lstm(fw):
    nn, ce = fw.mod.nn, _ops(fw)[4]

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Parameter(fw.mod.randn(VOCAB, 256) * 0.1)
            self.lstm = nn.LSTM(256, 256, num_layers=2)
            self.out = nn.Linear(256, VOCAB)

        def forward(self, tokens):
            x = self.emb[tokens]
            y, _ = self.lstm(x)
            return self.out(y.reshape(-1, 256))

    fw.mod.manual_seed(0)
    model = LM()
    opt = fw.mod.optim.SGD(model.parameters(), lr=0.1)
    tokens = fw.mod.tensor(np.random.default_rng(1).integers(0, VOCAB, (35, 32)))
    return _step(fw, model, opt, tokens, _targets(fw, 35 * 32, VOCAB), ce)


# ---- Transformer encoder --------------------------------------------------------------------

@case("train/transformer enc 2x128 seq64", unit="ms", check=False,
      doc="2-layer TransformerEncoder d_model 128, 4 heads, ff 512, seq 64, batch 32, Adam")
def _transformer(fw):
    nn, ce = fw.mod.nn, _ops(fw)[4]

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
    return _step(fw, model, opt, fw.randn(32, 64, 128), _targets(fw, 32, 10), ce)


# ---- optimizer step alone -------------------------------------------------------------------

@case("train/adam step 100x10k", unit="ms", check=False,
      doc="optim.Adam.step() over 100 params of 10k float32 elements (default per-parameter path)")
def _adam(fw):
    nn = fw.mod.nn
    params = [nn.Parameter(fw.randn(10_000, seed=i)) for i in range(100)]
    for i, p in enumerate(params):
        p.grad = fw.randn(10_000, seed=1000 + i)
    opt = fw.mod.optim.Adam(params, lr=1e-3)
    return Stmt("opt.step()", opt=opt)
