// CUDA kernels of the reductions and scans of ops/reduce.yaml (semantics: kernels/cpu/
// reduce_ops.cpp). A reduction is a small device Reducer (identity / step / combine / write) run
// by one engine that reads the input through its strides (reduce::make_geometry: kept dims x
// reduced dims, size-1 dims dropped, mergeable dims coalesced):
//   block path:  one block per (output, chunk of the reduced elements); threads stride over the
//                chunk, then the block combines them (warp shuffles for arithmetic accumulators,
//                a shared-memory tree for struct ones). Long reductions with few outputs (the
//                whole tensor) split into chunks (about four waves of blocks, from the SM count)
//                whose partials a second kernel combines.
//   contiguous:  the block path when the reduced elements are one run of stride 1 (last-dim and
//                whole-tensor reductions of dense tensors): 16-byte vector loads (element loads
//                for the unaligned head and the tail), four packs in flight and four independent
//                accumulators per thread, the output's offset computed once per block.
//   thread path: one thread per output, looping over the reduced elements: short reductions.
//   columns:     "column" reductions (the innermost kept dim is contiguous, the reduced dims are
//                not). By packs when every 16 bytes of adjacent outputs are one aligned load at
//                each reduced element: 32 adjacent packs per block (a warp reads 512 contiguous
//                bytes of a row) by 8 row slices, kN accumulators and four rows in flight per
//                thread, a shared-memory tree over the slices, the rows split over blocks into
//                about one resident wave (partials combined by a second, column-wise pass).
//                Otherwise element by element: 32 adjacent outputs per block by 8 row slices,
//                the reduced elements split over blocks when the outputs are few.
// Accumulation: float for Half/BFloat16, double for float32/float64 sums, int64 for integers and
// bool; var/std (Welford with Chan's merge) and norms accumulate in double. Scans run one thread
// per scan line over a contiguous (outer, n, inner) copy.
#include <math_constants.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/backend.h"
#include "core/dispatch.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_registry.h"
#include "cuda/device_types.cuh"
#include "cuda/reduce_utils.cuh"
#include "kernels/reduce_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {

// ---- shared helpers (declared in reduce_utils.cuh) ---------------------------------------------

namespace red {
namespace {

// A value in a form any dtype converts from exactly as C++ would: integers keep all 64 bits
// (is_u64: i holds a uint64's bits, which a float reads as unsigned).
struct Wide {
  double f;
  int64_t i;
  bool is_int, is_u64;
};

__device__ __forceinline__ Wide load_any(const char* p, ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
      return {0.0, *reinterpret_cast<const uint8_t*>(p) != 0 ? 1 : 0, true, false};
    case ScalarType::UInt8:
      return {0.0, *reinterpret_cast<const uint8_t*>(p), true, false};
    case ScalarType::Int8:
      return {0.0, *reinterpret_cast<const int8_t*>(p), true, false};
    case ScalarType::Int16:
      return {0.0, *reinterpret_cast<const int16_t*>(p), true, false};
    case ScalarType::Int32:
      return {0.0, *reinterpret_cast<const int32_t*>(p), true, false};
    case ScalarType::Int64:
      return {0.0, *reinterpret_cast<const int64_t*>(p), true, false};
    case ScalarType::UInt16:
      return {0.0, *reinterpret_cast<const uint16_t*>(p), true, false};
    case ScalarType::UInt32:
      return {0.0, *reinterpret_cast<const uint32_t*>(p), true, false};
    case ScalarType::UInt64:
      return {0.0, static_cast<int64_t>(*reinterpret_cast<const uint64_t*>(p)), true, true};
    case ScalarType::Float16:
      return {static_cast<double>(to_op<Half>(*reinterpret_cast<const Half*>(p))), 0, false, false};
    case ScalarType::BFloat16:
      return {static_cast<double>(to_op<BFloat16>(*reinterpret_cast<const BFloat16*>(p))), 0, false,
              false};
    case ScalarType::Float32:
      return {static_cast<double>(*reinterpret_cast<const float*>(p)), 0, false, false};
    default:
      return {*reinterpret_cast<const double*>(p), 0, false, false};
  }
}

// An integer as the floating type F (one rounding, from the unsigned value for a uint64).
template <class F>
__device__ __forceinline__ F int_as(const Wide& w) {
  return w.is_u64 ? static_cast<F>(static_cast<uint64_t>(w.i)) : static_cast<F>(w.i);
}

template <class D>
__device__ __forceinline__ void store_wide(char* p, const Wide& w) {
  D* q = reinterpret_cast<D*>(p);
  if constexpr (std::is_same_v<D, bool>) {
    *reinterpret_cast<uint8_t*>(p) = w.is_int ? (w.i != 0) : (w.f != 0.0);
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    *q = from_op<D>(w.is_int ? int_as<float>(w) : static_cast<float>(w.f));
  } else if constexpr (std::is_floating_point_v<D>) {
    *q = w.is_int ? int_as<D>(w) : static_cast<D>(w.f);
  } else if constexpr (std::is_unsigned_v<D> && sizeof(D) > 1) {
    // float -> uint16/32/64 as the CPU's convert (kernels/iterator.cpp): through int32 for
    // uint16, int64 otherwise, and uint64 takes values past int64's range directly
    if (w.is_int) {
      *q = static_cast<D>(w.i);
      return;
    }
    if constexpr (std::is_same_v<D, uint64_t>) {
      if (w.f >= 9223372036854775808.0) {
        *q = w.f < 18446744073709551616.0 ? static_cast<D>(w.f) : D(0);
        return;
      }
    }
    if constexpr (sizeof(D) < 4) {
      *q = static_cast<D>(w.f > -2147483649.0 && w.f < 2147483648.0 ? int32_t(w.f) : 0);
    } else {
      *q = static_cast<D>(w.f != w.f ? 0 : static_cast<int64_t>(w.f));
    }
  } else {
    *q = w.is_int ? static_cast<D>(w.i) : static_cast<D>(w.f);
  }
}

__device__ __forceinline__ void store_any(char* p, ScalarType t, const Wide& w) {
  switch (t) {
    case ScalarType::Bool:
      return store_wide<bool>(p, w);
    case ScalarType::UInt8:
      return store_wide<uint8_t>(p, w);
    case ScalarType::Int8:
      return store_wide<int8_t>(p, w);
    case ScalarType::Int16:
      return store_wide<int16_t>(p, w);
    case ScalarType::Int32:
      return store_wide<int32_t>(p, w);
    case ScalarType::Int64:
      return store_wide<int64_t>(p, w);
    case ScalarType::UInt16:
      return store_wide<uint16_t>(p, w);
    case ScalarType::UInt32:
      return store_wide<uint32_t>(p, w);
    case ScalarType::UInt64:
      return store_wide<uint64_t>(p, w);
    case ScalarType::Float16:
      return store_wide<Half>(p, w);
    case ScalarType::BFloat16:
      return store_wide<BFloat16>(p, w);
    case ScalarType::Float32:
      return store_wide<float>(p, w);
    default:
      return store_wide<double>(p, w);
  }
}

__global__ void strided_copy_kernel(char* dst, ScalarType dt, int dsize, Dims dd, const char* src,
                                    ScalarType st, int ssize, Dims sd, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const Wide w = load_any(src + offset_of(sd, i) * ssize, st);
    store_any(dst + offset_of(dd, i) * dsize, dt, w);
  }
}

}  // namespace

void strided_copy(char* dst, ScalarType dt, const DimVector& dst_strides, const char* src,
                  ScalarType st, const DimVector& src_strides, const DimVector& sizes,
                  const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (n == 0) return;
  Dims dd = make_dims(sizes, dst_strides, op), sd = make_dims(sizes, src_strides, op);
  strided_copy_kernel<<<blocks_for(n, 4), kBlockSize, 0, current_stream()>>>(
      dst, dt, static_cast<int>(itemsize(dt)), dd, src, st, static_cast<int>(itemsize(st)), sd, n);
  check_launch(op);
}

Tensor contiguous_as(const Tensor& self, ScalarType dt, const DimVector& perm, const char* op) {
  bool identity = true;
  for (int64_t i = 0; i < static_cast<int64_t>(perm.size()); ++i) identity &= perm[i] == i;
  if (identity && dt == self->dtype() && self->is_contiguous() && dt != ScalarType::Bool)
    return self;
  const DimVector sizes = perm.empty() ? self->sizes() : permuted(self->sizes(), perm);
  const DimVector strides = perm.empty() ? self->strides() : permuted(self->strides(), perm);
  DeviceGuard guard(self->device().index);  // the copy runs on self's device and its stream
  Tensor out = ember::empty(sizes, dt, self->device());
  strided_copy(out->data(), dt, contiguous_strides(sizes), self->data(), self->dtype(), strides,
               sizes, op);
  return out;
}

void write_permuted(const Tensor& dst, const Tensor& src, const DimVector& perm, const char* op) {
  const DimVector sizes = perm.empty() ? dst->sizes() : permuted(dst->sizes(), perm);
  const DimVector strides = perm.empty() ? dst->strides() : permuted(dst->strides(), perm);
  DeviceGuard guard(dst->device().index);
  strided_copy(dst->data(), dst->dtype(), strides, src->data(), src->dtype(),
               contiguous_strides(sizes), sizes, op);
}

Tensor scratch(int64_t nbytes, Device device) {
  return ember::empty(DimVector{nbytes > 0 ? nbytes : 1}, ScalarType::UInt8, device);
}

Tensor to_host(const Tensor& t) {
  Tensor c = contiguous_as(t, t->dtype(), DimVector{}, "to_host");
  Tensor h = ember::empty(t->sizes(), t->dtype(), cpu_device());
  const size_t nbytes = static_cast<size_t>(t->numel() * t->itemsize());
  if (nbytes)
    device_hooks(DeviceType::CUDA)
        .copy_to_host(h->data(), c->data(), nbytes, t->device().index, false);
  return h;
}

Tensor to_device(const Tensor& t, Device device) {
  Tensor d = ember::empty(t->sizes(), t->dtype(), device);
  const size_t nbytes = static_cast<size_t>(t->numel() * t->itemsize());
  if (nbytes)
    device_hooks(DeviceType::CUDA)
        .copy_from_host(d->data(), t->data(), nbytes, device.index, false);
  return d;
}

}  // namespace red

namespace {

using red::Dims;
using red::isnan_v;
using red::ld;
using red::offset_of;
using reduce::dim_mask;
using reduce::NormKind;
using reduce::reduced_numel;
using reduce::reduced_sizes;
using reduce::torch_type_name;

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<dev_opmath_t<T>>;

// Sum accumulator: float for the 16-bit floats, double for float32/float64, uint64 for
// uint16/32/64 (wraps, well defined, to the bits of PyTorch's int64 result), int64 otherwise.
template <class T>
constexpr bool is_wide_uint_v =
    std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>;
template <class T>
using sum_acc_t = std::conditional_t<
    is_float_v<T>,
    std::conditional_t<std::is_same_v<dev_opmath_t<T>, float> && !std::is_same_v<T, float>, float,
                       double>,
    std::conditional_t<is_wide_uint_v<T>, uint64_t, int64_t>>;

// ---- the engine --------------------------------------------------------------------------------

// Multiprocessor count of `device`, queried once per device (grids are sized from it).
int sm_count(int device) {
  constexpr int kMaxCached = 64;
  static std::atomic<int> cache[kMaxCached];  // zero: not queried yet
  if (device >= 0 && device < kMaxCached) {
    const int n = cache[device].load(std::memory_order_relaxed);
    if (n > 0) return n;
  }
  int n = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  if (n < 1) n = 1;
  if (device >= 0 && device < kMaxCached) cache[device].store(n, std::memory_order_relaxed);
  return n;
}

// Accumulators a warp shuffle moves (plain arithmetic types); struct accumulators (argmax's
// value and index, Welford's triple) combine through a shared-memory tree instead.
template <class A>
constexpr bool shuffles_v =
    std::is_same_v<A, float> || std::is_same_v<A, double> || std::is_same_v<A, int> ||
    std::is_same_v<A, unsigned> || std::is_same_v<A, long> || std::is_same_v<A, unsigned long> ||
    std::is_same_v<A, long long> || std::is_same_v<A, unsigned long long>;

constexpr int kWarpSize = 32;
constexpr int kWarps = kBlockSize / kWarpSize;
static_assert(kBlockSize % kWarpSize == 0 && kWarps <= kWarpSize, "block = whole warps, <= 32");

// Lane 0 gets the combination of its warp's 32 accumulators (all 32 lanes must call it).
template <class R>
__device__ __forceinline__ typename R::acc_t warp_combine(typename R::acc_t acc, const R& r) {
#pragma unroll
  for (int s = kWarpSize / 2; s > 0; s >>= 1)
    acc = r.combine(acc, __shfl_down_sync(0xffffffffu, acc, s));
  return acc;
}

// Combines the accumulators of a block's threads; the result is valid in thread 0 only. Every
// thread of the block calls it (barriers); it may be called again right after (the shared
// memory is released by a final barrier).
template <class R>
__device__ __forceinline__ typename R::acc_t block_combine(typename R::acc_t acc, const R& r) {
  using Acc = typename R::acc_t;
  if constexpr (shuffles_v<Acc>) {
    __shared__ Acc warp_acc[kWarps];
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    acc = warp_combine(acc, r);
    if (lane == 0) warp_acc[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < kWarps ? warp_acc[lane] : r.identity();
      acc = warp_combine(acc, r);
    }
    __syncthreads();
    return acc;
  } else {
    __shared__ __align__(16) unsigned char smem[kBlockSize * sizeof(Acc)];
    Acc* sh = reinterpret_cast<Acc*>(smem);
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kBlockSize / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s)
        sh[threadIdx.x] = r.combine(sh[threadIdx.x], sh[threadIdx.x + s]);
      __syncthreads();
    }
    Acc result = sh[0];
    __syncthreads();
    return result;
  }
}

// Block b reduces chunk b % nchunks of output b / nchunks; with nchunks > 1 its accumulator goes
// to partials[b], else straight to the output. Any reduced layout (offset_of per element).
template <class R>
__global__ void __launch_bounds__(kBlockSize)
    reduce_block_kernel(const typename R::in_t* in, Dims kept, Dims red, int64_t nred,
                        int64_t chunk, int64_t nchunks, int64_t nitems, R r,
                        typename R::acc_t* partials) {
  using Acc = typename R::acc_t;
  for (int64_t b = blockIdx.x; b < nitems; b += gridDim.x) {
    const int64_t o = b / nchunks, c = b % nchunks;
    const typename R::in_t* base = in + offset_of(kept, o);
    const int64_t lo = c * chunk, hi = min(nred, lo + chunk);
    Acc acc = r.identity();
    for (int64_t j = lo + threadIdx.x; j < hi; j += kBlockSize)
      r.step(acc, ld(base + offset_of(red, j)), j);
    acc = block_combine(acc, r);
    if (threadIdx.x == 0) {
      if (nchunks > 1) {
        partials[b] = acc;
      } else {
        r.write(o, acc);
      }
    }
  }
}

// 16 bytes of T: one vector load.
template <class T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  T v[kN];
};
static_assert(sizeof(Pack<double>) == 16 && sizeof(Pack<bool>) == 16, "a pack is 16 bytes");

constexpr int kAccs = 4;    // independent accumulators per thread
constexpr int kUnroll = 4;  // packs a thread loads per iteration (before stepping any of them)

// The block's threads step the elements [lo, hi) of the contiguous run p (p[j] has flat reduced
// index j) into their accumulators: the elements before the first 16-byte boundary (head) and
// after the last whole pack (tail), fewer than a pack each, one per thread; the packs between,
// kUnroll per thread per iteration, element e of an iteration into acc[e % kAccs].
template <class R>
__device__ __forceinline__ void step_run(const typename R::in_t* p, int64_t lo, int64_t hi,
                                         const R& r, typename R::acc_t (&acc)[kAccs]) {
  using T = typename R::in_t;
  using P = Pack<T>;
  constexpr int kN = P::kN;
  if (hi <= lo) return;
  const uint64_t addr = reinterpret_cast<uint64_t>(p + lo);
  const int64_t head = min(hi - lo, static_cast<int64_t>(((16 - addr % 16) % 16) / sizeof(T)));
  const int64_t start = lo + head;  // 16-byte aligned (or == hi)
  const int64_t npacks = (hi - start) / kN;
  const int64_t tail = start + npacks * kN;  // [tail, hi): fewer than kN
  const int64_t t = threadIdx.x;
  if (t < head) r.step(acc[0], ld(p + lo + t), lo + t);
  if (t < hi - tail) r.step(acc[1], ld(p + tail + t), tail + t);
  const P* packs = reinterpret_cast<const P*>(p + start);
  for (int64_t k0 = t; k0 < npacks; k0 += int64_t(kBlockSize) * kUnroll) {
    P buf[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = k0 + int64_t(u) * kBlockSize;
      if (k < npacks) buf[u] = packs[k];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = k0 + int64_t(u) * kBlockSize;
      if (k < npacks) {
#pragma unroll
        for (int e = 0; e < kN; ++e)
          r.step(acc[(u * kN + e) % kAccs], ld(&buf[u].v[e]), start + k * kN + e);
      }
    }
  }
}

// reduce_block_kernel for a reduced run that is contiguous (one reduced dim, stride 1): the
// output's offset once per block, vector loads, kAccs accumulators per thread.
template <class R>
__global__ void __launch_bounds__(kBlockSize)
    reduce_contig_kernel(const typename R::in_t* in, Dims kept, int64_t nred, int64_t chunk,
                         int64_t nchunks, int64_t nitems, R r, typename R::acc_t* partials) {
  using Acc = typename R::acc_t;
  for (int64_t b = blockIdx.x; b < nitems; b += gridDim.x) {
    const int64_t o = b / nchunks, c = b % nchunks;
    const int64_t lo = c * chunk, hi = min(nred, lo + chunk);
    Acc acc[kAccs];
#pragma unroll
    for (int i = 0; i < kAccs; ++i) acc[i] = r.identity();
    step_run(in + offset_of(kept, o), lo, hi, r, acc);
    static_assert(kAccs == 4, "the combine below takes four accumulators");
    Acc a = r.combine(r.combine(acc[0], acc[1]), r.combine(acc[2], acc[3]));
    a = block_combine(a, r);
    if (threadIdx.x == 0) {
      if (nchunks > 1) {
        partials[b] = a;
      } else {
        r.write(o, a);
      }
    }
  }
}

template <class R>
__global__ void __launch_bounds__(kBlockSize)
    reduce_partials_kernel(const typename R::acc_t* partials, int64_t nchunks, int64_t nout, R r) {
  using Acc = typename R::acc_t;
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    Acc acc = r.identity();
    for (int64_t c = threadIdx.x; c < nchunks; c += kBlockSize)
      acc = r.combine(acc, partials[o * nchunks + c]);
    acc = block_combine(acc, r);
    if (threadIdx.x == 0) r.write(o, acc);
  }
}

template <class R>
__global__ void reduce_thread_kernel(const typename R::in_t* in, Dims kept, Dims red, int64_t nred,
                                     int64_t nout, R r) {
  using Acc = typename R::acc_t;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < nout;
       o += int64_t(gridDim.x) * blockDim.x) {
    const typename R::in_t* base = in + offset_of(kept, o);
    Acc acc = r.identity();
    for (int64_t j = 0; j < nred; ++j) r.step(acc, ld(base + offset_of(red, j)), j);
    r.write(o, acc);
  }
}

// Column reductions (the innermost kept dim is contiguous, the reduced dims are not: a bias
// gradient, sum(dim=0) of a matrix): a block takes 32 adjacent outputs (its lanes: coalesced
// loads) by kColSlices row slices (its warps), which combine in shared memory. With few outputs
// the reduced elements also split into nchunks chunks over blocks (partials[o * nchunks + c],
// combined by reduce_partials_kernel), so that the GPU fills.
constexpr int kColSlices = kBlockSize / kWarpSize;

template <class R>
__global__ void __launch_bounds__(kBlockSize)
    reduce_columns_kernel(const typename R::in_t* in, Dims kept, Dims red, int64_t nred,
                          int64_t chunk, int64_t nchunks, int64_t ntiles, int64_t nout, R r,
                          typename R::acc_t* partials) {
  using Acc = typename R::acc_t;
  __shared__ __align__(16) unsigned char smem[kBlockSize * sizeof(Acc)];
  Acc* sh = reinterpret_cast<Acc*>(smem);
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int slice = static_cast<int>(threadIdx.x) / kWarpSize;
  for (int64_t b = blockIdx.x; b < ntiles * nchunks; b += gridDim.x) {
    const int64_t o = (b / nchunks) * kWarpSize + lane, c = b % nchunks;
    Acc acc = r.identity();
    if (o < nout) {
      const typename R::in_t* base = in + offset_of(kept, o);
      const int64_t hi = min(nred, (c + 1) * chunk);
      int64_t j = c * chunk + slice;
      // Four loads in flight before their steps (taken in order: j ascends per thread).
      for (; j + 3 * kColSlices < hi; j += 4 * kColSlices) {
        const auto v0 = ld(base + offset_of(red, j));
        const auto v1 = ld(base + offset_of(red, j + kColSlices));
        const auto v2 = ld(base + offset_of(red, j + 2 * kColSlices));
        const auto v3 = ld(base + offset_of(red, j + 3 * kColSlices));
        r.step(acc, v0, j);
        r.step(acc, v1, j + kColSlices);
        r.step(acc, v2, j + 2 * kColSlices);
        r.step(acc, v3, j + 3 * kColSlices);
      }
      for (; j < hi; j += kColSlices) r.step(acc, ld(base + offset_of(red, j)), j);
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    if (slice == 0 && o < nout) {
      for (int k = 1; k < kColSlices; ++k) acc = r.combine(acc, sh[k * kWarpSize + lane]);
      if (nchunks > 1) {
        partials[o * nchunks + c] = acc;
      } else {
        r.write(o, acc);
      }
    }
    __syncthreads();  // sh is rewritten by the next tile
  }
}

// Column reductions whose packs of kN = 16 / sizeof(T) adjacent outputs are 16-byte aligned at
// every reduced element (columns_by_packs): a block takes kColLanes adjacent packs (its lanes: a
// warp reads 512 contiguous bytes of a row) by kColRows row slices (its warps); each thread keeps
// kN accumulators (one per column of its pack) and loads kColUnroll rows before stepping them.
// The slices combine through a shared-memory tree. With few tiles the rows split into nchunks
// chunks over blocks, whose partials (partials[c * nout + o]: coalesced) a column pass of
// reduce_column_partials_kernel combines.
constexpr int kColLanes = kWarpSize;
constexpr int kColRows = kBlockSize / kColLanes;
constexpr int kColUnroll = 4;
static_assert(kColRows >= 2 && (kColRows & (kColRows - 1)) == 0, "the slice tree halves");

// Combines acc[0 .. kN) over the block's kColRows slices (halving tree: slices [h, 2h) hand
// theirs to slices [0, h)); slice 0 ends with the totals. Every thread of the block calls it.
template <int kN, class R>
__device__ __forceinline__ void combine_slices(typename R::acc_t (&acc)[kN], const R& r) {
  using Acc = typename R::acc_t;
  constexpr size_t kBytes = size_t(kColRows / 2) * kN * kColLanes * sizeof(Acc);
  static_assert(kBytes <= 32 * 1024, "the slice tree fits static shared memory");
  // [slice][column of the pack][lane]: lanes of a warp touch adjacent accumulators.
  __shared__ __align__(16) unsigned char smem[kBytes];
  Acc* sh = reinterpret_cast<Acc*>(smem);
  const int lane = static_cast<int>(threadIdx.x) % kColLanes;
  const int slice = static_cast<int>(threadIdx.x) / kColLanes;
  for (int h = kColRows / 2; h > 0; h /= 2) {
    if (slice >= h && slice < 2 * h) {
#pragma unroll
      for (int e = 0; e < kN; ++e) sh[((slice - h) * kN + e) * kColLanes + lane] = acc[e];
    }
    __syncthreads();
    if (slice < h) {
#pragma unroll
      for (int e = 0; e < kN; ++e)
        acc[e] = r.combine(acc[e], sh[(slice * kN + e) * kColLanes + lane]);
    }
    __syncthreads();  // sh is rewritten by the next level (or the next tile)
  }
}

template <class R>
__global__ void __launch_bounds__(kBlockSize)
    reduce_column_packs_kernel(const typename R::in_t* in, Dims kept, Dims red, int64_t nred,
                               int64_t chunk, int64_t nchunks, int64_t ntiles, int64_t npacks, R r,
                               typename R::acc_t* partials) {
  using T = typename R::in_t;
  using Acc = typename R::acc_t;
  using P = Pack<T>;
  constexpr int kN = P::kN;
  const int lane = static_cast<int>(threadIdx.x) % kColLanes;
  const int slice = static_cast<int>(threadIdx.x) / kColLanes;
  const int64_t nout = npacks * kN;
  for (int64_t b = blockIdx.x; b < ntiles * nchunks; b += gridDim.x) {
    const int64_t pk = (b / nchunks) * kColLanes + lane, c = b % nchunks;
    Acc acc[kN];
#pragma unroll
    for (int e = 0; e < kN; ++e) acc[e] = r.identity();
    if (pk < npacks) {
      // The pack's kN outputs are adjacent in the innermost kept dim: one offset for all.
      const T* base = in + offset_of(kept, pk * kN);
      const int64_t hi = min(nred, (c + 1) * chunk);
      int64_t j = c * chunk + slice;
      for (; j + (kColUnroll - 1) * kColRows < hi; j += kColUnroll * kColRows) {
        P buf[kColUnroll];
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u)
          buf[u] = *reinterpret_cast<const P*>(base + offset_of(red, j + u * kColRows));
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) {
#pragma unroll
          for (int e = 0; e < kN; ++e) r.step(acc[e], ld(&buf[u].v[e]), j + u * kColRows);
        }
      }
      for (; j < hi; j += kColRows) {
        const P v = *reinterpret_cast<const P*>(base + offset_of(red, j));
#pragma unroll
        for (int e = 0; e < kN; ++e) r.step(acc[e], ld(&v.v[e]), j);
      }
    }
    combine_slices<kN>(acc, r);
    if (slice == 0 && pk < npacks) {
#pragma unroll
      for (int e = 0; e < kN; ++e) {
        if (nchunks > 1) {
          partials[c * nout + pk * kN + e] = acc[e];
        } else {
          r.write(pk * kN + e, acc[e]);
        }
      }
    }
  }
}

// Second pass of reduce_column_packs_kernel: the (nchunks, nout) partials reduced over their
// rows by the same lanes x slices tiles (coalesced reads, kColUnroll in flight per thread).
template <class R>
__global__ void __launch_bounds__(kBlockSize)
    reduce_column_partials_kernel(const typename R::acc_t* partials, int64_t nchunks, int64_t nout,
                                  R r) {
  using Acc = typename R::acc_t;
  const int lane = static_cast<int>(threadIdx.x) % kColLanes;
  const int slice = static_cast<int>(threadIdx.x) / kColLanes;
  const int64_t ntiles = (nout + kColLanes - 1) / kColLanes;
  for (int64_t t = blockIdx.x; t < ntiles; t += gridDim.x) {
    const int64_t o = t * kColLanes + lane;
    Acc acc[1] = {r.identity()};
    if (o < nout) {
      int64_t c = slice;
      for (; c + (kColUnroll - 1) * kColRows < nchunks; c += kColUnroll * kColRows) {
        Acc v[kColUnroll];
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) v[u] = partials[(c + u * kColRows) * nout + o];
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) acc[0] = r.combine(acc[0], v[u]);
      }
      for (; c < nchunks; c += kColRows) acc[0] = r.combine(acc[0], partials[c * nout + o]);
    }
    combine_slices<1>(acc, r);
    if (slice == 0 && o < nout) r.write(o, acc[0]);
  }
}

// How a block reduction splits: nchunks chunks of `chunk` reduced elements per output.
struct Split {
  int64_t nchunks = 1, chunk = 0;
};

// Enough blocks for about four waves at 8 resident blocks of kBlockSize threads per SM (more
// waves when fewer fit; small ones keep the last wave's idle share small): the reductions split
// into chunks (of at least kMinChunk elements, a multiple of 64 so that the chunks of a
// contiguous run start 16-byte aligned when the run does) when there are few outputs.
Split split_reduction(int64_t nout, int64_t nred, int sms) {
  constexpr int64_t kMinChunk = 8192, kChunkAlign = 64;
  const int64_t target = int64_t(32) * sms;
  Split s;
  if (nout < target)
    s.nchunks = std::max<int64_t>(1, std::min((nred + kMinChunk - 1) / kMinChunk, target / nout));
  s.chunk = (nred + s.nchunks - 1) / s.nchunks;
  if (s.nchunks > 1) {
    s.chunk = (s.chunk + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
    s.nchunks = (nred + s.chunk - 1) / s.chunk;
  }
  return s;
}

// The column kernel's split: *ntiles tiles of 32 outputs; when they are fewer than about four
// waves of blocks, chunks of at least kMinRows reduced elements (kMinRows / kColSlices per thread).
Split split_columns(int64_t nout, int64_t nred, int sms, int64_t* ntiles) {
  constexpr int64_t kMinRows = 256;
  *ntiles = (nout + kWarpSize - 1) / kWarpSize;
  const int64_t target = int64_t(32) * sms;
  Split s;
  if (*ntiles < target)
    s.nchunks = std::max<int64_t>(
        1, std::min((nred + kMinRows - 1) / kMinRows, (target + *ntiles - 1) / *ntiles));
  s.chunk = (nred + s.nchunks - 1) / s.nchunks;
  s.nchunks = (nred + s.chunk - 1) / s.chunk;
  return s;
}

// The packed column kernel's split: *ntiles tiles of kColLanes packs; when they are fewer than
// one wave of resident blocks (`per_sm` per SM, from the occupancy API: each block's loads keep
// the SM's memory pipe busy, and equal chunks end together), the rows split into chunks of at
// least kMinRows (kColUnroll rows per slice four times).
Split split_column_packs(int64_t npacks, int64_t nred, int sms, int per_sm, int64_t* ntiles) {
  constexpr int64_t kMinRows = int64_t(kColRows) * kColUnroll * 4;
  *ntiles = (npacks + kColLanes - 1) / kColLanes;
  const int64_t target = int64_t(std::max(per_sm, 1)) * sms;
  Split s;
  if (*ntiles < target)
    s.nchunks = std::max<int64_t>(
        1, std::min((nred + kMinRows - 1) / kMinRows, (target + *ntiles - 1) / *ntiles));
  s.chunk = (nred + s.nchunks - 1) / s.nchunks;
  s.nchunks = (nred + s.chunk - 1) / s.chunk;
  return s;
}

// Blocks of reduce_column_packs_kernel<R> that fit on one SM of `device` (registers, shared
// memory), queried once per reducer type and device.
template <class R>
int column_packs_resident(int device) {
  constexpr int kMaxCached = 64;
  static std::atomic<int> cache[kMaxCached];  // zero: not queried yet
  if (device >= 0 && device < kMaxCached) {
    const int n = cache[device].load(std::memory_order_relaxed);
    if (n > 0) return n;
  }
  int n = 0;
  EMBER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, reduce_column_packs_kernel<R>,
                                                                 kBlockSize, 0));
  if (n < 1) n = 1;
  if (device >= 0 && device < kMaxCached) cache[device].store(n, std::memory_order_relaxed);
  return n;
}

// Whether a column reduction (g's innermost kept dim has stride 1) reads by 16-byte packs: the
// base 16-byte aligned, the innermost kept size and every other stride (kept and reduced) a
// multiple of a pack, so each pack of kN outputs at each reduced element is one aligned load;
// and at least half a warp of packs.
template <class T>
bool columns_by_packs(const T* base, const reduce::Geometry& g) {
  constexpr int64_t kN = Pack<T>::kN;
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || g.ksizes.back() % kN != 0) return false;
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(g.kstrides.size()); ++i)
    if (g.kstrides[i] % kN != 0) return false;
  for (int64_t st : g.rstrides)
    if (st % kN != 0) return false;
  return g.nout / kN >= kColLanes / 2;
}

// Runs reducer r over `in` reducing the dims in `mask`; outputs are written in row-major order of
// the kept dims. `ordered`: r uses the flat index of the reduced elements (argmax).
template <class R>
void run_reduction(const Tensor& in, const std::vector<bool>& mask, const R& r, bool ordered,
                   const char* op) {
  reduce::Geometry g = reduce::make_geometry(in, mask, ordered);
  if (g.nout == 0) return;
  DeviceGuard guard(in->device().index);
  cudaStream_t stream = current_stream();
  const Dims kept = red::make_dims(g.ksizes, g.kstrides, op);
  const Dims rd = red::make_dims(g.rsizes, g.rstrides, op);
  const auto* base = in->template data_as<typename R::in_t>();
  const int64_t nout = g.nout, nred = g.nred;
  const bool columns =
      !g.ksizes.empty() && g.kstrides.back() == 1 && !g.rsizes.empty() && g.rstrides.back() != 1;
  if (nred <= 32) {
    reduce_thread_kernel<R>
        <<<blocks_for(nout), kBlockSize, 0, stream>>>(base, kept, rd, nred, nout, r);
    check_launch(op);
    return;
  }
  const int sms = sm_count(current_device());
  using Acc = typename R::acc_t;
  if (columns && columns_by_packs(base, g)) {
    const int64_t npacks = nout / Pack<typename R::in_t>::kN;
    int64_t ntiles = 0;
    const int per_sm = column_packs_resident<R>(current_device());
    const Split s = split_column_packs(npacks, nred, sms, per_sm, &ntiles);
    Tensor parts;
    Acc* partials = nullptr;
    if (s.nchunks > 1) {
      parts = red::scratch(nout * s.nchunks * static_cast<int64_t>(sizeof(Acc)), in->device());
      partials = reinterpret_cast<Acc*>(parts->data());
    }
    const unsigned grid =
        static_cast<unsigned>(std::min<int64_t>(ntiles * s.nchunks, int64_t(1) << 20));
    reduce_column_packs_kernel<R><<<grid, kBlockSize, 0, stream>>>(
        base, kept, rd, nred, s.chunk, s.nchunks, ntiles, npacks, r, partials);
    check_launch(op);
    if (s.nchunks > 1) {
      const int64_t tiles2 = (nout + kColLanes - 1) / kColLanes;
      const unsigned g2 = static_cast<unsigned>(std::min<int64_t>(tiles2, int64_t(1) << 20));
      reduce_column_partials_kernel<R><<<g2, kBlockSize, 0, stream>>>(partials, s.nchunks, nout, r);
      check_launch(op);
    }
    return;
  }
  const bool by_columns = columns && nout >= kWarpSize / 2;
  Split s;
  int64_t nitems = 0, ntiles = 0;
  if (by_columns) {
    s = split_columns(nout, nred, sms, &ntiles);
    nitems = ntiles * s.nchunks;
  } else {
    s = split_reduction(nout, nred, sms);
    nitems = nout * s.nchunks;
  }
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(nitems, int64_t(1) << 20));
  Tensor parts;
  Acc* partials = nullptr;
  if (s.nchunks > 1) {
    parts = red::scratch(nout * s.nchunks * static_cast<int64_t>(sizeof(Acc)), in->device());
    partials = reinterpret_cast<Acc*>(parts->data());
  }
  if (by_columns) {
    reduce_columns_kernel<R><<<grid, kBlockSize, 0, stream>>>(base, kept, rd, nred, s.chunk,
                                                              s.nchunks, ntiles, nout, r, partials);
  } else if (rd.n == 1 && rd.stride[0] == 1) {
    reduce_contig_kernel<R><<<grid, kBlockSize, 0, stream>>>(base, kept, nred, s.chunk, s.nchunks,
                                                             nitems, r, partials);
  } else {
    reduce_block_kernel<R><<<grid, kBlockSize, 0, stream>>>(base, kept, rd, nred, s.chunk,
                                                            s.nchunks, nitems, r, partials);
  }
  check_launch(op);
  if (s.nchunks > 1) {
    const unsigned g2 = static_cast<unsigned>(std::min<int64_t>(nout, int64_t(1) << 20));
    reduce_partials_kernel<R><<<g2, kBlockSize, 0, stream>>>(partials, s.nchunks, nout, r);
    check_launch(op);
  }
}

// ---- reducers ----------------------------------------------------------------------------------

enum class SumMode { Sum, NanSum, Prod };

// sum / nansum / prod / mean: floating inputs write their own type, others int64.
template <class T>
struct SumR {
  using in_t = T;
  using acc_t = sum_acc_t<T>;
  using Out = std::conditional_t<is_float_v<T>, T, int64_t>;
  Out* out;
  SumMode mode;
  double div;
  __device__ acc_t identity() const { return mode == SumMode::Prod ? acc_t(1) : acc_t(0); }
  __device__ void step(acc_t& a, dev_opmath_t<T> x, int64_t) const {
    acc_t v = static_cast<acc_t>(x);
    if (mode == SumMode::Prod) {
      a *= v;
    } else {
      if (mode == SumMode::NanSum && isnan_v(v)) v = acc_t(0);
      a += v;
    }
  }
  __device__ acc_t combine(acc_t a, acc_t b) const { return mode == SumMode::Prod ? a * b : a + b; }
  __device__ void write(int64_t o, acc_t a) const {
    if constexpr (is_float_v<T>) {
      out[o] = from_op<T>(div == 1.0 ? a : static_cast<acc_t>(static_cast<double>(a) / div));
    } else {
      out[o] = static_cast<Out>(a);
    }
  }
};

template <class T>
struct NanMeanAcc {
  sum_acc_t<T> s;
  int64_t n;
};

template <class T>
struct NanMeanR {
  using in_t = T;
  using acc_t = NanMeanAcc<T>;
  T* out;
  __device__ acc_t identity() const { return acc_t{0, 0}; }
  __device__ void step(acc_t& a, dev_opmath_t<T> x, int64_t) const {
    if (!isnan_v(x)) {
      a.s += static_cast<sum_acc_t<T>>(x);
      a.n += 1;
    }
  }
  __device__ acc_t combine(acc_t a, acc_t b) const { return acc_t{a.s + b.s, a.n + b.n}; }
  __device__ void write(int64_t o, acc_t a) const {
    out[o] = from_op<T>(static_cast<double>(a.s) / static_cast<double>(a.n));
  }
};

template <class V>
struct ValIdx {
  V v;
  int64_t i;  // -1: nothing seen yet
};

// max / min / argmax / argmin / amax / amin: the first extremum, or the first NaN (NaN wins).
template <class T>
struct ExtR {
  using in_t = T;
  using V = dev_opmath_t<T>;
  using acc_t = ValIdx<V>;
  T* val_out;        // may be null
  int64_t* idx_out;  // may be null
  bool is_max;
  __device__ acc_t identity() const { return acc_t{V(0), -1}; }
  // Whether (x at ix) beats (c at ic).
  __device__ bool beats(V x, int64_t ix, V c, int64_t ic) const {
    const bool xn = isnan_v(x), cn = isnan_v(c);
    if (xn || cn) return xn && (!cn || ix < ic);
    if (x == c) return ix < ic;
    return is_max ? x > c : x < c;
  }
  __device__ void step(acc_t& a, V x, int64_t j) const {
    if (a.i < 0 || beats(x, j, a.v, a.i)) a = acc_t{x, j};
  }
  __device__ acc_t combine(acc_t a, acc_t b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    return beats(b.v, b.i, a.v, a.i) ? b : a;
  }
  __device__ void write(int64_t o, acc_t a) const {
    if (val_out) val_out[o] = from_op<T>(a.v);
    if (idx_out) idx_out[o] = a.i;
  }
};

struct VarAcc {
  double n, mean, m2;
};

template <class T>
struct VarR {
  using in_t = T;
  using acc_t = VarAcc;
  T* out;
  T* mean_out;  // may be null
  double correction;
  bool take_sqrt;
  __device__ acc_t identity() const { return VarAcc{0, 0, 0}; }
  __device__ void step(acc_t& a, dev_opmath_t<T> x, int64_t) const {
    const double v = static_cast<double>(x);
    a.n += 1;
    const double d = v - a.mean;
    a.mean += d / a.n;
    a.m2 += d * (v - a.mean);
  }
  __device__ acc_t combine(acc_t a, acc_t b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    VarAcc r;
    r.n = a.n + b.n;
    const double d = b.mean - a.mean;
    r.mean = a.mean + d * (b.n / r.n);
    r.m2 = a.m2 + b.m2 + d * d * (a.n * b.n / r.n);
    return r;
  }
  __device__ void write(int64_t o, acc_t a) const {
    const double var = a.m2 / fmax(0.0, a.n - correction);
    out[o] = from_op<T>(take_sqrt ? sqrt(var) : var);
    if (mean_out) mean_out[o] = from_op<T>(a.n == 0 ? CUDART_NAN : a.mean);
  }
};

template <class T>
struct NormR {
  using in_t = T;
  using acc_t = double;
  T* out;
  NormKind kind;
  double p;
  __device__ static double pick(bool is_max, double a, double x) {
    bool better = is_max ? (x > a) : (x < a);
    return (better || x != x) ? x : a;
  }
  __device__ acc_t identity() const { return kind == NormKind::NegInf ? CUDART_INF : 0.0; }
  __device__ void step(acc_t& a, dev_opmath_t<T> x, int64_t) const {
    const double v = fabs(static_cast<double>(x));
    switch (kind) {
      case NormKind::Two:
        a += v * v;
        break;
      case NormKind::One:
        a += v;
        break;
      case NormKind::Inf:
        a = pick(true, a, v);
        break;
      case NormKind::NegInf:
        a = pick(false, a, v);
        break;
      case NormKind::Zero:
        a += (v != 0) ? 1.0 : 0.0;
        break;
      case NormKind::P:
        a += pow(v, p);
        break;
    }
  }
  __device__ acc_t combine(acc_t a, acc_t b) const {
    if (kind == NormKind::Inf) return pick(true, a, b);
    if (kind == NormKind::NegInf) return pick(false, a, b);
    return a + b;
  }
  __device__ void write(int64_t o, acc_t a) const {
    if (kind == NormKind::Two) a = sqrt(a);
    if (kind == NormKind::P) a = pow(a, 1.0 / p);
    out[o] = from_op<T>(a);
  }
};

enum class NzMode { All, Any, Count };

// all / any / count_nonzero: counts the nonzero elements.
template <class T>
struct NonzeroR {
  using in_t = T;
  using acc_t = int64_t;
  void* out;
  NzMode mode;
  int64_t nred;
  __device__ acc_t identity() const { return 0; }
  __device__ void step(acc_t& a, dev_opmath_t<T> x, int64_t) const {
    a += (x != dev_opmath_t<T>(0)) ? 1 : 0;
  }
  __device__ acc_t combine(acc_t a, acc_t b) const { return a + b; }
  __device__ void write(int64_t o, acc_t a) const {
    if (mode == NzMode::Count) {
      static_cast<int64_t*>(out)[o] = a;
    } else {
      static_cast<uint8_t*>(out)[o] = mode == NzMode::All ? (a == nred) : (a > 0);
    }
  }
};

// ---- op bodies ---------------------------------------------------------------------------------

Tensor cast_to(const Tensor& t, ScalarType dt, const char* op) {
  if (t->dtype() == dt) return t;
  return red::contiguous_as(t, dt, DimVector{}, op);
}

Tensor sum_impl(const Tensor& x, const std::vector<bool>& mask, bool keepdim, SumMode mode,
                double div, const char* op) {
  const ScalarType st = x->dtype();
  Tensor out =
      ember::empty(reduced_sizes(x->sizes(), mask, keepdim), reduce::sum_dtype(st), x->device());
  EMBER_DISPATCH_ALL_AND_UINT(st, op, [&] {
    SumR<scalar_t> r;
    r.out = out->data_as<typename SumR<scalar_t>::Out>();
    r.mode = mode;
    r.div = div;
    run_reduction(x, mask, r, false, op);
  });
  return out;
}

std::tuple<Tensor, Tensor> ext_impl(const Tensor& self, const std::vector<bool>& mask, bool keepdim,
                                    bool is_max, bool want_values, bool want_indices,
                                    const char* op) {
  DimVector shape = reduced_sizes(self->sizes(), mask, keepdim);
  Tensor val = want_values ? ember::empty(shape, self->dtype(), self->device()) : Tensor();
  Tensor idx = want_indices ? ember::empty(shape, ScalarType::Int64, self->device()) : Tensor();
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    ExtR<scalar_t> r;
    r.val_out = want_values ? val->data_as<scalar_t>() : nullptr;
    r.idx_out = want_indices ? idx->data_as<int64_t>() : nullptr;
    r.is_max = is_max;
    run_reduction(self, mask, r, true, op);
  });
  return {val, idx};
}

Tensor amax_impl(const Tensor& self, const std::vector<bool>& mask, bool keepdim, bool is_max,
                 const char* op) {
  reduce::check_no_empty_reduced_dim(self, mask, op);
  return std::get<0>(ext_impl(self, mask, keepdim, is_max, true, false, op));
}

// The Welford reduction of var / std into the outputs of `plan` (reduce::VarOps).
struct CudaVar {
  static void var_into(const Tensor& self, const reduce::VarPlan& plan, const char* op) {
    EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
      VarR<scalar_t> r;
      r.out = plan.out->data_as<scalar_t>();
      r.mean_out = plan.mean ? plan.mean->data_as<scalar_t>() : nullptr;
      r.correction = plan.correction;
      r.take_sqrt = plan.take_sqrt;
      run_reduction(self, plan.mask, r, false, op);
    });
  }
};
using VarOps = reduce::VarOps<CudaVar>;

// with_uint: uint16/32/64 are taken (all, any, and count_nonzero over given dims).
Tensor nonzero_impl(const Tensor& self, const std::vector<bool>& mask, bool keepdim, NzMode mode,
                    ScalarType out_type, const char* op, bool with_uint) {
  Tensor out = ember::empty(reduced_sizes(self->sizes(), mask, keepdim), out_type, self->device());
  const int64_t nred = reduced_numel(self->sizes(), mask);
  auto body = [&](auto tag) {
    NonzeroR<decltype(tag)> r;
    r.out = out->data();
    r.mode = mode;
    r.nred = nred;
    run_reduction(self, mask, r, false, op);
  };
  if (with_uint) {
    EMBER_DISPATCH_ALL_AND_UINT(self->dtype(), op, [&] { body(scalar_t{}); });
  } else {
    EMBER_DISPATCH_ALL(self->dtype(), op, [&] { body(scalar_t{}); });
  }
  return out;
}

Tensor all_any_impl(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
                    bool is_all, const char* op) {
  std::vector<bool> mask = reduce::all_any_mask(self, dim, op);
  ScalarType ot = reduce::all_any_dtype(self->dtype());
  return nonzero_impl(self, mask, keepdim, is_all ? NzMode::All : NzMode::Any, ot, op, true);
}

// ---- ops ---------------------------------------------------------------------------------------

Tensor sum(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
           std::optional<ScalarType> dtype) {
  reduce::check_sum_dtype_arg(dtype, "sum");
  auto mask = dim_mask(dim, self->dim(), "sum");
  Tensor x = dtype ? cast_to(self, *dtype, "sum") : self;
  Tensor out = sum_impl(x, mask, keepdim, SumMode::Sum, 1.0, "sum");
  return dtype ? cast_to(out, *dtype, "sum") : out;
}

Tensor nansum(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
              std::optional<ScalarType> dtype) {
  reduce::check_sum_dtype_arg(dtype, "nansum");
  auto mask = dim_mask(dim, self->dim(), "nansum");
  Tensor x = self;
  // A NaN counts as 0 before a cast to an integer or bool dtype (as on the CPU)
  if (dtype && is_floating(self->dtype()) && !is_floating(*dtype) && !is_complex(*dtype))
    x = dispatch::where(dispatch::isnan(self, Tensor()), Scalar(0.0), self, Tensor());
  x = dtype ? cast_to(x, *dtype, "nansum") : x;
  Tensor out = sum_impl(x, mask, keepdim, SumMode::NanSum, 1.0, "nansum");
  return dtype ? cast_to(out, *dtype, "nansum") : out;
}

Tensor mean(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
            std::optional<ScalarType> dtype) {
  reduce::check_mean_dtype(self, dtype);
  auto mask = dim_mask(dim, self->dim(), "mean");
  Tensor x = dtype ? cast_to(self, *dtype, "mean") : self;
  return sum_impl(x, mask, keepdim, SumMode::Sum,
                  static_cast<double>(reduced_numel(x->sizes(), mask)), "mean");
}

Tensor nanmean(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
               std::optional<ScalarType> dtype) {
  reduce::check_nanmean_dtype(self, dtype);
  Tensor x = dtype ? cast_to(self, *dtype, "nanmean") : self;
  auto mask = dim_mask(dim, x->dim(), "nanmean");
  EMBER_CHECK(is_floating(x->dtype()), "nanmean(): dtype must be floating point (got ",
              torch_type_name(x->dtype()), ")");
  Tensor out = ember::empty(reduced_sizes(x->sizes(), mask, keepdim), x->dtype(), x->device());
  EMBER_DISPATCH_FLOAT(x->dtype(), "nanmean", [&] {
    NanMeanR<scalar_t> r;
    r.out = out->data_as<scalar_t>();
    run_reduction(x, mask, r, false, "nanmean");
  });
  return out;
}

Tensor prod(const Tensor& self, std::optional<int64_t> dim, bool keepdim,
            std::optional<ScalarType> dtype) {
  reduce::check_sum_dtype_arg(dtype, "prod");
  auto mask = dim_mask(dim, self->dim(), "prod");
  Tensor x = dtype ? cast_to(self, *dtype, "prod") : self;
  Tensor out = sum_impl(x, mask, keepdim, SumMode::Prod, 1.0, "prod");
  return dtype ? cast_to(out, *dtype, "prod") : out;
}

Tensor max_all(const Tensor& self) {
  auto mask = std::vector<bool>(self->dim(), true);
  reduce::check_nonempty(self, mask, false, "max", ErrorKind::Runtime);
  return amax_impl(self, mask, false, true, "max");
}

Tensor min_all(const Tensor& self) {
  auto mask = std::vector<bool>(self->dim(), true);
  reduce::check_nonempty(self, mask, false, "min", ErrorKind::Runtime);
  return amax_impl(self, mask, false, false, "min");
}

std::tuple<Tensor, Tensor> max_dim(const Tensor& self, int64_t dim, bool keepdim) {
  auto mask = dim_mask(std::optional<int64_t>(dim), self->dim(), "max");
  reduce::check_nonempty(self, mask, true, "max");
  return ext_impl(self, mask, keepdim, true, true, true, "max");
}

std::tuple<Tensor, Tensor> min_dim(const Tensor& self, int64_t dim, bool keepdim) {
  auto mask = dim_mask(std::optional<int64_t>(dim), self->dim(), "min");
  reduce::check_nonempty(self, mask, true, "min");
  return ext_impl(self, mask, keepdim, false, true, true, "min");
}

Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  reduce::check_arg_reduction_dtype(self, "argmax");
  auto mask = dim_mask(dim, self->dim(), "argmax");
  reduce::check_nonempty(self, mask, dim.has_value(), "argmax");
  return std::get<1>(ext_impl(self, mask, keepdim, true, false, true, "argmax"));
}

Tensor argmin(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  reduce::check_arg_reduction_dtype(self, "argmin");
  auto mask = dim_mask(dim, self->dim(), "argmin");
  reduce::check_nonempty(self, mask, dim.has_value(), "argmin");
  return std::get<1>(ext_impl(self, mask, keepdim, false, false, true, "argmin"));
}

Tensor amax(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  reduce::check_amax_dims(self, dim, "amax");
  return amax_impl(self, dim_mask(dim, self->dim(), "amax"), keepdim, true, "amax");
}

Tensor amin(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  reduce::check_amax_dims(self, dim, "amin");
  return amax_impl(self, dim_mask(dim, self->dim(), "amin"), keepdim, false, "amin");
}

std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  auto mask = reduce::aminmax_mask(self, dim);
  return {amax_impl(self, mask, keepdim, false, "aminmax"),
          amax_impl(self, mask, keepdim, true, "aminmax")};
}

Tensor norm(const Tensor& self, const std::optional<Scalar>& p, const std::optional<DimVector>& dim,
            bool keepdim, std::optional<ScalarType> dtype) {
  reduce::check_norm_dtype(self, dtype);
  Tensor x = dtype ? cast_to(self, *dtype, "norm") : self;
  auto mask = dim_mask(dim, x->dim(), "norm");
  const double pv = p ? p->to_double() : 2.0;
  const NormKind kind = reduce::norm_kind(x, mask, pv);
  Tensor out = ember::empty(reduced_sizes(x->sizes(), mask, keepdim), x->dtype(), x->device());
  EMBER_DISPATCH_FLOAT(x->dtype(), "norm", [&] {
    NormR<scalar_t> r;
    r.out = out->data_as<scalar_t>();
    r.kind = kind;
    r.p = pv;
    run_reduction(x, mask, r, false, "norm");
  });
  return out;
}

Tensor all(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  return all_any_impl(self, dim, keepdim, true, "all");
}

Tensor any(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  return all_any_impl(self, dim, keepdim, false, "any");
}

Tensor count_nonzero(const Tensor& self, const std::optional<DimVector>& dim) {
  auto mask = dim_mask(dim, self->dim(), "count_nonzero");
  // PyTorch counts uint16/32/64 over given dims ((self != 0).sum(dim)), not over all of them
  return nonzero_impl(self, mask, false, NzMode::Count, ScalarType::Int64, "count_nonzero",
                      dim && !dim->empty());
}

// ---- scans -------------------------------------------------------------------------------------

// (outer, n, inner) view of a contiguous tensor around dim d.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};

Lines lines_of(const Tensor& t, int64_t d) {
  Lines l;
  for (int64_t i = 0; i < t->dim(); ++i) {
    if (i < d) l.outer *= t->size(i);
    if (i == d) l.n = t->size(i);
    if (i > d) l.inner *= t->size(i);
  }
  return l;
}

template <class T>
__global__ void cum_kernel(const T* src, T* dst, int64_t outer, int64_t n, int64_t inner,
                           bool is_prod) {
  using Acc = std::conditional_t<is_float_v<T>, double, int64_t>;
  const int64_t nlines = outer * inner;
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < nlines;
       l += int64_t(gridDim.x) * blockDim.x) {
    const int64_t off = (l / inner) * n * inner + l % inner;
    Acc a = is_prod ? Acc(1) : Acc(0);
    for (int64_t i = 0; i < n; ++i) {
      const Acc x = static_cast<Acc>(ld(src + off + i * inner));
      a = is_prod ? a * x : a + x;
      // Through the compute type, as the CPU kernel rounds.
      dst[off + i * inner] = from_op<T>(static_cast<dev_opmath_t<T>>(a));
    }
  }
}

template <class T>
__global__ void cumext_kernel(const T* src, T* vo, int64_t* io, int64_t outer, int64_t n,
                              int64_t inner, bool is_max) {
  using V = dev_opmath_t<T>;
  const int64_t nlines = outer * inner;
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < nlines;
       l += int64_t(gridDim.x) * blockDim.x) {
    const int64_t off = (l / inner) * n * inner + l % inner;
    V best = ld(src + off);
    int64_t bi = 0;
    for (int64_t i = 0; i < n; ++i) {
      const V x = ld(src + off + i * inner);
      // Ties move the index forward; a NaN always takes over and then stays.
      if (isnan_v(x) || (!isnan_v(best) && (is_max ? x >= best : x <= best))) {
        best = x;
        bi = i;
      }
      vo[off + i * inner] = from_op<T>(best);
      io[off + i * inner] = bi;
    }
  }
}

Tensor cum_impl(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, bool is_prod,
                const char* op) {
  const int64_t d = wrap_dim(dim, self->dim(), op);
  const ScalarType ot = dtype ? *dtype : reduce::sum_dtype(self->dtype());
  reduce::check_cum_dtype(ot, op);
  Tensor out = ember::empty(self->sizes(), ot, self->device());
  if (self->numel() == 0) return out;
  DeviceGuard guard(self->device().index);
  Tensor x = red::contiguous_as(self, ot, DimVector{}, op);
  const Lines l = lines_of(x, d);
  EMBER_DISPATCH_ALL(ot, op, [&] {
    cum_kernel<scalar_t><<<blocks_for(l.outer * l.inner), kBlockSize, 0, current_stream()>>>(
        x->data_as<scalar_t>(), out->data_as<scalar_t>(), l.outer, l.n, l.inner, is_prod);
    check_launch(op);
  });
  return out;
}

std::tuple<Tensor, Tensor> cumext_impl(const Tensor& self, int64_t dim, bool is_max,
                                       const char* op) {
  const int64_t d = wrap_dim(dim, self->dim(), op);
  Tensor values = ember::empty(self->sizes(), self->dtype(), self->device());
  Tensor indices = ember::empty(self->sizes(), ScalarType::Int64, self->device());
  if (self->numel() == 0) return {values, indices};
  DeviceGuard guard(self->device().index);
  Tensor x = red::contiguous_as(self, self->dtype(), DimVector{}, op);
  const Lines l = lines_of(x, d);
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    cumext_kernel<scalar_t><<<blocks_for(l.outer * l.inner), kBlockSize, 0, current_stream()>>>(
        x->data_as<scalar_t>(), values->data_as<scalar_t>(), indices->data_as<int64_t>(), l.outer,
        l.n, l.inner, is_max);
    check_launch(op);
  });
  return {values, indices};
}

Tensor cumsum(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return cum_impl(self, dim, dtype, false, "cumsum");
}

Tensor cumprod(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return cum_impl(self, dim, dtype, true, "cumprod");
}

std::tuple<Tensor, Tensor> cummax(const Tensor& self, int64_t dim) {
  return cumext_impl(self, dim, true, "cummax");
}

std::tuple<Tensor, Tensor> cummin(const Tensor& self, int64_t dim) {
  return cumext_impl(self, dim, false, "cummin");
}

void register_reduce() {
  register_kernel("sum", DeviceType::CUDA, &sum);
  register_kernel("nansum", DeviceType::CUDA, &nansum);
  register_kernel("mean", DeviceType::CUDA, &mean);
  register_kernel("nanmean", DeviceType::CUDA, &nanmean);
  register_kernel("prod", DeviceType::CUDA, &prod);
  register_kernel("max", DeviceType::CUDA, &max_all);
  register_kernel("max", DeviceType::CUDA, &max_dim);
  register_kernel("min", DeviceType::CUDA, &min_all);
  register_kernel("min", DeviceType::CUDA, &min_dim);
  register_kernel("argmax", DeviceType::CUDA, &argmax);
  register_kernel("argmin", DeviceType::CUDA, &argmin);
  register_kernel("amax", DeviceType::CUDA, &amax);
  register_kernel("amin", DeviceType::CUDA, &amin);
  register_kernel("aminmax", DeviceType::CUDA, &aminmax);
  register_kernel("var", DeviceType::CUDA, &VarOps::var);
  register_kernel("std", DeviceType::CUDA, &VarOps::std);
  register_kernel("var_mean", DeviceType::CUDA, &VarOps::var_mean);
  register_kernel("std_mean", DeviceType::CUDA, &VarOps::std_mean);
  register_kernel("norm", DeviceType::CUDA, &norm);
  register_kernel("all", DeviceType::CUDA, &all);
  register_kernel("any", DeviceType::CUDA, &any);
  register_kernel("count_nonzero", DeviceType::CUDA, &count_nonzero);
  register_kernel("cumsum", DeviceType::CUDA, &cumsum);
  register_kernel("cumprod", DeviceType::CUDA, &cumprod);
  register_kernel("cummax", DeviceType::CUDA, &cummax);
  register_kernel("cummin", DeviceType::CUDA, &cummin);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_reduce)
