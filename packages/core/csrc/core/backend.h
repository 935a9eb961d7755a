// The backend slot: what a device backend living in its own extension module (ember._C_cuda, a
// PrivateUse1 backend) registers with the engine, besides its kernels, which go into the
// generated per-op tables (`ops::register_<op>(DeviceType, fn)` in ops.h):
//   - its allocator (core/allocator.h: register_device_allocator);
//   - DeviceHooks: byte copies between host memory and the device, synchronize, device count;
//   - the `_copy_from` kernel (copies within the device, any layout and dtype).
// copy_ (ops/tensor_ops.cpp) builds every cross-device copy from these, so a backend needs no
// knowledge of the CPU's kernels and the CPU none of the backend's.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace ember {

struct DeviceHooks {
  // Copy nbytes of dense memory between the host and the device `index` (-1: current). With
  // non_blocking the copy may still run when the call returns (the host side must be pinned or
  // outlive the copy); synchronize() waits for it.
  void (*copy_to_host)(void* dst, const void* src, size_t nbytes, int index, bool non_blocking);
  void (*copy_from_host)(void* dst, const void* src, size_t nbytes, int index, bool non_blocking);
  // Waits for all work queued on device `index`. May be null (the device is synchronous).
  void (*synchronize)(int index);
  // Number of devices of this type. May be null (one device).
  int (*device_count)();
  // Stream-ordered devices (CUDA): this thread's current stream of device `index` (an opaque
  // handle) and setting it. Autograd records the stream of each op's forward and runs its
  // backward on it. May be null (the device has one stream).
  int64_t (*current_stream)(int index) = nullptr;
  void (*set_current_stream)(int index, int64_t stream) = nullptr;
  // Makes `stream` of device `index` wait for the work queued on `other` so far.
  void (*stream_wait)(int index, int64_t stream, int64_t other) = nullptr;
  // Copies nbytes from host memory that the caller may free or reuse at once, ordered on the
  // current stream of device `index` but without waiting for the device (through a staging
  // buffer): factories (arange, linspace, ...) made on the host. May be null (copy_from_host).
  void (*copy_from_host_staged)(void* dst, const void* src, size_t nbytes, int index) = nullptr;
};

// Loads the backend of a device type on first use (ember._C sets it: for cuda it imports
// ember._C_cuda), so `ember.zeros(2, device="cuda")` works without touching ember.cuda first.
// device_allocator() and device_hooks() call it once per type before reporting "no backend".
using BackendLoader = void (*)(DeviceType type);
void set_backend_loader(BackendLoader loader);
// Runs the loader for `type` once (later calls do nothing); true if it ran now.
bool load_backend_once(DeviceType type);

// Registers (or, with null, removes) the hooks of a device type; the pointer must stay valid.
void register_device_hooks(DeviceType type, const DeviceHooks* hooks);
// The hooks of a device type; raises a clear error naming the device when none are registered.
const DeviceHooks& device_hooks(DeviceType type);
bool has_device_hooks(DeviceType type);

}  // namespace ember
