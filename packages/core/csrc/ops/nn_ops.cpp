// Composite nn ops (ops/nn.yaml entries with `Composite` dispatch): the conv/pool/norm entry
// points under PyTorch's names (argument normalization, unbatched inputs), the losses written
// over log_softmax / nll_loss and pointwise ops, dropout, attention and the like. They call
// ops::, so autograd records the ops they are made of.
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "core/dispatch.h"
#include "kernels/norm_rules.h"
#include "ops.h"
#include "ops/host_sync.h"
#include "ops/sdp_backends.h"

namespace ember {

namespace {
std::atomic<bool> g_sdp_math{true}, g_sdp_fused{true};
}  // namespace

void set_sdp_backends(bool math, bool fused) {
  g_sdp_math = math;
  g_sdp_fused = fused;
}
bool sdp_math_enabled() { return g_sdp_math; }
bool sdp_fused_enabled() { return g_sdp_fused; }

namespace composite {
namespace {

const Scalar kOne(int64_t(1));

Tensor add(const Tensor& a, const TensorOrScalar& b) { return ops::add(a, b, kOne, Tensor()); }
Tensor sub(const Tensor& a, const TensorOrScalar& b) { return ops::sub(a, b, kOne, Tensor()); }
Tensor mul(const Tensor& a, const TensorOrScalar& b) { return ops::mul(a, b, Tensor()); }
Tensor div(const Tensor& a, const TensorOrScalar& b) {
  return ops::div(a, b, std::nullopt, Tensor());
}
Tensor rsub1(const Tensor& a) { return ops::rsub(a, TensorOrScalar(kOne), kOne); }  // 1 - a

Tensor reduce(const Tensor& loss, const std::string& reduction, const char* op) {
  if (reduction == "none") return loss;
  if (reduction == "mean") return ops::mean(loss, std::nullopt, false, std::nullopt);
  if (reduction == "sum") return ops::sum(loss, std::nullopt, false, std::nullopt);
  EMBER_FAIL(Value, op, ": reduction must be 'none', 'mean' or 'sum', got '", reduction, "'");
}

void check_same_shape(const char* op, const Tensor& self, const Tensor& target) {
  EMBER_CHECK_KIND(self->sizes() == target->sizes(), Value, op, ": expected target of shape ",
                   shape_str(self->sizes()), " (the input's shape), got ",
                   shape_str(target->sizes()));
}

DimVector expand_k(const DimVector& v, int64_t k, const char* name, const char* op) {
  if (v.size() == 1 && k != 1) return DimVector(k, v[0]);
  EMBER_CHECK_KIND(static_cast<int64_t>(v.size()) == k, Runtime, op, ": ", name,
                   " must be an int or a tuple of ", k, " ints, got ", shape_str(v));
  return v;
}

// (C, *spatial) inputs gain a batch dim of 1; returns whether the input was batched.
bool batch_input(const char* op, const Tensor& input, int64_t k, Tensor* x) {
  EMBER_CHECK(input->dim() == k + 1 || input->dim() == k + 2, op, ": expected a ", k + 1,
              "-D (unbatched) or ", k + 2, "-D (batched) input, got input of shape ",
              shape_str(input->sizes()));
  const bool batched = input->dim() == k + 2;
  *x = batched ? input : ops::unsqueeze(input, 0);
  return batched;
}
Tensor unbatch(const Tensor& r, bool batched) {
  return batched ? r : ops::squeeze(r, DimVector{0});
}

void check_weight_dim(const char* op, const Tensor& weight, int64_t k) {
  EMBER_CHECK(weight->dim() == k + 2, op, ": expected a ", k + 2,
              "-D weight (out_channels, in_channels / groups, *kernel_size), got weight of shape ",
              shape_str(weight->sizes()));
}

Tensor conv_nd(const char* op, int64_t k, const Tensor& input, const Tensor& weight,
               const Tensor& bias, const DimVector& stride, const DimVector& padding,
               const DimVector& dilation, int64_t groups) {
  check_weight_dim(op, weight, k);
  Tensor x;
  bool batched = batch_input(op, input, k, &x);
  Tensor r = ops::convolution(
      x, weight, bias, expand_k(stride, k, "stride", op), expand_k(padding, k, "padding", op),
      expand_k(dilation, k, "dilation", op), false, DimVector(k, 0), groups);
  return unbatch(r, batched);
}

// padding='valid' (none) or 'same' (output size = input size; stride must be 1). An odd total
// padding puts the extra element at the end, as PyTorch does.
Tensor conv_nd_str(const char* op, int64_t k, const Tensor& input, const Tensor& weight,
                   const Tensor& bias, const DimVector& stride, const std::string& padding,
                   const DimVector& dilation, int64_t groups) {
  if (padding == "valid")
    return conv_nd(op, k, input, weight, bias, stride, DimVector{0}, dilation, groups);
  EMBER_CHECK_KIND(padding == "same", Runtime, op,
                   ": padding must be 'valid', 'same', an int or a tuple of ints, got '", padding,
                   "'");
  DimVector st = expand_k(stride, k, "stride", op);
  for (int64_t s : st)
    EMBER_CHECK_KIND(s == 1, Runtime, op,
                     ": padding='same' is not supported for strided "
                     "convolutions (stride ",
                     shape_str(st), ")");
  check_weight_dim(op, weight, k);
  DimVector dl = expand_k(dilation, k, "dilation", op);
  Tensor x;
  bool batched = batch_input(op, input, k, &x);
  DimVector pad(k, 0);
  std::vector<int64_t> odd;  // dims whose total padding is odd
  for (int64_t d = 0; d < k; ++d) {
    const int64_t total = dl[d] * (weight->size(d + 2) - 1);
    pad[d] = (total + 1) / 2;
    if (total % 2 == 1) odd.push_back(d);
  }
  Tensor r = ops::convolution(x, weight, bias, st, pad, dl, false, DimVector(k, 0), groups);
  // An odd total puts the extra zero at the end (as PyTorch does): pad one more on both sides and
  // drop the first output position.
  for (int64_t d : odd) {
    const int64_t n = r->size(d + 2);
    r = ops::split_with_sizes(r, DimVector{1, n - 1}, d + 2)[1];
  }
  return unbatch(r, batched);
}

Tensor conv_transpose_nd(const char* op, int64_t k, const Tensor& input, const Tensor& weight,
                         const Tensor& bias, const DimVector& stride, const DimVector& padding,
                         const DimVector& output_padding, int64_t groups,
                         const DimVector& dilation) {
  EMBER_CHECK(weight->dim() == k + 2, op, ": expected a ", k + 2,
              "-D weight (in_channels, out_channels / groups, *kernel_size), got weight of shape ",
              shape_str(weight->sizes()));
  Tensor x;
  bool batched = batch_input(op, input, k, &x);
  Tensor r =
      ops::convolution(x, weight, bias, expand_k(stride, k, "stride", op),
                       expand_k(padding, k, "padding", op), expand_k(dilation, k, "dilation", op),
                       true, expand_k(output_padding, k, "output_padding", op), groups);
  return unbatch(r, batched);
}

// Which dims of a pooling input must be non-empty, as PyTorch checks them per op: every dim but
// the batch (fixed-window pools: an unbatched input's channel dim too), every dim but the first
// (adaptive max pools and adaptive_avg_pool3d: an unbatched input may have 0 channels), or the
// spatial dims only (adaptive_avg_pool1d/2d).
enum class PoolEmpty { kFixed, kFixed3d, kAllButFirst, kSpatial };

std::string torch_shape(const DimVector& sizes) {  // PyTorch's "[1, 0, 4]"
  std::string r = "[";
  for (int64_t i = 0; i < sizes.size(); ++i) r += (i ? ", " : "") + std::to_string(sizes[i]);
  return r + "]";
}

void check_pool_input(const char* op, const Tensor& self, int64_t k, PoolEmpty rule) {
  const int64_t nd = self->dim();
  EMBER_CHECK(nd == k + 1 || nd == k + 2, op, ": expected a ", k + 1, "-D (unbatched) or ", k + 2,
              "-D (batched) input, got input of shape ", shape_str(self->sizes()));
  const DimVector& sz = self->sizes();
  const int64_t first = rule == PoolEmpty::kSpatial       ? nd - k
                        : rule == PoolEmpty::kAllButFirst ? 1
                                                          : (nd == k + 2 ? 1 : 0);
  for (int64_t d = first; d < nd; ++d) {
    if (sz[d] != 0) continue;
    if (rule == PoolEmpty::kFixed)
      EMBER_FAIL(Runtime, op, ": Expected ", k + 1, "D or ", k + 2,
                 "D (batch mode) tensor with optional 0 dim batch size for input, but got:",
                 torch_shape(sz));
    if (rule == PoolEmpty::kFixed3d)
      EMBER_FAIL(Runtime, op,
                 "(): Expected input's non-batch dimensions to have positive length, but input "
                 "has a shape of ",
                 torch_shape(sz), " and non-batch dimension ", d - (nd - k - 1),
                 " has length zero!");
    EMBER_FAIL(Runtime, op,
               "(): Expected input to have non-zero size for non-batch dimensions, but input has "
               "sizes ",
               torch_shape(sz), " with dimension ", d, " being empty");
  }
}

std::tuple<Tensor, Tensor> max_pool_nd(const char* op, int64_t k, const Tensor& self,
                                       const DimVector& kernel_size, const DimVector& stride,
                                       const DimVector& padding, const DimVector& dilation,
                                       bool ceil_mode) {
  check_pool_input(op, self, k, k == 3 ? PoolEmpty::kFixed3d : PoolEmpty::kFixed);
  DimVector ks = expand_k(kernel_size, k, "kernel_size", op);
  DimVector st = stride.empty() ? ks : expand_k(stride, k, "stride", op);
  return ops::_max_pool(self, ks, st, expand_k(padding, k, "padding", op),
                        expand_k(dilation, k, "dilation", op), ceil_mode);
}

Tensor avg_pool_nd(const char* op, int64_t k, const Tensor& self, const DimVector& kernel_size,
                   const DimVector& stride, const DimVector& padding, bool ceil_mode,
                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  check_pool_input(op, self, k, k == 3 ? PoolEmpty::kFixed3d : PoolEmpty::kFixed);
  DimVector ks = expand_k(kernel_size, k, "kernel_size", op);
  return ops::_avg_pool(self, ks, stride.empty() ? ks : expand_k(stride, k, "stride", op),
                        expand_k(padding, k, "padding", op), ceil_mode, count_include_pad,
                        divisor_override);
}

std::tuple<Tensor, Tensor> adaptive_max_pool_nd(const char* op, int64_t k, const Tensor& self,
                                                const DimVector& output_size) {
  check_pool_input(op, self, k, PoolEmpty::kAllButFirst);
  return ops::_adaptive_max_pool(self, expand_k(output_size, k, "output_size", op));
}

Tensor adaptive_avg_pool_nd(const char* op, int64_t k, const Tensor& self,
                            const DimVector& output_size) {
  check_pool_input(op, self, k, k == 3 ? PoolEmpty::kAllButFirst : PoolEmpty::kSpatial);
  return ops::_adaptive_avg_pool(self, expand_k(output_size, k, "output_size", op));
}

}  // namespace

// ---- activations ----------------------------------------------------------------------------

namespace {
const Scalar kSeluAlpha(1.6732632423543772848170429916717);
const Scalar kSeluScale(1.0507009873554804934193349852946);
Scalar celu_input_scale(const Scalar& alpha, const char* op) {
  // RuntimeError, as PyTorch's "ZeroDivisionError: alpha cannot be 0 for CELU"
  EMBER_CHECK_KIND(alpha.to_double() != 0.0, Runtime, op, ": alpha must not be 0");
  return Scalar(1.0 / alpha.to_double());
}
}  // namespace

Tensor selu(const Tensor& self) {
  return ops::elu(self, kSeluAlpha, kSeluScale, Scalar(1.0), Tensor());
}
// The in-place forms are elu_ / hardtanh with out=self: one kernel writing into self.
Tensor selu_(const Tensor& self) { return ops::elu_(self, kSeluAlpha, kSeluScale, Scalar(1.0)); }
Tensor celu(const Tensor& self, const Scalar& alpha) {
  return ops::elu(self, alpha, Scalar(1.0), celu_input_scale(alpha, "celu"), Tensor());
}
Tensor celu_(const Tensor& self, const Scalar& alpha) {
  return ops::elu_(self, alpha, Scalar(1.0), celu_input_scale(alpha, "celu_"));
}
Tensor relu6(const Tensor& self) { return ops::hardtanh(self, Scalar(0.0), Scalar(6.0), Tensor()); }
Tensor relu6_(const Tensor& self) { return ops::hardtanh(self, Scalar(0.0), Scalar(6.0), self); }

// ---- losses ---------------------------------------------------------------------------------

namespace {
// cross_entropy over class indices from log-probabilities logp: nll_loss plus the label-smoothing
// term (wb: the weight shaped to broadcast along the class dim, or undefined).
Tensor cross_entropy_indices(const Tensor& self, const Tensor& logp, const Tensor& wb,
                             const Tensor& target, const Tensor& weight,
                             const std::string& reduction, int64_t ignore_index,
                             double label_smoothing) {
  const int64_t cdim = self->dim() == 1 ? 0 : 1;
  const int64_t C = self->size(cdim);
  Tensor nll = ops::nll_loss(logp, target, weight, reduction, ignore_index);
  if (label_smoothing == 0.0) return nll;
  Tensor smooth =
      ops::neg(ops::sum(wb ? mul(logp, wb) : logp, DimVector{cdim}, false, std::nullopt), Tensor());
  Tensor ignored = ops::eq(target, Scalar(ignore_index), Tensor());
  smooth = ops::where(ignored, TensorOrScalar(Scalar(0.0)), TensorOrScalar(smooth), Tensor());
  Tensor ret;
  if (reduction == "none") {
    ret = smooth;
  } else if (reduction == "sum") {
    ret = ops::sum(smooth, std::nullopt, false, std::nullopt);
  } else {
    Tensor denom;
    Tensor kept = ops::logical_not(ignored, Tensor());
    if (weight) {
      Tensor safe_t =
          ops::where(ignored, TensorOrScalar(Scalar(int64_t(0))), TensorOrScalar(target), Tensor());
      Tensor wt = ops::reshape(ops::index_select(weight, 0, ops::flatten(safe_t, 0, -1), Tensor()),
                               target->sizes());
      denom = ops::sum(mul(wt, ops::_to_dtype(kept, wt->dtype(), false)), std::nullopt, false,
                       std::nullopt);
    } else {
      denom =
          ops::sum(ops::_to_dtype(kept, self->dtype(), false), std::nullopt, false, std::nullopt);
    }
    ret = div(ops::sum(smooth, std::nullopt, false, std::nullopt), denom);
  }
  return add(mul(nll, Scalar(1.0 - label_smoothing)), mul(ret, Scalar(label_smoothing / C)));
}
}  // namespace

Tensor cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight,
                     const std::string& reduction, int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  EMBER_CHECK_KIND(label_smoothing >= 0.0 && label_smoothing <= 1.0, Value, op,
                   ": label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  EMBER_CHECK(self->dim() >= 1, op,
              ": expected input of shape (C), (N, C) or (N, C, d1, ...), got ",
              shape_str(self->sizes()));
  if (reduction != "none" && reduction != "mean" && reduction != "sum")
    EMBER_FAIL(Value, op, ": reduction must be 'none', 'mean' or 'sum', got '", reduction, "'");
  const int64_t cdim = self->dim() == 1 ? 0 : 1;
  const int64_t C = self->size(cdim);
  if (weight)
    EMBER_CHECK(weight->dim() == 1 && weight->size(0) == C, op,
                ": expected weight to be a 1-D tensor of ", C, " elements (one per class), got ",
                shape_str(weight->sizes()));
  // Class indices over contiguous class rows ((C) or (N, C)): one fused kernel each way. With
  // spatial dims the classes are strided and the fused kernel is a scalar loop, so those take
  // log_softmax's vectorized column pass and nll_loss instead.
  if (!is_floating(target->dtype()) && self->dim() <= 2)
    return std::get<0>(
        ops::_cross_entropy_loss(self, target, weight, reduction, ignore_index, label_smoothing));
  Tensor logp = ops::log_softmax(self, cdim, std::nullopt);
  Tensor wb;  // weight shaped to broadcast along the class dim
  if (weight) {
    DimVector ws(self->dim(), 1);
    ws[cdim] = C;
    wb = ops::reshape(weight, ws);
  }
  if (!is_floating(target->dtype()))
    return cross_entropy_indices(self, logp, wb, target, weight, reduction, ignore_index,
                                 label_smoothing);
  // class probabilities
  EMBER_CHECK(target->sizes() == self->sizes(), op,
              ": expected class-probability target of the input's shape ", shape_str(self->sizes()),
              ", got ", shape_str(target->sizes()), " (class indices must be an integer tensor)");
  Tensor t = target;
  if (label_smoothing > 0)
    t = add(mul(t, Scalar(1.0 - label_smoothing)), Scalar(label_smoothing / C));
  Tensor prod = mul(logp, t);
  if (wb) prod = mul(prod, wb);
  Tensor loss = ops::neg(ops::sum(prod, DimVector{cdim}, false, std::nullopt), Tensor());
  if (reduction == "none") return loss;
  Tensor total = ops::sum(loss, std::nullopt, false, std::nullopt);
  if (reduction == "sum") return total;
  return div(total, Scalar(self->numel() / std::max<int64_t>(C, 1)));
}

Tensor mse_loss(const Tensor& self, const Tensor& target, const std::string& reduction) {
  Tensor d = sub(self, target);
  return reduce(mul(d, d), reduction, "mse_loss");
}

Tensor l1_loss(const Tensor& self, const Tensor& target, const std::string& reduction) {
  return reduce(ops::abs(sub(self, target), Tensor()), reduction, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& self, const Tensor& target, const std::string& reduction,
                      double beta) {
  EMBER_CHECK_KIND(beta >= 0, Value, "smooth_l1_loss: beta must be non-negative, got ", beta);
  if (beta == 0.0) return l1_loss(self, target, reduction);
  Tensor diff = sub(self, target);
  Tensor d = ops::abs(diff, Tensor());
  Tensor quad = div(mul(mul(diff, diff), Scalar(0.5)), Scalar(beta));
  Tensor lin = sub(d, Scalar(0.5 * beta));
  Tensor l = ops::where(ops::lt(d, Scalar(beta), Tensor()), TensorOrScalar(quad),
                        TensorOrScalar(lin), Tensor());
  return reduce(l, reduction, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& self, const Tensor& target, const std::string& reduction,
                  double delta) {
  EMBER_CHECK_KIND(delta > 0, Value, "huber_loss: delta must be positive, got ", delta);
  // As torch: the loss has the input's dtype (a float32 target of a bfloat16 input is rounded to
  // bfloat16), where mse / l1 / smooth_l1 promote the two dtypes.
  const bool cast = is_floating(self->dtype()) && is_floating(target->dtype()) &&
                    target->dtype() != self->dtype();
  Tensor diff = sub(self, cast ? ops::_to_dtype(target, self->dtype(), false) : target);
  Tensor d = ops::abs(diff, Tensor());
  Tensor quad = mul(mul(diff, diff), Scalar(0.5));
  Tensor lin = mul(sub(d, Scalar(0.5 * delta)), Scalar(delta));
  Tensor l = ops::where(ops::lt(d, Scalar(delta), Tensor()), TensorOrScalar(quad),
                        TensorOrScalar(lin), Tensor());
  return reduce(l, reduction, "huber_loss");
}

Tensor binary_cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  const char* op = "binary_cross_entropy";
  check_same_shape(op, self, target);
  // As torch: no promotion. The target must have the input's dtype (a float64 target of a
  // float32 input is an error, not a float64 loss); a weight is cast to it.
  EMBER_CHECK(is_floating(self->dtype()), op, ": expected a floating point input (probabilities), ",
              "got ", dtype_name(self->dtype()));
  EMBER_CHECK(target->dtype() == self->dtype(), op, ": expected target to have the input's dtype ",
              dtype_name(self->dtype()), ", but got ", dtype_name(target->dtype()),
              " (convert it with target.to(input.dtype))");
  const Tensor w = weight && weight->dtype() != self->dtype()
                       ? ops::_to_dtype(weight, self->dtype(), false)
                       : weight;
  if (!self->device().is_meta()) {  // a check of values (meta has none)
    // Outside [0, 1], NaN included: log of a negative number or of 1 - t < 0 would be a NaN
    // loss (torch raises for both).
    auto outside = [&](const Tensor& t) {
      Tensor in = ops::logical_and(ops::ge(t, Scalar(0.0), Tensor()),
                                   ops::le(t, Scalar(1.0), Tensor()), Tensor());
      return !host_values(ops::all(in, std::nullopt, false), op)->data_as<bool>()[0];
    };
    EMBER_CHECK(!outside(self), op, ": all elements of input should be between 0 and 1");
    EMBER_CHECK(!outside(target), op, ": all elements of target should be between 0 and 1");
  }
  // As torch: (t - 1) * max(log1p(-p), -100) - t * max(log(p), -100). log1p keeps the loss of
  // a confident p = 1 - 1e-7 exact, and this order of terms gives torch's zeros: +0.0 for
  // p = t = 0, -0.0 for p = t = 1.
  const TensorOrScalar floor(Scalar(-100.0)), none;
  Tensor log_p = ops::clamp(ops::log(self, Tensor()), floor, none, Tensor());
  Tensor log_1mp =
      ops::clamp(ops::log1p(ops::neg(self, Tensor()), Tensor()), floor, none, Tensor());
  Tensor l = sub(mul(sub(target, kOne), log_1mp), mul(target, log_p));
  if (w) l = mul(l, w);
  return reduce(l, reduction, op);
}

Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        const std::string& reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  check_same_shape(op, self, target);
  // As torch, the loss has the target's dtype (a float32 target of a float64 input gives a
  // float32 loss; weight and pos_weight do not promote it), so an integer target is an error.
  EMBER_CHECK(is_floating(target->dtype()), op, ": expected a floating point target (the loss ",
              "takes its dtype), got ", dtype_name(target->dtype()),
              " (convert it with target.to(input.dtype))");
  // (1 - t) x - lw * logsigmoid(x), lw = 1 + (pos_weight - 1) t: stable for any x.
  Tensor ls = ops::logsigmoid(self);
  Tensor pos = pos_weight ? mul(ls, add(mul(target, sub(pos_weight, kOne)), kOne)) : ls;
  Tensor l = sub(mul(rsub1(target), self), pos);
  if (weight) l = mul(l, weight);
  if (l->dtype() != target->dtype()) l = ops::_to_dtype(l, target->dtype(), false);
  return reduce(l, reduction, op);
}

Tensor kl_div(const Tensor& self, const Tensor& target, const std::string& reduction,
              bool log_target) {
  Tensor l;
  if (log_target) {
    l = mul(ops::exp(target, Tensor()), sub(target, self));
  } else {
    // target * log(target) taken as 0 where target is 0 (log of 1 there keeps gradients finite);
    // a negative target gives NaN, as torch's xlogy.
    Tensor zero = ops::eq(target, Scalar(0.0), Tensor());
    Tensor safe = ops::where(zero, TensorOrScalar(Scalar(1.0)), TensorOrScalar(target), Tensor());
    l = sub(mul(target, ops::log(safe, Tensor())), mul(target, self));
  }
  if (reduction == "batchmean") {
    Tensor s = ops::sum(l, std::nullopt, false, std::nullopt);
    return self->dim() == 0 ? s : div(s, Scalar(self->size(0)));
  }
  return reduce(l, reduction, "kl_div");
}

// ---- convolution ----------------------------------------------------------------------------

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const DimVector& stride, const DimVector& padding, const DimVector& dilation,
              int64_t groups) {
  return conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const DimVector& stride, const std::string& padding, const DimVector& dilation,
              int64_t groups) {
  return conv_nd_str("conv1d", 1, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const DimVector& stride, const DimVector& padding, const DimVector& dilation,
              int64_t groups) {
  return conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const DimVector& stride, const std::string& padding, const DimVector& dilation,
              int64_t groups) {
  return conv_nd_str("conv2d", 2, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const DimVector& stride, const DimVector& padding, const DimVector& dilation,
              int64_t groups) {
  return conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              const DimVector& stride, const std::string& padding, const DimVector& dilation,
              int64_t groups) {
  return conv_nd_str("conv3d", 3, input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const DimVector& stride, const DimVector& padding,
                        const DimVector& output_padding, int64_t groups,
                        const DimVector& dilation) {
  return conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const DimVector& stride, const DimVector& padding,
                        const DimVector& output_padding, int64_t groups,
                        const DimVector& dilation) {
  return conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation);
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const DimVector& stride, const DimVector& padding,
                        const DimVector& output_padding, int64_t groups,
                        const DimVector& dilation) {
  return conv_transpose_nd("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation);
}

// ---- pooling --------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& self, const DimVector& kernel_size,
                                                   const DimVector& stride,
                                                   const DimVector& padding,
                                                   const DimVector& dilation, bool ceil_mode) {
  return max_pool_nd("max_pool1d", 1, self, kernel_size, stride, padding, dilation, ceil_mode);
}
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& self, const DimVector& kernel_size,
                                                   const DimVector& stride,
                                                   const DimVector& padding,
                                                   const DimVector& dilation, bool ceil_mode) {
  return max_pool_nd("max_pool2d", 2, self, kernel_size, stride, padding, dilation, ceil_mode);
}
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& self, const DimVector& kernel_size,
                                                   const DimVector& stride,
                                                   const DimVector& padding,
                                                   const DimVector& dilation, bool ceil_mode) {
  return max_pool_nd("max_pool3d", 3, self, kernel_size, stride, padding, dilation, ceil_mode);
}
Tensor max_pool1d(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                  const DimVector& padding, const DimVector& dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_nd("max_pool1d", 1, self, kernel_size, stride, padding, dilation, ceil_mode));
}
Tensor max_pool2d(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                  const DimVector& padding, const DimVector& dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_nd("max_pool2d", 2, self, kernel_size, stride, padding, dilation, ceil_mode));
}
Tensor max_pool3d(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                  const DimVector& padding, const DimVector& dilation, bool ceil_mode) {
  return std::get<0>(
      max_pool_nd("max_pool3d", 3, self, kernel_size, stride, padding, dilation, ceil_mode));
}
std::tuple<Tensor, Tensor> adaptive_max_pool1d(const Tensor& self, const DimVector& output_size) {
  return adaptive_max_pool_nd("adaptive_max_pool1d", 1, self, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& self, const DimVector& output_size) {
  return adaptive_max_pool_nd("adaptive_max_pool2d", 2, self, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool3d(const Tensor& self, const DimVector& output_size) {
  return adaptive_max_pool_nd("adaptive_max_pool3d", 3, self, output_size);
}
Tensor avg_pool1d(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                  const DimVector& padding, bool ceil_mode, bool count_include_pad) {
  return avg_pool_nd("avg_pool1d", 1, self, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, std::nullopt);
}
Tensor avg_pool2d(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                  const DimVector& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return avg_pool_nd("avg_pool2d", 2, self, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override);
}
Tensor avg_pool3d(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                  const DimVector& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return avg_pool_nd("avg_pool3d", 3, self, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override);
}
Tensor adaptive_avg_pool1d(const Tensor& self, const DimVector& output_size) {
  return adaptive_avg_pool_nd("adaptive_avg_pool1d", 1, self, output_size);
}
Tensor adaptive_avg_pool2d(const Tensor& self, const DimVector& output_size) {
  return adaptive_avg_pool_nd("adaptive_avg_pool2d", 2, self, output_size);
}
Tensor adaptive_avg_pool3d(const Tensor& self, const DimVector& output_size) {
  return adaptive_avg_pool_nd("adaptive_avg_pool3d", 3, self, output_size);
}

// ---- normalization --------------------------------------------------------------------------

Tensor layer_norm(const Tensor& input, const DimVector& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return std::get<0>(ops::native_layer_norm(input, normalized_shape, weight, bias, eps));
}

Tensor rms_norm(const Tensor& input, const DimVector& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  double e = 0;
  if (eps) {
    e = *eps;
  } else {
    // The epsilon of the compute type, as PyTorch: float64's for float64, else float32's
    // (half and bfloat16 inputs are normalized in float32; their own epsilons, 2**-10 and
    // 2**-7, would shift every result by up to 1%).
    e = input->dtype() == ScalarType::Float64 ? std::numeric_limits<double>::epsilon()
                                              : std::numeric_limits<float>::epsilon();
  }
  return std::get<0>(ops::_fused_rms_norm(input, normalized_shape, weight, e));
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return std::get<0>(ops::native_group_norm(input, num_groups, weight, bias, eps));
}

Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum, double eps) {
  return std::get<0>(ops::native_batch_norm(input, weight, bias, running_mean, running_var,
                                            training, momentum, eps));
}

Tensor instance_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                     const Tensor& running_mean, const Tensor& running_var, bool use_input_stats,
                     double momentum, double eps) {
  const char* op = "instance_norm";
  EMBER_CHECK(input->dim() >= 3, op, ": expected an input of shape (N, C, *spatial), got ",
              shape_str(input->sizes()));
  nn::check_norm_param_dtypes(op, input,
                              {{&weight, "weight"},
                               {&bias, "bias"},
                               {&running_mean, "running_mean"},
                               {&running_var, "running_var"}});
  const int64_t N = input->size(0), C = input->size(1);
  DimVector shape{1, N * C};
  for (int64_t d = 2; d < input->dim(); ++d) shape.push_back(input->size(d));
  Tensor x = ops::reshape(input, shape);
  // Running statistics per (sample, channel), averaged back over the batch afterwards.
  Tensor rm = running_mean ? ops::repeat(running_mean, DimVector{N}) : Tensor();
  Tensor rv = running_var ? ops::repeat(running_var, DimVector{N}) : Tensor();
  Tensor out = ops::reshape(std::get<0>(ops::native_batch_norm(x, Tensor(), Tensor(), rm, rv,
                                                               use_input_stats, momentum, eps)),
                            input->sizes());
  if (use_input_stats) {
    if (running_mean)
      ops::copy_(running_mean,
                 ops::mean(ops::reshape(rm, {N, C}), DimVector{0}, false, std::nullopt), false);
    if (running_var)
      ops::copy_(running_var,
                 ops::mean(ops::reshape(rv, {N, C}), DimVector{0}, false, std::nullopt), false);
  }
  DimVector ps(input->dim(), 1);
  ps[1] = C;
  if (weight) out = mul(out, ops::reshape(weight, ps));
  if (bias) out = add(out, ops::reshape(bias, ps));
  // float32 parameters of a float16 / bfloat16 input: the result keeps the input's dtype
  return out->dtype() == input->dtype() ? out : ops::_to_dtype(out, input->dtype(), false);
}

// ---- embedding_bag, dropout, attention ------------------------------------------------------

Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                     const std::string& mode, const Tensor& per_sample_weights,
                     bool include_last_offset, int64_t padding_idx) {
  const char* op = "embedding_bag";
  EMBER_CHECK_KIND(mode == "sum" || mode == "mean" || mode == "max", Value, op,
                   ": mode must be 'sum', 'mean' or 'max', got '", mode, "'");
  EMBER_CHECK_KIND(!per_sample_weights || mode == "sum", NotImplemented, op,
                   ": per_sample_weights are only supported with mode='sum'");
  EMBER_CHECK(weight->dim() == 2, op, ": expected a 2-D weight, got ", shape_str(weight->sizes()));
  // Bag of every index (host-side), from (B, L) indices or 1-D indices with offsets.
  Tensor idx = host_values(
      ops::_to_dtype(ops::contiguous(ops::flatten(indices, 0, -1)), ScalarType::Int64, false), op);
  const int64_t n = idx->numel();
  std::vector<int64_t> starts;
  if (indices->dim() == 2) {
    EMBER_CHECK(!offsets, op, ": offsets must be None for 2-D indices");
    for (int64_t b = 0; b < indices->size(0); ++b) starts.push_back(b * indices->size(1));
  } else {
    EMBER_CHECK(indices->dim() == 1 && offsets && offsets->dim() == 1, op,
                ": expected 2-D indices, or 1-D indices with 1-D offsets (got indices of shape ",
                shape_str(indices->sizes()), ")");
    Tensor off =
        host_values(ops::_to_dtype(ops::contiguous(offsets), ScalarType::Int64, false), op);
    const int64_t* po = off->data_as<int64_t>();
    for (int64_t i = 0; i < off->numel(); ++i) {
      EMBER_CHECK(po[i] >= 0 && po[i] <= n && (i == 0 || po[i] >= po[i - 1]), op,
                  ": offsets must be non-decreasing and within [0, ", n, "], got ", po[i]);
      starts.push_back(po[i]);
    }
    if (include_last_offset && !starts.empty()) {
      // The last offset closes the last bag (CSR style). Short of the end, PyTorch's kernels
      // disagree on it (sum stops there, max and mean's count run to the end): refused.
      EMBER_CHECK(starts.size() == 1 || starts.back() == n, op,
                  ": with include_last_offset=True the last offset must be the number of indices (",
                  n, "), got ", starts.back());
      starts.pop_back();
    }
  }
  const int64_t B = starts.size();
  // S[b, i] = weight of index i in bag b (padding_idx entries excluded).
  Tensor S = ops::zeros({B, n}, weight->dtype(), cpu_device());
  const int64_t* pi = idx->data_as<int64_t>();
  std::vector<int64_t> counts(B, 0);
  EMBER_DISPATCH_FLOAT(weight->dtype(), op, [&] {
    scalar_t* ps = S->data_as<scalar_t>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t end = b + 1 < B ? starts[b + 1] : n;
      for (int64_t i = starts[b]; i < end; ++i)
        if (pi[i] != padding_idx) {
          ps[b * n + i] = scalar_t(1);
          counts[b]++;
        }
    }
  });
  if (!weight->device().is_cpu()) {
    S = ops::_to_copy(S, std::nullopt, weight->device(), false);
    idx = ops::_to_copy(idx, std::nullopt, weight->device(), false);
  }
  Tensor rows = ops::embedding(weight, idx, -1, false, false);  // (n, D)
  if (mode == "max") {
    Tensor member = ops::unsqueeze(ops::gt(S, Scalar(0.0), Tensor()), -1);  // (B, n, 1)
    Tensor masked =
        ops::where(member, TensorOrScalar(ops::unsqueeze(rows, 0)),
                   TensorOrScalar(Scalar(-std::numeric_limits<double>::infinity())), Tensor());
    Tensor r = ops::amax(masked, DimVector{1}, false);
    // Empty bags give zeros.
    Tensor empty = ops::unsqueeze(
        ops::eq(ops::sum(S, DimVector{1}, false, std::nullopt), Scalar(0.0), Tensor()), -1);
    return ops::where(empty, TensorOrScalar(Scalar(0.0)), TensorOrScalar(r), Tensor());
  }
  if (per_sample_weights) {
    EMBER_CHECK(per_sample_weights->numel() == n, op, ": expected per_sample_weights with ", n,
                " elements (one per index), got ", shape_str(per_sample_weights->sizes()));
    S = mul(S, ops::reshape(per_sample_weights, {1, n}));
  }
  if (mode == "mean") {
    Tensor cnt = ops::empty({B, 1}, weight->dtype(), cpu_device());
    EMBER_DISPATCH_FLOAT(weight->dtype(), op, [&] {
      for (int64_t b = 0; b < B; ++b)
        cnt->data_as<scalar_t>()[b] = scalar_t(std::max<int64_t>(counts[b], 1));
    });
    S = div(S, ops::_to_copy(cnt, std::nullopt, weight->device(), false));
  }
  return ops::matmul(S, rows);
}

Tensor dropout(const Tensor& input, double p, bool train) {
  EMBER_CHECK_KIND(p >= 0.0 && p <= 1.0, Value,
                   "dropout: probability has to be between 0 and 1, but got ", p);
  if (!train || p == 0.0) return input;
  // PyTorch's CPU dropout multiplies by a scaled Bernoulli noise tensor (grad_fn MulBackward0,
  // which saves the noise as `other`), with its steps (a dispatch mode sees empty_like,
  // bernoulli_, div_, mul); other devices run the fused native_dropout.
  if (input->device().is_cpu() && is_floating(input->dtype())) {
    Tensor noise = ops::empty_like(input, std::nullopt, std::nullopt);
    ops::bernoulli_(noise, TensorOrScalar(Scalar(1.0 - p)), nullptr);
    if (p < 1.0) ops::div(noise, TensorOrScalar(Scalar(1.0 - p)), std::nullopt, noise);
    return mul(input, noise);
  }
  return std::get<0>(ops::native_dropout(input, p, train));
}

Tensor feature_dropout(const Tensor& input, double p, bool train) {
  EMBER_CHECK_KIND(p >= 0.0 && p <= 1.0, Value,
                   "feature_dropout: probability has to be between 0 and 1, but got ", p);
  if (!train || p == 0.0) return input;
  EMBER_CHECK(input->dim() >= 2, "feature_dropout: expected an input of shape (N, C, *), got ",
              shape_str(input->sizes()));
  DimVector ms(input->dim(), 1);
  ms[0] = input->size(0);
  ms[1] = input->size(1);
  Tensor mask = ops::empty(ms, input->dtype(), std::nullopt);
  ops::bernoulli_(mask, TensorOrScalar(Scalar(1.0 - p)), nullptr);
  if (p < 1.0) mask = mul(mask, Scalar(1.0 / (1.0 - p)));
  return mul(input, mask);
}

// Whether scaled_dot_product_attention runs as the fused kernel
// (_scaled_dot_product_fused_attention): q, k, v on one device, CPU (float32 / float64,
// kernels/cpu/nn_attention.cpp) or CUDA (also float16 / bfloat16, head dims up to 256,
// cuda/nn_attention.cu), of the same dims and batch sizes; no dropout (the fused kernels draw no
// randoms: dropout takes the unfused path on both devices), something to attend to, and a mask
// (if any) on that device that is bool or of the query's dtype, has no autograd history and
// broadcasts.
static bool sdpa_fused_ok(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                          double dropout_p) {
  if (dropout_p > 0.0) return false;
  const ScalarType dt = q->dtype();
  const Device dev = q->device();
  const bool cuda = dev.type == DeviceType::CUDA;
  if (!dev.is_cpu() && !cuda) return false;
  if (dt != ScalarType::Float32 && dt != ScalarType::Float64 &&
      !(cuda && (dt == ScalarType::Float16 || dt == ScalarType::BFloat16)))
    return false;
  if (k->dtype() != dt || v->dtype() != dt) return false;
  if (k->device() != dev || v->device() != dev) return false;
  const int64_t d = q->dim();
  if (k->dim() != d || v->dim() != d) return false;
  for (int64_t i = 0; i < d - 2; ++i)
    if (k->size(i) != q->size(i) || v->size(i) != q->size(i)) return false;
  if (q->numel() == 0 || k->numel() == 0 || v->numel() == 0) return false;
  if (cuda && (q->size(d - 1) > 256 || v->size(d - 1) > 256)) return false;
  if (mask) {
    if (mask->device() != dev || mask->autograd_meta())
      return false;  // a mask with history keeps its gradient
    if (mask->dtype() != ScalarType::Bool && mask->dtype() != dt) return false;
    if (mask->dim() > d) return false;
    for (int64_t i = 0; i < mask->dim(); ++i) {
      const int64_t ms = mask->size(mask->dim() - 1 - i);
      const int64_t fs = i == 0 ? k->size(d - 2) : q->size(d - 1 - i);
      if (ms != fs && ms != 1) return false;
    }
  }
  return true;
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  const char* op = "scaled_dot_product_attention";
  EMBER_CHECK(query->dim() >= 2 && key->dim() >= 2 && value->dim() >= 2, op,
              ": expected query, key and value of at least 2 dims (..., L, E), got ",
              shape_str(query->sizes()), ", ", shape_str(key->sizes()), ", ",
              shape_str(value->sizes()));
  const int64_t L = query->size(query->dim() - 2), E = query->size(query->dim() - 1);
  const int64_t S = key->size(key->dim() - 2);
  EMBER_CHECK(key->size(key->dim() - 1) == E, op, ": key's last dim (", key->size(key->dim() - 1),
              ") must match query's (", E, "): shapes ", shape_str(query->sizes()), " and ",
              shape_str(key->sizes()));
  EMBER_CHECK(value->size(value->dim() - 2) == S, op, ": value's sequence length (",
              value->size(value->dim() - 2), ") must match key's (", S, "): shapes ",
              shape_str(key->sizes()), " and ", shape_str(value->sizes()));
  EMBER_CHECK_KIND(!(is_causal && attn_mask), Value, op,
                   ": pass either attn_mask or is_causal=True, not both");
  EMBER_CHECK_KIND(dropout_p >= 0.0 && dropout_p <= 1.0, Value, op,
                   ": dropout_p must be between 0 and 1, got ", dropout_p);
  Tensor k = key, v = value;
  if (enable_gqa && query->dim() >= 3 && key->dim() >= 3) {
    const int64_t hq = query->size(query->dim() - 3), hk = key->size(key->dim() - 3);
    if (hq != hk) {
      EMBER_CHECK(hk > 0 && hq % hk == 0, op, ": with enable_gqa the query heads (", hq,
                  ") must be a multiple of the key/value heads (", hk, ")");
      auto expand_heads = [&](const Tensor& t) {
        DimVector e = t->sizes();
        Tensor u = ops::unsqueeze(t, t->dim() - 2);  // (..., Hk, 1, S, E)
        DimVector es = u->sizes();
        es[t->dim() - 2] = hq / hk;
        DimVector rs = e;
        rs[t->dim() - 3] = hq;
        return ops::reshape(ops::expand(u, es), rs);
      };
      k = expand_heads(k);
      v = expand_heads(v);
    }
  }
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(E));
  const bool fused_ok = sdpa_fused_ok(query, k, v, attn_mask, dropout_p);
  if (fused_ok && sdp_fused_enabled())
    return std::get<0>(
        ops::_scaled_dot_product_fused_attention({query, k, v}, attn_mask, is_causal, sc));
  EMBER_CHECK(sdp_math_enabled(), op, ": no available kernel: the math kernel is disabled ",
              "(ember.backends.cuda.enable_math_sdp / sdpa_kernel) and the fused kernel ",
              fused_ok ? "is disabled too" : "does not take these inputs", " (query ",
              shape_str(query->sizes()), " ", dtype_name(query->dtype()), " on ",
              query->device().str(), ", dropout_p ", dropout_p, ", attn_mask ",
              attn_mask ? dtype_name(attn_mask->dtype()) : "none",
              "; it takes float32/float64 on the CPU, also float16/bfloat16 on CUDA, no dropout)");
  Tensor scores = mul(ops::matmul(query, ops::transpose(k, -2, -1)), Scalar(sc));
  const TensorOrScalar neg_inf(Scalar(-std::numeric_limits<double>::infinity()));
  if (is_causal) {
    // On the scores' device: a CPU (L, S) mask next to CUDA scores fails where()'s device check.
    Tensor causal = ops::tril(ops::ones({L, S}, ScalarType::Bool, query->device()), 0, Tensor());
    scores = ops::where(causal, TensorOrScalar(scores), neg_inf, Tensor());
  } else if (attn_mask) {
    if (attn_mask->dtype() == ScalarType::Bool)
      scores = ops::where(attn_mask, TensorOrScalar(scores), neg_inf, Tensor());
    else
      scores = add(scores, attn_mask);
  }
  Tensor attn = ops::softmax(scores, -1, std::nullopt);
  if (dropout_p > 0.0) attn = dropout(attn, dropout_p, true);
  return ops::matmul(attn, v);
}

void _fused_adamw_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                   const std::vector<Tensor>& max_exp_avg_sqs,
                   const std::vector<Tensor>& state_steps, double lr, double beta1, double beta2,
                   double weight_decay, double eps, bool amsgrad, bool maximize) {
  ops::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
                    beta2, weight_decay, eps, amsgrad, maximize, true);
}

}  // namespace composite
}  // namespace ember
