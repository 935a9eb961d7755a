// Element access inside CUDA kernels. Tensors hold ember's storage types (core/dtype.h; the
// 16-bit floats are ember::Half / ember::BFloat16, raw bits); kernels compute in opmath_t (float
// for the 16-bit floats) and convert on load and store with the hardware's conversions. The
// host-side dtype switches are core/dispatch.h's EMBER_DISPATCH_* macros, used unchanged.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"
#include "core/half.h"

namespace ember {
namespace cuda {

// The compute type is the host's (core/dtype.h): float for the 16-bit floats.
template <class T>
using dev_opmath_t = opmath_t<T>;

// Storage -> compute type.
template <class T>
__device__ __forceinline__ dev_opmath_t<T> to_op(T v) {
  return v;
}
template <>
__device__ __forceinline__ float to_op<Half>(Half v) {
  return __half2float(__ushort_as_half(v.x));
}
template <>
__device__ __forceinline__ float to_op<BFloat16>(BFloat16 v) {
  return __bfloat162float(__ushort_as_bfloat16(v.x));
}

// Any arithmetic value -> storage type T (round to nearest even for the 16-bit floats; bool is
// "nonzero", as a C++ cast).
template <class T, class V>
__device__ __forceinline__ T from_op(V v) {
  if constexpr (std::is_same_v<T, Half>) {
    Half h;
    h.x = __half_as_ushort(__float2half_rn(static_cast<float>(v)));
    return h;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    BFloat16 h;
    h.x = __bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(v)));
    return h;
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
__device__ __forceinline__ dev_opmath_t<T> load(const char* p) {
  return to_op<T>(*reinterpret_cast<const T*>(p));
}
template <class T, class V>
__device__ __forceinline__ void store(char* p, V v) {
  *reinterpret_cast<T*>(p) = from_op<T>(v);
}

// Converting between any two dtypes: through the source's compute type (a 16-bit float goes
// through float; integers convert exactly as C++ does).
template <class D, class S>
__device__ __forceinline__ D convert(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else {
    return from_op<D>(to_op<S>(v));
  }
}

}  // namespace cuda
}  // namespace ember
