// CUDA kernels of max / average pooling (fixed and adaptive windows) over the last 1 to 3 dims
// and their backward passes, with the CPU kernels' checks and semantics
// (kernels/cpu/nn_pool.cpp): every leading dim is a plane pooled on its own; max pooling's
// indices are flat positions within the input plane, the first maximum of a window wins and a
// NaN wins over numbers (the last NaN); ceil_mode, count_include_pad and divisor_override as
// the CPU. One thread per output element computes its window (per spatial dim an arithmetic run
// of input positions clipped to the input) from the pooling parameters. The backward passes
// scatter with atomicAdd: into the gradient itself for float32/float64, into a float32 buffer
// for float16/bfloat16 (rounded once at the end).
#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/device_types.cuh"
#include "cuda/index_common.cuh"
#include "cuda/nn_common.cuh"
#include "kernels/nn_rules.h"
#include "kernels/pool_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace pool {

// Sizes padded to 3 spatial dims at the front (missing dims: size 1, kernel 1, stride 1).
struct Plan {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t ks[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
  bool adaptive = false;
  bool count_include_pad = false;
  int64_t planes = 1;
  __host__ __device__ int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  __host__ __device__ int64_t out_numel() const { return out[0] * out[1] * out[2]; }
};

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

struct Window {
  int64_t first, count, step, divisor;  // input positions first + i * step, i < count
};

// The window of output index i along padded dim j (the CPU's fixed_plan / adaptive_plan).
__device__ __forceinline__ Window window_of(const Plan& p, int j, int64_t i) {
  const int64_t in = p.in[j];
  if (p.adaptive) {
    const int64_t o = p.out[j];
    const int64_t a = (i * in) / o, b = ((i + 1) * in + o - 1) / o;
    return Window{a, b - a, 1, b - a};
  }
  const int64_t ks = p.ks[j], dl = p.dl[j];
  const int64_t start = i * p.st[j] - p.pd[j];
  const int64_t lo = start >= 0 ? 0 : imin(ks, (-start + dl - 1) / dl);
  const int64_t hi = imax(lo, imin(ks, (in - 1 - start) / dl + 1));
  Window w{start + lo * dl, hi - lo, dl, hi - lo};
  if (p.count_include_pad) w.divisor = imin(start + ks, in + p.pd[j]) - start;
  return w;
}

// Decomposes a flat output index into (plane, od, oh, ow) and the three windows.
struct OutPos {
  int64_t plane;
  Window w[3];
};
__device__ __forceinline__ OutPos locate(const Plan& p, int64_t e) {
  const int64_t Q = p.out_numel();
  const int64_t q = e % Q;
  OutPos o;
  o.plane = e / Q;
  const int64_t ow = q % p.out[2], oh = (q / p.out[2]) % p.out[1], od = q / (p.out[2] * p.out[1]);
  o.w[0] = window_of(p, 0, od);
  o.w[1] = window_of(p, 1, oh);
  o.w[2] = window_of(p, 2, ow);
  return o;
}

// Calls f(i) for the flat input index i (in the plane) of every tap of o's windows, d then h
// then w (the CPU's visit_window order).
template <class F>
__device__ __forceinline__ void visit_window(const Plan& p, const OutPos& o, const F& f) {
  for (int64_t a = 0; a < o.w[0].count; ++a) {
    const int64_t id = o.w[0].first + a * o.w[0].step;
    for (int64_t b = 0; b < o.w[1].count; ++b) {
      const int64_t base = (id * p.in[1] + o.w[1].first + b * o.w[1].step) * p.in[2];
      for (int64_t c = 0; c < o.w[2].count; ++c) f(base + o.w[2].first + c * o.w[2].step);
    }
  }
}

// Whether v is NaN (false for integers, without comparing an int with itself).
template <class A>
__device__ __forceinline__ bool is_nan_value(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

template <class T>
__global__ void max_pool_kernel(int64_t total, const T* __restrict__ x, T* __restrict__ out,
                                int64_t* __restrict__ idx, Plan p) {
  using A = dev_opmath_t<T>;
  const int64_t P = p.in_numel();
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const OutPos o = locate(p, e);
    const T* xp = x + o.plane * P;
    A best = -std::numeric_limits<A>::infinity();
    int64_t arg = -1;
    visit_window(p, o, [&](int64_t i) {
      const A v = to_op<T>(xp[i]);
      if (arg < 0 || v > best || is_nan_value(v)) {  // the first maximum; the last NaN wins
        best = v;
        arg = i;
      }
    });
    out[e] = from_op<T>(best);
    idx[e] = arg;
  }
}

template <class T>
__global__ void avg_pool_kernel(int64_t total, const T* __restrict__ x, T* __restrict__ out, Plan p,
                                int64_t divisor_override) {
  using A = dev_opmath_t<T>;
  const int64_t P = p.in_numel();
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const OutPos o = locate(p, e);
    const T* xp = x + o.plane * P;
    A sum = A(0);
    visit_window(p, o, [&](int64_t i) { sum += to_op<T>(xp[i]); });
    const int64_t div =
        divisor_override != 0 ? divisor_override : o.w[0].divisor * o.w[1].divisor * o.w[2].divisor;
    out[e] = from_op<T>(sum / static_cast<A>(div));
  }
}

// acc (planes, P) += grad / divisor over every output's window.
template <class T, class Acc>
__global__ void avg_pool_backward_kernel(int64_t total, const T* __restrict__ g,
                                         Acc* __restrict__ acc, Plan p, int64_t divisor_override) {
  using A = dev_opmath_t<T>;
  const int64_t P = p.in_numel();
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const OutPos o = locate(p, e);
    const int64_t div =
        divisor_override != 0 ? divisor_override : o.w[0].divisor * o.w[1].divisor * o.w[2].divisor;
    const Acc v = static_cast<Acc>(to_op<T>(g[e]) / static_cast<A>(div));
    Acc* ap = acc + o.plane * P;
    visit_window(p, o, [&](int64_t i) { atomicAdd(ap + i, v); });
  }
}

// acc[plane * P + idx[q]] += grad[q] (indices outside the plane are skipped: the indices of
// max pooling are always inside it).
template <class T, class Acc>
__global__ void max_pool_backward_kernel(int64_t total, const T* __restrict__ g,
                                         const int64_t* __restrict__ idx, Acc* __restrict__ acc,
                                         int64_t P, int64_t Q) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx[e];
    if (i < 0 || i >= P) continue;
    atomicAdd(acc + (e / Q) * P + i, static_cast<Acc>(to_op<T>(g[e])));
  }
}

template <class TD, class TS>
__global__ void convert_kernel(int64_t n, const TS* __restrict__ src, TD* __restrict__ dst) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    dst[e] = from_op<TD>(src[e]);
}

// ---- host side --------------------------------------------------------------------------------

// The sizes and checks are the CPU's (kernels/pool_rules.h).
Plan make_plan(const nn::PoolDims& d, DimVector* out_shape) {
  Plan p;
  for (int j = 0; j < 3; ++j) {
    p.in[j] = d.in[j];
    p.out[j] = d.out[j];
    p.ks[j] = d.ks[j];
    p.st[j] = d.st[j];
    p.pd[j] = d.pd[j];
    p.dl[j] = d.dl[j];
  }
  p.planes = d.planes;
  *out_shape = d.out_shape;
  return p;
}

Plan fixed_plan(const char* op, const DimVector& sizes, const DimVector& kernel_size,
                const DimVector& stride, const DimVector& padding, const DimVector& dilation,
                bool ceil_mode, bool count_include_pad, DimVector* out_shape) {
  Plan p = make_plan(
      nn::fixed_pool_dims(op, sizes, kernel_size, stride, padding, dilation, ceil_mode), out_shape);
  p.count_include_pad = count_include_pad;
  return p;
}

Plan adaptive_plan(const char* op, const DimVector& sizes, const DimVector& output_size,
                   DimVector* out_shape) {
  Plan p = make_plan(nn::adaptive_pool_dims(op, sizes, output_size), out_shape);
  p.adaptive = true;
  checked_numel(*out_shape, op);
  return p;
}

template <class F>
void dispatch_float(ScalarType dt, const char* op, const F& f) {
  nnk::dispatch_floating(dt, op, "input", f);
}

// Runs launch(acc) with a zeroed accumulator over gi's elements: gi itself (float32/float64) or
// a float32 buffer converted into gi afterwards (float16/bfloat16).
template <class T, class F>
void scatter_into(const Tensor& gi, const char* op, const F& launch) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    EMBER_CUDA_CHECK(
        cudaMemsetAsync(gi->data(), 0, gi->numel() * gi->itemsize(), current_stream()));
    launch(gi->data_as<T>());
  } else {
    Tensor acc = empty(gi->sizes(), ScalarType::Float32, gi->device());
    EMBER_CUDA_CHECK(
        cudaMemsetAsync(acc->data(), 0, acc->numel() * sizeof(float), current_stream()));
    launch(acc->data_as<float>());
    const int64_t n = gi->numel();
    convert_kernel<T, float><<<blocks_for(n), kBlockSize, 0, current_stream()>>>(
        n, acc->data_as<float>(), gi->data_as<T>());
    check_launch(op);
  }
}

// gi = the scatter of the contiguous grad g: launch(T(), acc, total) adds g's total elements into
// the zeroed accumulator acc (see scatter_into).
template <class F>
void scatter_grad(const Tensor& gi, const Tensor& g, const char* op, const F& launch) {
  const int64_t total = g->numel();
  dispatch_float(g->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    scatter_into<T>(gi, op, [&](auto* acc) {
      if (total == 0) return;
      launch(tag, acc, total);
      check_launch(op);
    });
  });
}

// Runs f(T()) for a floating or (non-bool) integer dtype dt.
template <class F>
void dispatch_numeric(ScalarType dt, const char* op, const F& f) {
  switch (dt) {
    case ScalarType::UInt8:
      return f(uint8_t());
    case ScalarType::Int8:
      return f(int8_t());
    case ScalarType::Int16:
      return f(int16_t());
    case ScalarType::Int32:
      return f(int32_t());
    case ScalarType::Int64:
      return f(int64_t());
    default:
      return dispatch_float(dt, op, f);
  }
}

// integers: whether integer input is taken (fixed windows, as the CPU and PyTorch's
// max_pool2d/3d; adaptive max pooling is floating-only).
std::tuple<Tensor, Tensor> max_pool_run(const char* op, const Tensor& self, const Plan& p,
                                        const DimVector& out_shape, bool integers) {
  EMBER_CHECK_KIND(is_floating(self->dtype()) || (integers && is_integral(self->dtype(), false)),
                   DtypeNotImplemented, op, ": expected a floating-point",
                   integers ? " or integer" : "", " input, got ", dtype_name(self->dtype()));
  DeviceGuard guard(ix::device_index(self));
  Tensor out = empty(out_shape, self->dtype(), self->device());
  Tensor idx = empty(out_shape, ScalarType::Int64, self->device());
  const int64_t total = out->numel();
  if (total == 0) return {out, idx};
  Tensor x = ix::contiguous(self, op);
  dispatch_numeric(x->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    max_pool_kernel<T><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
        total, x->data_as<T>(), out->data_as<T>(), idx->data_as<int64_t>(), p);
    check_launch(op);
  });
  return {out, idx};
}

Tensor avg_pool_run(const char* op, const Tensor& self, const Plan& p, const DimVector& out_shape,
                    std::optional<int64_t> divisor_override) {
  EMBER_CHECK_KIND(is_floating(self->dtype()), Type, op, ": expected a floating-point input, got ",
                   dtype_name(self->dtype()));
  DeviceGuard guard(ix::device_index(self));
  Tensor out = empty(out_shape, self->dtype(), self->device());
  const int64_t total = out->numel();
  if (total == 0) return out;
  Tensor x = ix::contiguous(self, op);
  dispatch_float(x->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    avg_pool_kernel<T><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
        total, x->data_as<T>(), out->data_as<T>(), p, divisor_override.value_or(0));
    check_launch(op);
  });
  return out;
}

Tensor avg_pool_backward_run(const char* op, const Tensor& grad, const DimVector& input_size,
                             const Plan& p, const DimVector& out_shape,
                             std::optional<int64_t> divisor_override) {
  EMBER_CHECK(grad->sizes() == out_shape, op, ": expected grad_output of shape ",
              shape_str(out_shape), ", got ", shape_str(grad->sizes()));
  DeviceGuard guard(ix::device_index(grad));
  Tensor gi = empty(input_size, grad->dtype(), grad->device());
  if (gi->numel() == 0) return gi;
  Tensor g = ix::contiguous(grad, op);
  scatter_grad(gi, g, op, [&](auto tag, auto* acc, int64_t total) {
    using T = decltype(tag);
    using Acc = std::remove_pointer_t<decltype(acc)>;
    avg_pool_backward_kernel<T, Acc><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
        total, g->data_as<T>(), acc, p, divisor_override.value_or(0));
  });
  return gi;
}

// ---- the ops ----------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> _max_pool(const Tensor& self, const DimVector& kernel_size,
                                     const DimVector& stride, const DimVector& padding,
                                     const DimVector& dilation, bool ceil_mode) {
  DimVector out_shape;
  Plan p = fixed_plan("max_pool", self->sizes(), kernel_size, stride, padding, dilation, ceil_mode,
                      false, &out_shape);
  return max_pool_run("max_pool", self, p, out_shape, true);
}

std::tuple<Tensor, Tensor> _adaptive_max_pool(const Tensor& self, const DimVector& output_size) {
  DimVector out_shape;
  Plan p = adaptive_plan("adaptive_max_pool", self->sizes(), output_size, &out_shape);
  return max_pool_run("adaptive_max_pool", self, p, out_shape, false);
}

Tensor _max_pool_backward(const Tensor& grad_output, const Tensor& indices,
                          const DimVector& input_size, int64_t spatial_dims) {
  const char* op = "max_pool_backward";
  nn::check_max_pool_backward(op, grad_output, indices, input_size, spatial_dims);
  EMBER_CHECK_KIND(indices->dtype() == ScalarType::Int64, Type, op,
                   ": expected int64 indices, got ", dtype_name(indices->dtype()));
  EMBER_CHECK_KIND(is_floating(grad_output->dtype()), Type, op,
                   ": expected a floating-point grad_output, got ",
                   dtype_name(grad_output->dtype()));
  ix::check_same_device(grad_output, indices, op, "indices");
  const int64_t lead = indices->dim() - spatial_dims;
  int64_t P = 1, Q = 1;
  for (int64_t d = 0; d < indices->dim(); ++d) {
    if (d < lead) {
      EMBER_CHECK(input_size[d] == indices->size(d), op, ": input_size ", shape_str(input_size),
                  " doesn't fit indices of shape ", shape_str(indices->sizes()));
    } else {
      P *= input_size[d];
      Q *= indices->size(d);
    }
  }
  DeviceGuard guard(ix::device_index(grad_output));
  Tensor gi = empty(input_size, grad_output->dtype(), grad_output->device());
  if (gi->numel() == 0) return gi;
  Tensor g = ix::contiguous(grad_output, op);
  Tensor ix_ = ix::contiguous(indices, op);
  scatter_grad(gi, g, op, [&](auto tag, auto* acc, int64_t total) {
    using T = decltype(tag);
    using Acc = std::remove_pointer_t<decltype(acc)>;
    max_pool_backward_kernel<T, Acc><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
        total, g->data_as<T>(), ix_->data_as<int64_t>(), acc, P, Q);
  });
  return gi;
}

Tensor _avg_pool(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                 const DimVector& padding, bool ceil_mode, bool count_include_pad,
                 std::optional<int64_t> divisor_override) {
  nn::check_divisor_override(divisor_override);
  DimVector out_shape;
  Plan p = fixed_plan("avg_pool", self->sizes(), kernel_size, stride, padding, DimVector{1},
                      ceil_mode, count_include_pad, &out_shape);
  return avg_pool_run("avg_pool", self, p, out_shape, divisor_override);
}

Tensor _avg_pool_backward(const Tensor& grad_output, const DimVector& input_size,
                          const DimVector& kernel_size, const DimVector& stride,
                          const DimVector& padding, bool ceil_mode, bool count_include_pad,
                          std::optional<int64_t> divisor_override) {
  EMBER_CHECK_KIND(!divisor_override || *divisor_override != 0, Value,
                   "avg_pool_backward: divisor_override must be non-zero");
  DimVector out_shape;
  Plan p = fixed_plan("avg_pool_backward", input_size, kernel_size, stride, padding, DimVector{1},
                      ceil_mode, count_include_pad, &out_shape);
  return avg_pool_backward_run("avg_pool_backward", grad_output, input_size, p, out_shape,
                               divisor_override);
}

Tensor _adaptive_avg_pool(const Tensor& self, const DimVector& output_size) {
  DimVector out_shape;
  Plan p = adaptive_plan("adaptive_avg_pool", self->sizes(), output_size, &out_shape);
  return avg_pool_run("adaptive_avg_pool", self, p, out_shape, std::nullopt);
}

Tensor _adaptive_avg_pool_backward(const Tensor& grad_output, const DimVector& input_size,
                                   const DimVector& output_size) {
  DimVector out_shape;
  Plan p = adaptive_plan("adaptive_avg_pool_backward", input_size, output_size, &out_shape);
  return avg_pool_backward_run("adaptive_avg_pool_backward", grad_output, input_size, p, out_shape,
                               std::nullopt);
}

void register_pool() {
  register_kernel("_max_pool", DeviceType::CUDA, &_max_pool);
  register_kernel("_adaptive_max_pool", DeviceType::CUDA, &_adaptive_max_pool);
  register_kernel("_max_pool_backward", DeviceType::CUDA, &_max_pool_backward);
  register_kernel("_avg_pool", DeviceType::CUDA, &_avg_pool);
  register_kernel("_avg_pool_backward", DeviceType::CUDA, &_avg_pool_backward);
  register_kernel("_adaptive_avg_pool", DeviceType::CUDA, &_adaptive_avg_pool);
  register_kernel("_adaptive_avg_pool_backward", DeviceType::CUDA, &_adaptive_avg_pool_backward);
}

}  // namespace pool
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::pool::register_pool)
