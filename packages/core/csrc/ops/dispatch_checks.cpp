// The device checks of the generated dispatch (ops/op_types.h).
#include "core/storageless.h"
#include "ops/op_types.h"

namespace ember {

void no_kernel(const char* op, DeviceType device, bool data_dependent) {
  if (device == DeviceType::Meta && data_dependent)
    EMBER_FAIL(NotImplemented, op,
               ": not supported on the meta device: its result depends on the tensors' values, "
               "which meta tensors do not have");
  EMBER_FAIL(NotImplemented, op, ": no kernel for device '", device_type_name(device), "'",
             device == DeviceType::CUDA ? " (this build of ember has no CUDA kernel for it)"
             : device == DeviceType::PrivateUse1 ? " (the backend registered no kernel for this op)"
                                                 : "");
}

namespace {
[[noreturn]] void mixed(const char* op, const Device& a, const Device& b, const char* name) {
  EMBER_FAIL(Runtime, "Expected all tensors to be on the same device, but found at least two ",
             "devices, ", a.str(), " and ", b.str(), "! (in ", op, ", argument '", name, "')");
}
}  // namespace

DeviceType common_device(const char* op, std::initializer_list<const Tensor*> tensors,
                         std::initializer_list<const char*> names,
                         std::initializer_list<const std::vector<Tensor>*> lists,
                         DeviceType fallback) {
  // The common case, every tensor on the first one's device, costs one compare per tensor.
  const Tensor* first = nullptr;
  bool cpu_scalar = false, storageless = false;
  auto visit = [&](const Tensor& t, const char* name) {
    const Device d = t->device();
    storageless = storageless || is_storageless(*t);
    if (d.type == DeviceType::CPU && t->dim() == 0) {
      cpu_scalar = true;
      return;
    }
    if (!first) {
      first = &t;
    } else if ((*first)->device() != d) {
      mixed(op, (*first)->device(), d, name);
    }
  };
  auto name_it = names.begin();
  for (const Tensor* p : tensors) {
    const char* name = name_it != names.end() ? *name_it++ : "?";
    if (p && *p) visit(*p, name);
  }
  for (const std::vector<Tensor>* l : lists)
    for (const Tensor& t : *l)
      if (t) visit(t, "tensors");
  if (storageless) return DeviceType::Meta;  // a wrapper subclass: shapes only (storageless.h)
  if (first) return (*first)->device().type;
  return cpu_scalar ? DeviceType::CPU : fallback;
}

}  // namespace ember
