// Copies on the CUDA device: the host <-> device byte copies of DeviceHooks (core/backend.h),
// which copy_ builds every cross-device copy from.
//
// A non_blocking copy is a cudaMemcpyAsync on the current stream that the host does not wait
// for: truly asynchronous when the host side is pinned. A pinned block that such a copy reads or
// writes is recorded as used on the stream (pinned_allocator.h), so freeing its tensor right
// after the call cannot let the block be reused before the copy has run.
#include <cstring>

#include "core/backend.h"
#include "cuda/cuda_allocator.h"
#include "cuda/cuda_context.h"
#include "cuda/device_checks.h"
#include "cuda/pinned_allocator.h"
#include "cuda/sync_debug.h"

namespace ember {
namespace cuda {
namespace {

void copy_to_host(void* dst, const void* src, size_t nbytes, int index, bool non_blocking) {
  DeviceGuard guard(index);
  cudaStream_t s = current_stream();
  if (!non_blocking) sync_debug_check("copy to the host");  // before the copy: "error" mode
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s));
  if (non_blocking) {
    record_host_use(dst, s, current_device());
  } else {
    EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
    checks::after_wait(current_device(), checks::Wait::Stream, s);
  }
}

void copy_from_host(void* dst, const void* src, size_t nbytes, int index, bool non_blocking) {
  DeviceGuard guard(index);
  cudaStream_t s = current_stream();
  if (!non_blocking) sync_debug_check("copy from the host");
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s));
  if (non_blocking) {
    record_host_use(src, s, current_device());
  } else {
    EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
    checks::after_wait(current_device(), checks::Wait::Stream, s);
  }
}

// Small host buffers go through a pinned staging block, so the copy needs no wait: the block
// is recorded as used on the stream, and the pinned allocator reuses it only after the copy.
// Larger ones (rare for factories) take the blocking copy rather than pinning that much.
void copy_from_host_staged(void* dst, const void* src, size_t nbytes, int index) {
  constexpr size_t kMaxStaged = size_t{1} << 20;
  if (nbytes == 0) return;
  if (nbytes > kMaxStaged) {
    copy_from_host(dst, src, nbytes, index, false);
    return;
  }
  DeviceGuard guard(index);
  cudaStream_t s = current_stream();
  DataPtr staging = allocate_pinned(nbytes);
  std::memcpy(staging.get(), src, nbytes);
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, staging.get(), nbytes, cudaMemcpyHostToDevice, s));
  record_host_use(staging.get(), s, current_device());
}

void synchronize(int index) {
  DeviceGuard guard(index);
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
  checks::after_wait(current_device(), checks::Wait::Device);
}

int count() { return device_count(); }

int64_t get_stream(int index) { return reinterpret_cast<int64_t>(current_stream(index)); }
void put_stream(int index, int64_t stream) {
  set_current_stream(index, reinterpret_cast<cudaStream_t>(stream));
}

void stream_wait(int index, int64_t stream, int64_t other) {
  DeviceGuard guard(index);
  cudaEvent_t e = acquire_event(current_device());
  EMBER_CUDA_CHECK(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(other)));
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(stream), e, 0));
  release_event(e);  // reusable at once: the wait captured the event's recorded work
}

const DeviceHooks kHooks{&copy_to_host, &copy_from_host, &synchronize, &count,
                         &get_stream,   &put_stream,     &stream_wait, &copy_from_host_staged};

}  // namespace

void register_copy_hooks() { register_device_hooks(DeviceType::CUDA, &kHooks); }

}  // namespace cuda
}  // namespace ember
