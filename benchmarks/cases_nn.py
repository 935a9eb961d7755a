"""nn op benchmarks: conv2d, max_pool2d, 3-d pooling and conv_transpose3d, softmax / log_softmax (last and strided dim),
layer_norm, rms_norm and cross_entropy forward and forward+backward, one fused Adam step over
a group of 100 params of 10k elements and one SGD-with-momentum optimizer step over as many.

Forward+backward cases call `y.backward(g)` with a fixed upstream gradient; the inputs'
`.grad` accumulates across calls on both sides alike.
"""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

CONV = dict(x=(32, 16, 32, 32), w=(32, 16, 3, 3))
POOL = (32, 32, 32, 32)
POOL3D = (4, 16, 16, 32, 32)
CONVT3D = dict(x=(1, 64, 8, 32, 32), w=(64, 32, 2, 2, 2))  # a 3-d U-Net decoder's upsampling
SOFTMAX = (256, 1024)
SOFTMAX_STRIDED = (32, 64, 128)  # softmax over dim 1: 64 values 128 floats apart
LN = (2048, 512)
CE = (512, 1000)


def _grad_inputs(fw, *shapes):
    out = []
    for i, s in enumerate(shapes):
        t = fw.randn(*s, seed=i + 1)
        t.requires_grad_(True)
        out.append(t)
    return out


def _f(fw, name):
    """ember.<name>, or torch.nn.functional.<name>."""
    if fw.name == "torch":
        return getattr(fw.mod.nn.functional, name)
    return getattr(fw.mod, name)


# ---- conv2d ---------------------------------------------------------------------------------

@case("nn/conv2d", unit="ms", rtol=1e-3, atol=1e-3,
      doc="conv2d 3x3 pad 1, x (32, 16, 32, 32), w (32, 16, 3, 3), float32")
def _conv(fw):
    return Stmt("conv2d(x, w, None, 1, 1)", conv2d=_f(fw, "conv2d"),
                x=fw.randn(*CONV["x"], seed=1), w=fw.randn(*CONV["w"], seed=2))


@case("nn/conv2d fwd+bwd", unit="ms", check=False,
      doc="conv2d forward and backward (input, weight, bias grads)")
def _conv_bwd(fw):
    x, w = _grad_inputs(fw, CONV["x"], CONV["w"])
    b = fw.randn(CONV["w"][0], seed=3)
    b.requires_grad_(True)
    g = fw.randn(CONV["x"][0], CONV["w"][0], 32, 32, seed=4)
    return Stmt("conv2d(x, w, b, 1, 1).backward(g)", conv2d=_f(fw, "conv2d"), x=x, w=w, b=b, g=g)


# ---- max_pool2d -----------------------------------------------------------------------------

@case("nn/max_pool2d", unit="ms", doc="max_pool2d 2x2, x (32, 32, 32, 32), float32")
def _pool(fw):
    return Stmt("max_pool2d(x, 2)", max_pool2d=_f(fw, "max_pool2d"), x=fw.randn(*POOL))


@case("nn/max_pool2d fwd+bwd", unit="ms", check=False, doc="max_pool2d forward and backward")
def _pool_bwd(fw):
    (x,) = _grad_inputs(fw, POOL)
    g = fw.randn(32, 32, 16, 16, seed=5)
    return Stmt("max_pool2d(x, 2).backward(g)", max_pool2d=_f(fw, "max_pool2d"), x=x, g=g)


@case("nn/max_pool2d 3x3 s2 p1", unit="ms",
      doc="max_pool2d(x, 3, 2, 1) (a ResNet stem's), x (32, 32, 32, 32), float32")
def _pool_stem(fw):
    return Stmt("max_pool2d(x, 3, 2, 1)", max_pool2d=_f(fw, "max_pool2d"), x=fw.randn(*POOL))


@case("nn/max_pool2d 3x3 s1 p1", unit="ms",
      doc="max_pool2d(x, 3, 1, 1) (an Inception branch's), x (32, 32, 32, 32), float32")
def _pool_same(fw):
    return Stmt("max_pool2d(x, 3, 1, 1)", max_pool2d=_f(fw, "max_pool2d"), x=fw.randn(*POOL))


# ---- 3-d pooling, conv_transpose3d ----------------------------------------------------------

@case("nn/max_pool3d 3x3x3 s2 p1", unit="ms",
      doc="max_pool3d(x, 3, 2, 1), x (4, 16, 16, 32, 32), float32")
def _pool3d(fw):
    return Stmt("max_pool3d(x, 3, 2, 1)", max_pool3d=_f(fw, "max_pool3d"), x=fw.randn(*POOL3D))


@case("nn/max_pool3d 3x3x3 s2 p1 fwd+bwd", unit="ms", check=False,
      doc="max_pool3d(x, 3, 2, 1) forward and backward")
def _pool3d_bwd(fw):
    (x,) = _grad_inputs(fw, POOL3D)
    g = fw.randn(4, 16, 8, 16, 16, seed=5)
    return Stmt("max_pool3d(x, 3, 2, 1).backward(g)", max_pool3d=_f(fw, "max_pool3d"), x=x, g=g)


@case("nn/avg_pool3d 3x3x3 s2 p1", unit="ms", rtol=1e-5, atol=1e-6,
      doc="avg_pool3d(x, 3, 2, 1), x (4, 16, 16, 32, 32), float32")
def _avg3d(fw):
    return Stmt("avg_pool3d(x, 3, 2, 1)", avg_pool3d=_f(fw, "avg_pool3d"), x=fw.randn(*POOL3D))


@case("nn/avg_pool3d 3x3x3 s2 p1 fwd+bwd", unit="ms", check=False,
      doc="avg_pool3d(x, 3, 2, 1) forward and backward")
def _avg3d_bwd(fw):
    (x,) = _grad_inputs(fw, POOL3D)
    g = fw.randn(4, 16, 8, 16, 16, seed=5)
    return Stmt("avg_pool3d(x, 3, 2, 1).backward(g)", avg_pool3d=_f(fw, "avg_pool3d"), x=x, g=g)


@case("nn/conv_transpose3d 2x2x2 s2", unit="ms", rtol=1e-3, atol=1e-3,
      doc="conv_transpose3d(x, w, None, 2), x (1, 64, 8, 32, 32), w (64, 32, 2, 2, 2), float32")
def _convt3d(fw):
    return Stmt("conv_transpose3d(x, w, None, 2)", conv_transpose3d=_f(fw, "conv_transpose3d"),
                x=fw.randn(*CONVT3D["x"], seed=1), w=fw.randn(*CONVT3D["w"], seed=2))


@case("nn/conv_transpose3d 2x2x2 s2 fwd+bwd", unit="ms", check=False,
      doc="conv_transpose3d forward and backward (input and weight grads)")
def _convt3d_bwd(fw):
    x, w = _grad_inputs(fw, CONVT3D["x"], CONVT3D["w"])
    g = fw.randn(1, 32, 16, 64, 64, seed=4)
    return Stmt("conv_transpose3d(x, w, None, 2).backward(g)",
                conv_transpose3d=_f(fw, "conv_transpose3d"), x=x, w=w, g=g)


# ---- softmax --------------------------------------------------------------------------------

@case("nn/softmax", unit="ms", target=1.0, doc="softmax over the last dim of (256, 1024) float32")
def _softmax(fw):
    return Stmt("softmax(x, -1)", softmax=fw.softmax, x=fw.randn(*SOFTMAX))


@case("nn/softmax fwd+bwd", unit="ms", target=1.0, check=False, doc="softmax forward and backward")
def _softmax_bwd(fw):
    (x,) = _grad_inputs(fw, SOFTMAX)
    return Stmt("softmax(x, -1).backward(g)", softmax=fw.softmax, x=x,
                g=fw.randn(*SOFTMAX, seed=7))


@case("nn/softmax dim1", unit="ms", target=1.0,
      doc="softmax over dim 1 of (32, 64, 128) float32 (a strided reduction)")
def _softmax_strided(fw):
    return Stmt("softmax(x, 1)", softmax=fw.softmax, x=fw.randn(*SOFTMAX_STRIDED))


@case("nn/softmax dim1 fwd+bwd", unit="ms", check=False, target=1.0,
      doc="softmax over dim 1 of (32, 64, 128), forward and backward")
def _softmax_strided_bwd(fw):
    (x,) = _grad_inputs(fw, SOFTMAX_STRIDED)
    return Stmt("softmax(x, 1).backward(g)", softmax=fw.softmax, x=x,
                g=fw.randn(*SOFTMAX_STRIDED, seed=7))


@case("nn/log_softmax", unit="ms", target=1.0,
      doc="log_softmax over the last dim of (256, 1024) float32")
def _log_softmax(fw):
    return Stmt("log_softmax(x, -1)", log_softmax=fw.log_softmax, x=fw.randn(*SOFTMAX))


@case("nn/log_softmax fwd+bwd", unit="ms", check=False, target=1.0,
      doc="log_softmax forward and backward")
def _log_softmax_bwd(fw):
    (x,) = _grad_inputs(fw, SOFTMAX)
    return Stmt("log_softmax(x, -1).backward(g)", log_softmax=fw.log_softmax, x=x,
                g=fw.randn(*SOFTMAX, seed=7))


# ---- layer_norm -----------------------------------------------------------------------------

@case("nn/layer_norm", unit="ms", target=1.0, rtol=1e-3, doc="layer_norm over 512 of (2048, 512) float32 with affine")
def _ln(fw):
    return Stmt("layer_norm(x, (512,), w, b, 1e-5)", layer_norm=_f(fw, "layer_norm"),
                x=fw.randn(*LN), w=fw.randn(512, seed=2), b=fw.randn(512, seed=3))


@case("nn/layer_norm fwd+bwd", unit="ms", target=1.0, check=False,
      doc="layer_norm forward and backward (input, weight, bias grads)")
def _ln_bwd(fw):
    x, w, b = _grad_inputs(fw, LN, (512,), (512,))
    return Stmt("layer_norm(x, (512,), w, b, 1e-5).backward(g)", layer_norm=_f(fw, "layer_norm"),
                x=x, w=w, b=b, g=fw.randn(*LN, seed=9))


# ---- rms_norm -------------------------------------------------------------------------------

@case("nn/rms_norm", unit="ms", rtol=1e-3, target=1.0,
      doc="rms_norm over 512 of (2048, 512) float32 with weight")
def _rms(fw):
    return Stmt("rms_norm(x, (512,), w, 1e-5)", rms_norm=_f(fw, "rms_norm"),
                x=fw.randn(*LN), w=fw.randn(512, seed=2))


@case("nn/rms_norm fwd+bwd", unit="ms", check=False, target=1.0,
      doc="rms_norm forward and backward (input and weight grads)")
def _rms_bwd(fw):
    x, w = _grad_inputs(fw, LN, (512,))
    return Stmt("rms_norm(x, (512,), w, 1e-5).backward(g)", rms_norm=_f(fw, "rms_norm"),
                x=x, w=w, g=fw.randn(*LN, seed=9))


# ---- cross_entropy --------------------------------------------------------------------------

def _targets(fw):
    t = np.random.default_rng(3).integers(0, CE[1], CE[0])
    return fw.mod.tensor(t)


@case("nn/cross_entropy", unit="ms", target=1.0, rtol=1e-4, doc="cross_entropy of (512, 1000) logits, mean")
def _ce(fw):
    return Stmt("cross_entropy(x, t)", cross_entropy=_f(fw, "cross_entropy"), x=fw.randn(*CE),
                t=_targets(fw))


@case("nn/cross_entropy fwd+bwd", unit="ms", target=1.0, check=False,
      doc="cross_entropy forward and backward")
def _ce_bwd(fw):
    (x,) = _grad_inputs(fw, CE)
    return Stmt("cross_entropy(x, t).backward()", cross_entropy=_f(fw, "cross_entropy"), x=x,
                t=_targets(fw))


# ---- fused Adam -----------------------------------------------------------------------------

NPARAMS, NUMEL = 100, 10_000


def _adam_state(fw):
    ps = [fw.randn(NUMEL, seed=i) for i in range(NPARAMS)]
    gs = [fw.randn(NUMEL, seed=1000 + i) for i in range(NPARAMS)]
    m1 = [fw.mod.zeros(NUMEL) for _ in ps]
    m2 = [fw.mod.zeros(NUMEL) for _ in ps]
    steps = [fw.mod.zeros(()) for _ in ps]
    return ps, gs, m1, m2, steps


@case("nn/fused_adam step", unit="ms", check=False,
      doc="one _fused_adam_ call: 100 float32 params of 10k elements (torch: torch._fused_adam_)")
def _adam(fw):
    ps, gs, m1, m2, steps = _adam_state(fw)
    return Stmt("fused(ps, gs, m1, m2, [], steps, lr=1e-3, beta1=0.9, beta2=0.999, "
                "weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)",
                fused=fw.mod._fused_adam_ if fw.name == "torch" else fw.mod._C._fused_adam_,
                ps=ps, gs=gs, m1=m1, m2=m2, steps=steps)


# ---- SGD ------------------------------------------------------------------------------------

@case("nn/sgd momentum step", unit="ms", check=False, target=1.0,
      doc="SGD(lr=0.01, momentum=0.9, weight_decay=1e-4).step() over 100 float32 params of 10k "
          "elements (ember: the default fused kernel; torch: foreach=True)")
def _sgd(fw):
    params = []
    for i in range(NPARAMS):
        p = fw.randn(NUMEL, seed=i)
        p.requires_grad_(True)
        p.grad = fw.randn(NUMEL, seed=1000 + i)
        params.append(p)
    kw = dict(lr=0.01, momentum=0.9, weight_decay=1e-4)
    if fw.name == "torch":
        kw["foreach"] = True
    else:
        import ember.optim  # noqa: F401  (ember.optim is a subpackage)
    opt = fw.mod.optim.SGD(params, **kw)
    opt.step()  # momentum buffers exist from here on
    return Stmt("opt.step()", opt=opt)
