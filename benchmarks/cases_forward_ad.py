"""Forward-mode AD: a Jacobian-vector product through `autograd.forward_ad`, ember vs torch.

Each call enters a dual level, makes the inputs dual, runs the function and unpacks the output
tangent (what torch.func.jvp does too). The per-op cost of forward AD when no level is live is
covered by the tiny/* cases of cases_core.py (the check is one atomic load).
"""

from __future__ import annotations

from harness import case


def _jvp(fw, f, primals, tangents):
    fwad = fw.mod.autograd.forward_ad

    def run():
        with fwad.dual_level():
            duals = [fwad.make_dual(p, t) for p, t in zip(primals, tangents)]
            return fwad.unpack_dual(f(*duals)).tangent

    return run


@case("fwad/tiny chain", unit="us", doc="jvp of ((x * y).exp() + y).sum(), 8 float32")
def _fwad_tiny(fw):
    x, y = fw.randn(8, seed=1), fw.randn(8, seed=2)
    vx, vy = fw.randn(8, seed=3), fw.randn(8, seed=4)
    return _jvp(fw, lambda a, b: ((a * b).exp() + b).sum(), [x, y], [vx, vy])


@case("fwad/mlp", unit="ms", rtol=1e-3, atol=1e-3,
      doc="jvp of a 3-layer tanh MLP (64x256 input, 256-wide), w.r.t. input and first weight")
def _fwad_mlp(fw):
    x = fw.randn(64, 256, seed=1)
    w1, w2, w3 = (fw.randn(256, 256, seed=s) * 0.06 for s in (2, 3, 4))
    vx, vw = fw.randn(64, 256, seed=5), fw.randn(256, 256, seed=6)

    def mlp(a, w):
        return (((a @ w).tanh() @ w2).tanh() @ w3).sum(0)

    return _jvp(fw, mlp, [x, w1], [vx, vw])
