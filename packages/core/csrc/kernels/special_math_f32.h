// The float32 path of the Bessel functions of kernels/special_math.h (J0, J1, Y0, Y1, I0, I1,
// K0, K1 and e^x K0, e^x K1), for float32 tensors and the 16-bit types (whose op math is float):
// the same regions and formulas as the float64 functions, summed in float with float tables of
// lower degree (kernels/special_bessel_coeffs_f32.h, from tools/gen_bessel_coeffs.py --f32):
// - J0, J1, Y0, Y1: the power series (k <= 8) for x < 2, a degree-8 polynomial per unit interval
//   on [2, 25], Hankel's expansion (a_k, k <= 9) beyond, with the phase from sinf / cosf of x;
// - I0, I1: the power series (k <= 8) for x <= 2, e^-x I(x) as a degree-7 polynomial on 14
//   intervals up to 25, the large-argument expansion beyond;
// - K0, K1: the series in terms of I for x <= 1, e^x K(x) as a degree-7 polynomial on the
//   intervals of the float64 table up to 25, the large-argument expansion beyond.
// The results are within a few float32 ulps of the envelope that the tests use (|f|, or the
// amplitude sqrt(2 / (pi x)) of the oscillating ones). Arguments so small that 1/x leaves the
// float range (Y1, K1 below 1e-30) take the float64 functions, rounded, and the factor e^x
// (I past 80) or e^-x (K past 80) is applied in double, so that results near overflow or in
// the subnormal range are rounded once.
#pragma once
#include <cmath>
#include <limits>

#include "kernels/special_bessel_coeffs_f32.h"
#include "kernels/special_math.h"

namespace ember {
namespace special_math {
namespace f32 {

constexpr float kPiF = 3.14159265358979f;
constexpr float kTwoOverPiF = 0.636619772367581f;
constexpr float kHalfOverPiF = 0.159154943091895f;
constexpr float kInvSqrtPiF = 0.564189583547756f;
constexpr float kInvSqrt2PiF = 0.398942280401433f;
constexpr float kSqrtHalfPiF = 1.25331413731550f;
constexpr float kLn2MinusGammaF = 0.693147180559945f - 0.577215664901533f;

EMBER_SPECIAL_HD inline float nan_f() { return std::numeric_limits<float>::quiet_NaN(); }
EMBER_SPECIAL_HD inline float inf_f() { return std::numeric_limits<float>::infinity(); }

// ---- J0, J1, Y0, Y1 ---------------------------------------------------------------------------

// 0 < x < 2: as special_math::bessel_small (f = 0 .. 3: J0, J1, Y0, Y1).
EMBER_SPECIAL_HD inline float bessel_small(int f, float x) {
  const float s = -0.25f * x * x;
  if (f == 0) return tables::small_series(0, s);
  const float j1 = 0.5f * x * tables::small_series(2, s);
  if (f == 1) return j1;
  const float lg = std::log(x) - kLn2MinusGammaF;
  if (f == 2) return kTwoOverPiF * (lg * tables::small_series(0, s) - tables::small_series(1, s));
  return kTwoOverPiF * (lg * j1 - 1.0f / x) - kHalfOverPiF * x * tables::small_series(3, s);
}

// 2 <= x <= 25: the polynomial on [k, k + 1] (x = 25 on [24, 25]); x - (i + 2.5) is exact.
EMBER_SPECIAL_HD inline float bessel_jy_poly(int f, float x) {
  int i = static_cast<int>(x) - 2;
  if (i > 22) i = 22;
  return tables::poly_jy(f, i, x - (static_cast<float>(i) + 2.5f));
}

// x > 25: Hankel's expansion, as special_math::bessel_jy_large.
EMBER_SPECIAL_HD inline void bessel_jy_large(float x, int nu, float& j, float& y) {
  const float r = 1.0f / x, s = r * r;
  const float p = tables::hankel_series(nu, s), q = r * tables::hankel_series(2 + nu, s);
  const float sn = std::sin(x), c = std::cos(x), f = kInvSqrtPiF / std::sqrt(x);
  if (nu == 0) {
    j = f * (p * (c + sn) - q * (sn - c));
    y = f * (p * (sn - c) + q * (c + sn));
  } else {
    j = f * (p * (sn - c) + q * (sn + c));
    y = f * (q * (sn - c) - p * (sn + c));
  }
}

EMBER_SPECIAL_HD inline float bessel_j0(float x) {
  const float ax = std::fabs(x);
  if (!(ax < inf_f())) return nan_f();
  if (ax == 0.0f) return 1.0f;
  if (ax < 2.0f) return bessel_small(0, ax);
  if (ax <= 25.0f) return bessel_jy_poly(0, ax);
  float j, y;
  bessel_jy_large(ax, 0, j, y);
  return j;
}

EMBER_SPECIAL_HD inline float bessel_j1(float x) {
  const float ax = std::fabs(x);
  if (!(ax < inf_f())) return nan_f();
  if (ax == 0.0f) return x;  // keeps the sign of zero
  float j, y;
  if (ax < 2.0f) {
    j = bessel_small(1, ax);
  } else if (ax <= 25.0f) {
    j = bessel_jy_poly(1, ax);
  } else {
    bessel_jy_large(ax, 1, j, y);
  }
  return x < 0 ? -j : j;
}

EMBER_SPECIAL_HD inline float bessel_y0(float x) {
  if (!(x >= 0.0f) || x == inf_f()) return nan_f();
  if (x == 0.0f) return -inf_f();
  if (x < 2.0f) return bessel_small(2, x);
  if (x <= 25.0f) return bessel_jy_poly(2, x);
  float j, y;
  bessel_jy_large(x, 0, j, y);
  return y;
}

EMBER_SPECIAL_HD inline float bessel_y1(float x) {
  if (!(x >= 0.0f) || x == inf_f()) return nan_f();
  if (x == 0.0f) return -inf_f();
  if (x < 1e-30f) return static_cast<float>(special_math::bessel_y1(x));  // -2 / (pi x)
  if (x < 2.0f) return bessel_small(3, x);
  if (x <= 25.0f) return bessel_jy_poly(3, x);
  float j, y;
  bessel_jy_large(x, 1, j, y);
  return y;
}

// ---- I0, I1, K0, K1 ---------------------------------------------------------------------------

// The large-argument sums of I (alternating) and K, x > 25, as special_math::bessel_ik_asymptotic.
EMBER_SPECIAL_HD inline float bessel_ik_asymptotic(float x, int nu, bool alternate) {
  const float r = 1.0f / x, s = -r * r;
  const float even = tables::hankel_series(nu, s), odd = r * tables::hankel_series(2 + nu, s);
  return alternate ? even - odd : even + odd;
}

// I_nu(|x|), nu = 0, 1; it overflows only where the value does.
EMBER_SPECIAL_HD inline float bessel_i_abs(float ax, int nu) {
  if (ax <= 2.0f) {
    const float q = 0.25f * ax * ax;
    return nu == 0 ? tables::small_series(0, q) : 0.5f * ax * tables::small_series(2, q);
  }
  float scaled;       // e^-x I(x)
  if (ax <= 25.0f) {  // the intervals of tables::poly_ie: widths 1/2, 1, 2 from 2, 4, 8; 4, 5
    int i;
    float mid;
    if (ax < 4.0f) {
      const int j = static_cast<int>((ax - 2.0f) * 2.0f);
      i = j > 3 ? 3 : j;
      mid = 2.25f + 0.5f * static_cast<float>(i);
    } else if (ax < 8.0f) {
      const int j = static_cast<int>(ax - 4.0f);
      i = 4 + j;
      mid = 4.5f + static_cast<float>(j);
    } else if (ax < 16.0f) {
      const int j = static_cast<int>((ax - 8.0f) * 0.5f);
      i = 8 + j;
      mid = 9.0f + 2.0f * static_cast<float>(j);
    } else {
      i = ax < 20.0f ? 12 : 13;
      mid = ax < 20.0f ? 18.0f : 22.5f;
    }
    scaled = tables::poly_ie(nu, i, ax - mid);
  } else {
    scaled = bessel_ik_asymptotic(ax, nu, true) * (kInvSqrt2PiF / std::sqrt(ax));
  }
  if (ax > 80.0f)  // e^x in double: the product rounds once, to inf where the value overflows
    return static_cast<float>(std::exp(static_cast<double>(ax)) * static_cast<double>(scaled));
  return std::exp(ax) * scaled;
}

EMBER_SPECIAL_HD inline float bessel_i0(float x) {
  const float ax = std::fabs(x);
  if (!(ax < inf_f())) return nan_f();
  return bessel_i_abs(ax, 0);
}

EMBER_SPECIAL_HD inline float bessel_i1(float x) {
  const float ax = std::fabs(x);
  if (!(ax < inf_f())) return nan_f();
  if (ax == 0.0f) return x;
  const float v = bessel_i_abs(ax, 1);
  return x < 0 ? -v : v;
}

// e^x K_nu(x) for x > 0, as special_math::bessel_k_scaled.
EMBER_SPECIAL_HD inline float bessel_k_scaled(float x, int nu) {
  if (x <= 1.0f) {
    const float q = 0.25f * x * x, lg = std::log(x) - kLn2MinusGammaF;
    const float si = tables::small_series(2 * nu, q), sh = tables::small_series(2 * nu + 1, q);
    const float k = nu == 0 ? sh - lg * si : 1.0f / x + 0.5f * x * (lg * si - 0.5f * sh);
    return std::exp(x) * k;
  }
  if (x <= 25.0f) {  // the intervals of tables::poly_ke (those of the float64 table)
    int i;
    float mid;
    if (x < 2.0f) {
      const int j = static_cast<int>((x - 1.0f) * 4.0f);
      i = j > 3 ? 3 : j;
      mid = 1.125f + 0.25f * static_cast<float>(i);
    } else if (x < 4.0f) {
      const int j = static_cast<int>((x - 2.0f) * 2.0f);
      i = 4 + j;
      mid = 2.25f + 0.5f * static_cast<float>(j);
    } else if (x < 8.0f) {
      const int j = static_cast<int>(x - 4.0f);
      i = 8 + j;
      mid = 4.5f + static_cast<float>(j);
    } else if (x < 16.0f) {
      const int j = static_cast<int>((x - 8.0f) * 0.5f);
      i = 12 + j;
      mid = 9.0f + 2.0f * static_cast<float>(j);
    } else {
      i = x < 20.0f ? 16 : 17;
      mid = x < 20.0f ? 18.0f : 22.5f;
    }
    return tables::poly_ke(nu, i, x - mid);
  }
  return bessel_ik_asymptotic(x, nu, false) * (kSqrtHalfPiF / std::sqrt(x));
}

EMBER_SPECIAL_HD inline float bessel_k(float x, int nu, bool scaled) {
  if (!(x >= 0.0f)) return nan_f();
  if (x == 0.0f) return inf_f();
  if (x == inf_f()) return 0.0f;
  if (x < 1e-30f) return static_cast<float>(special_math::bessel_k(x, nu, scaled));
  const float s = bessel_k_scaled(x, nu);
  if (scaled) return s;
  if (x > 80.0f)  // e^-x in double: the result underflows gradually, rounded once
    return static_cast<float>(std::exp(-static_cast<double>(x)) * static_cast<double>(s));
  return std::exp(-x) * s;
}

EMBER_SPECIAL_HD inline float bessel_k0(float x) { return bessel_k(x, 0, false); }
EMBER_SPECIAL_HD inline float bessel_k1(float x) { return bessel_k(x, 1, false); }
EMBER_SPECIAL_HD inline float bessel_k0e(float x) { return bessel_k(x, 0, true); }
EMBER_SPECIAL_HD inline float bessel_k1e(float x) { return bessel_k(x, 1, true); }

}  // namespace f32
}  // namespace special_math
}  // namespace ember
