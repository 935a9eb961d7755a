// CUDA kernels of the upsample_* ops (F.interpolate's nearest, nearest-exact, linear, bilinear,
// trilinear and bicubic modes) and their backward passes, with the CPU kernels' index arithmetic
// (kernels/cpu/nn_upsample.cpp): every mode is separable, each spatial dim maps an output index
// to 1 (nearest), 2 (linear) or 4 (cubic) input indices and weights. Here each thread computes
// the maps of its own output element. The source positions are computed with explicitly rounded
// products and sums (__fmul_rn / __fadd_rn: never contracted into an FMA), so the GPU picks the
// same pixels and weights as the CPU. The nearest modes are gathers (any dtype); the backward
// passes scatter with atomicAdd (into a float32 buffer for float16/bfloat16).
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/device_types.cuh"
#include "cuda/index_common.cuh"
#include "cuda/nn_common.cuh"
#include "kernels/upsample_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace upsample {

enum Interp : int { kNearest = 0, kNearestExact = 1, kLinear = 2, kCubic = 3 };

using Scales = std::array<std::optional<double>, 3>;

// One spatial dim: `identity` maps o to o (a dim the linear modes leave alone, and the padded
// dims), `halve` maps o to o / 2 (upsample_nearest2d's factor-2 shortcut); otherwise the step
// (in the compute type: sf for float, sd for double) and the mode's formula.
struct AxisP {
  int64_t in = 1, out = 1;
  bool identity = true, halve = false, align_corners = false;
  float sf = 0.f;
  double sd = 0.0;
};

struct Geometry {
  int64_t k = 0;
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int mode = kNearest;
  AxisP ax[3];
  int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  int64_t out_numel() const { return out[0] * out[1] * out[2]; }
};

// Arithmetic rounded after every operation (as the CPU, whose build has no FMA).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }

template <class A>
__device__ __forceinline__ A step_of(const AxisP& a);
template <>
__device__ __forceinline__ float step_of<float>(const AxisP& a) {
  return a.sf;
}
template <>
__device__ __forceinline__ double step_of<double>(const AxisP& a) {
  return a.sd;
}

// floor(src) clamped to at most in - 1 (a position at or past the end, inf or NaN reads the
// last input).
template <class A>
__device__ __forceinline__ int64_t floor_index(A src, int64_t in) {
  if (!(src < static_cast<A>(in - 1))) return in - 1;
  return static_cast<int64_t>(floor(src));
}

// Up to 4 taps of one dim for output index o.
template <class A>
struct Taps {
  int n;
  int64_t idx[4];
  A w[4];
};

template <class A>
__device__ __forceinline__ void cubic_weights(A t, A* w) {
  const A a = static_cast<A>(-0.75);
  auto near_ = [&](A x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto far_ = [&](A x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  w[0] = far_(t + 1);
  w[1] = near_(t);
  w[2] = near_(1 - t);
  w[3] = far_(2 - t);
}

// The nearest modes (computed in float whatever the dtype, as the CPU).
__device__ __forceinline__ int64_t nearest_index(const AxisP& a, int mode, int64_t o) {
  if (a.identity) return o;
  if (a.halve) return o / 2;
  const float s = a.sf;
  float src;
  if (mode == kNearest) {
    src = mul_rn(s, static_cast<float>(o));
  } else {
    float t = sub_rn(mul_rn(s, add_rn(static_cast<float>(o), 0.5f)), 0.5f);
    t = t < 0.f ? 0.f : t;  // std::max(t, 0.f): a NaN t stays NaN
    src = add_rn(t, 0.5f);
  }
  return floor_index(src, a.in);
}

template <class A>
__device__ __forceinline__ Taps<A> taps_of(const AxisP& a, int mode, int64_t o) {
  Taps<A> t;
  if (a.identity || a.halve || mode == kNearest || mode == kNearestExact) {
    t.n = 1;
    t.idx[0] = (mode == kNearest || mode == kNearestExact) ? nearest_index(a, mode, o) : o;
    t.w[0] = A(1);
    return t;
  }
  const A s = step_of<A>(a);
  A src = a.align_corners ? mul_rn(s, static_cast<A>(o))
                          : sub_rn(mul_rn(s, add_rn(static_cast<A>(o), A(0.5))), A(0.5));
  if (mode == kLinear && src < A(0)) src = A(0);
  const int64_t i0 = floor_index(src, a.in);
  // std::min(std::max(src - i0, 0), 1), NaN kept as std::max / std::min keep it.
  A f = sub_rn(src, static_cast<A>(i0));
  f = f < A(0) ? A(0) : f;
  f = A(1) < f ? A(1) : f;
  if (mode == kLinear) {
    t.n = 2;
    t.idx[0] = i0;
    t.idx[1] = i0 < a.in - 1 ? i0 + 1 : i0;
    t.w[0] = sub_rn(A(1), f);
    t.w[1] = f;
  } else {
    t.n = 4;
    cubic_weights(f, t.w);
    for (int k = 0; k < 4; ++k) {
      int64_t i = i0 - 1 + k;
      i = i < 0 ? 0 : i;
      t.idx[k] = i > a.in - 1 ? a.in - 1 : i;
    }
  }
  return t;
}

struct KGeom {
  int64_t in[3], out[3];
  int mode;
  AxisP ax[3];
};

KGeom kgeom(const Geometry& g) {
  KGeom k;
  for (int j = 0; j < 3; ++j) {
    k.in[j] = g.in[j];
    k.out[j] = g.out[j];
    k.ax[j] = g.ax[j];
  }
  k.mode = g.mode;
  return k;
}

// Output element e of the (planes, *out) result: its plane and its position along each dim.
struct OutPos {
  int64_t pl, od, oh, ow;
};
__device__ __forceinline__ OutPos out_pos(const KGeom& g, int64_t e) {
  const int64_t Q = g.out[0] * g.out[1] * g.out[2];
  const int64_t q = e % Q;
  return {e / Q, q / (g.out[2] * g.out[1]), (q / g.out[2]) % g.out[1], q % g.out[2]};
}

// The taps of output position p along the three dims.
template <class A>
struct Taps3 {
  Taps<A> d, h, w;
};
template <class A>
__device__ __forceinline__ Taps3<A> taps3_of(const KGeom& g, const OutPos& p) {
  return {taps_of<A>(g.ax[0], g.mode, p.od), taps_of<A>(g.ax[1], g.mode, p.oh),
          taps_of<A>(g.ax[2], g.mode, p.ow)};
}

// Nearest forward: a gather of items of T's size.
template <class T>
__global__ void nearest_kernel(int64_t total, const T* __restrict__ x, T* __restrict__ y, KGeom g) {
  const int64_t P = g.in[0] * g.in[1] * g.in[2];
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const OutPos p = out_pos(g, e);
    const int64_t id = nearest_index(g.ax[0], g.mode, p.od);
    const int64_t ih = nearest_index(g.ax[1], g.mode, p.oh);
    const int64_t iw = nearest_index(g.ax[2], g.mode, p.ow);
    y[e] = x[p.pl * P + (id * g.in[1] + ih) * g.in[2] + iw];
  }
}

// Linear / cubic forward: per W tap, the blend of the input rows (weights wd * wh, zero ones
// skipped), weighted by the W tap (the CPU's order of operations).
template <class T, class A>
__global__ void blend_kernel(int64_t total, const T* __restrict__ x, T* __restrict__ y, KGeom g) {
  const int64_t P = g.in[0] * g.in[1] * g.in[2];
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const OutPos p = out_pos(g, e);
    const auto [td, th, tw] = taps3_of<A>(g, p);
    const T* base = x + p.pl * P;
    A acc = A(0);
    for (int k = 0; k < tw.n; ++k) {
      A inner = A(0);
      bool first = true;
      for (int a = 0; a < td.n; ++a)
        for (int b = 0; b < th.n; ++b) {
          const A w = mul_rn(td.w[a], th.w[b]);
          if (w == A(0)) continue;
          const A v =
              mul_rn(w, to_op<T>(base[(td.idx[a] * g.in[1] + th.idx[b]) * g.in[2] + tw.idx[k]]));
          inner = first ? v : add_rn(inner, v);
          first = false;
        }
      const A term = mul_rn(tw.w[k], inner);
      acc = k == 0 ? term : add_rn(acc, term);
    }
    y[e] = from_op<T>(acc);
  }
}

// The adjoint: every output element adds its gradient, weighted, into the inputs it read.
template <class T, class A, class Acc>
__global__ void blend_backward_kernel(int64_t total, const T* __restrict__ gy, Acc* __restrict__ gx,
                                      KGeom g) {
  const int64_t P = g.in[0] * g.in[1] * g.in[2];
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const OutPos p = out_pos(g, e);
    const auto [td, th, tw] = taps3_of<A>(g, p);
    const A go = to_op<T>(gy[e]);
    Acc* base = gx + p.pl * P;
    for (int a = 0; a < td.n; ++a)
      for (int b = 0; b < th.n; ++b) {
        const A w = td.w[a] * th.w[b];
        if (w == A(0)) continue;
        Acc* row = base + (td.idx[a] * g.in[1] + th.idx[b]) * g.in[2];
        for (int k = 0; k < tw.n; ++k)
          atomicAdd(row + tw.idx[k], static_cast<Acc>(w * (tw.w[k] * go)));
      }
  }
}

template <class TD, class TS>
__global__ void convert_kernel(int64_t n, const TS* __restrict__ src, TD* __restrict__ dst) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    dst[e] = from_op<TD>(src[e]);
}

// ---- host side --------------------------------------------------------------------------------

Geometry make_geometry(const char* op, int64_t k, int mode, const DimVector& input_size,
                       const DimVector& output_size, bool align_corners, const Scales& scales,
                       DimVector* out_shape) {
  const nn::UpsampleDims u = nn::upsample_dims(op, k, input_size, output_size);
  Geometry g;
  g.k = k;
  g.mode = mode;
  g.planes = u.planes;
  for (int j = 0; j < 3; ++j) {
    g.in[j] = u.in[j];
    g.out[j] = u.out[j];
  }
  *out_shape = u.out_shape;
  checked_numel(*out_shape, op);
  const bool nearest = mode == kNearest || mode == kNearestExact;
  const bool shortcuts = mode == kNearest && k == 2;  // upsample_nearest2d's CPU indexing
  for (int j = 0; j < 3; ++j) {
    AxisP& a = g.ax[j];
    a.in = g.in[j];
    a.out = g.out[j];
    if (j < 3 - k) continue;  // a padded dim: identity
    const std::optional<double> sc = scales[j - (3 - k)];
    const bool same = a.in == a.out && (mode == kLinear || shortcuts);
    const bool twice = a.out == 2 * a.in && shortcuts;
    a.identity = same;
    a.halve = twice && !same;
    if (same || twice) continue;
    a.identity = false;
    a.align_corners = !nearest && align_corners;
    // The step exactly as the CPU computes it: in float for the nearest modes and the float
    // dtypes, in double for float64 (sd).
    if (a.align_corners) {
      a.sf = a.out > 1 ? static_cast<float>(a.in - 1) / static_cast<float>(a.out - 1) : 0.f;
      a.sd = a.out > 1 ? static_cast<double>(a.in - 1) / static_cast<double>(a.out - 1) : 0.0;
    } else if (sc && *sc > 0) {
      a.sf = static_cast<float>(1.0 / *sc);
      a.sd = 1.0 / *sc;
    } else {
      a.sf = static_cast<float>(a.in) / static_cast<float>(a.out);
      a.sd = static_cast<double>(a.in) / static_cast<double>(a.out);
    }
  }
  return g;
}

template <class F>
void dispatch_float(ScalarType dt, const char* op, const F& f) {
  nnk::dispatch_floating(dt, op, "dtype", f);
}

Tensor upsample_fwd(const char* op, int64_t k, int mode, const Tensor& self,
                    const DimVector& output_size, bool align_corners, const Scales& scales) {
  DimVector out_shape;
  Geometry g =
      make_geometry(op, k, mode, self->sizes(), output_size, align_corners, scales, &out_shape);
  DeviceGuard guard(ix::device_index(self));
  Tensor out = empty(out_shape, self->dtype(), self->device());
  const int64_t total = out->numel();
  if (total == 0) return out;
  Tensor x = ix::contiguous(self, op);
  const KGeom kg = kgeom(g);
  if (mode == kNearest || mode == kNearestExact) {
    ix::by_itemsize(x->itemsize(), [&](auto tag) {
      using U = decltype(tag);
      nearest_kernel<U><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
          total, reinterpret_cast<const U*>(x->data()), reinterpret_cast<U*>(out->data()), kg);
      check_launch(op);
    });
    return out;
  }
  dispatch_float(x->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using A = dev_opmath_t<T>;
    blend_kernel<T, A><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
        total, x->data_as<T>(), out->data_as<T>(), kg);
    check_launch(op);
  });
  return out;
}

Tensor upsample_bwd(const char* op, int64_t k, int mode, const Tensor& grad_output,
                    const DimVector& output_size, const DimVector& input_size, bool align_corners,
                    const Scales& scales) {
  DimVector out_shape;
  Geometry g =
      make_geometry(op, k, mode, input_size, output_size, align_corners, scales, &out_shape);
  EMBER_CHECK(grad_output->sizes() == out_shape, op, ": expected grad_output of shape ",
              shape_str(out_shape), " (input ", shape_str(input_size), ", output_size ",
              shape_str(output_size), "), got ", shape_str(grad_output->sizes()));
  EMBER_CHECK_KIND(is_floating(grad_output->dtype()), Type, op,
                   ": expected a floating-point grad_output, got ",
                   dtype_name(grad_output->dtype()));
  DeviceGuard guard(ix::device_index(grad_output));
  Tensor gi = empty(input_size, grad_output->dtype(), grad_output->device());
  if (gi->numel() == 0) return gi;
  Tensor go = ix::contiguous(grad_output, op);
  const int64_t total = go->numel();
  const KGeom kg = kgeom(g);
  cudaStream_t stream = current_stream();
  dispatch_float(go->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using A = dev_opmath_t<T>;
    if constexpr (std::is_same_v<T, A>) {
      EMBER_CUDA_CHECK(cudaMemsetAsync(gi->data(), 0, gi->numel() * sizeof(T), stream));
      blend_backward_kernel<T, A, T><<<blocks_for(total), kBlockSize, 0, stream>>>(
          total, go->data_as<T>(), gi->data_as<T>(), kg);
      check_launch(op);
    } else {
      Tensor acc = empty(input_size, ScalarType::Float32, gi->device());
      EMBER_CUDA_CHECK(cudaMemsetAsync(acc->data(), 0, acc->numel() * sizeof(float), stream));
      blend_backward_kernel<T, A, float><<<blocks_for(total), kBlockSize, 0, stream>>>(
          total, go->data_as<T>(), acc->data_as<float>(), kg);
      check_launch(op);
      const int64_t n = gi->numel();
      convert_kernel<T, float>
          <<<blocks_for(n), kBlockSize, 0, stream>>>(n, acc->data_as<float>(), gi->data_as<T>());
      check_launch(op);
    }
  });
  return gi;
}

// ---- the ops ----------------------------------------------------------------------------------

Tensor upsample_nearest1d(const Tensor& self, const DimVector& output_size,
                          std::optional<double> scales) {
  return upsample_fwd("upsample_nearest1d", 1, kNearest, self, output_size, false, Scales{scales});
}
Tensor upsample_nearest1d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, std::optional<double> scales) {
  return upsample_bwd("upsample_nearest1d_backward", 1, kNearest, grad_output, output_size,
                      input_size, false, Scales{scales});
}
Tensor upsample_nearest2d(const Tensor& self, const DimVector& output_size,
                          std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("upsample_nearest2d", 2, kNearest, self, output_size, false,
                      Scales{scales_h, scales_w});
}
Tensor upsample_nearest2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, std::optional<double> scales_h,
                                   std::optional<double> scales_w) {
  return upsample_bwd("upsample_nearest2d_backward", 2, kNearest, grad_output, output_size,
                      input_size, false, Scales{scales_h, scales_w});
}
Tensor upsample_nearest3d(const Tensor& self, const DimVector& output_size,
                          std::optional<double> scales_d, std::optional<double> scales_h,
                          std::optional<double> scales_w) {
  return upsample_fwd("upsample_nearest3d", 3, kNearest, self, output_size, false,
                      Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_nearest3d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, std::optional<double> scales_d,
                                   std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_bwd("upsample_nearest3d_backward", 3, kNearest, grad_output, output_size,
                      input_size, false, Scales{scales_d, scales_h, scales_w});
}
Tensor _upsample_nearest_exact1d(const Tensor& self, const DimVector& output_size,
                                 std::optional<double> scales) {
  return upsample_fwd("_upsample_nearest_exact1d", 1, kNearestExact, self, output_size, false,
                      Scales{scales});
}
Tensor _upsample_nearest_exact1d_backward(const Tensor& grad_output, const DimVector& output_size,
                                          const DimVector& input_size,
                                          std::optional<double> scales) {
  return upsample_bwd("_upsample_nearest_exact1d_backward", 1, kNearestExact, grad_output,
                      output_size, input_size, false, Scales{scales});
}
Tensor _upsample_nearest_exact2d(const Tensor& self, const DimVector& output_size,
                                 std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("_upsample_nearest_exact2d", 2, kNearestExact, self, output_size, false,
                      Scales{scales_h, scales_w});
}
Tensor _upsample_nearest_exact2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                          const DimVector& input_size,
                                          std::optional<double> scales_h,
                                          std::optional<double> scales_w) {
  return upsample_bwd("_upsample_nearest_exact2d_backward", 2, kNearestExact, grad_output,
                      output_size, input_size, false, Scales{scales_h, scales_w});
}
Tensor _upsample_nearest_exact3d(const Tensor& self, const DimVector& output_size,
                                 std::optional<double> scales_d, std::optional<double> scales_h,
                                 std::optional<double> scales_w) {
  return upsample_fwd("_upsample_nearest_exact3d", 3, kNearestExact, self, output_size, false,
                      Scales{scales_d, scales_h, scales_w});
}
Tensor _upsample_nearest_exact3d_backward(const Tensor& grad_output, const DimVector& output_size,
                                          const DimVector& input_size,
                                          std::optional<double> scales_d,
                                          std::optional<double> scales_h,
                                          std::optional<double> scales_w) {
  return upsample_bwd("_upsample_nearest_exact3d_backward", 3, kNearestExact, grad_output,
                      output_size, input_size, false, Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_linear1d(const Tensor& self, const DimVector& output_size, bool align_corners,
                         std::optional<double> scales) {
  return upsample_fwd("upsample_linear1d", 1, kLinear, self, output_size, align_corners,
                      Scales{scales});
}
Tensor upsample_linear1d_backward(const Tensor& grad_output, const DimVector& output_size,
                                  const DimVector& input_size, bool align_corners,
                                  std::optional<double> scales) {
  return upsample_bwd("upsample_linear1d_backward", 1, kLinear, grad_output, output_size,
                      input_size, align_corners, Scales{scales});
}
Tensor upsample_bilinear2d(const Tensor& self, const DimVector& output_size, bool align_corners,
                           std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("upsample_bilinear2d", 2, kLinear, self, output_size, align_corners,
                      Scales{scales_h, scales_w});
}
Tensor upsample_bilinear2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                    const DimVector& input_size, bool align_corners,
                                    std::optional<double> scales_h,
                                    std::optional<double> scales_w) {
  return upsample_bwd("upsample_bilinear2d_backward", 2, kLinear, grad_output, output_size,
                      input_size, align_corners, Scales{scales_h, scales_w});
}
Tensor upsample_trilinear3d(const Tensor& self, const DimVector& output_size, bool align_corners,
                            std::optional<double> scales_d, std::optional<double> scales_h,
                            std::optional<double> scales_w) {
  return upsample_fwd("upsample_trilinear3d", 3, kLinear, self, output_size, align_corners,
                      Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_trilinear3d_backward(const Tensor& grad_output, const DimVector& output_size,
                                     const DimVector& input_size, bool align_corners,
                                     std::optional<double> scales_d, std::optional<double> scales_h,
                                     std::optional<double> scales_w) {
  return upsample_bwd("upsample_trilinear3d_backward", 3, kLinear, grad_output, output_size,
                      input_size, align_corners, Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_bicubic2d(const Tensor& self, const DimVector& output_size, bool align_corners,
                          std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("upsample_bicubic2d", 2, kCubic, self, output_size, align_corners,
                      Scales{scales_h, scales_w});
}
Tensor upsample_bicubic2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, bool align_corners,
                                   std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_bwd("upsample_bicubic2d_backward", 2, kCubic, grad_output, output_size,
                      input_size, align_corners, Scales{scales_h, scales_w});
}

#define REG(NAME) register_kernel(#NAME, DeviceType::CUDA, &NAME);
void register_upsample() {
  REG(upsample_nearest1d)
  REG(upsample_nearest1d_backward)
  REG(upsample_nearest2d)
  REG(upsample_nearest2d_backward)
  REG(upsample_nearest3d)
  REG(upsample_nearest3d_backward)
  REG(_upsample_nearest_exact1d)
  REG(_upsample_nearest_exact1d_backward)
  REG(_upsample_nearest_exact2d)
  REG(_upsample_nearest_exact2d_backward)
  REG(_upsample_nearest_exact3d)
  REG(_upsample_nearest_exact3d_backward)
  REG(upsample_linear1d)
  REG(upsample_linear1d_backward)
  REG(upsample_bilinear2d)
  REG(upsample_bilinear2d_backward)
  REG(upsample_trilinear3d)
  REG(upsample_trilinear3d_backward)
  REG(upsample_bicubic2d)
  REG(upsample_bicubic2d_backward)
}
#undef REG

}  // namespace upsample
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::upsample::register_upsample)
