#include "kernels/triangle_rules.h"

#include <algorithm>

#include "core/error.h"

namespace ember {

void check_triangle_input(const Tensor& self, const char* op) {
  EMBER_CHECK(self->dim() >= 2, op, ": input tensor must have at least 2 dimensions (got shape ",
              shape_str(self->sizes()), ")");
}

int64_t clamp_diagonal(int64_t d) {
  return std::clamp<int64_t>(d, -(int64_t(1) << 48), int64_t(1) << 48);
}

void check_triangle_out(const Tensor& r, const Tensor& out, const Tensor& self, const char* op) {
  // the input's dtype exactly, as PyTorch (which casts no tril / triu result)
  EMBER_CHECK(r->dtype() == out->dtype(), op, ": expected the out= tensor to have dtype ",
              dtype_name(r->dtype()), " (the input's), but got ", dtype_name(out->dtype()));
  if (out->sizes() != r->sizes())
    EMBER_CHECK(out != self, op, "_: output with shape ", shape_str(out->sizes()),
                " doesn't match the shape ", shape_str(r->sizes()));
}

}  // namespace ember
