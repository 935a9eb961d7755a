// CPU kernels of nll_loss and its backward (cross_entropy is log_softmax + nll_loss; the other
// losses are composites in ops/nn_ops.cpp).
#include <cmath>

#include "core/dispatch.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// self (C), (N, C) or (N, C, d1, ...) seen as (N, C, S); target (N, S) of class indices.
struct NllShape {
  int64_t n = 1, c = 1, s = 1;
};

NllShape check_nll(const Tensor& self, const Tensor& target, const Tensor& weight) {
  const char* op = "nll_loss";
  EMBER_CHECK_KIND(is_floating(self->dtype()), Type, op,
                   ": expected floating-point log-probabilities, got ", dtype_name(self->dtype()));
  EMBER_CHECK_KIND(is_integral(target->dtype(), false), Type, op,
                   ": expected target to hold class indices (an integer dtype), got ",
                   dtype_name(target->dtype()),
                   " (class probabilities go to cross_entropy with a floating target)");
  NllShape sh;
  const int64_t d = self->dim();
  EMBER_CHECK(d >= 1, op, ": expected input of shape (C), (N, C) or (N, C, d1, ...), got ",
              shape_str(self->sizes()));
  DimVector expected;
  if (d == 1) {
    sh.c = self->size(0);
  } else {
    sh.n = self->size(0);
    sh.c = self->size(1);
    expected.push_back(sh.n);
    for (int64_t i = 2; i < d; ++i) {
      expected.push_back(self->size(i));
      sh.s *= self->size(i);
    }
  }
  EMBER_CHECK(target->sizes() == expected, op, ": expected target of shape ", shape_str(expected),
              " for input of shape ", shape_str(self->sizes()), ", got ",
              shape_str(target->sizes()));
  if (weight) {
    EMBER_CHECK(weight->dim() == 1 && weight->size(0) == sh.c, op,
                ": expected weight to be a 1-D tensor of ", sh.c, " elements (one per class), got ",
                shape_str(weight->sizes()));
  }
  return sh;
}

// Validated class index of target element i (or -1 for ignore_index).
inline int64_t class_at(const int64_t* t, int64_t i, int64_t c, int64_t ignore_index) {
  int64_t k = t[i];
  if (k == ignore_index) return -1;
  EMBER_CHECK_KIND(k >= 0 && k < c, Index, "nll_loss: target ", k, " is out of bounds (", c,
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
    double acc = 0, tw = 0;
    for (int64_t i = 0; i < count; ++i) {
      int64_t k = class_at(pt, i, sh.c, ignore_index);
      if (k < 0) continue;
      acc += term(i, k);
      tw += pw ? static_cast<double>(pw[k]) : 1.0;
    }
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
  if (red == nn::Reduction::None) {
    EMBER_CHECK(g->sizes() == target->sizes(), "nll_loss_backward: grad_output of shape ",
                shape_str(g->sizes()), " doesn't match the loss shape ",
                shape_str(target->sizes()));
  } else {
    EMBER_CHECK(g->numel() == 1, "nll_loss_backward: expected a one-element grad_output, got ",
                shape_str(g->sizes()));
  }
  Tensor gi = ember::empty(self->sizes(), self->dtype(), self->device());
  const int64_t* pt = t->data_as<int64_t>();
  const double tw =
      red == nn::Reduction::Mean ? total_weight(pt, count, w, sh.c, ignore_index) : 1.0;
  EMBER_DISPATCH_FLOAT(self->dtype(), "nll_loss_backward", [&] {
    using T = scalar_t;
    T* pg = gi->data_as<T>();
    std::fill(pg, pg + gi->numel(), T(0));
    const T* pw = w ? w->data_as<T>() : nullptr;
    const T* pgo = g->data_as<T>();
    const double scalar_g = red == nn::Reduction::None ? 0.0 : static_cast<double>(pgo[0]) / tw;
    for (int64_t i = 0; i < count; ++i) {
      int64_t k = class_at(pt, i, sh.c, ignore_index);
      if (k < 0) continue;
      const int64_t n = i / sh.s, s = i % sh.s;
      double gv = red == nn::Reduction::None ? static_cast<double>(pgo[i]) : scalar_g;
      pg[(n * sh.c + k) * sh.s + s] = static_cast<T>(-(pw ? static_cast<double>(pw[k]) : 1.0) * gv);
    }
  });
  return gi;
}

}  // namespace cpu
}  // namespace ember
