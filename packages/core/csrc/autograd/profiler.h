// The profiler behind ember.profiler: while it runs, every op (from the generated ops::
// wrappers), every autograd node the engine runs and every record_function range is recorded on
// its thread with a steady clock, in per-thread buffers; stop() hands them all over at once.
//
// Each generated `ops::<name>` wrapper checks, behind the one relaxed load of op_hooks::any()
// that it pays anyway (autograd/op_hooks.h),
//     if (profiler::active() && profiler::enter()) return <name>_profiled(...);
// `<name>_profiled` (out of line, cold) opens an OpRange and calls `ops::<name>` again, whose
// enter() then says no (once), so the op runs; ops it calls inside go through their own
// wrappers and nest under it (a per-thread stack of open ranges).
#pragma once
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/allocator_trace.h"
#include "core/device_activity.h"
#include "core/tensor.h"

namespace ember {
namespace profiler {

namespace detail {
extern std::atomic<bool> g_active;
bool& skip_next();  // this thread: the next wrapper check is <name>_profiled's own call
}  // namespace detail

inline bool active() { return detail::g_active.load(std::memory_order_relaxed); }
inline bool enter() {
  bool& skip = detail::skip_next();
  if (skip) {
    skip = false;
    return false;
  }
  return true;
}

struct Config {
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  bool device_activity = false;  // ProfilerActivity.CUDA: ask the registered DeviceActivity
};

enum class Kind : uint8_t { Op = 0, UserRange = 1, Backward = 2 };

struct InputInfo {
  uint32_t dims_begin;  // into ThreadEvents::dims
  uint8_t ndim;
  int8_t dtype;  // ScalarType, -1: not a tensor
};

struct Event {
  const char* name;  // a string literal (ops), or null: names[name_index]
  uint32_t name_index;
  Kind kind;
  int64_t start_ns, end_ns;     // steady clock
  int32_t parent;               // index of the enclosing event on this thread, -1: none
  int64_t seq_nr;               // autograd sequence number linking forward op and backward node
  int64_t children_ns;          // time spent in the events directly inside it
  int64_t self_mem, total_mem;  // bytes allocated minus freed in it (profile_memory)
  uint32_t inputs_begin, inputs_count;  // into ThreadEvents::inputs (record_shapes)
  int32_t stack;                        // into ThreadEvents::stacks, -1: none (with_stack)
};

struct MemoryEvent {
  int64_t time_ns;
  uint64_t addr;
  int64_t bytes;  // > 0 allocated, < 0 freed
  int64_t allocated, reserved;
  Device device;
  int32_t op;  // the event open on the thread then, -1: none
};

// Everything one thread recorded.
struct ThreadEvents {
  int64_t tid;
  std::string thread_name;
  std::vector<Event> events;
  std::vector<std::string> names;
  std::vector<InputInfo> inputs;
  std::vector<int64_t> dims;
  std::vector<allocator_trace::Frames> stacks;
  std::vector<MemoryEvent> memory;
};

// Kernel timing on a device comes from its backend, which registers a DeviceActivity
// (core/device_activity.h: DeviceEvent, DeviceActivity, register_device_activity, now_ns);
// start() and stop() start and stop the registered ones when the config asks for device
// activity (the CUDA extension's is CUPTI's, cuda/cupti_activity.cpp).

struct Result {
  std::vector<ThreadEvents> threads;
  std::vector<DeviceEvent> device_events;
  int64_t start_ns, stop_ns;  // steady clock
  int64_t start_wall_us;      // the wall clock (µs since the epoch) at start_ns
};

// Starts recording (raises if a profiler is already running).
void start(const Config& config);
// Stops and hands over what every thread recorded; ranges still open end now.
Result stop();
bool running();

// A recorded range on the calling thread (does nothing unless the profiler runs).
class Range {
 public:
  Range() = default;
  Range(Range&& o) noexcept { *this = std::move(o); }
  Range& operator=(Range&& o) noexcept {
    std::swap(buffer_, o.buffer_);
    std::swap(session_, o.session_);
    std::swap(index_, o.index_);
    std::swap(seq_start_, o.seq_start_);
    return *this;
  }
  ~Range() { end(); }
  // An op: a literal name; its tensor arguments' shapes when record_shapes.
  void begin_op(const char* name, std::initializer_list<const Tensor*> tensors,
                std::initializer_list<const std::vector<Tensor>*> lists);
  void begin(std::string name, Kind kind, int64_t seq_nr = -1);
  void end();
  bool open() const { return buffer_ != nullptr; }

 private:
  void* buffer_ = nullptr;
  uint64_t session_ = 0;
  int32_t index_ = -1;
  int64_t seq_start_ = -1;  // ops: the autograd sequence counter when it began
};

// The range of one generated op (see the top of this file).
class OpRange {
 public:
  OpRange(const char* name, std::initializer_list<const Tensor*> tensors,
          std::initializer_list<const std::vector<Tensor>*> lists = {}) {
    range_.begin_op(name, tensors, lists);
    detail::skip_next() = true;
  }
  ~OpRange() { detail::skip_next() = false; }

 private:
  Range range_;
};

// The next autograd sequence number (autograd.cpp): a forward op that creates a node records it.
uint64_t peek_sequence_nr();

}  // namespace profiler
}  // namespace ember
