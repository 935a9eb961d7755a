"""Unpaired image-to-image translation (CycleGAN, Zhu et al.) in the style of the public
junyanz/pytorch-CycleGAN-and-pix2pix code: a ResNet generator with ReflectionPad2d,
InstanceNorm2d (affine=False, as norm_layer=functools.partial), a strided downsampling and a
ConvTranspose2d(output_padding=1) upsampling back to the input size, a Tanh head; a 70x70-style
PatchGAN discriminator with LeakyReLU(0.2); GANLoss as LSGAN (MSELoss against a registered
real/fake label buffer expanded with expand_as); the ImagePool history buffer (50% chance to
swap in an older fake, NumPy randomness); set_requires_grad toggling for the discriminators;
cycle-consistency and identity L1 losses; init_weights by module.apply with normal(0, 0.02);
itertools.chain over both generators' parameters into one Adam; and the linear-decay LambdaLR
policy. The two domains are stripes and their colour-inverted, transposed versions. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first G loss> <last G loss> <cycle reconstruction error>."""

import functools
import itertools

import numpy as np
import torch
import torch.nn as nn

rng = np.random.default_rng(160)
S = 16


class ResnetBlock(nn.Module):
    def __init__(self, dim, norm_layer):
        super().__init__()
        self.conv_block = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), norm_layer(dim), nn.ReLU(True),
                                        nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), norm_layer(dim))

    def forward(self, x):
        return x + self.conv_block(x)


class ResnetGenerator(nn.Module):
    def __init__(self, input_nc=1, output_nc=1, ngf=8, n_blocks=2):
        super().__init__()
        norm_layer = functools.partial(nn.InstanceNorm2d, affine=False, track_running_stats=False)
        model = [nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, 7, padding=0, bias=True), norm_layer(ngf), nn.ReLU(True),
                 nn.Conv2d(ngf, ngf * 2, 3, stride=2, padding=1, bias=True), norm_layer(ngf * 2), nn.ReLU(True)]
        model += [ResnetBlock(ngf * 2, norm_layer) for _ in range(n_blocks)]
        model += [nn.ConvTranspose2d(ngf * 2, ngf, 3, stride=2, padding=1, output_padding=1, bias=True), norm_layer(ngf), nn.ReLU(True),
                  nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, 7, padding=0), nn.Tanh()]
        self.model = nn.Sequential(*model)

    def forward(self, x):
        return self.model(x)


class NLayerDiscriminator(nn.Module):
    def __init__(self, input_nc=1, ndf=8, n_layers=2):
        super().__init__()
        seq = [nn.Conv2d(input_nc, ndf, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True)]
        mult = 1
        for n in range(1, n_layers):
            prev, mult = mult, min(2 ** n, 8)
            seq += [nn.Conv2d(ndf * prev, ndf * mult, 4, stride=2, padding=1, bias=True),
                    nn.InstanceNorm2d(ndf * mult), nn.LeakyReLU(0.2, True)]
        seq += [nn.Conv2d(ndf * mult, 1, 4, stride=1, padding=1)]
        self.model = nn.Sequential(*seq)

    def forward(self, x):
        return self.model(x)


class GANLoss(nn.Module):
    def __init__(self, target_real_label=1.0, target_fake_label=0.0):
        super().__init__()
        self.register_buffer("real_label", torch.tensor(target_real_label))
        self.register_buffer("fake_label", torch.tensor(target_fake_label))
        self.loss = nn.MSELoss()

    def __call__(self, prediction, target_is_real):
        target = (self.real_label if target_is_real else self.fake_label).expand_as(prediction)
        return self.loss(prediction, target)


class ImagePool:
    def __init__(self, pool_size):
        self.pool_size, self.num_imgs, self.images = pool_size, 0, []

    def query(self, images):
        if self.pool_size == 0:
            return images
        return_images = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if self.num_imgs < self.pool_size:
                self.num_imgs += 1
                self.images.append(image)
                return_images.append(image)
            elif rng.uniform(0, 1) > 0.5:
                random_id = int(rng.integers(0, self.pool_size))
                tmp = self.images[random_id].clone()
                self.images[random_id] = image
                return_images.append(tmp)
            else:
                return_images.append(image)
        return torch.cat(return_images, 0)


def init_weights(net, init_gain=0.02):
    def init_func(m):
        classname = m.__class__.__name__
        if hasattr(m, "weight") and m.weight is not None and (classname.find("Conv") != -1 or classname.find("Linear") != -1):
            with torch.no_grad():
                m.weight.copy_(torch.from_numpy(rng.normal(0.0, init_gain, m.weight.shape).astype(np.float32)))
            if hasattr(m, "bias") and m.bias is not None:
                nn.init.constant_(m.bias.data, 0.0)
    net.apply(init_func)
    return net


def set_requires_grad(nets, requires_grad=False):
    for net in nets if isinstance(nets, list) else [nets]:
        for param in net.parameters():
            param.requires_grad = requires_grad


def domain_a(n):
    yy, xx = np.meshgrid(np.arange(S), np.arange(S), indexing="ij")
    f = rng.uniform(0.4, 0.9, (n, 1, 1))
    img = np.sin(f * xx[None] + rng.uniform(0, 6, (n, 1, 1)))
    return torch.from_numpy(img[:, None].astype(np.float32))


def domain_b(n):
    return -domain_a(n).transpose(2, 3)


netG_A, netG_B = init_weights(ResnetGenerator()), init_weights(ResnetGenerator())
netD_A, netD_B = init_weights(NLayerDiscriminator()), init_weights(NLayerDiscriminator())
x = domain_a(2)
print(f"generator keeps the size: {tuple(netG_A(x).shape)} patch map {tuple(netD_A(x).shape)} "
      f"reflection pad {nn.ReflectionPad2d(1)(torch.arange(4.0).view(1, 1, 2, 2))[0, 0, 0].tolist()}")
criterionGAN, criterionCycle, criterionIdt = GANLoss(), nn.L1Loss(), nn.L1Loss()
optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()), lr=2e-3, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()), lr=2e-3, betas=(0.5, 0.999))
n_epochs, n_decay = 10, 10
lambda_rule = lambda epoch: 1.0 - max(0, epoch + 1 - n_epochs) / float(n_decay + 1)  # noqa: E731
schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda_rule) for o in (optimizer_G, optimizer_D)]
fake_A_pool, fake_B_pool = ImagePool(8), ImagePool(8)
g_losses = []
for epoch in range(n_epochs + n_decay):
    real_A, real_B = domain_a(4), domain_b(4)
    fake_B = netG_A(real_A)
    rec_A = netG_B(fake_B)
    fake_A = netG_B(real_B)
    rec_B = netG_A(fake_A)
    set_requires_grad([netD_A, netD_B], False)
    optimizer_G.zero_grad()
    loss_idt_A = criterionIdt(netG_A(real_B), real_B) * 10 * 0.5
    loss_idt_B = criterionIdt(netG_B(real_A), real_A) * 10 * 0.5
    loss_G_A = criterionGAN(netD_A(fake_B), True)
    loss_G_B = criterionGAN(netD_B(fake_A), True)
    loss_cycle = criterionCycle(rec_A, real_A) * 10 + criterionCycle(rec_B, real_B) * 10
    loss_G = loss_G_A + loss_G_B + loss_cycle + loss_idt_A + loss_idt_B
    loss_G.backward()
    optimizer_G.step()
    set_requires_grad([netD_A, netD_B], True)
    optimizer_D.zero_grad()
    for netD, real, fake in ((netD_A, real_B, fake_B_pool.query(fake_B)), (netD_B, real_A, fake_A_pool.query(fake_A))):
        loss_D = (criterionGAN(netD(real), True) + criterionGAN(netD(fake.detach()), False)) * 0.5
        loss_D.backward()
    optimizer_D.step()
    for s in schedulers:
        s.step()
    g_losses.append(loss_G.item())
    if epoch % 5 == 0:
        print(f"epoch {epoch:2d} G {loss_G.item():.4f} cycle {loss_cycle.item():.4f} D {loss_D.item():.4f} "
              f"lr {optimizer_G.param_groups[0]['lr']:.6f}")
print(f"pool holds {fake_A_pool.num_imgs} images; final lr {schedulers[0].get_last_lr()[0]:.6f}")
with torch.no_grad():
    real_A = domain_a(16)
    cyc = (netG_B(netG_A(real_A)) - real_A).abs().mean().item()
print(f"cycle reconstruction L1 {cyc:.4f}")
print(f"RESULT {g_losses[0]:.4f} {np.mean(g_losses[-3:]):.4f} {cyc:.4f}")
