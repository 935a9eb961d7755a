// CPU kernels of nll_loss and of the fused cross entropy over class indices (log_softmax +
// nll_loss + label smoothing in one pass per sample), with their backward; the other losses are
// composites in ops/nn_ops.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/loss_rules.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

using nn::check_nll;
using nn::NllShape;

// Validated class index of target element i (or -1 for ignore_index).
inline int64_t class_at(const int64_t* t, int64_t i, int64_t c, int64_t ignore_index,
                        const char* op = "nll_loss") {
  int64_t k = t[i];
  if (k == ignore_index) return -1;
  EMBER_CHECK_KIND(k >= 0 && k < c, Index, op, ": target ", k, " is out of bounds (", c,
                   " classes; ignore_index is ", ignore_index, ")");
  return k;
}

double total_weight(const int64_t* t, int64_t count, const Tensor& w, int64_t c,
                    int64_t ignore_index) {
  double tw = 0;
  for (int64_t i = 0; i < count; ++i) {
    int64_t k = class_at(t, i, c, ignore_index);
    if (k < 0) continue;
    tw += w ? load_scalar(w->data() + k * w->itemsize(), w->dtype()).to_double() : 1.0;
  }
  return tw;
}

// Sums f(i) -> (value, weight) over samples [0, count) in fixed blocks spread over the pool; the
// blocks' partial sums are added in order, so the result does not depend on the thread count.
// cost: elements touched per sample (sets the grain).
template <class F>
std::pair<double, double> block_sum(int64_t count, int64_t cost, const F& f) {
  constexpr int64_t kBlock = 64;
  const int64_t nb = (count + kBlock - 1) / kBlock;
  std::vector<std::pair<double, double>> part(nb, {0.0, 0.0});
  const int64_t grain =
      std::max<int64_t>(1, kPointwiseGrain / (kBlock * std::max<int64_t>(cost, 1)));
  parallel_for(0, nb, grain, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      double acc = 0, tw = 0;
      for (int64_t i = blk * kBlock; i < std::min(count, (blk + 1) * kBlock); ++i) {
        const std::pair<double, double> v = f(i);
        acc += v.first;
        tw += v.second;
      }
      part[blk] = {acc, tw};
    }
  });
  double acc = 0, tw = 0;
  for (const auto& v : part) {
    acc += v.first;
    tw += v.second;
  }
  return {acc, tw};
}

}  // namespace

Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight,
                const std::string& reduction, int64_t ignore_index) {
  nn::Reduction red = nn::parse_reduction(reduction, "nll_loss");
  NllShape sh = check_nll(self, target, weight);
  Tensor x = nn::contig(self);
  Tensor t = nn::contig(target, ScalarType::Int64);
  Tensor w = weight ? nn::contig(weight, self->dtype()) : Tensor();
  const int64_t count = sh.n * sh.s;
  Tensor out = ember::empty(red == nn::Reduction::None ? target->sizes() : DimVector{},
                            self->dtype(), self->device());
  EMBER_DISPATCH_FLOAT(self->dtype(), "nll_loss", [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    const T* pw = w ? w->data_as<T>() : nullptr;
    const int64_t* pt = t->data_as<int64_t>();
    T* po = out->data_as<T>();
    auto term = [&](int64_t i, int64_t k) -> double {  // -w[k] * x[n, k, s]
      const int64_t n = i / sh.s, s = i % sh.s;
      double v = static_cast<double>(px[(n * sh.c + k) * sh.s + s]);
      return -(pw ? static_cast<double>(pw[k]) : 1.0) * v;
    };
    if (red == nn::Reduction::None) {
      parallel_for(0, count, kPointwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          int64_t k = class_at(pt, i, sh.c, ignore_index);
          po[i] = static_cast<T>(k < 0 ? 0.0 : term(i, k));
        }
      });
      return;
    }
    const auto [acc, tw] = block_sum(count, 1, [&](int64_t i) -> std::pair<double, double> {
      const int64_t k = class_at(pt, i, sh.c, ignore_index);
      if (k < 0) return {0.0, 0.0};
      return {term(i, k), pw ? static_cast<double>(pw[k]) : 1.0};
    });
    // mean over no (weighted) targets is 0 / 0 = nan, as in PyTorch.
    po[0] = static_cast<T>(red == nn::Reduction::Mean ? acc / tw : acc);
  });
  return out;
}

Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                         const Tensor& weight, const std::string& reduction, int64_t ignore_index) {
  nn::Reduction red = nn::parse_reduction(reduction, "nll_loss_backward");
  NllShape sh = check_nll(self, target, weight);
  Tensor t = nn::contig(target, ScalarType::Int64);
  Tensor w = weight ? nn::contig(weight, self->dtype()) : Tensor();
  Tensor g = nn::contig(grad_output, self->dtype());
  const int64_t count = sh.n * sh.s;
  nn::check_loss_grad_output("nll_loss_backward", g, target, red);
  Tensor gi = ember::empty(self->sizes(), self->dtype(), self->device());
  const int64_t* pt = t->data_as<int64_t>();
  const double tw =
      red == nn::Reduction::Mean ? total_weight(pt, count, w, sh.c, ignore_index) : 1.0;
  EMBER_DISPATCH_FLOAT(self->dtype(), "nll_loss_backward", [&] {
    using T = scalar_t;
    T* pg = gi->data_as<T>();
    const T* pw = w ? w->data_as<T>() : nullptr;
    const T* pgo = g->data_as<T>();
    const double scalar_g = red == nn::Reduction::None ? 0.0 : static_cast<double>(pgo[0]) / tw;
    // Over batch entries: zero each (C, S) slab, then set its target entries.
    const int64_t slab = sh.c * sh.s;
    parallel_for(0, sh.n, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(slab, 1)),
                 [&](int64_t b, int64_t e) {
                   std::fill(pg + b * slab, pg + e * slab, T(0));
                   for (int64_t i = b * sh.s; i < e * sh.s; ++i) {
                     const int64_t k = class_at(pt, i, sh.c, ignore_index);
                     if (k < 0) continue;
                     const int64_t n = i / sh.s, s = i % sh.s;
                     const double gv =
                         red == nn::Reduction::None ? static_cast<double>(pgo[i]) : scalar_g;
                     pg[(n * sh.c + k) * sh.s + s] =
                         static_cast<T>(-(pw ? static_cast<double>(pw[k]) : 1.0) * gv);
                   }
                 });
  });
  return gi;
}

// ---- fused cross entropy over class indices -------------------------------------------------
//
// Per sample i with target k (skipped when k == ignore_index), lse = log(sum_c exp(x_c)),
// eps = label_smoothing, w the class weights (1 without), W = sum_c w_c:
//   loss_i = (1 - eps) w_k (lse - x_k) + eps / C (W lse - sum_c w_c x_c)
//   d loss_i / d x_c = a_i softmax(x)_c - eps / C w_c - (1 - eps) w_k [c == k],
//   a_i = (1 - eps) w_k + eps W / C.
// 'mean' divides by the summed w_k of the kept samples (nan when there are none, as PyTorch).

namespace {

struct CeSetup {
  NllShape sh;
  nn::Reduction red;
  Tensor x, t, w;
};

using nn::ce_lse_dtype;

CeSetup ce_setup(const char* op, const Tensor& self, const Tensor& target, const Tensor& weight,
                 const std::string& reduction, double label_smoothing) {
  CeSetup c;
  c.red = nn::parse_reduction(reduction, op);
  nn::check_label_smoothing(op, label_smoothing);
  c.sh = check_nll(self, target, weight, op);
  c.x = nn::contig(self);
  c.t = nn::contig(target, ScalarType::Int64);
  c.w = weight ? nn::contig(weight, self->dtype()) : Tensor();
  return c;
}

// Strided view of one sample's C logits: x[(n * C + c) * S + s].
template <class T>
struct CeRow {
  const T* p;
  int64_t stride;
  T operator[](int64_t c) const { return p[c * stride]; }
};

// lse of one sample (as double); NaN when the row holds a NaN.
template <class T>
double ce_lse(const CeRow<T>& r, int64_t C) {
  if constexpr (std::is_same_v<T, float>)
    if (r.stride == 1) {
      return nn::vec::logsumexp(r.p, C);  // max + log(sum) in double, vectorized
    }
  using A = opmath_t<T>;
  A mx = -std::numeric_limits<A>::infinity();
  bool nan = false;
  for (int64_t c = 0; c < C; ++c) {
    const A v = static_cast<A>(r[c]);
    nan |= v != v;
    mx = v > mx ? v : mx;
  }
  if (nan) return std::numeric_limits<double>::quiet_NaN();
  if (mx == -std::numeric_limits<A>::infinity()) return -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (int64_t c = 0; c < C; ++c) sum += static_cast<double>(std::exp(static_cast<A>(r[c]) - mx));
  return static_cast<double>(mx) + std::log(sum);
}

// sum_c w_c x_c (w null: sum_c x_c).
template <class T>
double ce_wsum(const CeRow<T>& r, const T* w, int64_t C) {
  if constexpr (std::is_same_v<T, float>)
    if (r.stride == 1) return w ? nn::vec::dot(r.p, w, C) : nn::vec::sum(r.p, C);
  double acc = 0;
  for (int64_t c = 0; c < C; ++c)
    acc += static_cast<double>(r[c]) * (w ? static_cast<double>(w[c]) : 1.0);
  return acc;
}

}  // namespace

std::tuple<Tensor, Tensor> _cross_entropy_loss(const Tensor& self, const Tensor& target,
                                               const Tensor& weight, const std::string& reduction,
                                               int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  CeSetup cs = ce_setup(op, self, target, weight, reduction, label_smoothing);
  const NllShape sh = cs.sh;
  const int64_t C = sh.c, count = sh.n * sh.s;
  const double eps = label_smoothing;
  Tensor out = ember::empty(cs.red == nn::Reduction::None ? target->sizes() : DimVector{},
                            self->dtype(), self->device());
  Tensor lse_out = ember::empty(target->sizes(), ce_lse_dtype(self->dtype()), self->device());
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    A* pl = lse_out->data_as<A>();
    const T* px = cs.x->data_as<T>();
    const T* pw = cs.w ? cs.w->data_as<T>() : nullptr;
    const int64_t* pt = cs.t->data_as<int64_t>();
    double W = static_cast<double>(C);
    if (pw) {
      W = 0;
      for (int64_t c = 0; c < C; ++c) W += static_cast<double>(pw[c]);
    }
    // (loss_i, w_k) of sample i; (0, 0) when ignored.
    auto sample = [&](int64_t i) -> std::pair<double, double> {
      const int64_t k = class_at(pt, i, C, ignore_index, op);
      if (k < 0) {
        pl[i] = A(0);
        return {0.0, 0.0};
      }
      const int64_t n = i / sh.s, s = i % sh.s;
      const CeRow<T> r{px + n * C * sh.s + s, sh.s};
      const double lse = ce_lse(r, C);
      pl[i] = static_cast<A>(lse);
      const double wk = pw ? static_cast<double>(pw[k]) : 1.0;
      double loss = wk * (lse - static_cast<double>(r[k]));
      if (eps > 0) {
        loss = (1.0 - eps) * loss + eps / static_cast<double>(C) * (W * lse - ce_wsum(r, pw, C));
      }
      return {loss, wk};
    };
    T* po = out->data_as<T>();
    if (cs.red == nn::Reduction::None) {
      parallel_for(0, count, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(C, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t i = b; i < e; ++i) po[i] = static_cast<T>(sample(i).first);
                   });
      return;
    }
    const auto [acc, tw] = block_sum(count, C, sample);
    po[0] = static_cast<T>(cs.red == nn::Reduction::Mean ? acc / tw : acc);
  });
  return {out, lse_out};
}

Tensor _cross_entropy_loss_backward(const Tensor& grad_output, const Tensor& self,
                                    const Tensor& target, const Tensor& weight, const Tensor& lse,
                                    const std::string& reduction, int64_t ignore_index,
                                    double label_smoothing) {
  const char* op = "cross_entropy_backward";
  CeSetup cs = ce_setup(op, self, target, weight, reduction, label_smoothing);
  nn::check_ce_lse(op, lse, target);
  Tensor l = nn::contig(lse, ce_lse_dtype(self->dtype()));
  const NllShape sh = cs.sh;
  const int64_t C = sh.c, count = sh.n * sh.s;
  const double eps = label_smoothing;
  Tensor g = nn::contig(grad_output, self->dtype());
  nn::check_loss_grad_output(op, g, target, cs.red);
  Tensor gi = ember::empty(self->sizes(), self->dtype(), self->device());
  const int64_t* pt = cs.t->data_as<int64_t>();
  const double tw =
      cs.red == nn::Reduction::Mean ? total_weight(pt, count, cs.w, C, ignore_index) : 1.0;
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = cs.x->data_as<T>();
    const T* pw = cs.w ? cs.w->data_as<T>() : nullptr;
    const T* pgo = g->data_as<T>();
    const A* pl = l->data_as<A>();
    T* pg = gi->data_as<T>();
    double W = static_cast<double>(C);
    if (pw) {
      W = 0;
      for (int64_t c = 0; c < C; ++c) W += static_cast<double>(pw[c]);
    }
    const double scalar_g = cs.red == nn::Reduction::None ? 0.0 : static_cast<double>(pgo[0]) / tw;
    // Samples of one batch entry n are its S columns: a slab of C * S elements.
    const int64_t slab = C * sh.s;
    parallel_for(
        0, sh.n, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(slab, 1)),
        [&](int64_t b, int64_t e) {
          for (int64_t n = b; n < e; ++n)
            for (int64_t s = 0; s < sh.s; ++s) {
              const int64_t i = n * sh.s + s;
              const int64_t k = class_at(pt, i, C, ignore_index, op);
              T* o = pg + n * slab + s;
              if (k < 0) {
                for (int64_t c = 0; c < C; ++c) o[c * sh.s] = T(0);
                continue;
              }
              const CeRow<T> r{px + n * slab + s, sh.s};
              const double lse = static_cast<double>(pl[i]);
              const double sc =
                  cs.red == nn::Reduction::None ? static_cast<double>(pgo[i]) : scalar_g;
              const double wk = pw ? static_cast<double>(pw[k]) : 1.0;
              const double a = sc * ((1.0 - eps) * wk + eps * W / static_cast<double>(C));
              const double bw = sc * eps / static_cast<double>(C);
              if constexpr (std::is_same_v<T, float>) {
                if (sh.s == 1) {
                  // T is float here; the casts only let the branch compile for other types.
                  nn::vec::ce_grad_row(reinterpret_cast<const float*>(r.p), static_cast<float>(lse),
                                       static_cast<float>(a), reinterpret_cast<const float*>(pw),
                                       static_cast<float>(bw), reinterpret_cast<float*>(o), C);
                  o[k] = static_cast<T>(static_cast<double>(o[k]) - sc * (1.0 - eps) * wk);
                  continue;
                }
              }
              const A al = static_cast<A>(lse), aa = static_cast<A>(a), ab = static_cast<A>(bw);
              for (int64_t c = 0; c < C; ++c) {
                const A wc = pw ? static_cast<A>(pw[c]) : A(1);
                o[c * sh.s] = static_cast<T>(aa * std::exp(static_cast<A>(r[c]) - al) - ab * wc);
              }
              o[k * sh.s] =
                  static_cast<T>(static_cast<double>(o[k * sh.s]) - sc * (1.0 - eps) * wk);
            }
        });
  });
  return gi;
}

}  // namespace cpu
}  // namespace ember
