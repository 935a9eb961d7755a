#include "ops/host_sync.h"

#include "ops.h"

namespace ember {

Tensor host_values(const Tensor& t, const char* op) {
  const Device d = t->device();
  if (d.is_cpu()) return t;
  if (d.is_meta()) no_kernel(op, DeviceType::Meta, /*data_dependent=*/true);
  return dispatch::_to_copy(t, std::nullopt, cpu_device(), false);
}

Tensor to_factory_device(const Tensor& host, std::optional<Device> device) {
  const Device d = device.value_or(default_device());
  if (d.is_cpu()) return host;
  Tensor r = dispatch::_to_copy(host, std::nullopt, d, false);
  r->reset_version();
  return r;
}

}  // namespace ember
