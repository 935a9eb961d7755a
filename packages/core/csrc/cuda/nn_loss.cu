// CUDA kernels of nll_loss and of the fused cross entropy over class indices, with their backward
// (semantics, formulas and dtype rules: kernels/cpu/nn_loss.cpp; the other losses are
// composites). self (C), (N, C) or (N, C, d1, ...) is seen as (N, C, S), a sample being one (n, s)
// with its C logits at stride S. Cross entropy gives each sample a team (nn_common.cuh: a warp or
// a block over a contiguous row of classes, a thread per sample when S > 1) that finds the
// log-sum-exp in one online pass. 'mean' / 'sum' add the per-sample losses and weights in double
// in one block, in a fixed order (deterministic). Targets out of range are reported through a
// device flag that the host reads back after the launches (a sync point), raising the CPU's
// IndexError.
#include <limits>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/nn_common.cuh"
#include "kernels/loss_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

using nnk::acc_t;
using nnk::ErrorSlot;
using Reduction = nn::Reduction;

constexpr int kReduceThreads = 1024;

using nn::NllShape;

// The CPU's checks (kernels/loss_rules.h) after the CUDA device checks.
NllShape check_nll(const Tensor& self, const Tensor& target, const Tensor& weight,
                   const char* op = "nll_loss") {
  ix::check_cuda(self, op, "self");
  nnk::check_device(self, target, op, "target");
  nnk::check_device(self, weight, op, "weight");
  return nn::check_nll(self, target, weight, op);
}

// The CPU kernel's IndexError for a target out of range.
checks::Describe target_error(const char* op, int64_t c, int64_t ignore_index) {
  return [op, c, ignore_index](int64_t v) {
    return checks::report(ErrorKind::Index, op, ": target ", v, " is out of bounds (", c,
                          " classes; ignore_index is ", ignore_index, ")");
  };
}

// Class of target i: k in [0, C), -1 for ignore_index, -2 (reported) when out of range.
__device__ __forceinline__ int64_t class_at(const int64_t* t, int64_t i, int64_t C,
                                            int64_t ignore_index, ErrorSlot* err, bool report) {
  const int64_t k = t[i];
  if (k == ignore_index) return -1;
  if (k < 0 || k >= C) {
    if (report) nnk::report_error(err, k);
    return -2;
  }
  return k;
}

template <class T>
__device__ __forceinline__ double weight_of(const T* w, int64_t k) {
  return w ? static_cast<double>(to_op<T>(w[k])) : 1.0;
}

// ---- nll_loss ---------------------------------------------------------------------------------

template <class T>
__global__ void nll_none_kernel(const T* x, const int64_t* t, const T* w, T* out, int64_t count,
                                int64_t C, int64_t S, int64_t ignore_index, ErrorSlot* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = class_at(t, i, C, ignore_index, err, true);
    double v = 0.0;
    if (k >= 0) {
      const int64_t n = i / S, s = i - n * S;
      v = -weight_of(w, k) * static_cast<double>(to_op<T>(x[(n * C + k) * S + s]));
    }
    out[i] = from_op<T>(v);
  }
}

// One block: out[0] = sum (or weighted mean) of -w[k] x[n, k, s] over the kept samples.
template <class T>
__global__ void nll_reduce_kernel(const T* x, const int64_t* t, const T* w, T* out, int64_t count,
                                  int64_t C, int64_t S, int64_t ignore_index, bool mean,
                                  ErrorSlot* err) {
  double acc = 0, tw = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const int64_t k = class_at(t, i, C, ignore_index, err, true);
    if (k < 0) continue;
    const int64_t n = i / S, s = i - n * S;
    const double wk = weight_of(w, k);
    acc += -wk * static_cast<double>(to_op<T>(x[(n * C + k) * S + s]));
    tw += wk;
  }
  acc = nnk::team_sum(acc, nnk::kBlock);
  tw = nnk::team_sum(tw, nnk::kBlock);
  if (threadIdx.x == 0) out[0] = from_op<T>(mean ? acc / tw : acc);  // 0 / 0: nan, as PyTorch
}

// One block: *tw = sum of w[k] over the kept samples (the 'mean' divisor); reports bad targets.
template <class T>
__global__ void total_weight_kernel(const int64_t* t, const T* w, double* tw_out, int64_t count,
                                    int64_t C, int64_t ignore_index, ErrorSlot* err) {
  double tw = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const int64_t k = class_at(t, i, C, ignore_index, err, true);
    if (k >= 0) tw += weight_of(w, k);
  }
  tw = nnk::team_sum(tw, nnk::kBlock);
  if (threadIdx.x == 0) *tw_out = tw;
}

// gi (zeroed) at each kept sample's target: -w[k] * (g[i], or g[0] / tw when reduced).
template <class T>
__global__ void nll_backward_kernel(const T* go, const int64_t* t, const T* w, const double* tw,
                                    T* gi, int64_t count, int64_t C, int64_t S,
                                    int64_t ignore_index, bool none, ErrorSlot* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = class_at(t, i, C, ignore_index, err, false);
    if (k < 0) continue;
    const int64_t n = i / S, s = i - n * S;
    const double gv = none ? static_cast<double>(to_op<T>(go[i]))
                           : static_cast<double>(to_op<T>(go[0])) / (tw ? *tw : 1.0);
    gi[(n * C + k) * S + s] = from_op<T>(-weight_of(w, k) * gv);
  }
}

struct LossSetup {
  NllShape sh;
  Reduction red;
  Tensor x, t, w;
};

LossSetup loss_setup(const char* op, const Tensor& self, const Tensor& target, const Tensor& weight,
                     const std::string& reduction) {
  LossSetup c;
  c.red = nn::parse_reduction(reduction, op);
  c.sh = check_nll(self, target, weight, op);
  c.x = nnk::contig(self, op);
  c.t = nnk::contig(target, ScalarType::Int64, op);
  c.w = weight ? nnk::contig(weight, self->dtype(), op) : Tensor();
  return c;
}

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t ? t->data_as<T>() : nullptr;
}

Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight,
                const std::string& reduction, int64_t ignore_index) {
  const char* op = "nll_loss";
  ix::check_cuda(self, op, "self");
  DeviceGuard guard(ix::device_index(self));
  LossSetup ls = loss_setup(op, self, target, weight, reduction);
  const NllShape sh = ls.sh;
  const int64_t count = sh.n * sh.s;
  Tensor out = empty(ls.red == Reduction::None ? target->sizes() : DimVector{}, self->dtype(),
                     self->device());
  checks::DeviceCheck slot = nnk::error_check(self, target_error(op, sh.c, ignore_index));
  cudaStream_t st = ix::stream_of(self);
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    if (ls.red == Reduction::None) {
      if (count == 0) return;
      nll_none_kernel<T><<<blocks_for(count), kBlockSize, 0, st>>>(
          ls.x->data_as<T>(), ls.t->data_as<int64_t>(), ptr_or_null<T>(ls.w), out->data_as<T>(),
          count, sh.c, sh.s, ignore_index, slot.slot());
    } else {
      nll_reduce_kernel<T><<<1, kReduceThreads, 0, st>>>(
          ls.x->data_as<T>(), ls.t->data_as<int64_t>(), ptr_or_null<T>(ls.w), out->data_as<T>(),
          count, sh.c, sh.s, ignore_index, ls.red == Reduction::Mean, slot.slot());
    }
    check_launch(op);
  });
  slot.done();
  return out;
}

// The 'mean' divisor on the device (null when the reduction is not 'mean').
Tensor total_weight(const LossSetup& ls, int64_t ignore_index, ErrorSlot* slot, const char* op) {
  if (ls.red != Reduction::Mean) return Tensor();
  Tensor tw = empty(DimVector{}, ScalarType::Float64, ls.x->device());
  EMBER_DISPATCH_FLOAT(ls.x->dtype(), op, [&] {
    using T = scalar_t;
    total_weight_kernel<T><<<1, kReduceThreads, 0, ix::stream_of(ls.x)>>>(
        ls.t->data_as<int64_t>(), ptr_or_null<T>(ls.w), tw->data_as<double>(), ls.sh.n * ls.sh.s,
        ls.sh.c, ignore_index, slot);
    check_launch(op);
  });
  return tw;
}

Tensor check_grad_output(const char* op, const Tensor& grad_output, const Tensor& self,
                         const Tensor& target, Reduction red) {
  nnk::check_device(self, grad_output, op, "grad_output");
  Tensor g = nnk::contig(grad_output, self->dtype(), op);
  nn::check_loss_grad_output(op, g, target, red);
  return g;
}

Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                         const Tensor& weight, const std::string& reduction, int64_t ignore_index) {
  const char* op = "nll_loss_backward";
  ix::check_cuda(self, op, "self");
  DeviceGuard guard(ix::device_index(self));
  LossSetup ls = loss_setup(op, self, target, weight, reduction);
  const NllShape sh = ls.sh;
  const int64_t count = sh.n * sh.s;
  Tensor g = check_grad_output(op, grad_output, self, target, ls.red);
  Tensor gi = empty(self->sizes(), self->dtype(), self->device());
  ix::zero(gi);
  checks::DeviceCheck slot = nnk::error_check(self, target_error("nll_loss", sh.c, ignore_index));
  // Checks every target (and gives the 'mean' divisor).
  LossSetup chk = ls;
  chk.red = Reduction::Mean;
  Tensor tw = total_weight(chk, ignore_index, slot.slot(), "nll_loss");
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    if (count == 0) return;
    nll_backward_kernel<T><<<blocks_for(count), kBlockSize, 0, ix::stream_of(self)>>>(
        g->data_as<T>(), ls.t->data_as<int64_t>(), ptr_or_null<T>(ls.w),
        ls.red == Reduction::Mean ? tw->data_as<double>() : nullptr, gi->data_as<T>(), count, sh.c,
        sh.s, ignore_index, ls.red == Reduction::None, slot.slot());
    check_launch(op);
  });
  slot.done();
  return gi;
}

// ---- fused cross entropy over class indices ---------------------------------------------------
// Per kept sample with target k: lse = log(sum_c exp(x_c)), eps = label_smoothing, w the class
// weights (1 without), W = sum_c w_c:
//   loss = (1 - eps) w_k (lse - x_k) + eps / C (W lse - sum_c w_c x_c)
//   d loss / d x_c = a softmax(x)_c - eps / C w_c - (1 - eps) w_k [c == k],
//   a = (1 - eps) w_k + eps W / C.

// One block: *W = sum of the class weights.
template <class T>
__global__ void weight_sum_kernel(const T* w, int64_t C, double* out) {
  double s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += static_cast<double>(to_op<T>(w[c]));
  s = nnk::team_sum(s, nnk::kBlock);
  if (threadIdx.x == 0) *out = s;
}

// Per sample: lse (opmath dtype), and the loss: into out_none (reduction 'none') or into
// loss / wk (float64, for the reduction kernel).
template <class T>
__global__ void ce_forward_kernel(const T* x, const int64_t* t, const T* w, const double* Wp,
                                  acc_t<T>* lse_out, T* out_none, double* loss, double* wk_out,
                                  int64_t count, int64_t C, int64_t S, int64_t ignore_index,
                                  double eps, int mode, ErrorSlot* err) {
  using A = acc_t<T>;
  const nnk::Team tm = nnk::make_team(mode);
  if (tm.id >= count) return;
  const int64_t i = tm.id;
  const int64_t k = class_at(t, i, C, ignore_index, err, tm.rank == 0);
  if (k < 0) {  // the whole team takes this branch
    if (tm.rank == 0) {
      lse_out[i] = A(0);
      if (out_none) {
        out_none[i] = from_op<T>(0.0);
      } else {
        loss[i] = 0.0;
        wk_out[i] = 0.0;
      }
    }
    return;
  }
  const int64_t n = i / S, s = i - n * S;
  const T* row = x + n * C * S + s;
  nnk::MaxSum<A> ms{-std::numeric_limits<A>::infinity(), A(0)};
  A wsum = 0;
  for (int64_t c = tm.rank; c < C; c += tm.size) {
    const A v = to_op<T>(row[c * S]);
    nnk::maxsum_step(ms, v);
    if (eps > 0) wsum += (w ? to_op<T>(w[c]) : A(1)) * v;
  }
  ms = nnk::team_reduce(ms, mode, nnk::MergeMaxSum{});
  if (eps > 0) wsum = nnk::team_sum(wsum, mode);
  if (tm.rank != 0) return;
  // in double: a large max would absorb log(sum) in float (the loss is lse - x_k)
  const double l = static_cast<double>(ms.m) + log(static_cast<double>(ms.s));
  lse_out[i] = static_cast<A>(l);
  const double wk = weight_of(w, k);
  double v = wk * (l - static_cast<double>(to_op<T>(row[k * S])));
  if (eps > 0) {
    const double W = Wp ? *Wp : static_cast<double>(C);
    v = (1.0 - eps) * v + eps / static_cast<double>(C) * (W * l - static_cast<double>(wsum));
  }
  if (out_none) {
    out_none[i] = from_op<T>(v);
  } else {
    loss[i] = v;
    wk_out[i] = wk;
  }
}

// One block: out[0] = sum(loss) or sum(loss) / sum(wk).
template <class T>
__global__ void sum_losses_kernel(const double* loss, const double* wk, int64_t count, bool mean,
                                  T* out) {
  double acc = 0, tw = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    acc += loss[i];
    tw += wk[i];
  }
  acc = nnk::team_sum(acc, nnk::kBlock);
  tw = nnk::team_sum(tw, nnk::kBlock);
  if (threadIdx.x == 0) out[0] = from_op<T>(mean ? acc / tw : acc);
}

template <class T>
__global__ void ce_backward_kernel(const T* go, const T* x, const int64_t* t, const T* w,
                                   const double* Wp, const acc_t<T>* lse_in, const double* tw,
                                   T* gi, int64_t count, int64_t C, int64_t S, int64_t ignore_index,
                                   double eps, bool none, int mode) {
  using A = acc_t<T>;
  const nnk::Team tm = nnk::make_team(mode);
  if (tm.id >= count) return;
  const int64_t i = tm.id;
  const int64_t n = i / S, s = i - n * S;
  const T* row = x + n * C * S + s;
  T* o = gi + n * C * S + s;
  const int64_t k = class_at(t, i, C, ignore_index, nullptr, false);
  if (k < 0) {
    for (int64_t c = tm.rank; c < C; c += tm.size) o[c * S] = from_op<T>(0.0);
    return;
  }
  const double sc = none ? static_cast<double>(to_op<T>(go[i]))
                         : static_cast<double>(to_op<T>(go[0])) / (tw ? *tw : 1.0);
  const double wk = weight_of(w, k);
  const double W = Wp ? *Wp : static_cast<double>(C);
  const double a = sc * ((1.0 - eps) * wk + eps * W / static_cast<double>(C));
  const double bw = sc * eps / static_cast<double>(C);
  const A al = lse_in[i], aa = static_cast<A>(a), ab = static_cast<A>(bw);
  for (int64_t c = tm.rank; c < C; c += tm.size) {
    const A wc = w ? to_op<T>(w[c]) : A(1);
    T v = from_op<T>(aa * dm::exp(to_op<T>(row[c * S]) - al) - ab * wc);
    if (c == k) v = from_op<T>(static_cast<double>(to_op<T>(v)) - sc * (1.0 - eps) * wk);
    o[c * S] = v;
  }
}

using nn::ce_lse_dtype;

// W on the device when label smoothing needs it and there are class weights (else null: C).
Tensor weight_sum(const LossSetup& ls, double eps, const char* op) {
  if (!(eps > 0) || !ls.w) return Tensor();
  Tensor W = empty(DimVector{}, ScalarType::Float64, ls.x->device());
  EMBER_DISPATCH_FLOAT(ls.x->dtype(), op, [&] {
    using T = scalar_t;
    weight_sum_kernel<T><<<1, kReduceThreads, 0, ix::stream_of(ls.x)>>>(ls.w->data_as<T>(), ls.sh.c,
                                                                        W->data_as<double>());
    check_launch(op);
  });
  return W;
}

std::tuple<Tensor, Tensor> _cross_entropy_loss(const Tensor& self, const Tensor& target,
                                               const Tensor& weight, const std::string& reduction,
                                               int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  ix::check_cuda(self, op, "self");
  nn::check_label_smoothing(op, label_smoothing);
  DeviceGuard guard(ix::device_index(self));
  LossSetup ls = loss_setup(op, self, target, weight, reduction);
  const NllShape sh = ls.sh;
  const int64_t C = sh.c, count = sh.n * sh.s;
  const double eps = label_smoothing;
  const bool none = ls.red == Reduction::None;
  Tensor out = empty(none ? target->sizes() : DimVector{}, self->dtype(), self->device());
  Tensor lse = empty(target->sizes(), ce_lse_dtype(self->dtype()), self->device());
  checks::DeviceCheck slot = nnk::error_check(self, target_error(op, C, ignore_index));
  Tensor W = weight_sum(ls, eps, op);
  Tensor loss, wk;
  if (!none) {
    loss = empty(DimVector{count}, ScalarType::Float64, self->device());
    wk = empty(DimVector{count}, ScalarType::Float64, self->device());
  }
  const int mode = nnk::team_mode(C, sh.s);
  cudaStream_t st = ix::stream_of(self);
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    using A = acc_t<T>;
    if (count > 0) {
      ce_forward_kernel<T><<<nnk::team_blocks(mode, count), nnk::team_threads(mode), 0, st>>>(
          ls.x->data_as<T>(), ls.t->data_as<int64_t>(), ptr_or_null<T>(ls.w),
          W ? W->data_as<double>() : nullptr, lse->data_as<A>(), none ? out->data_as<T>() : nullptr,
          none ? nullptr : loss->data_as<double>(), none ? nullptr : wk->data_as<double>(), count,
          C, sh.s, ignore_index, eps, mode, slot.slot());
      check_launch(op);
    }
    if (!none) {
      sum_losses_kernel<T>
          <<<1, kReduceThreads, 0, st>>>(loss->data_as<double>(), wk->data_as<double>(), count,
                                         ls.red == Reduction::Mean, out->data_as<T>());
      check_launch(op);
    }
  });
  slot.done();
  return {out, lse};
}

Tensor _cross_entropy_loss_backward(const Tensor& grad_output, const Tensor& self,
                                    const Tensor& target, const Tensor& weight, const Tensor& lse,
                                    const std::string& reduction, int64_t ignore_index,
                                    double label_smoothing) {
  const char* op = "cross_entropy_backward";
  ix::check_cuda(self, op, "self");
  nn::check_label_smoothing(op, label_smoothing);
  DeviceGuard guard(ix::device_index(self));
  LossSetup ls = loss_setup(op, self, target, weight, reduction);
  nn::check_ce_lse(op, lse, target);
  nnk::check_device(self, lse, op, "lse");
  Tensor l = nnk::contig(lse, ce_lse_dtype(self->dtype()), op);
  const NllShape sh = ls.sh;
  const int64_t C = sh.c, count = sh.n * sh.s;
  const double eps = label_smoothing;
  Tensor g = check_grad_output(op, grad_output, self, target, ls.red);
  Tensor gi = empty(self->sizes(), self->dtype(), self->device());
  checks::DeviceCheck slot = nnk::error_check(self, target_error(op, C, ignore_index));
  // Checks every target (and gives the 'mean' divisor).
  LossSetup chk = ls;
  chk.red = Reduction::Mean;
  Tensor tw = total_weight(chk, ignore_index, slot.slot(), op);
  Tensor W = weight_sum(ls, eps, op);
  const int mode = nnk::team_mode(C, sh.s);
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    using A = acc_t<T>;
    if (count == 0 || C == 0) return;
    ce_backward_kernel<T>
        <<<nnk::team_blocks(mode, count), nnk::team_threads(mode), 0, ix::stream_of(self)>>>(
            g->data_as<T>(), ls.x->data_as<T>(), ls.t->data_as<int64_t>(), ptr_or_null<T>(ls.w),
            W ? W->data_as<double>() : nullptr, l->data_as<A>(),
            ls.red == Reduction::Mean ? tw->data_as<double>() : nullptr, gi->data_as<T>(), count, C,
            sh.s, ignore_index, eps, ls.red == Reduction::None, mode);
    check_launch(op);
  });
  slot.done();
  return gi;
}

void register_losses() {
  register_kernel("nll_loss", DeviceType::CUDA, &nll_loss);
  register_kernel("nll_loss_backward", DeviceType::CUDA, &nll_loss_backward);
  register_kernel("_cross_entropy_loss", DeviceType::CUDA, &_cross_entropy_loss);
  register_kernel("_cross_entropy_loss_backward", DeviceType::CUDA, &_cross_entropy_loss_backward);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_losses)
