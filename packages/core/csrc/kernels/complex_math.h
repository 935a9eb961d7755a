// Elementwise functions of complex64 / complex128 that the C++ library has no overload for (or
// whose std:: form differs from PyTorch's at the special values), for the pointwise kernels
// (kernels/cpu/pointwise_ops.cpp). sin, cos, tan, their hyperbolic and inverse forms, exp, log
// and sqrt are std::'s (C99 Annex G: branch cuts, signed zeros, inf and NaN inputs).
//
// The formulas follow what torch computes for contiguous tensors on the CPU, so that special
// values agree: each part divided by ln 2 or ln 10 (log2, log10) or scaled by ln 2 (exp2), the
// product (a*a - b*b, a*b + b*a) without the C99 inf recovery (square), Smith's division
// (reciprocal, rsqrt, sigmoid, log1p), Kahan's log1p, and z / |z| divided componentwise (sgn).
#pragma once
#include <cmath>
#include <complex>

// Inlined into the kernels' loops: called once per element, they cost 5x more as calls.
#define EMBER_CMATH_INLINE inline __attribute__((always_inline))

namespace ember {
namespace complex_math {

template <class T>
EMBER_CMATH_INLINE std::complex<T> scale(std::complex<T> z, T s) {
  return {z.real() * s, z.imag() * s};
}

// a*a - b*b + i (a*b + b*a): the plain product (no inf recovery), as torch's vectorized kernel.
template <class T>
EMBER_CMATH_INLINE std::complex<T> square(std::complex<T> z) {
  const T a = z.real(), b = z.imag();
  const T aa = a * a, bb = b * b, ab = a * b, ba = b * a;
  return {aa - bb, ab + ba};
}

// x / y by Smith's scaled division: neither c^2 + d^2 nor its inverse overflows or underflows
// (torch's complex division). x / 0 is (a / 0, b / 0): 1 / 0 is inf + NaN i, as torch. Both
// orientations are computed and one is selected, without a branch that random data would
// mispredict half the time.
template <class T>
EMBER_CMATH_INLINE std::complex<T> divide(std::complex<T> x, std::complex<T> y) {
  const T a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  const bool by_c = std::abs(c) >= std::abs(d);
  const T p = by_c ? c : d, q = by_c ? d : c;  // |p| >= |q|
  const T rat = q / p, scl = T(1) / (p + q * rat);
  const T re = by_c ? (a + b * rat) * scl : (a * rat + b) * scl;
  const T im = by_c ? (b - a * rat) * scl : (b * rat - a) * scl;
  const bool zero = c == T(0) && d == T(0);
  return {zero ? a / std::abs(c) : re, zero ? b / std::abs(d) : im};
}

// The plain product (ac - bd) + (ad + bc) i, without C99's recovery of infinities.
template <class T>
EMBER_CMATH_INLINE std::complex<T> multiply(std::complex<T> x, std::complex<T> y) {
  const T a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  return {a * c - b * d, a * d + b * c};
}

template <class T>
EMBER_CMATH_INLINE std::complex<T> reciprocal(std::complex<T> z) {
  return divide(std::complex<T>(T(1), T(0)), z);
}

// log(z) / ln 2 and log(z) / ln 10, each part divided (not multiplied by the inverse) as torch.
template <class T>
EMBER_CMATH_INLINE std::complex<T> log2(std::complex<T> z) {
  const std::complex<T> l = std::log(z);
  const T ln2 = T(0.6931471805599453);
  return {l.real() / ln2, l.imag() / ln2};
}
template <class T>
EMBER_CMATH_INLINE std::complex<T> log10(std::complex<T> z) {
  const std::complex<T> l = std::log(z);
  const T ln10 = T(2.302585092994046);
  return {l.real() / ln10, l.imag() / ln10};
}

// 2^z = exp(z ln 2).
template <class T>
EMBER_CMATH_INLINE std::complex<T> exp2(std::complex<T> z) {
  return std::exp(scale(z, T(0.6931471805599453)));
}

// log(1 + z) by Kahan's correction: with u = 1 + z rounded, log(u) * z / (u - 1) cancels the
// rounding of u (z itself when u rounds to 1), as torch. For z with an infinite or NaN part,
// log(1 + z) directly: torch's NaN for log1p(x +- inf i) with a small nonzero x becomes the
// limit inf +- i pi/2 (torch's own value for x = 0); a NaN part gives NaN + NaN i.
template <class T>
EMBER_CMATH_INLINE std::complex<T> log1p(std::complex<T> z) {
  const T a = z.real(), b = z.imag();
  const std::complex<T> u(T(1) + a, b);
  if (a != a || b != b) return {a + b, a + b};  // a NaN part: NaN + NaN i, as torch
  if (!std::isfinite(a) || !std::isfinite(b)) return std::log(u);
  if (u.real() == T(1) && u.imag() == T(0)) return z;
  const std::complex<T> um1(u.real() - T(1), u.imag());
  if (um1 == z) return std::log(u);
  return multiply(std::log(u), divide(z, um1));
}

// exp(z) - 1 = (e^a cos b - 1) + i e^a sin b, the real part as expm1(a) cos b - 2 sin^2(b / 2)
// so that it keeps its digits near z = 0.
template <class T>
EMBER_CMATH_INLINE std::complex<T> expm1(std::complex<T> z) {
  const T a = z.real(), b = z.imag();
  const T h = std::sin(b / T(2));
  return {std::expm1(a) * std::cos(b) - T(2) * h * h, std::exp(a) * std::sin(b)};
}

template <class T>
EMBER_CMATH_INLINE std::complex<T> rsqrt(std::complex<T> z) {
  return reciprocal(std::sqrt(z));
}

// 1 / (1 + exp(-z)).
template <class T>
EMBER_CMATH_INLINE std::complex<T> sigmoid(std::complex<T> z) {
  return reciprocal(std::complex<T>(T(1), T(0)) + std::exp(-z));
}

// z / |z|, 0 at z == 0.
template <class T>
EMBER_CMATH_INLINE std::complex<T> sgn(std::complex<T> z) {
  const T m = std::hypot(z.real(), z.imag());
  if (m == T(0)) return {T(0), T(0)};
  return {z.real() / m, z.imag() / m};
}

}  // namespace complex_math
}  // namespace ember

#undef EMBER_CMATH_INLINE
