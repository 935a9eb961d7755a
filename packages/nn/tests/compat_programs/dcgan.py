"""A DCGAN on tiny synthetic 16x16 images, in the style of the public PyTorch DCGAN example:
a generator of ConvTranspose2d + BatchNorm2d + ReLU + Tanh, a discriminator of strided Conv2d +
LeakyReLU + Sigmoid, custom weight init through ``Module.apply`` and ``nn.init``, BCELoss with
real/fake label tensors from ``torch.full``, two Adam optimizers with betas, ``detach()`` for the
discriminator step, and a fixed noise batch for progress images. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <D(x) at the end> <mean |fake - real| statistics gap>."""

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data

parser = argparse.ArgumentParser()
parser.add_argument("--batchSize", type=int, default=32)
parser.add_argument("--nz", type=int, default=8, help="size of the latent z vector")
parser.add_argument("--ngf", type=int, default=8)
parser.add_argument("--ndf", type=int, default=8)
parser.add_argument("--niter", type=int, default=3, help="number of epochs to train for")
parser.add_argument("--lr", type=float, default=0.002)
parser.add_argument("--beta1", type=float, default=0.5)
parser.add_argument("--manualSeed", type=int, default=999)
parser.add_argument("--outf", default=".")
opt = parser.parse_args(sys.argv[1:])

torch.manual_seed(opt.manualSeed)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
nc, nz, ngf, ndf = 1, opt.nz, opt.ngf, opt.ndf


class Blobs(torch.utils.data.Dataset):
    """Gaussian blobs at random places, scaled to [-1, 1] like the normalized image datasets."""

    def __init__(self, n, side=16, seed=0):
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:side, 0:side]
        cy, cx = rng.uniform(4, side - 4, size=(2, n))
        img = np.exp(-((yy[None] - cy[:, None, None]) ** 2 + (xx[None] - cx[:, None, None]) ** 2)
                     / 8.0)
        self.data = torch.tensor(img * 2 - 1, dtype=torch.float32).unsqueeze(1)

    def __len__(self):
        return self.data.size(0)

    def __getitem__(self, index):
        return self.data[index], 0


dataset = Blobs(256)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=True)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, ngpu=1):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # z: nz x 1 x 1 -> (ngf*4) x 4 x 4
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            # -> (ngf*2) x 8 x 8
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # -> nc x 16 x 16
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ngpu=1):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),  # -> ndf x 8 x 8
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # -> (ndf*2) x 4 x 4
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),  # -> 1 x 1 x 1
            nn.Sigmoid(),
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


netG = Generator().to(device)
netG.apply(weights_init)
netD = Discriminator().to(device)
netD.apply(weights_init)
n_params = sum(p.numel() for p in netG.parameters() if p.requires_grad)
print(f"generator: {n_params} parameters; discriminator: "
      f"{sum(p.numel() for p in netD.parameters())} parameters")
print(netG.main[0])

criterion = nn.BCELoss()
fixed_noise = torch.randn(16, nz, 1, 1, device=device)
real_label, fake_label = 1.0, 0.0
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

G_losses, D_losses = [], []
for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):
        # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real_cpu = data[0].to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        # (2) update G: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for the generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        G_losses.append(errG.item())
        D_losses.append(errD.item())
        if i % 4 == 0:
            print("[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f"
                  % (epoch, opt.niter, i, len(dataloader), errD.item(), errG.item(), D_x,
                     D_G_z1, D_G_z2))

netG.eval()
with torch.no_grad():
    fake = netG(fixed_noise).detach().cpu()
assert fake.shape == (16, 1, 16, 16), fake.shape
assert fake.min() >= -1 and fake.max() <= 1
# the generator's images have moved toward the data's statistics
gap = (fake.mean() - dataset.data.mean()).abs().item()
print(f"fake mean {fake.mean():.3f}, real mean {dataset.data.mean():.3f}")
os.makedirs(opt.outf, exist_ok=True)
torch.save(netG.state_dict(), "%s/netG_epoch_%d.pth" % (opt.outf, epoch))
torch.save(netD.state_dict(), "%s/netD_epoch_%d.pth" % (opt.outf, epoch))
sd = torch.load("%s/netG_epoch_%d.pth" % (opt.outf, epoch))
assert set(sd) == set(netG.state_dict()), sorted(sd)
assert "main.1.num_batches_tracked" in sd and sd["main.1.num_batches_tracked"].item() == 24
print(f"RESULT {D_x:.4f} {gap:.4f} {G_losses[0]:.4f} {np.mean(G_losses[-8:]):.4f}")
