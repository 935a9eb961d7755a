#include "core/storageless.h"

#include "core/error.h"

namespace ember {

void fail_storageless(const char* what) {
  EMBER_FAIL(NotImplemented, what,
             ": this tensor is a tensor subclass wrapper (Tensor._make_wrapper_subclass) with no "
             "data of its own; its __torch_dispatch__ must unwrap it to the tensors that hold "
             "the data");
}

Tensor make_storageless(const DimVector& sizes, const DimVector& strides, int64_t offset,
                        ScalarType dtype, Device device) {
  auto storage = std::make_shared<StorageImpl>(DataPtr(nullptr, nullptr, nullptr, device), 0);
  return std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, strides, offset,
                                      std::make_shared<VersionCounter>());
}

}  // namespace ember
