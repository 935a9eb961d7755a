#include "core/dtype.h"

#include <atomic>

namespace ember {

const char* dtype_name(ScalarType t) {
  static const char* names[] = {"bool",          "uint8",      "int8",     "int16",   "int32",
                                "int64",         "float16",    "bfloat16", "float32", "float64",
                                "complex64",     "complex128", "uint16",   "uint32",  "uint64",
                                "float8_e4m3fn", "float8_e5m2"};
  static_assert(sizeof(names) / sizeof(names[0]) == kNumScalarTypes, "one name per dtype");
  int i = static_cast<int>(t);
  return (i >= 0 && i < kNumScalarTypes) ? names[i] : "undefined";
}

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b) return a;
  using S = ScalarType;
  // PyTorch promotes the storage types with nothing but themselves, except a wide unsigned
  // integer with a (non-8-bit) float, which gives the float.
  if (is_float8(a) || is_float8(b))
    EMBER_FAIL(Runtime, "Promotion for Float8 Types is not supported, attempted to promote ",
               dtype_name(a), " and ", dtype_name(b));
  if (is_storage_type(a) || is_storage_type(b)) {
    const ScalarType other = is_storage_type(a) ? b : a;
    if (is_floating(other) || is_complex(other)) return other;
    EMBER_FAIL(Runtime,
               "Promotion for uint16, uint32, uint64 types is not supported, attempted to "
               "promote ",
               dtype_name(a), " and ", dtype_name(b));
  }
  if (a == S::Bool) return b;
  if (b == S::Bool) return a;
  // complex with anything: complex, as wide as the wider of the two parts (float64 and
  // complex64 make complex128).
  if (is_complex(a) || is_complex(b)) {
    const bool wide =
        a == S::Complex128 || b == S::Complex128 || a == S::Float64 || b == S::Float64;
    return wide ? S::Complex128 : S::Complex64;
  }
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    // float16 with bfloat16 has no common 16-bit type.
    if ((a == S::Float16 && b == S::BFloat16) || (a == S::BFloat16 && b == S::Float16))
      return S::Float32;
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  // Both integral.
  if (a == S::UInt8 || b == S::UInt8) {
    ScalarType other = a == S::UInt8 ? b : a;
    return other == S::Int8 ? S::Int16 : other;  // uint8 fits in any wider signed type
  }
  return itemsize(a) >= itemsize(b) ? a : b;
}

bool can_cast(ScalarType from, ScalarType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && !is_floating(to) && !is_complex(to)) return false;
  if (from != ScalarType::Bool && to == ScalarType::Bool) return false;
  return true;
}

static std::atomic<ScalarType> g_default_dtype{ScalarType::Float32};
ScalarType default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }
void set_default_dtype(ScalarType t) {
  EMBER_CHECK_KIND(t == ScalarType::Float32 || t == ScalarType::Float64 ||
                       t == ScalarType::Float16 || t == ScalarType::BFloat16,
                   Type, "set_default_dtype: only floating dtypes are supported, got ",
                   dtype_name(t));
  g_default_dtype.store(t);
}

}  // namespace ember
