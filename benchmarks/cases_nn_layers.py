"""nn.functional composites and optimizer steps: F.interpolate (bilinear, nearest, bicubic;
forward and forward+backward), F.pad (reflect, replicate, circular; the same), depthwise conv2d
(MobileNet's 3x3 layers, groups == channels; forward, also channels-last, and training step), and one
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


# ---- depthwise conv2d (groups == channels) --------------------------------------------------
# A MobileNetV2 block's depthwise layer at 224x224 / 8: 144 channels of 28x28, batch 8.
DW = (8, 144, 28, 28)


def _dw_case(stride):
    call = f"F.conv2d(x, w, None, {stride}, 1, 1, {DW[1]})"
    out_hw = (DW[2] + 2 - 3) // stride + 1

    @case(f"nn/conv2d depthwise 3x3 s{stride}", unit="ms", rtol=1e-4, atol=1e-4,
          doc=f"{call}, x {DW}, w ({DW[1]}, 1, 3, 3) float32")
    def _fwd(fw):
        return Stmt(call, F=_F(fw), x=fw.randn(*DW), w=fw.randn(DW[1], 1, 3, 3, seed=1))

    @case(f"nn/conv2d depthwise 3x3 s{stride} fwd+bwd", unit="ms", check=False,
          doc=f"{call} forward and backward (input and weight grads), x {DW} float32")
    def _fwd_bwd(fw):
        w = fw.randn(DW[1], 1, 3, 3, seed=1)
        w.requires_grad_(True)
        g = fw.randn(DW[0], DW[1], out_hw, out_hw, seed=2)
        return Stmt(f"{call}.backward(g)", F=_F(fw), x=_grad_x(fw, DW), w=w, g=g)


_dw_case(1)
_dw_case(2)


def _dw_cl_case(stride):
    call = f"F.conv2d(x, w, None, {stride}, 1, 1, {DW[1]})"

    @case(f"nn/conv2d depthwise 3x3 s{stride} channels_last", unit="ms", rtol=1e-4, atol=1e-4,
          doc=f"{call}, x {DW} float32 in channels_last memory, w ({DW[1]}, 1, 3, 3)")
    def _fwd(fw):
        x = fw.randn(*DW).to(memory_format=fw.mod.channels_last)
        return Stmt(call, F=_F(fw), x=x, w=fw.randn(DW[1], 1, 3, 3, seed=1))


_dw_cl_case(1)
_dw_cl_case(2)


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
