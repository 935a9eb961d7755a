// Copies on the CUDA device: the host <-> device byte copies of DeviceHooks (core/backend.h),
// which copy_ builds every cross-device copy from.
#include "core/backend.h"
#include "cuda/cuda_context.h"

namespace ember {
namespace cuda {
namespace {

void copy_to_host(void* dst, const void* src, size_t nbytes, int index, bool non_blocking) {
  DeviceGuard guard(index);
  cudaStream_t s = current_stream();
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s));
  if (!non_blocking) EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
}

void copy_from_host(void* dst, const void* src, size_t nbytes, int index, bool non_blocking) {
  DeviceGuard guard(index);
  cudaStream_t s = current_stream();
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s));
  if (!non_blocking) EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
}

void synchronize(int index) {
  DeviceGuard guard(index);
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
}

int count() { return device_count(); }

const DeviceHooks kHooks{&copy_to_host, &copy_from_host, &synchronize, &count};

}  // namespace

void register_copy_hooks() { register_device_hooks(DeviceType::CUDA, &kHooks); }

}  // namespace cuda
}  // namespace ember
