"""Every pointwise activation of nn.functional (and dropout), forward and forward+backward, on a
MobileNet-sized float32 activation map (8, 96, 32, 32) with random signs.

Random signs matter: a kernel whose select (`x > 0 ? x : x * slope`) compiles to a branch instead
of a vector blend is mispredicted half the time, and ReLU6 once ran 35x slower than torch's here.
Forward+backward cases call `y.backward(g)` with a fixed upstream gradient.
"""

from __future__ import annotations

from harness import Stmt, case

SHAPE = (8, 96, 32, 32)

# name, extra positional arguments (the same for both frameworks)
ACTIVATIONS: list[tuple[str, tuple]] = [
    ("relu", ()),
    ("relu6", ()),
    ("hardtanh", (-1.0, 1.0)),
    ("leaky_relu", (0.1,)),
    ("elu", ()),
    ("selu", ()),
    ("celu", ()),
    ("gelu", ()),
    ("silu", ()),
    ("mish", ()),
    ("softplus", ()),
    ("hardswish", ()),
    ("hardsigmoid", ()),
    ("softsign", ()),
    ("logsigmoid", ()),
    ("sigmoid", ()),
    ("tanh", ()),
]


def _fn(fw, name):
    return getattr(fw.mod.nn.functional, name)


def _register(name: str, args: tuple) -> None:
    nbytes = 2 * 4 * SHAPE[0] * SHAPE[1] * SHAPE[2] * SHAPE[3]

    @case(f"act/{name}", unit="us", bytes=nbytes, rtol=1e-4, atol=1e-5,
          doc=f"F.{name}(x{''.join(f', {a}' for a in args)}), x {SHAPE} float32")
    def _fwd(fw):
        return Stmt("f(x, *args)", f=_fn(fw, name), x=fw.randn(*SHAPE, seed=1), args=args)

    @case(f"act/{name} fwd+bwd", unit="us", check=False,
          doc=f"F.{name} forward and backward, x {SHAPE} float32")
    def _bwd(fw):
        x = fw.randn(*SHAPE, seed=1)
        x.requires_grad_(True)
        g = fw.randn(*SHAPE, seed=2)
        return Stmt("f(x, *args).backward(g)", f=_fn(fw, name), x=x, g=g, args=args)


for _name, _args in ACTIVATIONS:
    _register(_name, _args)


# GELU's other forms and dtypes (the exact form in float32 is act/gelu above).
@case("act/gelu tanh", unit="us", bytes=2 * 4 * SHAPE[0] * SHAPE[1] * SHAPE[2] * SHAPE[3],
      rtol=1e-4, atol=1e-5, doc=f"F.gelu(x, approximate='tanh'), x {SHAPE} float32")
def _gelu_tanh(fw):
    return Stmt("f(x, approximate='tanh')", f=_fn(fw, "gelu"), x=fw.randn(*SHAPE, seed=1))


@case("act/gelu float64", unit="us", bytes=2 * 8 * SHAPE[0] * SHAPE[1] * SHAPE[2] * SHAPE[3],
      rtol=1e-10, atol=1e-12, doc=f"F.gelu(x), x {SHAPE} float64")
def _gelu_f64(fw):
    return Stmt("f(x)", f=_fn(fw, "gelu"), x=fw.randn(*SHAPE, seed=1).to(fw.mod.float64))


@case("act/gelu bfloat16", unit="us", bytes=2 * 2 * SHAPE[0] * SHAPE[1] * SHAPE[2] * SHAPE[3],
      check=False, doc=f"F.gelu(x), x {SHAPE} bfloat16 (not compared: torch's bfloat16 has no "
      "numpy view; tests/test_activation_vec.py checks the values)")
def _gelu_bf16(fw):
    return Stmt("f(x)", f=_fn(fw, "gelu"), x=fw.randn(*SHAPE, seed=1).to(fw.mod.bfloat16))

@case("act/dropout", unit="us", check=False,
      doc=f"F.dropout(x, 0.5, training=True), x {SHAPE} float32 (random mask: not compared)")
def _dropout(fw):
    return Stmt("f(x, 0.5, True)", f=_fn(fw, "dropout"), x=fw.randn(*SHAPE, seed=1))


@case("act/dropout fwd+bwd", unit="us", check=False,
      doc=f"F.dropout(x, 0.5) forward and backward, x {SHAPE} float32")
def _dropout_bwd(fw):
    x = fw.randn(*SHAPE, seed=1)
    x.requires_grad_(True)
    g = fw.randn(*SHAPE, seed=2)
    return Stmt("f(x, 0.5, True).backward(g)", f=_fn(fw, "dropout"), x=x, g=g)


# In-place forms (inplace=True): one kernel writing into x (no result allocated, no copy). The
# input is rewritten every run, so values are not compared (relu6 / hardtanh are idempotent,
# the others drift).
INPLACE: list[tuple[str, tuple]] = [
    ("relu6", ()),
    ("hardtanh", (-1.0, 1.0)),
    ("leaky_relu", (0.1,)),
    ("elu", ()),
    ("hardswish", ()),
    ("hardsigmoid", ()),
    ("silu", ()),
]


def _register_inplace(name: str, args: tuple) -> None:
    nbytes = 2 * 4 * SHAPE[0] * SHAPE[1] * SHAPE[2] * SHAPE[3]

    @case(f"act/{name} inplace", unit="us", bytes=nbytes, check=False,
          doc=f"F.{name}(x{''.join(f', {a}' for a in args)}, inplace=True), x {SHAPE} float32")
    def _inplace(fw):
        return Stmt("f(x, *args, inplace=True)", f=_fn(fw, name), x=fw.randn(*SHAPE, seed=1),
                    args=args)


for _name, _args in INPLACE:
    _register_inplace(_name, _args)
