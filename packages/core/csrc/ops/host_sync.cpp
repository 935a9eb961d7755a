#include "ops/host_sync.h"

#include "core/backend.h"
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
  // A device that can stage the copy (CUDA) gets it without a wait, as if a kernel had filled
  // it: factories are not sync points.
  if (!d.is_meta() && host->is_contiguous()) load_backend_once(d.type);
  if (!d.is_meta() && host->is_contiguous() && has_device_hooks(d.type)) {
    const DeviceHooks& hooks = device_hooks(d.type);
    if (hooks.copy_from_host_staged) {
      Tensor r = empty(host->sizes(), host->dtype(), d);
      const size_t nbytes = static_cast<size_t>(host->numel()) * host->itemsize();
      if (nbytes > 0) hooks.copy_from_host_staged(r->data(), host->data(), nbytes, d.index);
      return r;
    }
  }
  Tensor r = dispatch::_to_copy(host, std::nullopt, d, false);
  r->reset_version();
  return r;
}

}  // namespace ember
