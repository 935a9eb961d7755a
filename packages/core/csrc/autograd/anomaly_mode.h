// Anomaly mode (ember.autograd.detect_anomaly): while it is on, every graph node records the
// Python stack where its forward op ran, and the engine checks what each node's backward
// returns for NaN; a failing node is reported together with that stack (and the stacks of the
// nodes whose backward created it, under create_graph=True). Off, it costs one flag check per
// node created and per node run.
#pragma once
#include <atomic>
#include <memory>
#include <string>

namespace ember {
namespace autograd {
class Node;

namespace detail {
extern std::atomic<bool> g_anomaly_enabled;
}
inline bool anomaly_mode_enabled() {
  return detail::g_anomaly_enabled.load(std::memory_order_relaxed);
}
bool anomaly_check_nan();
// Process-wide, as in PyTorch.
void set_anomaly_mode(bool enabled, bool check_nan);

struct AnomalyMetadata {
  std::string forward_stack;   // empty when it could not be captured
  std::weak_ptr<Node> parent;  // the node whose backward created this one (create_graph)
};

// Filled in by the Python layer: the current Python stack as text, and a way to warn.
using StackCaptureFn = std::string (*)();
using WarnFn = void (*)(const std::string& message);
void set_anomaly_callbacks(StackCaptureFn capture, WarnFn warn);

// Called by Node's constructor while anomaly mode is on.
std::unique_ptr<AnomalyMetadata> capture_anomaly_metadata();
// Warns where the forward op of `node` ran, and where its parents' did.
void report_anomaly(const Node& node);

// Marks the node the engine is running on this thread, so that nodes its backward creates
// (create_graph=True) can name it as their parent.
class AnomalyParentGuard {
 public:
  explicit AnomalyParentGuard(const std::shared_ptr<Node>& node);
  ~AnomalyParentGuard();
  AnomalyParentGuard(const AnomalyParentGuard&) = delete;
  AnomalyParentGuard& operator=(const AnomalyParentGuard&) = delete;

 private:
  std::weak_ptr<Node> prev_;
};

}  // namespace autograd
}  // namespace ember
