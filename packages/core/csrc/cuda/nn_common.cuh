// Helpers shared by the CUDA nn kernels (nn_softmax.cu, nn_norm.cu, nn_loss.cu,
// nn_embedding.cu; the floating dtype dispatch also nn_conv.cu, nn_pool.cu, nn_upsample.cu):
// "teams" of threads that reduce one row together (a single thread, a warp or a whole block), their
// sums and max+sum merges, contiguous converted copies, and the device error flag that bounds
// checks in kernels report through (read back on the host, which then raises the CPU kernel's
// exception).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/tensor.h"
#include "cuda/cuda_context.h"
#include "cuda/device_checks.h"
#include "cuda/device_types.cuh"
#include "cuda/index_common.cuh"
#include "cuda/pointwise_math.cuh"
#include "cuda/reduce_utils.cuh"

namespace ember {
namespace cuda {
namespace nnk {

// ---- teams ------------------------------------------------------------------------------------
// A team owns one row: kThread (one thread per row: strided rows, adjacent threads on adjacent
// columns), kWarp (32 lanes per row, 8 rows per 256-thread block: short rows) or kBlock (one
// block per row: long rows). Every thread of a team gets the team's reductions; a whole team
// is either inside or outside the row range, so shuffles and barriers are never divergent.
enum TeamMode : int { kThread = 0, kWarp = 1, kBlock = 2 };
constexpr int kTeamBlock = 256;  // threads per block for kThread / kWarp
constexpr int kRowBlock = 512;   // threads per block for kBlock

struct Team {
  int64_t id;  // the row
  int rank, size;
};

__device__ __forceinline__ Team make_team(int mode) {
  const int64_t gt = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (mode == kThread) return {gt, 0, 1};
  if (mode == kWarp) return {gt >> 5, static_cast<int>(threadIdx.x & 31), 32};
  return {int64_t(blockIdx.x), static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
}

// Host: the mode for rows of n elements with element stride `stride`, and the launch geometry.
inline int team_mode(int64_t n, int64_t stride) {
  if (stride != 1) return kThread;
  return n <= 1024 ? kWarp : kBlock;
}
inline unsigned team_blocks(int mode, int64_t rows) {
  if (mode == kBlock) return static_cast<unsigned>(rows);
  const int64_t threads = mode == kWarp ? rows * 32 : rows;
  return static_cast<unsigned>((threads + kTeamBlock - 1) / kTeamBlock);
}
inline unsigned team_threads(int mode) { return mode == kBlock ? kRowBlock : kTeamBlock; }

// Max and sum of exp(x - max) of a stretch of a row, merged online.
template <class A>
struct MaxSum {
  A m, s;
};

template <class V>
__device__ __forceinline__ V shfl_xor(V v, int o) {
  return __shfl_xor_sync(0xffffffffu, v, o);
}
template <class A>
__device__ __forceinline__ MaxSum<A> shfl_xor(MaxSum<A> v, int o) {
  return {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
}

struct Add {
  template <class V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return a + b;
  }
};

// Merge of two (max, sum) pairs. Maxima are never NaN (a NaN element only poisons the sum), and a
// sum of 0 (nothing but -inf seen) adds nothing, so -inf rows do not turn into NaN here.
struct MergeMaxSum {
  template <class A>
  __device__ __forceinline__ MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
    if (b.m > a.m) {
      const MaxSum<A> t = a;
      a = b;
      b = t;
    }
    return {a.m, a.s + (b.s == A(0) ? A(0) : b.s * dm::exp(b.m - a.m))};
  }
};

// Adds x into a running (max, sum): the NaN-propagating online softmax step.
template <class A>
__device__ __forceinline__ void maxsum_step(MaxSum<A>& ms, A x) {
  if (x > ms.m) {
    // x - x + 1 is 1 for a finite x (from -inf: 0 * 0 + 1) and NaN for x = +inf: a row whose
    // maximum is +inf sums to NaN, as exp(inf - inf) makes it in the CPU's two-pass form (a
    // plain + 1 gave such rows 0 for the finite elements and NaN only at the inf).
    ms.s = ms.s * dm::exp(ms.m - x) + (x - x + A(1));
    ms.m = x;
  } else if (x != -std::numeric_limits<A>::infinity()) {
    ms.s += dm::exp(x - ms.m);  // NaN x: the sum becomes NaN
  }
}

// The team's reduction of v (every thread of the team gets it). kBlock needs blockDim.x a
// multiple of 32 and uses a shared buffer; it synchronizes the block.
template <class V, class Op>
__device__ __forceinline__ V team_reduce(V v, int mode, const Op& op) {
  if (mode == kThread) return v;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, shfl_xor(v, o));
  if (mode == kWarp) return v;
  __shared__ V buf[32];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();  // an earlier call's readers are done with buf
  if (lane == 0) buf[wid] = v;
  __syncthreads();
  V t = buf[0];
  for (int w = 1; w < nw; ++w) t = op(t, buf[w]);
  return t;
}

template <class A>
__device__ __forceinline__ A team_sum(A v, int mode) {
  return team_reduce(v, mode, Add{});
}

// Accumulation type of the row statistics: float for the 16-bit floats and float32, double for
// float64 (as the CPU kernels' opmath_t).
template <class T>
using acc_t = dev_opmath_t<T>;

// ---- host helpers -----------------------------------------------------------------------------

// Runs f(T()) with T the element type of the floating dtype dt (float, double, Half, BFloat16);
// any other dtype raises "<op>: expected a floating-point <what>, got <dtype>".
template <class F>
void dispatch_floating(ScalarType dt, const char* op, const char* what, const F& f) {
  switch (dt) {
    case ScalarType::Float32:
      return f(float());
    case ScalarType::Float64:
      return f(double());
    case ScalarType::Float16:
      return f(Half());
    case ScalarType::BFloat16:
      return f(BFloat16());
    default:
      EMBER_FAIL(Type, op, ": expected a floating-point ", what, ", got ", dtype_name(dt));
  }
}

// A contiguous copy of t (on its device) in dtype dt; t itself when it already is one. The
// caller holds a DeviceGuard for t's device (the copy goes on its current stream).
inline Tensor contig(const Tensor& t, ScalarType dt, const char* op) {
  if (t->dtype() == dt && t->is_contiguous()) return t;
  return red::contiguous_as(t, dt, DimVector{}, op);
}
inline Tensor contig(const Tensor& t, const char* op) { return contig(t, t->dtype(), op); }

// Every tensor of an op on the CUDA device of `ref` (null tensors are skipped).
inline void check_device(const Tensor& ref, const Tensor& t, const char* op, const char* what) {
  ix::check_same_device(ref, t, op, what);
}

// The first offending value a kernel found (flag 0: none), reported into an error check's slot
// (device_checks.h: raised right after the op's launches, or at the next wait when deferred).
using ErrorSlot = checks::Slot;

__device__ __forceinline__ void report_error(ErrorSlot* e, int64_t value) {
  if (atomicCAS(&e->flag, 0, 1) == 0) e->value = value;
}

// The check over an op's launches on t's device and current stream.
inline checks::DeviceCheck error_check(const Tensor& t, checks::Describe describe) {
  return checks::DeviceCheck(ix::device_index(t), ix::stream_of(t), std::move(describe));
}

}  // namespace nnk
}  // namespace cuda
}  // namespace ember
