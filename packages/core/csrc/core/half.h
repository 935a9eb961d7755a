// 16-bit floating types stored as raw bits; arithmetic happens in float.
#pragma once
#include <cstdint>
#include <cstring>

namespace ember {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT: implicit like a builtin float type
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      x = 0x7fc0;  // NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
      x = static_cast<uint16_t>(u >> 16);
    }
  }
  operator float() const { return bits_float(static_cast<uint32_t>(x) << 16); }
};

struct Half {
  uint16_t x = 0;
  Half() = default;
  Half(float f) { x = from_float(f); }  // NOLINT
  operator float() const { return to_float(x); }

  static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u)
      return static_cast<uint16_t>(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (a < 0x38800000u) {                                               // subnormal half (or zero)
      // Let the FPU round: add a magic number that aligns the mantissa.
      float r = bits_float(a) + 0.5f;
      return static_cast<uint16_t>(sign | (float_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (a >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      float f = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
      return sign ? -f : f;
    }
    return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

}  // namespace ember
