// log |Gamma(x)|, digamma and trigamma elementwise, for ember.special's autograd Functions (the
// native op _gamma_values), written once for the CPU kernel (kernels/cpu/pointwise_ops.cpp) and
// the CUDA one (cuda/pointwise_functors.cuh). float32 is computed in float32 and float64 in
// float64 (the half types in float32), with PyTorch's algorithms, so that the values agree with
// torch's to the last bit where the libm agrees:
// - lgamma: the C library's lgamma (exactly 0 at 1 and 2).
// - digamma: reflection through the fractional part of a negative x (tan(pi r), r exact), the
//   recurrence psi(x) = psi(x + 1) - 1 / x up to x >= 10, psi(10) itself, then the asymptotic
//   series in 1 / x^2 (Bernoulli numbers); +-inf at -+0, NaN at the negative integers.
// - trigamma: the reflection pi^2 / sin^2(pi x) below 1/2 (with pi x rounded, so a negative
//   integer gives a huge finite value, as torch), six recurrence steps, then the asymptotic
//   series.
#pragma once
#include <cmath>
#include <limits>

#ifdef __CUDACC__
#define EMBER_GAMMA_HD __host__ __device__
#else
#define EMBER_GAMMA_HD
#endif

namespace ember {
namespace gamma_math {

constexpr double kPi = 3.14159265358979323846;

template <class T>
EMBER_GAMMA_HD inline T lgamma(T x) {
  return std::lgamma(x);
}

template <class T>
EMBER_GAMMA_HD inline T digamma(T x) {
  if (x == T(0)) return std::copysign(std::numeric_limits<T>::infinity(), -x);
  T reflection = 0;
  const bool negative = x < T(0);
  if (negative) {
    if (x == std::trunc(x)) return std::numeric_limits<T>::quiet_NaN();
    // pi / tan(pi r) from the fractional part r (exact): pi x itself rounds for |x| > 1
    const double r = static_cast<double>(x) - std::trunc(static_cast<double>(x));
    reflection = static_cast<T>(kPi / std::tan(kPi * r));
    x = T(1) - x;
  }
  T acc = 0;
  while (x < T(10)) {
    acc -= T(1) / x;
    x += T(1);
  }
  T value;
  if (x == T(10)) {
    value = acc + T(2.25175258906672110764);  // psi(10)
  } else {
    // B_2k / (2k) for k = 7 .. 1, evaluated as a polynomial in z = 1 / x^2
    constexpr double kCoef[7] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                                 7.57575757575757575758E-3, -4.16666666666666666667E-3,
                                 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                                 8.33333333333333333333E-2};
    T tail = 0;
    if (x < T(1.0e17)) {
      const T z = T(1) / (x * x);
      T poly = 0;
      for (double c : kCoef) poly = poly * z + static_cast<T>(c);
      tail = z * poly;
    }
    value = acc + std::log(x) - (T(0.5) / x) - tail;
  }
  return negative ? value - reflection : value;
}

template <class T>
EMBER_GAMMA_HD inline T trigamma(T x) {
  T sign = 1;
  T acc = 0;
  const T pi = static_cast<T>(kPi);
  if (x < T(0.5)) {
    sign = -1;
    const T s = std::sin(pi * x);
    acc -= (pi * pi) / (s * s);
    x = T(1) - x;
  }
  for (int i = 0; i < 6; ++i) {
    acc += T(1) / (x * x);
    x += T(1);
  }
  const T ixx = T(1) / (x * x);
  acc += (T(1) + T(1) / (T(2) * x) +
          ixx * (T(1) / T(6) - ixx * (T(1) / T(30) - ixx * (T(1) / T(42))))) /
         x;
  return sign * acc;
}

// order -1: lgamma, 0: digamma, 1: trigamma.
template <class T>
EMBER_GAMMA_HD inline T of_order(T x, int order) {
  return order < 0 ? lgamma(x) : order == 0 ? digamma(x) : trigamma(x);
}

}  // namespace gamma_math
}  // namespace ember
