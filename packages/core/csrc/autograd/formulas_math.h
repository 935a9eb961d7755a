// Derivative helpers of pointwise math, reductions, sorting and linear algebra. Included by
// formulas.h; every helper calls ops:: so backward passes are themselves differentiable.
// Conventions follow PyTorch's: zero gradients at the kinks of step functions, ties of
// max/min-like reductions share the gradient evenly, value-selecting ops (max(dim), sort, topk,
// median ...) send it to the returned index only.
#pragma once
#include <algorithm>
#include <cmath>
#include <complex>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/formulas_base.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

// ---- small building blocks ---------------------------------------------------------------------

inline Tensor zeros_of(const Tensor& grad) {
  return ops::zeros_like(grad, std::nullopt, std::nullopt);
}
inline Tensor zeros_meta(const InputMeta& m, const Tensor& like) {
  return ops::zeros(m.sizes, like->dtype(), like->device());
}
// t * s, skipping the multiply when s is 1 (PyTorch's maybe_multiply).
inline Tensor scale(const Tensor& t, const Scalar& s) {
  return s.to_double() == 1.0 && !s.is_complex() ? t : mul(t, s);
}
// frexp: the mantissa is self / 2^exponent with the exponent piecewise constant, so its
// derivative is 1 / 2^exponent (the power of two formed in float32 for the 16-bit types, whose
// range it can leave).
inline Tensor frexp_backward(const Tensor& grad, const Tensor& exponent) {
  const ScalarType t =
      grad->dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  Tensor r = div(grad, ops::exp2(ops::_to_copy(exponent, t, std::nullopt, false), Tensor()));
  return r->dtype() == grad->dtype() ? r : ops::_to_copy(r, grad->dtype(), std::nullopt, false);
}
// A chain of pointwise ops in a formula keeps each temporary alive until the expression ends.
// Without create_graph the last op may write into a temporary of the formula instead (pass
// scratch_out(tmp) as its out=): one gradient-sized buffer instead of two or three, which is
// what bounds peak memory in backward. With create_graph every step is recorded, out of place.
inline Tensor scratch_out(const Tensor& tmp) { return grad_enabled() ? Tensor() : tmp; }
// The gradients of sigmoid_backward / tanh_backward (g * y * (1 - y), g * (1 - y^2)) with
// respect to y, for double backward: grad * g * (1 - 2y) and -2 * grad * g * y.
inline Tensor sigmoid_backward_output_grad(const Tensor& grad, const Tensor& grad_output,
                                           const Tensor& output) {
  Tensor gg = mul(grad, grad_output);
  return ops::addcmul(gg, gg, output, Scalar(int64_t(-2)), scratch_out(gg));
}
inline Tensor tanh_backward_output_grad(const Tensor& grad, const Tensor& grad_output,
                                        const Tensor& output) {
  return mul(mul(mul(grad, grad_output), output), Scalar(int64_t(-2)));
}
inline Tensor where0(const Tensor& cond, const Tensor& t) {  // t where cond, else 0
  return ops::where(cond, TensorOrScalar(t), TensorOrScalar(Scalar(0.0)), Tensor());
}
inline Tensor as_dtype(const Tensor& t, ScalarType dt) { return ops::_to_dtype(t, dt, false); }
inline Tensor eq0(const Tensor& t) {
  return ops::eq(t, TensorOrScalar(Scalar(int64_t(0))), Tensor());
}
// Whether every element of a bool tensor is true (a host sync, like PyTorch's data-dependent
// backward paths).
inline bool all_true(const Tensor& b) {
  return ops::equal(b, ops::ones_like(b, ScalarType::Bool, std::nullopt));
}
inline Tensor sum_dims(const Tensor& t, const DimVector& dims, bool keepdim) {
  if (dims.empty()) return t;  // an empty list would mean "all dims" to sum()
  return ops::sum(t, std::optional<DimVector>(dims), keepdim, std::nullopt);
}

// Sorted, wrapped reduction dims (all of them when `dim` is absent or empty).
inline DimVector reduced_dims(int64_t ndim, const std::optional<DimVector>& dim, const char* op) {
  DimVector dims;
  if (!dim || dim->empty()) {
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
    return dims;
  }
  if (ndim == 0) return dims;
  for (int64_t d : *dim) dims.push_back(wrap_dim(d, ndim, op));
  std::sort(dims.begin(), dims.end());
  return dims;
}
inline std::optional<DimVector> one_dim(std::optional<int64_t> d) {
  if (!d) return std::nullopt;
  return DimVector{*d};
}
// A reduction's output (or its gradient) with the reduced dims put back as size 1, so it
// broadcasts against the input.
inline Tensor unsqueeze_reduced(const Tensor& t, int64_t ndim, const std::optional<DimVector>& dim,
                                bool keepdim) {
  if (keepdim || ndim == 0 || t->dim() == ndim) return t;
  if (!dim || dim->empty()) return ops::reshape(t, DimVector(ndim, 1));
  Tensor r = t;
  for (int64_t d : reduced_dims(ndim, dim, "backward")) r = ops::unsqueeze(r, d);
  return r;
}
inline int64_t reduced_count(const DimVector& sizes, const std::optional<DimVector>& dim) {
  int64_t n = 1;
  for (int64_t d : reduced_dims(sizes.size(), dim, "backward")) n *= sizes[d];
  return n;
}
// Reversed cumulative sum along d: out[i] = sum over j >= i of t[j].
inline Tensor reversed_cumsum(const Tensor& t, int64_t d) {
  if (t->dim() == 0) return t;
  DimVector f{d};
  return ops::flip(ops::cumsum(ops::flip(t, f), d, std::nullopt), f);
}

// ---- pointwise ---------------------------------------------------------------------------------

constexpr double kTwoOverSqrtPi = 1.1283791670955126;  // 2 / sqrt(pi)
constexpr double kSqrtPiOverTwo = 0.886226925452758;   // sqrt(pi) / 2

// asin, acos, atan: grad / conj(sqrt(1 - z^2)), its negation, grad / conj(1 + z^2) (cj is free
// for real inputs).
inline Tensor asin_backward(const Tensor& grad, const Tensor& self) {
  return div(grad, cj(sqrt(one_minus(square(self)))));
}
inline Tensor acos_backward(const Tensor& grad, const Tensor& self) {
  return neg(asin_backward(grad, self));
}
inline Tensor atan_backward(const Tensor& grad, const Tensor& self) {
  return div(grad, cj(add(square(self), Scalar(int64_t(1)))));
}
// acosh: grad / conj(sqrt(z - 1) sqrt(z + 1)), the product rather than sqrt(z^2 - 1) so that
// the sign is right on both sides of the imaginary axis.
inline Tensor acosh_backward(const Tensor& grad, const Tensor& self) {
  Tensor d = mul(sqrt(sub(self, Scalar(int64_t(1)))), sqrt(add(self, Scalar(int64_t(1)))));
  return div(grad, cj(d));
}
inline Tensor erf_backward(const Tensor& grad, const Tensor& self) {
  return mul(grad, mul(exp(neg(square(self))), Scalar(kTwoOverSqrtPi)));
}
inline Tensor erfc_backward(const Tensor& grad, const Tensor& self) {
  return mul(grad, mul(exp(neg(square(self))), Scalar(-kTwoOverSqrtPi)));
}
// erfinv's derivative sqrt(pi) / 2 * exp(erfinv(x)^2), from y = erfinv(x).
inline Tensor erfinv_backward(const Tensor& grad, const Tensor& y) {
  return mul(grad, mul(exp(square(y)), Scalar(kSqrtPiOverTwo)));
}
// nan_to_num: the replaced elements (NaN, +-inf) are constants.
inline Tensor nan_to_num_backward(const Tensor& grad, const Tensor& self) {
  return where0(ops::isfinite(self, Tensor()), grad);
}
// remainder / fmod: d/dother = -(self / other rounded the op's way).
inline Tensor mod_backward_other(const Tensor& grad, const Tensor& self,
                                 const TensorOrScalar& other, const char* rounding) {
  return mul(neg(grad), ops::div(self, other, std::string(rounding), Tensor()));
}
// atan2(self, other): d/dself = other / r^2, d/dother = -self / r^2 (r^2 = self^2 + other^2),
// with 1 / r^2 taken as 0 where r^2 is 0 (as torch: signed zeros at the origin, not NaN).
inline Tensor atan2_backward(const Tensor& grad, const Tensor& self, const TensorOrScalar& other,
                             bool for_self) {
  Tensor r2 = other.is_tensor()
                  ? add(square(self), square(other.tensor))
                  : add(square(self), Scalar(other.scalar.to_double() * other.scalar.to_double()));
  Tensor recip = ops::where(eq0(r2), TensorOrScalar(Scalar(0.0)),
                            TensorOrScalar(ops::reciprocal(r2, Tensor())), Tensor());
  Tensor g = for_self ? mul(grad, other) : mul(grad, TensorOrScalar(neg(self)));
  return mul(g, TensorOrScalar(recip));
}
// Forward mode, as torch: (-self * other_t + other * self_t) / r^2 over the tangents given (no
// masking, so the origin gives NaN).
inline Tensor atan2_jvp(const Tensor& self, const TensorOrScalar& other, const Tensor& self_t,
                        const Tensor& other_t) {
  Tensor num;
  if (other_t) num = mul(neg(self), TensorOrScalar(other_t));
  if (self_t) {
    Tensor b = other.is_tensor() ? mul(other.tensor, TensorOrScalar(self_t)) : mul(self_t, other);
    num = num ? add(num, TensorOrScalar(b)) : b;
  }
  Tensor r2 = other.is_tensor()
                  ? add(square(self), square(other.tensor))
                  : add(square(self), Scalar(other.scalar.to_double() * other.scalar.to_double()));
  return div(num, TensorOrScalar(r2));
}
// maximum / minimum: the smaller (larger) side gets nothing, ties split the gradient in half,
// NaN comparisons (neither < nor > nor ==) pass it to both sides, as in PyTorch.
inline Tensor max_min_backward(const Tensor& grad, const Tensor& self, const Tensor& other,
                               bool is_max, bool for_self) {
  Tensor g = ops::where(ops::eq(self, TensorOrScalar(other), Tensor()),
                        TensorOrScalar(mul(grad, Scalar(0.5))), TensorOrScalar(grad), Tensor());
  Tensor loses = for_self == is_max ? ops::lt(self, TensorOrScalar(other), Tensor())
                                    : ops::gt(self, TensorOrScalar(other), Tensor());
  return ops::where(loses, TensorOrScalar(Scalar(0.0)), TensorOrScalar(g), Tensor());
}
// lerp(self, end, weight) = self + weight * (end - self).
// lerp's derivative for self: grad * conj(1 - weight).
inline Tensor lerp_backward_self(const Tensor& grad, const TensorOrScalar& weight) {
  if (weight.is_tensor()) return mul(grad, cj(one_minus(weight.tensor)));
  if (weight.scalar.is_complex())
    return mul(grad, Scalar(std::conj(1.0 - weight.scalar.to_complex())));
  return mul(grad, Scalar(1.0 - weight.scalar.to_double()));
}

// ---- reductions --------------------------------------------------------------------------------

inline Tensor nansum_backward(const Tensor& grad, const Tensor& self,
                              const std::optional<DimVector>& dim, bool keepdim) {
  Tensor g = sum_backward(grad, InputMeta(self), dim, keepdim);
  return ops::where(ops::isnan(self, Tensor()), TensorOrScalar(Scalar(0.0)), TensorOrScalar(g),
                    Tensor());
}
// nanmean = nansum / (number of non-NaN elements).
inline Tensor nanmean_backward(const Tensor& grad, const Tensor& self,
                               const std::optional<DimVector>& dim, bool keepdim) {
  Tensor keep = ops::logical_not(ops::isnan(self, Tensor()), Tensor());
  std::optional<DimVector> all_dims;  // sum() over every dim when dim is absent or empty
  if (dim && !dim->empty()) all_dims = dim;
  Tensor count = ops::sum(keep, all_dims, true, std::nullopt);
  Tensor g = div(unsqueeze_reduced(grad, self->dim(), dim, keepdim), count);
  return where0(keep, g);
}

namespace detail {
// Gradient of prod along dim d of x, with g and r (the product) broadcastable along d:
// g * prod of the other elements, computed without dividing by zero.
inline Tensor prod_backward_dim(const Tensor& g, const Tensor& x, const Tensor& r, int64_t d) {
  Tensor is_zero = eq0(x);
  // Without zeros r / x is exact (and differentiable).
  if (all_true(ops::logical_not(is_zero, Tensor()))) return mul(g, div(r, x));
  if (!grad_enabled()) {
    // First derivatives only (no graph): count the zeros of each row. No zero: r / x. One
    // zero: that element gets the product of the others, the rest 0. More: all 0.
    Tensor zeros = ops::sum(is_zero, std::optional<DimVector>(DimVector{d}), true, std::nullopt);
    Tensor x_safe = ops::where(is_zero, TensorOrScalar(Scalar(1.0)), TensorOrScalar(x), Tensor());
    Tensor p = ops::prod(x_safe, d, true, std::nullopt);
    Tensor one_zero = ops::eq(zeros, TensorOrScalar(Scalar(int64_t(1))), Tensor());
    Tensor val = ops::where(is_zero, TensorOrScalar(where0(one_zero, p)),
                            TensorOrScalar(where0(eq0(zeros), div(p, x_safe))), Tensor());
    return mul(g, val);
  }
  // Differentiable with zeros (create_graph): the product of the others is the product of the
  // elements before (an exclusive cumprod) times that of the elements after.
  const int64_t n = x->size(d);
  DimVector f{d};
  std::vector<Tensor> head = ops::split_with_sizes(x, DimVector{n - 1, 1}, d);
  std::vector<Tensor> tail = ops::split_with_sizes(x, DimVector{1, n - 1}, d);
  Tensor one = ops::ones_like(tail[0], std::nullopt, std::nullopt);
  Tensor before = ops::cumprod(ops::cat({one, head[0]}, d, Tensor()), d, std::nullopt);
  Tensor after = ops::flip(
      ops::cumprod(ops::flip(ops::cat({tail[1], one}, d, Tensor()), f), d, std::nullopt), f);
  return mul(g, mul(before, after));
}
}  // namespace detail

inline Tensor prod_backward(const Tensor& grad, const Tensor& self, const Tensor& result,
                            std::optional<int64_t> dim, bool keepdim) {
  if (self->numel() == 0) return ops::zeros(self->sizes(), grad->dtype(), grad->device());
  if (self->dim() == 0) return grad;
  if (!dim) {
    Tensor flat = ops::reshape(self, DimVector{-1});
    Tensor g = detail::prod_backward_dim(ops::reshape(grad, DimVector{1}), flat,
                                         ops::reshape(result, DimVector{1}), 0);
    return ops::reshape(g, self->sizes());
  }
  const int64_t d = wrap_dim(*dim, self->dim(), "prod_backward");
  Tensor g = keepdim ? grad : ops::unsqueeze(grad, d);
  Tensor r = keepdim ? result : ops::unsqueeze(result, d);
  return detail::prod_backward_dim(g, self, r, d);
}

// max() / min() / median() of all elements: ties (NaNs when the result is NaN) share evenly.
inline Tensor evenly_distribute_backward(const Tensor& grad, const Tensor& self,
                                         const Tensor& result) {
  Tensor mask = ops::logical_or(
      ops::eq(self, TensorOrScalar(result), Tensor()),
      ops::logical_and(ops::isnan(self, Tensor()), ops::isnan(result, Tensor()), Tensor()),
      Tensor());
  Tensor count = ops::sum(mask, std::nullopt, false, std::nullopt);
  return where0(mask, div(grad, count));
}
// amax / amin / aminmax over dims: the gradient is shared by the elements equal to the result
// (a row whose result is NaN matches nothing and gets NaN, as in PyTorch).
inline Tensor amax_amin_backward(const Tensor& grad, const Tensor& self, const Tensor& result,
                                 const std::optional<DimVector>& dim, bool keepdim) {
  const int64_t nd = self->dim();
  Tensor r = unsqueeze_reduced(result, nd, dim, keepdim);
  Tensor g = unsqueeze_reduced(grad, nd, dim, keepdim);
  Tensor mask = ops::eq(self, TensorOrScalar(r), Tensor());
  std::optional<DimVector> all_dims;
  if (dim && !dim->empty()) all_dims = dim;
  Tensor count = ops::sum(mask, all_dims, true, std::nullopt);
  return mul(div(g, count), as_dtype(mask, g->dtype()));
}
inline Tensor aminmax_backward(const std::vector<Tensor>& grads, const Tensor& self,
                               const Tensor& min, const Tensor& max, std::optional<int64_t> dim,
                               bool keepdim) {
  return add(amax_amin_backward(grads[0], self, min, one_dim(dim), keepdim),
             amax_amin_backward(grads[1], self, max, one_dim(dim), keepdim));
}
// max(dim), sort, topk, median(dim), mode ...: the gradient goes to the returned indices.
inline Tensor value_selecting_backward(const Tensor& grad, int64_t dim, const Tensor& indices,
                                       const InputMeta& self, bool keepdim) {
  const int64_t nd = self.sizes.size();
  if (nd == 0) return ops::reshape(grad, DimVector{});
  const int64_t d = wrap_dim(dim, nd, "backward");
  Tensor g = grad, idx = indices;
  if (!keepdim) {
    g = ops::unsqueeze(g, d);
    idx = ops::unsqueeze(idx, d);
  }
  return ops::scatter(zeros_meta(self, grad), d, idx, g, std::nullopt, Tensor());
}
// cummax / cummin: several outputs can point at the same input element, so they add up.
inline Tensor cummaxmin_backward(const Tensor& grad, const Tensor& indices, const InputMeta& self,
                                 int64_t dim) {
  if (self.sizes.empty()) return grad;
  const int64_t d = wrap_dim(dim, self.sizes.size(), "backward");
  return ops::scatter_add(zeros_meta(self, grad), d, indices, grad, Tensor());
}

// var / std: N - correction in the denominator (correction 1 unless unbiased=False or given).
inline double var_correction(std::optional<bool> unbiased,
                             const std::optional<Scalar>& correction) {
  if (correction) return correction->to_double();
  return unbiased.value_or(true) ? 1.0 : 0.0;
}
inline Tensor var_backward(const Tensor& grad, const Tensor& self,
                           const std::optional<DimVector>& dim, std::optional<bool> unbiased,
                           const std::optional<Scalar>& correction, bool keepdim) {
  const double n = static_cast<double>(reduced_count(self->sizes(), dim));
  const double dof = std::max(0.0, n - var_correction(unbiased, correction));
  std::optional<DimVector> all_dims;
  if (dim && !dim->empty()) all_dims = dim;
  Tensor centered = sub(self, ops::mean(self, all_dims, true, std::nullopt));
  Tensor g = unsqueeze_reduced(grad, self->dim(), dim, keepdim);
  return mul(mul(g, centered), Scalar(2.0 / dof));
}
// d std = d var / (2 std); zero where std is zero (constant input), as in PyTorch.
inline Tensor std_backward(const Tensor& grad, const Tensor& self, const Tensor& result,
                           const std::optional<DimVector>& dim, std::optional<bool> unbiased,
                           const std::optional<Scalar>& correction, bool keepdim) {
  Tensor g = ops::where(eq0(result), TensorOrScalar(Scalar(0.0)),
                        TensorOrScalar(div(grad, mul(result, Scalar(2.0)))), Tensor());
  return var_backward(g, self, dim, unbiased, correction, keepdim);
}
inline Tensor var_mean_backward(const std::vector<Tensor>& grads, const Tensor& self,
                                const std::optional<DimVector>& dim, std::optional<bool> unbiased,
                                const std::optional<Scalar>& correction, bool keepdim) {
  return add(var_backward(grads[0], self, dim, unbiased, correction, keepdim),
             mean_backward(grads[1], InputMeta(self), dim, keepdim));
}
inline Tensor std_mean_backward(const std::vector<Tensor>& grads, const Tensor& self,
                                const Tensor& result, const std::optional<DimVector>& dim,
                                std::optional<bool> unbiased,
                                const std::optional<Scalar>& correction, bool keepdim) {
  return add(std_backward(grads[0], self, result, dim, unbiased, correction, keepdim),
             mean_backward(grads[1], InputMeta(self), dim, keepdim));
}

// Vector p-norm (PyTorch's norm_backward): 0 for p = 0; sign for p = 1; x / norm for p = 2;
// ties of the extreme |x| share for p = +-inf; the general power rule otherwise. A zero norm
// gives a zero gradient.
inline Tensor norm_backward(const Tensor& grad, const Tensor& self, const std::optional<Scalar>& p,
                            const Tensor& result, const std::optional<DimVector>& dim,
                            bool keepdim) {
  const double pv = p ? p->to_double() : 2.0;
  const int64_t nd = self->dim();
  Tensor g = unsqueeze_reduced(grad, nd, dim, keepdim);
  Tensor r = unsqueeze_reduced(result, nd, dim, keepdim);
  // A complex self keeps its dtype (its norm is real): the gradient is complex, like self.
  Tensor x =
      self->dtype() == r->dtype() || is_complex(self->dtype()) ? self : as_dtype(self, r->dtype());
  // d|x|/dx: sign(x), or x / |x| (sgn) for a complex x
  auto sx = [&] { return is_complex(x->dtype()) ? ops::sgn(x, Tensor()) : sign(x); };
  auto zero_where_norm0 = [&](const Tensor& t) {
    return ops::where(eq0(r), TensorOrScalar(Scalar(0.0)), TensorOrScalar(t), Tensor());
  };
  if (pv == 0.0) return ops::zeros(self->sizes(), g->dtype(), g->device());
  if (pv == 1.0) return mul(sx(), g);
  if (pv == 2.0) return zero_where_norm0(mul(g, div(x, r)));
  if (std::isinf(pv)) {
    Tensor ax = ops::abs(x, Tensor());
    Tensor mask = ops::logical_or(ops::eq(ax, TensorOrScalar(r), Tensor()),
                                  ops::isnan(ax, Tensor()), Tensor());
    std::optional<DimVector> all_dims;
    if (dim && !dim->empty()) all_dims = dim;
    Tensor count = ops::sum(mask, all_dims, true, std::nullopt);
    return mul(sx(), mul(div(g, count), as_dtype(mask, g->dtype())));
  }
  Tensor ax = ops::abs(x, Tensor());
  if (pv < 1.0) {
    // |x|^(p-1) is infinite at 0: those elements get 0.
    Tensor s = ops::where(
        eq0(x), TensorOrScalar(Scalar(0.0)),
        TensorOrScalar(mul(sx(), ops::pow(ax, TensorOrScalar(Scalar(pv - 1.0)), Tensor()))),
        Tensor());
    return mul(mul(s, g), ops::pow(r, TensorOrScalar(Scalar(1.0 - pv)), Tensor()));
  }
  Tensor num = pv < 2.0 ? mul(sx(), ops::pow(ax, TensorOrScalar(Scalar(pv - 1.0)), Tensor()))
                        : mul(x, ops::pow(ax, TensorOrScalar(Scalar(pv - 2.0)), Tensor()));
  return zero_where_norm0(
      div(mul(num, g), ops::pow(r, TensorOrScalar(Scalar(pv - 1.0)), Tensor())));
}

inline Tensor logsumexp_backward(const Tensor& grad, const Tensor& self, const Tensor& result,
                                 const DimVector& dim, bool keepdim) {
  const int64_t nd = self->dim();
  std::optional<DimVector> d(dim);
  Tensor g = unsqueeze_reduced(grad, nd, d, keepdim);
  Tensor r = unsqueeze_reduced(result, nd, d, keepdim);
  return mul(g, exp(sub(self, r)));
}

// _logcumsumexp (complex): y_k = log(sum_{j<=k} exp(x_j)) is holomorphic, so
// grad_x_j = sum_{k>=j} grad_k * conj(exp(x_j - y_k)). The sum runs in log space, as a reversed
// logcumsumexp of log(grad) - conj(y), so no exp over- or underflows on its own.
inline Tensor logcumsumexp_backward(const Tensor& grad, const Tensor& self, const Tensor& result,
                                    int64_t dim) {
  if (self->dim() == 0 || self->numel() == 0) return grad;
  const DimVector d{wrap_dim(dim, self->dim(), "logcumsumexp_backward")};
  Tensor terms = sub(log(grad), cj(result));
  Tensor tail = ops::flip(ops::_logcumsumexp(ops::flip(terms, d), d[0]), d);
  return exp(add(tail, cj(self)));
}

inline Tensor cumsum_backward(const Tensor& grad, int64_t dim) {
  if (grad->dim() == 0) return grad;
  return reversed_cumsum(grad, wrap_dim(dim, grad->dim(), "cumsum_backward"));
}

// cumprod: y[k] = prod of x[j] for j <= k, so dL/dx[i] = sum over k >= i of g[k] * y[k] / x[i]
// wherever the division is safe (before the first zero of the row). The first zero gets
// sum over k >= z of g[k] * prod_{j <= k, j != z} x[j]; later elements get 0.
inline Tensor cumprod_backward(const Tensor& grad, const Tensor& self, const Tensor& result,
                               int64_t dim) {
  if (self->dim() == 0 || self->numel() == 0) return grad;
  const int64_t d = wrap_dim(dim, self->dim(), "cumprod_backward");
  const int64_t n = self->size(d);
  Tensor x = self->dtype() == result->dtype() ? self : as_dtype(self, result->dtype());
  Tensor is_zero = eq0(x);
  // Without zeros the division is exact (and differentiable).
  if (all_true(ops::logical_not(is_zero, Tensor())))
    return div(reversed_cumsum(mul(grad, result), d), x);
  if (!grad_enabled()) {
    Tensor zeros_so_far = ops::cumsum(is_zero, d, std::nullopt);
    Tensor before = eq0(zeros_so_far);
    Tensor first = ops::logical_and(
        is_zero, ops::eq(zeros_so_far, TensorOrScalar(Scalar(int64_t(1))), Tensor()), Tensor());
    Tensor x_safe = ops::where(before, TensorOrScalar(x), TensorOrScalar(Scalar(1.0)), Tensor());
    Tensor t1 = where0(before, div(reversed_cumsum(mul(grad, result), d), x_safe));
    Tensor x_skip = ops::where(first, TensorOrScalar(Scalar(1.0)), TensorOrScalar(x), Tensor());
    Tensor t2 = where0(first, reversed_cumsum(mul(grad, ops::cumprod(x_skip, d, std::nullopt)), d));
    return add(t1, t2);
  }
  // Differentiable with zeros (create_graph): row i of an n x n matrix is x with x[i] replaced by
  // 1; its cumprod at k >= i is dy[k]/dx[i].
  Tensor xt = ops::transpose(x, d, -1);
  Tensor gt = ops::unsqueeze(ops::transpose(grad, d, -1), -2);
  Tensor eye = as_dtype(ops::eye(n, std::nullopt, std::nullopt, x->device()), ScalarType::Bool);
  Tensor m = ops::where(eye, TensorOrScalar(Scalar(1.0)), TensorOrScalar(ops::unsqueeze(xt, -2)),
                        Tensor());
  Tensor c = ops::cumprod(m, -1, std::nullopt);
  Tensor upper =
      as_dtype(ops::triu(ops::ones(DimVector{n, n}, std::nullopt, x->device()), 0, Tensor()),
               ScalarType::Bool);
  Tensor r = ops::sum(where0(upper, mul(c, gt)), DimVector{-1}, false, std::nullopt);
  return ops::transpose(r, d, -1);
}

// ---- linear algebra ----------------------------------------------------------------------------

inline Tensor mv_backward_self(const Tensor& grad, const Tensor& vec) {
  return mul(ops::unsqueeze(grad, 1), vec);
}
inline Tensor mv_backward_vec(const Tensor& grad, const Tensor& self) {
  return ops::mv(ops::t(self), grad);
}
// addbmm: every batch contributes to the same (n, p) result.
inline Tensor addbmm_backward(const Tensor& grad, const Tensor& batch1, const Tensor& batch2,
                              const Scalar& alpha, bool for_batch1) {
  Tensor g = ops::expand(ops::unsqueeze(grad, 0),
                         DimVector{batch1->size(0), grad->size(0), grad->size(1)});
  Tensor r = for_batch1 ? ops::bmm(g, ops::transpose(batch2, 1, 2))
                        : ops::bmm(ops::transpose(batch1, 1, 2), g);
  return scale(r, alpha);
}

namespace detail {
struct Contraction {
  DimVector da, db, free_a, free_b;  // wrapped, paired contracted dims; free dims in order
};
inline Contraction contraction(const Tensor& a, const Tensor& b, const DimVector& dims_a,
                               const DimVector& dims_b) {
  Contraction c;
  std::vector<bool> ca(a->dim(), false), cb(b->dim(), false);
  for (int64_t i = 0; i < dims_a.size(); ++i) {
    c.da.push_back(wrap_dim(dims_a[i], a->dim(), "tensordot_backward"));
    c.db.push_back(wrap_dim(dims_b[i], b->dim(), "tensordot_backward"));
    ca[c.da.back()] = cb[c.db.back()] = true;
  }
  for (int64_t d = 0; d < a->dim(); ++d)
    if (!ca[d]) c.free_a.push_back(d);
  for (int64_t d = 0; d < b->dim(); ++d)
    if (!cb[d]) c.free_b.push_back(d);
  return c;
}
// Rank of v among the values of `set`.
inline int64_t rank_in(const DimVector& set, int64_t v) {
  int64_t r = 0;
  for (int64_t s : set) r += s < v;
  return r;
}
}  // namespace detail

// tensordot(a, b, dims_a, dims_b) has shape free(a) + free(b). Each gradient is another
// tensordot of grad with the other operand, then a permutation back to the operand's dim order.
inline Tensor tensordot_backward(const Tensor& grad, const Tensor& a, const Tensor& b,
                                 const DimVector& dims_a, const DimVector& dims_b, bool for_a) {
  detail::Contraction c = detail::contraction(a, b, dims_a, dims_b);
  const int64_t nfa = c.free_a.size(), nfb = c.free_b.size();
  if (for_a) {
    DimVector gd;
    for (int64_t j = 0; j < nfb; ++j) gd.push_back(nfa + j);
    // Result: free(a) in order, then b's contracted dims in b's order.
    Tensor r = ops::tensordot(grad, b, gd, c.free_b);
    DimVector perm(a->dim(), 0);
    for (int64_t j = 0; j < nfa; ++j) perm[c.free_a[j]] = j;
    for (int64_t i = 0; i < c.da.size(); ++i) perm[c.da[i]] = nfa + detail::rank_in(c.db, c.db[i]);
    return ops::permute(r, perm);
  }
  DimVector gd;
  for (int64_t j = 0; j < nfa; ++j) gd.push_back(j);
  // Result: a's contracted dims in a's order, then free(b) in order.
  Tensor r = ops::tensordot(a, grad, c.free_a, gd);
  const int64_t nc = c.da.size();
  DimVector perm(b->dim(), 0);
  for (int64_t j = 0; j < nfb; ++j) perm[c.free_b[j]] = nc + j;
  for (int64_t i = 0; i < nc; ++i) perm[c.db[i]] = detail::rank_in(c.da, c.da[i]);
  return ops::permute(r, perm);
}
inline Tensor tensordot_backward(const Tensor& grad, const Tensor& a, const Tensor& b, int64_t dims,
                                 bool for_a) {
  DimVector da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a->dim() - dims + i);
    db.push_back(i);
  }
  return tensordot_backward(grad, a, b, da, db, for_a);
}
// inner(self, other) contracts the last dims (a 0-d operand multiplies).
inline Tensor inner_backward(const Tensor& grad, const Tensor& self, const Tensor& other,
                             bool for_self) {
  if (self->dim() == 0 || other->dim() == 0) return mul(grad, for_self ? other : self);
  return tensordot_backward(grad, self, other, DimVector{-1}, DimVector{-1}, for_self);
}

// kron: the result read as (a0, b0, a1, b1, ...) is self[a0, a1, ...] * other[b0, b1, ...].
inline Tensor kron_backward(const Tensor& grad, const Tensor& self, const Tensor& other,
                            bool for_self) {
  const int64_t nd = std::max(self->dim(), other->dim());
  if (nd == 0) return mul(grad, for_self ? other : self);
  DimVector split, other_shape, sum_over;
  const int64_t pa = nd - self->dim(), pb = nd - other->dim();
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t sa = d < pa ? 1 : self->size(d - pa), sb = d < pb ? 1 : other->size(d - pb);
    split.push_back(sa);
    split.push_back(sb);
    sum_over.push_back(2 * d + (for_self ? 1 : 0));
    other_shape.push_back(for_self ? 1 : sa);
    other_shape.push_back(for_self ? sb : 1);
  }
  const Tensor& o = for_self ? other : self;
  Tensor r =
      sum_dims(mul(ops::reshape(grad, split), ops::reshape(o, other_shape)), sum_over, false);
  return ops::reshape(r, for_self ? self->sizes() : other->sizes());
}

// ---- einsum ------------------------------------------------------------------------------------

namespace detail {
// An einsum equation with every operand's and the output's labels spelled out: ellipses become
// spare letters (right-aligned, as they broadcast), the implicit output is made explicit.
struct EinsumLabels {
  std::vector<std::string> ops;
  std::string out;
  std::string spare;  // letters the equation doesn't use
};
inline EinsumLabels einsum_labels(const std::string& equation, const std::vector<Tensor>& ts) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  EinsumLabels L;
  std::vector<std::string> raw;
  for (size_t b = 0;;) {
    size_t c = lhs.find(',', b);
    raw.push_back(lhs.substr(b, c == std::string::npos ? std::string::npos : c - b));
    if (c == std::string::npos) break;
    b = c + 1;
  }
  std::vector<int> count(128, 0);
  for (const std::string& t : raw)
    for (char c : t)
      if (c != '.') count[static_cast<unsigned char>(c)]++;
  std::string letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  bool used[128] = {};
  for (char c : eq) used[static_cast<unsigned char>(c)] = true;
  for (char c : letters)
    if (!used[static_cast<unsigned char>(c)]) L.spare += c;
  int64_t n_ell = 0;
  std::vector<int64_t> op_ell(raw.size(), 0);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i].find("...") == std::string::npos) continue;
    op_ell[i] = ts[i]->dim() - static_cast<int64_t>(raw[i].size() - 3);
    n_ell = std::max(n_ell, op_ell[i]);
  }
  EMBER_CHECK(n_ell <= static_cast<int64_t>(L.spare.size()),
              "einsum backward: not enough unused letters to name the ", n_ell,
              " ellipsis dims of '", equation, "'");
  const std::string ell = L.spare.substr(0, n_ell);
  L.spare = L.spare.substr(n_ell);
  auto expand = [&](const std::string& t, int64_t k) {
    size_t p = t.find("...");
    if (p == std::string::npos) return t;
    return t.substr(0, p) + ell.substr(n_ell - k) + t.substr(p + 3);
  };
  for (size_t i = 0; i < raw.size(); ++i) L.ops.push_back(expand(raw[i], op_ell[i]));
  if (arrow != std::string::npos) {
    L.out = expand(eq.substr(arrow + 2), n_ell);
  } else {
    L.out = ell;
    for (char c : letters)
      if (count[static_cast<unsigned char>(c)] == 1) L.out += c;
  }
  return L;
}
}  // namespace detail

// Gradient of each operand: an einsum of grad with the other operands giving the operand's
// labels; labels only the operand has are broadcast back, labels where it broadcast (size 1)
// are summed, repeated labels (diagonals) are placed on the diagonal through identity matrices.
inline std::vector<Tensor> einsum_backward(const Tensor& grad, const std::string& equation,
                                           const std::vector<Tensor>& tensors) {
  detail::EinsumLabels L = detail::einsum_labels(equation, tensors);
  const size_t n = tensors.size();
  std::vector<Tensor> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (!requires_grad(tensors[i])) continue;
    const std::string& lab = L.ops[i];
    const Tensor& t = tensors[i];
    std::string uniq, keep;  // labels in first-occurrence order; those reaching grad or others
    std::vector<int64_t> size_of(128, 1);
    for (size_t k = 0; k < lab.size(); ++k) {
      const char c = lab[k];
      if (uniq.find(c) != std::string::npos) continue;
      uniq += c;
      size_of[static_cast<unsigned char>(c)] = t->size(k);
      bool reaches = L.out.find(c) != std::string::npos;
      for (size_t j = 0; j < n && !reaches; ++j)
        reaches = j != i && L.ops[j].find(c) != std::string::npos;
      if (reaches) keep += c;
    }
    std::string eq = L.out;
    std::vector<Tensor> args{grad};
    for (size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      eq += "," + L.ops[j];
      args.push_back(cj(tensors[j]));  // conj(d result / d operand i): conjugated operands
    }
    Tensor r = (n == 1 && keep == L.out) ? grad : ops::einsum(eq + "->" + keep, args);
    // Labels only this operand has: broadcast back. Labels it broadcast (size 1): sum.
    DimVector sizes, ones;
    for (size_t k = 0; k < uniq.size(); ++k) {
      const int64_t s = size_of[static_cast<unsigned char>(uniq[k])];
      if (keep.find(uniq[k]) == std::string::npos)
        r = ops::unsqueeze(r, k);
      else if (s == 1 && r->size(k) != 1)
        ones.push_back(k);
      sizes.push_back(s);
    }
    r = sum_dims(r, ones, true);
    r = ops::expand(r, sizes);
    if (uniq.size() != lab.size()) {
      // Repeated labels: g[.., i, .., i, ..] = r[.., i, ..] and zero off the diagonal.
      std::string res, spare = L.spare, deq = uniq;
      std::vector<Tensor> dargs{r};
      std::string seen;
      for (char c : lab) {
        if (seen.find(c) == std::string::npos) {
          seen += c;
          res += c;
          continue;
        }
        EMBER_CHECK(!spare.empty(), "einsum backward: not enough unused letters for '", equation,
                    "'");
        const char f = spare.back();
        spare.pop_back();
        res += f;
        deq += std::string(",") + c + f;
        // eye has no complex kernel: made in float64, then cast to the gradient's dtype
        dargs.push_back(as_dtype(ops::eye(size_of[static_cast<unsigned char>(c)], std::nullopt,
                                          ScalarType::Float64, r->device()),
                                 r->dtype()));
      }
      r = ops::einsum(deq + "->" + res, dargs);
    }
    out[i] = r;
  }
  return out;
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
