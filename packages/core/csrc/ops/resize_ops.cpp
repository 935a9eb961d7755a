#include "ops/resize_ops.h"

#include <algorithm>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "ops.h"
#include "ops/list_str.h"

namespace ember {
namespace {

// Negative sizes and element counts that overflow int64 are refused before anything changes.
void check_sizes(const DimVector& sizes, const char* op) {
  int64_t n = 1;  // the product of the sizes, 0 counted as 1 (the largest contiguous stride)
  for (int64_t s : sizes) {
    EMBER_CHECK(s >= 0, op, ": Trying to create tensor with negative dimension ", s, ": ",
                list_str(sizes));
    EMBER_CHECK(!__builtin_mul_overflow(n, std::max<int64_t>(s, 1), &n), op, ": a tensor of size ",
                list_str(sizes), " has too many elements (the count overflows int64)");
  }
}

// Bytes a tensor of `sizes`/`strides` from element `offset` needs (0 when it has no elements).
size_t needed_bytes(const DimVector& sizes, const DimVector& strides, int64_t offset,
                    int64_t itemsize, const char* op) {
  for (int64_t s : sizes)
    if (s == 0) return 0;
  int64_t last = offset;  // index of the last element
  bool overflow = false;
  for (int64_t d = 0; d < sizes.size(); ++d) {
    int64_t span = 0;
    overflow |= __builtin_mul_overflow(sizes[d] - 1, strides[d], &span);
    overflow |= __builtin_add_overflow(last, span, &last);
  }
  int64_t nbytes = 0;
  overflow |= __builtin_add_overflow(last, int64_t(1), &last);
  overflow |= __builtin_mul_overflow(last, itemsize, &nbytes);
  EMBER_CHECK(!overflow, op, ": sizes ", list_str(sizes), ", strides ", list_str(strides),
              ", storage offset ", offset, " and itemsize ", itemsize,
              " need a storage larger than int64 can count");
  return static_cast<size_t>(nbytes);
}

// Dense strides for sizes with the dims laid out in `order` (outermost first).
DimVector strides_in_order(const DimVector& sizes, std::initializer_list<int64_t> order) {
  DimVector strides(sizes.size(), 1);
  int64_t step = 1;
  for (auto it = std::rbegin(order); it != std::rend(order); ++it) {
    strides[*it] = step;
    step *= std::max<int64_t>(sizes[*it], 1);
  }
  return strides;
}

void check_writable(const Tensor& self) {
  if (self->is_inference() && !inference_mode_enabled()) fail_inference_update();
}

}  // namespace

void grow_storage(const Storage& storage, size_t nbytes) {
  if (nbytes <= storage->nbytes) return;
  EMBER_CHECK(storage->resizable, "Trying to resize storage that is not resizable");
  const Device device = storage->device();
  Tensor fresh = empty({static_cast<int64_t>(nbytes)}, ScalarType::UInt8, device);
  if (storage->nbytes > 0 && !device.is_meta()) {
    const DimVector old_size{static_cast<int64_t>(storage->nbytes)};
    auto old_bytes = std::make_shared<TensorImpl>(
        storage, ScalarType::UInt8, old_size, DimVector{1}, 0, std::make_shared<VersionCounter>());
    auto head = make_view(fresh, old_size, DimVector{1}, 0);
    dispatch::_copy_from(old_bytes, head, false);
  }
  storage->data = std::move(fresh->storage()->data);
  storage->nbytes = nbytes;
}

void shrink_storage(const Storage& storage, size_t nbytes) {
  if (nbytes >= storage->nbytes) return;
  EMBER_CHECK(storage->resizable, "Trying to resize storage that is not resizable");
  // Tensors on the storage keep their sizes (PyTorch lets them read past the new end, into freed
  // memory): the memory stays, only the size changes, so they read stale bytes instead.
  storage->nbytes = nbytes;
}

Tensor resize_(const Tensor& self, const DimVector& sizes, ResizeFormat format) {
  check_sizes(sizes, "resize_");
  check_writable(self);
  DimVector strides;
  switch (format) {
    case ResizeFormat::Keep:
      strides = sizes == self->sizes() ? self->strides() : contiguous_strides(sizes);
      break;
    case ResizeFormat::Contiguous:
      strides = contiguous_strides(sizes);
      break;
    case ResizeFormat::ChannelsLast:
      EMBER_CHECK(sizes.size() == 4, "resize_: required rank 4 tensor to use channels_last format");
      strides = strides_in_order(sizes, {0, 2, 3, 1});
      break;
    case ResizeFormat::ChannelsLast3d:
      EMBER_CHECK(sizes.size() == 5,
                  "resize_: required rank 5 tensor to use channels_last_3d format");
      strides = strides_in_order(sizes, {0, 2, 3, 4, 1});
      break;
  }
  const int64_t offset = self->storage_offset();
  grow_storage(self->storage(), needed_bytes(sizes, strides, offset, self->itemsize(), "resize_"));
  self->set_sizes_strides(sizes, std::move(strides), offset);
  self->bump_metadata_version();
  return self;
}

Tensor set_storage_(const Tensor& self, const Storage& storage, int64_t offset,
                    const DimVector& sizes, const DimVector& strides) {
  EMBER_CHECK(sizes.size() == strides.size(), "set_: mismatch in length of sizes and strides (",
              list_str(sizes), " and ", list_str(strides), ")");
  EMBER_CHECK(offset >= 0, "set_: Tensor: invalid storage offset ", offset);
  check_sizes(sizes, "set_");
  for (int64_t s : strides)
    EMBER_CHECK(s >= 0,
                "set_: negative strides are not supported, got strides: ", list_str(strides));
  EMBER_CHECK(storage->device() == self->device(),
              "set_: attempted to set the storage of a tensor on device ", self->device().str(),
              " to a storage on a different device ", storage->device().str());
  check_writable(self);
  grow_storage(storage, needed_bytes(sizes, strides, offset, self->itemsize(), "set_"));
  self->set_sizes_strides(sizes, strides, offset);  // validates before anything changes
  self->set_storage(storage);
  self->set_base(nullptr);
  self->bump_metadata_version();
  return self;
}

Tensor set_tensor_(const Tensor& self, const Tensor& source) {
  EMBER_CHECK(self->dtype() == source->dtype(), "set_: could not set tensor of type ",
              dtype_name(source->dtype()), " to a tensor of type ", dtype_name(self->dtype()));
  if (self == source) return self;
  return set_storage_(self, source->storage(), source->storage_offset(), source->sizes(),
                      source->strides());
}

Tensor set_empty_(const Tensor& self) {
  Tensor fresh = empty({0}, self->dtype(), self->device());
  return set_storage_(self, fresh->storage(), 0, {0}, {1});
}

}  // namespace ember
