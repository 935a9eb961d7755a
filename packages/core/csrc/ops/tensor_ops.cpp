// Copies, fills, conversions and basic factories (ops/tensor.yaml): composites over empty() and
// copy_into(), so every device that has those gets them.
#include "kernels/iterator.h"
#include "ops.h"

namespace ember {
namespace composite {

Tensor clone(const Tensor& self) {
  Tensor out = ember::empty(self->sizes(), self->dtype(), self->device());
  copy_into(out, self);
  return fresh(out);
}

Tensor contiguous(const Tensor& self) { return self->is_contiguous() ? self : clone(self); }

Tensor copy_(const Tensor& self, const Tensor& src) {
  copy_into(self, src);
  return self;
}

Tensor fill_(const Tensor& self, const TensorOrScalar& value) {
  if (value.is_tensor()) {
    EMBER_CHECK(value.tensor->dim() == 0,
                "fill_: only supports 0-dimension value tensor but got tensor with ",
                value.tensor->dim(), " dimensions");
    copy_into(self, value.tensor);
    return self;
  }
  check_scalar_fits(value.scalar, self->dtype(), "fill_");
  Tensor v = ember::empty(DimVector{}, self->dtype(), self->device());
  store_scalar(value.scalar, self->dtype(), v->data());
  copy_into(self, v);
  return self;
}

Tensor zero_(const Tensor& self) { return fill_(self, Scalar(int64_t(0))); }

Tensor to_dtype(const Tensor& self, ScalarType dtype, bool copy) {
  if (self->dtype() == dtype && !copy) return self;
  Tensor out = ember::empty(self->sizes(), dtype, self->device());
  copy_into(out, self);
  return fresh(out);
}

Tensor empty(const DimVector& size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ember::empty(size, dtype.value_or(default_dtype()), device.value_or(cpu_device()));
}

Tensor zeros(const DimVector& size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return fresh(zero_(empty(size, dtype, device)));
}

Tensor ones(const DimVector& size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return fresh(fill_(empty(size, dtype, device), Scalar(int64_t(1))));
}

Tensor full(const DimVector& size, const Scalar& value, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  return fresh(fill_(empty(size, dtype.value_or(value.dtype()), device), value));
}

Tensor empty_strided(const DimVector& size, const DimVector& stride,
                     std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ember::empty_strided(size, stride, dtype.value_or(default_dtype()),
                              device.value_or(cpu_device()));
}

Tensor empty_like(const Tensor& self, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  return ember::empty(self->sizes(), dtype.value_or(self->dtype()),
                      device.value_or(self->device()));
}
Tensor zeros_like(const Tensor& self, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  return fresh(zero_(empty_like(self, dtype, device)));
}
Tensor ones_like(const Tensor& self, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return fresh(fill_(empty_like(self, dtype, device), Scalar(int64_t(1))));
}
Tensor full_like(const Tensor& self, const Scalar& value, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return fresh(fill_(empty_like(self, dtype, device), value));
}

Tensor new_empty(const Tensor& self, const DimVector& size, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return ember::empty(size, dtype.value_or(self->dtype()), device.value_or(self->device()));
}
Tensor new_zeros(const Tensor& self, const DimVector& size, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return fresh(zero_(new_empty(self, size, dtype, device)));
}
Tensor new_ones(const Tensor& self, const DimVector& size, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  return fresh(fill_(new_empty(self, size, dtype, device), Scalar(int64_t(1))));
}
Tensor new_full(const Tensor& self, const DimVector& size, const Scalar& value,
                std::optional<ScalarType> dtype, std::optional<Device> device) {
  return fresh(fill_(new_empty(self, size, dtype, device), value));
}

}  // namespace composite
}  // namespace ember
