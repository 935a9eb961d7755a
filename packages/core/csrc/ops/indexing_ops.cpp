// Composite indexing ops of ops/indexing.yaml (entries with `Composite` dispatch): out-of-place
// forms over a copy and the in-place op, and ops that are another indexing op under a second
// name. They run on every device; the indexing kernels are in kernels/cpu/indexing_ops.cpp.
#include <optional>
#include <vector>

#include "kernels/iterator.h"  // broadcast_shapes
#include "ops.h"

namespace ember {
namespace composite {

Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index,
                  const TensorOrScalar& value) {
  return ops::index_fill_(ops::clone(self), dim, index, value);
}

Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  return ops::index_put_(ops::clone(self), indices, values, accumulate);
}

Tensor masked_fill(const Tensor& self, const Tensor& mask, const TensorOrScalar& value) {
  DimVector shape = broadcast_shapes(self->sizes(), mask->sizes(), "masked_fill()");
  Tensor r = empty(shape, self->dtype(), self->device());
  dispatch::_copy_from(self, r, false);
  return ops::masked_fill_(r, mask, value);
}

Tensor masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source) {
  DimVector shape = broadcast_shapes(self->sizes(), mask->sizes(), "masked_scatter()");
  Tensor r = empty(shape, self->dtype(), self->device());
  dispatch::_copy_from(self, r, false);
  return ops::masked_scatter_(r, mask, source);
}

Tensor argwhere(const Tensor& self) { return ops::nonzero(self, Tensor()); }

Tensor bucketize(const TensorOrScalar& self, const Tensor& boundaries, bool out_int32, bool right,
                 const Tensor& out) {
  EMBER_CHECK(boundaries->dim() == 1,
              "bucketize(): boundaries tensor must be 1 dimension, but got dim(", boundaries->dim(),
              ")");
  return ops::searchsorted(boundaries, self, out_int32, right, std::nullopt, Tensor(), out);
}

}  // namespace composite
}  // namespace ember
