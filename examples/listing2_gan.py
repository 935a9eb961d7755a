"""Listing 2 of the PyTorch paper (Paszke et al., 2019) in ember: a GAN with two Adam optimizers.

The generator learns to turn Gaussian noise into samples of a 2-D Gaussian centred at
(2, -1); the discriminator learns to tell real samples from generated ones. Both losses depend
on both models, and each model has its own optimizer.

    python examples/listing2_gan.py [--steps 300]
"""

from __future__ import annotations

import argparse

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import optim

NOISE, BATCH = 4, 64
CENTER = ember.tensor([2.0, -1.0])


def create_generator() -> nn.Module:
    return nn.Sequential(nn.Linear(NOISE, 32), nn.ReLU(), nn.Linear(32, 2))


def create_discriminator() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))


def get_noise() -> ember.Tensor:
    return ember.randn(BATCH, NOISE)


def real_samples() -> ember.Tensor:
    return ember.randn(BATCH, 2) * 0.5 + CENTER


def loss(logits: ember.Tensor, label: ember.Tensor) -> ember.Tensor:
    return F.binary_cross_entropy_with_logits(logits, label)


def main(argv: list[str] | None = None) -> ember.Tensor:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args(argv)
    ember.manual_seed(0)
    real_label, fake_label = ember.ones(BATCH, 1), ember.zeros(BATCH, 1)

    discriminator = create_discriminator()
    generator = create_generator()
    optimD = optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimG = optim.Adam(generator.parameters(), lr=2e-3, betas=(0.5, 0.999))

    def step(real_sample: ember.Tensor) -> tuple[float, float]:
        # (1) Update Discriminator
        optimD.zero_grad()
        errD_real = loss(discriminator(real_sample), real_label)
        errD_real.backward()
        fake = generator(get_noise())
        errD_fake = loss(discriminator(fake.detach()), fake_label)
        errD_fake.backward()
        optimD.step()
        # (2) Update Generator
        optimG.zero_grad()
        errG = loss(discriminator(fake), real_label)
        errG.backward()
        optimG.step()
        return (errD_real + errD_fake).item(), errG.item()

    for i in range(args.steps):
        err_d, err_g = step(real_samples())
        if i % 50 == 0 or i == args.steps - 1:
            with ember.no_grad():
                mean = generator(ember.randn(1000, NOISE)).mean(0)
            print(f"step {i:4d}  loss D {err_d:.3f}  loss G {err_g:.3f}  generated mean {mean.tolist()}")
    with ember.no_grad():
        return generator(ember.randn(2000, NOISE)).mean(0)


if __name__ == "__main__":
    main()
