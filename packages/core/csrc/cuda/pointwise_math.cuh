// Device math for the pointwise functors (pointwise_ops.cu, nn_activation.cu): each function of
// float and double (the compute types: the 16-bit floats compute in float), called as dm::exp(x)
// so a kernel file's own ops (ember::cuda::...::exp) never hide them; and the integer helpers
// whose semantics the CPU kernels define (division rounding, shifts, integer powers).
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

namespace ember {
namespace cuda {
namespace dm {

#define EMBER_DM1(NAME, F32, F64)                                     \
  __device__ __forceinline__ float NAME(float x) { return ::F32(x); } \
  __device__ __forceinline__ double NAME(double x) { return ::F64(x); }
EMBER_DM1(exp, expf, exp)
EMBER_DM1(exp2, exp2f, exp2)
EMBER_DM1(expm1, expm1f, expm1)
EMBER_DM1(log, logf, log)
EMBER_DM1(log2, log2f, log2)
EMBER_DM1(log10, log10f, log10)
EMBER_DM1(log1p, log1pf, log1p)
EMBER_DM1(sqrt, sqrtf, sqrt)
EMBER_DM1(sin, sinf, sin)
EMBER_DM1(cos, cosf, cos)
EMBER_DM1(tan, tanf, tan)
EMBER_DM1(asin, asinf, asin)
EMBER_DM1(acos, acosf, acos)
EMBER_DM1(atan, atanf, atan)
EMBER_DM1(sinh, sinhf, sinh)
EMBER_DM1(cosh, coshf, cosh)
EMBER_DM1(tanh, tanhf, tanh)
EMBER_DM1(asinh, asinhf, asinh)
EMBER_DM1(acosh, acoshf, acosh)
EMBER_DM1(atanh, atanhf, atanh)
EMBER_DM1(erf, erff, erf)
EMBER_DM1(erfc, erfcf, erfc)
EMBER_DM1(erfinv, erfinvf, erfinv)
EMBER_DM1(rint, rintf, rint)  // round half to even
EMBER_DM1(fabs, fabsf, fabs)
#undef EMBER_DM1

#define EMBER_DM2(NAME, F32, F64)                                                 \
  __device__ __forceinline__ float NAME(float x, float y) { return ::F32(x, y); } \
  __device__ __forceinline__ double NAME(double x, double y) { return ::F64(x, y); }
EMBER_DM2(fmod, fmodf, fmod)
EMBER_DM2(pow, powf, pow)
EMBER_DM2(atan2, atan2f, atan2)
EMBER_DM2(copysign, copysignf, copysign)
#undef EMBER_DM2

// floor / ceil / trunc of any numeric type (integers are their own).
template <class A>
__device__ __forceinline__ A floor(A x) {
  if constexpr (std::is_integral_v<A>) {
    return x;
  } else if constexpr (std::is_same_v<A, float>) {
    return ::floorf(x);
  } else {
    return ::floor(x);
  }
}
template <class A>
__device__ __forceinline__ A ceil(A x) {
  if constexpr (std::is_integral_v<A>) {
    return x;
  } else if constexpr (std::is_same_v<A, float>) {
    return ::ceilf(x);
  } else {
    return ::ceil(x);
  }
}
template <class A>
__device__ __forceinline__ A trunc(A x) {
  if constexpr (std::is_integral_v<A>) {
    return x;
  } else if constexpr (std::is_same_v<A, float>) {
    return ::truncf(x);
  } else {
    return ::trunc(x);
  }
}

template <class A>
__device__ __forceinline__ A inf() {
  return std::numeric_limits<A>::infinity();
}
// x < 0, written so unsigned types and bool need no (always false) comparison.
template <class A>
__device__ __forceinline__ bool is_neg(A x) {
  if constexpr (std::is_signed_v<A>) {
    return x < A(0);
  } else {
    return false;
  }
}
template <class A>
__device__ __forceinline__ bool is_nan(A x) {
  if constexpr (std::is_integral_v<A>) {
    return false;
  } else {
    return x != x;
  }
}
template <class A>
__device__ __forceinline__ bool is_inf(A x) {
  if constexpr (std::is_integral_v<A>) {
    return false;
  } else {
    return x == inf<A>() || x == -inf<A>();
  }
}

template <class A>
__device__ __forceinline__ A bit_not(A x) {
  if constexpr (std::is_same_v<A, bool>) {
    return !x;
  } else {
    return static_cast<A>(~x);
  }
}
// Shifts by a negative amount or past the width give 0 (or -1 for negative x shifted right).
template <class A>
__device__ __forceinline__ A shift_left(A x, A y) {
  if constexpr (std::is_same_v<A, bool>) {
    return y ? false : x;
  } else {
    if (is_neg(y) || y >= A(sizeof(A) * 8)) return A(0);
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(x) << y);
  }
}
template <class A>
__device__ __forceinline__ A shift_right(A x, A y) {
  if constexpr (std::is_same_v<A, bool>) {
    return y ? false : x;
  } else {
    if (is_neg(y) || y >= A(sizeof(A) * 8)) return A(is_neg(x) ? -1 : 0);
    return static_cast<A>(x >> y);
  }
}

// x / -1 and x % -1 are computed without dividing (INT_MIN / -1 overflows): the quotient wraps
// to INT_MIN and the remainder is 0, as on the CPU.
template <class A>
__device__ __forceinline__ bool is_minus_one(A y) {
  if constexpr (std::is_signed_v<A>) {
    return y == A(-1);
  } else {
    return false;
  }
}
template <class A>
__device__ __forceinline__ A wrapping_neg(A x) {
  return static_cast<A>(A(0) - static_cast<std::make_unsigned_t<A>>(x));
}

// Python's floor division (the CPU kernel's algorithm; an integer zero divisor gives 0 here,
// see pointwise_ops.cu).
template <class A>
__device__ __forceinline__ A floor_div(A x, A y) {
  if constexpr (std::is_integral_v<A>) {
    if (y == A(0)) return A(0);
    if (is_minus_one(y)) return wrapping_neg(x);
    A q = static_cast<A>(x / y);
    if ((x % y != 0) && (is_neg(x) != is_neg(y))) --q;
    return q;
  } else {
    if (y == A(0)) return x / y;
    const A mod = fmod(x, y);
    A div = (x - mod) / y;
    if (mod != A(0) && (y < A(0)) != (mod < A(0))) div -= A(1);
    if (div == A(0)) return copysign(A(0), x / y);
    A q = floor(div);
    if (div - q > A(0.5)) q += A(1);
    return q;
  }
}

template <class A>
__device__ __forceinline__ A int_pow(A base, A exp) {
  if constexpr (std::is_signed_v<A>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  A result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<A>(result * base);
    exp = static_cast<A>(exp >> 1);
    base = static_cast<A>(base * base);
  }
  return result;
}

}  // namespace dm
}  // namespace cuda
}  // namespace ember
