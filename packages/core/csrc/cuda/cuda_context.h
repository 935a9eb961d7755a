// The CUDA backend's host-side context: error checks, the current device and the current
// stream of each device (per thread, as in PyTorch), and the check after every kernel launch.
// Everything in csrc/cuda/ includes this; nothing outside csrc/cuda/ does (the engine never
// needs the CUDA runtime).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"

namespace ember {
namespace cuda {

// Raises RuntimeError "CUDA error in <what>: <message>" (a device-side fault reported by a
// later call names that call; EMBER_LAUNCH_BLOCKING=1 makes each launch report its own).
void check(cudaError_t err, const char* what);
#define EMBER_CUDA_CHECK(expr) ::ember::cuda::check((expr), #expr)

// After a kernel launch: raises on a launch error naming `op`; with EMBER_LAUNCH_BLOCKING=1 it
// also waits for the kernel, so a fault inside it is reported here, naming `op`.
void check_launch(const char* op);
bool launch_blocking();

int device_count();
int current_device();
void set_device(int index);
// Resolves -1 (the current device) to an index.
int resolve_device(int index);

// RAII: makes `index` current for the scope (no-op for -1 or the current one).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// The stream work is queued on: this thread's current stream of device `index` (-1: current
// device). Until set, the device's default (legacy null) stream, as in PyTorch.
cudaStream_t current_stream(int index = -1);
void set_current_stream(int index, cudaStream_t stream);

// Launch geometry for a grid-stride loop over n elements.
constexpr int kBlockSize = 256;
inline unsigned blocks_for(int64_t n, int per_thread = 1) {
  int64_t b = (n + int64_t(kBlockSize) * per_thread - 1) / (int64_t(kBlockSize) * per_thread);
  if (b < 1) b = 1;
  if (b > (int64_t(1) << 30)) b = int64_t(1) << 30;
  return static_cast<unsigned>(b);
}

}  // namespace cuda
}  // namespace ember
