// CUDA helpers of the C++ frontend for extensions with CUDA sources: ember's current stream of
// a device (what kernels must be launched on to stay ordered with ember's own work), a device
// guard, and launch checks. The stream comes from the CUDA backend's hooks (core/backend.h), so
// an extension sees the stream that `with ember.cuda.stream(s):` set.
#pragma once
#include <cuda_runtime_api.h>

#include <optional>

#include "core/backend.h"
#include "extension/tensor_base.h"

namespace ember {
namespace api {
namespace cuda {

// Throws naming the failed call when a CUDA runtime call returned an error.
inline void check(cudaError_t err, const char* what) {
  EMBER_CHECK(err == cudaSuccess, "CUDA error: ", cudaGetErrorString(err), " (", what, ")");
}

inline DeviceIndex current_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return static_cast<DeviceIndex>(d);
}

// A stream of a device (ATen's CUDAStream): converts to cudaStream_t.
class CUDAStream {
 public:
  CUDAStream(cudaStream_t stream, DeviceIndex device) : stream_(stream), device_(device) {}
  cudaStream_t stream() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT
  DeviceIndex device_index() const { return device_; }
  Device device() const { return Device(kCUDA, device_); }
  void synchronize() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t stream_;
  DeviceIndex device_;
};

// ember's current stream of `device` (-1: the current device) on this thread.
inline CUDAStream getCurrentCUDAStream(DeviceIndex device = -1) {
  if (device < 0) device = current_device();
  const DeviceHooks& hooks = device_hooks(DeviceType::CUDA);
  int64_t handle = hooks.current_stream ? hooks.current_stream(device) : 0;
  return CUDAStream(reinterpret_cast<cudaStream_t>(handle), device);
}

// Makes `device` current for the guard's scope (ATen's CUDAGuard / OptionalCUDAGuard).
class CUDAGuard {
 public:
  explicit CUDAGuard(DeviceIndex device) : prev_(current_device()) { set(device); }
  explicit CUDAGuard(Device device) : CUDAGuard(device.index() < 0 ? prev_now() : device.index()) {}
  ~CUDAGuard() { cudaSetDevice(prev_); }
  CUDAGuard(const CUDAGuard&) = delete;
  CUDAGuard& operator=(const CUDAGuard&) = delete;
  void set_index(DeviceIndex device) { set(device); }

 private:
  static DeviceIndex prev_now() { return current_device(); }
  static void set(DeviceIndex device) { check(cudaSetDevice(device), "cudaSetDevice"); }
  DeviceIndex prev_;
};

class OptionalCUDAGuard {
 public:
  OptionalCUDAGuard() = default;
  explicit OptionalCUDAGuard(std::optional<Device> device) {
    if (device && device->is_cuda()) guard_.emplace(*device);
  }
  explicit OptionalCUDAGuard(std::optional<DeviceIndex> device) {
    if (device) guard_.emplace(*device);
  }
  void set_index(DeviceIndex device) {
    if (guard_) {
      guard_->set_index(device);
    } else {
      guard_.emplace(device);
    }
  }
  void reset() { guard_.reset(); }

 private:
  std::optional<CUDAGuard> guard_;
};

}  // namespace cuda

// The device of a tensor, for OptionalCUDAGuard (ATen's device_of).
inline std::optional<Device> device_of(const TensorBase& t) {
  return t.defined() ? std::optional<Device>(t.device()) : std::nullopt;
}

}  // namespace api
}  // namespace ember

// Raises naming the kernel launch's error (bad configuration, no kernel image for this GPU).
#define EMBER_CUDA_KERNEL_LAUNCH_CHECK() \
  ::ember::api::cuda::check(cudaGetLastError(), "kernel launch")
