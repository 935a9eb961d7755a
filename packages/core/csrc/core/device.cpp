#include "core/device.h"

#include <atomic>
#include <mutex>

#include "core/backend.h"
#include "core/error.h"

namespace ember {

namespace {
std::mutex g_name_mutex;
std::string g_privateuse1_name = "privateuseone";
bool g_privateuse1_renamed = false;
// Thread-local, as PyTorch's device context: `with ember.device("meta"):` in one thread leaves
// the factories of the others alone.
thread_local Device t_default_device = cpu_device();
}  // namespace

std::string device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    case DeviceType::Meta:
      return "meta";
    case DeviceType::PrivateUse1: {
      std::lock_guard<std::mutex> g(g_name_mutex);
      return g_privateuse1_name;
    }
  }
  return "unknown";
}

void rename_privateuse1_backend(const std::string& name) {
  std::lock_guard<std::mutex> g(g_name_mutex);
  if (name == g_privateuse1_name) return;  // no change: allowed any time
  EMBER_CHECK(!g_privateuse1_renamed, "rename_privateuse1_backend: the backend is already named '",
              g_privateuse1_name, "'; it can be renamed only once");
  EMBER_CHECK(!name.empty() && name != "cpu" && name != "cuda" && name != "meta" &&
                  name.find(':') == std::string::npos,
              "rename_privateuse1_backend: invalid backend name '", name, "'");
  g_privateuse1_name = name;
  g_privateuse1_renamed = true;
}

namespace {
const DeviceHooks* g_hooks[kNumDeviceTypes] = {};
std::atomic<BackendLoader> g_loader{nullptr};
std::atomic<bool> g_loader_ran[kNumDeviceTypes] = {};
}  // namespace

void set_backend_loader(BackendLoader loader) { g_loader.store(loader); }

bool load_backend_once(DeviceType type) {
  BackendLoader loader = g_loader.load();
  if (loader == nullptr || g_loader_ran[static_cast<int>(type)].exchange(true)) return false;
  loader(type);
  return true;
}

void register_device_hooks(DeviceType type, const DeviceHooks* hooks) {
  g_hooks[static_cast<int>(type)] = hooks;
}

bool has_device_hooks(DeviceType type) { return g_hooks[static_cast<int>(type)] != nullptr; }

const DeviceHooks& device_hooks(DeviceType type) {
  const DeviceHooks* h = g_hooks[static_cast<int>(type)];
  if (h == nullptr && load_backend_once(type)) h = g_hooks[static_cast<int>(type)];
  EMBER_CHECK(h != nullptr, "device '", device_type_name(type),
              "' has no backend registered (for cuda: ember was built without EMBER_CUDA=ON or "
              "no GPU is present; for a PrivateUse1 backend: import its extension module first)");
  return *h;
}

Device default_device() { return t_default_device; }
void set_default_device(Device d) { t_default_device = d; }

}  // namespace ember
