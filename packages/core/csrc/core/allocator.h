// Memory for tensor storages.
//
// Allocator is the per-device interface storages allocate through. CachingAllocator is written
// once over a RawAllocator (malloc/free on the CPU; cudaMalloc/cudaFree for CUDA): freed blocks
// stay cached in pools keyed by stream and are reused, split and merged, so steady-state
// training loops never go back to the system allocator (no page-fault storms, no cudaFree syncs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"

namespace ember {

// Owning pointer to device memory; `deleter(ctx)` gives it back. Move-only (RAII).
class DataPtr {
 public:
  using Deleter = void (*)(void* ctx);
  DataPtr() = default;
  DataPtr(void* data, void* ctx, Deleter deleter, Device device)
      : data_(data), ctx_(ctx), deleter_(deleter), device_(device) {}
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  DataPtr(DataPtr&& o) noexcept { swap(o); }
  DataPtr& operator=(DataPtr&& o) noexcept {
    DataPtr tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~DataPtr() {
    if (deleter_) deleter_(ctx_);
  }
  void* get() const { return data_; }
  void* ctx() const { return ctx_; }
  Deleter deleter() const { return deleter_; }
  Device device() const { return device_; }

 private:
  void swap(DataPtr& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(ctx_, o.ctx_);
    std::swap(deleter_, o.deleter_);
    std::swap(device_, o.device_);
  }
  void* data_ = nullptr;
  void* ctx_ = nullptr;
  Deleter deleter_ = nullptr;
  Device device_{};
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(size_t nbytes) = 0;
  // On device `index` (-1: the current one) of a backend with several devices (CUDA); a
  // single-device allocator ignores the index.
  virtual DataPtr allocate_on(size_t nbytes, int index) {
    (void)index;
    return allocate(nbytes);
  }
};

// A stream of a device: an opaque handle (CUDA: the cudaStream_t's value). 0: the default
// stream (the only one on the CPU).
using StreamId = int64_t;

// The device's own malloc/free. raw_alloc returns nullptr when the device is out of memory.
//
// Stream-ordered devices (CUDA) also give the caching allocator events: a block that
// record_stream marked as used on other streams goes back to its pool only once an event
// recorded on each of them when it was freed has completed. The CPU records none (the defaults).
class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  virtual void* raw_alloc(size_t nbytes) = 0;
  virtual void raw_free(void* ptr, size_t nbytes) = 0;
  // Records an event on `stream` of device `device` (-1: this allocator's device); returns an
  // opaque handle, or null when there is nothing to wait for.
  virtual void* record_event(StreamId stream, int device) {
    (void)stream;
    (void)device;
    return nullptr;
  }
  virtual bool event_done(void* event) {
    (void)event;
    return true;
  }
  virtual void event_synchronize(void* event) { (void)event; }
  virtual void destroy_event(void* event) { (void)event; }
  // Free and total memory of the device (for the out-of-memory message); false if unknown.
  virtual bool memory_info(size_t* free, size_t* total) {
    (void)free;
    (void)total;
    return false;
  }
};

struct MemoryStats {
  int64_t allocated_bytes = 0, allocated_bytes_peak = 0;
  int64_t reserved_bytes = 0, reserved_bytes_peak = 0;
  int64_t requested_bytes = 0;
  // Active: allocated, or freed while events of other streams that used it are pending.
  int64_t active_blocks = 0, active_bytes = 0, active_bytes_peak = 0;
  int64_t segments = 0, segments_peak = 0;
  int64_t pending_event_blocks = 0;
  int64_t num_allocs = 0, num_frees = 0;
  int64_t num_raw_allocs = 0, num_raw_frees = 0;
  int64_t num_alloc_retries = 0, num_ooms = 0;
  int64_t num_splits = 0, num_merges = 0, num_cache_hits = 0;
};

struct BlockInfo {
  uint64_t address;
  int64_t size;
  int64_t requested;
  bool allocated;
  bool pending_free = false;  // freed, waiting for events of other streams that used it
};
struct SegmentInfo {
  uint64_t address;
  int64_t total_size;
  StreamId stream;
  bool is_small;
  std::vector<BlockInfo> blocks;
};

// How request sizes are rounded, and how much the cache keeps. Blocks of the small and large
// pools are multiples of `round` (so every block stays aligned to it); with `tiny` set, requests
// smaller than `round` are rounded to a multiple of `tiny` instead and carved from their own
// segments (a scalar loss then costs 8 bytes, not a whole block). With `bound_cache` (the CPU
// allocator) whole free large segments go back before a new one is taken while the cache holds
// more than a quarter of the live bytes; without it (CUDA, as PyTorch's) the cache gives memory
// back only when the device runs out, or on empty_cache().
struct AllocatorOptions {
  size_t round = 512;
  size_t tiny = 0;  // 0: no tiny pool
  bool bound_cache = false;
};

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kRound = 512;               // the default rounding (as on CUDA)
  static constexpr size_t kTinySegment = 64 << 10;    // tiny-pool segments are 64 KiB
  static constexpr size_t kSmallRequest = 1 << 20;    // requests up to 1 MiB use the small pool
  static constexpr size_t kSmallSegment = 2 << 20;    // small-pool segments are 2 MiB
  static constexpr size_t kMediumSegment = 20 << 20;  // requests of 1-10 MiB share 20 MiB segments
  static constexpr size_t kLargeRound = 2 << 20;      // larger segments are rounded to 2 MiB

  CachingAllocator(std::unique_ptr<RawAllocator> raw, Device device, AllocatorOptions options = {});
  ~CachingAllocator() override;

  DataPtr allocate(size_t nbytes) override { return allocate(nbytes, 0); }
  DataPtr allocate(size_t nbytes, StreamId stream);
  // Gives every fully free segment back to the raw allocator.
  void empty_cache();
  // With caching off every block is its own segment, released as soon as it is freed.
  void set_caching(bool enabled);
  bool caching() const { return caching_; }

  // record_stream: the block of `ptr` (which this allocator made) is also used on `stream` of
  // device `device` (-1: the allocator's own device); when it is freed, it returns to its pool
  // only after events recorded then on each such stream have completed (polled at allocation).
  // Raises if `ptr` does not come from a CachingAllocator.
  static void record_stream(const DataPtr& ptr, StreamId stream, int device = -1);
  // The allocator that made `ptr`, or null when another allocator did.
  static CachingAllocator* owner_of(const DataPtr& ptr);
  // Like record_stream for the allocated block that contains address `p` (anywhere inside it);
  // false when no allocated block of this allocator holds `p`.
  bool record_stream_at(const void* p, StreamId stream, int device = -1);
  // Waits for every pending event and returns their blocks to the pools.
  void synchronize_events();

  MemoryStats stats() const;
  void reset_peak_stats();
  std::vector<SegmentInfo> snapshot() const;
  Device device() const { return device_; }

  struct Block;

 private:
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;
  enum class PoolKind : uint8_t { Tiny, Small, Large };

  static void free_block(void* ctx);
  void free(Block* block);
  void return_block_locked(Block* block);
  void add_stream_use_locked(Block* block, StreamId stream, int device);
  void process_events_locked();
  void synchronize_events_locked();
  Block* find_free_block(Pool& pool, size_t size, StreamId stream);
  Block* new_segment(size_t request_size, size_t alloc_size, StreamId stream, PoolKind kind);
  Pool& pool_of(PoolKind kind);
  void release_segment(Block* head);
  void release_free_segments_locked();
  [[noreturn]] void throw_oom(size_t nbytes);
  size_t round_size(size_t n) const;
  static size_t segment_size(size_t rounded, PoolKind kind);

  std::unique_ptr<RawAllocator> raw_;
  Device device_;
  bool caching_ = true;
  mutable std::mutex mutex_;
  AllocatorOptions options_;
  Pool tiny_pool_, small_pool_, large_pool_;
  std::set<Block*> segments_;                        // the first block of each segment
  std::map<uintptr_t, Block*> segments_by_address_;  // the same, by address (record_stream_at)
  struct PendingEvent {
    void* event;
    Block* block;
  };
  std::deque<PendingEvent> pending_events_;  // in the order they were recorded
  MemoryStats stats_;
};

// The process-wide CPU allocator (a CachingAllocator over aligned malloc unless
// EMBER_CPU_ALLOCATOR_CACHING=0): 64-byte blocks (a cache line, the widest SIMD load) and a
// tiny pool in 8-byte steps for scalars. Never destroyed, so storages may outlive static teardown.
CachingAllocator& cpu_allocator();
// Where CUDA registers its allocator when the CUDA extension loads.
Allocator* device_allocator(DeviceType type);
void register_device_allocator(DeviceType type, Allocator* alloc);

}  // namespace ember
