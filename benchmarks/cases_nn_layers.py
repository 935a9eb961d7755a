"""nn.functional composites and optimizer steps: F.interpolate (bilinear, nearest), F.pad
(reflect), and one optimizer step (SGD with momentum, Adam) over 100 params of 10k elements
through ember.optim / torch.optim with their default paths (ember: the fused kernels)."""

from __future__ import annotations

from harness import Stmt, case

IMG = (8, 3, 128, 128)
NPARAMS, NUMEL = 100, 10_000


def _F(fw):
    return fw.mod.nn.functional


@case("nn/interpolate bilinear x2", unit="ms", rtol=1e-4, atol=1e-5,
      doc="F.interpolate(x, scale_factor=2, mode='bilinear'), x (8, 3, 128, 128) float32")
def _interp_bilinear(fw):
    return Stmt("F.interpolate(x, scale_factor=2, mode='bilinear')", F=_F(fw), x=fw.randn(*IMG))


@case("nn/interpolate nearest x2", unit="ms",
      doc="F.interpolate(x, scale_factor=2), x (8, 3, 128, 128) float32")
def _interp_nearest(fw):
    return Stmt("F.interpolate(x, scale_factor=2)", F=_F(fw), x=fw.randn(*IMG))


@case("nn/pad reflect", unit="ms", doc="F.pad(x, (3, 3, 3, 3), mode='reflect'), x (8, 3, 128, 128)")
def _pad_reflect(fw):
    return Stmt("F.pad(x, (3, 3, 3, 3), mode='reflect')", F=_F(fw), x=fw.randn(*IMG))


def _params(fw):
    ps = []
    for i in range(NPARAMS):
        p = fw.mod.nn.Parameter(fw.randn(NUMEL, seed=i))
        p.grad = fw.randn(NUMEL, seed=1000 + i)
        ps.append(p)
    return ps


@case("optim/SGD momentum step", unit="ms", check=False,
      doc="SGD(lr=1e-3, momentum=0.9).step() over 100 float32 params of 10k elements")
def _sgd(fw):
    return Stmt("opt.step()", opt=fw.mod.optim.SGD(_params(fw), lr=1e-3, momentum=0.9))


@case("optim/Adam step", unit="ms", check=False,
      doc="Adam(lr=1e-3).step() over 100 float32 params of 10k elements")
def _adam(fw):
    return Stmt("opt.step()", opt=fw.mod.optim.Adam(_params(fw), lr=1e-3))
