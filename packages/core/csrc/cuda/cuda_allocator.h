// The CUDA device allocator: one CachingAllocator (core/allocator.h) per device over
// cudaMalloc/cudaFree, each block cached in the pool of the stream it was allocated on (the
// cudaStream_t's value is the StreamId). Tensor.record_stream marks a block as used on another
// stream: when freed, it goes back to its pool only after CUDA events recorded then on those
// streams have completed.
#pragma once
#include "core/allocator.h"
#include "cuda/cuda_context.h"

namespace ember {
namespace cuda {

// The caching allocator of device `index` (-1: the current device).
CachingAllocator& device_caching_allocator(int index = -1);
// Whether device `index`'s caching allocator exists yet (stats of an unused device are zeros).
bool has_device_caching_allocator(int index);
// What the engine allocates CUDA storages through: device `index` (or the current one), the
// current stream's pool.
Allocator& cuda_device_allocator();
// empty_cache on every device that has an allocator.
void empty_all_caches();

// Events for the allocators (record_stream, pinned memory): created without timing, reused.
cudaEvent_t acquire_event(int device);
void release_event(cudaEvent_t event);
// An event recorded on `stream` of `device` for a block being freed; null if CUDA refuses (at
// interpreter exit, say: the free runs in a destructor, which must not throw, and a context
// that is gone runs nothing that could still use the block).
void* record_free_event(StreamId stream, int device);

// The event half of a RawAllocator over CUDA events (device and pinned memory alike).
class CudaEventRawAllocator : public RawAllocator {
 public:
  bool event_done(void* event) override;
  void event_synchronize(void* event) override;
  void destroy_event(void* event) override;
};

// The block cudaMalloc / cudaHostAlloc gave (`err`), or null when out of memory (the error
// cleared: the caller frees its cache and retries); other errors raise.
void* allocated_or_null(cudaError_t err, void* p, const char* what);

}  // namespace cuda
}  // namespace ember
