// Derivative helpers of the neural-network ops (ops/nn.yaml): softmax, activations, losses,
// convolution, pooling, embedding, dropout and the fused attention. Included by formulas.h; every
// helper calls ops:: so backward passes are themselves differentiable where the ops they use are.
#pragma once
#include <array>
#include <limits>
#include <tuple>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/formulas_base.h"
#include "autograd/forward_ad.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

namespace nn_detail {
inline Tensor sum_keep(const Tensor& t, int64_t dim) {
  return ops::sum(t, DimVector{dim}, true, std::nullopt);
}
}  // namespace nn_detail

// ---- softmax --------------------------------------------------------------------------------
inline Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim) {
  return ops::_softmax_backward_data(grad, output, dim);
}
inline Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim) {
  return ops::_log_softmax_backward_data(grad, output, dim);
}
// d/d(output) of output * (g - sum(g * output)) against upstream gg:
// gg * (g - sum(g * output)) - g * sum(gg * output).
inline Tensor softmax_backward_output(const Tensor& gg, const Tensor& g, const Tensor& y,
                                      int64_t dim) {
  using nn_detail::sum_keep;
  Tensor a = ops::mul(gg,
                      TensorOrScalar(ops::sub(g, sum_keep(ops::mul(g, y, Tensor()), dim),
                                              Scalar(int64_t(1)), Tensor())),
                      Tensor());
  Tensor b = ops::mul(g, sum_keep(ops::mul(gg, y, Tensor()), dim), Tensor());
  return ops::sub(a, b, Scalar(int64_t(1)), Tensor());
}
// log_softmax's backward g - exp(y) * sum(g): linear in g (adjoint gg - sum(gg * exp(y))) ...
inline Tensor log_softmax_backward_grad(const Tensor& gg, const Tensor& y, int64_t dim) {
  Tensor e = ops::exp(y, Tensor());
  return ops::sub(gg, nn_detail::sum_keep(ops::mul(gg, e, Tensor()), dim), Scalar(int64_t(1)),
                  Tensor());
}
// ... and -gg * exp(y) * sum(g) with respect to y.
inline Tensor log_softmax_backward_output(const Tensor& gg, const Tensor& g, const Tensor& y,
                                          int64_t dim) {
  Tensor e = ops::exp(y, Tensor());
  Tensor s = nn_detail::sum_keep(g, dim);
  return ops::neg(ops::mul(ops::mul(gg, e, Tensor()), s, Tensor()), Tensor());
}

// ---- activations ----------------------------------------------------------------------------
// grad * f'(x) for activation `fn` (x is the input, or the output for the "*_result" forms).
inline Tensor activation_grad(const Tensor& grad, const Tensor& x, const char* fn, double p0 = 0,
                              double p1 = 0, double p2 = 0) {
  return ops::mul(grad, ops::_activation_derivative(x, fn, 1, p0, p1, p2), Tensor());
}
// The self-derivative of a fused activation backward grad_output * f'(x) (gelu_backward,
// silu_backward, elu_backward, ...) against upstream grad: grad * grad_output * f''(x).
inline Tensor activation_backward_grad(const Tensor& grad, const Tensor& grad_output,
                                       const Tensor& x, const char* fn, double p0 = 0,
                                       double p1 = 0, double p2 = 0) {
  return ops::mul(ops::mul(grad, grad_output, Tensor()),
                  ops::_activation_derivative(x, fn, 2, p0, p1, p2), Tensor());
}
// The third derivative f'''(x) of activation fn built from differentiable ops, so derivatives of
// any order follow (sliced score matching and PINNs differentiate f'' once more, for the
// parameters); the kernel computes f' and f'' only. Piecewise-linear or -quadratic activations
// give 0.
inline Tensor activation_third_derivative(const Tensor& x, const std::string& fn, double p0,
                                          double p1, double p2) {
  auto s_ = [](double v) { return TensorOrScalar(Scalar(v)); };
  auto sig = [](const Tensor& t) { return ops::sigmoid(t, Tensor()); };
  auto where_gt = [&](const Tensor& t, double at, const Tensor& below) {  // 0 where t > at
    return ops::where(ops::gt(t, s_(at), Tensor()), s_(0.0), TensorOrScalar(below), Tensor());
  };
  if (fn == "gelu") {  // phi(x) x (x^2 - 4)
    Tensor phi = mul(exp(mul(square(x), Scalar(-0.5))), Scalar(0.39894228040143267794));
    return mul(mul(phi, x), sub(square(x), s_(4.0)));
  }
  if (fn == "gelu_tanh") {  // u = k (x + c x^3), t = tanh(u), w = 1 - t^2
    const double k = 0.79788456080286535588, c = 0.044715;
    Tensor x2 = square(x);
    Tensor t = ops::tanh(mul(add(x, mul(mul(x2, x), Scalar(c))), Scalar(k)), Tensor());
    Tensor w = one_minus(square(t));
    Tensor u1 = mul(add(mul(x2, Scalar(3 * c)), s_(1.0)), Scalar(k));
    Tensor u2 = mul(x, Scalar(6 * c * k));
    Tensor tw = mul(t, w), xw = mul(x, w), u1sq = square(u1);
    // -3 t w u1^2 + 1.5 w u2 + x w u1^3 (2 t^2 - w) - 3 x t w u1 u2 + 0.5 x w u3
    Tensor r = mul(mul(tw, u1sq), Scalar(-3.0));
    r = add(r, mul(mul(w, u2), Scalar(1.5)));
    r = add(r, mul(mul(xw, mul(u1sq, u1)), sub(mul(square(t), Scalar(2.0)), w)));
    r = sub(r, mul(mul(mul(x, tw), mul(u1, u2)), Scalar(3.0)));
    return add(r, mul(xw, Scalar(0.5 * 6 * c * k)));
  }
  if (fn == "silu") {  // q (r (3 + x r) - 2 x q), q = s (1 - s), r = 1 - 2 s
    Tensor sx = sig(x), q = mul(sx, one_minus(sx)), r = one_minus(mul(sx, Scalar(2.0)));
    return mul(q, sub(mul(r, add(mul(x, r), s_(3.0))), mul(mul(x, q), Scalar(2.0))));
  }
  if (fn == "elu") {  // p0 alpha, p1 scale, p2 input_scale: 0 for x > 0
    return where_gt(x, 0.0, mul(exp(mul(x, Scalar(p2))), Scalar(p1 * p0 * p2 * p2 * p2)));
  }
  if (fn == "softplus") {  // p0 beta, p1 threshold: beta^2 q (1 - 2 s) at s = sigmoid(beta x)
    Tensor z = mul(x, Scalar(p0)), sz = sig(z);
    Tensor d3 = mul(mul(mul(sz, one_minus(sz)), one_minus(mul(sz, Scalar(2.0)))), Scalar(p0 * p0));
    return where_gt(z, p1, d3);
  }
  if (fn == "mish") {  // t = tanh(softplus(x)), w = 1 - t^2, s = sigmoid(x), q = s (1 - s)
    Tensor t = ops::tanh(ops::softplus(x, Scalar(1.0), Scalar(20.0), Tensor()), Tensor());
    Tensor w = one_minus(square(t)), sx = sig(x), q = mul(sx, one_minus(sx));
    Tensor a = sub(q, mul(mul(t, square(sx)), Scalar(2.0)));  // (w s)' / w
    // 3 w a + x (w (q (1 - 2 s) - 2 w s^3 - 4 t s q) - 2 t w s a)
    Tensor inner = sub(
        mul(q, one_minus(mul(sx, Scalar(2.0)))),
        add(mul(mul(w, mul(square(sx), sx)), Scalar(2.0)), mul(mul(mul(t, sx), q), Scalar(4.0))));
    Tensor tail = sub(mul(w, inner), mul(mul(mul(t, w), mul(sx, a)), Scalar(2.0)));
    return add(mul(mul(w, a), Scalar(3.0)), mul(x, tail));
  }
  if (fn == "softsign") {  // 6 / (1 + |x|)^4
    Tensor a = add(ops::abs(x, Tensor()), s_(1.0));
    return div(ops::full_like(x, Scalar(6.0), std::nullopt, std::nullopt), square(square(a)));
  }
  if (fn == "logsigmoid") {  // -q (1 - 2 s)
    Tensor sx = sig(x);
    return neg(mul(mul(sx, one_minus(sx)), one_minus(mul(sx, Scalar(2.0)))));
  }
  // leaky_relu, hardswish, hardsigmoid and the *_result forms: f'' is piecewise constant in x
  // (in the output for the *_result forms), so f''' is 0.
  return ops::zeros_like(x, std::nullopt, std::nullopt);
}

inline Tensor activation_derivative_grad(const Tensor& grad, const Tensor& x, const std::string& fn,
                                         int64_t order, double p0, double p1, double p2) {
  if (order == 2) return mul(grad, activation_third_derivative(x, fn, p0, p1, p2));
  return ops::mul(grad, ops::_activation_derivative(x, fn, order + 1, p0, p1, p2), Tensor());
}

// ---- losses ---------------------------------------------------------------------------------
// binary_cross_entropy, as torch: d/dself = grad (p - t) / max((1 - p) p, 1e-12) * w and
// d/dtarget = -grad logit(p) * w (each / numel for 'mean'), so a confident p of exactly 0 or 1
// gives a finite (or zero) input gradient, where the clamped logs' own derivative is NaN.
namespace nn_detail {
inline Tensor bce_finish(Tensor g, const Tensor& self, const Tensor& weight,
                         const std::string& reduction) {
  if (weight) g = ops::mul(g, TensorOrScalar(weight), Tensor());
  if (reduction == "mean")
    g = ops::div(g, TensorOrScalar(Scalar(static_cast<double>(self->numel()))), std::nullopt,
                 Tensor());
  return g;
}
inline Tensor bce_grad_self(const Tensor& grad, const Tensor& self, const Tensor& target,
                            const Tensor& weight, const std::string& reduction) {
  // torch's epsilon is the float 1e-12, in float64 too (the last bits of huge gradients show it)
  Tensor denom =
      ops::clamp(ops::mul(one_minus(self), TensorOrScalar(self), Tensor()),
                 TensorOrScalar(Scalar(static_cast<double>(1e-12f))), TensorOrScalar(), Tensor());
  Tensor g = ops::div(ops::mul(grad, TensorOrScalar(sub(self, TensorOrScalar(target))), Tensor()),
                      TensorOrScalar(denom), std::nullopt, Tensor());
  return bce_finish(g, self, weight, reduction);
}
inline Tensor bce_grad_target(const Tensor& grad, const Tensor& self, const Tensor& weight,
                              const std::string& reduction) {
  Tensor logit = log(div(self, TensorOrScalar(one_minus(self))));
  return bce_finish(ops::mul(neg(logit), TensorOrScalar(grad), Tensor()), self, weight, reduction);
}
}  // namespace nn_detail
inline Tensor binary_cross_entropy_backward_self(const Tensor& grad, const Tensor& self,
                                                 const Tensor& target, const Tensor& weight,
                                                 const std::string& reduction) {
  return nn_detail::bce_grad_self(grad, self, target, weight, reduction);
}
inline Tensor binary_cross_entropy_backward_target(const Tensor& grad, const Tensor& self,
                                                   const Tensor& weight,
                                                   const std::string& reduction) {
  return nn_detail::bce_grad_target(grad, self, weight, reduction);
}
// Forward mode: both inputs' terms unreduced, then the loss's reduction.
inline Tensor binary_cross_entropy_jvp(const Tensor& self_t, const Tensor& target_t,
                                       const Tensor& self, const Tensor& target,
                                       const Tensor& weight, const std::string& reduction) {
  // (as torch, a missing tangent counts as zeros: 0 * logit(0) makes the tangent at p = 0 NaN)
  auto zeros = [](const Tensor& like) { return ops::zeros_like(like, std::nullopt, std::nullopt); };
  Tensor r =
      add(nn_detail::bce_grad_self(self_t ? self_t : zeros(self), self, target, weight, "none"),
          TensorOrScalar(nn_detail::bce_grad_target(target_t ? target_t : zeros(target), self,
                                                    weight, "none")));
  if (reduction == "mean") return ops::mean(r, std::nullopt, false, std::nullopt);
  if (reduction == "sum") return ops::sum(r, std::nullopt, false, std::nullopt);
  return r;
}

inline Tensor nll_loss_backward_fn(const Tensor& grad, const Tensor& self, const Tensor& target,
                                   const Tensor& weight, const std::string& reduction,
                                   int64_t ignore_index) {
  return ops::nll_loss_backward(grad, self, target, weight, reduction, ignore_index);
}

// The fused cross entropy's backward is G(self) scaled by grad_output (per sample for 'none').
// Contracting t (self's shape) with G: the grad_output-derivative of the backward against
// upstream t, and the forward tangent of the loss for tangent t (lse is the forward's).
inline Tensor cross_entropy_contract(const Tensor& t, const Tensor& self, const Tensor& target,
                                     const Tensor& weight, const Tensor& lse,
                                     const std::string& reduction, int64_t ignore_index,
                                     double label_smoothing) {
  const bool none = reduction == "none";
  Tensor ones = ops::ones(none ? target->sizes() : DimVector{}, self->dtype(), self->device());
  Tensor g = ops::_cross_entropy_loss_backward(ones, self, target, weight, lse, reduction,
                                               ignore_index, label_smoothing);
  Tensor prod = ops::mul(g, t, Tensor());
  if (none) return ops::sum(prod, DimVector{self->dim() == 1 ? 0 : 1}, false, std::nullopt);
  return ops::sum(prod, std::nullopt, false, std::nullopt);
}
// The backward is c_i * softmax(self) minus terms constant in self, with c_i = scale_i * ((1 -
// eps) w_t + eps W / C) (0 for ignored samples): its self-derivative against upstream gg is
// softmax's backward of c * gg. That is the whole derivative (the dependence of lse on self
// included), so the backward op's lse input has no formula of its own.
inline Tensor cross_entropy_backward_self(const Tensor& gg, const Tensor& grad_output,
                                          const Tensor& self, const Tensor& target,
                                          const Tensor& weight, const std::string& reduction,
                                          int64_t ignore_index, double label_smoothing) {
  const int64_t cdim = self->dim() == 1 ? 0 : 1;
  const double C = static_cast<double>(self->size(cdim));
  const double eps = label_smoothing;
  Tensor ignored = ops::eq(target, Scalar(ignore_index), Tensor());
  Tensor kept = ops::_to_dtype(ops::logical_not(ignored, Tensor()), self->dtype(), false);
  Tensor wt = kept;  // w_t of the kept samples
  Tensor a;
  if (weight) {
    Tensor safe =
        ops::where(ignored, TensorOrScalar(Scalar(int64_t(0))), TensorOrScalar(target), Tensor());
    wt = ops::mul(ops::reshape(ops::index_select(weight, 0, ops::flatten(safe, 0, -1), Tensor()),
                               target->sizes()),
                  kept, Tensor());
    Tensor W = ops::sum(weight, std::nullopt, false, std::nullopt);
    a = ops::add(ops::mul(wt, Scalar(1.0 - eps), Tensor()),
                 ops::mul(kept, ops::mul(W, Scalar(eps / C), Tensor()), Tensor()), Scalar(1),
                 Tensor());
  } else {
    a = kept;  // (1 - eps) + eps * C / C
  }
  Tensor scale = grad_output;
  if (reduction == "mean")
    scale = ops::div(grad_output, ops::sum(wt, std::nullopt, false, std::nullopt), std::nullopt,
                     Tensor());
  Tensor c = ops::unsqueeze(ops::mul(a, scale, Tensor()), cdim);
  Tensor p = ops::softmax(self, cdim, std::nullopt);
  return ops::_softmax_backward_data(ops::mul(gg, c, Tensor()), p, cdim);
}

// ---- convolution ----------------------------------------------------------------------------
// The last n sizes of an input.
inline DimVector spatial_sizes(const InputMeta& m, int64_t n) {
  DimVector out;
  for (int64_t i = static_cast<int64_t>(m.sizes.size()) - n; i < m.sizes.size(); ++i)
    out.push_back(m.sizes[i]);
  return out;
}

// Backward without a graph of the gradients (create_graph=False, the usual case) runs the
// convolution_backward kernel (on CUDA: cuDNN's data and filter passes); with create_graph the
// compositions of ops below keep the gradients differentiable.
inline bool conv_direct_backward(const Tensor& grad) {
  return !grad_enabled() &&
         (grad->device().type == DeviceType::CPU || grad->device().type == DeviceType::CUDA);
}

// The input gradient of a convolution is the transposed convolution of grad (and vice versa);
// output_padding recovers input sizes that the forward's floor division dropped.
inline Tensor conv_backward_input(const Tensor& grad, const Tensor& input_t, const Tensor& weight,
                                  const InputMeta& input, const DimVector& stride,
                                  const DimVector& padding, const DimVector& dilation,
                                  bool transposed, const DimVector& output_padding,
                                  int64_t groups) {
  if (conv_direct_backward(grad))
    return std::get<0>(ops::convolution_backward(grad, input_t, weight, stride, padding, dilation,
                                                 transposed, output_padding, groups, true, false,
                                                 false));
  const int64_t k = weight->dim() - 2;
  if (transposed) {
    // With output_padding >= stride grad holds whole windows past the input's positions: the
    // convolution then has more positions than the input, and only the leading ones are its.
    Tensor r = ops::convolution(grad, weight, Tensor(), stride, padding, dilation, false,
                                DimVector(k, 0), groups);
    for (int64_t d = 0; d < k; ++d)
      if (r->size(d + 2) != input.sizes[d + 2]) r = ops::narrow(r, d + 2, 0, input.sizes[d + 2]);
    return r;
  }
  DimVector op(k, 0);
  for (int64_t d = 0; d < k; ++d) {
    int64_t covered = (grad->size(d + 2) - 1) * stride[d] - 2 * padding[d] +
                      dilation[d] * (weight->size(d + 2) - 1) + 1;
    op[d] = input.sizes[d + 2] - covered;
  }
  return ops::convolution(grad, weight, Tensor(), stride, padding, dilation, true, op, groups);
}

// Weight gradient: per group, grad (C_out/G x N*L) times the input's columns (N*L x C_in/G*K),
// all samples in one product (a transposed convolution swaps the roles of input and grad).
inline Tensor conv_backward_weight(const Tensor& grad, const Tensor& input, const Tensor& weight_t,
                                   const InputMeta& weight, const DimVector& stride,
                                   const DimVector& padding, const DimVector& dilation,
                                   bool transposed, const DimVector& output_padding,
                                   int64_t groups) {
  if (conv_direct_backward(grad))
    return std::get<1>(ops::convolution_backward(grad, input, weight_t, stride, padding, dilation,
                                                 transposed, output_padding, groups, false, true,
                                                 false));
  const int64_t k = static_cast<int64_t>(weight.sizes.size()) - 2;
  const int64_t n = input->size(0);
  DimVector ks = spatial_sizes(weight, k);
  Tensor a, cols;
  if (!transposed) {
    cols = ops::im2col(input, ks, dilation, padding, stride);  // (N, C_in * K, L)
    a = grad;                                                  // (N, C_out, *out)
  } else {
    cols = ops::im2col(grad, ks, dilation, padding, stride);  // (N, C_out * K, L_in)
    a = input;                                                // (N, C_in, *in)
    // With output_padding >= stride grad holds more window positions than the input has
    // elements: keep the leading input-sized block of the position grid.
    int64_t l_in = 1;
    for (int64_t d = 0; d < k; ++d) l_in *= a->size(d + 2);
    if (cols->size(2) != l_in) {
      DimVector grid{n, cols->size(1)};
      for (int64_t d = 0; d < k; ++d)
        grid.push_back(
            (grad->size(d + 2) + 2 * padding[d] - dilation[d] * (ks[d] - 1) - 1) / stride[d] + 1);
      Tensor c = ops::reshape(cols, grid);
      for (int64_t d = 0; d < k; ++d) c = ops::narrow(c, d + 2, 0, a->size(d + 2));
      cols = ops::reshape(c, {n, cols->size(1), l_in});
    }
  }
  // One product per group over the whole batch: (G, rows, N * L) @ (G, N * L, cols).
  const int64_t L = cols->size(2);
  Tensor c = ops::reshape(cols, {n, groups, cols->size(1) / groups, L});
  c = ops::reshape(ops::permute(c, {1, 2, 0, 3}), {groups, cols->size(1) / groups, n * L});
  Tensor g = ops::reshape(a, {n, groups, a->size(1) / groups, L});
  g = ops::reshape(ops::permute(g, {1, 2, 0, 3}), {groups, a->size(1) / groups, n * L});
  Tensor gw = ops::matmul(g, ops::transpose(c, -1, -2));  // (G, rows, cols)
  return ops::reshape(gw, weight.sizes);
}

inline Tensor conv_backward_bias(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                 const DimVector& stride, const DimVector& padding,
                                 const DimVector& dilation, bool transposed,
                                 const DimVector& output_padding, int64_t groups) {
  if (conv_direct_backward(grad))
    return std::get<2>(ops::convolution_backward(grad, input, weight, stride, padding, dilation,
                                                 transposed, output_padding, groups, false, false,
                                                 true));
  DimVector dims{0};
  for (int64_t d = 2; d < grad->dim(); ++d) dims.push_back(d);
  return ops::sum(grad, dims, false, std::nullopt);
}

// The gradients convolution's node needs (grad_input_mask: input, weight, bias) from one
// convolution_backward call, as PyTorch's backward runs it; with create_graph each from the
// differentiable compositions above.
inline std::tuple<Tensor, Tensor, Tensor> convolution_grads(
    const Tensor& grad, const Tensor& input, const Tensor& weight, const InputMeta& input_meta,
    const InputMeta& weight_meta, const DimVector& stride, const DimVector& padding,
    const DimVector& dilation, bool transposed, const DimVector& output_padding, int64_t groups,
    const std::array<bool, 3>& grad_input_mask) {
  if (conv_direct_backward(grad))
    return ops::convolution_backward(grad, input, weight, stride, padding, dilation, transposed,
                                     output_padding, groups, grad_input_mask[0], grad_input_mask[1],
                                     grad_input_mask[2]);
  Tensor gi, gw, gb;
  if (grad_input_mask[0])
    gi = conv_backward_input(grad, input, weight, input_meta, stride, padding, dilation, transposed,
                             output_padding, groups);
  if (grad_input_mask[1])
    gw = conv_backward_weight(grad, input, weight, weight_meta, stride, padding, dilation,
                              transposed, output_padding, groups);
  if (grad_input_mask[2])
    gb = conv_backward_bias(grad, input, weight, stride, padding, dilation, transposed,
                            output_padding, groups);
  return {gi, gw, gb};
}

// ---- pooling --------------------------------------------------------------------------------
// _max_pool_backward is linear in grad_output: its adjoint gathers gg at the indices.
inline Tensor max_pool_double_backward(const Tensor& gg, const Tensor& indices,
                                       int64_t spatial_dims) {
  const int64_t lead = indices->dim() - spatial_dims;
  Tensor flat_gg = ops::flatten(gg, lead, -1);
  Tensor flat_idx = ops::flatten(indices, lead, -1);
  Tensor r = ops::gather(flat_gg, lead, flat_idx, false, Tensor());
  return ops::reshape(r, indices->sizes());
}

// ---- embedding, dropout ---------------------------------------------------------------------
// embedding_dense_backward is linear in grad_output: its adjoint looks the rows of gg up again
// (nothing flows to the padding_idx positions).
inline Tensor embedding_double_backward(const Tensor& gg, const Tensor& indices,
                                        int64_t padding_idx, bool scale_grad_by_freq) {
  EMBER_CHECK_KIND(!scale_grad_by_freq, NotImplemented,
                   "embedding: second derivative with scale_grad_by_freq=True is not supported");
  Tensor rows = ops::embedding(gg, indices, -1, false, false);
  if (padding_idx < 0) return rows;
  Tensor pad = ops::unsqueeze(ops::eq(indices, Scalar(padding_idx), Tensor()), -1);
  return ops::where(pad, TensorOrScalar(Scalar(0.0)), TensorOrScalar(rows), Tensor());
}

inline Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double p) {
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  return ops::mul(ops::mul(grad, ops::_to_dtype(mask, grad->dtype(), false), Tensor()),
                  Scalar(scale), Tensor());
}

// ---- fused attention (_scaled_dot_product_fused_attention) ---------------------------------

namespace sdpa_detail {
// The masked scores scale * q k^T (-inf where a causal or bool mask hides a key), from ops.
inline Tensor scores(const std::vector<Tensor>& qkv, const Tensor& mask, bool is_causal,
                     double scale) {
  Tensor s = mul(ops::matmul(qkv[0], ops::transpose(qkv[1], -2, -1)), Scalar(scale));
  const TensorOrScalar ninf(Scalar(-std::numeric_limits<double>::infinity()));
  if (is_causal) {
    const int64_t L = s->size(s->dim() - 2), S = s->size(s->dim() - 1);
    Tensor keep = ops::tril(ops::ones({L, S}, ScalarType::Bool, s->device()), 0, Tensor());
    return ops::where(keep, TensorOrScalar(s), ninf, Tensor());
  }
  if (!mask) return s;
  if (mask->dtype() == ScalarType::Bool) return ops::where(mask, TensorOrScalar(s), ninf, Tensor());
  return add(s, mask);
}
// The probabilities from the saved log-sum-exp (rows whose keys are all masked give 0).
inline Tensor probs(const Tensor& s, const Tensor& lse) {
  const TensorOrScalar zero(Scalar(0.0));
  Tensor l = ops::where(ops::isinf(lse, Tensor()), zero, TensorOrScalar(lse), Tensor());
  Tensor p = ops::exp(sub(s, ops::unsqueeze(l, -1)), Tensor());
  // On CUDA the 16-bit floats keep a float32 log-sum-exp: P in the scores' dtype again.
  return p->dtype() == s->dtype() ? p : ops::_to_dtype(p, s->dtype(), false);
}
}  // namespace sdpa_detail

// Gradients of _scaled_dot_product_fused_attention for [query, key, value]. The fused backward
// kernel unless a graph of the gradients is wanted (create_graph, forward AD): then the same
// formulas from ops, differentiable.
inline std::vector<Tensor> sdpa_fused_grads(const Tensor& grad, const std::vector<Tensor>& qkv,
                                            const Tensor& mask, const Tensor& output,
                                            const Tensor& lse, bool is_causal, double scale) {
  bool graph = grad_enabled() && requires_grad(grad);
  if (grad_enabled())
    for (const Tensor& t : qkv) graph = graph || requires_grad(t);
  const std::vector<Tensor> gv{grad};
  graph = graph || (forward_ad::maybe_active() && forward_ad::wants({}, {&gv, &qkv}));
  if (!graph) {
    auto r = ops::_scaled_dot_product_fused_attention_backward(grad, qkv[0], qkv[1], qkv[2], mask,
                                                               output, lse, is_causal, scale);
    return {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
  }
  Tensor p = ops::softmax(sdpa_detail::scores(qkv, mask, is_causal, scale), -1, std::nullopt);
  p = ops::where(ops::isnan(p, Tensor()), TensorOrScalar(Scalar(0.0)), TensorOrScalar(p), Tensor());
  Tensor gvalue = ops::matmul(ops::transpose(p, -2, -1), grad);
  Tensor dp = ops::matmul(grad, ops::transpose(qkv[2], -2, -1));
  Tensor ds = mul(p, sub(dp, ops::sum(mul(p, dp), DimVector{-1}, true, std::nullopt)));
  Tensor gq = mul(ops::matmul(ds, qkv[1]), Scalar(scale));
  Tensor gk = mul(ops::matmul(ops::transpose(ds, -2, -1), qkv[0]), Scalar(scale));
  return {gq, gk, gvalue};
}

// Tangent of _scaled_dot_product_fused_attention's output: with P the probabilities,
// dS = scale (dq k^T + q dk^T), dO = (P (dS - rowsum(P dS))) v + P dv.
inline Tensor sdpa_fused_jvp(const std::vector<Tensor>& qkv, const std::vector<Tensor>& qkv_t,
                             const Tensor& mask, const Tensor& output, const Tensor& lse,
                             bool is_causal, double scale) {
  (void)output;
  Tensor p = sdpa_detail::probs(sdpa_detail::scores(qkv, mask, is_causal, scale), lse);
  Tensor ds;
  if (qkv_t[0]) ds = ops::matmul(qkv_t[0], ops::transpose(qkv[1], -2, -1));
  if (qkv_t[1]) {
    Tensor t = ops::matmul(qkv[0], ops::transpose(qkv_t[1], -2, -1));
    ds = ds ? add(ds, t) : t;
  }
  Tensor out;
  if (ds) {
    ds = mul(ds, Scalar(scale));
    Tensor dp = mul(p, sub(ds, ops::sum(mul(p, ds), DimVector{-1}, true, std::nullopt)));
    out = ops::matmul(dp, qkv[2]);
  }
  if (qkv_t[2]) {
    Tensor t = ops::matmul(p, qkv_t[2]);
    out = out ? add(out, t) : t;
  }
  return out;
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
