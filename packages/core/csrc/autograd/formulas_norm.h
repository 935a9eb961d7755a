// Derivatives of the normalization ops (native_layer_norm, _fused_rms_norm, native_group_norm,
// native_batch_norm), reverse and forward mode. Included by formulas.h.
//
// Reverse mode: a plain backward (no create_graph, no tangents on what the formula reads) calls
// the fused kernels (native_*_norm_backward). When the backward itself must be differentiable
// (create_graph with something that requires grad, or forward-over-reverse), the gradient is
// instead a composite of ops:: that recomputes the statistics from the input, so gradients of
// any order follow from those ops' own derivatives; the fused backward ops need none.
//
// Every op here normalizes x viewed as `vshape` over the dims `rd` of that view (layer/RMS norm:
// the trailing dims; group norm: (N, G, C/G * HW) over the last; batch norm: all dims but 1),
// with the affine parameters broadcast per channel or per normalized element. Writing
// xhat = (x - mean) * rstd (rstd = 1/sqrt(var + eps), var the biased variance; RMS norm has
// mean = 0) and n the elements per statistic:
//   d/dx of sum(g * xhat) = rstd * (g - mean(g) - xhat * mean(g * xhat))   (RMS: no mean(g))
//   d mean / dx = 1/n,   d rstd / dx = -rstd^2 * xhat / n.
// In batch norm's eval mode the statistics are the running ones: constants, so the op is affine.
#pragma once
#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/formulas_base.h"
#include "autograd/forward_ad.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

namespace norm_detail {

// How an op sees its input: statistics over dims `rd` of the input reshaped to `vshape`.
struct Layout {
  DimVector vshape;      // the input reshaped so that every statistic reduces over rd
  DimVector rd;          // reduced dims of that view
  DimVector stat_shape;  // vshape with the rd dims set to 1 (statistics, keepdim)
  DimVector wshape;      // shape the affine parameters broadcast against the input with
  DimVector wsum;        // input dims summed for the weight and bias gradients
  int64_t count = 1;     // elements per statistic
  bool center = true;    // false for RMS norm (no mean)
};

inline Layout finish(Layout l) {
  l.stat_shape = l.vshape;
  l.count = 1;
  for (int64_t d : l.rd) {
    l.count *= l.vshape[d];
    l.stat_shape[d] = 1;
  }
  return l;
}

// Layer and RMS norm: the trailing normalized_shape dims.
inline Layout rows(const Tensor& input, const DimVector& normalized_shape, bool center) {
  Layout l;
  l.vshape = input->sizes();
  const int64_t nd = input->dim(), k = static_cast<int64_t>(normalized_shape.size());
  for (int64_t d = nd - k; d < nd; ++d) l.rd.push_back(d);
  for (int64_t d = 0; d < nd - k; ++d) l.wsum.push_back(d);
  l.wshape = normalized_shape;
  l.center = center;
  return finish(l);
}

// Per-channel affine parameters of an (N, C, *) input: shape (1, C, 1, ...).
inline DimVector channel_shape(const Tensor& input) {
  DimVector s(input->dim(), 1);
  s[1] = input->size(1);
  return s;
}
inline DimVector all_but_1(const Tensor& input) {
  DimVector d;
  for (int64_t i = 0; i < input->dim(); ++i)
    if (i != 1) d.push_back(i);
  return d;
}

// Group norm: (N, G, C/G * HW), statistics over the last dim.
inline Layout groups(const Tensor& input, int64_t num_groups) {
  Layout l;
  const int64_t n = input->size(0);
  const int64_t per = n * num_groups == 0 ? 0 : input->numel() / (n * num_groups);
  l.vshape = DimVector{n, num_groups, per};
  l.rd = DimVector{2};
  l.wshape = channel_shape(input);
  l.wsum = all_but_1(input);
  return finish(l);
}

// Batch norm: statistics per channel over the batch and spatial dims.
inline Layout channels(const Tensor& input) {
  Layout l;
  l.vshape = input->sizes();
  l.rd = all_but_1(input);
  l.wshape = channel_shape(input);
  l.wsum = l.rd;
  return finish(l);
}

inline Tensor as_type_of(const Tensor& t, const Tensor& like) {
  return t->dtype() == like->dtype() ? t : ops::_to_dtype(t, like->dtype(), false);
}
inline Tensor view_as(const Tensor& t, const DimVector& shape) {
  return t->sizes() == shape ? t : ops::reshape(t, shape);
}
inline Tensor mean_rd(const Tensor& t, const Layout& l) {
  return ops::mean(t, std::optional<DimVector>(l.rd), true, std::nullopt);
}
inline Tensor sum_over(const Tensor& t, const DimVector& dims) {
  if (dims.empty()) return t;  // an empty list would mean "all dims" to sum()
  return ops::sum(t, std::optional<DimVector>(dims), false, std::nullopt);
}
// The affine weight broadcast against the input, in the input's dtype.
inline Tensor affine(const Tensor& p, const Tensor& like, const Layout& l) {
  return view_as(as_type_of(p, like), l.wshape);
}

// Whether every element of a CPU float/double tensor is zero, read in place (no op launched).
template <class T>
bool all_zero_cpu(const Tensor& t) {
  const T* p = t->data_as<T>();
  for (int64_t i = 0, n = t->numel(); i < n; ++i)
    if (p[i] != T(0)) return false;
  return true;
}

// A gradient with respect to a statistic output (mean / rstd) that contributes: undefined ones,
// and the zeros the engine fills in for unused outputs, do not. This runs on every plain
// backward, so the common case reads the small statistic in place.
inline bool contributes(const Tensor& g) {
  if (!g || g->numel() == 0) return false;
  if (requires_grad(g) || g->device().is_meta()) return true;
  if (g->device().is_cpu() && g->is_contiguous()) {
    if (g->dtype() == ScalarType::Float32) return !all_zero_cpu<float>(g);
    if (g->dtype() == ScalarType::Float64) return !all_zero_cpu<double>(g);
  }
  return !ops::equal(g, ops::zeros_like(g, std::nullopt, std::nullopt));
}

// Whether a backward formula must record itself: grad mode on (create_graph) with something it
// reads requiring grad, or tangents on it (forward-over-reverse).
inline bool differentiable(std::initializer_list<const Tensor*> ts) {
  if (grad_enabled())
    for (const Tensor* t : ts)
      if (requires_grad(*t)) return true;
  return forward_ad::maybe_active() && forward_ad::wants(ts);
}

// Mean and rstd of the input (viewed as l.vshape) as recorded ops; mean is undefined for RMS.
inline std::pair<Tensor, Tensor> stats(const Tensor& xv, const Layout& l, double eps) {
  Tensor mu, sq;
  if (l.center) {
    mu = mean_rd(xv, l);
    Tensor xc = sub(xv, mu);
    sq = mean_rd(mul(xc, xc), l);
  } else {
    sq = mean_rd(mul(xv, xv), l);
  }
  return {mu, ops::rsqrt(add(sq, Scalar(eps)), Tensor())};
}
inline Tensor normalized(const Tensor& xv, const Tensor& mu, const Tensor& rs) {
  return mul(mu ? sub(xv, mu) : xv, rs);
}

// The gradient with respect to the input through the statistic outputs: gmean / n - grstd *
// rstd^2 * xhat / n (view layout; undefined when neither contributes).
inline Tensor stat_terms(const Tensor& gmean, const Tensor& grstd, const Tensor& xhat,
                         const Tensor& rs, const Layout& l) {
  Tensor r;
  const Scalar n(static_cast<double>(l.count));
  if (l.center && contributes(gmean)) r = div(view_as(gmean, l.stat_shape), n);
  if (contributes(grstd)) {
    Tensor k = div(mul(mul(view_as(grstd, l.stat_shape), rs), rs), n);
    Tensor t = neg(mul(xhat, k));
    r = r ? add(r, t) : t;
  }
  return r;
}

enum class Wrt { Input, Weight, Bias };

// One gradient of a normalization op as a composite of ops::, so that it is differentiable
// itself (create_graph, or tangents on what it reads). `train`: statistics from the input
// (batch norm eval: the saved running ones).
inline Tensor composite_grad(Wrt wrt, const Layout& l, const Tensor& grad, const Tensor& gmean,
                             const Tensor& grstd, const Tensor& input, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, double eps, bool train) {
  if (wrt == Wrt::Bias) return sum_over(grad, l.wsum);
  Tensor xv = view_as(input, l.vshape);
  Tensor mu, rs;
  if (train) {
    std::tie(mu, rs) = stats(xv, l, eps);
  } else {  // the running statistics: constants
    mu = view_as(as_type_of(autograd::detach(mean), input), l.stat_shape);
    rs = view_as(as_type_of(autograd::detach(rstd), input), l.stat_shape);
  }
  Tensor xhat = normalized(xv, mu, rs);
  if (wrt == Wrt::Weight) return sum_over(mul(grad, view_as(xhat, input->sizes())), l.wsum);
  Tensor g = as_type_of(grad, input);
  if (weight) g = mul(g, affine(weight, input, l));
  Tensor gv = view_as(g, l.vshape);
  Tensor gx;
  if (train) {
    Tensor inner = sub(gv, mul(xhat, mean_rd(mul(gv, xhat), l)));
    if (l.center) inner = sub(inner, mean_rd(gv, l));
    gx = mul(inner, rs);
    Tensor extra = stat_terms(gmean, grstd, xhat, rs, l);
    if (extra) gx = add(gx, extra);
  } else {
    gx = mul(gv, rs);
  }
  return view_as(gx, input->sizes());
}

// The gradients of a normalization op that `mask` asks for (input, weight, bias), from one
// call of the op's fused backward kernel `fused(mask)` (a std::tuple), which reads the shared
// sums once; when the gradients must be differentiable, composite_grad builds each one.
template <size_t N, class Fused>
auto backward_all(const std::array<bool, N>& mask, const Layout& l, const Tensor& grad,
                  const Tensor& gmean, const Tensor& grstd, const Tensor& input,
                  const Tensor& weight, const Tensor& mean, const Tensor& rstd, double eps,
                  bool train, const Fused& fused) {
  if (!differentiable({&grad, &input, &weight, &gmean, &grstd})) {
    auto r = fused(mask);
    if (mask[0] && train && (contributes(gmean) || contributes(grstd))) {
      // Gradients reaching the statistic outputs (rare): add their terms from the saved stats.
      Tensor xv = view_as(input, l.vshape);
      Tensor mu = l.center ? view_as(mean, l.stat_shape) : Tensor();
      Tensor rs = view_as(rstd, l.stat_shape);
      Tensor extra = stat_terms(gmean, grstd, normalized(xv, mu, rs), rs, l);
      std::get<0>(r) = view_as(add(view_as(std::get<0>(r), l.vshape), extra), input->sizes());
    }
    return r;
  }
  auto one = [&](bool needed, Wrt wrt) {
    return needed
               ? composite_grad(wrt, l, grad, gmean, grstd, input, weight, mean, rstd, eps, train)
               : Tensor();
  };
  decltype(fused(mask)) r;
  std::get<0>(r) = one(mask[0], Wrt::Input);
  std::get<1>(r) = one(mask[1], Wrt::Weight);
  if constexpr (N == 3) std::get<2>(r) = one(mask[2], Wrt::Bias);
  return r;
}

// The tangent of the normalized output from the input's, weight's and bias's; sets the
// tangents of the statistic outputs `mean` (when centered) and `rstd` in training mode.
inline Tensor jvp(const Layout& l, const Tensor& input, const Tensor& weight, const Tensor& mean,
                  const Tensor& rstd, bool train, const Tensor& input_t, const Tensor& weight_t,
                  const Tensor& bias_t) {
  Tensor xv = view_as(input, l.vshape);
  Tensor mu = l.center ? view_as(as_type_of(mean, input), l.stat_shape) : Tensor();
  Tensor rs = view_as(as_type_of(rstd, input), l.stat_shape);
  Tensor xhat = normalized(xv, mu, rs);
  Tensor r;
  if (input_t && input->numel() > 0) {
    Tensor tv = view_as(as_type_of(input_t, input), l.vshape);
    Tensor dxhat;
    if (train) {
      Tensor m_xt = mean_rd(mul(xhat, tv), l);
      Tensor inner = sub(tv, mul(xhat, m_xt));
      Tensor dmu;
      if (l.center) {
        dmu = mean_rd(tv, l);
        inner = sub(inner, dmu);
        forward_ad::set_tangent(mean, view_as(dmu, mean->sizes()));
      }
      dxhat = mul(inner, rs);
      // d rstd = -rstd^3 * mean((x - mean) * t) = -rstd^2 * mean(xhat * t).
      forward_ad::set_tangent(rstd, view_as(neg(mul(mul(m_xt, rs), rs)), rstd->sizes()));
    } else {
      dxhat = mul(tv, rs);
    }
    Tensor d = view_as(dxhat, input->sizes());
    r = weight ? mul(d, affine(weight, input, l)) : d;
  }
  if (weight_t)
    r = forward_ad::accumulate(r, mul(view_as(xhat, input->sizes()), affine(weight_t, input, l)));
  if (bias_t) r = forward_ad::accumulate(r, affine(bias_t, input, l));
  return r;
}

}  // namespace norm_detail

// ---- per-op entry points (ops/nn.yaml) ------------------------------------------------------
using NormWrt = norm_detail::Wrt;

inline std::tuple<Tensor, Tensor, Tensor> native_layer_norm_grads(
    const std::vector<Tensor>& grads, const Tensor& input, const DimVector& normalized_shape,
    const Tensor& mean, const Tensor& rstd, const Tensor& weight, double eps,
    const std::array<bool, 3>& grad_input_mask) {
  return norm_detail::backward_all(
      grad_input_mask, norm_detail::rows(input, normalized_shape, true), grads[0], grads[1],
      grads[2], input, weight, mean, rstd, eps, true, [&](const std::array<bool, 3>& m) {
        return ops::native_layer_norm_backward(grads[0], input, normalized_shape, mean, rstd,
                                               weight, m[0], m[1], m[2]);
      });
}

inline std::tuple<Tensor, Tensor> fused_rms_norm_grads(const std::vector<Tensor>& grads,
                                                       const Tensor& input,
                                                       const DimVector& normalized_shape,
                                                       const Tensor& rstd, const Tensor& weight,
                                                       double eps,
                                                       const std::array<bool, 2>& grad_input_mask) {
  return norm_detail::backward_all(
      grad_input_mask, norm_detail::rows(input, normalized_shape, false), grads[0], Tensor(),
      grads[1], input, weight, Tensor(), rstd, eps, true, [&](const std::array<bool, 2>& m) {
        return ops::_fused_rms_norm_backward(grads[0], input, normalized_shape, rstd, weight, m[0],
                                             m[1]);
      });
}

inline std::tuple<Tensor, Tensor, Tensor> native_group_norm_grads(
    const std::vector<Tensor>& grads, const Tensor& input, int64_t num_groups, const Tensor& mean,
    const Tensor& rstd, const Tensor& weight, double eps,
    const std::array<bool, 3>& grad_input_mask) {
  return norm_detail::backward_all(
      grad_input_mask, norm_detail::groups(input, num_groups), grads[0], grads[1], grads[2], input,
      weight, mean, rstd, eps, true, [&](const std::array<bool, 3>& m) {
        return ops::native_group_norm_backward(grads[0], input, num_groups, mean, rstd, weight,
                                               m[0], m[1], m[2]);
      });
}

inline std::tuple<Tensor, Tensor, Tensor> native_batch_norm_grads(
    const std::vector<Tensor>& grads, const Tensor& input, const Tensor& weight,
    const Tensor& save_mean, const Tensor& save_invstd, bool training, double eps,
    const std::array<bool, 3>& grad_input_mask) {
  return norm_detail::backward_all(
      grad_input_mask, norm_detail::channels(input), grads[0], grads[1], grads[2], input, weight,
      save_mean, save_invstd, eps, training, [&](const std::array<bool, 3>& m) {
        return ops::native_batch_norm_backward(grads[0], input, weight, save_mean, save_invstd,
                                               training, m[0], m[1], m[2]);
      });
}

// Tangents (the output's; the statistics' are attached inside).
inline Tensor native_layer_norm_jvp(const Tensor& input, const DimVector& normalized_shape,
                                    const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& input_t, const Tensor& weight_t,
                                    const Tensor& bias_t) {
  return norm_detail::jvp(norm_detail::rows(input, normalized_shape, true), input, weight, mean,
                          rstd, true, input_t, weight_t, bias_t);
}
inline Tensor fused_rms_norm_jvp(const Tensor& input, const DimVector& normalized_shape,
                                 const Tensor& weight, const Tensor& rstd, const Tensor& input_t,
                                 const Tensor& weight_t) {
  return norm_detail::jvp(norm_detail::rows(input, normalized_shape, false), input, weight,
                          Tensor(), rstd, true, input_t, weight_t, Tensor());
}
inline Tensor native_group_norm_jvp(const Tensor& input, int64_t num_groups, const Tensor& weight,
                                    const Tensor& mean, const Tensor& rstd, const Tensor& input_t,
                                    const Tensor& weight_t, const Tensor& bias_t) {
  return norm_detail::jvp(norm_detail::groups(input, num_groups), input, weight, mean, rstd, true,
                          input_t, weight_t, bias_t);
}
inline Tensor native_batch_norm_jvp(const Tensor& input, const Tensor& weight,
                                    const Tensor& save_mean, const Tensor& save_invstd,
                                    bool training, const Tensor& input_t, const Tensor& weight_t,
                                    const Tensor& bias_t) {
  return norm_detail::jvp(norm_detail::channels(input), input, weight, save_mean, save_invstd,
                          training, input_t, weight_t, bias_t);
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
