#include "kernels/sort_rules.h"

#include <complex>
#include <cstdint>
#include <limits>
#include <optional>

#include "core/error.h"
#include "kernels/reduce_rules.h"

namespace ember {

DimVector sizes_with_dim(const Tensor& self, int64_t d, int64_t n) {
  DimVector s = self->sizes();
  if (self->dim() > 0) s[d] = n;
  return s;
}

int64_t topk_dim(const Tensor& self, int64_t k, int64_t dim) {
  const int64_t d = wrap_dim(dim, self->dim(), "topk");
  const int64_t n = self->dim() == 0 ? 1 : self->size(d);
  EMBER_CHECK(k >= 0 && k <= n, "topk(): selected index k out of range (k = ", k, ", size of dim ",
              d, " = ", n, ")");
  return d;
}

int64_t selection_dim(const Tensor& self, int64_t dim, const char* op) {
  const int64_t d = wrap_dim(dim, self->dim(), op);
  auto mask = reduce::dim_mask(std::optional<int64_t>(dim), self->dim(), op);
  reduce::check_nonempty(self, mask, true, op);
  return d;
}

void check_selection_dtype(const Tensor& self, const char* op) {
  EMBER_CHECK_KIND(self->dtype() != ScalarType::Bool, DtypeNotImplemented, op,
                   "(): not implemented for dtype bool");
}

Scalar empty_median_value(ScalarType dtype) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (dtype) {
    case ScalarType::Bool:
      return Scalar(true);
    case ScalarType::Int32:
      return Scalar(static_cast<int64_t>(std::numeric_limits<int32_t>::min()));
    case ScalarType::Int64:
      return Scalar(std::numeric_limits<int64_t>::min());
    case ScalarType::UInt8:
    case ScalarType::Int8:
    case ScalarType::Int16:
      return Scalar(static_cast<int64_t>(0));
    case ScalarType::Complex64:
    case ScalarType::Complex128:
      return Scalar(std::complex<double>(nan, 0.0));
    default:
      return Scalar(nan);
  }
}

int64_t kthvalue_dim(const Tensor& self, int64_t k, int64_t dim) {
  const int64_t d = selection_dim(self, dim, "kthvalue");
  const int64_t n = self->dim() == 0 ? 1 : self->size(d);
  EMBER_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", d,
              " (k = ", k, ", size ", n, ")");
  check_selection_dtype(self, "kthvalue");
  return d;
}

DimVector selection_shape(const Tensor& self, int64_t d, bool keepdim) {
  DimVector shape;
  for (int64_t i = 0; i < self->dim(); ++i) {
    if (i != d)
      shape.push_back(self->size(i));
    else if (keepdim)
      shape.push_back(1);
  }
  return shape;
}

}  // namespace ember
