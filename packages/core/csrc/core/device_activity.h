// Kernel timing for ember.profiler from a device backend: the backend (an extension such as
// ember._C_cuda, which sits beside the kernels and may not include the autograd layer's
// profiler.h) registers a DeviceActivity here, and the profiler (autograd/profiler.cpp) starts
// and stops every registered one with a profile that asks for device activity.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace ember {
namespace profiler {

// One kernel, copy or memset a device ran while the profile was on.
struct DeviceEvent {
  std::string name;
  Device device;
  int64_t stream;
  int64_t start_ns, end_ns;  // on the same steady clock as the host events (now_ns)
  int64_t correlation_op;    // the host op that launched it (-1: unknown)
};

class DeviceActivity {
 public:
  virtual ~DeviceActivity() = default;
  virtual void start() = 0;
  virtual std::vector<DeviceEvent> stop() = 0;
};

// Registers (or, with nullptr, removes) the activity of a device type; the caller keeps it
// alive until it is removed.
void register_device_activity(DeviceType type, DeviceActivity* activity);
bool has_device_activity(DeviceType type);
// The registered activities, in device-type order.
std::vector<DeviceActivity*> device_activities();

// The profiler's clock: steady, in nanoseconds.
int64_t now_ns();

}  // namespace profiler
}  // namespace ember
