// CUDA kernels of softmax / log_softmax and their backward (semantics: kernels/cpu/
// nn_activation.cpp). The input is made contiguous and seen as (outer, n, inner); each of its
// outer * inner rows of n elements (stride inner) is owned by a team (nn_common.cuh): a warp for
// last-dim rows of up to 1024 elements, a block for longer ones, one thread per row when the dim
// is not the last (adjacent threads then read adjacent columns; a block per row when there are
// few long ones). The forward pass reads a row
// once for an online max + sum of exp, then writes it; math is in float for the 16-bit floats.
// Long last-dim rows (the block teams of the forward pass) run softmax_rows_kernel instead: the
// same two passes with 16-byte vector loads and stores and kRowAccs independent (max, sum) pairs
// per thread; rows of 64 KiB or more that fit in shared memory (the opt-in limit, ~227 KiB on
// H100) run softmax_rows_smem_kernel, which reads them from global memory once.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/nn_common.cuh"
#include "kernels/softmax_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

using nnk::acc_t;
using nnk::MaxSum;

using RowShape = nn::SoftmaxShape;  // the CPU's (kernels/softmax_rules.h)

template <class T>
__global__ void softmax_forward_kernel(const T* x, T* y, int64_t rows, int64_t n, int64_t inner,
                                       int mode, bool log) {
  using A = acc_t<T>;
  const nnk::Team tm = nnk::make_team(mode);
  if (tm.id >= rows) return;
  const int64_t base = (tm.id / inner) * n * inner + tm.id % inner;
  const T* xr = x + base;
  T* yr = y + base;
  MaxSum<A> ms{-std::numeric_limits<A>::infinity(), A(0)};
  for (int64_t k = tm.rank; k < n; k += tm.size) nnk::maxsum_step(ms, to_op<T>(xr[k * inner]));
  ms = nnk::team_reduce(ms, mode, nnk::MergeMaxSum{});
  if (log) {
    // (x - max) - log(sum): max + log(sum) would lose log(sum) to a large max
    const A lsum = dm::log(ms.s);
    for (int64_t k = tm.rank; k < n; k += tm.size)
      yr[k * inner] = from_op<T>((to_op<T>(xr[k * inner]) - ms.m) - lsum);
  } else {
    const A inv = A(1) / ms.s;
    for (int64_t k = tm.rank; k < n; k += tm.size)
      yr[k * inner] = from_op<T>(dm::exp(to_op<T>(xr[k * inner]) - ms.m) * inv);
  }
}

// 16 bytes of T: one vector load or store.
template <class T>
struct alignas(16) RowPack {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  T v[kN];
};

constexpr int kRowAccs = 4;    // (max, sum) pairs per thread
constexpr int kRowUnroll = 4;  // packs a thread loads per iteration before using them

// The forward pass over contiguous rows of n elements (x row r at x + r * n), one block of
// nnk::kRowBlock threads per row. The elements before the row's first 16-byte boundary (head) and
// after its last whole pack (tail), fewer than a pack each, go one per thread; the packs between,
// kRowUnroll per thread per iteration. The write pass uses packs too when y's row has the same
// alignment as x's (else it goes element by element).
template <class T>
__global__ void __launch_bounds__(nnk::kRowBlock)
    softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n, bool log) {
  using A = acc_t<T>;
  using P = RowPack<T>;
  constexpr int kN = P::kN;
  const int64_t t = threadIdx.x, nt = blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    const uint64_t xa = reinterpret_cast<uint64_t>(xr);
    const int64_t head = min(n, static_cast<int64_t>(((16 - xa % 16) % 16) / sizeof(T)));
    const int64_t npacks = (n - head) / kN;
    const int64_t tail = head + npacks * kN;  // [tail, n): fewer than kN
    const P* xp = reinterpret_cast<const P*>(xr + head);
    MaxSum<A> ms[kRowAccs];
#pragma unroll
    for (int i = 0; i < kRowAccs; ++i) ms[i] = {-std::numeric_limits<A>::infinity(), A(0)};
    if (t < head) nnk::maxsum_step(ms[0], to_op<T>(xr[t]));
    if (t < n - tail) nnk::maxsum_step(ms[1], to_op<T>(xr[tail + t]));
    for (int64_t k0 = t; k0 < npacks; k0 += nt * kRowUnroll) {
      P buf[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t k = k0 + u * nt;
        if (k < npacks) buf[u] = xp[k];
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        if (k0 + u * nt < npacks) {
#pragma unroll
          for (int e = 0; e < kN; ++e)
            nnk::maxsum_step(ms[(u * kN + e) % kRowAccs], to_op<T>(buf[u].v[e]));
        }
      }
    }
    static_assert(kRowAccs == 4, "the merge below takes four pairs");
    const nnk::MergeMaxSum merge;
    MaxSum<A> all = merge(merge(ms[0], ms[1]), merge(ms[2], ms[3]));
    all = nnk::team_reduce(all, nnk::kBlock, merge);  // every thread gets the row's pair
    const A lsum = dm::log(all.s);  // subtracted after the max, as the CPU kernels
    const A inv = A(1) / all.s;
    auto out = [&](A v) { return log ? (v - all.m) - lsum : dm::exp(v - all.m) * inv; };
    if (reinterpret_cast<uint64_t>(yr) % 16 == xa % 16) {
      if (t < head) yr[t] = from_op<T>(out(to_op<T>(xr[t])));
      if (t < n - tail) yr[tail + t] = from_op<T>(out(to_op<T>(xr[tail + t])));
      P* yp = reinterpret_cast<P*>(yr + head);
      for (int64_t k = t; k < npacks; k += nt) {
        const P in = xp[k];
        P o;
#pragma unroll
        for (int e = 0; e < kN; ++e) o.v[e] = from_op<T>(out(to_op<T>(in.v[e])));
        yp[k] = o;
      }
    } else {
      for (int64_t k = t; k < n; k += nt) yr[k] = from_op<T>(out(to_op<T>(xr[k])));
    }
  }
}

// Packs a thread loads before using them: 128 bytes for float (a 128 KiB row leaves one block
// per SM, whose loads alone must cover the memory latency), 64 for the others (fewer registers:
// two blocks of 16-bit rows per SM).
template <class T>
constexpr int kSmemUnroll = sizeof(T) == 4 ? 8 : 4;

// softmax_rows_kernel for rows that fit in shared memory: the row is read from global memory
// once (kSmemUnroll 16-byte packs in flight per thread), stepped into the (max, sum) pairs and
// kept in dynamic shared memory, from which the write pass reads it. Element k of the row sits
// at sh[shift + k], shift = the row's misalignment in elements, so that its packs are 16-byte
// aligned in shared memory as they are in x. Needs (n + kN) * sizeof(T) bytes.
template <class T>
__global__ void __launch_bounds__(1024)
    softmax_rows_smem_kernel(const T* x, T* y, int64_t rows, int64_t n, bool log) {
  using A = acc_t<T>;
  using P = RowPack<T>;
  constexpr int kN = P::kN;
  extern __shared__ __align__(16) unsigned char smem_row[];
  T* sh = reinterpret_cast<T*>(smem_row);
  const int64_t t = threadIdx.x, nt = blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = y + row * n;
    const uint64_t xa = reinterpret_cast<uint64_t>(xr);
    const int64_t head = min(n, static_cast<int64_t>(((16 - xa % 16) % 16) / sizeof(T)));
    const int64_t npacks = (n - head) / kN;
    const int64_t tail = head + npacks * kN;  // [tail, n): fewer than kN
    const int64_t shift = static_cast<int64_t>(xa % 16 / sizeof(T));
    const P* xp = reinterpret_cast<const P*>(xr + head);
    P* sp = reinterpret_cast<P*>(sh + shift + head);  // shift + head: 0 or kN
    MaxSum<A> ms[kRowAccs];
#pragma unroll
    for (int i = 0; i < kRowAccs; ++i) ms[i] = {-std::numeric_limits<A>::infinity(), A(0)};
    if (t < head) {
      const T v = xr[t];
      sh[shift + t] = v;
      nnk::maxsum_step(ms[0], to_op<T>(v));
    }
    if (t < n - tail) {
      const T v = xr[tail + t];
      sh[shift + tail + t] = v;
      nnk::maxsum_step(ms[1], to_op<T>(v));
    }
    for (int64_t k0 = t; k0 < npacks; k0 += nt * kSmemUnroll<T>) {
      P buf[kSmemUnroll<T>];
#pragma unroll
      for (int u = 0; u < kSmemUnroll<T>; ++u) {
        const int64_t k = k0 + u * nt;
        if (k < npacks) buf[u] = xp[k];
      }
#pragma unroll
      for (int u = 0; u < kSmemUnroll<T>; ++u) {
        const int64_t k = k0 + u * nt;
        if (k < npacks) {
          sp[k] = buf[u];
#pragma unroll
          for (int e = 0; e < kN; ++e)
            nnk::maxsum_step(ms[(u * kN + e) % kRowAccs], to_op<T>(buf[u].v[e]));
        }
      }
    }
    static_assert(kRowAccs == 4, "the merge below takes four pairs");
    const nnk::MergeMaxSum merge;
    MaxSum<A> all = merge(merge(ms[0], ms[1]), merge(ms[2], ms[3]));
    // Every thread gets the row's pair; its barriers also publish the row in sh.
    all = nnk::team_reduce(all, nnk::kBlock, merge);
    const A lsum = dm::log(all.s);  // subtracted after the max, as the CPU kernels
    const A inv = A(1) / all.s;
    auto out = [&](A v) { return log ? (v - all.m) - lsum : dm::exp(v - all.m) * inv; };
    if (reinterpret_cast<uint64_t>(yr) % 16 == xa % 16) {
      if (t < head) yr[t] = from_op<T>(out(to_op<T>(sh[shift + t])));
      if (t < n - tail) yr[tail + t] = from_op<T>(out(to_op<T>(sh[shift + tail + t])));
      P* yp = reinterpret_cast<P*>(yr + head);
      for (int64_t k = t; k < npacks; k += nt) {
        const P in = sp[k];
        P o;
#pragma unroll
        for (int e = 0; e < kN; ++e) o.v[e] = from_op<T>(out(to_op<T>(in.v[e])));
        yp[k] = o;
      }
    } else {
      for (int64_t k = t; k < n; k += nt) yr[k] = from_op<T>(out(to_op<T>(sh[shift + k])));
    }
    __syncthreads();  // the next row rewrites sh
  }
}

// Rows of at least kSmemMinBytes whose copy fits the device's opt-in shared memory per block,
// less kSmemReserve for the kernel's static shared memory: the dynamic shared memory
// softmax_rows_smem_kernel needs, else 0. Shorter rows stay on softmax_rows_kernel: its three
// 512-thread blocks per SM hold under 64 KiB x 3 x 132 SMs (~25 MB on H100), so their second read
// hits L2; from ~128 KiB rows that working set passes the 50 MB L2 and the re-read goes to DRAM.
constexpr int64_t kSmemMinBytes = 64 * 1024;
constexpr int64_t kSmemReserve = 1024;

int smem_optin(int device) {
  constexpr int kMaxCached = 64;
  static std::atomic<int> cache[kMaxCached];  // zero: not queried yet
  if (device >= 0 && device < kMaxCached) {
    const int v = cache[device].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int v = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (device >= 0 && device < kMaxCached && v > 0)
    cache[device].store(v, std::memory_order_relaxed);
  return v;
}

// Threads of a softmax_rows_smem_kernel block: kSmemBigBlock when a second block would not fit
// the shared memory (one block per SM: twice the loads in flight, all of a 128 KiB float row),
// else nnk::kRowBlock (two blocks per SM, whose phases overlap).
constexpr int kSmemBigBlock = 1024;
unsigned smem_row_threads(int64_t smem, int device) {
  return 2 * (smem + kSmemReserve) > smem_optin(device) ? kSmemBigBlock : nnk::kRowBlock;
}

template <class T>
int64_t smem_row_bytes(int64_t n, int device) {
  const int64_t bytes = (n + RowPack<T>::kN) * static_cast<int64_t>(sizeof(T));
  if (n * static_cast<int64_t>(sizeof(T)) < kSmemMinBytes) return 0;
  return bytes + kSmemReserve <= smem_optin(device) ? bytes : 0;
}

// softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g).
template <class T>
__global__ void softmax_backward_kernel(const T* g, const T* y, T* gi, int64_t rows, int64_t n,
                                        int64_t inner, int mode, bool log) {
  using A = acc_t<T>;
  const nnk::Team tm = nnk::make_team(mode);
  if (tm.id >= rows) return;
  const int64_t base = (tm.id / inner) * n * inner + tm.id % inner;
  const T* gr = g + base;
  const T* yr = y + base;
  T* o = gi + base;
  A acc = 0;
  for (int64_t k = tm.rank; k < n; k += tm.size) {
    const A gv = to_op<T>(gr[k * inner]);
    acc += log ? gv : gv * to_op<T>(yr[k * inner]);
  }
  acc = nnk::team_sum(acc, mode);
  for (int64_t k = tm.rank; k < n; k += tm.size) {
    const A gv = to_op<T>(gr[k * inner]), yv = to_op<T>(yr[k * inner]);
    o[k * inner] = from_op<T>(log ? gv - dm::exp(yv) * acc : yv * (gv - acc));
  }
}

// The team mode of the rows of s (there are s.outer * s.inner of them): by length for
// contiguous rows; a thread per strided row, unless there are few long ones (a block each then,
// reading with stride inner, rather than a handful of threads walking them alone).
int plan_mode(const RowShape& s) {
  if (s.inner == 1) return nnk::team_mode(s.n, 1);
  return s.outer * s.inner < 2048 && s.n >= 1024 ? int(nnk::kBlock) : int(nnk::kThread);
}

Tensor softmax_common(const char* op, const Tensor& self, int64_t dim,
                      std::optional<ScalarType> dtype, bool log) {
  ix::check_cuda(self, op, "self");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(self->dim(), 1), op);
  const ScalarType dt = nn::softmax_dtype(op, self, dtype);
  DeviceGuard guard(ix::device_index(self));
  Tensor x = nnk::contig(self, dt, op);
  Tensor out = empty(x->sizes(), dt, x->device());
  if (x->numel() == 0) return out;
  const RowShape s = x->dim() == 0 ? RowShape{} : nn::softmax_shape(x, d);
  const int64_t rows = s.outer * s.inner;
  const int mode = plan_mode(s);
  EMBER_DISPATCH_FLOAT(dt, op, [&] {
    using T = scalar_t;
    if (s.inner == 1 && mode == nnk::kBlock) {
      const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t(1) << 30));
      const int64_t smem = smem_row_bytes<T>(s.n, ix::device_index(x));
      if (smem > 0) {
        auto* kernel = &softmax_rows_smem_kernel<T>;
        if (smem > 48 * 1024)
          EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                static_cast<int>(smem)));
        const unsigned threads = smem_row_threads(smem, ix::device_index(x));
        kernel<<<grid, threads, static_cast<size_t>(smem), ix::stream_of(x)>>>(
            x->data_as<T>(), out->data_as<T>(), rows, s.n, log);
        check_launch(op);
        return;
      }
      softmax_rows_kernel<T><<<grid, nnk::kRowBlock, 0, ix::stream_of(x)>>>(
          x->data_as<T>(), out->data_as<T>(), rows, s.n, log);
      check_launch(op);
      return;
    }
    softmax_forward_kernel<T>
        <<<nnk::team_blocks(mode, rows), nnk::team_threads(mode), 0, ix::stream_of(x)>>>(
            x->data_as<T>(), out->data_as<T>(), rows, s.n, s.inner, mode, log);
    check_launch(op);
  });
  return out;
}

Tensor softmax_backward_common(const char* op, const Tensor& grad, const Tensor& output,
                               int64_t dim, bool log) {
  ix::check_cuda(output, op, "output");
  nnk::check_device(output, grad, op, "grad_output");
  nn::check_softmax_grad(op, grad, output);
  EMBER_CHECK_KIND(is_floating(output->dtype()), Type, op,
                   ": expected a floating-point output, got ", dtype_name(output->dtype()));
  const int64_t d = wrap_dim(dim, std::max<int64_t>(output->dim(), 1), op);
  DeviceGuard guard(ix::device_index(output));
  Tensor y = nnk::contig(output, op);
  Tensor g = nnk::contig(grad, y->dtype(), op);
  Tensor out = empty(y->sizes(), y->dtype(), y->device());
  if (y->numel() == 0) return out;
  const RowShape s = y->dim() == 0 ? RowShape{} : nn::softmax_shape(y, d);
  const int64_t rows = s.outer * s.inner;
  const int mode = plan_mode(s);
  EMBER_DISPATCH_FLOAT(y->dtype(), op, [&] {
    using T = scalar_t;
    softmax_backward_kernel<T>
        <<<nnk::team_blocks(mode, rows), nnk::team_threads(mode), 0, ix::stream_of(y)>>>(
            g->data_as<T>(), y->data_as<T>(), out->data_as<T>(), rows, s.n, s.inner, mode, log);
    check_launch(op);
  });
  return out;
}

using Softmax = nn::SoftmaxOps<&softmax_common, &softmax_backward_common>;

void register_softmax() {
  register_kernel("softmax", DeviceType::CUDA, &Softmax::softmax);
  register_kernel("log_softmax", DeviceType::CUDA, &Softmax::log_softmax);
  register_kernel("_softmax_backward_data", DeviceType::CUDA, &Softmax::softmax_backward);
  register_kernel("_log_softmax_backward_data", DeviceType::CUDA, &Softmax::log_softmax_backward);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_softmax)
