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
  EMBER_CHECK(can_cast(r->dtype(), out->dtype()), op, ": result type ", dtype_name(r->dtype()),
              " can't be cast to the desired output type ", dtype_name(out->dtype()));
  if (out->sizes() != r->sizes())
    EMBER_CHECK(out != self, op, "_: output with shape ", shape_str(out->sizes()),
                " doesn't match the shape ", shape_str(r->sizes()));
}

}  // namespace ember
