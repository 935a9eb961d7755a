#include "kernels/loss_rules.h"

namespace ember {
namespace nn {

NllShape check_nll(const Tensor& self, const Tensor& target, const Tensor& weight, const char* op) {
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

void check_loss_grad_output(const char* op, const Tensor& g, const Tensor& target, Reduction red) {
  if (red == Reduction::None) {
    EMBER_CHECK(g->sizes() == target->sizes(), op, ": grad_output of shape ", shape_str(g->sizes()),
                " doesn't match the loss shape ", shape_str(target->sizes()));
  } else {
    EMBER_CHECK(g->numel() == 1, op, ": expected a one-element grad_output, got ",
                shape_str(g->sizes()));
  }
}

}  // namespace nn
}  // namespace ember
