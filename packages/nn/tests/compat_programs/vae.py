"""A variational autoencoder on small synthetic binary images, in the style of the public PyTorch
VAE example: the reparameterization trick, a KL term, a BCE-with-logits reconstruction loss, Adam,
a DataLoader over a TensorDataset, per-epoch train/test losses printed with str.format, samples
drawn from the prior, and the weights saved and loaded back. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. ``--save-init`` and
``--init-from`` move the initial weights through a NumPy .npz file."""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.utils.data
from torch import distributions as D
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset, random_split

parser = argparse.ArgumentParser(description="VAE on bars")
parser.add_argument("--batch-size", type=int, default=32, metavar="N")
parser.add_argument("--epochs", type=int, default=8, metavar="N")
parser.add_argument("--seed", type=int, default=1, metavar="S")
parser.add_argument("--log-interval", type=int, default=4, metavar="N")
parser.add_argument("--out", default=".")
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])

use_cuda = torch.cuda.is_available()
use_mps = not use_cuda and torch.backends.mps.is_available()
torch.manual_seed(args.seed)
device = torch.device("cuda" if use_cuda else "mps" if use_mps else "cpu")
kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}

SIDE = 8


def make_bars(n, rng):
    """n SIDE x SIDE images, each with one to three full horizontal or vertical bars."""
    imgs = np.zeros((n, SIDE, SIDE), dtype=np.float32)
    for k in range(n):
        for _ in range(rng.integers(1, 4)):
            j = rng.integers(0, SIDE)
            if rng.random() < 0.5:
                imgs[k, j, :] = 1.0
            else:
                imgs[k, :, j] = 1.0
    return imgs[:, None]  # (n, 1, SIDE, SIDE), like MNIST's channel dimension


rng = np.random.default_rng(args.seed)
test_set = TensorDataset(torch.from_numpy(make_bars(64, rng)), torch.zeros(64, dtype=torch.long))
full_set = TensorDataset(torch.from_numpy(make_bars(300, rng)), torch.zeros(300, dtype=torch.long))
train_set, val_set = random_split(full_set, [256, 44], generator=torch.Generator().manual_seed(42))
train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True,
                          **kwargs)
test_loader = DataLoader(test_set, batch_size=args.batch_size, shuffle=False, **kwargs)


class VAE(nn.Module):
    def __init__(self, d=SIDE * SIDE, hidden=48, latent=6):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, d)
        self.latent = latent

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        if not self.training:
            return mu  # the posterior mean: evaluation needs no noise
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return self.fc4(h3)  # logits; the loss applies the sigmoid

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, SIDE * SIDE))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
optimizer = optim.Adam(model.parameters(), lr=1e-2)


def loss_function(recon_logits, x, mu, logvar):
    """Reconstruction + KL divergence, summed over elements and the batch."""
    bce = F.binary_cross_entropy_with_logits(recon_logits, x.view(-1, SIDE * SIDE),
                                             reduction="sum")
    # KL(N(mu, sigma) || N(0, 1)) = -0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld, bce, kld


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss, _, _ = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0 and epoch % 4 == 1:
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item() / len(data)))
    avg = train_loss / len(train_loader.dataset)
    print("====> Epoch: {} Average loss: {:.4f}".format(epoch, avg))
    return avg


def test(epoch):
    model.eval()
    test_loss, test_kld = 0.0, 0.0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            loss, _, kld = loss_function(recon_batch, data, mu, logvar)
            test_loss += loss.item()
            test_kld += kld
            if i == 0:
                n = min(data.size(0), 8)
                recon = torch.sigmoid(recon_batch).view(args.batch_size, 1, SIDE, SIDE)[:n]
                comparison = torch.cat([data[:n], recon])
                assert comparison.shape == (2 * n, 1, SIDE, SIDE)
    test_loss /= len(test_loader.dataset)
    print(f"====> Test set loss: {test_loss:.4f} (KL {test_kld / len(test_loader.dataset):.3f})")
    return test_loss


@torch.no_grad()
def log_likelihood(data, k=16):
    """An importance-weighted estimate of log p(x) with k posterior samples (IWAE bound), with
    torch.distributions: the posterior and the prior as Independent Normals, the decoder as
    Bernoulli logits."""
    model.eval()
    mu, logvar = model.encode(data.view(-1, SIDE * SIDE))
    q = D.Independent(D.Normal(mu, torch.exp(0.5 * logvar)), 1)
    prior = D.Independent(D.Normal(torch.zeros_like(mu), torch.ones_like(mu)), 1)
    z = q.rsample((k,))  # (k, batch, latent)
    px = D.Independent(D.Bernoulli(logits=model.decode(z)), 1)
    log_w = px.log_prob(data.view(1, -1, SIDE * SIDE).expand(k, -1, -1)) + prior.log_prob(z) \
        - q.log_prob(z)
    # the analytic KL term of the loss is the distributions' KL
    kl = D.kl_divergence(q, prior).sum()
    _, _, kld = loss_function(model.decode(mu), data, mu, logvar)
    assert torch.allclose(kl, kld, rtol=1e-4, atol=1e-3), (kl, kld)
    return (torch.logsumexp(log_w, dim=0) - math.log(k)).mean()


first = test(0)
for epoch in range(1, args.epochs + 1):
    train(epoch)
    last = test(epoch)
    with torch.no_grad():
        sample = torch.randn(16, model.latent).to(device)
        sample = torch.sigmoid(model.decode(sample)).cpu()
        images = sample.view(16, 1, SIDE, SIDE)
assert images.min() >= 0 and images.max() <= 1
val_x = torch.stack([x for x, _ in val_set])
nll = -log_likelihood(val_x)
print(f"validation -log p(x) <= {nll:.3f} nats ({len(val_set)} held-out images)")
# a sample grid, as an 8-bit image array
grid = images.view(4, 4, SIDE, SIDE).permute(0, 2, 1, 3).reshape(4 * SIDE, 4 * SIDE)
pixels = (grid.numpy() * 255).round().astype(np.uint8)
assert pixels.shape == (32, 32)
# samples from the prior look like bars: rows or columns mostly on or off
on = (images > 0.5).float()
print(f"prior samples: {on.mean().item():.1%} of the pixels on")

os.makedirs(args.out, exist_ok=True)
path = os.path.join(args.out, "vae.pt")
torch.save(model.state_dict(), path)
again = VAE()
again.load_state_dict(torch.load(path, weights_only=True))
again.eval()
x = test_set.tensors[0][:4]
with torch.no_grad():
    assert torch.equal(again(x)[0], model(x)[0])

# the whole VAE in eval mode (the mean latent) to ONNX, checked in onnxruntime
try:
    import onnx  # noqa: F401
    import onnxruntime as ort
except ImportError:
    ort = None
if ort is None:
    print("onnx: skipped (onnx/onnxruntime not installed)")
else:
    onnx_path = os.path.join(args.out, "vae.onnx")
    names = ["recon_logits", "mu", "logvar"]
    torch.onnx.export(again, (x,), onnx_path, input_names=["image"], output_names=names,
                      dynamic_axes={"image": {0: "batch"}, **{n: {0: "batch"} for n in names}},
                      opset_version=17, dynamo=False)
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    batch = test_set.tensors[0][:7]  # another batch size
    with torch.no_grad():
        want = again(batch)
    got = sess.run(None, {"image": batch.numpy()})
    err = max(float(np.abs(g - w.numpy()).max()) for g, w in zip(got, want))
    assert err < 1e-4, err
    print(f"onnx: exported, onnxruntime max abs error {err:.1e}")
print(f"RESULT {first:.6f} {last:.6f}")
