"""nn.functional composites and optimizer steps: F.interpolate (bilinear, nearest, bicubic;
forward and forward+backward), F.pad (reflect, replicate, circular; the same), and one
optimizer step (SGD with momentum, Adam) over 100 params of 10k elements through ember.optim / torch.optim with their default paths (ember: the fused kernels)."""

from __future__ import annotations

from harness import Stmt, case

IMG = (8, 3, 128, 128)
NPARAMS, NUMEL = 100, 10_000


def _F(fw):
    return fw.mod.nn.functional


def _grad_x(fw, shape, seed=0):
    x = fw.randn(*shape, seed=seed)
    x.requires_grad_(True)
    return x


def _interp_case(name, call, out_hw, **kw):
    """A forward case and a forward+backward case (fixed upstream gradient) of one call."""

    @case(f"nn/interpolate {name}", unit="ms", doc=f"{call}, x {IMG} float32", **kw)
    def _fwd(fw):
        return Stmt(call, F=_F(fw), x=fw.randn(*IMG))

    @case(f"nn/interpolate {name} fwd+bwd", unit="ms", check=False,
          doc=f"{call} forward and backward, x {IMG} float32")
    def _fwd_bwd(fw):
        g = fw.randn(IMG[0], IMG[1], *out_hw, seed=1)
        return Stmt(f"{call}.backward(g)", F=_F(fw), x=_grad_x(fw, IMG), g=g)


_interp_case("bilinear x2", "F.interpolate(x, scale_factor=2, mode='bilinear')", (256, 256),
             rtol=1e-4, atol=1e-5)
_interp_case("nearest x2", "F.interpolate(x, scale_factor=2)", (256, 256))
_interp_case("bilinear 0.5 align_corners",
             "F.interpolate(x, size=(64, 64), mode='bilinear', align_corners=True)", (64, 64),
             rtol=1e-4, atol=1e-5)
_interp_case("bicubic x2", "F.interpolate(x, scale_factor=2, mode='bicubic')", (256, 256),
             rtol=1e-4, atol=1e-4)


def _pad_case(mode):
    call = f"F.pad(x, (3, 3, 3, 3), mode='{mode}')"

    @case(f"nn/pad {mode}", unit="ms", doc=f"{call}, x {IMG} float32")
    def _fwd(fw):
        return Stmt(call, F=_F(fw), x=fw.randn(*IMG))

    @case(f"nn/pad {mode} fwd+bwd", unit="ms", check=False,
          doc=f"{call} forward and backward, x {IMG} float32")
    def _fwd_bwd(fw):
        g = fw.randn(IMG[0], IMG[1], IMG[2] + 6, IMG[3] + 6, seed=1)
        return Stmt(f"{call}.backward(g)", F=_F(fw), x=_grad_x(fw, IMG), g=g)


for _mode in ("reflect", "replicate", "circular"):
    _pad_case(_mode)


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
