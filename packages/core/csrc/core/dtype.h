// Scalar types (dtypes), their sizes, names and PyTorch's promotion lattice.
#pragma once
#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/float8.h"
#include "core/half.h"

namespace ember {

enum class ScalarType : int8_t {
  Bool = 0,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,   // std::complex<float>
  Complex128,  // std::complex<double>
  // Storage types, as in PyTorch: made, copied, converted, compared, moved and saved; most
  // arithmetic rejects them (convert first). See is_storage_type.
  UInt16,
  UInt32,
  UInt64,
  Float8_e4m3fn,
  Float8_e5m2,
  NumTypes
};
constexpr int kNumScalarTypes = static_cast<int>(ScalarType::NumTypes);

inline int64_t itemsize(ScalarType t) {
  static constexpr int8_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16, 2, 4, 8, 1, 1};
  static_assert(sizeof(sizes) == kNumScalarTypes, "one size per dtype");
  return sizes[static_cast<int>(t)];
}
inline bool is_float8(ScalarType t) {
  return t == ScalarType::Float8_e4m3fn || t == ScalarType::Float8_e5m2;
}
inline bool is_floating(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 ||
         t == ScalarType::Float64 || is_float8(t);
}
// The dtypes PyTorch supports only partly (uint16/32/64 and the float8 types): ops that compute
// reject them with a DtypeNotImplementedError, as their dtype switches do not list them.
inline bool is_storage_type(ScalarType t) {
  return t == ScalarType::UInt16 || t == ScalarType::UInt32 || t == ScalarType::UInt64 ||
         is_float8(t);
}
inline bool is_complex(ScalarType t) {
  return t == ScalarType::Complex64 || t == ScalarType::Complex128;
}
inline bool is_integral(ScalarType t, bool include_bool) {
  if (is_floating(t) || is_complex(t)) return false;
  return include_bool || t != ScalarType::Bool;
}
// The complex dtype whose parts have dtype t (float64 -> complex128, other floats -> complex64),
// and the dtype of a complex dtype's parts; other dtypes map to themselves.
inline ScalarType to_complex(ScalarType t) {
  if (is_complex(t)) return t;
  return t == ScalarType::Float64 ? ScalarType::Complex128 : ScalarType::Complex64;
}
inline ScalarType to_real(ScalarType t) {
  if (t == ScalarType::Complex64) return ScalarType::Float32;
  if (t == ScalarType::Complex128) return ScalarType::Float64;
  return t;
}
inline bool is_signed(ScalarType t) {
  return t != ScalarType::Bool && t != ScalarType::UInt8 && t != ScalarType::UInt16 &&
         t != ScalarType::UInt32 && t != ScalarType::UInt64;
}

// Short names as in "ember.float32".
const char* dtype_name(ScalarType t);
// Promotion of two dtypes (torch.promote_types).
ScalarType promote_types(ScalarType a, ScalarType b);
// Whether a value of `from` may be written into `to` by an op with out= / in-place
// (torch.can_cast: no complex -> real, no float -> int, no int/float -> bool).
bool can_cast(ScalarType from, ScalarType to);

ScalarType default_dtype();
void set_default_dtype(ScalarType t);

inline std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << dtype_name(t); }

// C++ type <-> ScalarType.
template <class T>
struct TypeToScalar;
#define EMBER_TYPE_TO_SCALAR(cpp, st)                   \
  template <>                                           \
  struct TypeToScalar<cpp> {                            \
    static constexpr ScalarType value = ScalarType::st; \
  };
EMBER_TYPE_TO_SCALAR(bool, Bool)
EMBER_TYPE_TO_SCALAR(uint8_t, UInt8)
EMBER_TYPE_TO_SCALAR(int8_t, Int8)
EMBER_TYPE_TO_SCALAR(int16_t, Int16)
EMBER_TYPE_TO_SCALAR(int32_t, Int32)
EMBER_TYPE_TO_SCALAR(int64_t, Int64)
EMBER_TYPE_TO_SCALAR(Half, Float16)
EMBER_TYPE_TO_SCALAR(BFloat16, BFloat16)
EMBER_TYPE_TO_SCALAR(float, Float32)
EMBER_TYPE_TO_SCALAR(double, Float64)
EMBER_TYPE_TO_SCALAR(std::complex<float>, Complex64)
EMBER_TYPE_TO_SCALAR(std::complex<double>, Complex128)
EMBER_TYPE_TO_SCALAR(uint16_t, UInt16)
EMBER_TYPE_TO_SCALAR(uint32_t, UInt32)
EMBER_TYPE_TO_SCALAR(uint64_t, UInt64)
EMBER_TYPE_TO_SCALAR(Float8_e4m3fn, Float8_e4m3fn)
EMBER_TYPE_TO_SCALAR(Float8_e5m2, Float8_e5m2)
#undef EMBER_TYPE_TO_SCALAR

// The type arithmetic is done in: float for the 16-bit floats, the type itself otherwise.
template <class T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <>
struct OpMath<Float8_e4m3fn> {
  using type = float;
};
template <>
struct OpMath<Float8_e5m2> {
  using type = float;
};
template <class T>
struct is_complex_t : std::false_type {};
template <class T>
struct is_complex_t<std::complex<T>> : std::true_type {};
template <class T>
inline constexpr bool is_complex_v = is_complex_t<T>::value;

template <class T>
using opmath_t = typename OpMath<T>::type;

}  // namespace ember
