// Internal to the CUDA matrix products: the kernels of linalg_ops.cu that linalg_ops.cpp (host
// code, cuBLAS) launches. Every launcher queues on `stream` and checks its launch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace ember {
namespace cuda {
namespace linalg {

constexpr int kMaxDims = 16;

// dst (contiguous over `sizes`) = src read with `strides` (elements; 0 broadcasts), elements of
// `itemsize` bytes (1, 2, 4 or 8): a gather, no dtype conversion.
void strided_copy(void* dst, const void* src, int64_t itemsize, int ndim, const int64_t* sizes,
                  const int64_t* strides, cudaStream_t stream, const char* op);

// data[i] *= beta for n contiguous elements of a floating dtype (beta == 0 writes zeros, never
// reading data, so NaN does not survive).
void scale_inplace(ScalarType dtype, void* data, int64_t n, double beta, cudaStream_t stream,
                   const char* op);

// Exact integer batched product, wrapping like the CPU kernel (arithmetic modulo 2^64):
// c[b, i, j] = alpha * sum_k a[b, i, k] * b[b, k, j] + (use_c ? beta * c[b, i, j] : 0), c
// contiguous [batch..., M, N]; a and b read through element strides (batch strides 0 where
// broadcast).
struct IntMatmulArgs {
  int nbatch = 0;  // batch dims
  int64_t batch[kMaxDims] = {};
  int64_t sa[kMaxDims] = {}, sb[kMaxDims] = {};
  int64_t M = 0, N = 0, K = 0;
  int64_t ars = 0, acs = 0, brs = 0, bcs = 0;
  int64_t alpha = 1, beta = 0;
  bool use_c = false;
};
void int_matmul(ScalarType dtype, const void* a, const void* b, void* c, const IntMatmulArgs& args,
                int64_t total, cudaStream_t stream, const char* op);

}  // namespace linalg
}  // namespace cuda
}  // namespace ember
