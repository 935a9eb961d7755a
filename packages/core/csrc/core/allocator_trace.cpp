#include "core/allocator_trace.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>

namespace ember {
namespace allocator_trace {

namespace detail {
std::atomic<int> g_on{0};
}

namespace {

std::atomic<PythonStackCapture> g_python_capture{nullptr};
std::atomic<MemoryObserver> g_observer{nullptr};

// Guards the configs, the registry and the histories. Taken under an allocator's mutex (by
// record), never the other way round: snapshot() copies the registry, lets go, and only then asks
// each allocator for its segments.
std::mutex g_mutex;
HistoryConfig g_configs[kNumDeviceTypes];
bool g_recording[kNumDeviceTypes] = {};

struct History {
  std::deque<TraceEntry> trace;
  std::unordered_map<uint64_t, Frames> block_frames;
  std::unordered_map<uint64_t, Frames> segment_frames;
};
std::unordered_map<const CachingAllocator*, History>& histories() {
  static auto* h = new std::unordered_map<const CachingAllocator*, History>();  // never freed
  return *h;
}
std::vector<CachingAllocator*>& registry() {
  static auto* r = new std::vector<CachingAllocator*>();
  return *r;
}

thread_local CallContext* t_context = nullptr;

void update_on_locked() {
  int n = g_observer.load() != nullptr ? 1 : 0;
  for (bool r : g_recording) n += r ? 1 : 0;
  detail::g_on.store(n);
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string demangle(const char* sym) {
  int status = 0;
  char* out = abi::__cxa_demangle(sym, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return sym;
  std::string s(out);
  std::free(out);
  return s;
}

}  // namespace

const char* action_name(Action a) {
  switch (a) {
    case Action::Alloc:
      return "alloc";
    case Action::FreeRequested:
      return "free_requested";
    case Action::FreeCompleted:
      return "free_completed";
    case Action::SegmentAlloc:
      return "segment_alloc";
    case Action::SegmentFree:
      return "segment_free";
    case Action::Oom:
      return "oom";
  }
  return "unknown";
}

void set_python_stack_capture(PythonStackCapture fn) { g_python_capture.store(fn); }

Frames capture_stack(bool cpp) {
  PythonStackCapture py = g_python_capture.load();
  Frames python = py ? py() : nullptr;
  if (!cpp) return python;
  auto frames = std::make_shared<std::vector<Frame>>();
  if (python) *frames = *python;
  void* addrs[64];
  int n = backtrace(addrs, 64);
  // Symbolized once per return address: dladdr and demangling cost microseconds each.
  static std::mutex cache_mutex;
  static auto* cache = new std::unordered_map<void*, Frame>();  // never freed
  std::lock_guard<std::mutex> lock(cache_mutex);
  for (int i = 1; i < n; ++i) {  // 0: this function
    auto it = cache->find(addrs[i]);
    if (it == cache->end()) {
      Dl_info info{};
      Frame f;
      if (dladdr(addrs[i], &info) != 0) {
        f.filename = info.dli_fname ? info.dli_fname : "??";
        f.name = info.dli_sname ? demangle(info.dli_sname) : "??";
      } else {
        f.filename = "??";
        f.name = "??";
      }
      it = cache->emplace(addrs[i], std::move(f)).first;
    }
    frames->push_back(it->second);
  }
  return frames;
}

void set_memory_observer(MemoryObserver fn) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_observer.store(fn);
  update_on_locked();
}

void record_memory_history(DeviceType type, const HistoryConfig& config, bool clear) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const int t = static_cast<int>(type);
  g_configs[t] = config;
  g_recording[t] = config.enabled;
  if (clear || config.enabled) {
    for (auto& [alloc, h] : histories()) {
      if (alloc->device().type != type) continue;
      if (clear) h = History();
      while (h.trace.size() > config.max_entries) h.trace.pop_front();
    }
  }
  update_on_locked();
}

CallContext::CallContext(const CachingAllocator* alloc, bool is_alloc) : prev_(t_context) {
  t_context = this;
  HistoryConfig cfg;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const int t = static_cast<int>(alloc->device().type);
    if (!g_recording[t]) return;
    cfg = g_configs[t];
  }
  // Stacks of allocations for every context but None; of frees only with "all".
  const bool want = is_alloc ? cfg.context != Context::None : cfg.context == Context::All;
  if (want) frames_ = capture_stack(cfg.cpp);
}

CallContext::~CallContext() { t_context = prev_; }

void record(const CachingAllocator* alloc, Action action, uint64_t addr, int64_t size,
            StreamId stream, const MemoryStats& stats) {
  MemoryObserver obs = g_observer.load(std::memory_order_relaxed);
  if (obs != nullptr) {
    if (action == Action::Alloc)
      obs(alloc->device(), addr, size, stats.allocated_bytes, stats.reserved_bytes);
    else if (action == Action::FreeRequested)
      obs(alloc->device(), addr, -size, stats.allocated_bytes, stats.reserved_bytes);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  const int t = static_cast<int>(alloc->device().type);
  if (!g_recording[t]) return;
  const HistoryConfig& cfg = g_configs[t];
  Frames frames = t_context ? t_context->frames_ : nullptr;
  History& h = histories()[alloc];
  switch (action) {
    case Action::Alloc:
      if (frames) h.block_frames[addr] = frames;
      break;
    case Action::FreeCompleted:
      h.block_frames.erase(addr);
      break;
    case Action::SegmentAlloc:
      if (frames) h.segment_frames[addr] = frames;
      break;
    case Action::SegmentFree:
      h.segment_frames.erase(addr);
      break;
    default:
      break;
  }
  if (!cfg.trace) return;
  // "state": stacks describe the live blocks only, the trace entries carry none.
  Frames trace_frames = cfg.context == Context::State ? nullptr : frames;
  h.trace.push_back({action, addr, size, stream, now_us(), std::move(trace_frames)});
  while (h.trace.size() > cfg.max_entries) h.trace.pop_front();
}

void allocator_created(CachingAllocator* alloc) {
  std::lock_guard<std::mutex> lock(g_mutex);
  registry().push_back(alloc);
}

void allocator_destroyed(CachingAllocator* alloc) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), alloc), r.end());
  histories().erase(alloc);
}

std::vector<AllocatorHistory> snapshot(DeviceType type) {
  std::vector<CachingAllocator*> allocs;
  if (type == DeviceType::CPU) {
    allocs.push_back(&cpu_allocator());  // not the test allocators, which are CPU-typed too
  } else {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (CachingAllocator* a : registry())
      if (a->device().type == type) allocs.push_back(a);
  }
  std::vector<AllocatorHistory> out;
  for (CachingAllocator* a : allocs) {
    AllocatorHistory ah;
    ah.device = a->device();
    ah.segments = a->snapshot();  // takes the allocator's mutex: g_mutex is not held here
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& hs = histories();
    auto it = hs.find(a);
    if (it != hs.end()) {
      ah.trace.assign(it->second.trace.begin(), it->second.trace.end());
      ah.block_frames = it->second.block_frames;
      ah.segment_frames = it->second.segment_frames;
    }
    out.push_back(std::move(ah));
  }
  return out;
}

}  // namespace allocator_trace
}  // namespace ember
