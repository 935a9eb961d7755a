"""Single-image super-resolution with an efficient sub-pixel CNN, in the style of the public
PyTorch super-resolution example: low-resolution inputs made by F.interpolate / avg_pool2d from
synthetic high-resolution images, Conv2d layers initialized with init.orthogonal_ and
calculate_gain, an nn.PixelShuffle upscaler (checked against PixelUnshuffle), MSELoss, Adam,
clip_grad_norm_ with its returned total norm, PSNR from log10, a ReduceLROnPlateau schedule, and
checkpoints of the whole model object. Written against `torch`; the test suite runs it unchanged
on torch and, through an import shim, on ember.
Prints RESULT <bicubic PSNR> <first epoch PSNR> <last epoch PSNR>."""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="PyTorch Super Res Example")
parser.add_argument("--upscale_factor", type=int, default=2)
parser.add_argument("--batchSize", type=int, default=16)
parser.add_argument("--nEpochs", type=int, default=6)
parser.add_argument("--lr", type=float, default=0.003)
parser.add_argument("--seed", type=int, default=123)
parser.add_argument("--out", default=".")
opt = parser.parse_args(sys.argv[1:])
print(opt.upscale_factor, opt.nEpochs)
torch.manual_seed(opt.seed)
device = torch.device("cpu")
r = opt.upscale_factor


def make_images(n, side, rng):
    """Smooth random images: sums of a few oriented sinusoids, in [0, 1]."""
    yy, xx = torch.meshgrid(torch.arange(side, dtype=torch.float32),
                            torch.arange(side, dtype=torch.float32), indexing="ij")
    imgs = torch.zeros(n, 1, side, side)
    for _ in range(3):
        fx, fy, phase = torch.from_numpy(rng.random((3, n, 1, 1), dtype=np.float32))
        fx, fy, phase = fx * 0.8, fy * 0.8, phase * (2 * math.pi)
        imgs[:, 0] += torch.sin(fx * xx + fy * yy + phase)
    return (imgs - imgs.amin(dim=(2, 3), keepdim=True)) / (
        imgs.amax(dim=(2, 3), keepdim=True) - imgs.amin(dim=(2, 3), keepdim=True) + 1e-8)


hr = make_images(160, 16, np.random.default_rng(0))  # the same images on any library
lr_imgs = F.avg_pool2d(hr, r)
train_set = TensorDataset(lr_imgs[:128], hr[:128])
test_set = TensorDataset(lr_imgs[128:], hr[128:])
training_data_loader = DataLoader(dataset=train_set, batch_size=opt.batchSize, shuffle=True)
testing_data_loader = DataLoader(dataset=test_set, batch_size=32, shuffle=False)


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(32, 32, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(32, 16, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(16, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


model = Net(upscale_factor=r).to(device)
# the orthogonal init: rows of the flattened weight are orthonormal, times the gain
w = model.conv2.weight.view(32, -1)
assert torch.allclose(w @ w.t(), 2 * torch.eye(32), atol=1e-4)
# PixelShuffle and PixelUnshuffle are inverses
z = torch.randn(2, 8, 3, 5)
assert torch.equal(nn.PixelUnshuffle(2)(nn.PixelShuffle(2)(z)), z)
assert F.pixel_shuffle(z, 2).shape == (2, 2, 6, 10)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=opt.lr)
scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", factor=0.5, patience=1)


def psnr(mse):
    return 10 * math.log10(1 / mse)


def train(epoch):
    epoch_loss = 0
    norms = []
    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = batch[0].to(device), batch[1].to(device)
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)))
        optimizer.step()
    print("===> Epoch {} Complete: Avg. Loss: {:.4f} (max grad norm {:.3f})".format(
        epoch, epoch_loss / len(training_data_loader), max(norms)))


def test():
    avg_psnr = 0
    with torch.no_grad():
        for batch in testing_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)
            prediction = model(input)
            mse = criterion(prediction, target)
            avg_psnr += 10 * torch.log10(1 / mse).item()
    avg = avg_psnr / len(testing_data_loader)
    print("===> Avg. PSNR: {:.4f} dB".format(avg))
    return avg


lr_test, hr_test = test_set.tensors
bicubic = F.interpolate(lr_test, scale_factor=r, mode="bicubic", align_corners=False).clamp(0, 1)
nearest = F.interpolate(lr_test, size=hr_test.shape[-2:], mode="nearest")
bilinear = F.interpolate(lr_test, scale_factor=float(r), mode="bilinear", align_corners=True)
base = psnr(F.mse_loss(bicubic, hr_test).item())
print("baselines: bicubic {:.2f} dB, bilinear {:.2f} dB, nearest {:.2f} dB".format(
    base, psnr(F.mse_loss(bilinear, hr_test).item()), psnr(F.mse_loss(nearest, hr_test).item())))

history = []
for epoch in range(1, opt.nEpochs + 1):
    train(epoch)
    history.append(test())
    scheduler.step(history[-1])


def checkpoint(epoch):
    os.makedirs(opt.out, exist_ok=True)
    model_out_path = os.path.join(opt.out, "model_epoch_{}.pth".format(epoch))
    torch.save(model, model_out_path)
    print("Checkpoint saved to {}".format(os.path.basename(model_out_path)))
    return model_out_path


path = checkpoint(opt.nEpochs)
loaded = torch.load(path, weights_only=False)
loaded.eval()
with torch.no_grad():
    up = loaded(lr_test[:1])
    assert torch.equal(up, model(lr_test[:1]))
    out_img = up[0].clamp(0, 1).mul(255).round().byte()
assert out_img.dtype == torch.uint8 and out_img.shape == (1, 16, 16)
print(f"lr now {optimizer.param_groups[0]['lr']:.5f}")
print(f"RESULT {base:.4f} {history[0]:.4f} {history[-1]:.4f}")
