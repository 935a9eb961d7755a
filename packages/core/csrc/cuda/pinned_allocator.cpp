#include "cuda/pinned_allocator.h"

#include <atomic>
#include <memory>

#include "cuda/cuda_allocator.h"

namespace ember {
namespace cuda {

namespace {

// Pinned blocks belong to no stream: their pool key is this (no cudaStream_t has this value),
// so every stream that touches them is recorded as a use.
constexpr StreamId kHostStream = -1;

std::atomic<bool> g_pinned_used{false};

class PinnedRawAllocator final : public CudaEventRawAllocator {
 public:
  void* raw_alloc(size_t nbytes) override {
    void* p = nullptr;
    // Portable: usable by copies to and from every device, not only the current one.
    cudaError_t err = cudaHostAlloc(&p, nbytes, cudaHostAllocPortable);
    return allocated_or_null(err, p, "cudaHostAlloc");
  }
  void raw_free(void* ptr, size_t) override { check(cudaFreeHost(ptr), "cudaFreeHost"); }

  void* record_event(StreamId stream, int device) override {
    return record_free_event(stream, device);
  }
};

}  // namespace

CachingAllocator& pinned_allocator() {
  // Leaked: pinned storages may be released during interpreter teardown. 512-byte blocks, as
  // on the device (copies of any dtype start aligned).
  static CachingAllocator* a = [] {
    auto* p = new CachingAllocator(std::make_unique<PinnedRawAllocator>(), cpu_device());
    g_pinned_used.store(true, std::memory_order_release);
    return p;
  }();
  return *a;
}

DataPtr allocate_pinned(size_t nbytes) { return pinned_allocator().allocate(nbytes, kHostStream); }

bool is_pinned(const DataPtr& ptr) {
  return CachingAllocator::owner_of(ptr) == &pinned_allocator();
}

bool record_host_use(const void* p, cudaStream_t stream, int device) {
  if (!g_pinned_used.load(std::memory_order_acquire)) return false;  // nothing pinned yet
  return pinned_allocator().record_stream_at(p, reinterpret_cast<StreamId>(stream),
                                             resolve_device(device));
}

}  // namespace cuda
}  // namespace ember
