// Anomaly mode (see anomaly_mode.h).
#include "autograd/anomaly_mode.h"

#include <sstream>

#include "autograd/anomaly_stack_prefetch.h"
#include "autograd/autograd.h"

namespace ember {
namespace autograd {

namespace detail {
std::atomic<bool> g_anomaly_enabled{false};
}

namespace {
std::atomic<bool> g_check_nan{true};
std::atomic<StackCaptureFn> g_capture{nullptr};
std::atomic<WarnFn> g_warn{nullptr};
thread_local std::weak_ptr<Node> t_current_node;
thread_local const std::string* t_prefetched_stack = nullptr;
}  // namespace

bool anomaly_check_nan() { return g_check_nan.load(std::memory_order_relaxed); }

void set_anomaly_mode(bool enabled, bool check_nan) {
  g_check_nan.store(check_nan, std::memory_order_relaxed);
  detail::g_anomaly_enabled.store(enabled, std::memory_order_relaxed);
}

void set_anomaly_callbacks(StackCaptureFn capture, WarnFn warn) {
  g_capture.store(capture);
  g_warn.store(warn);
}

std::unique_ptr<AnomalyMetadata> capture_anomaly_metadata() {
  auto md = std::make_unique<AnomalyMetadata>();
  if (t_prefetched_stack)
    md->forward_stack = *t_prefetched_stack;
  else if (StackCaptureFn capture = g_capture.load())
    md->forward_stack = capture();
  md->parent = t_current_node;
  return md;
}

void report_anomaly(const Node& node) {
  WarnFn warn = g_warn.load();
  if (!warn) return;
  std::ostringstream os;
  os << "Error detected in " << node.name() << ". ";
  if (!node.anomaly || node.anomaly->forward_stack.empty()) {
    os << "No forward pass information available. Enable detect anomaly during forward pass for "
          "more information.";
  } else {
    os << "Traceback of forward call that caused the error:\n" << node.anomaly->forward_stack;
    // Nodes made by a backward pass (create_graph=True): show what induced each of them.
    std::shared_ptr<Node> parent = node.anomaly->parent.lock();
    for (int depth = 0; parent && depth < 64; ++depth) {
      os << "\n\nPrevious calculation was induced by " << parent->name() << ". ";
      if (!parent->anomaly || parent->anomaly->forward_stack.empty()) {
        os << "No forward pass information available.";
        break;
      }
      os << "Traceback of forward call that induced the previous calculation:\n"
         << parent->anomaly->forward_stack;
      parent = parent->anomaly->parent.lock();
    }
  }
  warn(os.str());
}

AnomalyStackPrefetch::AnomalyStackPrefetch() {
  if (!anomaly_mode_enabled()) return;
  if (StackCaptureFn capture = g_capture.load()) stack_ = capture();
  active_ = true;
  prev_ = t_prefetched_stack;
  t_prefetched_stack = &stack_;
}

AnomalyStackPrefetch::~AnomalyStackPrefetch() {
  if (active_) t_prefetched_stack = prev_;
}

AnomalyParentGuard::AnomalyParentGuard(const std::shared_ptr<Node>& node)
    : prev_(std::move(t_current_node)) {
  t_current_node = node;
}

AnomalyParentGuard::~AnomalyParentGuard() { t_current_node = std::move(prev_); }

}  // namespace autograd
}  // namespace ember
