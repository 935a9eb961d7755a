// Copies, fills, conversions and basic factories (ops/tensor.yaml): composites over empty() and
// the device's `_copy_from` kernel, so every device that registers those gets them. Copies
// between devices are built here from the backends' byte copies (core/backend.h).
#include <algorithm>
#include <cstring>

#include "core/backend.h"
#include "core/storageless.h"
#include "kernels/iterator.h"
#include "kernels/memory_format.h"
#include "ops.h"

namespace ember {
namespace composite {

namespace {
// dst <- src, same device: the device's copy kernel.
void copy_same_device(const Tensor& dst, const Tensor& src) {
  dispatch::_copy_from(src, dst, false);
}

bool dense_as(const Tensor& t, const Tensor& like) {
  return t->is_contiguous() && t->sizes() == like->sizes() && t->dtype() == like->dtype();
}

// dst <- src across devices. The byte copies need dense memory of one dtype on both sides, so
// broadcasting, dtype conversion and strided layouts are done by a copy kernel on one side.
void copy_between_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Device dd = dst->device(), sd = src->device();
  if (sd.is_meta()) EMBER_FAIL(NotImplemented, "Cannot copy out of meta tensor; no data!");
  EMBER_CHECK(broadcast_shapes(dst->sizes(), src->sizes(), "copy_") == dst->sizes(),
              "copy_: source of shape ", shape_str(src->sizes()),
              " cannot be broadcast to the destination shape ", shape_str(dst->sizes()));
  if (dd.is_meta() || dst->numel() == 0) {
    dst->bump_version();
    return;
  }
  if (!sd.is_cpu() && !dd.is_cpu()) {
    // Between two non-CPU devices (or two devices of one type): through host memory.
    Tensor host = ember::empty(src->sizes(), src->dtype(), cpu_device());
    copy_between_devices(host, src, false);
    copy_between_devices(dst, host, false);
    return;
  }
  if (sd.is_cpu()) {
    const DeviceHooks& hooks = device_hooks(dd.type);
    // The host side in dst's dtype and shape, dense: src itself when it already is (then a
    // non_blocking copy reads the caller's, possibly pinned, memory).
    Tensor host = src;
    if (!dense_as(src, dst)) {
      host = ember::empty(dst->sizes(), dst->dtype(), cpu_device());
      copy_same_device(host, src);
      non_blocking = false;  // the temporary dies on return
    }
    Tensor dev = dst->is_contiguous() ? dst : ember::empty(dst->sizes(), dst->dtype(), dd);
    hooks.copy_from_host(dev->data(), host->data(), host->numel() * host->itemsize(), dd.index,
                         non_blocking && dev == dst);
    if (dev != dst) copy_same_device(dst, dev);
    dst->bump_version();
    return;
  }
  // Device -> CPU.
  const DeviceHooks& hooks = device_hooks(sd.type);
  Tensor dev = src->is_contiguous() ? src : ember::empty(src->sizes(), src->dtype(), sd);
  if (dev != src) copy_same_device(dev, src);
  const bool direct = dense_as(dst, dev);
  Tensor host = direct ? dst : ember::empty(src->sizes(), src->dtype(), cpu_device());
  hooks.copy_to_host(host->data(), dev->data(), dev->numel() * dev->itemsize(), sd.index,
                     non_blocking && direct && dev == src);
  if (!direct) copy_same_device(dst, host);
  dst->bump_version();
}
}  // namespace

// PyTorch's clone (preserve_format): the copy keeps self's layout (a transposed or
// channels-last tensor clones as one), in one pass.
Tensor clone(const Tensor& self) {
  Tensor out =
      ember::empty_strided(self->sizes(), preserved_strides(self), self->dtype(), self->device());
  copy_same_device(out, self);
  return fresh(out);
}

Tensor contiguous(const Tensor& self) {
  if (self->is_contiguous()) return self;
  Tensor out = ember::empty(self->sizes(), self->dtype(), self->device());
  copy_same_device(out, self);
  return fresh(out);
}

namespace {
// copy_ without its refusal of an expanded destination (fill_ writes one value everywhere).
void copy_values(const Tensor& self, const Tensor& src, bool non_blocking) {
  if (is_storageless(*src) || is_storageless(*self)) fail_storageless("copy_");
  const Device dd = self->device(), sd = src->device();
  // x[1:].copy_(x[:-1]) would read elements it already overwrote (a memcpy with overlap on a
  // GPU): refused as torch does. A one-element source is read once, so it may alias.
  if (dd == sd && src->numel() > 1) check_no_partial_overlap(self, src, "copy_");
  if (dd == sd || (sd.is_cpu() && src->dim() == 0 && !dd.is_meta())) {
    dispatch::_copy_from(src, self, non_blocking);
  } else {
    copy_between_devices(self, src, non_blocking);
  }
}
}  // namespace

Tensor copy_(const Tensor& self, const Tensor& src, bool non_blocking) {
  // x.copy_(x) writes nothing new (torch returns at once, even for an expanded x).
  if (self.get() == src.get() ||
      (self->device() == src->device() && self->storage() == src->storage() &&
       self->dtype() == src->dtype() && self->storage_offset() == src->storage_offset() &&
       self->sizes() == src->sizes() && self->strides() == src->strides()))
    return self;
  // An expanded destination is refused whatever the source (one value too, as torch).
  check_no_internal_overlap(self, "copy_");
  copy_values(self, src, non_blocking);
  return self;
}

Tensor to_copy(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device,
               bool non_blocking) {
  const ScalarType dt = dtype.value_or(self->dtype());
  const Device dev = device.value_or(self->device());
  // A dense input keeps its layout (PyTorch's preserve_format); anything else becomes contiguous.
  Tensor out;
  if (self->is_contiguous() || self->numel() <= 1) {
    out = ember::empty(self->sizes(), dt, dev);
  } else {
    out = ember::empty_like_dense(self, dt, dev);
  }
  copy_(out, self, non_blocking);
  return fresh(out);
}

Tensor fill_(const Tensor& self, const TensorOrScalar& value) {
  if (value.is_tensor()) {
    EMBER_CHECK(value.tensor->dim() == 0,
                "fill_: only supports 0-dimension value tensor but got tensor with ",
                value.tensor->dim(), " dimensions");
    copy_values(self, value.tensor, false);
    return self;
  }
  check_scalar_fits(value.scalar, self->dtype(), "fill_");
  // The value is a 0-d CPU tensor, which every device's copy kernel takes as a number.
  Tensor v = ember::empty(DimVector{}, self->dtype(), cpu_device());
  store_scalar(value.scalar, self->dtype(), v->data());
  copy_values(self, v, false);
  return self;
}

Tensor zero_(const Tensor& self) { return fill_(self, Scalar(int64_t(0))); }

namespace {
// A factory's fill of its fresh tensor: a small CPU one gets the value stored once and repeated
// (a zero by memset), without the TensorIterator setup, which costs as much as the rest of a
// zeros(4, 4). Larger ones take fill_ (parallel).
Tensor fill_fresh(const Tensor& t, const Scalar& value) {
  const int64_t bytes = t->numel() * static_cast<int64_t>(t->itemsize());
  if (!t->device().is_cpu() || !t->is_contiguous() || bytes == 0 || bytes > (32 << 10) ||
      !t->storage() || !t->storage()->data.get())
    return fill_(t, value);
  check_scalar_fits(value, t->dtype(), "fill_");
  char* p = t->data();
  const size_t item = t->itemsize(), n = static_cast<size_t>(bytes);
  store_scalar(value, t->dtype(), p);
  if (std::all_of(p, p + item, [](char c) { return c == 0; })) {
    std::memset(p, 0, n);
    return t;
  }
  for (size_t done = item; done < n; done *= 2) std::memcpy(p + done, p, std::min(done, n - done));
  return t;
}
}  // namespace

// Tensor.to(dtype): PyTorch's _to_copy, so a dense input keeps its layout and a dispatch mode
// sees the op it knows.
Tensor to_dtype(const Tensor& self, ScalarType dtype, bool copy) {
  if (self->dtype() == dtype && !copy) return self;
  return dispatch::_to_copy(self, dtype, std::nullopt, false);
}

Tensor empty(const DimVector& size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ember::empty(size, dtype.value_or(default_dtype()), device.value_or(default_device()));
}

Tensor zeros(const DimVector& size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return fresh(fill_fresh(empty(size, dtype, device), Scalar(int64_t(0))));
}

Tensor ones(const DimVector& size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return fresh(fill_fresh(empty(size, dtype, device), Scalar(int64_t(1))));
}

Tensor full(const DimVector& size, const Scalar& value, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  // An int infers int64 even from 2**63 up (which then overflows, as in PyTorch).
  const ScalarType inferred = value.is_unsigned() ? ScalarType::Int64 : value.dtype();
  return fresh(fill_fresh(empty(size, dtype.value_or(inferred), device), value));
}

Tensor empty_strided(const DimVector& size, const DimVector& stride,
                     std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ember::empty_strided(size, stride, dtype.value_or(default_dtype()),
                              device.value_or(default_device()));
}

Tensor empty_like(const Tensor& self, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  return ember::empty(self->sizes(), dtype.value_or(self->dtype()),
                      device.value_or(self->device()));
}
Tensor zeros_like(const Tensor& self, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  return fresh(fill_fresh(empty_like(self, dtype, device), Scalar(int64_t(0))));
}
Tensor ones_like(const Tensor& self, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return fresh(fill_fresh(empty_like(self, dtype, device), Scalar(int64_t(1))));
}
Tensor full_like(const Tensor& self, const Scalar& value, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return fresh(fill_fresh(empty_like(self, dtype, device), value));
}

Tensor new_empty(const Tensor& self, const DimVector& size, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return ember::empty(size, dtype.value_or(self->dtype()), device.value_or(self->device()));
}
Tensor new_zeros(const Tensor& self, const DimVector& size, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return fresh(fill_fresh(new_empty(self, size, dtype, device), Scalar(int64_t(0))));
}
Tensor new_ones(const Tensor& self, const DimVector& size, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  return fresh(fill_fresh(new_empty(self, size, dtype, device), Scalar(int64_t(1))));
}
Tensor new_full(const Tensor& self, const DimVector& size, const Scalar& value,
                std::optional<ScalarType> dtype, std::optional<Device> device) {
  return fresh(fill_fresh(new_empty(self, size, dtype, device), value));
}

}  // namespace composite
}  // namespace ember
