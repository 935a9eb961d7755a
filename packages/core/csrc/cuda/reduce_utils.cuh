// Helpers shared by the CUDA reductions, scans and sorts (reduce_ops.cu, sort_ops.cu): strided
// index arithmetic over up to kMaxDims dims, element loads that read bool bytes as 0/1, kernels
// picked by element size, one
// dtype-converting strided copy (used to make a permuted contiguous copy, to cast, and to write
// row-ordered results back into an output's layout), and scratch memory from ember's allocator.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/tensor.h"
#include "cuda/cuda_context.h"
#include "cuda/device_types.cuh"

namespace ember {
namespace cuda {
namespace red {

constexpr int kMaxDims = 16;

// Sizes and strides (in elements) of a strided walk; flat indices are row-major over `size`.
struct Dims {
  int n = 0;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
};

inline Dims make_dims(const DimVector& sizes, const DimVector& strides, const char* op) {
  EMBER_CHECK(static_cast<int>(sizes.size()) <= kMaxDims, op, ": the CUDA kernel supports at most ",
              kMaxDims, " dims (got ", sizes.size(), ")");
  Dims d;
  d.n = static_cast<int>(sizes.size());
  for (int i = 0; i < d.n; ++i) {
    d.size[i] = sizes[i];
    d.stride[i] = strides[i];
  }
  for (int i = d.n; i < kMaxDims; ++i) d.size[i] = d.stride[i] = 0;
  return d;
}

__device__ __forceinline__ int64_t offset_of(const Dims& d, int64_t flat) {
  if (d.n == 0) return 0;
  if (d.n == 1) return flat * d.stride[0];
  int64_t off = 0;
  for (int i = d.n - 1; i >= 0; --i) {
    off += (flat % d.size[i]) * d.stride[i];
    flat /= d.size[i];
  }
  return off;
}

// Element load in the compute type; bool bytes read as 0/1 (any nonzero byte is true).
template <class T>
__device__ __forceinline__ dev_opmath_t<T> ld(const T* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return *reinterpret_cast<const uint8_t*>(p) != 0;
  } else {
    return to_op<T>(*p);
  }
}

template <class V>
__device__ __forceinline__ bool isnan_v(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;
  } else {
    return false;
  }
}

template <class V>
DimVector permuted(const V& v, const DimVector& perm) {
  DimVector r;
  for (int64_t p : perm) r.push_back(v[p]);
  return r;
}

// Calls f(U{}) with U the unsigned type of `itemsize` bytes (1, 2, 4, else 8): kernels that only
// move elements are instantiated once per element size, not per dtype.
template <class F>
void dispatch_by_size(int64_t itemsize, F&& f) {
  switch (itemsize) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
      break;
  }
}

// dst[i] = convert(src[i]) for every multi-index i of `sizes` (strides in elements, dtypes any).
void strided_copy(char* dst, ScalarType dt, const DimVector& dst_strides, const char* src,
                  ScalarType st, const DimVector& src_strides, const DimVector& sizes,
                  const char* op);

// A fresh contiguous tensor of dtype `dt` holding `self` with its dims in the order `perm`
// (empty perm: the identity). Returns `self` itself when nothing would change.
Tensor contiguous_as(const Tensor& self, ScalarType dt, const DimVector& perm, const char* op);

// Writes the contiguous tensor `src` (whose shape is `dst`'s shape permuted by `perm`) into
// `dst` (any strides), converting dtypes.
void write_permuted(const Tensor& dst, const Tensor& src, const DimVector& perm, const char* op);

// nbytes of scratch on `device`, through ember's caching allocator (keep the tensor alive until
// the work using it is queued: the allocator orders reuse on the current stream).
Tensor scratch(int64_t nbytes, Device device);

// Copies a contiguous device tensor to a new contiguous CPU tensor (waits for it) and back.
Tensor to_host(const Tensor& t);
Tensor to_device(const Tensor& t, Device device);

}  // namespace red
}  // namespace cuda
}  // namespace ember
