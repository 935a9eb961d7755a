// The helper kernels of the CUDA matrix products (linalg_ops.cpp holds the cuBLAS calls and the
// ops): strided gathers that make operands and `self` of addmm & co. contiguous, the scaling of
// the K == 0 products, and an exact integer product (cuBLAS has none that wraps like the CPU).
#include <algorithm>

#include "cuda/cuda_context.h"
#include "cuda/device_types.cuh"
#include "cuda/linalg_ops.cuh"
#include "cuda/reduce_utils.cuh"

namespace ember {
namespace cuda {
namespace linalg {
namespace {

// The strided walk of the reductions (red::Dims) serves the gathers too.
static_assert(kMaxDims <= red::kMaxDims, "linalg::kMaxDims exceeds red::Dims");

template <class T>
__global__ void gather_kernel(T* dst, const T* src, red::Dims g, int64_t n) {
  const int64_t step = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = src[red::offset_of(g, i)];
}

// gather_kernel's common case without its per-element index walk: a row of n elements repeated
// over m rows (a bias broadcast into addmm's output). Blocks take column tiles (x) by row
// slices (y); each thread keeps its source element across the rows it writes.
template <class T>
__global__ void broadcast_rows_kernel(T* dst, const T* src, int64_t m, int64_t n) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n) return;
  const T v = src[c];
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) dst[r * n + c] = v;
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
  red::Dims g{};
  g.n = ndim;
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    g.size[d] = sizes[d];
    g.stride[d] = strides[d];
    n *= sizes[d];
  }
  if (n == 0) return;
  EMBER_CHECK(itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8, op,
              ": internal error: element size ", itemsize);
  if (ndim == 2 && strides[0] == 0 && strides[1] == 1) {
    const int64_t m = sizes[0], cols = sizes[1];
    const dim3 grid(static_cast<unsigned>((cols + kBlockSize - 1) / kBlockSize),
                    static_cast<unsigned>(std::min<int64_t>(m, 2048)));
    red::dispatch_by_size(itemsize, [&](auto tag) {
      using T = decltype(tag);
      broadcast_rows_kernel<T><<<grid, kBlockSize, 0, stream>>>(
          static_cast<T*>(dst), static_cast<const T*>(src), m, cols);
    });
    check_launch(op);
    return;
  }
  const unsigned blocks = blocks_for(n, 4);
  red::dispatch_by_size(itemsize, [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T>
        <<<blocks, kBlockSize, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(src), g, n);
  });
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
      EMBER_FAIL(DtypeNotImplemented, op,
                 ": not implemented for dtype bool (supported: integer and floating dtypes)");
    }
  });
  check_launch(op);
}

}  // namespace linalg
}  // namespace cuda
}  // namespace ember
