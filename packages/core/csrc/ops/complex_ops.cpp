// Complex views (ops/complex.yaml): a complex element is two adjacent reals, so view_as_real,
// real and imag only rescale the strides and offset over the same storage.
#include "ops.h"

namespace ember {
namespace composite {

Tensor view_as_real(const Tensor& self) {
  EMBER_CHECK(is_complex(self->dtype()), "view_as_real is only supported for complex tensors (got ",
              dtype_name(self->dtype()), ")");
  DimVector sizes = self->sizes(), strides = self->strides();
  for (int64_t& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return make_view(self, std::move(sizes), std::move(strides), self->storage_offset() * 2,
                   to_real(self->dtype()));
}

Tensor view_as_complex(const Tensor& self) {
  const ScalarType dt = self->dtype();
  EMBER_CHECK(dt == ScalarType::Float32 || dt == ScalarType::Float64,
              "view_as_complex is only supported for float32 and float64 tensors, but got a tensor "
              "of scalar type: ",
              dtype_name(dt));
  EMBER_CHECK(self->dim() > 0 && self->sizes().back() == 2,
              "Tensor must have a last dimension of size 2");
  EMBER_CHECK(self->strides().back() == 1, "Tensor must have a last dimension with stride 1");
  DimVector sizes(self->sizes().begin(), self->sizes().end() - 1);
  DimVector strides(self->strides().begin(), self->strides().end() - 1);
  for (int64_t& s : strides) {
    EMBER_CHECK(s % 2 == 0, "Tensor must have a stride divisible by 2 for all but last dimension");
    s /= 2;
  }
  EMBER_CHECK(self->storage_offset() % 2 == 0, "Tensor must have a storage_offset divisible by 2");
  return make_view(self, std::move(sizes), std::move(strides), self->storage_offset() / 2,
                   to_complex(dt));
}

namespace {
Tensor part(const Tensor& self, int64_t which) {
  DimVector strides = self->strides();
  for (int64_t& s : strides) s *= 2;
  return make_view(self, self->sizes(), std::move(strides), self->storage_offset() * 2 + which,
                   to_real(self->dtype()));
}
}  // namespace

Tensor real(const Tensor& self) {
  if (!is_complex(self->dtype()))
    return make_view(self, self->sizes(), self->strides(), self->storage_offset());
  return part(self, 0);
}

Tensor imag(const Tensor& self) {
  EMBER_CHECK(is_complex(self->dtype()),
              "imag is not implemented for tensors with non-complex dtypes.");
  return part(self, 1);
}

// ember has no lazy conjugate bit: conj() of a complex tensor is a new tensor.
Tensor conj(const Tensor& self) {
  if (!is_complex(self->dtype())) return self;
  return ops::conj_physical(self, Tensor());
}

}  // namespace composite
}  // namespace ember
