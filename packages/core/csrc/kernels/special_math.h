// The special functions of torch.special that ember computes elementwise (Bessel functions,
// Airy Ai, the orthogonal polynomials), written once for the CPU kernels
// (kernels/cpu/pointwise_ops.cpp) and the CUDA ones (cuda/pointwise_functors.cuh): under nvcc they
// are __host__ __device__ and std:: math compiles to the device's functions.
//
// The Bessel and Airy functions are computed in double for every dtype:
// - J0, J1, Y0, Y1: power series for x < 2; for 2 <= x <= 25 a polynomial of degree 15 per unit
//   interval (kernels/special_bessel_coeffs.h, from tools/gen_bessel_coeffs.py; error ~2e-16 of
//   the amplitude sqrt(2 / (pi x))); Hankel's expansion beyond, whose phase uses sin(x) and
//   cos(x) (accurately reduced) rather than sin(x - pi/4).
// - I0, I1: power series for x <= 30, the large-argument expansion beyond.
// - K0, K1: the series of K in terms of I for x <= 1, polynomials for e^x K(x) on 18 intervals
//   up to 25 (degree 17, relative error ~2e-16), the large-argument expansion beyond.
// - Ai: a polynomial of degree 19 on [k - 1/2, k + 1/2] for k = -10..10 (relative error ~1e-15,
//   or that of the amplitude for x < -1), the asymptotic expansions (oscillating for x < 0)
//   beyond.
// The power series (x < 2 for J/Y, x <= 1 for K) and the asymptotic expansions are summed as
// fixed-length polynomials (Horner, no divisions or tests per term). All the tables are static
// constexpr arrays inside the functions that evaluate them.
// The polynomials (x, n) follow torch's definitions: the order is n truncated toward zero
// (NaN, +-inf and out-of-range orders count as negative), a negative order gives 0, and the value
// comes from the three-term recurrence in the op-math type, or from the trigonometric form for
// the Chebyshev families inside (-1, 1) and large n. A recurrence that overflows yields NaN (as
// in torch); one that would still be finite after kMaxSteps steps gives NaN instead of running on.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#ifdef __CUDACC__
#define EMBER_SPECIAL_HD __host__ __device__
#else
#define EMBER_SPECIAL_HD
#endif

#include "kernels/special_bessel_coeffs.h"

namespace ember {
namespace special_math {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kInvSqrtPi = 0.56418958354775628695;
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kLn2 = 0.69314718055994530942;

EMBER_SPECIAL_HD inline double nan_value() { return std::numeric_limits<double>::quiet_NaN(); }
EMBER_SPECIAL_HD inline double inf_value() { return std::numeric_limits<double>::infinity(); }

// ---- J0, J1, Y0, Y1 ---------------------------------------------------------------------------

// 0 < x < 2: the power series with s = -x^2/4 (tables::small_series, 14 terms):
//   J0 = sum s^k / k!^2, J1 = x/2 sum s^k / (k! (k+1)!),
//   Y0 = 2/pi [(ln(x/2) + g) J0 - sum H_k s^k / k!^2],
//   Y1 = 2/pi [(ln(x/2) + g) J1 - 1/x] - x/(2 pi) sum (2 H_k + 1/(k+1)) s^k / (k! (k+1)!).
EMBER_SPECIAL_HD inline double bessel_small(int f, double x) {
  const double s = -0.25 * x * x;
  if (f == 0) return tables::small_series(0, s);
  const double j1 = 0.5 * x * tables::small_series(2, s);
  if (f == 1) return j1;
  const double lg = std::log(x) - kLn2 + kEulerGamma;
  if (f == 2) return (2.0 / kPi) * (lg * tables::small_series(0, s) - tables::small_series(1, s));
  return (2.0 / kPi) * (lg * j1 - 1.0 / x) - (0.5 / kPi) * x * tables::small_series(3, s);
}

// 2 <= x <= 25: the polynomial of J0 (f = 0), J1, Y0, Y1 (f = 3) on [k, k + 1] (x = 25 on
// [24, 25]).
EMBER_SPECIAL_HD inline double bessel_jy_poly(int f, double x) {
  int i = static_cast<int>(x) - 2;
  if (i > 22) i = 22;
  return tables::poly_jy(f, i, x - (i + 2.5));
}

// Hankel's expansion J_nu + i Y_nu ~ sqrt(2 / (pi x)) (P + i Q) e^{i (x - (nu/2 + 1/4) pi)},
// x > 25: P = sum_m (-1)^m a_2m / x^2m, Q = sum_m (-1)^m a_2m+1 / x^2m+1 with
// a_k = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k), cut after a_21 (below 1e-18 at 25).
EMBER_SPECIAL_HD inline void hankel_pq(double x, int nu, double& p, double& q) {
  const double r = 1.0 / x, s = r * r;
  p = tables::hankel_series(nu, s);
  q = r * tables::hankel_series(2 + nu, s);
}

// J_nu and Y_nu (nu = 0, 1) for x > 25, with cos/sin(x - pi/4) and (x - 3 pi/4) formed from
// sin x and cos x so that no rounding of x - pi/4 enters the phase.
EMBER_SPECIAL_HD inline void bessel_jy_large(double x, int nu, double& j, double& y) {
  double p, q;
  hankel_pq(x, nu, p, q);
  const double s = std::sin(x), c = std::cos(x), f = 1.0 / std::sqrt(kPi * x);
  if (nu == 0) {  // cos(x - pi/4) = (c + s) / sqrt 2, sin(x - pi/4) = (s - c) / sqrt 2
    j = f * (p * (c + s) - q * (s - c));
    y = f * (p * (s - c) + q * (c + s));
  } else {  // cos(x - 3pi/4) = (s - c) / sqrt 2, sin(x - 3pi/4) = -(s + c) / sqrt 2
    j = f * (p * (s - c) + q * (s + c));
    y = f * (q * (s - c) - p * (s + c));
  }
}

// J0, J1: even and odd; NaN at +-inf (as torch). Y0, Y1: -inf at 0, NaN for x < 0.
EMBER_SPECIAL_HD inline double bessel_j0(double x) {
  const double ax = std::fabs(x);
  if (!(ax < inf_value())) return nan_value();
  if (ax == 0.0) return 1.0;
  if (ax < 2.0) return bessel_small(0, ax);
  if (ax <= 25.0) return bessel_jy_poly(0, ax);
  double j, y;
  bessel_jy_large(ax, 0, j, y);
  return j;
}

EMBER_SPECIAL_HD inline double bessel_j1(double x) {
  const double ax = std::fabs(x);
  if (!(ax < inf_value())) return nan_value();
  if (ax == 0.0) return x;  // keeps the sign of zero
  double j, y;
  if (ax < 2.0) {
    j = bessel_small(1, ax);
  } else if (ax <= 25.0) {
    j = bessel_jy_poly(1, ax);
  } else {
    bessel_jy_large(ax, 1, j, y);
  }
  return x < 0 ? -j : j;
}

EMBER_SPECIAL_HD inline double bessel_y0(double x) {
  if (!(x >= 0.0) || x == inf_value()) return nan_value();
  if (x == 0.0) return -inf_value();
  if (x < 2.0) return bessel_small(2, x);
  if (x <= 25.0) return bessel_jy_poly(2, x);
  double j, y;
  bessel_jy_large(x, 0, j, y);
  return y;
}

EMBER_SPECIAL_HD inline double bessel_y1(double x) {
  if (!(x >= 0.0) || x == inf_value()) return nan_value();
  if (x == 0.0) return -inf_value();
  if (x < 1e-300) return -2.0 / (kPi * x);  // -inf for the smallest subnormals
  if (x < 2.0) return bessel_small(3, x);
  if (x <= 25.0) return bessel_jy_poly(3, x);
  double j, y;
  bessel_jy_large(x, 1, j, y);
  return y;
}

// ---- I0, I1, K0, K1 ---------------------------------------------------------------------------

// sum_k (x^2/4)^k / (k! (k + nu)!) for 0 <= x <= 30 (times (x/2)^nu gives I_nu).
EMBER_SPECIAL_HD inline double bessel_i_series(double x, int nu) {
  const double q = 0.25 * x * x;
  double t = 1.0, s = 1.0;
  for (int k = 1; k < 120; ++k) {
    t *= q / (double(k) * (k + nu));
    s += t;
    if (t < 1e-18 * s) break;
  }
  return s;
}

// The large-argument expansion of I_nu (alternating) or K_nu (same signs), x > 25:
// sum_k (+-1)^k a_k / x^k with Hankel's a_k (tables::hankel_series at s = -1/x^2 sums the even
// and the odd terms without their alternating signs).
EMBER_SPECIAL_HD inline double bessel_ik_asymptotic(double x, int nu, bool alternate) {
  const double r = 1.0 / x, s = -r * r;
  const double even = tables::hankel_series(nu, s), odd = r * tables::hankel_series(2 + nu, s);
  return alternate ? even - odd : even + odd;
}

// I_nu(|x|) for nu = 0, 1; overflows only where the value does (e^x is applied in two halves).
EMBER_SPECIAL_HD inline double bessel_i_abs(double ax, int nu) {
  if (ax <= 30.0) {
    const double s = bessel_i_series(ax, nu);
    return nu == 0 ? s : 0.5 * ax * s;
  }
  const double e = std::exp(0.5 * ax);
  return e * (e * (bessel_ik_asymptotic(ax, nu, true) / std::sqrt(2.0 * kPi * ax)));
}

// Modified Bessel I0 (even) and I1 (odd); NaN at +-inf (as torch).
EMBER_SPECIAL_HD inline double bessel_i0(double x) {
  const double ax = std::fabs(x);
  if (!(ax < inf_value())) return nan_value();
  return bessel_i_abs(ax, 0);
}

EMBER_SPECIAL_HD inline double bessel_i1(double x) {
  const double ax = std::fabs(x);
  if (!(ax < inf_value())) return nan_value();
  if (ax == 0.0) return x;
  const double v = bessel_i_abs(ax, 1);
  return x < 0 ? -v : v;
}

// e^x K_nu(x) for x > 0, nu = 0, 1.
EMBER_SPECIAL_HD inline double bessel_k_scaled(double x, int nu) {
  if (x <= 1.0) {
    // K0 = -(ln(x/2) + g) I0 + sum_k H_k (x^2/4)^k / k!^2
    // K1 = 1/x + (ln(x/2) + g) I1 - (x/4) sum_k (2 H_k + 1/(k+1)) (x^2/4)^k / (k! (k+1)!)
    const double q = 0.25 * x * x, lg = std::log(x) - kLn2 + kEulerGamma;
    const double si = tables::small_series(2 * nu, q), sh = tables::small_series(2 * nu + 1, q);
    const double k = nu == 0 ? sh - lg * si : 1.0 / x + 0.5 * x * (lg * si - 0.5 * sh);
    return std::exp(x) * k;
  }
  if (x <= 25.0) {  // the intervals of tables::poly_ke: widths 1/4, 1/2, 1, 2 from 1, 2, 4, 8
    int i;
    double mid;
    if (x < 2.0) {
      const int j = static_cast<int>((x - 1.0) * 4.0);
      i = j > 3 ? 3 : j;
      mid = 1.125 + 0.25 * i;
    } else if (x < 4.0) {
      const int j = static_cast<int>((x - 2.0) * 2.0);
      i = 4 + j;
      mid = 2.25 + 0.5 * j;
    } else if (x < 8.0) {
      const int j = static_cast<int>(x - 4.0);
      i = 8 + j;
      mid = 4.5 + j;
    } else if (x < 16.0) {
      const int j = static_cast<int>((x - 8.0) * 0.5);
      i = 12 + j;
      mid = 9.0 + 2.0 * j;
    } else {
      i = x < 20.0 ? 16 : 17;
      mid = x < 20.0 ? 18.0 : 22.5;
    }
    return tables::poly_ke(nu, i, x - mid);
  }
  return bessel_ik_asymptotic(x, nu, false) * std::sqrt(kPi / (2.0 * x));
}

// K0, K1 (inf at 0, NaN for x < 0, 0 at inf) and their scaled forms e^x K(x).
EMBER_SPECIAL_HD inline double bessel_k(double x, int nu, bool scaled) {
  if (!(x >= 0.0)) return nan_value();
  if (x == 0.0) return inf_value();
  if (x == inf_value()) return 0.0;
  if (nu == 1 && x < 1e-300) return 1.0 / x;  // K1 ~ 1/x (inf for the smallest subnormals)
  const double s = bessel_k_scaled(x, nu);
  if (scaled) return s;
  if (x > 700.0) {  // e^-x in two halves: the result underflows gradually, as it should
    const double e = std::exp(-0.5 * x);
    return e * (e * s);
  }
  return std::exp(-x) * s;
}

EMBER_SPECIAL_HD inline double bessel_k0(double x) { return bessel_k(x, 0, false); }
EMBER_SPECIAL_HD inline double bessel_k1(double x) { return bessel_k(x, 1, false); }
EMBER_SPECIAL_HD inline double bessel_k0e(double x) { return bessel_k(x, 0, true); }
EMBER_SPECIAL_HD inline double bessel_k1e(double x) { return bessel_k(x, 1, true); }

// ---- Airy Ai ----------------------------------------------------------------------------------

EMBER_SPECIAL_HD inline double airy_ai(double x) {
  if (!(std::fabs(x) < inf_value())) return nan_value();  // NaN at +-inf, as torch
  if (x >= -10.5 && x <= 10.5) {  // the polynomial on [k - 1/2, k + 1/2], k the nearest integer
    const double x0 = std::nearbyint(x);
    return tables::poly_ai(0, static_cast<int>(x0) + 10, x - x0);
  }
  const double z = std::fabs(x), zeta = (2.0 / 3.0) * z * std::sqrt(z);
  // the expansions in t = 1/zeta (zeta > 22.68) with u_k = u_{k-1} (6k-5)(6k-3)(6k-1) /
  // ((2k-1) 216 k): p = sum (-1)^k u_k t^k for x > 0; for x < 0 p = sum (-1)^k u_2k t^2k,
  // q = sum (-1)^k u_2k+1 t^2k+1 (cut where the terms fall below 1e-18 at 22.68)
  const double t = 1.0 / zeta;
  double p, q = 0.0;
  if (x > 0) {
    p = tables::airy_asym(0, t);
  } else {
    p = tables::airy_asym_neg(0, t * t);
    q = t * tables::airy_asym_neg(1, t * t);
  }
  const double amp = kInvSqrtPi / std::sqrt(std::sqrt(z));
  if (x > 0) return 0.5 * amp * std::exp(-zeta) * p;
  // Ai(-z) = amp [cos(zeta - pi/4) p + sin(zeta - pi/4) q]
  const double s = std::sin(zeta), c = std::cos(zeta);
  return amp * kSqrt1_2 * (p * (c + s) + q * (s - c));
}

// sin(x) / x; its Taylor series for |x| < 0.5; 0 at +-inf.
EMBER_SPECIAL_HD inline double spherical_j0(double x) {
  const double ax = std::fabs(x);
  if (ax == inf_value()) return 0.0;
  if (ax < 0.5) {
    const double q = -x * x;
    double t = 1.0, s = 1.0;
    for (int k = 1; k < 10; ++k) {
      t *= q / ((2.0 * k) * (2.0 * k + 1.0));
      s += t;
    }
    return s;
  }
  return std::sin(x) / x;
}

// ---- orthogonal polynomials -------------------------------------------------------------------

// The type the polynomials (but the Hermite ones, whose float limit is torch's) are computed
// in: double for float and the 16-bit types, whose float cos(n acos x) and three-term
// recurrences lost a digit per decade of n (T_1000000 was 9% off, L_1000000 4%).
template <class A>
using poly_math_t = std::conditional_t<(sizeof(A) < sizeof(double)), double, A>;

// Recurrence steps run before giving up (NaN) on a value that neither overflows nor ends.
constexpr int64_t kMaxSteps = int64_t(1) << 24;

// The order n as torch takes it: truncated toward zero; NaN, +-inf and orders past int64 are -1.
template <class A>
EMBER_SPECIAL_HD int64_t poly_order(A n) {
  if (!(n > A(-9.2e18) && n < A(9.2e18))) return -1;
  return static_cast<int64_t>(n);
}

// Runs r_{k+1} = step(k, r_k, r_{k-1}) from (p, q) = (r_0, r_1) for k = 1 .. n-1; stops early at
// NaN (the value stays NaN from there) and gives NaN after kMaxSteps steps.
template <class A, class Step>
EMBER_SPECIAL_HD A poly_recur(int64_t n, A p, A q, const Step& step) {
  if (n > kMaxSteps) {
    for (int64_t k = 1; k < kMaxSteps && q == q; ++k) {
      const A r = step(k, q, p);
      p = q;
      q = r;
    }
    return q == q ? std::numeric_limits<A>::quiet_NaN() : q;
  }
  for (int64_t k = 1; k < n && q == q; ++k) {
    const A r = step(k, q, p);
    p = q;
    q = r;
  }
  return q;
}

// The Chebyshev recurrence y_{k+1} = 2 t y_k - y_{k-1} from y_0 = 1, y_1 = first.
template <class A>
EMBER_SPECIAL_HD A chebyshev_recur(A t, A first, int64_t n) {
  if (n == 0) return A(1);
  if (n == 1) return first;
  return poly_recur<A>(n, A(1), first, [t](int64_t, A q, A p) { return (t + t) * q - p; });
}

// kind 0..3: T, U, V, W at t (t = x, or 2x - 1 for the shifted ones); `trig` is the order above
// which the trigonometric form is used inside (-1, 1).
template <class A>
EMBER_SPECIAL_HD A chebyshev(A t, int64_t n, int kind, int64_t trig, bool shifted = false) {
  const A nn = A(n);
  if (n < 0) return A(0);
  const bool odd = n % 2 != 0;
  if (std::fabs(t) == A(1)) {
    const bool pos = t > A(0);
    switch (kind) {
      case 0:
        return (pos || !odd) ? A(1) : A(-1);
      case 1:
        return (pos || !odd) ? A(n + 1) : A(-(n + 1));
      case 2:
        return pos ? A(1) : (!odd ? A(2 * n + 1) : A(-(2 * n + 1)));
      default:
        return pos ? A(2 * n + 1) : (!odd ? A(1) : A(-1));
    }
  }
  if (n > trig && std::fabs(t) < A(1)) {
    const A th = std::acos(t);
    switch (kind) {
      case 0:
        return std::cos(nn * th);
      case 1: {
        const A s = std::sin(th);
        if (s != A(0)) return std::sin((nn + A(1)) * th) / s;
        return (nn + A(1)) * std::cos((nn + A(1)) * th) / t;
      }
      case 2: {
        if (std::sin(th / A(2)) != A(1)) return std::cos((nn + A(0.5)) * th) / std::cos(th / A(2));
        return !odd ? A(2 * n + 1) : A(-(2 * n + 1));
      }
      default: {
        if (std::cos(th / A(2)) != A(1)) return std::sin((nn + A(0.5)) * th) / std::sin(th / A(2));
        return (t > A(0) && !shifted) ? A(2 * n + 1)
                                      : (!odd ? A(1) : A(-1));  // torch's W* gives +-1
      }
    }
  }
  const A first = kind == 0 ? t : kind == 1 ? t + t : kind == 2 ? t + t - A(1) : t + t + A(1);
  return chebyshev_recur(t, first, n);
}

template <class A>
EMBER_SPECIAL_HD A chebyshev_t(A x, A n) {
  return chebyshev(x, poly_order(n), 0, 6);
}
template <class A>
EMBER_SPECIAL_HD A chebyshev_u(A x, A n) {
  return chebyshev(x, poly_order(n), 1, 8);
}
template <class A>
EMBER_SPECIAL_HD A chebyshev_v(A x, A n) {
  return chebyshev(x, poly_order(n), 2, 8);
}
template <class A>
EMBER_SPECIAL_HD A chebyshev_w(A x, A n) {
  return chebyshev(x, poly_order(n), 3, 8);
}

// The shifted polynomials T*_n(x) = T_n(2x - 1): x = 1 and x = 0 are the endpoints; the
// trigonometric form starts above order 6 (4 for W*).
template <class A>
EMBER_SPECIAL_HD A shifted_chebyshev(A x, A order, int kind) {
  const int64_t n = poly_order(order);
  if (n < 0) return A(0);
  const A t = x + x - A(1);
  if (x == A(1)) return chebyshev(A(1), n, kind, 0);
  if (x == A(0)) return chebyshev(A(-1), n, kind, 0);
  if (n > (kind == 3 ? 4 : 6) && std::fabs(t) < A(1)) return chebyshev(t, n, kind, 0, true);
  const A first = kind == 0 ? t : kind == 1 ? t + t : kind == 2 ? t + t - A(1) : t + t + A(1);
  return chebyshev_recur(t, first, n);
}

template <class A>
EMBER_SPECIAL_HD A shifted_chebyshev_t(A x, A n) {
  return shifted_chebyshev(x, n, 0);
}
template <class A>
EMBER_SPECIAL_HD A shifted_chebyshev_u(A x, A n) {
  return shifted_chebyshev(x, n, 1);
}
template <class A>
EMBER_SPECIAL_HD A shifted_chebyshev_v(A x, A n) {
  return shifted_chebyshev(x, n, 2);
}
template <class A>
EMBER_SPECIAL_HD A shifted_chebyshev_w(A x, A n) {
  return shifted_chebyshev(x, n, 3);
}

// Physicists' H_{k+1} = 2x H_k - 2k H_{k-1}; probabilists' He_{k+1} = x He_k - k He_{k-1}.
// Orders above 128 (float) / 512 (double) are NaN, as in torch.
template <class A>
EMBER_SPECIAL_HD int64_t hermite_limit() {
  return sizeof(A) <= 4 ? 128 : 512;
}

template <class A>
EMBER_SPECIAL_HD A hermite_h(A x, A order) {
  const int64_t n = poly_order(order);
  if (n < 0) return A(0);
  if (n == 0) return A(1);
  if (n == 1) return x + x;
  if (n > hermite_limit<A>()) return std::numeric_limits<A>::quiet_NaN();
  A p = A(1), q = x + x;
  for (int64_t k = 1; k < n; ++k) {
    const A r = (x + x) * q - A(2 * k) * p;
    p = q;
    q = r;
  }
  return q;
}

template <class A>
EMBER_SPECIAL_HD A hermite_he(A x, A order) {
  const int64_t n = poly_order(order);
  if (n < 0) return A(0);
  if (n == 0) return A(1);
  if (n == 1) return x;
  if (n > hermite_limit<A>()) return std::numeric_limits<A>::quiet_NaN();
  A p = A(1), q = x;
  for (int64_t k = 1; k < n; ++k) {
    const A r = x * q - A(k) * p;
    p = q;
    q = r;
  }
  return q;
}

// Laguerre (k+1) L_{k+1} = (2k + 1 - x) L_k - k L_{k-1}; 1 at x = 0.
template <class A>
EMBER_SPECIAL_HD A laguerre_l(A x, A order) {
  const int64_t n = poly_order(order);
  if (n < 0) return A(0);
  if (std::fabs(x) == A(0) || n == 0) return A(1);
  if (n == 1) return A(1) - x;
  return poly_recur<A>(n, A(1), A(1) - x, [x](int64_t k, A q, A p) {
    return ((A(k + k) + (A(1) - x)) * q - A(k) * p) / A(k + 1);
  });
}

// Legendre (k+1) P_{k+1} = (2k + 1) x P_k - k P_{k-1}; +-1 at x = +-1.
template <class A>
EMBER_SPECIAL_HD A legendre_p(A x, A order) {
  const int64_t n = poly_order(order);
  if (n < 0) return A(0);
  if (std::fabs(x) == A(1)) return (x > A(0) || n % 2 == 0) ? A(1) : A(-1);
  if (n == 0) return A(1);
  if (n == 1) return x;
  return poly_recur<A>(n, A(1), x, [x](int64_t k, A q, A p) {
    return (A(k + k + 1) * x * q - A(k) * p) / A(k + 1);
  });
}

}  // namespace special_math
}  // namespace ember
