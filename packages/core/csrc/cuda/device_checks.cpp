// The error checks of device_checks.h: a slot read back at once (immediate), or a ring of slots
// per device resolved at the next host wait (deferred).
#include "cuda/device_checks.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "cuda/cuda_context.h"
#include "cuda/sync_debug.h"

namespace ember {
namespace cuda {
namespace checks {
namespace {

std::atomic<bool> g_deferred{false};

constexpr int kMaxDevices = 64;
// Slots per device: a check's slot is reused only after a wait resolved it, so at most this
// many deferred checks are unresolved at a time (more: the device is synchronized first).
constexpr uint64_t kRing = 1024;

struct Pending {
  cudaStream_t stream;
  Describe describe;
};

// The slots stay in device memory (device atomics on mapped host memory are not guaranteed
// atomic over PCIe); a wait that has checks to resolve copies the ring back (16 KiB).
struct Ring {
  std::mutex mutex;
  Slot* dev = nullptr;                  // kRing slots
  std::vector<Slot> mirror;             // their host copy
  uint64_t next = 0;                    // the next check's sequence number
  std::map<uint64_t, Pending> pending;  // by sequence number (slot = seq % kRing)
};

Ring& ring(int device) {
  static Ring* rings = new Ring[kMaxDevices];  // leaked: kernels may write until exit
  EMBER_CHECK(device >= 0 && device < kMaxDevices, "CUDA error checks: device index ", device,
              " past the ", kMaxDevices, " devices supported");
  return rings[device];
}

// The ring's memory (under r.mutex; the device is current).
void ensure_allocated(Ring& r) {
  if (r.dev) return;
  void* p = nullptr;
  EMBER_CUDA_CHECK(cudaMalloc(&p, kRing * sizeof(Slot)));
  EMBER_CUDA_CHECK(cudaMemset(p, 0, kRing * sizeof(Slot)));
  r.dev = static_cast<Slot*>(p);
  r.mirror.assign(kRing, Slot{});
}

[[noreturn]] void raise_deferred(const Report& rep) {
  throw Error(rep.kind, rep.message +
                            " (found on the GPU by a kernel that ran asynchronously; raised at "
                            "the next wait for the device)");
}

bool completed_by(const Pending& p, Wait how, cudaStream_t stream) {
  return how == Wait::Device || (how == Wait::Stream && p.stream == stream);
}

// Resolves r's checks that this wait completed (under r.mutex; the device is current): reads
// their slots back and forgets them; the first reported error's report, if any.
std::optional<Report> resolve(Ring& r, Wait how, cudaStream_t stream) {
  bool any = false;
  for (const auto& [seq, p] : r.pending) any = any || completed_by(p, how, stream);
  if (!any) return std::nullopt;
  // On the waited stream (after a device-wide wait any stream will do): the slots are final.
  cudaStream_t s = how == Wait::Stream ? stream : current_stream();
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(r.mirror.data(), r.dev, kRing * sizeof(Slot), cudaMemcpyDeviceToHost, s));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
  std::optional<Report> first;
  for (auto it = r.pending.begin(); it != r.pending.end();) {
    if (!completed_by(it->second, how, stream)) {
      ++it;
      continue;
    }
    const Slot& slot = r.mirror[it->first % kRing];
    if (slot.flag != 0 && !first) first = it->second.describe(slot.value);
    it = r.pending.erase(it);
  }
  return first;
}

}  // namespace

bool deferred() { return g_deferred.load(std::memory_order_relaxed); }
void set_deferred(bool on) { g_deferred.store(on, std::memory_order_relaxed); }

DeviceCheck::DeviceCheck(int device, cudaStream_t stream, Describe describe)
    : device_(device), stream_(stream), describe_(std::move(describe)) {
  DeviceGuard guard(device);
  if (!deferred()) {
    immediate_ = empty(DimVector{static_cast<int64_t>(sizeof(Slot))}, ScalarType::UInt8,
                       Device{DeviceType::CUDA, static_cast<int8_t>(device)});
    EMBER_CUDA_CHECK(cudaMemsetAsync(immediate_->data(), 0, sizeof(Slot), stream));
    slot_ = reinterpret_cast<Slot*>(immediate_->data());
    return;
  }
  Ring& r = ring(device);
  std::optional<Report> earlier;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    ensure_allocated(r);
    if (!r.pending.empty() && r.pending.begin()->first + kRing <= r.next) {
      // The next slot is still an unresolved check's: wait for the device, resolve them all.
      EMBER_CUDA_CHECK(cudaDeviceSynchronize());
      earlier = resolve(r, Wait::Device, nullptr);
    }
    if (!earlier) {
      seq_ = r.next++;
      slot_ = r.dev + seq_ % kRing;
      EMBER_CUDA_CHECK(cudaMemsetAsync(slot_, 0, sizeof(Slot), stream));
    }
  }
  if (earlier) raise_deferred(*earlier);
}

void DeviceCheck::done() {
  if (immediate_) {
    Slot s{};
    DeviceGuard guard(device_);
    sync_debug_check("an error check of a kernel's inputs, read back");
    EMBER_CUDA_CHECK(
        cudaMemcpyAsync(&s, immediate_->data(), sizeof(Slot), cudaMemcpyDeviceToHost, stream_));
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (s.flag != 0) {
      const Report rep = describe_(s.value);
      throw Error(rep.kind, rep.message);
    }
    after_wait(device_, Wait::Stream, stream_);
    return;
  }
  Ring& r = ring(device_);
  std::lock_guard<std::mutex> lock(r.mutex);
  r.pending.emplace(seq_, Pending{stream_, std::move(describe_)});
}

void after_wait(int device, Wait how, cudaStream_t stream) {
  if (device < 0 || device >= kMaxDevices || how == Wait::Event) return;
  Ring& r = ring(device);
  std::optional<Report> first;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.pending.empty()) return;
    DeviceGuard guard(device);
    first = resolve(r, how, stream);
  }
  if (first) raise_deferred(*first);
}

int64_t pending(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  Ring& r = ring(device);
  std::lock_guard<std::mutex> lock(r.mutex);
  return static_cast<int64_t>(r.pending.size());
}

}  // namespace checks
}  // namespace cuda
}  // namespace ember
