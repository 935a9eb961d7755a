#include "cuda/cuda_allocator.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace ember {
namespace cuda {

namespace {

// A free list of timing-free events per device: the allocators record one per stream use of
// each freed block, so creating and destroying them every time would cost more than the copy.
std::mutex g_event_mutex;
std::vector<std::vector<cudaEvent_t>>& free_events() {
  static auto* v = new std::vector<std::vector<cudaEvent_t>>();  // leaked, like the allocators
  return *v;
}
// Which device each event was created on (to put it back in the right list).
std::vector<std::pair<cudaEvent_t, int>>& event_devices() {
  static auto* v = new std::vector<std::pair<cudaEvent_t, int>>();
  return *v;
}

int event_device(cudaEvent_t e) {
  for (const auto& [ev, d] : event_devices())
    if (ev == e) return d;
  return -1;
}

}  // namespace

cudaEvent_t acquire_event(int device) {
  device = resolve_device(device);
  {
    std::lock_guard<std::mutex> lock(g_event_mutex);
    auto& lists = free_events();
    if (device < static_cast<int>(lists.size()) && !lists[device].empty()) {
      cudaEvent_t e = lists[device].back();
      lists[device].pop_back();
      return e;
    }
  }
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::lock_guard<std::mutex> lock(g_event_mutex);
  event_devices().emplace_back(e, device);
  return e;
}

void release_event(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(g_event_mutex);
  int d = event_device(event);
  if (d < 0) return;
  auto& lists = free_events();
  if (d >= static_cast<int>(lists.size())) lists.resize(d + 1);
  lists[d].push_back(event);
}

void* record_free_event(StreamId stream, int device) {
  try {
    cudaEvent_t e = acquire_event(device);
    DeviceGuard guard(device);
    if (cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)) != cudaSuccess) {
      (void)cudaGetLastError();
      release_event(e);
      return nullptr;
    }
    return e;
  } catch (const std::exception&) {
    (void)cudaGetLastError();
    return nullptr;
  }
}

bool CudaEventRawAllocator::event_done(void* event) {
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check(err, "cudaEventQuery");
  return true;
}

void CudaEventRawAllocator::event_synchronize(void* event) {
  EMBER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

void CudaEventRawAllocator::destroy_event(void* event) {
  release_event(static_cast<cudaEvent_t>(event));
}

void* allocated_or_null(cudaError_t err, void* p, const char* what) {
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: the caller frees its cache and retries
    return nullptr;
  }
  check(err, what);
  return p;
}

namespace {

constexpr int kMaxFractionDevices = 64;
// Per device: the allowed fraction of its total memory (1: no limit of ember's own), and the
// bytes the raw allocator holds from cudaMalloc.
struct FractionSlot {
  std::atomic<double> fraction{1.0};
  std::atomic<int64_t> raw_bytes{0};
};
FractionSlot g_slots[kMaxFractionDevices];

class CudaRawAllocator final : public CudaEventRawAllocator {
 public:
  explicit CudaRawAllocator(int device) : device_(device) {}

  void* raw_alloc(size_t nbytes) override {
    DeviceGuard guard(device_);
    if (device_ < kMaxFractionDevices) {
      const double f = g_slots[device_].fraction.load(std::memory_order_relaxed);
      if (f < 1.0) {
        size_t free_b = 0, total = 0;
        EMBER_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
        const double allowed = f * static_cast<double>(total);
        const double held = static_cast<double>(g_slots[device_].raw_bytes.load());
        if (held + static_cast<double>(nbytes) > allowed) return nullptr;  // as out of memory
      }
    }
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, nbytes);
    p = allocated_or_null(err, p, "cudaMalloc");
    if (p && device_ < kMaxFractionDevices)
      g_slots[device_].raw_bytes += static_cast<int64_t>(nbytes);
    return p;
  }
  void raw_free(void* ptr, size_t nbytes) override {
    DeviceGuard guard(device_);
    check(cudaFree(ptr), "cudaFree");
    if (device_ < kMaxFractionDevices) g_slots[device_].raw_bytes -= static_cast<int64_t>(nbytes);
  }

  void* record_event(StreamId stream, int device) override {
    if (device < 0) device = device_;
    return record_free_event(stream, device);
  }
  bool memory_info(size_t* free, size_t* total) override {
    DeviceGuard guard(device_);
    if (cudaMemGetInfo(free, total) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return true;
  }

 private:
  int device_;
};

std::mutex g_alloc_mutex;
// Leaked: device memory may be released by storages during interpreter teardown.
std::vector<CachingAllocator*>& allocators() {
  static auto* v = new std::vector<CachingAllocator*>();
  return *v;
}

class CudaDeviceAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override { return allocate_on(nbytes, -1); }
  DataPtr allocate_on(size_t nbytes, int index) override {
    index = resolve_device(index);
    cudaStream_t s = current_stream(index);
    return device_caching_allocator(index).allocate(nbytes, reinterpret_cast<StreamId>(s));
  }
};

}  // namespace

void set_memory_fraction(double fraction, int index) {
  index = resolve_device(index);
  EMBER_CHECK_KIND(index >= 0 && index < device_count(), Value,
                   "set_per_process_memory_fraction: invalid device index ", index, " (",
                   device_count(), " CUDA device(s) visible)");
  EMBER_CHECK_KIND(fraction >= 0.0 && fraction <= 1.0, Value,
                   "set_per_process_memory_fraction: invalid fraction ", fraction,
                   ", expected a value in [0, 1]");
  EMBER_CHECK(index < kMaxFractionDevices, "set_per_process_memory_fraction: device index ", index,
              " past the ", kMaxFractionDevices, " devices supported");
  g_slots[index].fraction.store(fraction);
}

double memory_fraction(int index) {
  index = resolve_device(index);
  EMBER_CHECK_KIND(index >= 0 && index < device_count(), Value,
                   "get_per_process_memory_fraction: invalid device index ", index, " (",
                   device_count(), " CUDA device(s) visible)");
  return index < kMaxFractionDevices ? g_slots[index].fraction.load() : 1.0;
}

CachingAllocator& device_caching_allocator(int index) {
  index = resolve_device(index);
  if (index < 0 || index >= device_count())
    EMBER_FAIL(Value, "cuda: invalid device index ", index, " (", device_count(),
               " CUDA device(s) visible)");
  std::lock_guard<std::mutex> lock(g_alloc_mutex);
  auto& v = allocators();
  if (v.size() < static_cast<size_t>(device_count())) v.resize(device_count(), nullptr);
  if (!v[index])
    v[index] = new CachingAllocator(std::make_unique<CudaRawAllocator>(index),
                                    Device{DeviceType::CUDA, static_cast<int8_t>(index)});
  return *v[index];
}

bool has_device_caching_allocator(int index) {
  std::lock_guard<std::mutex> lock(g_alloc_mutex);
  auto& v = allocators();
  return index >= 0 && index < static_cast<int>(v.size()) && v[index] != nullptr;
}

Allocator& cuda_device_allocator() {
  static CudaDeviceAllocator a;
  return a;
}

void empty_all_caches() {
  for (int d = 0; d < device_count(); ++d)
    if (has_device_caching_allocator(d)) device_caching_allocator(d).empty_cache();
}

}  // namespace cuda
}  // namespace ember
