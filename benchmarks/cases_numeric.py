"""Numerical helpers and torch-level recurrences on the CPU, one intra-op thread per framework
as everywhere; inputs are the same random values for both frameworks.

* ``frexp`` on 2^20 float32 / float64 values (a few zeros, infinities and subnormals among them);
* ``histogramdd`` of 2^16 three-dimensional points: equal bins over the data's extent, equal
  bins over a given range (some points outside), custom edges, and weights with density;
* ``torch.lstm`` / ``torch.gru`` (the flat-parameter functions nn.LSTM / nn.GRU call), one layer,
  T=50, B=16, H=64, float32, forward only and forward plus backward.
"""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

N = 1 << 20


def _frexp_values(fw, dtype: str):
    key = ("frexp", dtype)
    if key not in fw.data_cache:
        rng = np.random.default_rng(11)
        x = rng.standard_normal(N) * np.exp2(rng.integers(-30, 30, N))
        x[::997] = 0.0
        x[1::1999] = np.inf
        x[2::1999] = np.finfo(dtype).tiny / 8  # subnormal
        fw.data_cache[key] = x.astype(dtype)
    return fw.from_numpy(fw.data_cache[key])


for _dtype, _short in (("float32", "f32"), ("float64", "f64")):

    def _setup(fw, dtype=_dtype):
        return Stmt("m.frexp(x)", m=fw.mod, x=_frexp_values(fw, dtype))

    case(f"numeric/frexp {_short} 1M", unit="us", bytes=N * (2 * np.dtype(_dtype).itemsize + 4),
         rtol=0, atol=0, doc=f"torch.frexp(x), x ({N},) {_dtype}: mantissa and int32 exponent")(
        _setup)

P = 1 << 16


def _points(fw):
    key = ("histogramdd",)
    if key not in fw.data_cache:
        rng = np.random.default_rng(5)
        fw.data_cache[key] = rng.standard_normal((P, 3)), rng.random(P)
    pts, w = fw.data_cache[key]
    return fw.from_numpy(pts), fw.from_numpy(w)


_EDGES = [[-3.0, -1.5, -0.5, 0.0, 0.3, 1.0, 2.5], [-2.0, -1.0, 0.0, 1.0, 2.0],
          [-4.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0]]
_HIST = {
    "bins=16": ("m.histogramdd(x, bins=16).hist", {}),
    "bins=[8,16,4] range": ("m.histogramdd(x, bins=[8, 16, 4], range=r).hist",
                            {"r": [-1.0, 1.0, -2.0, 2.0, -0.5, 1.5]}),
    "edges": ("m.histogramdd(x, bins=e).hist", {"e": "edges"}),
    "bins=10 weight density": ("m.histogramdd(x, bins=10, weight=w, density=True).hist", {}),
}

for _label, (_stmt, _extra) in _HIST.items():

    def _setup_hist(fw, stmt=_stmt, extra=_extra):
        x, w = _points(fw)
        names = dict(extra)
        if names.get("e") == "edges":
            names["e"] = [fw.mod.tensor(e, dtype=fw.mod.float64) for e in _EDGES]
        return Stmt(stmt, m=fw.mod, x=x, w=w, **names)

    case(f"numeric/histogramdd {P}x3 {_label}", unit="us", rtol=1e-9, atol=1e-12,
         doc=f"torch.histogramdd over ({P}, 3) float64 normal points: {_stmt}")(_setup_hist)


T, B, H = 50, 16, 64


def _rnn_args(fw, mode: str, grad: bool):
    gates = 4 if mode == "lstm" else 3
    key = ("rnn", mode)
    if key not in fw.data_cache:
        rng = np.random.default_rng(9)
        s = 1 / np.sqrt(H)
        fw.data_cache[key] = (
            rng.standard_normal((T, B, H)).astype("float32"),
            rng.standard_normal((1, B, H)).astype("float32"),
            rng.standard_normal((1, B, H)).astype("float32"),
            [rng.uniform(-s, s, shape).astype("float32") for shape in
             ((gates * H, H), (gates * H, H), (gates * H,), (gates * H,))])
    x, h0, c0, params = fw.data_cache[key]
    x, h0, c0 = fw.from_numpy(x), fw.from_numpy(h0), fw.from_numpy(c0)
    params = [fw.from_numpy(p).requires_grad_(grad) for p in params]
    if grad:
        x.requires_grad_(True)
    hx = (h0, c0) if mode == "lstm" else h0
    return x, hx, params


for _mode in ("lstm", "gru"):
    for _grad in (False, True):

        def _setup_rnn(fw, mode=_mode, grad=_grad):
            x, hx, params = _rnn_args(fw, mode, grad)
            call = f"m.{mode}(x, hx, p, True, 1, 0.0, {grad}, False, False)[0]"
            if grad:
                return Stmt(f"{call}.sum().backward()", m=fw.mod, x=x, hx=hx, p=params)
            return Stmt(call, m=fw.mod, x=x, hx=hx, p=params)

        _suffix = " fwd+bwd" if _grad else ""
        case(f"numeric/{_mode} fn T{T} B{B} H{H}{_suffix}", unit="us", rtol=1e-4, atol=1e-5,
             check=not _grad,
             doc=f"torch.{_mode}(x, hx, params, True, 1, 0.0, train, False, False) on "
             f"({T}, {B}, {H}) float32, one layer{', sum().backward()' if _grad else ''}")(
            _setup_rnn)
