// The helper kernels of the CUDA matrix products (linalg_ops.cpp holds the cuBLAS calls and the
// ops): strided gathers that make operands and `self` of addmm & co. contiguous, the scaling of
// the K == 0 products, and an exact integer product (cuBLAS has none that wraps like the CPU).
#include "cuda/cuda_context.h"
#include "cuda/device_types.cuh"
#include "cuda/linalg_ops.cuh"

namespace ember {
namespace cuda {
namespace linalg {
namespace {

struct Geometry {
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];
};

// Offset (elements) of the i-th element, in row-major order over g.sizes, read through g.strides.
__device__ __forceinline__ int64_t source_offset(const Geometry& g, int64_t i) {
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t s = g.sizes[d];
    off += (i % s) * g.strides[d];
    i /= s;
  }
  return off;
}

template <class T>
__global__ void gather_kernel(T* dst, const T* src, Geometry g, int64_t n) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = src[source_offset(g, i)];
}

template <class T>
__global__ void scale_kernel(T* data, int64_t n, dev_opmath_t<T> beta) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (beta == dev_opmath_t<T>(0))
      data[i] = from_op<T>(dev_opmath_t<T>(0));
    else
      data[i] = from_op<T>(beta * to_op<T>(data[i]));
  }
}

// One thread per element of C. Simple and exact rather than fast: integer products are rare.
template <class T>
__global__ void int_matmul_kernel(const T* a, const T* b, T* c, IntMatmulArgs p, int64_t total) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += step) {
    const int64_t j = idx % p.N;
    const int64_t i = (idx / p.N) % p.M;
    int64_t bi = idx / (p.N * p.M);
    int64_t oa = 0, ob = 0;
    for (int d = p.nbatch - 1; d >= 0; --d) {
      const int64_t s = p.batch[d];
      const int64_t q = bi % s;
      oa += q * p.sa[d];
      ob += q * p.sb[d];
      bi /= s;
    }
    const T* arow = a + oa + i * p.ars;
    const T* bcol = b + ob + j * p.bcs;
    uint64_t acc = 0;
    for (int64_t k = 0; k < p.K; ++k)
      acc += static_cast<uint64_t>(static_cast<int64_t>(arow[k * p.acs])) *
             static_cast<uint64_t>(static_cast<int64_t>(bcol[k * p.brs]));
    uint64_t v = static_cast<uint64_t>(p.alpha) * acc;
    if (p.use_c)
      v += static_cast<uint64_t>(p.beta) * static_cast<uint64_t>(static_cast<int64_t>(c[idx]));
    c[idx] = static_cast<T>(static_cast<int64_t>(v));
  }
}

}  // namespace

void strided_copy(void* dst, const void* src, int64_t itemsize, int ndim, const int64_t* sizes,
                  const int64_t* strides, cudaStream_t stream, const char* op) {
  EMBER_CHECK(ndim <= kMaxDims, op, ": tensors of more than ", kMaxDims,
              " dims are not supported on CUDA (got ", ndim, ")");
  Geometry g{};
  g.ndim = ndim;
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    g.sizes[d] = sizes[d];
    g.strides[d] = strides[d];
    n *= sizes[d];
  }
  if (n == 0) return;
  const unsigned blocks = blocks_for(n, 4);
  switch (itemsize) {
    case 1:
      gather_kernel<uint8_t><<<blocks, kBlockSize, 0, stream>>>(
          static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), g, n);
      break;
    case 2:
      gather_kernel<uint16_t><<<blocks, kBlockSize, 0, stream>>>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), g, n);
      break;
    case 4:
      gather_kernel<uint32_t><<<blocks, kBlockSize, 0, stream>>>(
          static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), g, n);
      break;
    case 8:
      gather_kernel<uint64_t><<<blocks, kBlockSize, 0, stream>>>(
          static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), g, n);
      break;
    default:
      EMBER_FAIL(Runtime, op, ": internal error: element size ", itemsize);
  }
  check_launch(op);
}

void scale_inplace(ScalarType dtype, void* data, int64_t n, double beta, cudaStream_t stream,
                   const char* op) {
  if (n == 0) return;
  EMBER_DISPATCH_FLOAT(dtype, op, [&] {
    using op_t = dev_opmath_t<scalar_t>;
    scale_kernel<scalar_t><<<blocks_for(n, 4), kBlockSize, 0, stream>>>(
        static_cast<scalar_t*>(data), n, static_cast<op_t>(beta));
  });
  check_launch(op);
}

void int_matmul(ScalarType dtype, const void* a, const void* b, void* c, const IntMatmulArgs& args,
                int64_t total, cudaStream_t stream, const char* op) {
  if (total == 0) return;
  EMBER_DISPATCH_INTEGRAL(dtype, op, [&] {
    if constexpr (!std::is_same_v<scalar_t, bool>) {
      int_matmul_kernel<scalar_t><<<blocks_for(total), kBlockSize, 0, stream>>>(
          static_cast<const scalar_t*>(a), static_cast<const scalar_t*>(b),
          static_cast<scalar_t*>(c), args, total);
    } else {
      EMBER_FAIL(Type, op,
                 ": not implemented for dtype bool (supported: integer and floating dtypes)");
    }
  });
  check_launch(op);
}

}  // namespace linalg
}  // namespace cuda
}  // namespace ember
