// Storage-less tensors: the wrapper a __torch_dispatch__ subclass makes with
// Tensor._make_wrapper_subclass (DTensor, ...) has sizes, strides, dtype and a real device, but
// no memory: its data lives in the subclass's attributes. C++ code sees its true device (so a
// composite op makes its temporaries there), while kernel selection runs the meta kernels for it
// and every direct data access raises instead of reading nothing.
#pragma once
#include "core/tensor.h"

namespace ember {

inline bool is_storageless(const TensorImpl& t) {
  const Storage& s = t.storage();
  return s && s->nbytes == 0 && !s->data.get() && t.numel() > 0 && !t.device().is_meta();
}

// The device whose kernels run for t: meta for a storage-less tensor.
inline DeviceType kernel_device(const Tensor& t) {
  return is_storageless(*t) ? DeviceType::Meta : t->device().type;
}

// Raises NotImplementedError naming what needed the data of a storage-less tensor.
[[noreturn]] void fail_storageless(const char* what);

// A storage-less tensor of these sizes / strides / offset on device.
Tensor make_storageless(const DimVector& sizes, const DimVector& strides, int64_t offset,
                        ScalarType dtype, Device device);

}  // namespace ember
