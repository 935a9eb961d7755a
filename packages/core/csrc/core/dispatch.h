// Switches from a runtime ScalarType to a C++ type: EMBER_DISPATCH_ALL(dtype, "op", [&]{ using
// scalar_t ... }). Each macro names the dtypes it covers and raises a clear error otherwise.
#pragma once
#include "core/dtype.h"

#define EMBER_DTYPE_CASE(st, cpp, ...) \
  case ::ember::ScalarType::st: {      \
    using scalar_t = cpp;              \
    return __VA_ARGS__();              \
  }

#define EMBER_DTYPE_ERROR(dtype, name, what)                                          \
  default:                                                                            \
    ::ember::detail::fail(::ember::ErrorKind::DtypeNotImplemented, name,              \
                          ": not implemented for dtype ", ::ember::dtype_name(dtype), \
                          " (supported: ", what, ")");

#define EMBER_CASES_FLOAT(...)                          \
  EMBER_DTYPE_CASE(Float32, float, __VA_ARGS__)         \
  EMBER_DTYPE_CASE(Float64, double, __VA_ARGS__)        \
  EMBER_DTYPE_CASE(Float16, ::ember::Half, __VA_ARGS__) \
  EMBER_DTYPE_CASE(BFloat16, ::ember::BFloat16, __VA_ARGS__)
#define EMBER_CASES_INT(...)                    \
  EMBER_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__) \
  EMBER_DTYPE_CASE(Int8, int8_t, __VA_ARGS__)   \
  EMBER_DTYPE_CASE(Int16, int16_t, __VA_ARGS__) \
  EMBER_DTYPE_CASE(Int32, int32_t, __VA_ARGS__) \
  EMBER_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)

#define EMBER_CASES_COMPLEX(...)                                \
  EMBER_DTYPE_CASE(Complex64, std::complex<float>, __VA_ARGS__) \
  EMBER_DTYPE_CASE(Complex128, std::complex<double>, __VA_ARGS__)

// The unsigned storage types, also listed by the few computing ops PyTorch runs on them (mul,
// sum, prod, sort, unique, bitwise and/or/xor, any/all, isnan, isclose).
#define EMBER_CASES_UINT(...)                     \
  EMBER_DTYPE_CASE(UInt16, uint16_t, __VA_ARGS__) \
  EMBER_DTYPE_CASE(UInt32, uint32_t, __VA_ARGS__) \
  EMBER_DTYPE_CASE(UInt64, uint64_t, __VA_ARGS__)

// The storage types (core/dtype.h: is_storage_type), listed only by the kernels that move,
// convert and compare values.
#define EMBER_CASES_STORAGE(...)                                       \
  EMBER_CASES_UINT(__VA_ARGS__)                                        \
  EMBER_DTYPE_CASE(Float8_e4m3fn, ::ember::Float8_e4m3fn, __VA_ARGS__) \
  EMBER_DTYPE_CASE(Float8_e5m2, ::ember::Float8_e5m2, __VA_ARGS__)

// The storage types are what ALL and ALL_AND_COMPLEX leave out; their errors say so.
#define EMBER_STORAGE_DTYPES "uint16, uint32, uint64 and the float8 types"

// "ALL" is every real dtype: an op that also takes complex says so with ..._AND_COMPLEX.
#define EMBER_DISPATCH_ALL(dtype, name, ...)                                       \
  [&] {                                                                            \
    switch (dtype) {                                                               \
      EMBER_CASES_FLOAT(__VA_ARGS__)                                               \
      EMBER_CASES_INT(__VA_ARGS__)                                                 \
      EMBER_DTYPE_CASE(Bool, bool, __VA_ARGS__)                                    \
      EMBER_DTYPE_ERROR(dtype, name, "every real dtype but " EMBER_STORAGE_DTYPES) \
    }                                                                              \
  }()
#define EMBER_DISPATCH_ALL_AND_COMPLEX(dtype, name, ...)                      \
  [&] {                                                                       \
    switch (dtype) {                                                          \
      EMBER_CASES_FLOAT(__VA_ARGS__)                                          \
      EMBER_CASES_INT(__VA_ARGS__)                                            \
      EMBER_DTYPE_CASE(Bool, bool, __VA_ARGS__)                               \
      EMBER_CASES_COMPLEX(__VA_ARGS__)                                        \
      EMBER_DTYPE_ERROR(dtype, name, "every dtype but " EMBER_STORAGE_DTYPES) \
    }                                                                         \
  }()
// ALL and uint16/32/64: the reductions and sorts PyTorch also runs on the unsigned types.
#define EMBER_DISPATCH_ALL_AND_UINT(dtype, name, ...)                         \
  [&] {                                                                       \
    switch (dtype) {                                                          \
      EMBER_CASES_FLOAT(__VA_ARGS__)                                          \
      EMBER_CASES_INT(__VA_ARGS__)                                            \
      EMBER_DTYPE_CASE(Bool, bool, __VA_ARGS__)                               \
      EMBER_CASES_UINT(__VA_ARGS__)                                           \
      EMBER_DTYPE_ERROR(dtype, name, "every real dtype but the float8 types") \
    }                                                                         \
  }()
// Every dtype, the storage types included: copies, fills, item() and comparisons.
#define EMBER_DISPATCH_EVERY(dtype, name, ...)  \
  [&] {                                         \
    switch (dtype) {                            \
      EMBER_CASES_FLOAT(__VA_ARGS__)            \
      EMBER_CASES_INT(__VA_ARGS__)              \
      EMBER_DTYPE_CASE(Bool, bool, __VA_ARGS__) \
      EMBER_CASES_COMPLEX(__VA_ARGS__)          \
      EMBER_CASES_STORAGE(__VA_ARGS__)          \
      EMBER_DTYPE_ERROR(dtype, name, "all")     \
    }                                           \
  }()
#define EMBER_DISPATCH_COMPLEX(dtype, name, ...)                 \
  [&] {                                                          \
    switch (dtype) {                                             \
      EMBER_CASES_COMPLEX(__VA_ARGS__)                           \
      EMBER_DTYPE_ERROR(dtype, name, "complex64 and complex128") \
    }                                                            \
  }()
#define EMBER_DISPATCH_NUMERIC(dtype, name, ...)                                              \
  [&] {                                                                                       \
    switch (dtype) {                                                                          \
      EMBER_CASES_FLOAT(__VA_ARGS__)                                                          \
      EMBER_CASES_INT(__VA_ARGS__)                                                            \
      EMBER_DTYPE_ERROR(dtype, name, "integer and floating dtypes but " EMBER_STORAGE_DTYPES) \
    }                                                                                         \
  }()
#define EMBER_DISPATCH_FLOAT(dtype, name, ...)          \
  [&] {                                                 \
    switch (dtype) {                                    \
      EMBER_CASES_FLOAT(__VA_ARGS__)                    \
      EMBER_DTYPE_ERROR(dtype, name, "floating dtypes") \
    }                                                   \
  }()
#define EMBER_DISPATCH_INTEGRAL(dtype, name, ...)                                             \
  [&] {                                                                                       \
    switch (dtype) {                                                                          \
      EMBER_CASES_INT(__VA_ARGS__)                                                            \
      EMBER_DTYPE_CASE(Bool, bool, __VA_ARGS__)                                               \
      EMBER_DTYPE_ERROR(dtype, name, "integer and bool dtypes but uint16, uint32 and uint64") \
    }                                                                                         \
  }()
#define EMBER_DISPATCH_BLAS(dtype, name, ...)               \
  [&] {                                                     \
    switch (dtype) {                                        \
      EMBER_DTYPE_CASE(Float32, float, __VA_ARGS__)         \
      EMBER_DTYPE_CASE(Float64, double, __VA_ARGS__)        \
      EMBER_DTYPE_ERROR(dtype, name, "float32 and float64") \
    }                                                       \
  }()
