// Elementwise functions of complex64 / complex128 that the C++ library has no overload for (or
// whose std:: form differs from PyTorch's at the special values), for the pointwise kernels
// (kernels/cpu/pointwise_ops.cpp). sin, cos, tan, their hyperbolic and inverse forms, exp, log
// and sqrt are std::'s (C99 Annex G: branch cuts, signed zeros, inf and NaN inputs).
//
// The formulas follow what torch computes for contiguous tensors on the CPU, so that special
// values agree: componentwise scaling by a real constant (log2, log10, exp2), the product
// (a*a - b*b, a*b + b*a) without the C99 inf recovery (square), 1 / z by Smith's division
// (reciprocal, rsqrt, sigmoid), and z / |z| divided componentwise (sgn).
#pragma once
#include <cmath>
#include <complex>

namespace ember {
namespace complex_math {

template <class T>
std::complex<T> scale(std::complex<T> z, T s) {
  return {z.real() * s, z.imag() * s};
}

// a*a - b*b + i (a*b + b*a): the plain product (no inf recovery), as torch's vectorized kernel.
template <class T>
std::complex<T> square(std::complex<T> z) {
  const T a = z.real(), b = z.imag();
  const T aa = a * a, bb = b * b, ab = a * b, ba = b * a;
  return {aa - bb, ab + ba};
}

// 1 / z by Smith's scaled division of (1 + 0i) by (c + di): neither c^2 + d^2 nor its inverse
// overflows or underflows. 1 / 0 is inf + NaN i (1 / 0 and 0 / 0), as torch.
template <class T>
std::complex<T> reciprocal(std::complex<T> z) {
  const T one = T(1), zero = T(0);
  const T c = z.real(), d = z.imag();
  if (std::abs(c) >= std::abs(d)) {
    if (c == zero && d == zero) return {one / std::abs(c), zero / std::abs(d)};
    const T rat = d / c, scl = one / (c + d * rat);
    return {(one + zero * rat) * scl, (zero - one * rat) * scl};
  }
  const T rat = c / d, scl = one / (d + c * rat);
  return {(one * rat + zero) * scl, (zero * rat - one) * scl};
}

template <class T>
std::complex<T> log2(std::complex<T> z) {
  return scale(std::log(z), T(1.4426950408889634));  // 1 / ln 2
}
template <class T>
std::complex<T> log10(std::complex<T> z) {
  return scale(std::log(z), T(0.43429448190325176));  // 1 / ln 10
}

// 2^z = exp(z ln 2).
template <class T>
std::complex<T> exp2(std::complex<T> z) {
  return std::exp(scale(z, T(0.6931471805599453)));
}

// log(1 + z): the argument of 1 + z, and its modulus through log1p(2a + a^2 + b^2) / 2 near
// z = 0 (where log|1 + z| would lose the low digits of a).
template <class T>
std::complex<T> log1p(std::complex<T> z) {
  const T a = z.real(), b = z.imag();
  const T arg = std::atan2(b, a + T(1));
  if (std::hypot(a, b) < T(0.5)) {
    const T r = a * (T(2) + a) + b * b;
    if (r == T(0)) return {a, arg};  // |z| so small that r underflows: log1p(z) ~ z
    return {T(0.5) * std::log1p(r), arg};
  }
  return {std::log(std::hypot(a + T(1), b)), arg};
}

// exp(z) - 1 = (e^a cos b - 1) + i e^a sin b, the real part as expm1(a) cos b - 2 sin^2(b / 2)
// so that it keeps its digits near z = 0.
template <class T>
std::complex<T> expm1(std::complex<T> z) {
  const T a = z.real(), b = z.imag();
  const T h = std::sin(b / T(2));
  return {std::expm1(a) * std::cos(b) - T(2) * h * h, std::exp(a) * std::sin(b)};
}

template <class T>
std::complex<T> rsqrt(std::complex<T> z) {
  return reciprocal(std::sqrt(z));
}

// 1 / (1 + exp(-z)).
template <class T>
std::complex<T> sigmoid(std::complex<T> z) {
  return reciprocal(std::complex<T>(T(1), T(0)) + std::exp(-z));
}

// z / |z|, 0 at z == 0.
template <class T>
std::complex<T> sgn(std::complex<T> z) {
  const T m = std::hypot(z.real(), z.imag());
  if (m == T(0)) return {T(0), T(0)};
  return {z.real() / m, z.imag() / m};
}

}  // namespace complex_math
}  // namespace ember
