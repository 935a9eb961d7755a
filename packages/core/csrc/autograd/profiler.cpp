#include "autograd/profiler.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <new>

#include "autograd/autograd.h"
#include "autograd/op_hooks.h"
#include "core/error.h"

namespace ember {
namespace profiler {

namespace detail {
std::atomic<bool> g_active{false};
bool& skip_next() {
  thread_local bool skip = false;
  return skip;
}
}  // namespace detail

namespace {

// One per thread, for the thread's life; registered with the running session the first time
// the thread records in it. The owning thread and stop() both touch it, under its mutex
// (uncontended but for stop()).
struct Buffer {
  std::mutex mutex;
  std::atomic<uint64_t> session{0};  // the session its data belongs to, 0: none
  ThreadEvents data;
  std::vector<int32_t> open;  // the stack of open ranges (indices into data.events)
};

std::mutex g_mutex;  // the session state and the registry below
uint64_t g_session = 0;
std::atomic<uint64_t> g_current{0};  // the running session, 0: none
Config g_config;
std::vector<std::shared_ptr<Buffer>> g_registry;
int64_t g_start_ns = 0, g_start_wall_us = 0;

int64_t this_tid() {
  thread_local int64_t tid = static_cast<int64_t>(syscall(SYS_gettid));
  return tid;
}

// This thread's buffer, registered with session `s`; null if `s` is no longer running.
Buffer* thread_buffer(uint64_t s) {
  thread_local std::shared_ptr<Buffer> buf;
  if (!buf) {
    buf = std::make_shared<Buffer>();
    buf->data.tid = this_tid();
    char name[64] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) name[0] = '\0';
    buf->data.thread_name = name;
  }
  if (buf->session.load(std::memory_order_relaxed) != s) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_current.load() != s) return nullptr;
    std::lock_guard<std::mutex> block(buf->mutex);
    std::string name = std::move(buf->data.thread_name);
    int64_t tid = buf->data.tid;
    buf->data = ThreadEvents();
    buf->data.tid = tid;
    buf->data.thread_name = std::move(name);
    buf->open.clear();
    buf->session.store(s);
    g_registry.push_back(buf);
  }
  return buf.get();
}

void memory_observer(Device device, uint64_t addr, int64_t bytes, int64_t allocated,
                     int64_t reserved) {
  uint64_t s = g_current.load(std::memory_order_relaxed);
  if (s == 0) return;
  Buffer* b = thread_buffer(s);
  if (!b) return;
  std::lock_guard<std::mutex> lock(b->mutex);
  if (b->session.load(std::memory_order_relaxed) != s) return;
  int32_t op = b->open.empty() ? -1 : b->open.back();
  b->data.memory.push_back({now_ns(), addr, bytes, allocated, reserved, device, op});
  if (op >= 0 && device.type == DeviceType::CPU) {  // the CPU Mem columns
    b->data.events[op].self_mem += bytes;
    b->data.events[op].total_mem += bytes;
  }
}

}  // namespace

bool running() { return g_current.load() != 0; }

namespace {
// A process forked while profiling (a DataLoader worker) does not profile: nobody would collect
// its events. Its copy of g_mutex may have been held by another thread at the fork: a new one.
void after_fork_in_child() {
  if (g_current.load() != 0) {
    g_current.store(0);
    detail::g_active.store(false);
    op_hooks::add(-1);
  }
  new (&g_mutex) std::mutex();
  new (&g_registry) std::vector<std::shared_ptr<Buffer>>();  // the parent's buffers: not ours
}
}  // namespace

void start(const Config& config) {
  static const int fork_handler = pthread_atfork(nullptr, nullptr, &after_fork_in_child);
  (void)fork_handler;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    EMBER_CHECK(g_current.load() == 0,
                "profiler: a profiler is already running (one ember.profiler.profile at a time)");
    g_config = config;
    g_registry.clear();
    g_start_ns = now_ns();
    g_start_wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    g_current.store(++g_session);
    if (config.device_activity)
      for (DeviceActivity* a : device_activities()) a->start();
  }
  if (config.profile_memory) allocator_trace::set_memory_observer(&memory_observer);
  detail::g_active.store(true);
  op_hooks::add(1);
}

Result stop() {
  Result r;
  std::vector<std::shared_ptr<Buffer>> buffers;
  Config config;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    EMBER_CHECK(g_current.load() != 0, "profiler: no profiler is running");
    detail::g_active.store(false);
    op_hooks::add(-1);
    g_current.store(0);
    buffers.swap(g_registry);
    config = g_config;
    r.start_ns = g_start_ns;
    r.start_wall_us = g_start_wall_us;
    if (config.device_activity)
      for (DeviceActivity* a : device_activities()) {
        auto evs = a->stop();
        r.device_events.insert(r.device_events.end(), evs.begin(), evs.end());
      }
  }
  if (config.profile_memory) allocator_trace::set_memory_observer(nullptr);
  r.stop_ns = now_ns();
  for (auto& b : buffers) {
    std::lock_guard<std::mutex> lock(b->mutex);
    b->session.store(0);
    for (int32_t i : b->open) b->data.events[i].end_ns = r.stop_ns;  // still open: ends now
    b->open.clear();
    r.threads.push_back(std::move(b->data));
    b->data = ThreadEvents();
    b->data.tid = r.threads.back().tid;
    b->data.thread_name = r.threads.back().thread_name;
  }
  return r;
}

void Range::begin_op(const char* name, std::initializer_list<const Tensor*> tensors,
                     std::initializer_list<const std::vector<Tensor>*> lists) {
  uint64_t s = g_current.load(std::memory_order_relaxed);
  if (s == 0) return;
  Buffer* b = thread_buffer(s);
  if (!b) return;
  const bool outermost = b->open.empty();
  allocator_trace::Frames stack;
  if (g_config.with_stack && outermost) stack = allocator_trace::capture_stack(false);
  seq_start_ = autograd::grad_enabled() ? static_cast<int64_t>(peek_sequence_nr()) : -1;
  std::lock_guard<std::mutex> lock(b->mutex);
  if (b->session.load(std::memory_order_relaxed) != s) return;
  ThreadEvents& d = b->data;
  Event e{name,
          0,
          Kind::Op,
          0,
          0,
          b->open.empty() ? -1 : b->open.back(),
          -1,
          0,
          0,
          0,
          static_cast<uint32_t>(d.inputs.size()),
          0,
          -1};
  if (g_config.record_shapes) {
    auto add = [&](const Tensor* t) {
      if (t == nullptr || !*t) return;
      const auto& sizes = (*t)->sizes();
      d.inputs.push_back({static_cast<uint32_t>(d.dims.size()), static_cast<uint8_t>(sizes.size()),
                          static_cast<int8_t>((*t)->dtype())});
      d.dims.insert(d.dims.end(), sizes.begin(), sizes.end());
    };
    for (const Tensor* t : tensors) add(t);
    for (const auto* l : lists)
      for (const Tensor& t : *l) add(&t);
    e.inputs_count = static_cast<uint32_t>(d.inputs.size()) - e.inputs_begin;
  }
  if (stack) {
    e.stack = static_cast<int32_t>(d.stacks.size());
    d.stacks.push_back(std::move(stack));
  } else if (e.parent >= 0) {
    e.stack = d.events[e.parent].stack;  // the same Python stack as the op it runs inside
  }
  index_ = static_cast<int32_t>(d.events.size());
  d.events.push_back(e);
  b->open.push_back(index_);
  buffer_ = b;
  session_ = s;
  d.events[index_].start_ns = now_ns();  // last: the bookkeeping above is not the op's time
}

void Range::begin(std::string name, Kind kind, int64_t seq_nr) {
  uint64_t s = g_current.load(std::memory_order_relaxed);
  if (s == 0) return;
  Buffer* b = thread_buffer(s);
  if (!b) return;
  allocator_trace::Frames stack;
  if (g_config.with_stack && b->open.empty() && kind == Kind::UserRange)
    stack = allocator_trace::capture_stack(false);
  std::lock_guard<std::mutex> lock(b->mutex);
  if (b->session.load(std::memory_order_relaxed) != s) return;
  ThreadEvents& d = b->data;
  Event e{nullptr, static_cast<uint32_t>(d.names.size()),
          kind,    0,
          0,       b->open.empty() ? -1 : b->open.back(),
          seq_nr,  0,
          0,       0,
          0,       0,
          -1};
  d.names.push_back(std::move(name));
  if (stack) {
    e.stack = static_cast<int32_t>(d.stacks.size());
    d.stacks.push_back(std::move(stack));
  } else if (e.parent >= 0) {
    e.stack = d.events[e.parent].stack;
  }
  index_ = static_cast<int32_t>(d.events.size());
  d.events.push_back(e);
  b->open.push_back(index_);
  buffer_ = b;
  session_ = s;
  seq_start_ = -1;
  d.events[index_].start_ns = now_ns();
}

void Range::end() {
  if (!buffer_) return;
  const int64_t t = now_ns();
  auto* b = static_cast<Buffer*>(buffer_);
  buffer_ = nullptr;
  std::lock_guard<std::mutex> lock(b->mutex);
  if (b->session.load(std::memory_order_relaxed) != session_) return;  // stopped meanwhile
  auto& events = b->data.events;
  Event& e = events[index_];
  e.end_ns = t;
  // An op that created an autograd node carries the node's sequence number: the counter
  // moved while it ran, and its own node (made before the edges' AccumulateGrad nodes) took
  // the number it had when the op began.
  if (seq_start_ >= 0 && static_cast<int64_t>(peek_sequence_nr()) > seq_start_)
    e.seq_nr = seq_start_;
  if (!b->open.empty() && b->open.back() == index_) {
    b->open.pop_back();
  } else {  // closed out of order (a record_function exited late): take it out where it is
    for (size_t i = 0; i < b->open.size(); ++i)
      if (b->open[i] == index_) {
        b->open.erase(b->open.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
  }
  if (e.parent >= 0) {
    events[e.parent].children_ns += e.end_ns - e.start_ns;
    events[e.parent].total_mem += e.total_mem;
  }
}

}  // namespace profiler
}  // namespace ember
