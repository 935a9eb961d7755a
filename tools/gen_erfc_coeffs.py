"""Generates the polynomial coefficients of the vectorized erfc (kernels/cpu/nn_vec_erfc.inc).

For z >= 0 the kernel computes erfc(z) = t * exp(-z^2 + h(t)) with t = K / (K + z). h is smooth
for t in [K / (K + ZMAX), 1] (z in [0, ZMAX], past which erfc rounds to 0 in float64): it is
expanded there in Chebyshev polynomials (interpolation at NODES Chebyshev nodes, mpmath at 50
digits), the series cut after `terms` terms and rewritten as a polynomial in v = 2 t - 1 (well
conditioned: the absolute values of its coefficients add up to 1.8). Prints, for float64 (26
terms) and float32 (14 terms, evaluated in float64), the coefficients from v^0 up and the largest
error of the polynomial against h on a dense grid.

    python3 tools/gen_erfc_coeffs.py
"""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 50
K = mp.mpf("2.5")
ZMAX = mp.mpf("27.5")
NODES = 64


def h(t: mp.mpf) -> mp.mpf:
    """log(erfc(z) / t) + z^2 for z = K / t - K."""
    z = K / t - K
    return mp.log(mp.erfc(z) / t) + z * z


def chebyshev(a: mp.mpf, b: mp.mpf) -> list[mp.mpf]:
    """Coefficients c_k of h(t) = sum c_k T_k(s), s = (2 t - a - b) / (b - a) on [a, b]."""
    us = [mp.cos(mp.pi * (j + mp.mpf(0.5)) / NODES) for j in range(NODES)]
    vals = [h((a + b) / 2 + (b - a) / 2 * u) for u in us]
    c = [2 * mp.fsum(vals[j] * mp.cos(mp.pi * k * (j + mp.mpf(0.5)) / NODES) for j in range(NODES))
         / NODES for k in range(NODES)]
    c[0] /= 2
    return c


def monomials(c: list[mp.mpf], terms: int, a: mp.mpf, b: mp.mpf) -> list[mp.mpf]:
    """sum_{k < terms} c_k T_k(s) as a polynomial in v = 2 t - 1."""
    polys = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]  # T_k's coefficients in s
    for k in range(2, terms):
        nxt = [mp.mpf(0)] * (k + 1)
        for i, x in enumerate(polys[-1]):
            nxt[i + 1] += 2 * x
        for i, x in enumerate(polys[-2]):
            nxt[i] -= x
        polys.append(nxt)
    in_s = [mp.mpf(0)] * terms
    for k in range(terms):
        for i, x in enumerate(polys[k]):
            in_s[i] += c[k] * x
    # s = alpha v + beta with t = (v + 1) / 2
    alpha, beta = 1 / (b - a), (1 - a - b) / (b - a)
    out = [mp.mpf(0)] * terms
    for i in range(terms):
        for j in range(i + 1):
            out[j] += in_s[i] * mp.binomial(i, j) * alpha**j * beta ** (i - j)
    return out


def main() -> None:
    a, b = K / (K + ZMAX), mp.mpf(1)
    c = chebyshev(a, b)
    for name, terms in (("float64", 26), ("float32", 14)):
        poly = monomials(c, terms, a, b)
        worst = mp.mpf(0)
        for i in range(1001):
            t = a + (b - a) * i / 1000
            v, val = 2 * t - 1, mp.mpf(0)
            for x in reversed(poly):
                val = val * v + x
            worst = max(worst, abs(val - h(t)))
        print(f"{name}: {terms} terms, max |error| {mp.nstr(worst, 3)}, "
              f"sum |a_j| {mp.nstr(mp.fsum(abs(x) for x in poly), 4)}")
        for x in poly:
            print(f"    {float(x)!r},")


if __name__ == "__main__":
    main()
