// The registry of device activities (core/device_activity.h) and the profiler's clock.
#include "core/device_activity.h"

#include <chrono>
#include <mutex>

namespace ember {
namespace profiler {
namespace {
std::mutex g_mutex;
DeviceActivity* g_activity[kNumDeviceTypes] = {};
}  // namespace

void register_device_activity(DeviceType type, DeviceActivity* activity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_activity[static_cast<int>(type)] = activity;
}

bool has_device_activity(DeviceType type) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_activity[static_cast<int>(type)] != nullptr;
}

std::vector<DeviceActivity*> device_activities() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<DeviceActivity*> out;
  for (DeviceActivity* a : g_activity)
    if (a) out.push_back(a);
  return out;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace profiler
}  // namespace ember
