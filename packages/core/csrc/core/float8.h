// The 8-bit floating types of PyTorch (float8_e4m3fn, float8_e5m2), stored as raw bits. Like
// PyTorch, ember keeps them as storage types: tensors of them are made, copied, converted, viewed
// and saved, and arithmetic happens after converting to a wider type.
//   e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, NaN is S.1111.111,
//           the largest value 448. Conversion saturates (inf and values past 448 become +-448).
//   e5m2:   sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: infinities and NaNs,
//           the largest finite value 57344; values that round past it become inf.
// Conversion from float rounds to nearest, ties to even, directly from the float (no double
// rounding through float16).
#pragma once
#include <cmath>
#include <cstdint>

namespace ember {
namespace float8_detail {

// |a| (finite, not NaN, at most the largest finite value) as the magnitude bits of a float with
// `M` mantissa bits and exponent bias `B`; may round up into the exponent field past the
// largest finite value (the caller decides what that means).
template <int M, int B>
inline uint8_t round_magnitude(float a) {
  const float min_normal = std::ldexp(1.0f, 1 - B);
  if (a < min_normal) {  // subnormal: a multiple of 2^(1-B-M); rounding up to 2^M is min_normal
    return static_cast<uint8_t>(std::nearbyint(std::ldexp(a, B - 1 + M)));
  }
  int e = 0;
  const float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  const float q = std::nearbyint(std::ldexp(frac * 2.0f - 1.0f, M));      // exact scaling
  return static_cast<uint8_t>(((e - 1 + B) << M) + static_cast<int>(q));  // a carry bumps e
}

template <int M, int B>
inline float magnitude_value(uint8_t bits) {
  const int e = bits >> M, m = bits & ((1 << M) - 1);
  if (e == 0) return std::ldexp(static_cast<float>(m), 1 - B - M);
  return std::ldexp(1.0f + std::ldexp(static_cast<float>(m), -M), e - B);
}

}  // namespace float8_detail

struct Float8_e4m3fn {
  uint8_t x = 0;
  Float8_e4m3fn() = default;
  Float8_e4m3fn(float f) : x(from_float(f)) {}  // NOLINT: implicit like a builtin float type
  operator float() const { return to_float(x); }

  static uint8_t from_float(float f) {
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    if (std::isnan(f)) return sign | 0x7f;
    const float a = std::fmin(std::fabs(f), 448.0f);  // saturating, as PyTorch's conversion
    return sign | float8_detail::round_magnitude<3, 7>(a);
  }
  static float to_float(uint8_t b) {
    const uint8_t mag = b & 0x7f;
    if (mag == 0x7f) return std::nanf("");
    const float v = float8_detail::magnitude_value<3, 7>(mag);
    return (b & 0x80) ? -v : v;
  }
};

struct Float8_e5m2 {
  uint8_t x = 0;
  Float8_e5m2() = default;
  Float8_e5m2(float f) : x(from_float(f)) {}  // NOLINT: implicit like a builtin float type
  operator float() const { return to_float(x); }

  static uint8_t from_float(float f) {
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    if (std::isnan(f)) return sign | 0x7f;
    const float a = std::fabs(f);
    if (a >= 61440.0f) return sign | 0x7c;  // at or past the midpoint to 2^16: inf
    return sign | float8_detail::round_magnitude<2, 15>(a);
  }
  static float to_float(uint8_t b) {
    const uint8_t mag = b & 0x7f;
    float v;
    if (mag >= 0x7c)
      v = mag == 0x7c ? HUGE_VALF : std::nanf("");
    else
      v = float8_detail::magnitude_value<2, 15>(mag);
    return (b & 0x80) ? -v : v;
  }
};

}  // namespace ember
