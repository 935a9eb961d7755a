"""Generates the piecewise polynomial tables of kernels/special_bessel_coeffs.h.

Each function is approximated on fixed intervals [a, b] by a polynomial in u = x - (a + b) / 2:
Chebyshev interpolation at NODES points (mpmath at 40 digits), the series cut at the degree
asked for and rewritten exactly as a polynomial in u (well conditioned: |u| <= (b - a) / 2 and
the coefficients fall fast). The tables:

- J0, J1, Y0, Y1 on [k, k + 1] for k = 2 .. 24 (the oscillation has period ~6, so degree 15
  reaches ~1e-17 of the amplitude);
- e^x K0(x), e^x K1(x) on 1 .. 25 split in intervals whose width grows with x (the function is
  smooth there, its singularity is at 0);
- Ai(x) on [k - 1/2, k + 1/2] for k = -10 .. 10.

For each table the script prints the largest error of the polynomials, evaluated in float64 by
Horner's rule, against mpmath on a dense grid (relative to the envelope that the tests use), and
writes the header.

With ``--f32`` it writes kernels/special_bessel_coeffs_f32.h instead: the float32 path of
kernels/special_math_f32.h, with float coefficients of lower degree (J0, J1, Y0, Y1 on the same
unit intervals at degree 8; e^x K0, e^x K1 on the same intervals and e^-x I0, e^-x I1 on 2 .. 25
at degree 7), its errors measured with float32 Horner sums at float32 points (in units of
2^-24 of the envelope), and the power series and Hankel sums cut where float32 needs them.

    python3 tools/gen_bessel_coeffs.py [--f32]   # needs mpmath (the generator only; never the tests)
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from pathlib import Path

import mpmath as mp
import numpy as np

mp.mp.dps = 40
NODES = 40
OUT = Path(__file__).resolve().parents[1] / "packages/core/csrc/kernels/special_bessel_coeffs.h"

JY_DEG = 15
K_EDGES = [1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 25]
K_DEG = 17
AI_DEG = 19


def cheb_poly(f, a: float, b: float, deg: int) -> list[mp.mpf]:
    """Coefficients (u^0 first) of the degree-`deg` Chebyshev interpolant of f on [a, b]."""
    a, b = mp.mpf(a), mp.mpf(b)
    mid, half = (a + b) / 2, (b - a) / 2
    n = NODES
    us = [mp.cos(mp.pi * (j + mp.mpf(0.5)) / n) for j in range(n)]
    vals = [f(mid + half * u) for u in us]
    c = [2 * mp.fsum(vals[j] * mp.cos(mp.pi * k * (j + mp.mpf(0.5)) / n) for j in range(n)) / n
         for k in range(deg + 1)]
    c[0] /= 2
    # T_k(s) as polynomials in s, then s = u / half
    polys = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for k in range(2, deg + 1):
        nxt = [mp.mpf(0)] * (k + 1)
        for i, x in enumerate(polys[-1]):
            nxt[i + 1] += 2 * x
        for i, x in enumerate(polys[-2]):
            nxt[i] -= x
        polys.append(nxt)
    out = [mp.mpf(0)] * (deg + 1)
    for k in range(deg + 1):
        for i, x in enumerate(polys[k]):
            out[i] += c[k] * x
    return [v / half**i for i, v in enumerate(out)]


def horner(coeffs: list[float], u: np.ndarray) -> np.ndarray:
    r = np.full_like(u, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        r = r * u + c
    return r


def table(f, edges, deg, scale):
    """Rows of float64 coefficients, one per interval, and the largest scaled error."""
    rows, worst = [], 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        co = cheb_poly(f, a, b, deg)
        row = [float(v) for v in co]
        rows.append(row)
        xs = np.linspace(a, b, 41)
        got = horner(row, xs - (a + b) / 2)
        for x, g in zip(xs, got):
            want = f(mp.mpf(float(x)))
            err = abs(float(g) - float(want)) / scale(float(x), float(want))
            worst = max(worst, err)
    return rows, worst


def env_osc(x: float, want: float) -> float:
    return max(abs(want), math.sqrt(2 / (math.pi * x)))


def env_rel(x: float, want: float) -> float:
    return abs(want)


def env_ai(x: float, want: float) -> float:
    return max(abs(want), abs(x) ** -0.25 / math.sqrt(math.pi)) if x < -1 else abs(want)


def fmt(name: str, tabs: list[list[list[float]]]) -> str:
    """A function evaluating row i of table f at u (Horner), the tables as a static array."""
    n, m, d = len(tabs), len(tabs[0]), len(tabs[0][0])
    lines = [f"EMBER_SPECIAL_HD inline double {name}(int f, int i, double u) {{",
             f"  static constexpr double kTab[{n}][{m}][{d}] = {{"]
    for rows in tabs:
        lines.append("      {")
        for row in rows:
            lines.append("          {" + ", ".join(repr(v) for v in row) + "},")
        lines.append("      },")
    lines += ["  };", "  const double* c = kTab[f][i];", f"  double r = c[{d - 1}];",
              f"  for (int k = {d - 2}; k >= 0; --k) r = r * u + c[k];", "  return r;", "}"]
    return "\n".join(lines)


def series_fn(name: str, doc: str, tab: list[list[float]]) -> str:
    """A function summing sum_k tab[f][k] s^k (Horner), the table as a static array."""
    n, d = len(tab), len(tab[0])
    lines = [f"// {doc}", f"EMBER_SPECIAL_HD inline double {name}(int f, double s) {{",
             f"  static constexpr double kTab[{n}][{d}] = {{"]
    for row in tab:
        lines.append("      {" + ", ".join(repr(v) for v in row) + "},")
    lines += ["  };", "  const double* c = kTab[f];", f"  double r = c[{d - 1}];",
              f"  for (int k = {d - 2}; k >= 0; --k) r = r * s + c[k];", "  return r;", "}"]
    return "\n".join(lines)


def asymptotic_tables() -> str:
    """The expansions in 1/zeta (Airy, zeta >= 22.68) and 1/x (Hankel, x > 25), cut where the
    terms fall below 1e-18 at the smallest argument; coefficients exact (fractions), then
    rounded."""
    u = [Fraction(1)]  # Airy: u_k = u_{k-1} (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k)
    for k in range(1, 24):
        u.append(u[-1] * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k))
    pos = [float((-1) ** k * u[k]) for k in range(24)]
    neg_p = [float((-1) ** k * u[2 * k]) for k in range(12)]
    neg_q = [float((-1) ** k * u[2 * k + 1]) for k in range(12)]
    hp, hq = [], []
    for nu in (0, 1):  # Hankel: a_k = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)
        a = [Fraction(1)]
        for k in range(1, 22):
            a.append(a[-1] * (4 * nu * nu - (2 * k - 1) ** 2) / (8 * k))
        hp.append([float((-1) ** m * a[2 * m]) for m in range(11)])
        hq.append([float((-1) ** m * a[2 * m + 1]) for m in range(11)])
    rows = [[], [], [], []]  # the power series of J0, J1, Y0, Y1 (and I0, I1, K0, K1) in s = x^2/4
    fk, h = Fraction(1), Fraction(0)
    for k in range(14):
        if k:
            fk, h = fk * k, h + Fraction(1, k)
        rows[0].append(float(1 / (fk * fk)))
        rows[1].append(float(h / (fk * fk)))
        rows[2].append(float(1 / (fk * fk * (k + 1))))
        rows[3].append(float((2 * h + Fraction(1, k + 1)) / (fk * fk * (k + 1))))
    return "\n\n".join([
        series_fn("small_series", "f = 0 .. 3: sum c_k s^k with c_k = 1 / k!^2, H_k / k!^2, "
                  "1 / (k! (k+1)!), (2 H_k + 1/(k+1)) / (k! (k+1)!) (H_k = 1 + .. + 1/k), "
                  "k <= 13; s = -x^2/4 (J, Y: |x| < 2) or x^2/4 (K: x <= 1).", rows),
        series_fn("airy_asym", "Ai for x > 0: sum (-1)^k u_k s^k, s = 1/zeta.", [pos]),
        series_fn("airy_asym_neg", "f = 0, 1: sum (-1)^k u_2k s^k, sum (-1)^k u_2k+1 s^k "
                  "(Ai for x < 0, s = 1/zeta^2).", [neg_p, neg_q]),
        series_fn("hankel_series", "Hankel's P (f = 0, 1: nu = 0, 1) and Q / (1/x) (f = 2, 3) "
                  "in s = 1/x^2.", hp + hq),
    ])


OUT_F32 = OUT.with_name("special_bessel_coeffs_f32.h")
JY_DEG_F32 = 8
IK_DEG_F32 = 7
I_EDGES = [2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 25]


def table_f32(f, edges, deg, scale):
    """Rows of float32 coefficients and the largest error of their float32 Horner sums at
    float32 points, in units of 2^-24 of the scale."""
    rows, worst = [], 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        row = [np.float32(float(v)) for v in cheb_poly(f, a, b, deg)]
        rows.append([float(v) for v in row])
        mid = np.float32((a + b) / 2)
        xs = np.linspace(a, b, 41).astype(np.float32)
        got = horner(row, (xs - mid).astype(np.float32))
        for x, g in zip(xs, got):
            want = f(mp.mpf(float(x)))
            err = abs(float(g) - float(want)) / scale(float(x), float(want))
            worst = max(worst, err / 2.0**-24)
    return rows, worst


def fmt_f32(name: str, tabs: list[list[list[float]]]) -> str:
    n, m, d = len(tabs), len(tabs[0]), len(tabs[0][0])
    lines = [f"EMBER_SPECIAL_HD inline float {name}(int f, int i, float u) {{",
             f"  static constexpr float kTab[{n}][{m}][{d}] = {{"]
    for rows in tabs:
        lines.append("      {")
        for row in rows:
            lines.append("          {" + ", ".join(f"{v!r}f" for v in row) + "},")
        lines.append("      },")
    lines += ["  };", "  const float* c = kTab[f][i];", f"  float r = c[{d - 1}];",
              f"  for (int k = {d - 2}; k >= 0; --k) r = r * u + c[k];", "  return r;", "}"]
    return "\n".join(lines)


def series_fn_f32(name: str, doc: str, tab: list[list[float]]) -> str:
    n, d = len(tab), len(tab[0])
    lines = [f"// {doc}", f"EMBER_SPECIAL_HD inline float {name}(int f, float s) {{",
             f"  static constexpr float kTab[{n}][{d}] = {{"]
    for row in tab:
        lines.append("      {" + ", ".join(f"{float(np.float32(v))!r}f" for v in row) + "},")
    lines += ["  };", "  const float* c = kTab[f];", f"  float r = c[{d - 1}];",
              f"  for (int k = {d - 2}; k >= 0; --k) r = r * s + c[k];", "  return r;", "}"]
    return "\n".join(lines)


def main_f32() -> int:
    funcs = {
        "kJ0": (lambda x: mp.besselj(0, x), list(range(2, 26)), JY_DEG_F32, env_osc),
        "kJ1": (lambda x: mp.besselj(1, x), list(range(2, 26)), JY_DEG_F32, env_osc),
        "kY0": (lambda x: mp.bessely(0, x), list(range(2, 26)), JY_DEG_F32, env_osc),
        "kY1": (lambda x: mp.bessely(1, x), list(range(2, 26)), JY_DEG_F32, env_osc),
        "kK0e": (lambda x: mp.besselk(0, x) * mp.exp(x), K_EDGES, IK_DEG_F32, env_rel),
        "kK1e": (lambda x: mp.besselk(1, x) * mp.exp(x), K_EDGES, IK_DEG_F32, env_rel),
        "kI0e": (lambda x: mp.besseli(0, x) * mp.exp(-x), I_EDGES, IK_DEG_F32, env_rel),
        "kI1e": (lambda x: mp.besseli(1, x) * mp.exp(-x), I_EDGES, IK_DEG_F32, env_rel),
    }
    tabs = {}
    for name, (f, edges, deg, scale) in funcs.items():
        rows, worst = table_f32(f, edges, deg, scale)
        print(f"{name}: {len(rows)} intervals, degree {deg}, max error {worst:.3g} x 2^-24")
        tabs[name] = rows
    rows = [[], [], [], []]  # the power series in s (as asymptotic_tables), k <= 8
    fk, h = Fraction(1), Fraction(0)
    for k in range(9):
        if k:
            fk, h = fk * k, h + Fraction(1, k)
        rows[0].append(float(1 / (fk * fk)))
        rows[1].append(float(h / (fk * fk)))
        rows[2].append(float(1 / (fk * fk * (k + 1))))
        rows[3].append(float((2 * h + Fraction(1, k + 1)) / (fk * fk * (k + 1))))
    hp, hq = [], []
    for nu in (0, 1):  # Hankel's a_k, k <= 9 (a_k / 25^k < 1e-10 beyond)
        a = [Fraction(1)]
        for k in range(1, 10):
            a.append(a[-1] * (4 * nu * nu - (2 * k - 1) ** 2) / (8 * k))
        hp.append([float((-1) ** m * a[2 * m]) for m in range(5)])
        hq.append([float((-1) ** m * a[2 * m + 1]) for m in range(5)])
    kedges = ", ".join(repr(float(e)) for e in K_EDGES)
    iedges = ", ".join(repr(float(e)) for e in I_EDGES)
    header = f"""// Generated by tools/gen_bessel_coeffs.py --f32; do not edit. The float32 tables of
// kernels/special_math_f32.h: row i holds the coefficients (u^0 first) of the polynomial in
// u = x - (a_i + b_i) / 2 on the interval [a_i, b_i] (see the generator for the intervals).
// clang-format off
#pragma once
// Included by kernels/special_math_f32.h (EMBER_SPECIAL_HD comes from kernels/special_math.h).

namespace ember {{
namespace special_math {{
namespace f32 {{
namespace tables {{

// f = 0 .. 3: J0, J1, Y0, Y1 on [i + 2, i + 3], i = 0 .. 22, u = x - (i + 2.5).
{fmt_f32("poly_jy", [tabs[k] for k in ("kJ0", "kJ1", "kY0", "kY1")])}

// f = 0, 1: e^x K0(x), e^x K1(x) on [e_i, e_i+1], u = x - (e_i + e_i+1) / 2, the edges e:
// {kedges}.
{fmt_f32("poly_ke", [tabs["kK0e"], tabs["kK1e"]])}

// f = 0, 1: e^-x I0(x), e^-x I1(x) on [e_i, e_i+1], u = x - (e_i + e_i+1) / 2, the edges e:
// {iedges}.
{fmt_f32("poly_ie", [tabs["kI0e"], tabs["kI1e"]])}

{series_fn_f32("small_series", "f = 0 .. 3: the power series of kernels/special_math.h "
               "(tables::small_series), k <= 8.", rows)}

{series_fn_f32("hankel_series", "Hankel's P (f = 0, 1: nu = 0, 1) and Q / (1/x) (f = 2, 3) in "
               "s = 1/x^2, a_k for k <= 9.", hp + hq)}

}}  // namespace tables
}}  // namespace f32
}}  // namespace special_math
}}  // namespace ember
// clang-format on
"""
    OUT_F32.write_text(header)
    print(f"wrote {OUT_F32}")
    return 0


def main() -> int:
    if "--f32" in sys.argv[1:]:
        return main_f32()
    jy_edges = list(range(2, 26))
    funcs = {
        "kJ0": (lambda x: mp.besselj(0, x), jy_edges, JY_DEG, env_osc),
        "kJ1": (lambda x: mp.besselj(1, x), jy_edges, JY_DEG, env_osc),
        "kY0": (lambda x: mp.bessely(0, x), jy_edges, JY_DEG, env_osc),
        "kY1": (lambda x: mp.bessely(1, x), jy_edges, JY_DEG, env_osc),
        "kK0e": (lambda x: mp.besselk(0, x) * mp.exp(x), K_EDGES, K_DEG, env_rel),
        "kK1e": (lambda x: mp.besselk(1, x) * mp.exp(x), K_EDGES, K_DEG, env_rel),
        "kAi": (mp.airyai, [k - 0.5 for k in range(-10, 12)], AI_DEG, env_ai),
    }
    tabs = {}
    for name, (f, edges, deg, scale) in funcs.items():
        rows, worst = table(f, edges, deg, scale)
        print(f"{name}: {len(rows)} intervals, degree {deg}, max scaled error {worst:.3g}")
        tabs[name] = rows
    parts = [fmt("poly_jy", [tabs[k] for k in ("kJ0", "kJ1", "kY0", "kY1")]),
             fmt("poly_ke", [tabs["kK0e"], tabs["kK1e"]]), fmt("poly_ai", [tabs["kAi"]])]
    kedges = ", ".join(repr(float(e)) for e in K_EDGES)
    header = f"""// Generated by tools/gen_bessel_coeffs.py; do not edit. Piecewise polynomial tables of
// kernels/special_math.h: row i holds the coefficients (u^0 first) of the polynomial in
// u = x - (a_i + b_i) / 2 on the interval [a_i, b_i] (see the generator for the intervals).
// clang-format off
#pragma once
// Included by kernels/special_math.h (EMBER_SPECIAL_HD comes from there).

namespace ember {{
namespace special_math {{
namespace tables {{

// f = 0 .. 3: J0, J1, Y0, Y1 on [i + 2, i + 3], i = 0 .. 22, u = x - (i + 2.5).
{parts[0]}

// f = 0, 1: e^x K0(x), e^x K1(x) on [e_i, e_i+1], u = x - (e_i + e_i+1) / 2, the edges e:
// {kedges}.
{parts[1]}

// f = 0: Ai on [i - 10.5, i - 9.5], i = 0 .. 20, u = x - (i - 10).
{parts[2]}

{asymptotic_tables()}

}}  // namespace tables
}}  // namespace special_math
}}  // namespace ember
// clang-format on
"""
    OUT.write_text(header)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
