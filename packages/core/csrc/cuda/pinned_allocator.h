// Pinned (page-locked) host memory: a CachingAllocator over cudaHostAlloc whose storages are CPU
// storages (Tensor.pin_memory(), pin_memory=True). An asynchronous copy that reads or writes a
// pinned block records its stream on the block (record_host_use, called by the copy hooks);
// when the block is freed it is reused only after events recorded on those streams complete,
// so a freed staging buffer is never overwritten while a copy still reads it.
#pragma once
#include "core/allocator.h"
#include "cuda/cuda_context.h"

namespace ember {
namespace cuda {

CachingAllocator& pinned_allocator();
// nbytes of pinned host memory (a CPU DataPtr).
DataPtr allocate_pinned(size_t nbytes);
// Whether `ptr` was made by the pinned allocator (the storage of a pinned tensor).
bool is_pinned(const DataPtr& ptr);
// The copy hooks: if `p` lies in a live pinned block, the block is also in use on `stream` of
// device `device` until its work so far completes. Returns whether `p` is pinned.
bool record_host_use(const void* p, cudaStream_t stream, int device);

}  // namespace cuda
}  // namespace ember
