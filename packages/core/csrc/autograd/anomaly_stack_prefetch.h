// AnomalyStackPrefetch: the Python stack of anomaly mode (anomaly_mode.h), captured before a
// mutex is taken, for the nodes created under it.
#pragma once
#include <string>

namespace ember {
namespace autograd {

// Captures the Python stack now, for the nodes this thread creates while the guard lives (their
// constructors use it instead of capturing). Code that creates nodes under a mutex that other
// threads take while holding the GIL uses it: capturing under the mutex would wait for the GIL
// (Python releases it inside the capture) while the GIL's holder waits for the mutex -- a
// deadlock. Off anomaly mode it does nothing.
class AnomalyStackPrefetch {
 public:
  AnomalyStackPrefetch();
  ~AnomalyStackPrefetch();
  AnomalyStackPrefetch(const AnomalyStackPrefetch&) = delete;
  AnomalyStackPrefetch& operator=(const AnomalyStackPrefetch&) = delete;

 private:
  std::string stack_;
  bool active_ = false;
  const std::string* prev_ = nullptr;
};

}  // namespace autograd
}  // namespace ember
