// Helpers of the forward-mode formulas written in ops/*.yaml (`tangent:`). A formula sees
// `<input>_t`, undefined where that input carries no tangent (a zero tangent), the op's arguments
// and `result`. Included at the end of formulas.h; every helper calls ops:: so tangents stay
// differentiable in reverse mode (reverse-over-forward).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/formulas_base.h"
#include "autograd/formulas_math.h"
#include "autograd/formulas_nn.h"
#include "autograd/forward_ad.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

// ---- building blocks ------------------------------------------------------------------------

// The tangent `t`, or zeros shaped like the primal `like` when it has none.
inline Tensor or_zeros(const Tensor& t, const Tensor& like) {
  return t ? t : ops::zeros_like(like, std::nullopt, std::nullopt);
}
// The tangent standing for a Tensor|Scalar argument of an op that is linear in it: its tangent
// (zeros when it has none) or 0 for a number.
inline TensorOrScalar or_zero_arg(const TensorOrScalar& a, const Tensor& a_t) {
  if (a.is_tensor()) return TensorOrScalar(or_zeros(a_t, a.tensor));
  return TensorOrScalar(Scalar(0.0));
}
// t * s, undefined when t is (a missing term of the product rule).
inline Tensor scale_if(const Tensor& t, const Scalar& s) { return t ? scale(t, s) : Tensor(); }

// ---- reductions -----------------------------------------------------------------------------

// The JVP of a reduction from its reverse formula: `partials` is that formula at grad = ones
// (d result / d self, laid out like self), so the tangent is sum(partials * t) over the reduced
// dims (all of them when `dim` is absent or empty).
inline Tensor reduced_jvp(const Tensor& partials, const Tensor& t,
                          const std::optional<DimVector>& dim, bool keepdim) {
  Tensor p = mul(partials, t);
  if (p->dim() == 0) return p;
  return ops::sum(p, dim, keepdim, std::nullopt);
}
inline Tensor ones_of(const Tensor& t) { return ops::ones_like(t, std::nullopt, std::nullopt); }

// Value-selecting reductions (max(dim), sort, topk, kthvalue, median(dim), mode, cummax ...): the
// tangent at the selected indices along dim.
inline Tensor gather_tangent(const Tensor& t, int64_t dim, const Tensor& indices, bool keepdim) {
  if (t->dim() == 0) return t;  // a 0-d input's only element
  const int64_t d = wrap_dim(dim, t->dim(), "forward AD");
  if (keepdim) return ops::gather(t, d, indices, false, Tensor());
  Tensor g = ops::gather(t, d, ops::unsqueeze(indices, d), false, Tensor());
  return ops::squeeze(g, DimVector{d});
}

// cumprod: y[k] = prod_{j <= k} x[j], so dy[k] = sum_{i <= k} t[i] * prod_{j <= k, j != i} x[j].
// Without zeros that is y * cumsum(t / x); with zeros, row i of an n x n matrix is x with x[i]
// replaced by t[i], whose cumprod at k >= i is the i-th term.
inline Tensor cumprod_jvp(const Tensor& t, const Tensor& self, const Tensor& result, int64_t dim) {
  if (self->dim() == 0 || self->numel() == 0) return t;
  const int64_t d = wrap_dim(dim, self->dim(), "cumprod");
  const int64_t n = self->size(d);
  Tensor x = self->dtype() == result->dtype() ? self : as_dtype(self, result->dtype());
  Tensor tx = t->dtype() == result->dtype() ? t : as_dtype(t, result->dtype());
  if (all_true(ops::logical_not(eq0(x), Tensor())))
    return mul(result, ops::cumsum(div(tx, x), d, std::nullopt));
  Tensor xt = ops::transpose(x, d, -1);
  Tensor tt = ops::transpose(tx, d, -1);
  Tensor eye = as_dtype(ops::eye(n, std::nullopt, std::nullopt, x->device()), ScalarType::Bool);
  Tensor m = ops::where(eye, TensorOrScalar(ops::unsqueeze(tt, -1)),
                        TensorOrScalar(ops::unsqueeze(xt, -2)), Tensor());
  Tensor c = ops::cumprod(m, -1, std::nullopt);
  Tensor upper =
      as_dtype(ops::triu(ops::ones(DimVector{n, n}, std::nullopt, x->device()), 0, Tensor()),
               ScalarType::Bool);
  Tensor r = ops::sum(where0(upper, c), DimVector{-2}, false, std::nullopt);
  return ops::transpose(r, d, -1);
}

// Ops with two floating results (aminmax, var_mean, std_mean): a formula gives the first
// result's tangent, so the second's is attached here.
inline Tensor with_second_tangent(const Tensor& first_t, const Tensor& second,
                                  const Tensor& second_t) {
  forward_ad::set_tangent(second, second_t);
  return first_t;
}

// ---- indexing -------------------------------------------------------------------------------

// scatter(self, dim, index, src, reduce): linear in (self, src) unless reduce='multiply'.
inline Tensor scatter_jvp(const Tensor& self, const Tensor& self_t, int64_t dim,
                          const Tensor& index, const Tensor& src, const Tensor& src_t,
                          const std::optional<std::string>& reduce) {
  if (reduce && *reduce == "multiply") forward_ad::not_implemented("scatter (reduce='multiply')");
  return ops::scatter(or_zeros(self_t, self), dim, index, or_zeros(src_t, src), reduce, Tensor());
}
// scatter(self, dim, index, value, reduce): the written value is a constant; 'multiply' scales
// the tangent of the elements it writes to by it.
inline Tensor scatter_value_jvp(const Tensor& self_t, int64_t dim, const Tensor& index,
                                const Scalar& value, const std::optional<std::string>& reduce) {
  const bool multiply = reduce && *reduce == "multiply";
  return ops::scatter(self_t, dim, index, multiply ? value : Scalar(0.0), reduce, Tensor());
}
// scatter_reduce is linear for 'sum' and 'mean' (the counts do not depend on the values).
inline Tensor scatter_reduce_jvp(const Tensor& self, const Tensor& self_t, int64_t dim,
                                 const Tensor& index, const Tensor& src, const Tensor& src_t,
                                 const std::string& reduce, bool include_self) {
  if (reduce != "sum" && reduce != "mean") {
    std::string what = "scatter_reduce (reduce='" + reduce + "')";
    forward_ad::not_implemented(what.c_str());
  }
  return ops::scatter_reduce(or_zeros(self_t, self), dim, index, or_zeros(src_t, src), reduce,
                             include_self, Tensor());
}

// ---- linear algebra -------------------------------------------------------------------------

// einsum is linear in each operand: one term per operand that carries a tangent.
inline Tensor einsum_jvp(const std::string& equation, const std::vector<Tensor>& tensors,
                         const std::vector<Tensor>& tangents) {
  Tensor r;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tangents[i]) continue;
    std::vector<Tensor> ts = tensors;
    ts[i] = tangents[i];
    r = forward_ad::accumulate(r, ops::einsum(equation, ts));
  }
  return r;
}

// ---- nn -------------------------------------------------------------------------------------

// log_softmax: y = x - logsumexp(x), so dy = t - sum(softmax(x) * t).
inline Tensor log_softmax_jvp(const Tensor& t, const Tensor& result, int64_t dim) {
  if (result->dim() == 0) return zeros_of(result);
  Tensor tt = t->dtype() == result->dtype() ? t : as_dtype(t, result->dtype());
  return sub(tt, nn_detail::sum_keep(mul(exp(result), tt), dim));
}
// softmax's Jacobian diag(y) - y y^T is symmetric, so its JVP is its backward formula.
inline Tensor softmax_jvp(const Tensor& t, const Tensor& result, int64_t dim) {
  if (result->dim() == 0) return zeros_of(result);
  Tensor tt = t->dtype() == result->dtype() ? t : as_dtype(t, result->dtype());
  return softmax_backward(tt, result, dim);
}

// The backward ops differentiated under forward AD (forward-over-reverse: backward formulas that
// use an op's saved result see its tangent). threshold_backward (relu's) is linear in
// grad_output and piecewise constant in self, whose tangent therefore adds nothing.
inline Tensor threshold_backward_jvp(const Tensor& grad_output_t, const Tensor& /*self_t*/,
                                     const Tensor& self, const Scalar& threshold) {
  return grad_output_t ? ops::threshold_backward(grad_output_t, self, threshold) : Tensor();
}
// softmax's backward y * (g - sum(g * y)): softmax_backward of g_t, plus
// y_t * (g - sum(g * y)) - y * sum(g * y_t).
inline Tensor softmax_backward_jvp(const Tensor& g_t, const Tensor& y_t, const Tensor& g,
                                   const Tensor& y, int64_t dim) {
  using nn_detail::sum_keep;
  Tensor r = g_t ? softmax_backward(g_t, y, dim) : Tensor();
  if (y_t) {
    Tensor a = mul(y_t, sub(g, sum_keep(mul(g, y), dim)));
    r = forward_ad::accumulate(r, sub(a, mul(y, sum_keep(mul(g, y_t), dim))));
  }
  return r;
}
// log_softmax's backward g - exp(y) * sum(g): g_t - exp(y) * sum(g_t), minus
// exp(y) * y_t * sum(g).
inline Tensor log_softmax_backward_jvp(const Tensor& g_t, const Tensor& y_t, const Tensor& g,
                                       const Tensor& y, int64_t dim) {
  using nn_detail::sum_keep;
  Tensor e = exp(y);
  Tensor r = g_t ? sub(g_t, mul(e, sum_keep(g_t, dim))) : Tensor();
  if (y_t) r = forward_ad::accumulate(r, neg(mul(mul(e, y_t), sum_keep(g, dim))));
  return r;
}

// convolution is linear in input, in weight and in bias.
inline Tensor convolution_jvp(const Tensor& input, const Tensor& weight, const Tensor& input_t,
                              const Tensor& weight_t, const Tensor& bias_t, const DimVector& stride,
                              const DimVector& padding, const DimVector& dilation, bool transposed,
                              const DimVector& output_padding, int64_t groups,
                              const Tensor& result) {
  Tensor r;
  if (input_t)
    r = ops::convolution(input_t, weight, Tensor(), stride, padding, dilation, transposed,
                         output_padding, groups);
  if (weight_t)
    r = forward_ad::accumulate(r, ops::convolution(input, weight_t, Tensor(), stride, padding,
                                                   dilation, transposed, output_padding, groups));
  if (bias_t) {
    // The bias is added along the channel dim (1 with a batch, 0 without).
    DimVector shape(result->dim(), 1);
    shape[result->dim() - stride.size() - 1] = bias_t->numel();
    r = forward_ad::accumulate(r, ops::reshape(bias_t, shape));
  }
  return r;
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
