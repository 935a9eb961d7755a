// Errors that CUDA kernels find in their inputs (an embedding index or a loss target out of
// range): the kernel reports the offending value into a slot, and the host raises the op's
// error with it.
//
// Two modes, one process-wide switch (ember._C_cuda._set_deferred_errors, off by default):
//   immediate: the op reads its slot back right after its launches (the host waits for the
//              stream: a sync point, as sync_debug mode reports it) and raises there.
//   deferred:  the slot is one of a ring per device; the op returns without waiting and the
//              error is raised at the next host wait for that stream or the device (a blocking
//              copy such as .item() / .cpu(), ember.cuda.synchronize, Stream.synchronize), with
//              the op's own message and kind, like a CUDA error that surfaces asynchronously,
//              but recoverable: nothing else is poisoned. A training step then never waits on
//              its embedding or loss. (An Event's wait resolves nothing: its stream is unknown.)
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace ember {
namespace cuda {
namespace checks {

// What a kernel writes (the first reporter wins: atomicCAS on flag); nn_common.cuh's ErrorSlot.
struct Slot {
  int32_t flag;
  int32_t pad;
  int64_t value;
};

// The op's error for a reported value.
struct Report {
  ErrorKind kind;
  std::string message;
};
using Describe = std::function<Report(int64_t value)>;

// A Report whose message is the arguments streamed, as EMBER_FAIL formats them.
template <class... Args>
Report report(ErrorKind kind, const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return Report{kind, os.str()};
}

bool deferred();
void set_deferred(bool on);

// One check over the launches an op makes on `stream` of `device`: slot() is the zeroed slot
// the kernels report into; done() after the launches raises at once (immediate mode) or
// registers the check for the next wait (deferred mode). An op that throws before done() simply
// drops its check.
class DeviceCheck {
 public:
  DeviceCheck(int device, cudaStream_t stream, Describe describe);
  DeviceCheck(const DeviceCheck&) = delete;
  DeviceCheck& operator=(const DeviceCheck&) = delete;
  Slot* slot() const { return slot_; }
  void done();

 private:
  int device_;
  cudaStream_t stream_;
  Describe describe_;
  Slot* slot_ = nullptr;
  Tensor immediate_;  // immediate mode: the slot in device memory
  uint64_t seq_ = 0;  // deferred mode: the ring position
};

// What the host waited for: one stream, the whole device (cudaDeviceSynchronize), or an event
// (its stream unknown: nothing is resolved).
enum class Wait { Stream, Device, Event };

// After the host waited on `device`: raises the first error that the deferred checks the wait
// completed reported (the lowest sequence number), and forgets those checks.
void after_wait(int device, Wait how, cudaStream_t stream = nullptr);

// Deferred checks not yet resolved by a wait on `device` (tests).
int64_t pending(int device);

}  // namespace checks
}  // namespace cuda
}  // namespace ember
