// Tracing the caching allocators (core/allocator.h): the memory history that
// ember.memory._record_memory_history keeps (the snapshot pytorch.org/memory_viz reads), and the
// profiler's memory events (ember.profiler.profile(profile_memory=True)).
//
// The allocator calls in only while tracing is on: each of its calls starts with one relaxed
// load of on(). A CallContext is made before the allocator takes its mutex (it may capture the
// caller's stack, which can take the GIL); record() runs under the mutex and appends to the
// allocator's history.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace ember {
namespace allocator_trace {

// One frame of a captured stack: a Python frame (file, function, line) or a C++ one (shared
// object, symbol, line 0).
struct Frame {
  std::string filename;
  std::string name;
  int line = 0;
};
using Frames = std::shared_ptr<const std::vector<Frame>>;

// Captures the calling thread's Python stack, innermost frame first; null when there is none to
// capture (no Python, or the thread does not hold the GIL). Installed by the Python module.
using PythonStackCapture = Frames (*)();
void set_python_stack_capture(PythonStackCapture fn);
// The Python stack (when a capture is installed), then, with `cpp`, the C++ call stack.
Frames capture_stack(bool cpp);

enum class Action : uint8_t { Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, Oom };
const char* action_name(Action a);

struct TraceEntry {
  Action action;
  uint64_t addr;
  int64_t size;
  StreamId stream;
  int64_t time_us;  // microseconds since the epoch (system clock)
  Frames frames;    // null: none recorded
};

// What the history records for a device type (ember.memory._record_memory_history's arguments).
enum class Context : uint8_t { None, State, Alloc, All };
struct HistoryConfig {
  bool enabled = false;
  bool trace = true;               // keep trace entries ("all"), not only the blocks' state
  Context context = Context::All;  // where stacks are captured
  bool cpp = false;                // C++ frames too (stacks="all")
  size_t max_entries = SIZE_MAX;   // the trace keeps the newest entries
};
// Starts, changes or (enabled=false) stops recording for every allocator of `type`; what was
// recorded is kept (for a later snapshot) unless `clear`.
void record_memory_history(DeviceType type, const HistoryConfig& config, bool clear);

// Sees every allocation (bytes > 0) and free (bytes < 0) of every caching allocator, with the
// allocator's totals after it. Called under the allocator's mutex: it must not allocate through
// it. One observer at a time (the profiler); null removes it.
using MemoryObserver = void (*)(Device device, uint64_t addr, int64_t bytes, int64_t allocated,
                                int64_t reserved);
void set_memory_observer(MemoryObserver fn);

namespace detail {
extern std::atomic<int> g_on;  // history recording on some device type, or an observer installed
}
inline bool on() { return detail::g_on.load(std::memory_order_relaxed) != 0; }

// Made by an allocator call before it locks: the stack of the call when the history wants one.
// record() inside the call uses it.
class CallContext {
 public:
  CallContext(const CachingAllocator* alloc, bool is_alloc);
  ~CallContext();
  CallContext(const CallContext&) = delete;
  CallContext& operator=(const CallContext&) = delete;

 private:
  CallContext* prev_;
  friend void record(const CachingAllocator*, Action, uint64_t, int64_t, StreamId,
                     const MemoryStats&);
  Frames frames_;
};

// An allocator event (under the allocator's mutex; only while on()).
void record(const CachingAllocator* alloc, Action action, uint64_t addr, int64_t size,
            StreamId stream, const MemoryStats& stats);

// Every CachingAllocator registers itself (for the snapshots of its device type).
void allocator_created(CachingAllocator* alloc);
void allocator_destroyed(CachingAllocator* alloc);

// The history of one allocator: its segments now, its trace, and the stacks of its live blocks
// and segments by address.
struct AllocatorHistory {
  Device device;
  std::vector<SegmentInfo> segments;
  std::vector<TraceEntry> trace;
  std::unordered_map<uint64_t, Frames> block_frames;
  std::unordered_map<uint64_t, Frames> segment_frames;
};
// The allocators of `type`: for the CPU, the process-wide one (cpu_allocator()).
std::vector<AllocatorHistory> snapshot(DeviceType type);

}  // namespace allocator_trace
}  // namespace ember
