// Depthwise convolution kernels (nn_conv_depthwise.h): x (N, C, H, W) * w (Co = C * M, 1, KH, KW)
// = y (N, Co, Ho, Wo), every operand contiguous.
//
// - forward: one thread per output element (n, co, oh, ow) sums its KH x KW taps of input
//   channel co / M, then adds the bias, in the compute type (float for float16 / bfloat16, double
//   for float64), and rounds once.
// - input gradient: one thread per input element (n, c, ih, iw) gathers, for each of its M output
//   channels, the taps (oh, ow) whose window covers it: oh * sh = ih + ph - kh * dh (and alike for
//   w). A gather, so no atomics.
// - weight gradient: gw[co, kh, kw] = sum over (n, oh, ow) of dy[n, co, oh, ow] * x[n, co / M,
//   oh * sh - ph + kh * dh, ow * sw - pw + kw * dw]. The N * Ho * Wo terms of a row (co, or
//   (co, tap)) are cut into S contiguous slices; block (row, slice) walks its slice with its 256
//   threads (dy read coalesced), each thread summing its terms in order, then the block sums its
//   threads by warp butterflies and one warp over the warps' totals, and writes one partial per
//   tap; a second kernel adds each weight element's S partials in slice order. The plan depends
//   on the sizes alone, so the result is the same bits every run.
// With 3x3 or 5x5 kernels the tap loops are unrolled (the weight gradient then keeps all taps of
// one co in registers, one block per (co, slice)); the input gradient also has stride 1 and 2
// forms. Index math is 32-bit when every tensor has fewer than 2^31 elements and the padded
// images fit 2^30 (the linear index is split once per thread); a 64-bit form covers the rest.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_registry.h"
#include "cuda/cudnn_conv.h"
#include "cuda/device_types.cuh"
#include "cuda/nn_common.cuh"
#include "cuda/nn_conv_depthwise.h"

namespace ember {
namespace cuda {
namespace depthwise {

namespace {
std::atomic<bool> g_native{true};
std::atomic<int64_t> g_passes{0};
}  // namespace

bool native_enabled() { return g_native.load(std::memory_order_relaxed); }
void set_native_enabled(bool on) { g_native.store(on, std::memory_order_relaxed); }
int64_t native_passes() { return g_passes.load(std::memory_order_relaxed); }

bool use_native(const nn::ConvArgs& a, const Tensor& input, const Tensor& weight, bool transposed) {
  if (!native_enabled() || transposed) return false;
  if (a.k < 1 || a.k > 2 || a.G != a.C || a.G < 2 || a.Co % a.C != 0) return false;
  if (input->numel() == 0 || weight->numel() == 0 || a.N == 0 || a.Co == 0) return false;
  const ScalarType dt = input->dtype();
  if (dt != ScalarType::Float32 && dt != ScalarType::Float64 && dt != ScalarType::Float16 &&
      dt != ScalarType::BFloat16)
    return false;
  if (weight->dtype() != dt) return false;
  const bool cl = a.k == 2 && (cudnn::is_channels_last(input) || cudnn::is_channels_last(weight));
  return !(cl && cudnn::usable(dt));
}

Params make_params(int64_t N, int64_t C, int64_t Co, const nn::WindowGeom& g) {
  Params p;
  p.N = N;
  p.C = C;
  p.M = Co / C;
  p.H = g.in[1];
  p.W = g.in[2];
  p.Ho = g.out[1];
  p.Wo = g.out[2];
  p.KH = g.ks[1];
  p.KW = g.ks[2];
  p.sh = g.st[1];
  p.sw = g.st[2];
  p.ph = g.pd[1];
  p.pw = g.pd[2];
  p.dh = g.dl[1];
  p.dw = g.dl[2];
  return p;
}

namespace {

// The sizes in the kernels' index type I (int32_t or int64_t).
template <class I>
struct Dims {
  I N, C, M, Co, H, W, Ho, Wo, KH, KW, sh, sw, ph, pw, dh, dw;
};

template <class I>
Dims<I> dims_of(const Params& p) {
  return Dims<I>{I(p.N),  I(p.C),  I(p.M),  I(p.C * p.M), I(p.H),  I(p.W),  I(p.Ho), I(p.Wo),
                 I(p.KH), I(p.KW), I(p.sh), I(p.sw),      I(p.ph), I(p.pw), I(p.dh), I(p.dw)};
}

// Whether the 32-bit index math is exact: every linear index below 2^31, and every coordinate
// (the window positions lie within [-pad, in + pad), the gathered taps within
// [-(kernel span), in + pad]) far from 2^31.
bool fits_int32(const Params& p) {
  constexpr int64_t lim = int64_t(1) << 31, coord = int64_t(1) << 30;
  const int64_t Co = p.C * p.M;
  const int64_t xn = p.N * p.C * p.H * p.W, yn = p.N * Co * p.Ho * p.Wo, wn = Co * p.KH * p.KW;
  return xn < lim && yn < lim && wn < lim && p.H + 2 * p.ph < coord && p.W + 2 * p.pw < coord;
}

// The storage value at p in the compute type, through the read-only data cache.
template <class T>
__device__ __forceinline__ dev_opmath_t<T> ldg_op(const T* p) {
  if constexpr (std::is_same_v<T, Half>) {
    return __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(p))));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return __bfloat162float(
        __ushort_as_bfloat16(__ldg(reinterpret_cast<const unsigned short*>(p))));
  } else {
    return __ldg(p);
  }
}

// ---- forward ----------------------------------------------------------------------------------

// One thread per output element e = ((n * Co + co) * Ho + oh) * Wo + ow (grid-stride). KS > 0:
// a KS x KS kernel (unrolled); 0: any (d.KH x d.KW).
template <class T, class I, int KS>
__global__ void dw_forward_kernel(int64_t total, const T* __restrict__ x, const T* __restrict__ w,
                                  const T* __restrict__ bias, T* __restrict__ y, Dims<I> d) {
  using A = dev_opmath_t<T>;
  const I KH = KS > 0 ? I(KS) : d.KH, KW = KS > 0 ? I(KS) : d.KW;
  for (int64_t e64 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e64 < total;
       e64 += int64_t(gridDim.x) * blockDim.x) {
    const I e = static_cast<I>(e64);
    const I ow = e % d.Wo;
    I t = e / d.Wo;
    const I oh = t % d.Ho;
    t = t / d.Ho;
    const I co = t % d.Co;
    const I n = t / d.Co;
    const I c = d.M == 1 ? co : co / d.M;
    const T* xp = x + (n * d.C + c) * d.H * d.W;
    const T* wp = w + co * KH * KW;
    const I ih0 = oh * d.sh - d.ph, iw0 = ow * d.sw - d.pw;
    A acc = A(0);
#pragma unroll
    for (I kh = 0; kh < KH; ++kh) {
      const I ih = ih0 + kh * d.dh;
      if (ih < 0 || ih >= d.H) continue;
#pragma unroll
      for (I kw = 0; kw < KW; ++kw) {
        const I iw = iw0 + kw * d.dw;
        if (iw < 0 || iw >= d.W) continue;
        acc += ldg_op(wp + kh * KW + kw) * to_op<T>(xp[ih * d.W + iw]);
      }
    }
    if (bias) acc += ldg_op(bias + co);
    y[e] = from_op<T>(acc);
  }
}

// ---- input gradient ---------------------------------------------------------------------------

// One thread per input element e = ((n * C + c) * H + ih) * W + iw (grid-stride). KS as in the
// forward; ST > 0: both strides are ST (division by a constant); 0: any.
template <class T, class I, int KS, int ST>
__global__ void dw_input_grad_kernel(int64_t total, const T* __restrict__ go,
                                     const T* __restrict__ w, T* __restrict__ gi, Dims<I> d) {
  using A = dev_opmath_t<T>;
  const I KH = KS > 0 ? I(KS) : d.KH, KW = KS > 0 ? I(KS) : d.KW;
  const I sh = ST > 0 ? I(ST) : d.sh, sw = ST > 0 ? I(ST) : d.sw;
  for (int64_t e64 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e64 < total;
       e64 += int64_t(gridDim.x) * blockDim.x) {
    const I e = static_cast<I>(e64);
    const I iw = e % d.W;
    I t = e / d.W;
    const I ih = t % d.H;
    t = t / d.H;
    const I c = t % d.C;
    const I n = t / d.C;
    A acc = A(0);
    for (I m = 0; m < d.M; ++m) {
      const I co = c * d.M + m;
      const T* gp = go + (n * d.Co + co) * d.Ho * d.Wo;
      const T* wp = w + co * KH * KW;
#pragma unroll
      for (I kh = 0; kh < KH; ++kh) {
        const I th = ih + d.ph - kh * d.dh;  // = oh * sh when tap kh of window oh lands on ih
        if (th < 0) continue;
        const I oh = th / sh;
        if (oh * sh != th || oh >= d.Ho) continue;
#pragma unroll
        for (I kw = 0; kw < KW; ++kw) {
          const I tw = iw + d.pw - kw * d.dw;
          if (tw < 0) continue;
          const I ow = tw / sw;
          if (ow * sw != tw || ow >= d.Wo) continue;
          acc += ldg_op(wp + kh * KW + kw) * to_op<T>(gp[oh * d.Wo + ow]);
        }
      }
    }
    gi[e] = from_op<T>(acc);
  }
}

// ---- weight gradient --------------------------------------------------------------------------

constexpr int kWarps = kBlockSize / 32;
// Blocks the slicing aims for, and the fewest terms per thread worth a slice of its own.
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinTermsPerThread = 4;
constexpr int64_t kMaxSlices = 65535;  // gridDim.y

// The sum over the 32 lanes of a warp, in every lane (butterfly: the same order in each).
template <class A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block (row, slice): KS > 0: row = co, all KS * KS taps; KS == 0: row = co * K + tap, one tap.
// Sums terms r in [slice * chunk, min(R, (slice + 1) * chunk)), r = (n * Ho + oh) * Wo + ow, and
// writes partial[(co * K + tap) * S + slice] for each of its taps. blockDim.x == kBlockSize.
template <class T, class I, int KS>
__global__ void __launch_bounds__(kBlockSize)
    dw_weight_grad_kernel(const T* __restrict__ go, const T* __restrict__ x,
                          dev_opmath_t<T>* __restrict__ partial, Dims<I> d, int64_t R,
                          int64_t chunk) {
  using A = dev_opmath_t<T>;
  constexpr int NT = KS > 0 ? KS * KS : 1;
  const I KH = KS > 0 ? I(KS) : d.KH, KW = KS > 0 ? I(KS) : d.KW;
  const I K = KH * KW;
  const I row = static_cast<I>(blockIdx.x);
  const I co = KS > 0 ? row : row / K;
  const I tap0 = KS > 0 ? I(0) : row % K;  // the first tap of the block
  const I kh0 = tap0 / KW, kw0 = tap0 % KW;
  const I c = d.M == 1 ? co : co / d.M;
  const I HoWo = d.Ho * d.Wo;
  A acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = A(0);
  const int64_t r0 = int64_t(blockIdx.y) * chunk;
  const int64_t r1 = r0 + chunk < R ? r0 + chunk : R;
  for (int64_t r64 = r0 + threadIdx.x; r64 < r1; r64 += blockDim.x) {
    const I r = static_cast<I>(r64);
    const I n = r / HoWo;
    const I q = r - n * HoWo;
    const I oh = q / d.Wo, ow = q - oh * d.Wo;
    const A g = to_op<T>(go[(n * d.Co + co) * HoWo + q]);
    const T* xp = x + (n * d.C + c) * d.H * d.W;
    const I ih0 = oh * d.sh - d.ph, iw0 = ow * d.sw - d.pw;
    if constexpr (KS > 0) {
#pragma unroll
      for (int kh = 0; kh < KS; ++kh) {
        const I ih = ih0 + kh * d.dh;
        const bool hin = ih >= 0 && ih < d.H;
#pragma unroll
        for (int kw = 0; kw < KS; ++kw) {
          const I iw = iw0 + kw * d.dw;
          if (hin && iw >= 0 && iw < d.W) acc[kh * KS + kw] += g * to_op<T>(xp[ih * d.W + iw]);
        }
      }
    } else {
      const I ih = ih0 + kh0 * d.dh, iw = iw0 + kw0 * d.dw;
      if (ih >= 0 && ih < d.H && iw >= 0 && iw < d.W) acc[0] += g * to_op<T>(xp[ih * d.W + iw]);
    }
  }
  // The block's totals: each warp's by butterflies, then warp 0 over the kWarps warp totals.
  __shared__ A warp_tot[NT][kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const A v = warp_sum(acc[t]);
    if (lane == 0) warp_tot[t][warp] = v;
  }
  __syncthreads();
  if (warp == 0) {
    const int64_t S = gridDim.y;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const A v = warp_sum(lane < kWarps ? warp_tot[t][lane] : A(0));
      if (lane == 0) partial[(int64_t(co) * K + tap0 + t) * S + blockIdx.y] = v;
    }
  }
}

// gw[j] = the S partials of weight element j added in slice order, rounded once.
template <class T>
__global__ void dw_weight_grad_finish_kernel(int64_t n, const dev_opmath_t<T>* __restrict__ partial,
                                             int64_t S, T* __restrict__ gw) {
  using A = dev_opmath_t<T>;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n;
       j += int64_t(gridDim.x) * blockDim.x) {
    A s = A(0);
    for (int64_t k = 0; k < S; ++k) s += partial[j * S + k];
    gw[j] = from_op<T>(s);
  }
}

// The slicing of the weight gradient: rows (blocks along x) and S slices of chunk terms each
// (the last one may be shorter; none is empty).
struct WeightPlan {
  int64_t rows = 1, S = 1, chunk = 1;
};
WeightPlan plan_weight(const Params& p, bool all_taps) {
  WeightPlan pl;
  const int64_t K = p.KH * p.KW, R = p.N * p.Ho * p.Wo;
  pl.rows = all_taps ? p.C * p.M : p.C * p.M * K;
  int64_t S = (kTargetBlocks + pl.rows - 1) / pl.rows;
  S = std::min(S, (R + kBlockSize * kMinTermsPerThread - 1) / (kBlockSize * kMinTermsPerThread));
  S = std::max<int64_t>(1, std::min(S, kMaxSlices));
  pl.chunk = (R + S - 1) / S;
  pl.S = (R + pl.chunk - 1) / pl.chunk;
  return pl;
}

bool fixed_kernel(const Params& p, int ks) { return p.KH == ks && p.KW == ks; }

}  // namespace

// ---- launchers --------------------------------------------------------------------------------

void forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
             const Params& p, const char* op) {
  const int64_t total = out->numel();
  if (total == 0) return;
  g_passes.fetch_add(1, std::memory_order_relaxed);
  const bool i32 = fits_int32(p);
  nnk::dispatch_floating(x->dtype(), op, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* xb = x->data_as<T>();
    const T* wb = w->data_as<T>();
    const T* bb = bias ? bias->data_as<T>() : nullptr;
    T* yb = out->data_as<T>();
    const unsigned grid = blocks_for(total);
    cudaStream_t s = current_stream();
    if (i32 && fixed_kernel(p, 3))
      dw_forward_kernel<T, int32_t, 3>
          <<<grid, kBlockSize, 0, s>>>(total, xb, wb, bb, yb, dims_of<int32_t>(p));
    else if (i32 && fixed_kernel(p, 5))
      dw_forward_kernel<T, int32_t, 5>
          <<<grid, kBlockSize, 0, s>>>(total, xb, wb, bb, yb, dims_of<int32_t>(p));
    else if (i32)
      dw_forward_kernel<T, int32_t, 0>
          <<<grid, kBlockSize, 0, s>>>(total, xb, wb, bb, yb, dims_of<int32_t>(p));
    else
      dw_forward_kernel<T, int64_t, 0>
          <<<grid, kBlockSize, 0, s>>>(total, xb, wb, bb, yb, dims_of<int64_t>(p));
    check_launch(op);
  });
}

void backward_input(const Tensor& go, const Tensor& w, const Tensor& gi, const Params& p,
                    const char* op) {
  const int64_t total = gi->numel();
  if (total == 0) return;
  g_passes.fetch_add(1, std::memory_order_relaxed);
  const bool i32 = fits_int32(p);
  const int st = p.sh == p.sw && (p.sh == 1 || p.sh == 2) ? static_cast<int>(p.sh) : 0;
  nnk::dispatch_floating(gi->dtype(), op, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* gb = go->data_as<T>();
    const T* wb = w->data_as<T>();
    T* ib = gi->data_as<T>();
    const unsigned grid = blocks_for(total);
    cudaStream_t s = current_stream();
    const Dims<int32_t> d32 = dims_of<int32_t>(p);
    if (i32 && fixed_kernel(p, 3) && st == 1)
      dw_input_grad_kernel<T, int32_t, 3, 1><<<grid, kBlockSize, 0, s>>>(total, gb, wb, ib, d32);
    else if (i32 && fixed_kernel(p, 3) && st == 2)
      dw_input_grad_kernel<T, int32_t, 3, 2><<<grid, kBlockSize, 0, s>>>(total, gb, wb, ib, d32);
    else if (i32 && fixed_kernel(p, 5) && st == 1)
      dw_input_grad_kernel<T, int32_t, 5, 1><<<grid, kBlockSize, 0, s>>>(total, gb, wb, ib, d32);
    else if (i32 && fixed_kernel(p, 5) && st == 2)
      dw_input_grad_kernel<T, int32_t, 5, 2><<<grid, kBlockSize, 0, s>>>(total, gb, wb, ib, d32);
    else if (i32)
      dw_input_grad_kernel<T, int32_t, 0, 0><<<grid, kBlockSize, 0, s>>>(total, gb, wb, ib, d32);
    else
      dw_input_grad_kernel<T, int64_t, 0, 0>
          <<<grid, kBlockSize, 0, s>>>(total, gb, wb, ib, dims_of<int64_t>(p));
    check_launch(op);
  });
}

void backward_weight(const Tensor& go, const Tensor& x, const Tensor& gw, const Params& p,
                     const char* op) {
  const int64_t n = gw->numel();
  if (n == 0) return;
  g_passes.fetch_add(1, std::memory_order_relaxed);
  const bool i32 = fits_int32(p);
  const int ks = i32 && fixed_kernel(p, 3) ? 3 : i32 && fixed_kernel(p, 5) ? 5 : 0;
  const WeightPlan pl = plan_weight(p, ks > 0);
  EMBER_CHECK(pl.rows <= int64_t(0x7fffffff), op, ": depthwise weight gradient of ", pl.rows,
              " rows exceeds the grid");
  const int64_t R = p.N * p.Ho * p.Wo;
  const ScalarType dt = gw->dtype();
  const ScalarType acc_dt = dt == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  Tensor partial = empty(DimVector{n * pl.S}, acc_dt, gw->device());
  nnk::dispatch_floating(dt, op, "dtype", [&](auto tag) {
    using T = decltype(tag);
    using A = dev_opmath_t<T>;
    const T* gb = go->data_as<T>();
    const T* xb = x->data_as<T>();
    A* pb = partial->data_as<A>();
    const dim3 grid(static_cast<unsigned>(pl.rows), static_cast<unsigned>(pl.S));
    cudaStream_t s = current_stream();
    if (ks == 3)
      dw_weight_grad_kernel<T, int32_t, 3>
          <<<grid, kBlockSize, 0, s>>>(gb, xb, pb, dims_of<int32_t>(p), R, pl.chunk);
    else if (ks == 5)
      dw_weight_grad_kernel<T, int32_t, 5>
          <<<grid, kBlockSize, 0, s>>>(gb, xb, pb, dims_of<int32_t>(p), R, pl.chunk);
    else if (i32)
      dw_weight_grad_kernel<T, int32_t, 0>
          <<<grid, kBlockSize, 0, s>>>(gb, xb, pb, dims_of<int32_t>(p), R, pl.chunk);
    else
      dw_weight_grad_kernel<T, int64_t, 0>
          <<<grid, kBlockSize, 0, s>>>(gb, xb, pb, dims_of<int64_t>(p), R, pl.chunk);
    check_launch(op);
    dw_weight_grad_finish_kernel<T>
        <<<blocks_for(n), kBlockSize, 0, s>>>(n, pb, pl.S, gw->data_as<T>());
    check_launch(op);
  });
}

}  // namespace depthwise
}  // namespace cuda
}  // namespace ember
